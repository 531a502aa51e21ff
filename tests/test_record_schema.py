"""One mechanism model: one base, one guarantee type, one record layout, one registry (issue 20),
and the record/guarantee items of issue 23 (1, 12, 13, 15).

Each test here fails on b4f2b11: there the records had five shapes (``guarantee`` a string or a
nested dict), ``privatize_batch`` aborted a whole batch on one line without in-vocabulary words,
and ``--stop-words none`` still said stop words were removed.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from record_schema import SCHEMA, compact, validate_guarantee, validate_record
from typer.testing import CliRunner

from textdp.cli import app
from textdp.embeddings import Embeddings
from textdp.errors import DocumentError
from textdp.guarantees import COMPACT_KEYS, GUARANTEE_KEYS, RELEASE_FORMS, Guarantee, ReleaseRecord
from textdp.mechanisms import (
    FAMILIES,
    MECHANISM_NAMES,
    REGISTRY,
    Mechanism,
    ReleaseContext,
    entry,
    get,
    mechanism_class,
    names,
)

runner = CliRunner()
#: a held-out-style line made of stop words only (issue 23, item 12)
STOP_LINE = "It is all done now."


@pytest.fixture(scope="module")
def toy() -> Embeddings:
    # 25 words: every registered mechanism runs at its defaults (CusText's top_k=20 needs 20), no per-name table
    words = ["cat", "dog", "car", "sun", "boat", "river", "done", "now", "all", "it", "tree", "bird", "fish", "lake",
             "road", "town", "rain", "snow", "wind", "hill", "farm", "ship", "star", "moon", "bell"]
    rng = np.random.default_rng(0)
    return Embeddings(words, rng.normal(size=(len(words), 4)).astype(np.float32), name="toy")


def _make(name: str, emb: Embeddings, **kw):
    """``name`` at its defaults; read from the class: a mechanism whose epsilon follows from a parameter
    (``epsilon_from``: random's rate) gets that parameter, a bag mechanism a size (a new class needs no entry)."""
    derived = mechanism_class(name).epsilon_from
    params: dict = {derived: 0.3} if derived else {"epsilon": 4.0}
    extra = {"size": 2} if entry(name).releases == "bag" else {}
    return get(name, embeddings=emb, seed=1, **params, **extra, **kw)


def test_the_schema_ships_with_the_package_and_matches_the_guarantee_type():
    text = resources.files("textdp").joinpath("schemas/record.schema.json").read_text(encoding="utf-8")
    assert json.loads(text) == SCHEMA
    g = SCHEMA["$defs"]["guarantee"]
    assert set(g["required"]) == set(COMPACT_KEYS) and set(g["properties"]) == set(GUARANTEE_KEYS)
    assert set(SCHEMA["properties"]["release"]["enum"]) == set(RELEASE_FORMS) == {"bag", "text", "sentence", "document",
                                                                                 "matrix"}


def test_a_document_release_is_of_unit_document_and_its_ex_post_figure_is_checked():
    """issue 43: a record may not say ``release: document`` beside another unit; ``ex_post`` has its three fields."""
    import jsonschema
    from record_schema import VALIDATOR

    pytest.importorskip("torch")
    from textdp.mechanisms import get

    g = get("dp-prompt", epsilon=2.0, clip=(-1.0, 1.0), max_new_tokens=4).bound()
    rec = ReleaseRecord(id="a", guarantee=g, seeded=False, release="document", content="hi", units=1).to_record()
    rec["ex_post"] = {"epsilon": 2.0, "tokens_drawn": 2, "worst_case_epsilon": 8.0}
    VALIDATOR.validate(rec)
    for bad in ({**rec, "unit": "sentence"}, {**rec, "ex_post": {"epsilon": 2.0}}):
        with pytest.raises(jsonschema.ValidationError):
            VALIDATOR.validate(bad)


def test_every_registered_name_of_every_family_is_the_one_base():
    assert set(FAMILIES) == {e.family for e in REGISTRY.values()}
    assert set(MECHANISM_NAMES) == set(names("document", "word"))
    for name in names():
        cls = mechanism_class(name)
        assert issubclass(cls, Mechanism), name
        assert (cls.name, cls.family, cls.releases) == (name, entry(name).family, entry(name).releases)
        assert "epsilon" in cls.param_names() and "seed" in cls.param_names()
    # one spelling per name across families (the rewriter's and topics' clashes renamed)
    assert len(names()) == len(set(names()))
    assert {"syntf-sentence", "random-sentence", "topicdp-laplace"} <= set(names())
    assert "laplace" not in names()


@pytest.mark.parametrize("name", MECHANISM_NAMES)
def test_every_document_and_word_mechanism_writes_the_one_layout(name, toy):
    mech = _make(name, toy, stop_words=None)
    docs = mech.privatize_batch(["cat dog river sun", "boat car"], ["a", "b"])
    assert all(isinstance(d, ReleaseRecord) for d in docs)
    for d in docs:
        rec = validate_record(d.to_record())
        assert isinstance(rec["guarantee"], dict) and "statement" not in rec["guarantee"]
        assert rec["release"] == entry(name).releases
    g = mech.guarantee(ReleaseContext(size=2, seeded=True))
    assert isinstance(g, Guarantee) and compact(validate_guarantee(g.to_dict())) == docs[0].to_record()["guarantee"]


@pytest.mark.parametrize("name", ["cmp", "earth-movers", "syntf", "tem", "random"])
def test_a_line_without_vocabulary_words_follows_the_empty_policy(name, toy):
    texts = ["cat dog car", STOP_LINE, "zzzunknown qqqword", "boat river sun"]
    mech = _make(name, toy)  # English stop words removed: STOP_LINE has nothing left
    with pytest.raises(DocumentError, match=r"document 1: .*empty='skip'") as exc:  # Python's words
        mech.privatize_batch(texts)
    assert "--empty skip" in str(exc.value.cli)  # and the command line's (issue 38)
    report: list = []
    skipped = mech.privatize_batch(texts, empty="skip", private_report=report)
    assert [d.id for d in skipped] == ["0", "3"]  # the others are released; no record for 1 and 2
    assert [r.emptied for r in report] == [False, True, True, False]  # the count goes to the private report
    g = skipped[0].guarantee
    assert g.empty == "skip" and "no in-vocabulary word" in g.not_covered and "policy skip" in g.statement
    emptied = mech.privatize_batch(texts, empty="empty")
    assert [d.id for d in emptied] == ["0", "1", "2", "3"]
    rec = validate_record(emptied[1].to_record())
    assert rec.get("text", rec.get("words")) in ("", []) and rec["guarantee"]["empty"] == "empty"


def test_obfuscate_empty_policy_on_the_command_line(tmp_path: Path, glove):
    inp = tmp_path / "held-out.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                           enumerate(["The harbour wall was old.", STOP_LINE, "Gulls circled the boats."])))
    base = ["obfuscate", str(inp), "-e", "8", "--mechanism", "cmp", "--seed", "2", "--vocab-size", "20000"]
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "a.jsonl")])
    assert res.exit_code == 2 and "--empty" in res.output and not (tmp_path / "a.jsonl").exists()
    report = tmp_path / "private" / "r.jsonl"
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "b.jsonl"), "--empty", "skip", "--private-report",
                              str(report)])
    assert res.exit_code == 0, res.output
    recs = [validate_record(json.loads(x)) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [r["id"] for r in recs] == ["0", "2"] and all(r["guarantee"]["empty"] == "skip" for r in recs)
    rows = [json.loads(x) for x in report.read_text().splitlines()]
    assert sum(bool(r.get("emptied")) for r in rows) == 1
    settings = json.loads((tmp_path / "b.jsonl.settings.json").read_text())
    assert "policy skip" in settings["guarantee"]["statement"]


@pytest.mark.parametrize("name", [n for n in MECHANISM_NAMES if entry(n).family == "word" and n != "custext+"])
def test_stop_words_none_is_stated_truly(name, toy):
    kept = _make(name, toy, stop_words=None).guarantee()
    removed = _make(name, toy).guarantee()
    assert "stop word" not in kept.not_covered and "stop word" not in kept.statement.split("Not covered")[-1]
    assert "stop words" in removed.not_covered
    assert kept.params["stop_words_removed"] is False and removed.params["stop_words_removed"] is True


@pytest.mark.parametrize("name", names("topics"))
def test_topics_family_releases_the_one_layout(name):
    from textdp.topics.family import takes_corpus
    from textdp.topics.models import TopicMatrix

    tm = TopicMatrix(np.array([[0.5, 0.3, 0.1], [0.4, 0.2, 0.1]]), (("a", "b", "c"), ("d", "e", "f")), (0, 1))
    params = {"delta": 1e-4, "sensitivity": 0.05} if mechanism_class(name).takes_sensitivity else {}
    if takes_corpus(name):  # its unit is the user corpus over a public vocabulary (3 columns, 2 topics)
        from textdp.topics import UserCorpus

        tm = UserCorpus.from_texts(["a b c a", "b c a", "c a b b", "a c"], ["u", "v", "w", "u"],
                                   vocabulary=["a", "b", "c"])
        params = {"delta": 1e-4, "topics": 2}
    mech = get(name, epsilon=2.0, seed=3, **params)
    assert isinstance(mech, Mechanism) and mech.family == "topics" and mech.releases == "matrix"
    (rel,) = mech.privatize_batch([tm], ["topics"])
    rec = validate_record(rel.to_record())
    assert rec["unit"] == "user" and rec["mechanism"] == name and len(rec["matrix"]) == 2
    assert sorted(rec["keywords"][0]) == ["a", "b", "c"] and rec["guarantee"]["parameters"]["topics"] == 2
    full = validate_guarantee(mech.guarantee(ReleaseContext(shape=(2, 3), seeded=True)).to_dict())
    assert compact(full) == rec["guarantee"]
    with pytest.raises(Exception, match="matrix shape"):
        mech.guarantee()


def test_release_context_is_the_one_argument_of_guarantee(toy):
    em = _make("earth-movers", toy)
    assert em.guarantee(ReleaseContext(size=3)).params["size"] == 3
    assert em.guarantee(ReleaseContext(size=3, seeded=True)).seeded
    cmp = _make("cmp", toy)
    assert cmp.guarantee(ReleaseContext(seeded=True, empty="skip")).empty == "skip"
    with pytest.raises(Exception, match="bag mechanisms"):
        cmp.privatize_batch(["cat"], size=3)


def test_get_builds_every_name_of_every_family_unfitted():
    kw = {"document": {"epsilon": 1.0}, "word": {"epsilon": 1.0}, "sentence": {"epsilon": 1.0, "model": "no/such/dir"},
          "topics": {"epsilon": 1.0}}
    for name in names():
        fam = entry(name).family
        params = dict(kw[fam])
        if fam == "topics" and mechanism_class(name).takes_sensitivity:
            params.update(delta=1e-4, sensitivity=0.1)
        mech = get(name, **params)
        assert isinstance(mech, Mechanism) and not mech.__sklearn_is_fitted__() and mech.name == name


def test_the_pipeline_tells_mechanisms_apart_by_declarations_not_reflection():
    import ast
    import re

    import textdp.engines
    import textdp.evaluation
    import textdp.pipeline

    tree = ast.parse(Path(textdp.pipeline.__file__).read_text(encoding="utf-8"))
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c in ("hasattr", "callable", "getattr") or "signature" in c}, calls
    for path in [*Path(textdp.engines.__file__).parent.glob("*.py"), *Path(textdp.evaluation.__file__).parent.glob("*.py"),
                 Path(textdp.pipeline.__file__)]:
        src = path.read_text(encoding="utf-8")
        assert not re.search(r"signature\(|hasattr\([^)]*mech|callable\([^)]*guarantee|release_kind\(", src), path


def test_every_registry_audit_case_exists():
    from textdp.audit import audit_case_names

    cases = set(audit_case_names())
    missing = {e.name: e.audit for e in REGISTRY.values() if e.audit is not None and e.audit not in cases}
    assert not missing, missing
    # obfuscate's names are audited under their own name, or NOT AUDITED yet (line says None; --all lists them)
    assert all(entry(n).audit in (n, None) for n in MECHANISM_NAMES)


def test_partitioned_runs_follow_the_empty_policy(tmp_path: Path, glove):
    from textdp.backend import LocalBackend
    from textdp.engines.corpus import obfuscate_corpus

    inp = tmp_path / "in.jsonl"
    texts = ["The harbour wall was old.", STOP_LINE, "Gulls circled the boats.", STOP_LINE, "Nets dried in sun."]
    inp.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    kw = {"embeddings": glove.restrict(top_k=20000), "epsilon": 6.0, "size": None, "bag": "truncate",
          "stop_words": "english", "decoder": "exact", "seed": 3, "backend": LocalBackend(), "partitions": 2,
          "mechanism": "cmp"}
    with pytest.raises(DocumentError, match="empty='skip'"):  # Python's words (the CLI's: --empty skip)
        obfuscate_corpus([inp], tmp_path / "a", work_dir=tmp_path / "wa", **kw)
    report = tmp_path / "private" / "r.jsonl"
    summary = obfuscate_corpus([inp], tmp_path / "b", work_dir=tmp_path / "wb", empty="skip",
                               private_report=report, **kw)
    recs = [validate_record(json.loads(x)) for p in sorted((tmp_path / "b").glob("part-*.jsonl"))
            for x in p.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["d0", "d2", "d4"] and all(r["guarantee"]["empty"] == "skip" for r in recs)
    assert "policy skip" in summary["guarantee"]["statement"]
    assert sum(bool(json.loads(x).get("emptied")) for x in report.read_text().splitlines()) == 2
