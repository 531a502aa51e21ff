"""Utility metrics between the true and the released topic-keyword matrix.

* :func:`l1_distance` -- the true entrywise L1 distance ``sum |W - W'|``.
* :func:`row_euclidean_distance` -- ``sum_i ||W_i - W'_i||_2``, the per-topic
  Euclidean distance summed over topics. The thesis calls its metric "L1
  distance" but its values behave like this per-row L2 quantity; it is
  provided under its honest name for comparison with the thesis's figures.
* :func:`rmse` -- ``sqrt(mean((W - W')^2))``.
* :func:`kendall_tau_distance` -- normalised Kendall tau distance between two
  rankings of the same items (0 identical, 1 reversed), and
  :func:`keyword_rank_distance`, its mean over topics of the ranking of each
  topic's keywords by true vs released probability.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = [
    "all_metrics",
    "kendall_tau_distance",
    "keyword_rank_distance",
    "l1_distance",
    "rmse",
    "row_euclidean_distance",
]


def _pair(a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ParameterError(f"shapes differ: {x.shape} vs {y.shape}")
    return x, y


def l1_distance(true: object, noisy: object) -> float:
    """Entrywise L1 distance.

    >>> l1_distance([[0.5, 0.5]], [[0.2, 0.9]])
    0.7
    """
    x, y = _pair(true, noisy)
    return float(np.round(np.abs(x - y).sum(), 12))


def row_euclidean_distance(true: object, noisy: object) -> float:
    """Sum over rows of the Euclidean distance (what the thesis labels "L1").

    >>> row_euclidean_distance([[0.0, 0.0], [1.0, 1.0]], [[0.3, 0.4], [1.0, 1.0]])
    0.5
    """
    x, y = _pair(true, noisy)
    x2 = np.atleast_2d(x)
    y2 = np.atleast_2d(y)
    return float(np.round(np.linalg.norm(x2 - y2, axis=1).sum(), 12))


def rmse(true: object, noisy: object) -> float:
    """Root-mean-square error over all entries.

    >>> rmse([[0.0, 0.0]], [[0.3, 0.4]])
    0.3535533905932738
    """
    x, y = _pair(true, noisy)
    return float(np.sqrt(np.mean((x - y) ** 2)))


def kendall_tau_distance(scores_a: object, scores_b: object) -> float:
    """Normalised Kendall tau distance between the rankings induced by two score vectors.

    Counts item pairs ordered one way by ``scores_a`` and the other way by
    ``scores_b``; a pair tied in exactly one ranking counts 1/2 (Fagin et al.'s
    penalty p = 1/2). Divided by ``n(n-1)/2``: 0 for identical, 1 for reversed.

    >>> kendall_tau_distance([3, 2, 1], [3, 2, 1]), kendall_tau_distance([3, 2, 1], [1, 2, 3])
    (0.0, 1.0)
    >>> kendall_tau_distance([3, 2, 1], [2, 3, 1])
    0.3333333333333333
    """
    x, y = _pair(scores_a, scores_b)
    if x.ndim != 1:
        raise ParameterError("kendall_tau_distance compares two 1-D score vectors")
    n = x.shape[0]
    if n < 2:
        return 0.0
    i, j = np.triu_indices(n, k=1)
    sa = np.sign(x[i] - x[j])
    sb = np.sign(y[i] - y[j])
    discordant = np.sum(sa * sb < 0)
    half = np.sum((sa == 0) != (sb == 0))
    return float((discordant + 0.5 * half) / (n * (n - 1) / 2))


def keyword_rank_distance(true: object, noisy: object) -> float:
    """Mean over topics (rows) of the Kendall tau distance of keyword rankings.

    >>> keyword_rank_distance([[0.5, 0.3, 0.2]], [[0.1, 0.2, 0.3]])
    1.0
    """
    x, y = _pair(true, noisy)
    x2 = np.atleast_2d(x)
    y2 = np.atleast_2d(y)
    return float(np.mean([kendall_tau_distance(a, b) for a, b in zip(x2, y2)]))


def all_metrics(true: object, noisy: object) -> dict[str, float]:
    """All four metrics in one dict.

    >>> sorted(all_metrics([[0.5, 0.5]], [[0.5, 0.5]]))
    ['kendall_tau', 'l1', 'rmse', 'row_euclidean']
    """
    return {"l1": l1_distance(true, noisy), "row_euclidean": row_euclidean_distance(true, noisy),
            "rmse": rmse(true, noisy), "kendall_tau": keyword_rank_distance(true, noisy)}
