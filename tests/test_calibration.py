"""One calibration per mechanism (issue 40): the noise, the guarantee and the ledger's charge read one object.

For every registered mechanism (read from the registry, not a hand list): ``fit`` builds one frozen
:class:`~textdp.guarantees.calibration.Calibration`; assigning *any* parameter after ``fit`` (or
``set_params``) drops the fitted state and the release refuses ("refit first") until ``fit`` runs again,
so no release uses a value its guarantee does not state. And the charge is the guarantee: what a ledger
charges one document is the document-level ε (and δ) the guarantee's statement states for its unit.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from helpers import tiny_lms, tiny_model

from textdp.accounting.accountant import check_charge, compose
from textdp.accounting.ledger import PrivacyLedger
from textdp.embeddings import Embeddings
from textdp.errors import ParameterError
from textdp.guarantees.calibration import Calibration
from textdp.guarantees.events import (
    EVENT_KINDS,
    Charge,
    DiscreteLaplaceEvent,
    GaussianEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    event_from_dict,
)
from textdp.mechanisms import get, mechanism_class, names
from textdp.mechanisms.base import Mechanism, ReleaseContext

ALL = names()
TEXT = "the cat and the dog saw a fox"


@pytest.fixture(scope="module")
def toy(glove) -> Embeddings:
    return glove.restrict(top_k=3_000)


@pytest.fixture(scope="module")
def resources(tmp_path_factory, glove, toy):
    """Lazily built public resources: the toy embeddings, a tiny textdp model, tiny language models."""
    built: dict[str, object] = {"toy": toy}

    def need(key: str) -> object:
        if key not in built:
            root = tmp_path_factory.mktemp(key)
            built[key] = str(tiny_model(root / "m", glove)) if key == "rewriter" else tiny_lms(root)
        return built[key]

    return need


def _params(name: str, need) -> dict[str, object]:
    """The constructor arguments of a fitted ``name``: from its family and its declarations, no name compared."""
    cls = mechanism_class(name)
    kw: dict[str, object] = {cls.epsilon_from: 0.5} if cls.epsilon_from else {"epsilon": 2.0}
    family, params = cls.family, cls.param_names()
    if family in ("document", "word"):
        kw.update(embeddings=need("toy"), stop_words=None)
        if "size" in params:
            kw["size"] = 3
    elif family == "sentence" and getattr(cls, "kind", ""):
        kw.update(model=need("lms")[cls.kind], clip=(-1.0, 1.0))  # type: ignore[index]
        if "delta" in params:
            kw["delta"] = 1e-5
    elif family == "sentence":
        kw["model"] = need("rewriter")
    elif getattr(cls, "takes_corpus", False):  # the unit is the user corpus (topics fitted after the noise)
        kw.update(delta=1e-4, topics=2)
    elif getattr(cls, "takes_sensitivity", True):
        kw.update(delta=1e-4, sensitivity=0.05)
    return kw


def _unit(mech: Mechanism) -> object:
    if mech.family != "topics":
        return TEXT
    from textdp.topics.models import TopicMatrix

    if getattr(mech, "takes_corpus", False):
        from textdp.topics import UserCorpus

        return UserCorpus.from_texts(["a b c a", "b c a", "c a b b", "a c"], ["u", "v", "w", "u"],
                                     vocabulary=["a", "b", "c"])

    return TopicMatrix(np.array([[0.5, 0.3, 0.1], [0.4, 0.2, 0.1]]), (("a", "b", "c"), ("d", "e", "f")), (0, 1))


def _context(mech: Mechanism) -> ReleaseContext:
    return ReleaseContext(size=3) if mech.releases == "bag" else \
        ReleaseContext(shape=(2, 3)) if mech.releases == "matrix" else ReleaseContext()


@pytest.mark.parametrize("name", ALL)
def test_fit_builds_one_calibration_that_the_guarantee_states(name, resources):
    mech = get(name, **_params(name, resources)).fit()
    cal = mech.calibration_
    assert isinstance(cal, Calibration)
    assert mech.epsilon_ == cal.epsilon and mech.delta_ == cal.delta
    with pytest.raises(AttributeError):
        mech.epsilon_ = 5.0  # type: ignore[misc]  # read-only: the calibration is the one copy
    assert mech.privatize(_unit(mech), seed=1) is not None


@pytest.mark.parametrize("name", ALL)
def test_assigning_any_parameter_after_fit_refuses_the_release(name, resources):
    kw = _params(name, resources)
    mech = get(name, **kw).fit()
    unit = _unit(mech)
    for param in mech.param_names():
        mech.fit()
        setattr(mech, param, getattr(mech, param))
        assert "calibration_" not in vars(mech)
        with pytest.raises(ParameterError, match=f"parameter '{param}' was assigned after fit.*refit first"):
            mech.privatize(unit)
        with pytest.raises(ParameterError, match="refit first"):
            mech.guarantee(_context(mech))
    mech.fit()
    mech.set_params(seed=7)
    with pytest.raises(ParameterError, match="refit first"):
        mech.privatize(unit)
    assert mech.fit().privatize(unit, seed=1) is not None  # refit: the release runs again


def test_a_changed_epsilon_reaches_noise_and_guarantee_together(resources):
    """The bug of issue 40: ``m.epsilon = 100`` after fit left the guarantee at 1 while σ used 100."""
    name = next(n for n in names("sentence") if "sigma" in dict(_bound_params(n, resources)))
    mech = get(name, **{**_params(name, resources), "epsilon": 1.0}).fit()
    sigma_1 = mech.calibration_.noise_params["sigma"]
    mech.epsilon = 100.0
    with pytest.raises(ParameterError, match="refit first"):
        mech.privatize(TEXT)
    mech.fit()
    g = mech.guarantee()
    assert g.epsilon == 100.0 == mech.calibration_.epsilon
    assert g.params["sigma"] == mech.calibration_.noise_params["sigma"] < sigma_1


def _bound_params(name: str, need) -> dict[str, object]:
    cls = mechanism_class(name)
    if not getattr(cls, "kind", ""):
        return {}
    return get(name, **_params(name, need)).fit().guarantee().params


# -- the charge is the guarantee -----------------------------------------------------------------------------------
_CHARGE = re.compile(r"Ledger charge: epsilon=([0-9.e+-]+), delta=([0-9.e+-]+) per (\w+)")


@pytest.mark.parametrize("name", ALL)
def test_the_charge_is_what_the_guarantee_states(name, resources):
    """One unit's charge is the (ε, δ) the statement says a ledger charges, for the unit it states."""
    mech = get(name, **_params(name, resources)).fit()
    g = mech.guarantee(_context(mech))
    found = _CHARGE.search(g.statement)
    assert found, f"{name}: the statement does not say what a ledger charges: {g.statement[-300:]}"
    eps, delta, unit = float(found[1]), float(found[2]), found[3]
    one = g.charge(1)
    assert unit == g.unit
    assert one.epsilon == pytest.approx(eps, rel=1e-5) and one.delta == pytest.approx(delta, rel=1e-5, abs=1e-300)
    assert g.charge(3).epsilon == pytest.approx(3 * eps) and g.charge(3).delta == pytest.approx(3 * delta)
    # what a release charges each id: the guarantee's charge times its units, never a separate number
    records = []
    mech.privatize_batch([_unit(mech)], ["d"], charge=lambda charges, guarantee: records.append((charges, guarantee)),
                         **({"size": 3} if mech.releases == "bag" else {}))
    (charges, stated), = records
    n = mech.charge_counts([_unit(mech)], ["d"], context=_context(mech))["d"]
    assert charges["d"] == stated.charge(n)
    # the ledger recomputes (epsilon, delta) from the event: every mechanism's event gives what it states
    assert check_charge(stated.charge(1)) and check_charge(charges["d"])


def test_earth_movers_charges_epsilon_times_n_per_document(resources):
    """earth-movers states epsilon*N per unit of distance between documents: the ledger charges that, not epsilon."""
    (name,) = [n for n in names("document") if mechanism_class(n).releases == "bag"
               and "bag" in mechanism_class(n).param_names()]
    mech = get(name, **_params(name, resources), bag="sample").fit()
    for n in (1, 3, 20):
        g = mech.guarantee(ReleaseContext(size=n))
        assert g.charge(1).epsilon == pytest.approx(2.0 * n)


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TEXTDP_STATE_DIR", str(tmp_path / "state"))  # the ledger's anchors
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    return PrivacyLedger(folder / "ledger.jsonl")


def test_the_ledger_refuses_an_event_that_does_not_give_what_it_states(ledger):
    """Issue 40: 20 charges stating (2, 1e-5) with GaussianEvent(50) composed to 0.224 under a budget of 3."""
    lie = Charge(GaussianEvent(50.0), 2.0, 1e-5)
    with pytest.raises(ParameterError, match="more private than stated"):
        ledger.charge({"a": lie}, mechanism="dp-bart", unit="sentence", budget=3.0)
    with pytest.raises(ParameterError, match="less private than stated"):
        ledger.charge({"a": Charge(PureEvent(3.0), 2.0)}, mechanism="x", unit="word", budget=None)
    assert not ledger.exists()


def test_the_budget_caps_delta_as_well(ledger):
    from textdp._validation import DEFAULT_DELTA_BUDGET
    from textdp.accounting.gaussian import analytic_gaussian_sigma

    one = Charge(GaussianEvent(analytic_gaussian_sigma(0.01, 1e-4, 1.0)), 0.01, 1e-4)
    for _ in range(round(DEFAULT_DELTA_BUDGET / 1e-4)):
        ledger.charge({"a": one}, mechanism="dp-bart", unit="sentence", budget=100.0)
    with pytest.raises(ParameterError, match="delta budget 0.001 would be exceeded"):
        ledger.charge({"a": one}, mechanism="dp-bart", unit="sentence", budget=100.0)
    ledger.charge({"b": one}, mechanism="dp-bart", unit="sentence", budget=(100.0, 1e-4))  # an explicit cap
    with pytest.raises(ParameterError, match="delta budget 0.0001 would be exceeded"):
        ledger.charge({"b": one}, mechanism="dp-bart", unit="sentence", budget=(100.0, 1e-4))


def test_events_convert_themselves_and_an_unknown_one_is_an_error():
    assert {"randomized_response", "discrete_laplace"} <= set(EVENT_KINDS)
    rr = RandomizedResponseEvent(noise_parameter=0.5, num_buckets=4)
    dl = DiscreteLaplaceEvent(parameter=0.5, sensitivity=4.0)
    for e in (rr, dl):
        assert event_from_dict(e.to_dict()) == e
        assert e.to_dp_event() is not None and e.to_pld(1e-4) is not None
    assert rr.pure_epsilon == pytest.approx(math.log(5.0)) and dl.pure_epsilon == 2.0

    class Mystery(PrivacyEvent):
        kind = "mystery"

    with pytest.raises(ParameterError, match="converts to no accountant"):
        compose([Charge(Mystery(), 1.0)])


def test_pure_releases_compose_to_their_sum_stated_as_such():
    c = compose([Charge(PureEvent(1.0), 1.0), Charge(RandomizedResponseEvent(0.5, 4), math.log(5.0))])
    assert c.method == "pure" and c.tight == c.basic == (pytest.approx(1.0 + math.log(5.0)), 0.0)
    assert "sum" in c.note


def test_mechanisms_that_release_randomised_response_or_discrete_laplace_say_so(resources):
    kinds = {}
    for name in ALL:
        mech = get(name, **_params(name, resources)).fit()
        event = mech.guarantee(_context(mech)).event
        while hasattr(event, "event"):
            event = event.event
        kinds[name] = event.kind
    assert "randomized_response" in {kinds[n] for n in names("word")}
    assert "randomized_response" in {kinds[n] for n in names("sentence")}
    assert "discrete_laplace" in {kinds[n] for n in names("topics")}


# -- a topics mechanism is one module and a registry line -------------------------------------------------------
def test_topics_command_reads_the_registry(tmp_path):
    from typer.testing import CliRunner

    from textdp.cli import app
    from textdp.topics.family import sensitivity_note

    runner = CliRunner()
    page = " ".join(runner.invoke(app, ["topics", "--help"], terminal_width=400).output.split())
    assert all(n in page for n in names("topics")) and "--param" in page
    for name in names("topics"):
        res = runner.invoke(app, ["topics", str(tmp_path / "none.jsonl"), "--mechanism", name, "--param", "bogus=1"])
        assert res.exit_code == 2 and f"mechanism '{name}' has no parameter 'bogus'" in res.output
        res = runner.invoke(app, ["topics", str(tmp_path / "none.jsonl"), "--mechanism", name, "--param", "grid=1"])
        assert res.exit_code == 2 and "--grid-bits" in res.output
        cls = mechanism_class(name)
        # the private report's sentence for a mechanism without a sensitivity comes from its class
        assert cls.takes_sensitivity or sensitivity_note(name) == cls.sensitivity_note != ""


def _epsilon_checks(fn) -> list[str]:
    """Spy: the callers of every ``check_epsilon`` call made while ``fn`` runs (``sys.setprofile``)."""
    import sys

    seen: list[str] = []

    def prof(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "check_epsilon" and \
                frame.f_code.co_filename.endswith("_validation.py"):
            back = frame.f_back
            seen.append(f"{back.f_code.co_filename.rsplit('textdp/', 1)[-1]}:{back.f_code.co_name}")

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("name", ALL)
def test_fit_validates_epsilon_once_where_the_calibration_is_built(name, resources):
    mech = get(name, **_params(name, resources))
    seen = _epsilon_checks(mech.fit)
    derived = mechanism_class(name).epsilon_from is not None
    assert seen.count("guarantees/calibration.py:__post_init__") == (0 if derived else 1), seen
    # besides the calibration, only a public noise or calibration function validating its own argument
    assert len(seen) <= 2, seen
