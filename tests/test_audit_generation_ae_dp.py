"""AE-DP's audit case samples its own release path (a tiny textdp model trained here on reconstruction).

The case goes through ``textdp.mechanisms.get("ae-dp").fit(model=...)`` and ``privatize_batch`` on neighbouring
texts; the claim is ``L_max`` times the audit accountant's exponential-mechanism bound (never ``em_bound``) and the
reference law is the model run again with each step's exponential mechanism written again (audit/generation.py,
``em_step_law``). The real loop passes at a fixed seed; the loop with ε×3 or ε×1.5 inside its step, or with no noise
(argmax), is flagged; the step law matches the library's step and a wrong law (ε×2) is rejected. Before this case,
``textdp audit ae-dp`` was a one-line "NOT AUDITED" error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from textdp._rng import make_rng
from textdp.audit import audit, audit_case, run_audit
from textdp.audit.accountant import exponential_per_token
from textdp.audit.conformance import chi2_goodness_of_fit
from textdp.audit.generation import (
    AE_DP_DEFAULT_EPSILON,
    ER_AE_MAX_LENGTH,
    ae_dp_case,
    em_step_law,
    tiny_model,
)

SEED = 29


@pytest.fixture(scope="module")
def case():
    return ae_dp_case()


def _planted_step(monkeypatch, factor=None):
    """Patch the step AE-DP's release loop calls (generation/rewriter.py's ``em_step``)."""
    import textdp.generation.rewriter as rewriter

    real = rewriter.em_step

    def planted(logp, rng, *, epsilon):
        if factor is None:  # no noise: the model's most likely token
            return logp.argmax(dim=1)
        return real(logp, rng, epsilon=factor * epsilon)

    monkeypatch.setattr(rewriter, "em_step", planted)


def test_the_registered_case_draws_through_privatize_batch_on_a_reconstruction_model(case, monkeypatch):
    import json

    from textdp.mechanisms.base import Mechanism

    registered = audit_case("ae-dp")
    assert registered.mechanism == "ae-dp" and "privatize_batch" in registered.pair
    assert registered.curve is not None and registered.conformance is not None
    card = json.loads((tiny_model(objective="reconstruction") / "card.json").read_text())
    assert "reconstruction" in card["model"]  # AE-DP's model, as `textdp rewrite --mechanism ae-dp` requires
    calls = []
    real = Mechanism.privatize_batch

    def spy(self, units, *args, **kwargs):
        units = list(units)
        calls.append((self.name, len(units)))
        return real(self, units, *args, **kwargs)

    monkeypatch.setattr(Mechanism, "privatize_batch", spy)
    out = case.sample(case.input_a, 7, make_rng(0))
    assert out.shape == (7,) and calls == [("ae-dp", 7)]


def test_the_claim_is_the_accountants_bound_and_ignores_the_mechanisms_calibration(monkeypatch):
    import textdp.generation.rewriter as rewriter
    from textdp.mechanisms import get

    folder = str(tiny_model(objective="reconstruction"))
    assert ae_dp_case().claimed_epsilon == pytest.approx(ER_AE_MAX_LENGTH * AE_DP_DEFAULT_EPSILON)
    assert exponential_per_token(AE_DP_DEFAULT_EPSILON / 2, 1.0) == AE_DP_DEFAULT_EPSILON
    stated = get("ae-dp", epsilon=AE_DP_DEFAULT_EPSILON, model=folder).fit().guarantee().epsilon
    real = rewriter.em_guarantee
    monkeypatch.setattr(rewriter, "em_guarantee", lambda name, eps, **kw: real(name, 3.0 * eps, **kw))
    planted = get("ae-dp", epsilon=AE_DP_DEFAULT_EPSILON, model=folder).fit().guarantee().epsilon
    assert planted == pytest.approx(3.0 * stated)  # the mechanism's own statement moved ...
    assert ae_dp_case().claimed_epsilon == pytest.approx(ER_AE_MAX_LENGTH * AE_DP_DEFAULT_EPSILON)  # ... the claim not


def test_the_step_law_matches_the_librarys_step_and_rejects_a_wrong_law():
    """χ² of the library's ``em_step`` on a non-degenerate p against the law written here; ε×2 rejected."""
    from textdp.generation.sampling import em_step

    p = np.array([0.0, 0.45, 0.25, 0.12, 0.08, 0.05, 0.03, 0.02])  # token 0 banned, the rest allowed
    eps, n = 5.0, 40_000
    logp = torch.log(torch.from_numpy(p))[None, :].expand(n, -1).contiguous()
    ids = em_step(logp, make_rng(4), epsilon=eps).numpy()
    right = em_step_law(p, p > 0, eps)
    assert right[0] == 0.0 and math.isclose(right.sum(), 1.0)
    assert chi2_goodness_of_fit(ids, right)[1] > 1e-3
    assert chi2_goodness_of_fit(ids, em_step_law(p, p > 0, 2.0 * eps))[1] < 1e-6


def test_real_loop_passes_every_test_at_a_fixed_seed(case):
    r = run_audit(case, seed=SEED, conformance=True)
    assert r.passed and r.curve is not None and r.curve.passed and r.conformance is not None, r.to_dict()


@pytest.mark.parametrize("factor", [3.0, pytest.param(1.5, marks=pytest.mark.slow)])
def test_epsilon_planted_inside_the_loop_is_flagged(case, monkeypatch, factor):
    _planted_step(monkeypatch, factor)
    r = run_audit(case, seed=SEED, conformance=True)
    assert not r.privacy_passed and r.curve is not None and not r.curve.passed, r.to_dict()
    assert r.conformance is not None and not r.conformance.passed
    assert r.lower_bound <= r.claimed_epsilon  # the loose worst-case event alone does not see it


def test_the_loop_with_no_noise_is_flagged(monkeypatch):
    assert audit("ae-dp", samples=1_000, seed=2, conformance=True).passed
    _planted_step(monkeypatch, None)
    r = audit("ae-dp", samples=1_000, seed=2, conformance=True)
    assert not r.privacy_passed and not r.passed, r.to_dict()
    assert r.conformance is not None and not r.conformance.passed


@pytest.mark.parametrize(("scale", "width"), [(2.5, 1.0), (0.75, 2.0), (0.1, 3.0)])
def test_the_accountants_exponential_bound_holds_and_is_attained(scale, width):
    """``2 scale width`` bounds every output's log ratio, and a large alphabet comes within 1e-3 of it."""
    rng = make_rng(11)
    bound = exponential_per_token(scale, width)
    for _ in range(200):  # random neighbouring score vectors in [0, width]
        u_a, u_b = rng.uniform(0, width, (2, 20))
        la, lb = scale * u_a - np.logaddexp.reduce(scale * u_a), scale * u_b - np.logaddexp.reduce(scale * u_b)
        assert float(np.max(la - lb)) <= bound + 1e-12
    v = 10**7  # u_a = (width, 0, ..., 0), u_b = (0, width, ..., width): the ratio of output 0 tends to e^(2 s w)
    worst = scale * width - math.log(math.exp(scale * width) + v - 1) + math.log(1 + (v - 1) * math.exp(scale * width))
    assert worst <= bound and worst == pytest.approx(bound, abs=1e-3)


# issue 41: variant=teacher-forced is a --param option (the reference law feeds the text's tokens)
def test_teacher_forced_passes_and_a_planted_epsilon_times_three_is_flagged(monkeypatch):
    import dataclasses

    case = audit_case("ae-dp", params={"variant": "teacher-forced"})
    assert "teacher-forced" in case.pair
    r = run_audit(case, samples=10_000, seed=1, conformance=True)
    assert r.passed and r.curve is not None and r.conformance is not None, r.to_dict()
    # the law is the variant's own: the autoregressive table rejects the teacher-forced release
    plain = audit_case("ae-dp")
    assert (plain.input_a, plain.input_b) == (case.input_a, case.input_b)
    wrong = run_audit(dataclasses.replace(plain, sample=case.sample), samples=10_000, seed=1, conformance=True)
    assert wrong.conformance is not None and not wrong.conformance.passed
    _planted_step(monkeypatch, 3.0)
    bad = run_audit(case, samples=10_000, seed=1)
    assert not bad.privacy_passed, bad.to_dict()


def test_a_variant_the_mechanism_lacks_is_refused_in_one_line():
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match="variant must be one of") as e:
        audit_case("ae-dp", params={"variant": "beam"})
    assert "\n" not in str(e.value)
