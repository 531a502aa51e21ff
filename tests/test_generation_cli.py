"""``textdp train-rewriter`` and ``textdp rewrite``: a tiny run, resume, records, and one-line errors."""

from __future__ import annotations

import json
import sys

import pytest
from record_schema import compact, validate_guarantee, validate_record
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from textdp.cli import app
from textdp.generation.training import TrainingSettings, train_rewriter
from textdp.generation.vocab import segment_text

ANIMALS = ["cat", "dog", "horse", "bird", "fox", "cow", "sheep"]
PLACES = ["garden", "river", "house", "field", "forest", "barn"]
TOY = [f"The {a} ran to the {p} and slept there." for a in ANIMALS for p in PLACES] + [
    f"A {a} saw a {b} near the {p}!" for a in ANIMALS for b in ANIMALS[:3] for p in PLACES[:2]]
TINY_FLAGS = ["--vocab-size", "40", "--encoder-hidden", "8", "--latent", "8", "--decoder-hidden", "16",
              "--max-length", "12", "--batch-size", "16", "--epochs", "2", "--seed", "1", "--threads", "1", "-q"]

runner = CliRunner()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "train.jsonl"
    p.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TOY)))
    return p


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("m") / "model"
    res = runner.invoke(app, ["train-rewriter", str(corpus), "--output", str(out), "--public", *TINY_FLAGS])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["steps"] > 0 and summary["resumed_from_step"] == 0
    return out


def test_train_rewriter_resumes_after_an_interruption(tmp_path, corpus, glove):
    out = tmp_path / "model"
    segs = [s for t in TOY for s in segment_text(t, 12)]
    settings = TrainingSettings(vocab_size=40, encoder_hidden=8, latent=8, decoder_hidden=16, max_length=12,
                                batch_size=16, epochs=2, seed=1)

    def interrupt(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        train_rewriter(segs, out, glove, settings, data_description="train.jsonl", declared_public=True,
                       checkpoint_every=1, on_step=interrupt)
    res = runner.invoke(app, ["train-rewriter", str(corpus), "--output", str(out), "--public", *TINY_FLAGS])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["resumed_from_step"] == 3 and summary["steps"] > 3
    again = runner.invoke(app, ["train-rewriter", str(corpus), "--output", str(out), "--public", *TINY_FLAGS])
    assert again.exit_code == 0 and json.loads(again.stdout.strip().splitlines()[-1])["already_trained"]
    flags = [f if f != "1" or TINY_FLAGS[i - 1] != "--seed" else "2" for i, f in enumerate(TINY_FLAGS)]
    other = runner.invoke(app, ["train-rewriter", str(corpus), "--output", str(out), "--public", *flags])
    assert other.exit_code == 2 and "other settings" in other.output


def test_rewrite_writes_records_with_the_guarantee(tmp_path, model_dir):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "text": "The cat ran to the qwertyzz. A dog slept."}) + "\n"
                   + json.dumps({"id": "b", "text": "The fox saw a cow!"}) + "\n")
    out = tmp_path / "out.jsonl"
    report = tmp_path / "private.json"
    res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "--epsilon", "5", "-o", str(out), "--seed", "3",
                              "--unit", "sentence", "--private-report", str(report), "--threads", "1", "-q"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a:0", "a:1", "b:0"]
    for r in recs:
        validate_record(r)
        assert r["mechanism"] == "er-ae" and r["unit"] == "sentence" and r["seeded"] is True and r["units"] == 1
        g = r["guarantee"]
        assert g["unit"] == "sentence" and g["delta"] == 0.0 and g["parameters"]["model_data"] == "public"
        assert g["parameters"]["covered"] and "statement" not in g  # the long text is in the settings, once
        assert r["epsilon"] == g["epsilon"] > 5  # the top level is the per-sentence bound, not the parameter 5
        assert "qwertyzz" not in r["text"]
    settings = json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert settings["seeded"] is True and "seed" not in settings and settings["epsilon"] == pytest.approx(recs[0]["epsilon"])
    validate_guarantee(settings["guarantee"])
    assert compact(settings["guarantee"]) == recs[0]["guarantee"]
    private = json.loads(report.read_text())
    assert private["documents"][0]["oov_tokens"] >= 1 and "PRIVATE" in private["note"]
    # same seed and partition size -> same output; document unit joins the sentences
    out2 = tmp_path / "out2.jsonl"
    res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "-e", "5", "-o", str(out2), "--seed", "3",
                              "--unit", "sentence", "-q"])
    assert res.exit_code == 0 and out2.read_text() == out.read_text()
    out3 = tmp_path / "out3.jsonl"
    res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "-e", "5", "-o", str(out3), "--mechanism",
                              "syntf-sentence", "--model-data", "same", "-q"])
    assert res.exit_code == 0, res.output
    docs = [json.loads(line) for line in out3.read_text().splitlines()]
    assert [d["id"] for d in docs] == ["a", "b"] and all(d["seeded"] is False for d in docs)
    # a line of m segments states the per-segment bound, m and the line's total (issue 23, items 1 and 15)
    assert [d["units"] for d in docs] == [2, 1] and all(validate_record(d) for d in docs)
    assert docs[0]["total"]["epsilon"] == pytest.approx(2 * docs[0]["epsilon"])


@pytest.mark.parametrize(
    "args,message",
    [
        (["--epsilon", "0"], "epsilon must be"),
        (["--epsilon", "nan"], "epsilon must be"),
        (["--epsilon", "1", "--mechanism", "laplace"], "laplace"),
        (["--epsilon", "1", "--word-fraction", "1.5"], "word_fraction"),
    ],
)
def test_rewrite_bad_parameters_exit_2_without_output(tmp_path, model_dir, args, message):
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran.")
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "-o", str(out), *args])
    assert res.exit_code == 2 and message in res.output
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))


def test_rewrite_bad_inputs_exit_2_without_output(tmp_path, model_dir):
    out = tmp_path / "out.jsonl"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 ok")
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    for args, message in (
        ([str(model_dir), str(bad)], "not valid UTF-8"),
        ([str(model_dir), str(empty)], "empty"),
        ([str(tmp_path / "nomodel"), str(empty)], "no such folder"),
        ([str(tmp_path), str(empty)], "no card.json"),
        ([str(model_dir), str(tmp_path / "missing.txt")], "no such file"),
    ):
        res = runner.invoke(app, ["rewrite", *args, "-e", "3", "-o", str(out)])
        assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
        assert not out.exists()
    good = tmp_path / "good.txt"
    good.write_text("A dog slept.")
    out.write_text("keep me")
    res = runner.invoke(app, ["rewrite", str(model_dir), str(good), "-e", "3", "-o", str(out)])
    assert res.exit_code == 2 and "exists" in res.output and out.read_text() == "keep me"
    res = runner.invoke(app, ["rewrite", str(model_dir), str(good), "-e", "3", "-o", str(good)])
    assert res.exit_code == 2 and "is the input file" in res.output and good.read_text() == "A dog slept."


def test_train_rewriter_errors(tmp_path, corpus):
    res = runner.invoke(app, ["train-rewriter", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "m")])
    assert res.exit_code == 2 and "no such file" in res.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(tmp_path / "full"), *TINY_FLAGS])
    assert res.exit_code == 2 and "not empty" in res.output


@pytest.mark.slow
def test_rewrite_on_dask_equals_local(tmp_path, model_dir):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TOY[:30])))
    outs = []
    for engine in ("local", "dask"):
        out = tmp_path / f"{engine}.jsonl"
        extra = ["--workers", "2"] if engine == "dask" else []
        res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "-e", "4", "-o", str(out), "--seed", "5",
                                  "--partition-size", "7", "--engine", engine, *extra, "-q"])
        assert res.exit_code == 0, res.output
        outs.append(out.read_text())
    assert outs[0] == outs[1]


def test_missing_torch_gives_a_one_line_error(tmp_path, monkeypatch, model_dir):
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran.")
    monkeypatch.setitem(sys.modules, "torch", None)
    res = runner.invoke(app, ["rewrite", str(model_dir), str(inp), "-e", "3", "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "pip install '.[generation]'" in res.output and "whl/cpu" in res.output
