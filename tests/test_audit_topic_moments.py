"""The audit cases of the corpus topic mechanisms, ``noisy-cooccurrence`` and ``spectral-lda`` (issue 42).

Each case samples the noisy statistic through the public method the release itself runs
(``NoisyCooccurrence.noisy_statistic``, ``SpectralLDA.noisy_moments``); checked here: that ``privatize_batch``
goes through that very function object (a spy), that the real mechanisms pass, that bugs planted in that
method (noise x0.5, epsilon x3, no noise, the clip ignored) are flagged, that a wrong law is rejected by the
conformance test, and that the claim does not move when the mechanisms' own calibration helper is planted x2.
Every plant is made from here, in the library's code, never in the audit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

import textdp.accounting.gaussian as acc
import textdp.topics.cooccurrence as cooc
import textdp.topics.spectral as spec
from textdp.audit import audit, audit_case
from textdp.audit.topic_moments import (
    gaussian_profile,
    least_noise_mu,
    noisy_cooccurrence_case,
    noisy_cooccurrence_claim,
    pair_distribution,
    spectral_claim,
    spectral_lda_case,
    triple_counts,
)
from textdp.errors import ParameterError
from textdp.mechanisms import get
from textdp.mechanisms.registry import entry
from textdp.topics.cooccurrence import NoisyCooccurrence, user_pair_moments
from textdp.topics.spectral import SpectralLDA, SpectralMoments

NAMES = ("noisy-cooccurrence", "spectral-lda")
CLASSES = {"noisy-cooccurrence": (NoisyCooccurrence, "noisy_statistic"), "spectral-lda": (SpectralLDA, "noisy_moments")}


# -- the claim, the audit's own ------------------------------------------------------------------------------------
def test_the_profile_is_the_hockey_stick_of_two_gaussians_and_the_least_noise_is_balle_wang():
    for mu in (0.3, 1.0, 2.5):
        for e in (0.0, 0.5, 2.0):
            # E_{L ~ N(mu^2/2, mu^2)}[(1 - e^{e - L})_+] by quadrature
            def f(x, e=e, mu=mu):
                return max(0.0, 1.0 - math.exp(e - x)) * norm.pdf(x, mu * mu / 2, mu)

            want = integrate.quad(f, e, mu * mu / 2 + 12 * mu)[0]
            assert abs(float(gaussian_profile(e, mu)) - want) < 1e-8
    assert abs(1.0 / least_noise_mu(1.0, 1e-5) - 3.7297) < 1e-3  # Balle & Wang 2018, Table/Fig. (sigma for Delta=1)
    mu = least_noise_mu(3.0, 1e-5)
    assert gaussian_profile(3.0, mu) <= 1e-5 < gaussian_profile(3.0, mu * 1.001)


def test_the_pair_statistics_are_the_definitions():
    q = pair_distribution("gas gas gas power", ["gas", "power", "price"])
    assert np.isclose(q.sum(), 1.0) and np.allclose(q, q.T)
    assert np.allclose(q[:2, :2], [[0.5, 0.25], [0.25, 0.0]]) and np.isclose(np.linalg.norm(q), math.sqrt(0.375))
    t = triple_counts("gas gas gas power", ["gas", "power"])
    assert np.isclose(sum(s for *_, s in t), 1.0) and {(i, j, k): s for i, j, k, s in t}[(0, 0, 0)] == 0.25


@pytest.mark.parametrize("helper", ["analytic_gaussian_sigma", "gaussian_delta"])
def test_the_claim_does_not_move_when_the_mechanisms_calibration_is_planted(monkeypatch, helper):
    before = (noisy_cooccurrence_claim(), spectral_claim())
    sigma_before = get("noisy-cooccurrence", epsilon=3.0, delta=1e-4).fit().sigma()
    fn = getattr(acc, helper)
    for module in (acc, cooc, spec):
        if hasattr(module, helper):
            monkeypatch.setattr(module, helper, lambda *a, _f=fn, **k: 2.0 * _f(*a, **k))
    assert (noisy_cooccurrence_claim(), spectral_claim()) == before
    if helper == "analytic_gaussian_sigma":  # the plant reaches the mechanism ...
        assert math.isclose(get("noisy-cooccurrence", epsilon=3.0, delta=1e-4).fit().sigma(), 2 * sigma_before)
        # ... and the audit sees it: twice the noise is private (privacy passes) but not the paper's law
        r = audit("noisy-cooccurrence", samples=300, seed=2, conformance=True)
        assert r.privacy_passed and not r.conformance.passed and r.conformance.p_value < 1e-6


# -- the release goes through the audited method -----------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_release_and_the_audit_call_the_same_method(monkeypatch, name):
    cls, method = CLASSES[name]
    assert entry(name).audit == name and entry(name).load() is cls
    real = getattr(cls, method)
    calls: list[str] = []

    def spy(self, corpus, rng):
        calls.append(type(self).__name__)
        return real(self, corpus, rng)

    monkeypatch.setattr(cls, method, spy)
    case = audit_case(name)
    out = case.sample(case.input_a, 2, np.random.default_rng(0))
    assert len(calls) == 2 and out.shape[0] == 2
    mech = get(name, epsilon=3.0, delta=1e-4, seed=1).fit()
    rec = mech.privatize_batch([case.input_a])[0]  # the public release on the audit's own corpus
    assert len(calls) == 3 and calls[-1] == cls.__name__ and len(rec.keywords) == mech.topics


# -- plants in the method the release runs ---------------------------------------------------------------------------
def _cooc_plant(kind):
    def noisy_statistic(self, corpus, rng):
        clip = 1e9 if kind == "clip" else float(self.clip)
        S = user_pair_moments(corpus, self.words).clipped_sum(clip)
        eps = 3 * self.epsilon_ if kind == "eps3" else self.epsilon_
        sigma = {"half": 0.5, "none": 0.0}.get(kind, 1.0) * acc.analytic_gaussian_sigma(eps, self.delta, self.clip)
        return S + rng.normal(0.0, sigma, S.shape)

    return noisy_statistic


def _spectral_plant(kind):
    def noisy_moments(self, corpus, rng):
        s2, s3, C3 = self.sigmas()
        if kind == "eps3":
            mu = spec.gdp_mu(3 * self.epsilon_, self.delta)
            s2, s3 = self.clip / (mu * math.sqrt(self.share)), C3 / (mu * math.sqrt(1 - self.share))
        f = {"half": 0.5, "none": 0.0}.get(kind, 1.0)
        S2 = user_pair_moments(corpus, self.words).clipped_sum(1e9 if kind == "clip" else float(self.clip))
        pairs = S2 + rng.normal(0.0, f * s2, S2.shape)
        W, unwhiten, E2, M1 = self.whitening(pairs)
        S3 = self.clipped_triples(corpus, W)
        return SpectralMoments(pairs, W, unwhiten, E2, M1, S3 + rng.normal(0.0, f * s3, S3.shape))

    return noisy_moments


PLANTS = ("half", "eps3", "none", "clip")


def _planted(monkeypatch, name, kind):
    cls, method = CLASSES[name]
    monkeypatch.setattr(cls, method, (_cooc_plant if name == "noisy-cooccurrence" else _spectral_plant)(kind))


@pytest.mark.parametrize("name", NAMES)
def test_the_real_mechanisms_pass_and_half_the_noise_is_flagged(monkeypatch, name):
    ok = audit(name, samples=300, seed=4, conformance=True)
    assert ok.passed and ok.curve.passed and ok.conformance.passed, ok
    _planted(monkeypatch, name, "half")
    bad = audit(name, samples=300, seed=4, conformance=True)
    assert not bad.curve.passed and not bad.privacy_passed and not bad.conformance.passed, bad


@pytest.mark.slow
@pytest.mark.parametrize("kind", PLANTS)
@pytest.mark.parametrize("name", NAMES)
def test_each_plant_in_the_release_method_is_flagged(monkeypatch, name, kind):
    _planted(monkeypatch, name, kind)
    bad = audit(name, samples=1_000, seed=7, conformance=True)
    assert not bad.privacy_passed and not bad.curve.passed, (name, kind, bad)
    assert not bad.conformance.passed and bad.conformance.p_value < 1e-6, (name, kind, bad)


@pytest.mark.parametrize("name", NAMES)
def test_a_plant_equal_to_the_real_method_passes(monkeypatch, name):
    """The plants are the real method rewritten from outside (with kind 'real' nothing is changed): no false alarm."""
    _planted(monkeypatch, name, "real")
    r = audit(name, samples=300, seed=5, conformance=True)
    assert r.passed, r


# -- a wrong law -----------------------------------------------------------------------------------------------------
def _laplace_statistic(self, corpus, rng):
    """noisy-cooccurrence with Laplace noise of the same variance (a wrong law, about as private at these epsilons)."""
    S = user_pair_moments(corpus, self.words).clipped_sum(float(self.clip))
    return S + rng.laplace(0.0, self.sigma() / math.sqrt(2.0), S.shape)


def test_a_wrong_law_is_rejected_by_the_conformance_test(monkeypatch):
    monkeypatch.setattr(NoisyCooccurrence, "noisy_statistic", _laplace_statistic)
    r = audit("noisy-cooccurrence", samples=300, seed=3, conformance=True)
    assert not r.conformance.passed and r.conformance.p_value < 1e-6 and not r.passed


def test_the_case_samples_a_given_instance_of_the_registered_class():
    """The power studies' hook: the release of an instance built at 3 epsilon, against the claim at epsilon."""
    bad = get("noisy-cooccurrence", epsilon=9.0, delta=1e-4).fit()
    r = audit(noisy_cooccurrence_case(mechanism=bad), samples=300, seed=3, conformance=True)
    assert not r.privacy_passed and not r.conformance.passed and r.claimed_epsilon == 3.0


@pytest.mark.slow
def test_more_noise_than_the_paper_in_spectral_release_two_is_rejected(monkeypatch):
    real = SpectralLDA.noisy_triples
    monkeypatch.setattr(SpectralLDA, "noisy_triples",
                        lambda self, c, W, rng: real(self, c, W, rng) + rng.normal(0.0, self.sigmas()[1], 1001))
    r = audit("spectral-lda", samples=300, seed=3, conformance=True)
    assert r.privacy_passed and not r.conformance.passed and r.conformance.p_value < 1e-6


# -- parameters -----------------------------------------------------------------------------------------------------
def test_the_cases_take_the_users_parameters():
    case = audit_case("noisy-cooccurrence", epsilon=1.0, delta=1e-5, params={"clip": 0.05, "words": 6})
    assert "clip C=0.05" in case.pair and "6 public words" in case.pair and case.claimed_epsilon == 1.0
    assert "moves by 0.05" in case.pair
    assert noisy_cooccurrence_claim(1.0, 1e-5, clip=0.05).sigmas[0] == pytest.approx(0.05 / least_noise_mu(1.0, 1e-5))
    with pytest.raises(ParameterError, match="no parameter 'lambd'"):
        audit_case("noisy-cooccurrence", params={"lambd": 1.0})
    with pytest.raises(ParameterError, match="sensitivity does not apply"):
        audit_case("noisy-cooccurrence", params={"sensitivity": 1.0})
    with pytest.raises(ParameterError, match="topics <= 10"):
        spectral_lda_case(topics=12)
    assert audit("spectral-lda", samples=200, seed=1, params={"topics": 3, "share": 0.3}).samples == 200


def test_the_command_line_takes_the_parameters_and_refuses_bad_ones():
    import json

    from typer.testing import CliRunner

    from textdp.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["audit", "noisy-cooccurrence", "--param", "clip=0.05", "--samples", "200", "--seed", "1",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert "clip C=0.05" in json.loads(res.stdout)["pair"]
    for args in (["noisy-cooccurrence", "--param", "bogus=1"], ["spectral-lda", "--param", "topics=12"]):
        res = runner.invoke(app, ["audit", *args, "--samples", "200"])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
