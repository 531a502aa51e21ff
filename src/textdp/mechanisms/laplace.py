"""The n-dimensional Laplace mechanism (Fernandes, Dras & McIver 2019, Def. 5, Thm 4.1).

The density of the noise ``z`` in R^n is proportional to ``exp(-epsilon ||z||)``
(Euclidean norm). Theorem 4.1: it is sampled exactly by drawing a radius
``r ~ Gamma(shape=n, scale=1/epsilon)`` and an independent direction uniform on
the unit sphere (a standard Gaussian vector divided by its norm; Marsaglia /
Muller). Adding such noise to a vector gives epsilon*d_2-privacy: for any two
inputs x, x', the output densities differ by a factor at most
``exp(epsilon ||x - x'||)``.
"""

from __future__ import annotations

import numpy as np

from .._rng import make_rng  # noqa: F401  (used in the examples)
from .._validation import check_epsilon, check_positive_int


def sample_radius(count: int, dim: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` radii drawn from Gamma(shape=dim, scale=1/epsilon).

    >>> r = sample_radius(20000, 50, 10.0, make_rng(0))
    >>> bool(abs(r.mean() - 5.0) < 0.05)
    True
    """
    epsilon = check_epsilon(epsilon)
    dim = check_positive_int(dim, "dim")
    return rng.gamma(shape=float(dim), scale=1.0 / epsilon, size=int(count))


def sample_direction(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit vectors uniform on the sphere S^{dim-1} (normalised Gaussians)."""
    dim = check_positive_int(dim, "dim")
    g = rng.standard_normal((int(count), dim))
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    bad = norms == 0.0
    while bad.any():  # probability zero in exact arithmetic; redraw rather than divide by 0
        g[bad] = rng.standard_normal((int(bad.sum()), dim))
        norms[bad] = np.sqrt(np.einsum("ij,ij->i", g[bad], g[bad]))
        bad = norms == 0.0
    return g / norms[:, None]


def laplace_noise(count: int, dim: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``(count, dim)`` draws of n-dimensional Laplace noise with parameter ``epsilon``.

    Parameters
    ----------
    count : int
        Number of noise vectors.
    dim : int
        Dimension n.
    epsilon : float
        Privacy parameter (> 0); the mean noise norm is ``dim / epsilon``.
    rng : numpy.random.Generator
        Source of randomness.

    Examples
    --------
    >>> z = laplace_noise(4, 3, 1.0, make_rng(1))
    >>> z.shape
    (4, 3)
    """
    r = sample_radius(count, dim, epsilon, rng)
    return sample_direction(count, dim, rng) * r[:, None]
