"""Exact discrete samplers (CKS20) against their exact laws, and their privacy accounting."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from textdp._rng import make_rng
from textdp.errors import ParameterError
from textdp.samplers import (
    bernoulli_exp,
    check_grid,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_sigma,
    discrete_laplace,
    discrete_laplace_pmf,
    rounded_sensitivity,
    snap_to_grid,
    zcdp_delta,
    zcdp_rho,
)


class IntegerOnlyGenerator(np.random.Generator):
    """A Generator whose floating-point samplers are switched off: the samplers must not need them."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("a floating-point sampler was used")

    random = standard_normal = normal = laplace = exponential = uniform = standard_exponential = _refuse  # type: ignore[assignment]


def _int_gen(seed: int) -> np.random.Generator:
    return IntegerOnlyGenerator(make_rng(seed).bit_generator)


def _chi2_pvalue(samples: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int) -> float:
    """Chi-square goodness of fit: one bin per integer of [lo, hi], one per tail; bins expecting < 5 pooled."""
    s = samples.astype(np.int64)
    probs = np.concatenate([[pmf(np.arange(lo - 5000, lo)).sum()], pmf(np.arange(lo, hi + 1)),
                            [pmf(np.arange(hi + 1, hi + 5001)).sum()]])
    inside = s[(s >= lo) & (s <= hi)] - lo
    counts = np.concatenate([[np.sum(s < lo)], np.bincount(inside, minlength=hi - lo + 1), [np.sum(s > hi)]])
    expected = probs * s.size
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] < 5:  # pool the pooled bin into its neighbour
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("sigma2", [Fraction(7, 10), 2, 6.25, Fraction(1201, 7)])
def test_discrete_gaussian_matches_its_pmf_and_rejects_a_wrong_sigma(sigma2: object) -> None:
    s2 = float(sigma2)  # type: ignore[arg-type]
    z = discrete_gaussian(sigma2, 60000, _int_gen(int(s2 * 100)))  # type: ignore[arg-type]
    assert z.dtype == np.int64
    k = int(6 * math.sqrt(s2)) + 3
    assert _chi2_pvalue(z, lambda x: discrete_gaussian_pmf(s2, x), -k, k) > 1e-4
    wrong = (1.1**2) * s2  # sigma * 1.1
    assert _chi2_pvalue(z, lambda x: discrete_gaussian_pmf(wrong, x), -k, k) < 1e-6


@pytest.mark.parametrize("scale", [Fraction(4, 5), 3, 7.5])
def test_discrete_laplace_matches_its_pmf_and_rejects_a_wrong_scale(scale: object) -> None:
    t = float(scale)  # type: ignore[arg-type]
    z = discrete_laplace(scale, 60000, _int_gen(int(t * 10)))  # type: ignore[arg-type]
    k = int(8 * t) + 3
    assert _chi2_pvalue(z, lambda x: discrete_laplace_pmf(t, x), -k, k) > 1e-4
    assert _chi2_pvalue(z, lambda x: discrete_laplace_pmf(1.1 * t, x), -k, k) < 1e-6


def test_large_scales_match_the_continuous_law() -> None:
    # grid-scale parameters (sigma ~ 4e5, the TopicDP default on a 2^-20 grid): the pmf is the
    # normal density to within exp(-2 pi^2 sigma^2), so a KS test against N(0, sigma^2) is exact here
    sigma = 0.4 * 2**20
    z = discrete_gaussian(Fraction(sigma * sigma), 20000, _int_gen(3)).astype(float)
    assert stats.kstest(z / sigma, "norm").pvalue > 1e-4
    assert stats.kstest(z / (1.1 * sigma), "norm").pvalue < 1e-6
    scale = 2e7
    y = discrete_laplace(scale, 20000, _int_gen(4)).astype(float)
    assert stats.kstest(y / scale, "laplace").pvalue > 1e-4
    assert stats.kstest(y / (1.1 * scale), "laplace").pvalue < 1e-6


def test_huge_parameters_stay_exact_with_python_integers() -> None:
    z = discrete_gaussian(Fraction(10**40, 3), 2000, make_rng(5))
    assert z.dtype == object  # beyond int64: exact Python integers
    sd = math.sqrt(10**40 / 3)
    assert 0.9 < float(np.std(z.astype(float))) / sd < 1.1


@pytest.mark.parametrize("gamma", [0, Fraction(3, 10), 1, Fraction(5, 2), Fraction(7, 3), 6.75,
                                   Fraction(10**30 + 1, 10**30)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma: object) -> None:
    n = 40000
    x = bernoulli_exp(gamma, n, _int_gen(7))  # type: ignore[arg-type]
    p = math.exp(-float(gamma))  # type: ignore[arg-type]
    assert stats.binomtest(int(x.sum()), n, p).pvalue > 1e-4
    if 0.2 < float(gamma) < 3:  # type: ignore[arg-type]  (rare events need more draws to tell 1.1x apart)
        assert stats.binomtest(int(x.sum()), n, math.exp(-1.1 * float(gamma))).pvalue < 1e-6  # type: ignore[arg-type]


def test_samplers_are_reproducible_from_the_seed() -> None:
    a = discrete_gaussian(1e6, 50, make_rng(11))
    b = discrete_gaussian(1e6, 50, make_rng(11))
    c = discrete_gaussian(1e6, 50, make_rng(12))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_parameters_are_checked() -> None:
    with pytest.raises(ParameterError):
        discrete_gaussian(0, 3, make_rng(0))
    with pytest.raises(ParameterError):
        discrete_laplace(-1.0, 3, make_rng(0))
    with pytest.raises(ParameterError):
        discrete_gaussian(float("nan"), 3, make_rng(0))
    with pytest.raises(ParameterError):
        check_grid(0.001)
    with pytest.raises(ParameterError):
        snap_to_grid(np.array([1e30]), 2.0**-20)


def test_grid_rounding_costs_at_most_g_sqrt_mn() -> None:
    gen = make_rng(9)
    g = 2.0**-6
    for _ in range(300):
        x = gen.random((4, 5))
        y = x + gen.normal(0, 0.01, (4, 5))
        kx, ky = snap_to_grid(x, g), snap_to_grid(y, g)
        assert np.linalg.norm((kx - ky) * g) <= rounded_sensitivity(float(np.linalg.norm(x - y)), g, 20) + 1e-12
        assert np.abs((kx - ky) * g).sum() <= rounded_sensitivity(float(np.abs(x - y).sum()), g, 20, "l1") + 1e-12
        assert np.all(kx * g == np.rint(x / g) * g)  # exact multiples


# --- accounting -------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0, 10.0])
def test_zcdp_conversion_is_below_the_classic_bound_and_monotone(eps: float) -> None:
    for rho in (0.01, 0.1, 0.5, 2.0):
        d = zcdp_delta(rho, eps)
        if eps > rho:  # Bun & Steinke's bound exp(-(eps - rho)^2 / (4 rho)) is looser
            assert d <= math.exp(-((eps - rho) ** 2) / (4 * rho)) * (1 + 1e-8)
        assert zcdp_delta(rho * 1.2, eps) >= d
    r = zcdp_rho(eps, 1e-4)
    assert zcdp_delta(r, eps) <= 1e-4 < zcdp_delta(r * 1.0001, eps)


def test_discrete_sigma_is_a_little_above_the_continuous_analytic_one() -> None:
    from textdp.accounting.gaussian import analytic_gaussian_sigma

    for eps in (0.5, 1.0, 3.0, 10.0):
        ratio = discrete_gaussian_sigma(eps, 1e-4, 1.0) / analytic_gaussian_sigma(eps, 1e-4, 1.0)
        assert 1.0 < ratio < 1.15


def test_zcdp_conversion_agrees_with_opendp() -> None:
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    for scale, d_in, eps in [(3.0, 2, 1.0), (10.0, 3, 0.5), (1.5, 1, 4.0)]:
        meas = dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)),
                                                             dp.l2_distance(T=int), scale=scale))
        ours = zcdp_delta((d_in / scale) ** 2 / 2, eps)
        theirs = meas.map(d_in).delta(eps)
        assert ours == pytest.approx(theirs, rel=1e-6)
        assert ours >= theirs  # ours is rounded up, never below
