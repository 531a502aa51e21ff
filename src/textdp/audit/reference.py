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


#: Unit roundoff of float32.
_U32 = float(np.finfo(np.float32).eps) / 2.0


def _candidates(block: np.ndarray, v: np.ndarray, v32: np.ndarray, vsq: np.ndarray, vmax: float,
                k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, d2)``: for each row of ``block`` a set of vocabulary rows holding its ``k`` nearest, with
    their exact float64 squared distances ``||z − v||²`` (computed directly, not by the expansion).

    The screen is the float32 score ``t = ||v||² − 2 z·v`` (``||z||²`` is the same for every word). Its error is
    at most ``E = (2d + 16) u (||z|| + max ||v||)²`` (``u`` = 2⁻²⁴: rounding of the inputs, a dot product of ``d``
    terms in any order, and two more roundings), so the true ``k``-th smallest score is at most the float32
    ``k``-th smallest plus ``E`` and every one of the ``k`` nearest words scores at most that plus ``2E``: all
    of them are kept, and the answer is the exact float64 one.
    """
    t = block.astype(np.float32) @ v32.T
    t *= np.float32(-2.0)
    t += vsq.astype(np.float32)[None, :]
    kth = t.min(axis=1) if k == 1 else np.partition(t, k - 1, axis=1)[:, k - 1]
    qn = np.sqrt((block * block).sum(axis=1))
    err = (2.0 * block.shape[1] + 16.0) * _U32 * (qn + vmax) ** 2
    # the threshold rounded up to float32, so the float32 comparison keeps everything the exact one would
    thr = np.nextafter((kth.astype(np.float64) + 2.0 * err).astype(np.float32), np.float32(np.inf))
    rows, cols = np.nonzero(t <= thr[:, None])
    diff = block[rows] - v[cols]
    return rows, cols, np.einsum("ij,ij->i", diff, diff)


def _k_nearest(z: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(len(z), k)`` of the ``k`` nearest rows (exact float64, ties to the lower index) and their distances."""
    zz = np.asarray(z, dtype=np.float64).reshape(len(z), -1)
    v = np.asarray(vectors, dtype=np.float64)
    v32 = v.astype(np.float32)
    vsq = np.einsum("ij,ij->i", v, v)
    vmax = float(np.sqrt(vsq.max())) if vsq.size else 0.0
    idx = np.empty((len(zz), k), dtype=np.int64)
    dist = np.empty((len(zz), k))
    for s in range(0, len(zz), BLOCK):
        block = zz[s: s + BLOCK]
        rows, cols, d2 = _candidates(block, v, v32, vsq, vmax, k)
        order = np.lexsort((cols, d2, rows))  # by row, then distance, then index
        rows, cols, d2 = rows[order], cols[order], d2[order]
        first = np.searchsorted(rows, np.arange(len(block)))
        for j in range(k):
            idx[s: s + BLOCK, j] = cols[first + j]
            dist[s: s + BLOCK, j] = np.sqrt(d2[first + j])
    return idx, dist


def nearest(z: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The row of ``vectors`` nearest to each row of ``z`` (Euclidean, exact in float64, blocks of :data:`BLOCK`).

    A float32 screen with a rigorous error bound keeps every possible nearest row; those are compared by
    their float64 distances (:func:`_candidates`), so the answer is the exact float64 search's at about half
    its cost. Ties go to the lower index.

    >>> nearest(np.array([[0.2, 0.0], [2.9, 0.1]]), np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])).tolist()
    [0, 2]
    """
    return _k_nearest(z, vectors, 1)[0][:, 0]


def two_nearest(z: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(w1, w2, d1, d2)``: the two nearest rows of each ``z`` and their Euclidean distances (d1 <= d2).

    >>> w1, w2, d1, d2 = two_nearest(np.array([[0.2, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]))
    >>> w1.tolist(), w2.tolist(), d1.round(3).tolist(), d2.round(3).tolist()
    ([0], [1], [0.2], [0.8])
    """
    idx, dist = _k_nearest(z, vectors, 2)
    return idx[:, 0], idx[:, 1], dist[:, 0], dist[:, 1]


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
