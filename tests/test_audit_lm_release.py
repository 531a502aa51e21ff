"""The LM rewriters' audit cases sample their own release path (tiny random models built here, never downloaded).

Each case goes through ``textdp.mechanisms.get(name).fit()`` and ``privatize_batch``; the claim and the
reference law come from public parameters and from the model run again by the audit (audit/lm_reference.py).
The real loops pass at fixed seeds; loops patched with a planted error (ε×3 inside the temperature, clipping
removed, no noise; DP-BART: σ/2, clipping removed) are flagged by the privacy tests (event or curve), and the
conformance test rejects a wrong law (temperature ×2) on the real release. DP-BART runs on its probe model
(audit/lm_models.py's GaussianProbe), whose greedy decode reads the noisy encoder rows in one direction only.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from textdp._rng import make_rng
from textdp.audit import audit_case, run_audit
from textdp.audit.conformance import chi2_goodness_of_fit
from textdp.audit.lm_models import tiny_model
from textdp.audit.lm_options import LM_RELEASE_DEFAULTS
from textdp.audit.lm_reference import ReferenceLM
from textdp.audit.lm_release import lm_release_case

TOKEN_LEVEL = ("dp-prompt", "dp-paraphrase", "dp-mlm")
SAMPLES = 3000


@pytest.fixture(scope="module")
def cases():
    return {name: lm_release_case(name) for name in (*TOKEN_LEVEL, "dp-bart")}


def _patch_generation(monkeypatch, attr, replacement):
    """Replace ``attr`` in every loaded module of textdp.generation that binds the same object (the loop's own)."""
    from textdp.generation import decoding, lm_decode  # noqa: F401  (loaded, so the loop's modules are found)

    original = None
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("textdp.generation") and hasattr(mod, attr):
            original = original or getattr(mod, attr)
    assert original is not None, f"no textdp.generation module binds {attr}"
    hits = 0
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("textdp.generation") and getattr(mod, attr, None) is original:
            monkeypatch.setattr(mod, attr, replacement(original))
            hits += 1
    assert hits
    return original


def _epsilon_times(factor):
    def wrap(step):
        def planted(scores, rng, *, epsilon, **kw):
            return step(scores, rng, epsilon=epsilon * factor, **kw)
        return planted
    return wrap


def _unclipped(_original):
    def planted(scores, *, epsilon, bounds, allowed=None):  # temperature 2*Delta/epsilon, nothing clipped
        logw = torch.as_tensor(scores).to(torch.float64, copy=True) * (epsilon / (2.0 * bounds.width))
        if allowed is not None:
            logw = logw.masked_fill(~torch.as_tensor(allowed, dtype=torch.bool).expand_as(logw), -math.inf)
        return logw - logw.max(dim=1, keepdim=True).values
    return planted


def test_the_registered_cases_are_the_release_path_cases():
    case = audit_case("dp-prompt")
    assert "privatize_batch" in case.pair and case.conformance is not None and case.curve is not None
    assert case.claimed_epsilon == LM_RELEASE_DEFAULTS["dp-prompt"].max_new_tokens * 2.0


def test_the_case_draws_through_privatize_batch(cases, monkeypatch):
    from textdp.mechanisms.base import Mechanism

    calls = []
    real = Mechanism.privatize_batch

    def spy(self, units, *args, **kwargs):
        calls.append((self.name, len(list(units))))
        return real(self, units, *args, **kwargs)

    # the rewriters inherit the one batch verb: spying on the base sees every release
    monkeypatch.setattr(Mechanism, "privatize_batch", spy)
    for name, case in cases.items():
        out = case.sample(case.input_a, 7, make_rng(0))
        assert out.shape == (7,) and (name, 7) in calls


@pytest.mark.parametrize("name", [*TOKEN_LEVEL, "dp-bart"])
def test_real_loops_pass_every_test_at_a_fixed_seed(cases, name):
    r = run_audit(cases[name], samples=SAMPLES, seed=29, conformance=True)
    assert r.passed and r.curve is not None and r.conformance is not None, r.to_dict()


@pytest.mark.parametrize("name", TOKEN_LEVEL)
def test_epsilon_times_three_inside_the_loop_is_flagged_by_the_privacy_curve(cases, name, monkeypatch):
    _patch_generation(monkeypatch, "exponential_step", _epsilon_times(3.0))
    r = run_audit(cases[name], samples=SAMPLES, seed=29)
    assert not r.privacy_passed and r.curve is not None and not r.curve.passed, r.to_dict()


@pytest.mark.parametrize("name", ["dp-prompt", pytest.param("dp-paraphrase", marks=pytest.mark.slow),
                                  pytest.param("dp-mlm", marks=pytest.mark.slow)])
def test_clipping_removed_inside_the_loop_is_flagged(cases, name, monkeypatch):
    _patch_generation(monkeypatch, "clipped_log_weights", _unclipped)
    r = run_audit(cases[name], samples=SAMPLES, seed=29, conformance=True)
    assert not r.passed and r.conformance is not None and not r.conformance.passed, r.to_dict()


def test_greedy_decoding_without_noise_is_flagged(cases, monkeypatch):
    def greedy(_step):
        def planted(scores, rng, *, allowed=None, **kw):
            s = torch.as_tensor(scores).double()
            if allowed is not None:
                s = s.masked_fill(~torch.as_tensor(allowed, dtype=torch.bool).expand_as(s), -math.inf)
            return s.argmax(1)
        return planted

    _patch_generation(monkeypatch, "exponential_step", greedy)
    for name in TOKEN_LEVEL:
        r = run_audit(cases[name], samples=1000, seed=29)
        assert not r.privacy_passed and r.lower_bound > r.claimed_epsilon, (name, r.to_dict())


def test_dp_bart_without_noise_is_flagged_by_the_privacy_tests(cases, monkeypatch):
    """DP-BART's clip-and-noise patched to add no noise: the greedy decodes of the two sentences differ."""
    def noiseless(original):
        def planted(hidden, bounds, sigma, rng):
            return original(hidden, bounds, 0.0, rng)
        return planted

    _patch_generation(monkeypatch, "clip_and_noise", noiseless)
    r = run_audit(cases["dp-bart"], samples=SAMPLES, seed=29, conformance=True)
    assert not r.privacy_passed and r.lower_bound > r.claimed_epsilon, r.to_dict()
    assert r.conformance is not None and not r.conformance.passed


def test_conformance_rejects_a_wrong_law_on_the_real_release(cases):
    """The real dp-paraphrase release fits the reference table at its epsilon, not at temperature x2 or unclipped."""
    case = cases["dp-paraphrase"]
    ids = case.sample(case.input_a, SAMPLES, make_rng(3))
    right = case.conformance.table(case.input_a)
    assert chi2_goodness_of_fit(ids, right)[1] > 1e-3
    _, model = tiny_model("seq2seq")
    d = LM_RELEASE_DEFAULTS["dp-paraphrase"]
    for eps, clip in ((d.epsilon / 2.0, d.clip), (d.epsilon * 20.0, (-20.0, 20.0))):  # temperature x2; no clipping
        wrong = ReferenceLM(d, model, epsilon=eps, clip=clip, length=d.max_new_tokens, max_tokens=8)
        p = np.append(np.exp(wrong.log_table(str(case.input_a))), 0.0)
        assert chi2_goodness_of_fit(ids, p)[1] < 1e-4, (eps, clip)


def test_the_tiny_models_are_deterministic_and_leave_torch_global_generator_alone():
    state = torch.random.get_rng_state()
    _, m1 = tiny_model("causal", seed=5)
    assert torch.equal(state, torch.random.get_rng_state())
    from textdp.audit import lm_models

    lm_models._BUILT.pop(("causal", 5))
    _, m2 = tiny_model("causal", seed=5)
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True))


def _sigma_times(factor):
    def wrap(original):
        def planted(hidden, bounds, sigma, rng):
            return original(hidden, bounds, sigma * factor, rng)
        return planted
    return wrap


def _noise_only(_original):
    def planted(hidden, bounds, sigma, rng):  # DP-BART with the clipping removed
        h = torch.as_tensor(hidden).to(torch.float64)
        return h + float(sigma) * torch.from_numpy(rng.standard_normal(tuple(h.shape)))
    return planted


def test_dp_bart_is_audited_on_its_probe_model_against_the_exact_law(cases):
    """The probe's decode reads the noisy rows through one direction only, so the released law is exact."""
    from textdp.audit.lm_models import bart_probe, probe_model

    case = cases["dp-bart"]
    assert "probe BART model" in case.pair and case.conformance.kind == "table" and case.curve.loss is not None
    pa, pb = case.conformance.table(case.input_a), case.conformance.table(case.input_b)
    assert abs(pa.sum() - 1.0) < 1e-9 and abs(pb.sum() - 1.0) < 1e-9 and (pa > 1e-4).sum() >= 10
    d = LM_RELEASE_DEFAULTS["dp-bart"]
    probe = bart_probe(d.epsilon, d.delta, d.clip, "mean", (case.input_a, case.input_b))
    _, model = probe_model(probe)
    ref = ReferenceLM(d, model, epsilon=d.epsilon, clip=d.clip, length=d.max_new_tokens, max_tokens=8, delta=d.delta)
    rng = make_rng(4)
    u = probe.direction
    states = rng.normal(0.0, ref.sigma, (64, 8, 16))
    along = (states @ u)[..., None] * u / (u @ u)  # the read-out direction u in every row
    orthogonal = rng.normal(0.0, ref.sigma, states.shape)
    orthogonal -= (orthogonal @ u)[..., None] * u / (u @ u)
    base = ref.greedy(states)
    assert np.array_equal(ref.greedy(along + orthogonal), base)  # nothing orthogonal to u is read
    assert len(set(base.tolist())) > 5 and not np.array_equal(ref.greedy(states + 3.0 * u / 8), base)


def test_dp_bart_half_sigma_is_flagged_by_the_privacy_curve_and_the_conformance_test(cases, monkeypatch):
    _patch_generation(monkeypatch, "clip_and_noise", _sigma_times(0.5))
    r = run_audit(cases["dp-bart"], samples=SAMPLES, seed=29, conformance=True)
    assert not r.privacy_passed and not r.curve.passed and not r.conformance.passed, r.to_dict()


def test_dp_bart_without_clipping_is_flagged(cases, monkeypatch):
    """The probe's encoder rows are +-5 against the clip +-1: unclipped, the sentences' difference is 5x."""
    _patch_generation(monkeypatch, "clip_and_noise", _noise_only)
    r = run_audit(cases["dp-bart"], samples=SAMPLES, seed=29)
    assert not r.privacy_passed and r.lower_bound > r.claimed_epsilon, r.to_dict()


@pytest.mark.slow
def test_dp_bart_real_loop_passes_at_the_default_samples():
    """Seeds 1000-1009 (docs/audit.md): the privacy tests never flag the real loop; the conformance test (level
    2.5 %) flags seed 1002 (p = 0.023), and two false alarms in ten would have probability 2.6 %."""
    results = [run_audit(audit_case("dp-bart"), seed=seed, conformance=True) for seed in range(1000, 1010)]
    assert all(r.privacy_passed for r in results), [r.to_dict() for r in results if not r.privacy_passed]
    assert sum(not r.conformance.passed for r in results) <= 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1000, 1008))
def test_dp_bart_sigma_times_0_8_is_flagged_at_the_default_samples(seed, monkeypatch):
    _patch_generation(monkeypatch, "clip_and_noise", _sigma_times(0.8))
    r = run_audit(audit_case("dp-bart"), seed=seed)
    assert not r.privacy_passed, r.to_dict()


# issue 41: max_new_tokens (dp-prompt, dp-paraphrase) and copy_stopwords (dp-mlm) are --param options of the cases
@pytest.mark.parametrize("name", ["dp-prompt-3-tokens", "dp-paraphrase-1-token", "dp-mlm-copy-stopwords"])
def test_option_cases_pass_and_flag_epsilon_times_three(name, monkeypatch):
    case = audit_case(name)
    r = run_audit(case, samples=10_000, seed=1, conformance=True)
    assert r.passed and r.curve is not None and r.conformance is not None, r.to_dict()
    _patch_generation(monkeypatch, "exponential_step", _epsilon_times(3.0))
    bad = run_audit(case, samples=10_000, seed=1)
    assert not bad.privacy_passed, bad.to_dict()


def test_the_option_claims_are_the_audits_own():
    # n steps compose to n*epsilon; dp-mlm's copied stop word costs nothing (two of three tokens drawn)
    assert audit_case("dp-prompt", params={"max_new_tokens": "3"}).claimed_epsilon == 3 * 2.0
    assert audit_case("dp-paraphrase", params={"max_new_tokens": "1"}).claimed_epsilon == 2.0
    copy = audit_case("dp-mlm", params={"copy_stopwords": "true"})
    assert copy.claimed_epsilon == 2 * 2.0 and copy.input_a.split()[0] == "the" == copy.input_b.split()[0]


@pytest.mark.parametrize(("name", "params", "match"), [
    ("dp-prompt", {"max_new_tokens": "4"}, "from 1 to 3"),
    ("dp-prompt", {"max_new_tokens": "0"}, "from 1 to 3"),
    ("dp-paraphrase", {"max_new_tokens": "two"}, "whole number"),
    ("dp-mlm", {"max_new_tokens": "2"}, "not max_new_tokens"),
    ("dp-prompt", {"copy_stopwords": "true"}, "not copy_stopwords"),
])
def test_option_values_the_audit_cannot_take_are_refused_in_one_line(name, params, match):
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match=match) as e:
        audit_case(name, params=params)
    assert "\n" not in str(e.value)


def test_stopping_and_tidy_are_post_processing_checked_by_the_privacy_tests(monkeypatch):
    # stop, repeat_ngram and tidy on (issue 41): the release is post-processing of the 3-token law, so the
    # claim 3*epsilon and that law's exact profile still bound it; no conformance table (the law is not undone)
    case = audit_case("dp-prompt-stopping")
    assert case.conformance is None and case.claimed_epsilon == 3 * 2.0 and "stop='.'" in case.pair
    r = run_audit(case, samples=10_000, seed=1)
    assert r.passed and r.curve is not None and r.curve.passed, r.to_dict()
    _patch_generation(monkeypatch, "exponential_step", _epsilon_times(3.0))
    bad = run_audit(case, samples=10_000, seed=1)
    assert not bad.privacy_passed, bad.to_dict()


def test_stopping_options_are_dp_prompts_only():
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match="not stop"):
        audit_case("dp-paraphrase", params={"stop": "."})
    with pytest.raises(ParameterError, match="whole number"):
        audit_case("dp-prompt", params={"repeat_ngram": "two"})
    assert "repeat_ngram=None" in audit_case("dp-prompt", params={"repeat_ngram": "none", "tidy": "true"}).pair


def test_dp_bart_max_new_tokens_passes_and_half_sigma_is_flagged(monkeypatch):
    # max_new_tokens of dp-bart (issue 41): the probe decodes n tokens from the same noisy encoder output
    case = audit_case("dp-bart", params={"max_new_tokens": "3"})
    assert "3 tokens" in case.pair and case.claimed_epsilon == LM_RELEASE_DEFAULTS["dp-bart"].epsilon
    r = run_audit(case, samples=10_000, seed=1, conformance=True)
    assert r.passed and r.conformance is not None, r.to_dict()
    _patch_generation(monkeypatch, "clip_and_noise", _sigma_times(0.5))
    bad = run_audit(case, samples=10_000, seed=1, conformance=True)
    assert not bad.privacy_passed and not bad.passed, bad.to_dict()
