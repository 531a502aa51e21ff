"""ER-AE's audit case samples its own release path (a tiny textdp model trained here, never downloaded).

The case goes through ``textdp.mechanisms.get("er-ae").fit(model=...)`` and ``privatize_batch`` on neighbouring
texts; the claim comes from the audit's accountant and the reference law from the model run again with the
two-set law enumerated exactly (audit/generation.py). The real loop passes at a fixed seed; the loop patched with
ε×3 or ε×1.5 inside its step, or with no noise (argmax), is flagged, and the step law is checked against the
library's own step with a wrong law (ε×2) rejected.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from textdp._rng import make_rng
from textdp.audit import audit_case, run_audit
from textdp.audit.accountant import two_set_per_token
from textdp.audit.conformance import chi2_goodness_of_fit
from textdp.audit.generation import (
    ER_AE_DEFAULT_EPSILON,
    ER_AE_MAX_LENGTH,
    er_ae_case,
    sequence_law,
    tiny_er_ae_model,
    two_set_step_law,
)

SEED = 29


@pytest.fixture(scope="module")
def case():
    return er_ae_case()


def _planted_step(monkeypatch, factor=None):
    """Patch the step the release loop calls (generation/rewriter.py's ``two_set_step``)."""
    import textdp.generation.rewriter as rewriter

    real = rewriter.two_set_step

    def planted(logp, rng, *, epsilon_set, epsilon_word, **kw):
        if factor is None:  # no noise: the model's most likely token
            return logp.argmax(dim=1)
        return real(logp, rng, epsilon_set=factor * epsilon_set, epsilon_word=factor * epsilon_word, **kw)

    monkeypatch.setattr(rewriter, "two_set_step", planted)


def test_the_registered_case_draws_through_privatize_batch(case, monkeypatch):
    from textdp.mechanisms.base import Mechanism

    registered = audit_case("er-ae")
    assert "privatize_batch" in registered.pair and registered.curve is not None and registered.conformance is not None
    calls = []
    real = Mechanism.privatize_batch

    def spy(self, units, *args, **kwargs):
        units = list(units)
        calls.append((self.name, len(units)))
        return real(self, units, *args, **kwargs)

    monkeypatch.setattr(Mechanism, "privatize_batch", spy)
    out = case.sample(case.input_a, 7, make_rng(0))
    assert out.shape == (7,) and calls == [("er-ae", 7)]


def test_the_claim_is_the_accountants_bound_over_the_steps(case):
    # 8 words and the end token; L_max steps, each at most the per-token bound (audit/accountant.py)
    assert case.claimed_epsilon == pytest.approx(ER_AE_MAX_LENGTH * two_set_per_token(ER_AE_DEFAULT_EPSILON, 9))
    assert case.claimed_delta == 0.0


def test_the_step_law_matches_the_librarys_step_and_rejects_a_wrong_law():
    """χ² of the library's ``two_set_step`` on a non-degenerate p against the law enumerated here; ε×2 rejected."""
    from textdp.generation.sampling import two_set_step

    p = np.array([0.0, 0.45, 0.25, 0.12, 0.08, 0.05, 0.03, 0.02])  # token 0 banned, the rest allowed
    allowed = p > 0
    eps, n = 5.0, 40_000
    logp = torch.log(torch.from_numpy(p))[None, :].expand(n, -1).contiguous()
    ids = two_set_step(logp, make_rng(4), epsilon_set=0.9 * eps, epsilon_word=0.1 * eps,
                       allowed=torch.from_numpy(allowed)).numpy()
    right = two_set_step_law(p, allowed, eps)
    assert right[0] == 0.0 and math.isclose(right.sum(), 1.0)
    assert chi2_goodness_of_fit(ids, right)[1] > 1e-3
    assert chi2_goodness_of_fit(ids, two_set_step_law(p, allowed, 2.0 * eps))[1] < 1e-6


def test_real_loop_passes_every_test_at_a_fixed_seed(case):
    r = run_audit(case, seed=SEED, conformance=True)
    assert r.passed and r.curve is not None and r.curve.passed and r.conformance is not None, r.to_dict()


@pytest.mark.parametrize("factor", [3.0, 1.5])
def test_epsilon_planted_inside_the_loop_is_flagged(case, monkeypatch, factor):
    _planted_step(monkeypatch, factor)
    r = run_audit(case, seed=SEED, conformance=True)
    assert not r.privacy_passed and r.curve is not None and not r.curve.passed, r.to_dict()
    assert r.conformance is not None and not r.conformance.passed


def test_the_loop_with_no_noise_is_flagged(case, monkeypatch):
    _planted_step(monkeypatch, None)
    r = run_audit(case, samples=1_000, seed=SEED, conformance=True)
    assert not r.privacy_passed and not r.passed, r.to_dict()
    assert r.conformance is not None and not r.conformance.passed


def test_the_tiny_model_is_deterministic_and_leaves_torch_global_generator_alone():
    from textdp.audit import generation

    state = torch.random.get_rng_state()
    first = sequence_law(tiny_er_ae_model(seed=3), "cat sat", 5.0)[0]
    generation._BUILT.pop((3, "er-ae"))
    second = sequence_law(tiny_er_ae_model(seed=3), "cat sat", 5.0)[0]
    assert torch.equal(state, torch.random.get_rng_state())
    assert np.array_equal(first, second) and math.isclose(float(np.exp(first).sum()), 1.0)


# issue 41: word_fraction and k are --param options of the case (the claim and the step law take them)
def test_word_fraction_and_k_pass_and_a_planted_epsilon_times_three_is_flagged(monkeypatch):
    case = audit_case("er-ae", params={"word_fraction": "0.3", "k": "3"})
    assert math.isclose(case.claimed_epsilon, ER_AE_MAX_LENGTH * two_set_per_token(
        ER_AE_DEFAULT_EPSILON, 9, word_fraction=0.3, k=3))  # 8 words and the end token
    r = run_audit(case, seed=2, conformance=True)
    assert r.passed and r.curve is not None and r.conformance is not None, r.to_dict()
    _planted_step(monkeypatch, 3.0)
    bad = run_audit(case, seed=2)
    assert not bad.privacy_passed, bad.to_dict()


@pytest.mark.parametrize(("params", "match"), [({"k": "9"}, "from 1 to 8"), ({"k": "x"}, "whole number"),
                                               ({"word_fraction": "1"}, r"in \(0, 1\)"),
                                               ({"variant": "beam"}, "variant must be one of"),
                                               ({"seed": "3"}, "not seed")])
def test_er_ae_values_the_audit_cannot_take_are_refused_in_one_line(params, match):
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match=match) as e:
        audit_case("er-ae", params=params)
    assert "\n" not in str(e.value)


def test_teacher_forced_er_ae_passes_and_a_planted_epsilon_times_three_is_flagged(monkeypatch):
    case = audit_case("er-ae", params={"variant": "teacher-forced"})
    assert "teacher-forced" in case.pair
    r = run_audit(case, seed=2, conformance=True)
    assert r.passed and r.curve is not None and r.conformance is not None, r.to_dict()
    _planted_step(monkeypatch, 3.0)
    bad = run_audit(case, seed=2)
    assert not bad.privacy_passed, bad.to_dict()
