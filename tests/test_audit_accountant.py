"""The audit's own accountant (textdp.audit.accountant) against brute force and published numbers.

Each derivation is checked by a route that shares nothing with it (numerical integration, a dense
grid, the defining equation) and against a number printed in a paper or the project's reference
notes; each check is shown to bite on a wrong value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from textdp.audit import accountant as acc


def _hockey_stick(sigma: float, epsilon: float, sens: float) -> float:
    """sup_E P(N(Δ, σ²) ∈ E) − e^ε P(N(0, σ²) ∈ E), by integrating the positive part of the densities."""
    f = lambda x: max(0.0, norm.pdf(x, sens, sigma) - math.exp(epsilon) * norm.pdf(x, 0.0, sigma))  # noqa: E731
    lo, hi = sens / 2 + epsilon * sigma**2 / sens, sens + 40 * sigma  # the positive part lies right of lo
    return float(integrate.quad(f, lo, hi, limit=500, epsabs=1e-13)[0])


@pytest.mark.parametrize(("sigma", "epsilon"), [(1.0, 1.0), (3.0, 0.5), (0.7, 2.0), (5.0, 0.1)])
def test_analytic_gaussian_delta_is_the_hockey_stick_divergence(sigma, epsilon):
    assert acc.analytic_gaussian_delta(sigma, epsilon, 1.0) == pytest.approx(_hockey_stick(sigma, epsilon, 1.0),
                                                                             rel=1e-6, abs=1e-12)
    assert acc.analytic_gaussian_delta(sigma * 0.9, epsilon, 1.0) > _hockey_stick(sigma, epsilon, 1.0) + 1e-4


def test_analytic_gaussian_sigma_published_value_and_minimality():
    # Balle & Wang (ICML 2018): at epsilon = 1, delta = 1e-5 the analytic Gaussian needs sigma ~ 3.73 (Delta = 1),
    # against Dwork & Roth's sqrt(2 ln(1.25/delta)) / epsilon = 4.84
    s = acc.analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert round(s, 2) == 3.73 and round(math.sqrt(2 * math.log(1.25 / 1e-5)), 2) == 4.84
    assert _hockey_stick(s * (1 + 1e-6), 1.0, 1.0) <= 1e-5 < _hockey_stick(s * 0.999, 1.0, 1.0)
    assert acc.analytic_gaussian_sigma(2.0, 1e-6, 7.0) == pytest.approx(7.0 * acc.analytic_gaussian_sigma(2.0, 1e-6, 1))


def test_the_least_noise_holds_for_the_discrete_gaussian_too():
    # the claim of the topic cases: the discrete Gaussian at the analytic sigma has (almost exactly) the same delta
    sigma, d, eps = acc.analytic_gaussian_sigma(1.0, 1e-3, 20.0), 20, 1.0
    z = np.arange(-4_000, 4_001)
    pa = np.exp(-((z - d) ** 2) / (2 * sigma**2))
    pb = np.exp(-(z**2) / (2 * sigma**2))
    pa, pb = pa / pa.sum(), pb / pb.sum()
    exact = float(np.maximum(pa - math.exp(eps) * pb, 0.0).sum())
    assert exact == pytest.approx(1e-3, rel=0.02)


def test_cks20_delta_is_the_minimum_over_alpha():
    alpha = 1.0 + np.geomspace(1e-6, 1e4, 400_001)
    for rho, eps in ((0.5, 3.0), (0.04, 1.0), (2.0, 10.0)):
        brute = math.exp(((alpha - 1) * (alpha * rho - eps) + alpha * np.log1p(-1 / alpha) - np.log(alpha - 1)).min())
        assert acc.cks20_delta(rho, eps) == pytest.approx(float(brute), rel=1e-6)
    # tighter than Bun & Steinke's (rho + 2 sqrt(rho ln 1/delta), delta): at that epsilon delta is not exceeded
    rho, delta = 0.1, 1e-5
    assert acc.cks20_delta(rho, rho + 2 * math.sqrt(rho * math.log(1 / delta))) < delta


def test_cks20_sigma_between_the_analytic_and_the_classic():
    for eps, delta in ((1.0, 1e-4), (0.5, 1e-6), (3.0, 1e-5)):
        s = acc.cks20_sigma(eps, delta, 1.0)
        assert acc.analytic_gaussian_sigma(eps, delta, 1.0) < s < 1.2 * acc.analytic_gaussian_sigma(eps, delta, 1.0)
        assert acc.cks20_delta(1.0 / (2 * s * s), eps) <= delta * (1 + 1e-8)


def test_mvg_budget_solves_its_quadratic():
    # P = x^2 with alpha x^2 + beta x = 2 epsilon (Chanyaswad et al., Thm. 3)
    for eps, delta, s2, gam, m, n in ((1.0, 1e-4, 0.1, 2**0.5, 2, 2), (3.0, 1e-6, 0.5, 3.0, 9, 20)):
        r = min(m, n)
        h1 = sum(1 / i for i in range(1, r + 1))
        hh = sum(1 / math.sqrt(i) for i in range(1, r + 1))
        zeta = 2 * math.sqrt(-m * n * math.log(delta)) - 2 * math.log(delta) + m * n
        a = (h1 + hh) * gam**2 + 2 * h1 * gam * s2
        b = 2 * (m * n) ** 0.25 * h1 * s2 * zeta
        p = acc.mvg_budget(eps, delta, s2, gam, m, n)
        assert a * p + b * math.sqrt(p) == pytest.approx(2 * eps, rel=1e-9)


def test_rounded_sensitivities_and_the_thesis_formula():
    assert acc.rounded_l2(0.1, 2.0**-20, 4) == 0.1 * 2**20 + 2
    assert acc.rounded_l1(2.0, 2.0**-20, 2) == 2 * 2**20 + 2
    # Sharma's Alg. 2 is the classic sigma at the per-entry budget epsilon / (mn)
    assert acc.thesis_sigma(2.0, 1e-4, 1.0, 3, 4) == pytest.approx(math.sqrt(2 * math.log(1.25e4)) * 12 / 2.0)


def test_two_set_bound_matches_the_reference_notes():
    # docs' reference notes (er-ae-notes.md): one input's mass on w, another's elsewhere: epsilon/2 + ln(|V| - 1),
    # about epsilon/2 + 9.9 nats at |V| = 20,000 when the whole budget goes to the set choice
    assert acc.two_set_per_token(2.0, 20_000, word_fraction=0.0) == pytest.approx(1.0 + math.log(19_999))
    assert round(math.log(19_999), 1) == 9.9
    assert acc.two_set_per_token(5.0, 10_001) == pytest.approx(11.46, abs=5e-3)
