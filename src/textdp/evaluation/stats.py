"""Accuracy with bootstrap confidence intervals and random baselines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from .._validation import check_positive_int, check_probability

__all__ = ["bootstrap_ci", "chance_accuracy"]


def bootstrap_ci(
    correct: Sequence[bool] | np.ndarray,
    rng: np.random.Generator,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``correct`` (Efron & Tibshirani 1993).

    >>> from textdp._rng import make_rng
    >>> lo, hi = bootstrap_ci([1, 0] * 25, make_rng(0))
    >>> 0.3 < lo < 0.5 < hi < 0.7
    True
    """
    x = np.asarray(correct, dtype=np.float64)
    if x.size == 0:
        return (float("nan"), float("nan"))
    n_boot = check_positive_int(n_boot, "n_boot")
    level = check_probability(level, "level")
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def chance_accuracy(labels: Sequence[object], n_classes: int | None = None) -> float:
    """Accuracy of a uniform random guess among the classes (the paper's baseline).

    With ``n_classes`` the guess is uniform over that many classes; otherwise
    over the distinct labels of ``labels``.

    >>> chance_accuracy(["a", "b", "c", "d"])
    0.25
    """
    k = n_classes if n_classes is not None else len(Counter(labels))
    return 1.0 / max(int(k), 1)
