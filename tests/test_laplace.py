"""The n-dimensional Laplace sampler against the paper's formulas (Thm 4.1)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from textdp.errors import ParameterError, ParameterTypeError
from textdp.mechanisms import laplace_noise, sample_direction, sample_radius


@pytest.mark.parametrize("dim", [50, 300])
@pytest.mark.parametrize("epsilon", [0.5, 10.0])
def test_radius_follows_gamma(dim, epsilon, rng):
    r = sample_radius(20000, dim, epsilon, rng)
    ks = stats.kstest(r, stats.gamma(a=dim, scale=1 / epsilon).cdf)
    assert ks.pvalue > 1e-3
    # and a wrong law is rejected by the same test (the test can fail)
    wrong = stats.kstest(r, stats.gamma(a=dim, scale=1.05 / epsilon).cdf)
    assert wrong.pvalue < 1e-6


@pytest.mark.parametrize("dim", [50, 300])
def test_direction_uniform_on_sphere(dim, rng):
    u = sample_direction(20000, dim, rng)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, atol=1e-12)
    # mean of a uniform unit vector is 0, each coordinate has variance 1/n
    assert np.abs(u.mean(axis=0)).max() < 5 / np.sqrt(20000 * dim)
    # the projection t on any fixed axis satisfies (t+1)/2 ~ Beta((n-1)/2, (n-1)/2)
    for axis in (0, dim - 1):
        ks = stats.kstest((u[:, axis] + 1) / 2, stats.beta((dim - 1) / 2, (dim - 1) / 2).cdf)
        assert ks.pvalue > 1e-3
    # a random direction too (rotation invariance)
    a = rng.standard_normal(dim)
    a /= np.linalg.norm(a)
    ks = stats.kstest((u @ a + 1) / 2, stats.beta((dim - 1) / 2, (dim - 1) / 2).cdf)
    assert ks.pvalue > 1e-3


def test_noise_norm_and_density(rng):
    dim, eps = 50, 4.0
    z = laplace_noise(20000, dim, eps, rng)
    norms = np.linalg.norm(z, axis=1)
    assert stats.kstest(norms, stats.gamma(a=dim, scale=1 / eps).cdf).pvalue > 1e-3
    # isotropy: the covariance is (E r^2 / n) I = ((n+1)/eps^2) I
    cov = np.cov(z.T)
    np.testing.assert_allclose(np.diag(cov).mean(), (dim + 1) / eps**2, rtol=0.03)
    off = cov - np.diag(np.diag(cov))
    assert np.abs(off).max() < 0.1 * (dim + 1) / eps**2


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), -float("inf")])
def test_bad_epsilon(bad, rng):
    with pytest.raises(ParameterError, match="epsilon"):
        laplace_noise(3, 2, bad, rng)


def test_epsilon_type(rng):
    with pytest.raises(ParameterTypeError):
        laplace_noise(3, 2, "1", rng)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_radius_many_seeds(seed):
    g = np.random.default_rng(seed)
    r = sample_radius(5000, 50, 3.0, g)
    assert stats.kstest(r, stats.gamma(a=50, scale=1 / 3.0).cdf).pvalue > 1e-4
