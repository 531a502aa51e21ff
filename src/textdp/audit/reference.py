"""Reference samplers of the papers' laws, written again for the conformance test (numpy only).

Nothing here calls a mechanism's sampler, decoder or calibration: the n-dimensional Laplace
noise is drawn as Fernandes et al. (2019, Algorithm 1) and Feyisetan et al. (2020) state it (a
radius ``Gamma(n, 1/ε)`` times a uniform direction, the normalised standard Gaussian), the
Mahalanobis noise as Xu et al. (2020, Algorithm 1) (the same, mapped by ``Σ_λ^{1/2}``), decoding
is an exact float64 nearest-word search, and Vickrey's rule (Xu et al. 2021) picks the first
nearest word with probability ``(1 − t) d₂ / (t d₁ + (1 − t) d₂)``. The conformance test
(:mod:`textdp.audit.conformance`) compares the released words with these samples.
"""

from __future__ import annotations

import numpy as np

__all__ = ["laplace_noise", "nearest", "two_nearest", "vickrey_choice"]

#: Noisy vectors decoded per block (bounds the memory of the distance table).
BLOCK = 2_048


def laplace_noise(count: int, dim: int, epsilon: float, rng: np.random.Generator,
                  root: np.ndarray | None = None) -> np.ndarray:
    """``(count, dim)`` draws of the density ``∝ exp(−ε ||R⁻¹ z||)`` (``R = root``, default I).

    >>> from textdp._rng import make_rng
    >>> z = laplace_noise(20_000, 3, 2.0, make_rng(0))
    >>> round(float(np.linalg.norm(z, axis=1).mean()), 1)  # E radius = dim / epsilon
    1.5
    """
    g = rng.standard_normal((int(count), int(dim)))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    z = g * rng.gamma(float(dim), 1.0 / float(epsilon), int(count))[:, None]
    return z if root is None else z @ np.asarray(root, dtype=np.float64)


def _sq_dist(z: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    return np.asarray((z * z).sum(1)[:, None] - 2.0 * z @ v.T + (v * v).sum(1)[None, :])


def nearest(z: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The row of ``vectors`` nearest to each row of ``z`` (Euclidean, float64, blocks of :data:`BLOCK`).

    >>> nearest(np.array([[0.2, 0.0], [2.9, 0.1]]), np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])).tolist()
    [0, 2]
    """
    zz = np.asarray(z, dtype=np.float64)
    out = np.empty(len(zz), dtype=np.int64)
    for s in range(0, len(zz), BLOCK):
        out[s: s + BLOCK] = np.argmin(_sq_dist(zz[s: s + BLOCK], vectors), axis=1)
    return out


def two_nearest(z: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(w1, w2, d1, d2)``: the two nearest rows of each ``z`` and their Euclidean distances (d1 <= d2).

    >>> w1, w2, d1, d2 = two_nearest(np.array([[0.2, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]))
    >>> w1.tolist(), w2.tolist(), d1.round(3).tolist(), d2.round(3).tolist()
    ([0], [1], [0.2], [0.8])
    """
    zz = np.asarray(z, dtype=np.float64)
    n = len(zz)
    w1, w2 = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    d1, d2 = np.empty(n), np.empty(n)
    v = np.asarray(vectors, dtype=np.float64)
    for s in range(0, n, BLOCK):
        block = zz[s: s + BLOCK]
        sq = _sq_dist(block, v)
        two = np.argpartition(sq, 1, axis=1)[:, :2]
        exact = np.linalg.norm(block[:, None, :] - v[two], axis=2)
        order = np.argsort(exact, axis=1, kind="stable")
        two = np.take_along_axis(two, order, axis=1)
        exact = np.take_along_axis(exact, order, axis=1)
        w1[s: s + BLOCK], w2[s: s + BLOCK] = two[:, 0], two[:, 1]
        d1[s: s + BLOCK], d2[s: s + BLOCK] = exact[:, 0], exact[:, 1]
    return w1, w2, d1, d2


def vickrey_choice(w1: np.ndarray, w2: np.ndarray, d1: np.ndarray, d2: np.ndarray, t: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Vickrey's rule: ``w1`` with probability ``(1 − t) d₂ / (t d₁ + (1 − t) d₂)``, else ``w2``.

    >>> from textdp._rng import make_rng
    >>> vickrey_choice(np.array([0]), np.array([1]), np.array([1.0]), np.array([1.0]), 0.0, make_rng(0)).tolist()
    [0]
    """
    den = t * d1 + (1.0 - t) * d2
    p1 = np.where(den > 0, (1.0 - t) * d2 / np.where(den > 0, den, 1.0), 1.0)
    return np.where(rng.random(len(w1)) < p1, w1, w2)
