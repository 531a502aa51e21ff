"""The mechanism registry and the common estimator API of the word-level mechanisms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from record_schema import validate_guarantee, validate_record

from textdp import mechanisms
from textdp.embeddings import Embeddings
from textdp.errors import DocumentError, ParameterError, ParameterTypeError, UnrecordedSpendWarning
from textdp.guarantees import GUARANTEE_KEYS, Guarantee
from textdp.mechanisms import MECHANISM_NAMES, PrivateText, get
from textdp.mechanisms.registry import mechanism_class

TEXT = "The old fisherman repaired his nets on the harbour wall while gulls circled above the boats."
WORD_LEVEL = [n for n in MECHANISM_NAMES if n not in ("earth-movers", "syntf")]



@pytest.fixture(scope="module")
def vocab(glove):
    return glove.restrict(top_k=20000)


def make(name, vocab, **kw):
    """``name`` at its defaults (epsilon 8; a class whose epsilon follows from a parameter, ``epsilon_from``, gets
    that parameter instead: random's rate 0.2), so a new class needs no entry here."""
    derived = mechanism_class(name).epsilon_from
    params: dict = {"epsilon": None, derived: 0.2} if derived else {"epsilon": 8.0}
    params.update(kw)
    return get(name, embeddings=vocab, **params)


def test_names():
    assert MECHANISM_NAMES[:2] == ("earth-movers", "cmp")
    for name in ("mahalanobis", "vickrey", "tem", "santext", "santext+", "custext", "custext+", "random"):
        assert name in MECHANISM_NAMES
    assert len(set(MECHANISM_NAMES)) == len(MECHANISM_NAMES)
    assert isinstance(MECHANISM_NAMES, tuple)


def test_unknown_name_is_one_line():
    with pytest.raises(ParameterError) as err:
        get("laplace", epsilon=1.0)  # the topics family's Laplace is spelt topicdp-laplace
    msg = str(err.value)
    assert "\n" not in msg and "cmp" in msg and "santext+" in msg and "'laplace'" in msg


def test_unknown_parameter():
    with pytest.raises(ParameterError, match="no parameter 'lamda'"):
        get("mahalanobis", epsilon=1.0, lamda=0.5)


def test_earth_movers_is_registered(vocab):
    m = get("earth-movers", epsilon=1e6, embeddings=vocab, seed=3, size=3)
    assert isinstance(m, mechanisms.EarthMoversPrivacy)
    assert len(m.privatize("harbour wall gulls boats").words) == 3


@pytest.mark.parametrize("name", WORD_LEVEL)
def test_every_mechanism_end_to_end(name, vocab):
    m = make(name, vocab, seed=5)
    docs = m.privatize([TEXT, "river and boats unicornzzz"])
    assert all(isinstance(d, PrivateText) for d in docs)
    # one released word per protected input word (custext+ also passes stop words through)
    assert len(docs[1].words) == (3 if name == "custext+" else 2)  # 'unicornzzz' is OOV: dropped
    assert "unicornzzz" not in docs[1].text
    assert all(w in vocab.index for d in docs for w in d.words)
    rec = validate_record(docs[0].to_record())
    assert set(GUARANTEE_KEYS) - set(rec["guarantee"]) == {"statement", "reference", "event"}  # compact on records
    assert rec["mechanism"] == name and rec["unit"] == "word" and rec["delta"] == 0.0 and rec["release"] == "text"
    assert rec["seeded"] is True and rec["guarantee"]["seeded"] is True
    assert "stop words" in rec["guarantee"]["not_covered"] or name == "custext+"
    # no input statistic, no input word in the record or in the returned object
    for forbidden in ("n_tokens", "dropped_oov", "input_words", "n_in_vocabulary"):
        assert forbidden not in rec
    assert {f.name for f in dataclasses.fields(PrivateText)} == {"id", "guarantee", "seeded", "release", "content",
                                                                 "units"}
    g = m.guarantee()
    assert isinstance(g, Guarantee)
    d = validate_guarantee(g.to_dict())
    assert d["statement"] == g.statement and d["epsilon"] == g.epsilon
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 1.0  # type: ignore[misc]
    # transform: texts -> texts (scikit-learn style); without a ledger each call warns that it spends again
    with pytest.warns(UnrecordedSpendWarning):
        assert m.transform(["boats river"])[0].count(" ") == 1


@pytest.mark.parametrize("name", WORD_LEVEL)
def test_seed_reproduces_and_default_is_fresh(name, vocab):
    ids = np.arange(100, 400)
    a = make(name, vocab, seed=11).fit().privatize_ids(ids)
    b = make(name, vocab, seed=11).fit().privatize_ids(ids)
    np.testing.assert_array_equal(a, b)
    fresh = make(name, vocab, epsilon=None if mechanism_class(name).epsilon_from else 0.5).fit()
    assert fresh.seeded_ is False
    assert fresh.privatize(TEXT).to_record()["seeded"] is False
    if name not in ("custext", "custext+"):
        assert not np.array_equal(fresh.privatize_ids(ids), fresh.privatize_ids(ids))


@pytest.mark.parametrize("name", ["cmp", "mahalanobis", "tem", "santext", "custext"])
def test_huge_epsilon_is_identity(name, vocab):
    m = make(name, vocab, epsilon=1e6, seed=1).fit()
    ids = np.arange(50, 250)
    np.testing.assert_array_equal(m.privatize_ids(ids), ids)


def test_vickrey_t0_is_cmp(vocab):
    ids = np.arange(1000, 1300)
    a = get("vickrey", epsilon=6.0, embeddings=vocab, t=0.0, seed=4).fit().privatize_ids(ids)
    b = get("cmp", epsilon=6.0, embeddings=vocab, seed=4).fit().privatize_ids(ids)
    np.testing.assert_array_equal(a, b)


def test_sklearn_clone_and_params(vocab):
    from sklearn.base import clone

    # (an Embeddings object cannot be deep-copied, so clone the path-based configuration)
    m = get("tem", epsilon=3.0, embeddings=None, vocab_size=20000, beta=0.01, seed=2)
    c = clone(m)
    assert c.get_params()["beta"] == 0.01 and c.get_params()["epsilon"] == 3.0
    c.set_params(beta=0.1)
    assert c.fit().gamma_ > 0
    with pytest.raises(ParameterTypeError):
        c.set_params(bogus=1)


def test_errors(vocab):
    with pytest.raises(ParameterError, match="epsilon"):
        get("santext", epsilon=0.0, embeddings=vocab).fit()
    with pytest.raises(ParameterError, match="exactly one of epsilon or rate"):
        get("random", epsilon=1.0, rate=0.5, embeddings=vocab).fit()
    with pytest.raises(ParameterError, match="lambd"):
        get("mahalanobis", epsilon=1.0, lambd=1.5, embeddings=vocab).fit()
    with pytest.raises(ParameterError, match="beta"):
        get("tem", epsilon=1.0, beta=1.0, embeddings=vocab).fit()
    with pytest.raises(ParameterError, match="postprocess"):
        get("cmp", epsilon=1.0, postprocess="magic", embeddings=vocab).fit()
    with pytest.raises(DocumentError, match="document 0"):
        get("cmp", epsilon=1.0, embeddings=vocab).privatize("the of and")
    with pytest.raises(ParameterError, match="vocabulary rows"):
        get("cmp", epsilon=1.0, embeddings=vocab).privatize_ids([vocab.vocab_size])


def test_statements_name_the_metric_and_composition(vocab):
    for name, needle in [
        ("cmp", "epsilon*d_2-privacy"),
        ("mahalanobis", "d_RM"),
        ("vickrey", "post-processing"),
        ("tem", "min(||e_x - e_x'||_2"),
        ("santext", "metric local DP"),
        ("santext+", "no protection"),
        ("custext", "not protected from each other"),
        ("random", "randomised response"),
    ]:
        s = make(name, vocab).guarantee().statement
        assert needle in s, (name, s)
        assert "Over a document" in s and "Not covered" in s


def test_toy_embeddings_api():
    emb = Embeddings(["cat", "dog", "car"], np.array([[0.0, 0.0], [0.0, 1.0], [9.0, 9.0]]), name="toy")
    out = get("cmp", epsilon=1e6, embeddings=emb, stop_words=None, seed=0).privatize(["dog car", "car"])
    assert [d.text for d in out] == ["dog car", "car"]


def test_the_index_is_what_the_registered_classes_declare():
    """The generated index (read by --help and the errors) equals the classes' name/family/releases."""
    from pathlib import Path

    from textdp.mechanisms import _index, base, registry

    path = Path(registry.__file__).with_name("_index.py")
    assert path.read_text(encoding="utf-8") == registry.index_source(), (
        "stale: run python -m textdp.mechanisms.registry --write-index")
    assert _index.FAMILIES == base.FAMILIES
    for e in registry.REGISTRY.values():
        cls = e.load()
        assert (cls.name, cls.family, cls.releases) == (e.name, e.family, e.releases) and cls.reference


def test_a_class_that_changes_its_declaration_makes_the_index_stale(monkeypatch):
    from pathlib import Path

    from textdp.mechanisms import TEM, registry

    monkeypatch.setattr(TEM, "releases", "bag")  # the class says one thing, the index another
    assert '("tem", "word", "bag"' in registry.index_source()
    assert registry.index_source() != Path(registry.__file__).with_name("_index.py").read_text(encoding="utf-8")
    monkeypatch.setattr(registry, "LOCATIONS", (*registry.LOCATIONS, "textdp.mechanisms.exponential:TEM"))
    with pytest.raises(ParameterError, match="registered twice"):
        registry.index_source()
    monkeypatch.setattr(registry, "LOCATIONS", ("textdp.mechanisms.word_level:PrivateText",))
    with pytest.raises(ParameterError, match="must be a Mechanism subclass"):
        registry.index_source()


def test_listing_names_imports_no_numerics():
    import subprocess
    import sys

    code = ("import sys\nfrom textdp.mechanisms import MECHANISM_NAMES, entry, names\n"
            "assert names('topics')[0] == 'topicdp' and entry('cmp').family == 'word' and MECHANISM_NAMES\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'torch', 'sklearn'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_index_command_checks_and_refuses_unknown_arguments(capsys):
    from textdp.mechanisms import registry

    assert registry._main(["--check"]) == 0 and "up to date" in capsys.readouterr().out
    assert registry._main(["--write"]) == 2


def test_a_new_class_is_one_registry_line_whose_row_comes_from_the_class(monkeypatch):
    """docs/new-mechanism.md step 2: the line names the class; name, family and releases are read from it."""
    import sys
    import types
    from pathlib import Path

    from textdp.mechanisms import RandomReplacement, registry

    class Scratch(RandomReplacement):
        name = "scratch-rr"
        reference = "a scratch class of this test"

    module = types.ModuleType("scratch_mechanism")
    module.Scratch = Scratch
    monkeypatch.setitem(sys.modules, "scratch_mechanism", module)
    monkeypatch.setattr(registry, "LOCATIONS", (*registry.LOCATIONS, "scratch_mechanism:Scratch"))
    assert '    ("scratch-rr", "word", "text", "scratch-rr", "scratch_mechanism:Scratch"),\n' in registry.index_source()
    doc = (Path(registry.__file__).resolve().parents[3] / "docs" / "new-mechanism.md").read_text(encoding="utf-8")
    assert "python -m textdp.mechanisms.registry --write-index" in doc and "`LOCATIONS`" in doc


def _scratch_registry(monkeypatch, audit):
    """A newcomer's word-level class registered by one line whose audit column is ``audit`` (no claim written)."""
    import sys
    import types
    from types import MappingProxyType

    from textdp.mechanisms import RandomReplacement, registry

    class Scratch(RandomReplacement):
        name = "scratch-rr"
        reference = "a scratch class of this test"

    module = types.ModuleType("scratch_mechanism")
    module.Scratch = Scratch
    monkeypatch.setitem(sys.modules, "scratch_mechanism", module)
    row = registry.Entry("scratch-rr", "word", "text", audit, "scratch_mechanism:Scratch")
    monkeypatch.setattr(registry, "REGISTRY", MappingProxyType({**registry.REGISTRY, "scratch-rr": row}))


def test_every_registered_mechanism_is_audited_or_listed_not_audited(monkeypatch, vocab):
    """No silent gap: each registered name is checked by a registered case or named NOT AUDITED by ``--all``."""
    import json

    from typer.testing import CliRunner

    from textdp.audit import audit_case_names
    from textdp.audit import registry as audit_registry
    from textdp.audit.registry import NOT_AUDITED, not_audited
    from textdp.cli import app
    from textdp.mechanisms.registry import REGISTRY

    cases, unaudited = set(audit_case_names()), not_audited()
    for e in REGISTRY.values():
        assert (e.audit in cases) != (e.name in unaudited), e
    assert list(unaudited) == [e.name for e in REGISTRY.values() if e.audit is None]  # today: only declared gaps
    # a newcomer's first step (module, test, registry line with audit None): usable, and --all names it
    _scratch_registry(monkeypatch, None)
    assert get("scratch-rr", epsilon=3.0, embeddings=vocab, seed=1).fit().privatize("the harbour wall").text
    monkeypatch.setattr(audit_registry, "_CASES", {"laplace": audit_registry._CASES["laplace"]})  # one quick case
    res = CliRunner().invoke(app, ["audit", "--all", "--samples", "200", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [c["mechanism"] for c in out["cases"]] == ["laplace"]
    assert out["not_audited"]["scratch-rr"] == NOT_AUDITED and "scratch-rr" in out["note"].split("NOT AUDITED")[1]
    assert set(out["not_audited"]) == {e.name for e in REGISTRY.values() if e.audit != "laplace"} | {"scratch-rr"}
    res = CliRunner().invoke(app, ["audit", "--all", "--samples", "200", "--seed", "3"])
    assert res.exit_code == 0 and f"scratch-rr: NOT AUDITED ({NOT_AUDITED})" in res.output, res.output


def test_auditing_a_not_audited_mechanism_is_a_one_line_error_saying_how(monkeypatch):
    from typer.testing import CliRunner

    from textdp.audit import audit
    from textdp.cli import app

    _scratch_registry(monkeypatch, None)
    res = CliRunner().invoke(app, ["audit", "scratch-rr", "--seed", "1"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "NOT AUDITED" in res.output and "audit/claims.py" in res.output and "new-mechanism.md" in res.output
    with pytest.raises(ParameterError, match="NOT AUDITED"):
        audit("scratch-rr", samples=200, seed=1)
    _scratch_registry(monkeypatch, "random")  # checked by another name's case: say which
    with pytest.raises(ParameterError, match="is audited by the case 'random': run textdp audit random"):
        audit("scratch-rr", samples=200, seed=1)
    with pytest.raises(ParameterError, match="no audit case for mechanism 'bogus'; choose one of"):
        audit("bogus")
