"""The audit samples what is released, and its claims come from its own accountant (issue 29).

Every bug below is planted from the test side, in the mechanisms' own functions (never in the
audit): each family's release primitive returns its input (no noise at all), a calibration
function is off by a factor, or ε×3 sits in Earth Mover's release function only. On a779fc6 the
topic cases sampled the declared law instead of ``randomize`` (no-noise passed), the claims called
the same calibration functions as the samplers (a planted factor moved both), and the curve of
earth-movers, cmp, mahalanobis and vickrey sampled ``noisy_vectors`` (ε×3 in ``privatize_ids``
passed). Each test here fails there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import textdp.mechanisms.earth_movers as em_module
from textdp.audit import audit, audit_case, audit_case_names
from textdp.audit import power as audit_power
from textdp.audit.lm import KNOWN_BAD
from textdp.mechanisms.word_level import WordLevelMechanism

#: The sentence cases (tested by their own no-noise tests below, in test_lm_audit.py, test_audit_generation_ae_dp.py
#: and test_audit_sentence_release.py).
LM = ("dp-bart", "dp-mlm", "dp-paraphrase", "dp-prompt", "dp-prompt-prior", "dp-prompt-public-top-k",
      "dp-prompt-3-tokens", "dp-paraphrase-1-token", "dp-mlm-copy-stopwords", "dp-prompt-stopping", "dp-bart-3-tokens", "er-ae", "er-ae-k3", "er-ae-teacher-forced", "ae-dp",
      "ae-dp-teacher-forced",
      "syntf-sentence", "random-sentence")
#: Every other registered case: its release primitive a test below replaces with the identity (a new case is
#: covered without an entry here).
NON_LM = tuple(n for n in audit_case_names() if n not in {*LM, *KNOWN_BAD})
TOPICS = ("laplace", "mvg", "mvg-directional", "topicdp", "topicdp-thesis")
#: Seed overrides of the no-noise test: seed 4 is topicdp-thesis-covered's nominal conformance false alarm
#: (p = 0.013 at its 2.5% level; 2 of 30 seeds at 300 releases, as the level allows).
SEEDS = {"topicdp-thesis-covered": 5}


def _no_noise(monkeypatch) -> None:
    """Every family's release primitive returns its input: no noise anywhere."""
    import textdp.mechanisms.syntf as syntf_module
    import textdp.topics.cooccurrence as cooccurrence_module
    import textdp.topics.noise as topic_module
    import textdp.topics.spectral as spectral_module

    monkeypatch.setattr(em_module, "privatize_ids", lambda ids, *a, **k: np.sort(np.asarray(ids), axis=-1))
    monkeypatch.setattr(WordLevelMechanism, "privatize_ids", lambda self, ids, rng=None: np.asarray(ids))
    monkeypatch.setattr(syntf_module, "sample_bags",
                        lambda rows, weights, v, eps, n, rng: np.stack([np.resize(np.asarray(r), n) for r in rows]))
    monkeypatch.setattr(topic_module.GridNoise, "randomize",
                        lambda self, matrix, seed=None: np.asarray(matrix, dtype=np.float64))
    for module in (cooccurrence_module, spectral_module):  # the corpus topic mechanisms' noise on their statistics
        monkeypatch.setattr(module, "gaussian_noise", lambda shape, sigma, rng: np.zeros(shape))


def test_the_topic_cases_never_sample_the_declared_law(monkeypatch):
    # the exact-law shortcut is for power studies only: the cases sample through privatize_batch
    def refuse(*a, **k):
        raise AssertionError("the audit drew from the declared law")

    monkeypatch.setattr(audit_power, "exact_law_releases", refuse)
    for name in TOPICS:
        r = audit(name, samples=200, seed=1)
        assert r.passed, name


@pytest.mark.parametrize("name", NON_LM)
def test_a_release_with_no_noise_is_flagged(monkeypatch, name):
    # seed 4: each real case passes (the conformance tests' level is 2.5 %, so some seed fails some case; with the
    # topic batches drawn in one call, seed 3 was mvg's false alarm, p = 0.007)
    seed = SEEDS.get(name, 4)
    ok = audit(name, samples=300, seed=seed, conformance=True)
    assert ok.passed, (name, ok)
    _no_noise(monkeypatch)
    bad = audit(name, samples=300, seed=seed, conformance=True)
    assert not bad.privacy_passed and not bad.passed, (name, bad)
    assert not bad.conformance.passed, name


def test_every_registered_case_but_the_language_models_is_covered_above():
    lm = {*LM, *KNOWN_BAD}
    assert lm <= set(audit_case_names())  # the cases left out are registered (no stale name)
    assert set(audit_case_names()) - lm == set(NON_LM)  # ... and they are exactly the ones left out
    assert {"cmp", "earth-movers", "syntf", "topicdp", "random"} <= set(NON_LM)


def test_er_ae_with_no_noise_is_flagged(monkeypatch):
    pytest.importorskip("torch")
    import textdp.generation.rewriter as gen_audit  # the release loop's own step (audit/generation.py)

    assert audit("er-ae", samples=1_000, seed=2).passed

    def argmax_step(logp, rng, **kw):  # the input word itself
        return logp.argmax(dim=1)

    monkeypatch.setattr(gen_audit, "two_set_step", argmax_step)
    assert not audit("er-ae", samples=1_000, seed=2).passed


# -- epsilon x3 in Earth Mover's release function only (issue 29, failure 3) ------------------------------------
def test_triple_epsilon_in_earth_movers_release_function_is_flagged(monkeypatch):
    ok = audit("earth-movers", samples=10_000, seed=5, conformance=True)
    assert ok.passed and ok.curve.passed and ok.conformance.passed
    release = em_module.privatize_ids
    monkeypatch.setattr(em_module, "privatize_ids", lambda ids, vectors, eps, rng, *a, **k:
                        release(ids, vectors, 3.0 * eps, rng, *a, **k))
    bad = audit("earth-movers", samples=10_000, seed=5, conformance=True)
    assert not bad.curve.passed and not bad.privacy_passed  # the curve of the released words sees it
    assert not bad.conformance.passed and bad.conformance.p_value < 1e-6
    assert bad.lower_bound <= bad.claimed_epsilon  # the worst-case event alone does not


@pytest.mark.parametrize("name", ["cmp", pytest.param("mahalanobis", marks=pytest.mark.slow),
                                  pytest.param("vickrey", marks=pytest.mark.slow)])
def test_triple_epsilon_in_the_word_release_only_is_flagged(monkeypatch, name):
    # the noise helper (noisy_vectors) is untouched; the release (core) divides its noise by 3
    import textdp.mechanisms.perturbation as pert

    ok = audit(name, samples=10_000, seed=6, conformance=True)
    assert ok.passed

    def core(self, ids, rng):
        z = self.noisy_vectors(ids, rng)
        return self.release(self._v64[ids] + (z - self._v64[ids]) / 3.0, rng)

    monkeypatch.setattr(pert._NoisyVector, "core", core)
    bad = audit(name, samples=10_000, seed=6, conformance=True)
    assert not bad.curve.passed and not bad.conformance.passed, (name, bad)


# -- claims from the audit's own accountant (issue 29, failure 2) ---------------------------------------------
def _scaled(module, name, factor):
    fn = getattr(module, name)
    return lambda *a, **k: fn(*a, **k) * factor


@pytest.mark.parametrize(
    ("name", "target", "function", "factor"),
    [
        ("topicdp", "textdp.topics.noise", "zcdp_rho", 2.25),  # sigma / 1.5 in the mechanism
        ("topicdp", "textdp.topics.noise", "rounded_sensitivity", 1 / 1.5),
        ("topicdp-thesis", "textdp.accounting.gaussian", "thesis_gaussian_sigma", 1 / 1.5),
        ("mvg", "textdp.topics.noise", "mvg_precision_budget", 2.25),
        ("mvg-directional", "textdp.topics.noise", "mvg_precision_budget", 2.25),
        ("laplace", "textdp.topics.noise", "LaplaceNoise.grid_scale", 1 / 1.5),
    ],
)
def test_a_planted_calibration_error_is_flagged(monkeypatch, name, target, function, factor):
    import importlib

    module = importlib.import_module(target)
    before = audit_case(name)
    if "." in function:  # a calibration method: Class.method
        cls_name, meth = function.split(".")
        cls = getattr(module, cls_name)
        monkeypatch.setattr(cls, meth, _scaled(cls, meth, factor))
    else:
        monkeypatch.setattr(module, function, _scaled(module, function, factor))
    if target == "textdp.accounting.gaussian":  # topics/mechanisms imports the functions by name
        import textdp.topics.noise as tm

        if hasattr(tm, function):
            monkeypatch.setattr(tm, function, getattr(module, function))
    after = audit_case(name)
    # the claim and the claimed laws do not move with the mechanism's calibration
    assert (after.claimed_epsilon, after.claimed_delta) == (before.claimed_epsilon, before.claimed_delta)
    assert after.curve.description == before.curve.description
    assert after.conformance.description == before.conformance.description
    r = audit(name, samples=600, seed=7, conformance=True)
    assert not r.passed and not r.conformance.passed, (name, function, r)


@pytest.mark.slow
def test_the_topicdp_sigma_error_is_a_privacy_violation_the_curve_flags(monkeypatch):
    # rho x 2.25: sigma / 1.5, below the least noise (1, 1e-4) allows (true epsilon ~1.58 at delta 1e-4);
    # 2 x 10^4 releases per input through privatize_batch (minutes): the conformance test flags it at 600
    import textdp.topics.noise as tm
    from textdp.audit.accountant import analytic_gaussian_delta

    monkeypatch.setattr(tm, "zcdp_rho", _scaled(tm, "zcdp_rho", 2.25))
    mech = tm.GaussianNoise(epsilon=1.0, delta=1e-4, sensitivity=0.1)
    sigma = math.sqrt(float(mech.grid_variance((2, 2))))
    assert analytic_gaussian_delta(sigma, 1.0, 0.1 / 2**-20 + 2) > 1e-3  # a real violation of (1, 1e-4)
    r = audit("topicdp", samples=20_000, seed=8)
    assert not r.privacy_passed and not r.curve.passed


def test_er_ae_claim_does_not_move_with_two_set_bound(monkeypatch):
    pytest.importorskip("torch")
    import dataclasses

    import textdp.generation.bounds as gen_bounds
    from textdp.audit.accountant import two_set_per_token
    from textdp.audit.generation import tiny_er_ae_model
    from textdp.mechanisms import get

    before = audit_case("er-ae").claimed_epsilon
    stated = get("er-ae", epsilon=5.0, model=str(tiny_er_ae_model())).fit().guarantee().epsilon
    bound = gen_bounds.two_set_bound

    def inflated(eps, *a, **k):  # epsilon x 1.5 inside the bound the mechanism states
        return dataclasses.replace(bound(eps * 1.5, *a, **k))

    monkeypatch.setattr(gen_bounds, "two_set_bound", inflated)
    assert get("er-ae", epsilon=5.0, model=str(tiny_er_ae_model())).fit().guarantee().epsilon > stated  # planted
    after = audit_case("er-ae")
    assert after.claimed_epsilon == before == pytest.approx(2 * two_set_per_token(5.0, 9))


# -- the command line: --conformance and --all ---------------------------------------------------------------------
def test_cli_conformance_and_all(monkeypatch):
    import json

    from typer.testing import CliRunner

    from textdp.audit import AuditCase
    from textdp.audit import registry as audit_registry
    from textdp.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["audit", "laplace", "--samples", "300", "--seed", "1", "--conformance", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["conformance"]["passed"] is True and out["privacy_passed"] is True

    def rr(epsilon):
        p = math.exp(epsilon) / (1 + math.exp(epsilon))
        return lambda bit, n, rng: np.where(rng.random(n) < p, bit, 1 - bit)

    ok = AuditCase("rr", "bit 0 vs 1", 0, 1, rr(1.0), claimed_epsilon=1.0)
    lying = AuditCase("rr-lying", "bit 0 vs 1", 0, 1, rr(3.0), claimed_epsilon=1.0)
    cases = {"rr": audit_registry._Entry(lambda epsilon=None, delta=None: ok, "ok")}
    monkeypatch.setattr(audit_registry, "_CASES", cases)
    res = runner.invoke(app, ["audit", "--all", "--samples", "2000", "--seed", "29", "--json"])
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)
    again = json.loads(runner.invoke(app, ["audit", "--all", "--samples", "2000", "--seed", "29", "--json"]).stdout)
    for run in (first, again):  # the wall time differs; the rest is fixed by the seeds
        assert all(c.pop("seconds") >= 0 for c in run["cases"])
        run["note"] = run["note"].rsplit(";", 1)[0]
    assert first == again and first["flagged"] == 0 and first["cases"][0]["seed"] is not None  # seeds fixed up front
    cases["rr-lying"] = audit_registry._Entry(lambda epsilon=None, delta=None: lying, "lying")
    res = runner.invoke(app, ["audit", "--all", "--samples", "2000", "--seed", "29"])
    assert res.exit_code == 1 and "VIOLATION" in res.stdout and "1 case(s) wrong" in res.stdout
    res = runner.invoke(app, ["audit", "--all", "laplace"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "--all audits every case" in res.output
    res = runner.invoke(app, ["audit", "rr", "--conformance"])
    assert res.exit_code == 2 and "no conformance test" in res.output
