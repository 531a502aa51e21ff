"""Issue 12, phase 2: every registered mechanism through ``textdp obfuscate`` and the document job.

Real GloVe 6B 50d (the default embeddings), real texts. Records carry the
mechanism, epsilon, delta, unit, guarantee and seeded flag, and nothing that
describes the input; the private report has the statistics instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from record_schema import compact, validate_guarantee, validate_record
from typer.testing import CliRunner

from textdp.cli import app
from textdp.embeddings import output_vocabulary
from textdp.engines import LocalBackend
from textdp.engines.corpus import obfuscate_corpus
from textdp.errors import ParameterError
from textdp.io import SourcedDocument
from textdp.mechanisms import MECHANISM_NAMES, entry
from textdp.pipeline import build_mechanism, privatize_documents
from textdp.text import ENGLISH_STOP_WORDS, normalize

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "letter.txt"
INPUT_STATS = {"n_tokens", "dropped_oov", "n_in_vocabulary", "unchanged_fraction", "mean_neighbour_rank", "source"}
RECORD_KEYS = {"id", "release", "mechanism", "epsilon", "delta", "unit", "guarantee", "seeded"}
#: parameters giving each mechanism a valid configuration (the others use their defaults)
PARAMS: dict[str, list[str]] = {}
#: the CusText mapping of the full 400k vocabulary takes minutes once (cached); the default run uses 20k words
#: Every mechanism runs on the 20,000 most frequent words here, so a newcomer's mechanism with a dense V x V table
#: needs no entry in a hand-kept list (issue 40); the default 400k vocabulary is covered by
#: test_text_mechanism_private_report_and_text_format (cmp) and, for custext's groups, the slow test below.
SMALL = ["--vocab-size", "20000"]


def _obfuscate(name: str, out: Path, *extra: str) -> tuple[int, str]:
    size = ["--size", "20"] if entry(name).releases == "bag" else []
    args = ["obfuscate", str(EXAMPLE), "-e", "8", "--mechanism", name, "--seed", "5", "-o", str(out), *size,
            *PARAMS.get(name, []), *extra]
    res = runner.invoke(app, args)
    return res.exit_code, res.output


def _check_release(name: str, out: Path) -> dict:
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    validate_record(rec)  # the one layout, against the schema shipped with the package
    assert RECORD_KEYS <= set(rec), rec
    assert not INPUT_STATS & set(rec)
    assert rec["mechanism"] == name and rec["seeded"] is True and rec["delta"] == 0.0
    if entry(name).releases == "bag":
        assert rec["unit"] == "document" and len(rec["words"]) == 20 and "text" not in rec
    else:
        assert rec["unit"] == "word" and "words" not in rec and rec["text"]
        n_protected = len(normalize(EXAMPLE.read_text(), None if name == "custext+" else "english"))
        assert 0 < len(rec["text"].split()) <= n_protected
    settings = json.loads(out.with_name(out.name + ".settings.json").read_text())
    assert settings["mechanism"] == name and settings["seeded"] is True
    assert compact(validate_guarantee(settings["guarantee"])) == rec["guarantee"]
    assert "seed" not in settings and str(EXAMPLE) not in json.dumps(settings)
    return rec


@pytest.mark.parametrize("name", MECHANISM_NAMES)
def test_obfuscate_every_mechanism(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code, output = _obfuscate(name, out, *SMALL)
    assert code == 0, output
    rec = _check_release(name, out)
    if name in ("cmp", "santext+"):  # the same seed gives the same release
        code, output = _obfuscate(name, tmp_path / "again.jsonl", *SMALL)
        assert code == 0 and json.loads((tmp_path / "again.jsonl").read_text()) == rec


@pytest.mark.slow
@pytest.mark.parametrize("name", ["custext", "custext+"])
def test_obfuscate_custext_full_default_vocabulary(name: str, tmp_path: Path) -> None:
    code, output = _obfuscate(name, tmp_path / "out.jsonl")
    assert code == 0, output
    assert _check_release(name, tmp_path / "out.jsonl")["guarantee"]["parameters"]["vocab_size"] == 400000


def test_text_mechanism_private_report_and_text_format(tmp_path: Path) -> None:
    out, report = tmp_path / "out.jsonl", tmp_path / "private" / "report.jsonl"
    code, output = _obfuscate("cmp", out, "--private-report", str(report))
    assert code == 0, output
    rec = json.loads(out.read_text())
    assert not INPUT_STATS & set(rec) and str(EXAMPLE) not in out.read_text()
    (row,) = [json.loads(line) for line in report.read_text().splitlines()]
    assert row["id"] == rec["id"] and row["source"] == str(EXAMPLE)
    assert row["n_in_vocabulary"] == len(rec["text"].split())  # one released word per protected word
    assert row["n_tokens"] == len(normalize(EXAMPLE.read_text())) and 0 <= row["unchanged_fraction"] <= 1
    res = runner.invoke(app, ["obfuscate", str(EXAMPLE), "-e", "8", "--mechanism", "cmp", "--seed", "5",
                              "--format", "text"])
    assert res.exit_code == 0 and res.stdout.strip() == rec["text"]


def test_postprocess_mbr_for_earth_movers_and_cmp(tmp_path: Path) -> None:
    code, output = _obfuscate("earth-movers", tmp_path / "em.jsonl", "--postprocess", "mbr")
    assert code == 0, output
    rec = json.loads((tmp_path / "em.jsonl").read_text())
    assert rec["guarantee"]["parameters"]["decoder"] == "mbr" and len(rec["words"]) == 20
    code, output = _obfuscate("cmp", tmp_path / "cmp.jsonl", "--postprocess", "mbr")
    assert code == 0, output
    rec = json.loads((tmp_path / "cmp.jsonl").read_text())
    settings = json.loads((tmp_path / "cmp.jsonl.settings.json").read_text())
    assert rec["guarantee"]["parameters"]["postprocess"] == "mbr" and "post-processing" in settings["guarantee"]["statement"]


@pytest.mark.parametrize(
    "name, extra, message",
    [
        ("tem", ["--postprocess", "mbr"], "--postprocess applies to earth-movers and cmp"),
        ("cmp", ["--size", "5"], "--size applies to bag mechanisms"),
        ("santext", ["--decoder", "hnsw"], "--decoder applies to"),
        ("vickrey", ["--param", "tt=0.5"], "has no parameter 'tt'"),
        ("vickrey", ["--param", "t"], "write KEY=VALUE"),
        ("cmp", ["--known-source"], "--known-source applies to earth-movers only"),
        ("santext", ["--bag", "sample"], "--bag applies to bag mechanisms"),
        ("random", ["--param", "epsilon=3"], "give it with its own option"),
    ],
)
def test_options_that_do_not_apply_are_refused(name: str, extra: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["obfuscate", str(EXAMPLE), "-e", "8", "--mechanism", name, "-o", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output and not out.exists()


def test_unknown_mechanism_lists_the_names() -> None:
    res = runner.invoke(app, ["obfuscate", str(EXAMPLE), "-e", "8", "--mechanism", "laplace"])
    assert res.exit_code == 2 and "cmp" in res.output and "earth-movers" in res.output


def test_output_vocabulary_words_drops_stop_words_and_punctuation(glove) -> None:
    words = output_vocabulary(glove, "words")
    assert 300_000 < words.vocab_size < glove.vocab_size
    assert not {"but", "''", "_", "the", "2019", ","} & set(words.words)
    # the release never holds such tokens, at a noise level where most words change
    mech = build_mechanism("cmp", epsilon=3.0, embeddings=words, seed=4)
    docs = [SourcedDocument(None, EXAMPLE.read_text(), "letter")]
    text = privatize_documents(mech, docs).records[0]["text"].split()
    assert text and all(w.isalpha() and w not in ENGLISH_STOP_WORDS and len(w) > 1 for w in text)
    full = privatize_documents(build_mechanism("cmp", epsilon=3.0, embeddings=glove, seed=4), docs)
    junk = [w for w in full.records[0]["text"].split() if not w.isalpha() or w in ENGLISH_STOP_WORDS]
    assert junk  # the full vocabulary does release such tokens at this epsilon (what the option is for)


def test_document_job_for_text_mechanisms(glove) -> None:
    docs = [SourcedDocument("a", "The harbour master counted boats zorbulax", "/private/a.txt"),
            SourcedDocument(None, "Gulls circled over the quiet market", "/private/b.txt")]
    mech = build_mechanism("santext", epsilon=2.0, embeddings=glove, seed=1)
    job = privatize_documents(mech, docs, first=10, private_report=True)
    assert [r["id"] for r in job.records] == ["a", "11"]
    assert all(not INPUT_STATS & set(r) for r in job.records)
    assert all("zorbulax" not in json.dumps(r) and "/private" not in json.dumps(r) for r in job.records)
    assert job.report is not None and [r["dropped_oov"] for r in job.report] == [1, 0]
    # a per-call generator: the same stream gives the same words; nothing on the object changes
    from textdp._rng import spawn

    a = privatize_documents(mech, docs, seed=spawn(3, 2)[1], seeded=True).records
    b = privatize_documents(mech, docs, seed=spawn(3, 2)[1], seeded=True).records
    assert a == b and a[0]["seeded"] is True
    unseeded = privatize_documents(mech, docs, seed=spawn(None, 1)[0]).records
    assert unseeded[0]["seeded"] is False
    with pytest.raises(ParameterError, match="applies to bag mechanisms"):
        privatize_documents(mech, docs, size=5)


def test_partitioned_local_run_with_a_text_mechanism(tmp_path: Path, glove) -> None:
    emb = glove.restrict(top_k=30000)
    inp = tmp_path / "in.jsonl"
    texts = [" ".join(emb.words[200 + 7 * i : 210 + 7 * i]) for i in range(23)]
    inp.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    kw = {"embeddings": emb, "epsilon": 6.0, "size": None, "bag": "truncate", "stop_words": "english",
          "decoder": "exact", "seed": 9, "backend": LocalBackend(), "partitions": 3, "mechanism": "mahalanobis",
          "params": {"lambd": 0.5}}
    summary = obfuscate_corpus([inp], tmp_path / "out", work_dir=tmp_path / "work", **kw)
    recs = [json.loads(line) for p in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in p.read_text().splitlines()]
    assert [r["id"] for r in recs] == [f"d{i}" for i in range(23)]
    assert all(r["mechanism"] == "mahalanobis" and r["unit"] == "word" and "text" in r for r in recs)
    assert all(len(r["text"].split()) == len(normalize(t)) for r, t in zip(recs, texts))
    assert summary["mechanism"] == "mahalanobis" and summary["guarantee"]["parameters"]["lambd"] == 0.5
    assert summary["seeded"] is True and summary["partitions"] == 3
    assert compact(summary["guarantee"]) == recs[0]["guarantee"] and all(validate_record(r) for r in recs)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["settings"]["mechanism"] == "mahalanobis"
    # the same seed and partitions give the same release, whatever the output folder
    obfuscate_corpus([inp], tmp_path / "out2", work_dir=tmp_path / "work2", **kw)
    again = [json.loads(line) for p in sorted((tmp_path / "out2").glob("part-*.jsonl"))
             for line in p.read_text().splitlines()]
    assert again == recs
    # a different mechanism into the same folder is a different run: refused
    with pytest.raises(ParameterError, match="different run"):
        obfuscate_corpus([inp], tmp_path / "out", work_dir=tmp_path / "work", **{**kw, "mechanism": "cmp",
                                                                                   "params": None})
    with pytest.raises(ParameterError, match="--size applies to bag mechanisms"):
        obfuscate_corpus([inp], tmp_path / "o3", work_dir=tmp_path / "w3", **{**kw, "size": 5})


def test_mbr_in_earth_movers_depends_only_on_the_noisy_vectors(glove) -> None:
    """Post-processing: with the same noise, the released bag is a function of the noisy vectors only."""
    emb = glove.restrict(top_k=20000)
    mech = build_mechanism("earth-movers", epsilon=6.0, embeddings=emb, size=6, postprocess="mbr", seed=2)
    z = np.asarray(emb.vectors[[500, 900, 1500]], dtype=np.float64) + 0.3
    a = mech.decoder_.decode(z)
    b = mech.decoder_.decode(z, sources=np.array([1, 2, 3]))
    assert a.tolist() == b.tolist()
    doc = mech.privatize("harbour boats gulls market bread fisherman winter village")
    assert doc.guarantee.params["decoder"] == "mbr"
