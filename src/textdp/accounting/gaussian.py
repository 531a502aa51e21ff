"""Calibration of the (continuous) Gaussian and matrix-variate Gaussian mechanisms.

Pure functions of public parameters (ε, δ, a sensitivity, a shape), shared by
the topic-matrix noise (:mod:`textdp.topics.noise`) and the DP-BART
rewriter (:meth:`textdp.generation.lm_family.DPBART.sigma`):

* :func:`gaussian_delta` -- the exact δ of the Gaussian mechanism (Balle & Wang,
  ICML 2018, Theorem 8), and :func:`analytic_gaussian_sigma`, the smallest σ
  meeting it.
* :func:`classic_gaussian_sigma` -- Dwork & Roth's σ (Theorem A.1, proven only
  for ε < 1), and :func:`thesis_gaussian_sigma`, TopicDP's per-entry split.
* :func:`mvg_precision_budget` -- the sufficient condition of the matrix-variate
  Gaussian mechanism (Chanyaswad, Dytso, Poor & Mittal, CCS 2018, Theorem 3).

The noise these calibrate is continuous; mechanisms that release discrete noise
prove their guarantee separately (:mod:`textdp.samplers`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._validation import check_epsilon, check_positive_int, check_probability
from ..errors import ParameterError, ParameterTypeError

__all__ = [
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_delta",
    "mvg_precision_budget",
    "thesis_gaussian_sigma",
]


def check_sensitivity(value: object, name: str = "sensitivity") -> float:
    """A finite real number > 0 (a one-line error otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ParameterTypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Exact δ of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``N(0, σ² I)`` added to a query of L2 sensitivity Δ is (ε, δ)-DP iff
    ``Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ) <= δ``; this returns the left side.

    >>> round(gaussian_delta(1.0, 1.0, 1.0), 4)
    0.1269
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + float(log_ndtr(-a - b))))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ (to 1e-12 relative) with ``gaussian_delta(σ, ε, Δ) <= δ``.

    δ(σ) decreases in σ, so bisection on log σ finds it; the returned σ is the
    upper end of the final bracket, hence always satisfies the inequality.

    >>> s = analytic_gaussian_sigma(3.0, 1e-4, 1.0)
    >>> gaussian_delta(s, 3.0, 1.0) <= 1e-4 < gaussian_delta(s * 0.999, 3.0, 1.0)
    True
    """
    eps = check_epsilon(epsilon)
    d = check_probability(delta, "delta")
    sens = check_sensitivity(sensitivity)
    lo, hi = sens * 1e-6, sens
    while gaussian_delta(hi, eps, sens) > d:
        lo, hi = hi, hi * 2.0
    while gaussian_delta(lo, eps, sens) <= d:
        hi, lo = lo, lo / 2.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta(mid, eps, sens) <= d:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1.0 < 1e-12:
            break
    return hi


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Dwork & Roth's ``Δ sqrt(2 ln(1.25/δ)) / ε`` (2014, Theorem A.1; proven only for ε < 1).

    >>> round(classic_gaussian_sigma(0.5, 1e-5, 1.0), 3)
    9.69
    """
    eps = check_epsilon(epsilon)
    d = check_probability(delta, "delta")
    return check_sensitivity(sensitivity) * math.sqrt(2.0 * math.log(1.25 / d)) / eps


def thesis_gaussian_sigma(epsilon: float, delta: float, sensitivity: float, m: int, n: int) -> float:
    """The thesis's Algorithm 2: classic σ with the per-entry budget ``ε/(mn)``.

    >>> thesis_gaussian_sigma(3.0, 1e-4, 1.0, 10, 10) == classic_gaussian_sigma(0.03, 1e-4, 1.0)
    True
    """
    m = check_positive_int(m, "m")
    n = check_positive_int(n, "n")
    return classic_gaussian_sigma(check_epsilon(epsilon) / (m * n), delta, sensitivity)


def _harmonic(r: int, power: float = 1.0) -> float:
    return float(sum(i ** -power for i in range(1, r + 1)))


def mvg_precision_budget(epsilon: float, delta: float, sensitivity: float, sup_norm: float,
                         m: int, n: int) -> float:
    """Right side of the MVG sufficient condition (Chanyaswad et al. 2018, Thm. 3).

    The MVG mechanism ``f(X) + Z``, ``Z ~ MVG_{m,n}(0, Σ, Ψ)``, is (ε, δ)-DP if
    ``||σ(Σ^{-1})||_2 ||σ(Ψ^{-1})||_2 <= (-β + sqrt(β² + 8αε))² / (4α²)`` with
    ``r = min(m, n)``, ``H_r`` and ``H_{r,1/2}`` the generalised harmonic
    numbers of order r (powers 1 and 1/2), ``γ = sup ||f(X)||_F``, ``s_2`` the
    L2 sensitivity, ``ζ(δ) = 2 sqrt(-mn ln δ) - 2 ln δ + mn``,
    ``α = (H_r + H_{r,1/2}) γ² + 2 H_r γ s_2`` and ``β = 2 (mn)^{1/4} H_r s_2 ζ(δ)``.

    >>> round(mvg_precision_budget(1.0, 0.1, 1.0, 1.0, 1, 1), 6)
    0.012723
    """
    eps = check_epsilon(epsilon)
    d = check_probability(delta, "delta")
    s2 = check_sensitivity(sensitivity)
    g = check_sensitivity(sup_norm, "sup_norm")
    m = check_positive_int(m, "m")
    n = check_positive_int(n, "n")
    r = min(m, n)
    hr, hr_half = _harmonic(r), _harmonic(r, 0.5)
    zeta = 2.0 * math.sqrt(-m * n * math.log(d)) - 2.0 * math.log(d) + m * n
    alpha = (hr + hr_half) * g * g + 2.0 * hr * g * s2
    beta = 2.0 * (m * n) ** 0.25 * hr * s2 * zeta
    # (-β + sqrt(β² + 8αε))² / (4α²), written as (2ε / (β + sqrt(β² + 8αε)))² · 4 to avoid cancellation
    root = math.sqrt(beta * beta + 8.0 * alpha * eps)
    return (4.0 * eps / (beta + root)) ** 2
