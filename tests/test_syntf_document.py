"""SynTF as a bag mechanism of the document job (issue 12): the law, the records, the CLI, the audit.

Real GloVe 6B 50d (the default vocabulary) and real texts. The statistical tests compare the
released bags with the paper's law (Weggenmann & Kerschbaum 2018: N i.i.d. terms, P(t) ∝
exp(ε w_t / (2N)), w the counts scaled to [0, 1]) and show that a wrong law fails the same test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from record_schema import compact
from scipy.stats import binom, chisquare  # type: ignore[import-untyped]
from typer.testing import CliRunner

from textdp import mechanisms
from textdp._rng import make_rng
from textdp.audit import audit
from textdp.audit.bag_cases import syntf_case
from textdp.audit.claims import syntf_logp
from textdp.audit.core import run_audit
from textdp.cli import app
from textdp.engines import LocalBackend
from textdp.engines.corpus import obfuscate_corpus
from textdp.errors import DocumentError, ParameterError
from textdp.guarantees import GUARANTEE_KEYS, Guarantee
from textdp.io import SourcedDocument
from textdp.mechanisms import entry
from textdp.mechanisms.syntf import SynTF, sample_bags, syntf_distribution
from textdp.pipeline import build_mechanism, privatize_documents

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "letter.txt"
INPUT_STATS = {"n_tokens", "dropped_oov", "n_in_vocabulary", "unchanged_fraction", "mean_neighbour_rank", "source",
               "counts", "weights", "text"}
RECORD_KEYS = {"id", "release", "words", "mechanism", "epsilon", "delta", "unit", "guarantee", "seeded"}
WORDS = ("harbour", "boats", "gulls", "market", "bread", "winter", "village", "river", "stone", "bridge", "garden",
         "church", "forest", "castle", "island", "valley")


def _compact(full: dict) -> dict:
    """A settings file's full guarantee without what records leave out (tests/record_schema.py)."""
    return compact(full)


@pytest.fixture(scope="module")
def small(glove):
    return glove.restrict(words=WORDS, label="test")


def _dense(emb, text: str) -> np.ndarray:
    w = np.zeros(emb.vocab_size)
    for t in text.split():
        w[emb.index[t]] += 1
    return w


def test_released_bags_follow_the_papers_law_and_a_wrong_law_is_rejected(small) -> None:
    eps, n, b = 24.0, 4, 15_000
    text = "boats boats boats harbour gulls gulls zorbulax"  # zorbulax: out of vocabulary, dropped
    mech = SynTF(epsilon=eps, size=n, embeddings=small, stop_words=None)
    docs = mech.privatize_batch([text] * b, seed=make_rng(11))
    rows = np.array([[small.index[w] for w in d.words] for d in docs])
    assert rows.shape == (b, n) and np.all(np.diff(rows, axis=1) >= 0)  # bags, sorted by vocabulary row
    counts = np.bincount(rows.ravel(), minlength=small.vocab_size)
    w = _dense(small, "boats boats boats harbour gulls gulls")
    exact = syntf_distribution(w, eps, n)
    assert chisquare(counts, exact * b * n).pvalue > 1e-3
    assert chisquare(counts, syntf_distribution(w, 2 * eps, n) * b * n).pvalue < 1e-9  # epsilon doubled
    assert chisquare(counts, syntf_distribution(w, eps, 1) * b * n).pvalue < 1e-9  # sensitivity 1, not N
    # i.i.d. draws: the number of 'boats' in a bag is Binomial(N, q_boats); copies of one draw would fail
    k = (rows == small.index["boats"]).sum(axis=1)
    q = exact[small.index["boats"]]
    assert chisquare(np.bincount(k, minlength=n + 1), binom.pmf(np.arange(n + 1), n, q) * b).pvalue > 1e-3
    repeated = np.where(np.arange(b) < b * q, n, 0)  # a sampler that repeats its first draw N times
    assert chisquare(np.bincount(repeated, minlength=n + 1), binom.pmf(np.arange(n + 1), n, q) * b).pvalue < 1e-9


def test_sparse_sampler_on_the_full_vocabulary_matches_the_law(glove) -> None:
    """400,000 words: the document's terms and the rest as one category, the rest uniform outside the document."""
    v, eps, n, b = glove.vocab_size, 60.0, 5, 40_000
    terms, weights = np.array([10, 500, 70_000]), np.array([4.0, 1.0, 2.0])
    bags = sample_bags([terms] * b, [weights] * b, v, eps, n, make_rng(3))
    s = eps / (2 * n) * weights / weights.max()
    logits = np.append(s, np.log(v - terms.size))
    p = np.exp(logits - np.logaddexp.reduce(logits))
    cats = np.select([bags == t for t in terms], [0, 1, 2], default=3)
    observed = np.bincount(cats.ravel(), minlength=4)
    assert chisquare(observed, p * b * n).pvalue > 1e-3
    rest = bags[cats == 3]
    assert not np.isin(rest, terms).any()
    hist = np.bincount(rest * 20 // v, minlength=20)  # uniform over the vocabulary outside the document
    expected = np.full(20, v // 20, dtype=float)
    for t in terms:
        expected[t * 20 // v] -= 1
    assert chisquare(hist, expected / expected.sum() * rest.size).pvalue > 1e-3
    doubled = np.append(2 * s, np.log(v - terms.size))
    p2 = np.exp(doubled - np.logaddexp.reduce(doubled))
    assert chisquare(observed, p2 * b * n).pvalue < 1e-9


def test_registry_default_uses_the_public_glove_vocabulary() -> None:
    mech = mechanisms.get("syntf", epsilon=2.0, size=6)
    assert isinstance(mech, SynTF) and mech.releases == "bag" and entry("syntf").releases == "bag"
    doc = mech.privatize_batch(["The harbour master counted the boats zorbulax"])[0]
    rec = doc.to_record()
    assert set(rec) == RECORD_KEYS and len(rec["words"]) == 6 and rec["guarantee"]["parameters"]["vocab_size"] == 400_000
    assert rec["mechanism"] == "syntf" and rec["unit"] == "document" and rec["delta"] == 0.0 and not rec["seeded"]
    assert isinstance(doc.guarantee, Guarantee) and set(GUARANTEE_KEYS) <= set(doc.guarantee.to_dict())
    assert "zorbulax" not in json.dumps(rec)
    with pytest.raises(ParameterError, match="size"):
        mechanisms.get("syntf", epsilon=2.0).privatize("boats")


def test_document_job_records_hold_no_input_statistics(small) -> None:
    docs = [SourcedDocument("a", "Boats boats harbour zorbulax", "/private/a.txt"),
            SourcedDocument(None, "gulls over the market", "/private/b.txt")]
    mech = build_mechanism("syntf", epsilon=80.0, embeddings=small, size=3, seed=4)
    job = privatize_documents(mech, docs, first=10, private_report=True)
    assert [r["id"] for r in job.records] == ["a", "11"]
    for r in job.records:
        assert set(r) == RECORD_KEYS and not INPUT_STATS & set(r)
        assert all(w in WORDS for w in r["words"]) and "/private" not in json.dumps(r)
        assert r["seeded"] is True and r["guarantee"]["seeded"] is True
    assert job.report is not None and [r["dropped_oov"] for r in job.report] == [1, 0]  # over, the: stop words
    assert [r["n_in_vocabulary"] for r in job.report] == [3, 2] and job.report[0]["source"] == "/private/a.txt"
    # the same per-call generator gives the same release; nothing on the object changes
    a = privatize_documents(mech, docs, seed=make_rng(7), seeded=True).records
    assert a == privatize_documents(mech, docs, seed=make_rng(7), seeded=True).records
    with pytest.raises(DocumentError, match="none of its"):
        privatize_documents(mech, [SourcedDocument(None, "zorbulax quixotrel", "x")])
    with pytest.raises(ParameterError, match="--bag applies to earth-movers"):
        build_mechanism("syntf", epsilon=1.0, embeddings=small, size=3, bag="sample")


def _cli(*args: str):
    return runner.invoke(app, ["obfuscate", *args])


def test_cli_single_run(tmp_path: Path) -> None:
    out, report = tmp_path / "out.jsonl", tmp_path / "private" / "report.jsonl"
    res = _cli(str(EXAMPLE), "-e", "3", "--mechanism", "syntf", "--size", "5", "--seed", "2", "-o", str(out),
               "--private-report", str(report))
    assert res.exit_code == 0, res.output
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert set(rec) == RECORD_KEYS and len(rec["words"]) == 5 and rec["guarantee"]["parameters"]["vocab_size"] == 400_000
    settings = json.loads(out.with_name(out.name + ".settings.json").read_text())
    assert settings["mechanism"] == "syntf" and _compact(settings["guarantee"]) == rec["guarantee"] and settings["seeded"]
    assert settings["decoder"] == "none" and str(EXAMPLE) not in json.dumps(settings)
    (row,) = [json.loads(line) for line in report.read_text().splitlines()]
    assert row["id"] == rec["id"] and row["n_in_vocabulary"] > 5 and 0 <= row["unchanged_fraction"] <= 1
    again = tmp_path / "again.jsonl"
    assert _cli(str(EXAMPLE), "-e", "3", "--mechanism", "syntf", "--size", "5", "--seed", "2", "-o",
                str(again)).exit_code == 0
    assert json.loads(again.read_text()) == rec
    res = _cli(str(EXAMPLE), "-e", "300", "--mechanism", "syntf", "--size", "5", "--vocab-size", "5000", "--format",
               "text")
    assert res.exit_code == 0 and len(res.stdout.split()) == 5


@pytest.mark.parametrize("extra, message", [
    ([], "--size N is required"),
    (["--size", "5", "--bag", "sample"], "--bag applies to earth-movers"),
    (["--size", "5", "--known-source"], "--known-source applies to earth-movers only"),
    (["--size", "5", "--decoder", "hnsw"], "--decoder applies to"),
    (["--size", "5", "--postprocess", "mbr"], "--postprocess applies to"),
    (["--size", "5", "--param", "variant=nope"], "variant"),
])
def test_cli_refusals(extra: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    res = _cli(str(EXAMPLE), "-e", "3", "--mechanism", "syntf", "-o", str(out), *extra)
    assert res.exit_code == 2 and message in res.stderr and "Traceback" not in res.output and not out.exists()


def test_partitioned_local_run(tmp_path: Path, glove) -> None:
    emb = glove.restrict(top_k=30_000)
    inp = tmp_path / "in.jsonl"
    texts = [" ".join(emb.words[300 + 5 * i : 312 + 5 * i]) for i in range(17)]
    inp.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    kw = {"embeddings": emb, "epsilon": 40.0, "size": 7, "bag": "truncate", "stop_words": "english",
          "decoder": "exact", "seed": 9, "backend": LocalBackend(), "partitions": 3, "mechanism": "syntf",
          "private_report": tmp_path / "private.jsonl"}
    summary = obfuscate_corpus([inp], tmp_path / "out", work_dir=tmp_path / "work", **kw)
    recs = [json.loads(line) for p in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in p.read_text().splitlines()]
    assert [r["id"] for r in recs] == [f"d{i}" for i in range(17)]
    assert all(set(r) == RECORD_KEYS and len(r["words"]) == 7 and r["guarantee"]["parameters"]["vocab_size"] == 30_000 for r in recs)
    assert summary["mechanism"] == "syntf" and summary["seeded"] and _compact(summary["guarantee"]) == recs[0]["guarantee"]
    private = (tmp_path / "private.jsonl").read_text()
    assert "n_in_vocabulary" in private and "n_in_vocabulary" not in (tmp_path / "out" / "settings.json").read_text()
    obfuscate_corpus([inp], tmp_path / "out2", work_dir=tmp_path / "work2", **{**kw, "private_report": None})
    again = [json.loads(line) for p in sorted((tmp_path / "out2").glob("part-*.jsonl"))
             for line in p.read_text().splitlines()]
    assert again == recs  # same seed and partitions, same release
    # the CLI's partitioned path
    res = _cli(str(inp), "-e", "40", "--mechanism", "syntf", "--size", "4", "--engine", "local", "--partitions", "2",
               "--vocab-size", "30000", "-o", str(tmp_path / "cli"), "--work-dir", str(tmp_path / "w3"))
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "cli").glob("part-*.jsonl"))) == 2


def test_audit_passes_and_a_doubled_epsilon_is_flagged() -> None:
    r = audit("syntf", epsilon=3.0, samples=40_000, seed=5)
    assert r.passed and r.claimed_epsilon == 3.0 and r.lower_bound > 2.0  # true loss of this pair: 2.62

    def doubled(terms, weights, v, eps, n, rng):
        return sample_bags(terms, weights, v, 2 * eps, n, rng)

    assert not run_audit(syntf_case(3.0, sampler=doubled), samples=40_000, seed=5).passed
    assert r.curve is not None and r.curve.passed  # the privacy curve against the exact one-term law


def test_audit_curve_law_is_the_mechanisms_and_a_small_epsilon_error_is_flagged_by_the_curve() -> None:
    """The curve's claimed law (from ε, |V| and the documents only) is SynTF's own; ε×1.15 inside the sampler
    stays below the claim for the worst-case event but is flagged by the curve."""
    case = syntf_case(3.0)
    for doc in (case.input_a, case.input_b):  # the ten-word audit vocabulary
        w = np.zeros(10)
        w[doc] = 1.0
        assert np.allclose(np.exp(syntf_logp(3.0, 10, doc)), syntf_distribution(w, 3.0, 1), rtol=1e-12)

    def slightly(terms, weights, v, eps, n, rng):
        return sample_bags(terms, weights, v, 1.15 * eps, n, rng)

    bad = run_audit(syntf_case(3.0, sampler=slightly), samples=40_000, seed=5)
    assert not bad.passed and bad.curve is not None and not bad.curve.passed
    assert bad.lower_bound < bad.claimed_epsilon  # the event test alone misses it
    assert syntf_case(3.0, size=3).curve is not None  # bags of N > 1 get the exact bag law's curve too (bag_curve)
    with pytest.raises(ParameterError, match="delta does not apply"):
        syntf_case(3.0, delta=1e-5)
