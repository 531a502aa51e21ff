"""Kept fraction against ε for the page's plot: the exact survival curve for Earth Mover's privacy, the mechanism
itself run at each ε of a grid for every other word or document mechanism, and the ε that keeps a target."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .._rng import make_rng
from ..errors import ParameterError

if TYPE_CHECKING:
    from ..embeddings import Embeddings

__all__ = ["CURVE_EPSILONS", "CURVE_WORDS", "exact_curve", "inverse", "sampled_curve"]

#: ε grid of the kept-fraction plot (log-spaced; the mechanism itself is run at each point).
CURVE_EPSILONS = tuple(float(x) for x in np.round(np.logspace(-1, 3, 9), 4))
#: Releases per ε drawn for the plot of a mechanism without an exact calibration.
CURVE_WORDS = 60

#: A curve: its points ``[ε, kept fraction]``, the ε for the target (None: with why), how it was computed.
Curve = tuple[list[list[float]], float | None, str, str]


def exact_curve(emb: Embeddings, rows: np.ndarray, target: float) -> Curve:
    """Earth Mover's privacy: the exact survival curve of :func:`textdp.accounting.calibration.survival_curve` on
    the text's first 200 protected words ``rows`` (common random numbers, monotone in ε)."""
    from ..accounting.calibration import survival_curve

    words = rows[: 200]
    repeats = max(2, min(10, 300 // words.size))
    curve = survival_curve(emb, words=words, repeats=repeats, seed=make_rng())
    grid = np.logspace(-1, 3, 41)
    points = [[float(e), curve.unchanged_fraction(float(e))] for e in grid]
    method = (f"exact survival curve (textdp calibrate) of {words.size} words x {repeats} noise draws; "
              "fraction of words mapped to themselves")
    try:
        return points, curve.epsilon_for(target), "", method
    except ParameterError as exc:
        return points, None, str(exc), method


def sampled_curve(kept_at: Callable[[float], float], copies: int, target: float) -> Curve:
    """Every other mechanism: ``kept_at(ε)`` (the mean kept fraction of ``copies`` releases of the text at ε) at each
    ε of :data:`CURVE_EPSILONS`, a point left out where the mechanism cannot represent ε; the ε for the target read
    from the running maximum by interpolation in log ε (:func:`inverse`)."""
    points = []
    for e in CURVE_EPSILONS:
        try:
            points.append([e, kept_at(e)])
        except (OverflowError, FloatingPointError):
            continue  # beyond what this mechanism can represent: the point is left out
    method = (f"the mechanism run {copies} time{'s' if copies > 1 else ''} on this text at each epsilon "
              "(Monte Carlo); fraction of words released unchanged")
    eps_target, why = inverse(points, target)
    return points, eps_target, why, method


def inverse(points: list[list[float]], target: float) -> tuple[float | None, str]:
    """ε where the running maximum of the measured curve first reaches ``target`` (log-linear interpolation).

    >>> inverse([[1.0, 0.0], [10.0, 0.4], [100.0, 0.8]], 0.6)
    (31.6228, '')
    >>> inverse([[1.0, 0.0], [10.0, 0.2]], 0.5)[0] is None
    True
    """
    eps = np.array([p[0] for p in points])
    frac = np.maximum.accumulate(np.array([p[1] for p in points]))
    if frac[-1] < target:
        return None, f"no epsilon up to {eps[-1]:g} keeps {target:.0%} of this text's words"
    if frac[0] >= target:
        return None, f"already {frac[0]:.0%} of the words are kept at epsilon {eps[0]:g}"
    i = int(np.argmax(frac >= target))
    f0, f1 = frac[i - 1], frac[i]
    t = 0.0 if f1 == f0 else (target - f0) / (f1 - f0)
    value = math.exp(math.log(eps[i - 1]) + t * (math.log(eps[i]) - math.log(eps[i - 1])))
    return round(value, 4), ""
