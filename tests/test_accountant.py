"""The accountant composes events: basic always, tighter through dp-accounting, checked against closed forms.

The closed forms here are written independently of dp-accounting: the exact privacy profile of the Gaussian
mechanism (Balle & Wang 2018, Thm. 8) and the zCDP-to-(ε, δ) conversion (Bun & Steinke 2016, Prop. 1.3).
"""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

pytest.importorskip("dp_accounting")

from textdp.accounting.accountant import Charge, compose
from textdp.errors import ParameterError
from textdp.guarantees.events import (
    ApproxEvent,
    ComposedEvent,
    GaussianEvent,
    PureEvent,
    SelfComposedEvent,
    ZCDPEvent,
    event_from_dict,
)


def gaussian_exact_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of the Gaussian mechanism with μ = Δ/σ (Balle & Wang 2018, Thm. 8), solved by bisection."""
    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta
    return brentq(excess, 0.0, 100.0, xtol=1e-12)


def analytic_charge(z: float, delta: float) -> Charge:
    """The (ε, δ) the Gaussian with multiplier z states on its own (what a guarantee would print)."""
    return Charge(GaussianEvent(z), gaussian_exact_epsilon(1 / z, delta), delta)


@pytest.mark.parametrize("z", [1.0, 3.0, 8.0])
def test_two_gaussian_releases_compose_tightly_and_match_the_exact_profile(z):
    delta = 1e-5
    one = analytic_charge(z, delta)
    c = compose([one, one])
    assert c.basic == pytest.approx((2 * one.epsilon, 2 * delta))
    exact = gaussian_exact_epsilon(math.sqrt(2) / z, 2 * delta)  # two Gaussians = one with σ/√2
    assert c.method in {"pld", "rdp"}
    assert c.tight[1] == c.basic[1]
    assert exact - 1e-6 <= c.tight[0] <= exact + 2e-3  # pessimistic PLD: an upper bound, and close
    assert c.tight[0] < 0.8 * c.basic[0]
    assert c.enforced == c.tight


def test_a_wrong_noise_multiplier_is_told_apart():
    """The check bites: an event with twice the noise gives a tight ε far below the true profile."""
    delta = 1e-5
    wrong = compose([Charge(GaussianEvent(6.0), 1.0, delta)] * 2)
    exact_true = gaussian_exact_epsilon(math.sqrt(2) / 3.0, 2 * delta)
    assert wrong.tight[0] < exact_true - 0.3


def test_self_composition_equals_repetition():
    delta = 1e-6
    one = analytic_charge(4.0, delta)
    a = compose([one] * 3)
    b = compose([Charge(SelfComposedEvent(GaussianEvent(4.0), 3), 3 * one.epsilon, 3 * delta),
                 Charge(PureEvent(0.0), 0.0, 0.0)])
    assert a.tight[0] == pytest.approx(b.tight[0], abs=2e-3)


def test_zcdp_route_beats_the_standard_conversion():
    rho, delta = 0.05, 1e-6
    charges = [Charge(ZCDPEvent(rho), rho + 2 * math.sqrt(rho * math.log(1 / delta)), delta)] * 4
    c = compose(charges)
    assert c.method == "rdp"  # the PLD accountant has no zCDP event
    assert c.tight[0] <= 4 * rho + 2 * math.sqrt(4 * rho * math.log(1 / (4 * delta))) + 1e-9
    assert c.tight[0] < c.basic[0]


def test_pure_events_compose_additively_without_delta():
    c = compose([Charge(PureEvent(0.5), 0.5)] * 4)
    assert c == compose([Charge(PureEvent(2.0), 2.0)]) or c.basic == (2.0, 0.0)
    assert c.tight == c.basic == (2.0, 0.0) and c.method == "pure" and "sum" in c.note


def test_mixed_events_never_exceed_basic():
    charges = [Charge(PureEvent(0.3), 0.3), Charge(ApproxEvent(0.5, 1e-6), 0.5, 1e-6),
               analytic_charge(5.0, 1e-6), analytic_charge(5.0, 1e-6)]
    c = compose(charges)
    assert c.tight[0] <= c.basic[0] and c.tight[1] == c.basic[1]


def test_events_round_trip_and_bad_ones_are_refused():
    e = ComposedEvent((PureEvent(1.0), SelfComposedEvent(GaussianEvent(2.5), 4), ZCDPEvent(0.1),
                       ApproxEvent(0.2, 1e-7)))
    assert event_from_dict(e.to_dict()) == e
    with pytest.raises(ParameterError, match="noise_multiplier"):
        GaussianEvent(0.0)
    with pytest.raises(ParameterError, match="count"):
        SelfComposedEvent(PureEvent(1.0), 0)
    with pytest.raises(ParameterError, match="malformed"):
        event_from_dict({"kind": "pure"})


def test_without_dp_accounting_the_bound_is_basic_and_says_why(monkeypatch):
    import sys

    for name in [m for m in sys.modules if m == "dp_accounting" or m.startswith("dp_accounting.")]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now raises ImportError
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    c = compose([analytic_charge(3.0, 1e-5)] * 2)
    assert c.method == "basic" and c.tight == c.basic and "[accounting]" in c.note


# --- the ledger composes with the accountant and enforces the tight bound --------------------------------------
def _dp_bart(epsilon: float = 2.0):
    from textdp.mechanisms import get

    return get("dp-bart", epsilon=epsilon, clip=(-0.1, 0.1), delta=1e-5, max_tokens=4).bound(16)


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    from textdp.accounting.ledger import PrivacyLedger

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))  # the anchors stay in the test's folder
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    return PrivacyLedger(folder / "ledger.jsonl")


def test_two_dp_bart_releases_compose_below_the_sum_and_the_ledger_enforces_it(ledger):
    g = _dp_bart(2.0)
    assert isinstance(g.event, GaussianEvent) and g.to_dict()["event"]["kind"] == "gaussian"
    sigma, sens = g.params["sigma"], g.params["l2_sensitivity"]
    assert g.event.noise_multiplier == pytest.approx(sigma / sens)
    ledger.charge({"d1": g.charge(1), "d2": g.charge(2)}, mechanism="dp-bart", unit="sentence", budget=None)
    comp = ledger.composed()
    assert ledger.spent()["d1"].epsilon == pytest.approx(2.0)
    assert comp["d2"].basic[0] == pytest.approx(4.0) and comp["d2"].tight[0] < 3.3  # two Gaussians, sigma/sqrt(2)
    exact = gaussian_exact_epsilon(math.sqrt(2) / g.event.noise_multiplier, 2e-5)
    assert exact - 1e-6 <= comp["d2"].tight[0] <= exact + 2e-3
    # a budget of 3: d1's second release (sum 4) fits by the tight bound the ledger enforces (2.84), a third not
    ledger.charge({"d1": g.charge(1)}, mechanism="dp-bart", unit="sentence", budget=3.0)
    assert ledger.composed()["d1"].tight[0] <= 3.0 < ledger.spent()["d1"].epsilon
    with pytest.raises(ParameterError, match=r"budget 3 would be exceeded for 1 document\(s\) \(first: 'd1' has "
                                             r"spent 2.8\d+ and would reach 3.4\d"):
        ledger.charge({"d1": g.charge(1)}, mechanism="dp-bart", unit="sentence", budget=3.0)
    assert ledger.spent()["d1"].releases == 2  # nothing recorded by the refused charge


def test_pure_releases_are_held_to_their_sum(ledger):
    ledger.charge({"d": (2.0, 0.0)}, mechanism="dp-prompt", unit="document", budget=3.5)
    with pytest.raises(ParameterError, match="would reach 4 with this release"):
        ledger.charge({"d": (2.0, 0.0)}, mechanism="dp-prompt", unit="document", budget=3.5)


def test_ledger_show_prints_both_bounds_and_which_is_enforced(ledger):
    import json

    from typer.testing import CliRunner

    from textdp.cli import app

    g = _dp_bart(2.0)
    ledger.charge({"d1": g.charge(2)}, mechanism="dp-bart", unit="sentence", budget=None)
    res = CliRunner().invoke(app, ["ledger", "show", str(ledger.path)])
    assert res.exit_code == 0, res.output
    head, row = res.output.splitlines()[:2]
    assert head.split() == ["document", "releases", "epsilon", "tight", "delta"]
    assert row.split()[:3] == ["d1", "1", "4"] and float(row.split()[3]) < 3.3
    assert "--budget is enforced on tight" in res.output
    res = CliRunner().invoke(app, ["ledger", "show", "--json", str(ledger.path)])
    doc = json.loads(res.output)["documents"]["d1"]
    assert doc["epsilon"] == pytest.approx(4.0) and doc["tight_epsilon"] < 3.3 and doc["method"] in {"pld", "rdp"}


def test_old_ledger_lines_without_events_still_verify_and_count(ledger):
    """A line written before events existed hashes the same and counts as a pure release."""
    ledger.charge({"d": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=None)
    raw = ledger.path.read_text(encoding="utf-8")
    assert "privacy_event" not in raw
    assert ledger.composed()["d"].basic == (1.0, 0.0)


def test_topicdp_states_its_zcdp_event_only_when_its_sensitivity_is_proven():
    from textdp.mechanisms import ReleaseContext, get

    shape = ReleaseContext(shape=(3, 4))
    proven = get("topicdp", epsilon=1.0, delta=1e-5, sensitivity=0.5).guarantee(shape)
    sampled = get("topicdp", epsilon=1.0, delta=1e-5, sensitivity=0.5, gamma=0.01).guarantee(shape)
    assert sampled.event == ApproxEvent(sampled.epsilon, sampled.delta)
    assert proven.event == ZCDPEvent(proven.event.rho) and proven.to_dict()["event"]["kind"] == "zcdp"
    # two releases compose below the sum by the zCDP route, as the thesis' accounting would not
    c = compose([Charge(proven.event, proven.epsilon, proven.delta)] * 2)
    assert c.method == "rdp" and c.tight[0] < c.basic[0]
