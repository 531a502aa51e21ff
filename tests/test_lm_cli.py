"""``textdp rewrite --mechanism dp-*`` end to end on tiny models, the ledger across runs, ``textdp ledger show``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("torch")

from record_schema import validate_record

from textdp.accounting.ledger import PrivacyLedger
from textdp.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
DOCS = [{"id": "d1", "text": "The cat sat on the mat. He said that the meeting will start at noon."},
        {"id": "d2", "text": "we met at the station in the morning ."}]
KIND = {"dp-prompt": "causal", "dp-paraphrase": "seq2seq", "dp-mlm": "masked", "dp-bart": "seq2seq"}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    root = tmp_path_factory.mktemp("cli")
    for kind in ("causal", "seq2seq", "masked"):
        tiny.build(root / kind, kind)
    (root / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (root / "public.txt").write_text("the weather was cold and the sky was grey .\nplease send the report .\n")
    (root / "private").mkdir()
    return root


def _rewrite(work, mech, out, *extra):
    clip = ["--clip=-0.2,0.1"] if mech == "dp-bart" else ["--clip=-2,2"]
    return runner.invoke(app, ["rewrite", str(work / KIND[mech]), str(work / "in.jsonl"), "--mechanism", mech,
                               "-e", "2", "-o", str(work / out), "--max-new-tokens", "4", "--seed", "1", "-q",
                               *clip, *extra])


@pytest.mark.parametrize("mech", list(KIND))
def test_each_mechanism_writes_records_with_every_bound_and_the_adjacency(work, mech):
    res = _rewrite(work, mech, f"{mech}.jsonl", "--unit", "sentence", "--private-report",
                   str(work / "private" / f"{mech}.json"))
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in (work / f"{mech}.jsonl").read_text().splitlines()]
    assert len(recs) == (2 if mech == "dp-prompt" else 3)
    g = recs[0]["guarantee"]
    assert {"per_token", "per_sentence", "per_document", "adjacency", "bounds"} <= set(g["parameters"])
    assert g["parameters"]["bounds"]["procedure"] == "fixed" and g["mechanism"] == mech and g["not_covered"]
    for r in recs:
        validate_record(r)
    settings = json.loads((work / f"{mech}.jsonl.settings.json").read_text())
    text = json.dumps(recs) + json.dumps(settings)
    assert "meeting will start" not in text and str(work) not in text  # no input text, no local path
    assert settings["model"]["weights_sha256"] and settings["seeded"] is True and "seed" not in settings["settings"]
    assert json.loads((work / "private" / f"{mech}.json").read_text())["documents"][0]["id"] == "d1"


def test_public_quantile_bounds_are_recorded(work):
    res = runner.invoke(app, ["rewrite", str(work / "masked"), str(work / "in.jsonl"), "--mechanism", "dp-mlm", "-e",
                              "2", "-o", str(work / "q.jsonl"), "--clip-public", str(work / "public.txt"), "-q"])
    assert res.exit_code == 0, res.output
    b = json.loads((work / "q.jsonl").read_text().splitlines()[0])["guarantee"]["parameters"]["bounds"]
    assert b["procedure"] == "public-step-max" and b["low"] < b["high"] and "public text" in b["source"]
    res = runner.invoke(app, ["rewrite", str(work / "masked"), str(work / "in.jsonl"), "--mechanism", "dp-mlm", "-e",
                              "2", "-o", str(work / "q2.jsonl"), "--clip-public", str(work / "public.txt"), "-q",
                              "--clip-rule", "all-values", "--clip-quantiles", "0.05,0.95"])
    assert res.exit_code == 0, res.output
    b2 = json.loads((work / "q2.jsonl").read_text().splitlines()[0])["guarantee"]["parameters"]["bounds"]
    assert b2["procedure"] == "public-quantiles" and "0.05 and 0.95" in b2["source"] and b2["high"] < b["high"]


def test_public_text_is_one_text_per_line(work):
    import hashlib

    from textdp.cli.rewrite_lm import public_texts

    texts, sha = public_texts(work / "public.txt")  # read once, checked; its SHA-256 goes in the clipping source
    assert texts == ["the weather was cold and the sky was grey .", "please send the report ."]
    assert sha == hashlib.sha256((work / "public.txt").read_bytes()).hexdigest()


def test_prompt_options_prior_and_candidate_set_are_recorded(work):
    (work / "prompt.txt").write_text("Rewrite: {document}\nRewritten :\n")
    res = _rewrite(work, "dp-prompt", "p.jsonl", "--prompt-file", str(work / "prompt.txt"), "--prior",
                   "--public-top-k", "5")
    assert res.exit_code == 0, res.output
    settings = json.loads((work / "p.jsonl.settings.json").read_text())
    assert settings["settings"]["prompt"] == "Rewrite: {document}\nRewritten :"
    assert settings["settings"]["prompt_format"] == "plain"  # the tiny tokenizer has no chat template
    g = json.loads((work / "p.jsonl").read_text().splitlines()[0])["guarantee"]
    assert g["parameters"]["prior"] is True and g["parameters"]["public_top_k"] == 5
    assert "in-vocabulary" not in g["not_covered"]
    for extra, msg in ((["--prompt", "no slot"], "must contain {document}"),
                       (["--prompt-format", "chat"], "no chat template"),
                       (["--public-top-k", "5"], "needs prior=True"),
                       (["--prompt", "a {document}", "--prompt-file", str(work / "prompt.txt")], "give the prompt once")):
        bad = _rewrite(work, "dp-prompt", "bad.jsonl", *extra)
        assert bad.exit_code == 2 and msg in bad.output and bad.output.count("error:") == 1, bad.output
    bad = _rewrite(work, "dp-mlm", "bad.jsonl", "--prior")
    assert bad.exit_code == 2 and "--prior applies to dp-prompt" in bad.output


def test_ledger_refuses_an_over_budget_release_across_runs(work):
    led = work / "private" / "ledger.jsonl"
    first = _rewrite(work, "dp-prompt", "l1.jsonl", "--ledger", str(led), "--budget", "10")
    assert first.exit_code == 0, first.output  # 4 tokens x 2 = 8 per document
    second = _rewrite(work, "dp-prompt", "l2.jsonl", "--ledger", str(led), "--budget", "10")
    assert second.exit_code == 2 and "budget 10 would be exceeded for 2 document(s)" in second.output
    assert not (work / "l2.jsonl").exists()
    shown = runner.invoke(app, ["ledger", "show", str(led), "--json"])
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["documents"]["d1"] == {"releases": 1, "epsilon": 8.0, "delta": 0.0,
                                                            "tight_epsilon": 8.0, "method": "pure"}
    table = runner.invoke(app, ["ledger", "show", str(led)])
    assert "hash chain verified" in table.stdout and "d2" in table.stdout
    led.write_text(led.read_text().replace('"epsilon": 8.0', '"epsilon": 1.0', 1))
    bad = runner.invoke(app, ["ledger", "show", str(led)])
    assert bad.exit_code == 2 and "was modified" in bad.output


@pytest.mark.parametrize("args,message", [
    (["--top-k", "50"], "top-k/top-p sampling is refused"),
    (["--top-p", "0.9"], "top-k/top-p sampling is refused"),
    (["--budget", "3"], "--budget needs --ledger"),
    (["--ledger", "LEDGER_BESIDE"], "keep it out of the output's folder"),
    (["--engine", "dask"], "runs in this process"),
])
def test_refusals_are_one_line_exit_2(work, args, message):
    args = [str(work / "beside.jsonl") if a == "LEDGER_BESIDE" else a for a in args]
    res = _rewrite(work, "dp-prompt", "r.jsonl", *args)
    assert res.exit_code == 2 and message in res.output and res.output.count("error:") == 1


def test_wrong_kind_and_missing_bounds(work):
    res = runner.invoke(app, ["rewrite", str(work / "causal"), str(work / "in.jsonl"), "--mechanism", "dp-mlm", "-e",
                              "2", "-o", str(work / "w.jsonl"), "--clip=-1,1"])
    assert res.exit_code == 2 and "a causal language model" in res.output and "needs a masked" in res.output
    res = runner.invoke(app, ["rewrite", str(work / "masked"), str(work / "in.jsonl"), "--mechanism", "dp-mlm", "-e",
                              "2", "-o", str(work / "w.jsonl")])
    assert res.exit_code == 2 and "choose the public clipping bounds" in res.output


def test_er_ae_family_charges_the_same_ledger_and_refuses_dp_only_options(work):
    toy = [f"The {a} ran to the {p} and slept there." for a in ("cat", "dog", "fox", "cow") for p in ("river", "barn")]
    corpus = work / "train.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(toy)))
    res = runner.invoke(app, ["train-rewriter", str(corpus), "--output", str(work / "erae"), "--public",
                              "--vocab-size", "30", "--encoder-hidden", "8", "--latent", "8", "--decoder-hidden", "8",
                              "--max-length", "12", "--batch-size", "8", "--epochs", "1", "--seed", "1", "--threads",
                              "1", "-q"])
    assert res.exit_code == 0, res.output
    led = work / "private" / "erae-ledger.jsonl"
    args = ["rewrite", str(work / "erae"), str(work / "in.jsonl"), "--mechanism", "er-ae", "-e", "1", "--seed", "1",
            "-q", "--ledger", str(led)]
    ok = runner.invoke(app, [*args, "-o", str(work / "e1.jsonl")])
    assert ok.exit_code == 0, ok.output
    recs = {r["id"]: r for r in map(json.loads, (work / "e1.jsonl").read_text().splitlines())}
    spent = {e.document: e.epsilon for e in PrivacyLedger(led).events()}
    assert spent == {"d1": recs["d1"]["total"]["epsilon"], "d2": recs["d2"]["total"]["epsilon"]}
    assert spent["d1"] == pytest.approx(2 * spent["d2"])  # 2 sentences and 1, at the per-sentence bound
    budget = str(3 * spent["d2"])  # d1 would reach 4x, d2 2x
    again = runner.invoke(app, [*args, "-o", str(work / "e2.jsonl"), "--budget", budget])
    assert again.exit_code == 2 and "would be exceeded for 1 document(s) (first: 'd1'" in again.output
    for extra, msg in ((["--clip=-1,1"], "--clip applies to the dp-* mechanisms"), (["--top-k", "5"], "refused")):
        bad = runner.invoke(app, [*args, "-o", str(work / "e3.jsonl"), *extra])
        assert bad.exit_code == 2 and msg in bad.output


def test_the_dp_path_writes_through_the_release_driver(work):
    """``rewrite --mechanism dp-*`` runs :func:`textdp.release.release`: the settings file has the one layout of every
    command (command, engine, documents written, format), the per-sentence records are the driver's (``--unit
    sentence``), the ledger is charged per document id, and a budget that is no number > 0 is refused first."""
    led = work / "private" / "driver-ledger.jsonl"
    res = _rewrite(work, "dp-mlm", "driver.jsonl", "--unit", "sentence", "--ledger", str(led), "--budget", "1000")
    assert res.exit_code == 0, res.output
    settings = json.loads((work / "driver.jsonl.settings.json").read_text())
    assert (settings["command"], settings["engine"], settings["documents"], settings["format"]) == \
        ("rewrite", "single", 3, "jsonl")
    assert settings["record_unit"] == "sentence" and settings["settings"]["mechanism"] == "dp-mlm"
    from textdp.accounting.ledger import PrivacyLedger

    assert set(PrivacyLedger(led).spent()) == {"d1", "d2"}  # charged per document, not per sentence record
    bad = _rewrite(work, "dp-mlm", "bad.jsonl", "--ledger", str(led), "--budget", "-1")
    assert bad.exit_code == 2 and "--budget must be a finite number > 0" in bad.output
    assert not (work / "bad.jsonl").exists()


def test_no_lm_rewrite_prints_a_warning(work):
    """Issue 27: a user's LM rewrite prints its summary and nothing else (no deprecation notice from transformers,
    no GenerationMixin or logger warning). A fresh interpreter with Python's default warning filters, as a user
    has them, and its real stderr: transformers' logger writes to the stream it found at import, which an
    in-process runner does not capture."""
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from textdp.cli import app\n"
        "for mech, kind in json.loads(sys.argv[1]).items():\n"
        "    clip = '--clip=-0.2,0.1' if mech == 'dp-bart' else '--clip=-2,2'\n"
        "    try:\n"
        "        app(['rewrite', kind, 'in.jsonl', '--mechanism', mech, '-e', '2', '-o', f'quiet-{mech}.jsonl',\n"
        "             '--force', '--max-new-tokens', '4', clip], standalone_mode=False)\n"
        "    except SystemExit as exc:\n"
        "        if exc.code:\n"
        "            raise\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(KIND)], cwd=work, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == len(KIND) and all(line.startswith("wrote 2 records to quiet-") for line in lines), lines
