"""Privacy curves of the topic-matrix mechanisms' claimed laws: exact integer noise on a public grid.

TopicDP (:class:`~textdp.topics.noise.GaussianNoise`), the MVG mechanism and the Laplace
baseline release ``(rint(X/g) + Z) g`` with ``Z`` i.i.d. exact discrete noise (Gaussian of variance
σ², or Laplace of scale ``s``, in grid units ``g``). The audit pairs differ in one entry
(:func:`~textdp.audit.topic_cases.matrix_pair`) or in the two entries of one row
(:func:`~textdp.audit.topic_cases.l1_matrix_case`), so the claimed privacy loss ``ln p_a(o)/p_b(o)`` of a
release depends only on the entries that differ (the noise on the others has the same law under
both inputs and cancels). The parameters (σ², ``s``) are recomputed from the public ε, δ,
sensitivity, shape and grid by :mod:`textdp.audit.claims`, never read from the mechanism object.

In grid units σ is ~10^5-10^7 (``g = 2^-20``), so a dense pmf table over the outputs is out of
reach; the profiles use the structure of each law instead:

* discrete Gaussian (:func:`gaussian_entry_curve`): the loss is *affine* in the differing output
  coordinate, so the optimal event ``{L > ε′}`` is a half-line and ``δ(ε′)`` is two tail sums of the
  discrete Gaussian. They are bracketed rigorously (:func:`discrete_gaussian_tail`) by the integral
  comparison for a decreasing function and the exact normaliser (Poisson summation); the bracket is
  narrower than ``0.4/σ`` (< 10^-5 here), far below the test's resolution (~10^-3 at 10^5 samples),
  and the *upper* end is the claim's band, so the test stays sound.
* discrete Laplace (:func:`laplace_pair_curve`): the loss is piecewise linear in each coordinate;
  for two entries that move by ``D`` grid units each it takes the values ``(2D − 2j)/s`` and, on the
  part of the outputs where it is positive, ``j`` is the sum of two independent geometric-type
  variables whose law has a closed form. The profile is then exact
  (:func:`~textdp.audit.curve.exact_profile` over ``j = 0 .. D − 1``, 10^6 terms).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from .curve import CURVE_POINTS, ClaimedProfile, PrivacyCurve, Sampler, exact_profile

__all__ = [
    "discrete_gaussian_tail",
    "gaussian_entry_curve",
    "laplace_pair_curve",
    "laplace_pair_law",
]

#: Added to the claim's upper band to absorb floating-point error in the tail functions (ndtr is
#: accurate to ~1e-16 relative) and the 1e-12 relative rounding-up of σ in the calibration.
FLOAT_SLACK = 1e-9


def _differing(a: np.ndarray, b: np.ndarray, grid: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The grid-rounded inputs (flat, grid units) and the indices of the entries where they differ.

    The rounding is the audit's own (``rint(x/g)``, the paper's grid), never the release's helper:
    a rounding error shared by the release and the claim would cancel (issue 41).
    """
    ka = np.rint(np.asarray(a, dtype=np.float64) / float(grid)).astype(np.int64).reshape(-1)
    kb = np.rint(np.asarray(b, dtype=np.float64) / float(grid)).astype(np.int64).reshape(-1)
    if ka.shape != kb.shape:
        raise ParameterError("the two audit matrices must have the same shape")
    return ka, kb, np.flatnonzero(ka != kb)


def discrete_gaussian_tail(sigma2: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bounds ``(lower, point, upper)`` on ``P[Z >= t]`` for the discrete Gaussian ``∝ exp(−z²/2σ²)``, integer ``t``.

    The normaliser is exact: ``Σ_k exp(−k²/2σ²) = sqrt(2π) σ θ`` with
    ``θ = 1 + 2 Σ_{j≥1} exp(−2π²σ²j²)`` (Poisson summation). For ``t ≥ 1`` the summand is
    decreasing on ``[t − 1, ∞)``, so ``∫_t^∞ ≤ Σ_{k≥t} ≤ ∫_{t−1}^∞``: ``Q(t/σ)/θ ≤ P[Z ≥ t] ≤ Q((t−1)/σ)/θ``
    (``Q`` the standard normal tail). For ``t ≤ 0``, ``P[Z ≥ t] = 1 − P[Z ≥ 1 − t]``. The
    point is the midpoint rule ``Q((t − 1/2)/σ)/θ`` (error ``O(σ^-3)``). Rigorous up to floating
    point; the bracket is narrower than ``1/(σ sqrt(2π))``.

    >>> from textdp.samplers import discrete_gaussian_pmf
    >>> z = np.arange(-80, 81)
    >>> lo, pt, hi = discrete_gaussian_tail(9.0, np.array([2, -3]))
    >>> exact = [discrete_gaussian_pmf(9.0, z[z >= 2]).sum(), discrete_gaussian_pmf(9.0, z[z >= -3]).sum()]
    >>> bool(np.all(lo <= exact) and np.all(np.array(exact) <= hi)), bool(np.abs(pt - exact).max() < 2e-3)
    (True, True)
    """
    from scipy.special import ndtr

    s = math.sqrt(float(sigma2))
    theta = 1.0 + 2.0 * sum(math.exp(-2.0 * math.pi ** 2 * s * s * j * j) for j in range(1, 8))
    tt = np.asarray(t, dtype=np.float64)
    pos = tt >= 1
    u = np.where(pos, tt, 1.0 - tt)  # >= 1: P[Z >= t] or, for t <= 0, its complement's tail

    def tail(x: np.ndarray) -> np.ndarray:
        return np.asarray(ndtr(-x / s) / theta)

    lo_u, pt_u, hi_u = tail(u), tail(u - 0.5), tail(u - 1.0)
    lower = np.where(pos, lo_u, 1.0 - hi_u)
    upper = np.where(pos, hi_u, 1.0 - lo_u)
    return lower, np.where(pos, pt_u, 1.0 - pt_u), upper


def _gaussian_profile(sigma2: float, d: int) -> ClaimedProfile:
    """δ(ε′) of the discrete Gaussian pair shifted by ``d`` grid units, with its rigorous upper band."""

    def claimed(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        g = np.asarray(grid, dtype=np.float64)
        # L > ε' ⇔ q > c = 2σ²ε'/d with q = d + 2Z under a and −d + 2Z under b: Z ≥ t_a resp. t_a + d
        t_a = np.floor((2.0 * sigma2 * g / d - d) / 2.0) + 1.0
        pt = np.empty(g.size)
        up = np.full(g.size, -np.inf)
        for k in (-1.0, 0.0, 1.0):  # the optimal threshold, whatever the rounding of t_a
            _, pt_a, hi_a = discrete_gaussian_tail(sigma2, t_a + k)
            lo_b, pt_b, _ = discrete_gaussian_tail(sigma2, t_a + k + d)
            up = np.maximum(up, hi_a - np.exp(g) * lo_b)
            if k == 0.0:
                pt = pt_a - np.exp(g) * pt_b
        return np.maximum(pt, 0.0), np.minimum(1.0, np.maximum(up, 0.0) + FLOAT_SLACK)

    return claimed


def gaussian_entry_curve(sample: Sampler, a: np.ndarray, b: np.ndarray, sigma2: float, grid: float, *,
                         what: str = "releases", law: str = "the claimed discrete Gaussian") -> PrivacyCurve:
    """The curve audit of i.i.d. discrete Gaussian noise (σ² in grid units) for matrices one entry apart.

    With ``k_a, k_b`` the grid-rounded differing entries, ``d = |k_a − k_b|`` and ``o`` the released
    entry in grid units, the claimed loss is ``L(o) = d q/(2σ²)`` with
    ``q = sign(k_a − k_b)(2o − k_a − k_b)`` (exact: ``((o − k_b)² − (o − k_a)²)/(2σ²)``; the
    normalisers and the other entries cancel). Under ``a``, ``q = d + 2Z``, under ``b``,
    ``q = −d + 2Z`` (Z the claimed noise), so ``δ(ε′)`` is two tail sums of the discrete Gaussian,
    bracketed by :func:`discrete_gaussian_tail` (upper end = the band). Grid: ``CURVE_POINTS`` values
    of ε′ in ``[0, μ + 2 sqrt(2μ)]`` with ``μ = d²/(2σ²)`` (the mean and the spread of the loss).

    >>> c = gaussian_entry_curve(lambda x, n, rng: np.broadcast_to(x, (n,) + x.shape),
    ...                          np.array([[3.0]]), np.array([[1.0]]), 4.0, 1.0)
    >>> c.loss(np.array([[[2.0]], [[3.0]]])).tolist()  # ((o - 1)^2 - (o - 3)^2) / 8
    [0.0, 0.5]
    """
    ka, kb, idx = _differing(a, b, grid)
    if idx.size != 1:
        raise ParameterError(f"the Gaussian curve needs matrices that differ in one grid entry, got {idx.size}")
    i = int(idx[0])
    sign = 1.0 if ka[i] > kb[i] else -1.0
    d = int(abs(int(ka[i]) - int(kb[i])))
    s2 = float(sigma2)
    if not (math.isfinite(s2) and s2 > 0):
        raise ParameterError(f"the claimed variance must be finite and > 0, got {sigma2!r}")
    mid2 = float(ka[i] + kb[i])

    def loss(o: np.ndarray) -> np.ndarray:
        x = np.asarray(o, dtype=np.float64).reshape(len(o), -1)[:, i] / grid
        return np.asarray(d * (sign * (2.0 * x - mid2)) / (2.0 * s2))

    mu = d * d / (2.0 * s2)
    top = mu + 2.0 * math.sqrt(2.0 * mu)
    return PrivacyCurve(
        sample=sample, loss=loss, claimed=_gaussian_profile(s2, d),
        grid=tuple(np.linspace(0.0, top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {top:.3g}] vs the tail sums of {law} "
                     f"(sigma {math.sqrt(s2):.6g} grid units, entries {d} grid units apart; bracket < 1e-5)"),
        chunk=8_192,
    )


def laplace_pair_law(scale: float, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ln P_a(j), L_j)`` for ``j = 0 .. d − 1``: the positive part of the claimed loss of the Laplace pair.

    Two entries move by ``d`` grid units each; with i.i.d. discrete Laplace noise of scale ``s``
    (``P[Z = z] = c' r^|z|``, ``r = e^{−1/s}``, ``c' = (1 − r)/(1 + r)``) each contributes
    ``|o − k_b| − |o − k_a| = clip(d + 2Z, −d, d) = d − 2 min(V, d)`` under ``a``, with
    ``V = max(−Z, 0)``: ``P[V = 0] = 1/(1 + r)``, ``P[V = w] = c' r^w`` (``w ≥ 1``). The loss is
    ``L = (2d − 2j)/s`` with ``j = min(V, d) + min(V', d)``; it is positive iff ``j < d``, where the
    truncation at ``d`` plays no part and ``P[V + V' = j] = r^j (2c'/(1 + r) + (j − 1) c'²)`` for
    ``j ≥ 1``, ``1/(1 + r)²`` for ``j = 0``. Outputs with ``L ≤ 0`` add nothing to ``δ(ε′)``, ε′ ≥ 0.

    >>> from textdp.samplers import discrete_laplace_pmf
    >>> lp, lj = laplace_pair_law(2.0, 3)
    >>> z = np.arange(-60, 61)
    >>> p = discrete_laplace_pmf(2.0, z)
    >>> stat = np.minimum(np.maximum(-z, 0), 3)  # min(V, d) of one entry
    >>> brute = [float(sum(p[i] * p[k] for i in range(z.size) for k in range(z.size)
    ...                    if stat[i] + stat[k] == j)) for j in range(3)]
    >>> np.allclose(np.exp(lp), brute, rtol=1e-12), lj.tolist()
    (True, [3.0, 2.0, 1.0])
    """
    s = float(scale)
    one_minus_r = -math.expm1(-1.0 / s)
    r = 1.0 - one_minus_r
    c = one_minus_r / (1.0 + r)
    j = np.arange(int(d), dtype=np.float64)
    body = np.log(2.0 * c / (1.0 + r) + np.maximum(j - 1.0, 0.0) * c * c) - j / s
    body[0] = -2.0 * math.log1p(r)
    return body, (2.0 * d - 2.0 * j) / s


def laplace_pair_curve(sample: Sampler, a: np.ndarray, b: np.ndarray, scale: float, grid: float, *,
                       what: str = "releases", law: str = "the claimed discrete Laplace") -> PrivacyCurve:
    """The curve audit of i.i.d. discrete Laplace noise (scale ``s`` in grid units), two entries ``d`` apart each.

    The claimed loss of a release ``o`` (grid units) is ``Σ_e (|o_e − k_b,e| − |o_e − k_a,e|)/s``
    over all entries (0 where the inputs agree); the profile is exact, from the closed-form law of
    :func:`laplace_pair_law` and ``P_b = P_a e^{−L}`` on each level set of ``L``
    (:func:`~textdp.audit.curve.exact_profile`). Grid: ``CURVE_POINTS`` values of ε′ in
    ``[0, 0.75 · 2d/s]``.

    >>> c = laplace_pair_curve(lambda x, n, rng: np.broadcast_to(x, (n,) + x.shape),
    ...                        np.array([[2.0, 0.0]]), np.array([[0.0, 2.0]]), 4.0, 1.0)
    >>> c.loss(np.array([[[2.0, 0.0]], [[1.0, 1.0]], [[5.0, 0.0]]])).tolist()
    [1.0, 0.0, 1.0]
    """
    ka, kb, idx = _differing(a, b, grid)
    gaps = np.abs(ka[idx] - kb[idx])
    if idx.size != 2 or gaps[0] != gaps[1]:
        raise ParameterError("the Laplace curve needs matrices that differ in two entries by the same amount")
    d = int(gaps[0])
    s = float(scale)
    if not (math.isfinite(s) and s > 0):
        raise ParameterError(f"the claimed scale must be finite and > 0, got {scale!r}")
    fa, fb = ka.astype(np.float64), kb.astype(np.float64)

    def loss(o: np.ndarray) -> np.ndarray:
        x = np.asarray(o, dtype=np.float64).reshape(len(o), -1) / grid
        return np.asarray((np.abs(x - fb) - np.abs(x - fa)).sum(axis=1) / s)

    logp_a, level = laplace_pair_law(s, d)
    top = 0.75 * 2.0 * d / s
    return PrivacyCurve(
        sample=sample, loss=loss, claimed=exact_profile(logp_a, logp_a - level),
        grid=tuple(np.linspace(0.0, top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {top:.3g}] vs the exact profile of {law} "
                     f"(scale {s:.6g} grid units, two entries {d} grid units apart)"),
        chunk=8_192,
    )
