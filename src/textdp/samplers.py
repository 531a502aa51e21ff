"""Exact, floating-point-safe noise on a public grid (a leaf module).

Adding ``numpy`` Gaussian or Laplace noise to a float and publishing every bit of
the result is not differentially private: the set of doubles a floating-point
sampler can return depends on the value it was added to, so the low-order bits
can rule out a candidate input (Mironov, "On significance of the least
significant bits for differential privacy", CCS 2012). This module replaces such
noise by **exact integer noise on a public grid**:

1. the true values are rounded to the grid ``g`` (a power of two, so ``x / g`` and
   ``k * g`` are exact in floating point): ``k = rint(x / g)``;
2. integer noise ``Z`` is drawn *exactly* from the discrete Gaussian or discrete
   Laplace distribution, using only the integer output of a
   :class:`numpy.random.Generator` and exact rational arithmetic (never a float
   transcendental function);
3. the release is ``(k + Z) * g`` -- every released value is an exact multiple of
   ``g``, and every multiple of ``g`` is a possible output from every input.

Samplers (Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, hereafter CKS20):

* :func:`bernoulli_exp` -- ``Bernoulli(exp(-gamma))`` for rational ``gamma >= 0``
  (CKS20 Algorithm 1);
* :func:`discrete_laplace` -- ``P[Z = z] ∝ exp(-|z| / scale)`` for rational
  ``scale > 0`` (CKS20 Algorithm 2);
* :func:`discrete_gaussian` -- ``P[Z = z] ∝ exp(-z² / (2 σ²))`` for rational
  ``σ² > 0`` (CKS20 Algorithm 3).

All three are vectorised over the requested number of samples (rejection loops
run on the still-pending entries); integers that could overflow 64 bits are
handled as Python integers, so the result is exact for any parameter.

Privacy accounting:

* Discrete Laplace with ``scale = Δ₁ / ε`` added to an integer-valued query of L1
  sensitivity ``Δ₁`` is ε-DP (the geometric mechanism; the pmf ratio of two
  shifts by at most ``Δ₁`` is at most ``exp(Δ₁/scale)``).
* Independent discrete Gaussians ``N_Z(0, σ_j²)`` added to an integer-valued
  query ``q`` are ρ-zero-concentrated DP with
  ``ρ = sup Σ_j (q_j(x) - q_j(x'))² / (2 σ_j²)``: CKS20 Prop. 5 bounds the Rényi
  divergence of one coordinate by ``α (μ - ν)² / (2 σ²)`` for integer shifts
  (Thm. 4; the multivariate statement is their Thm. 14), and Rényi divergences add
  over independent coordinates. :func:`zcdp_delta` converts ρ-zCDP to (ε, δ)-DP
  with CKS20's conversion (§2.3, Cor. 13); :func:`discrete_gaussian_sigma`
  calibrates σ with it. (The *continuous* analytic Gaussian formula of Balle &
  Wang is not used for the discrete noise: no bound here assumes it.)
* Rounding to the grid moves each entry by at most ``g/2``, so the rounded query
  of an ``m x n`` matrix has L2 sensitivity at most ``Δ₂ + g sqrt(mn)`` and L1
  sensitivity at most ``Δ₁ + g mn`` (:func:`rounded_sensitivity`).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.optimize import minimize_scalar

from .errors import ParameterError, ParameterTypeError

__all__ = [
    "DEFAULT_GRID",
    "bernoulli_exp",
    "check_grid",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_sigma",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "rounded_sensitivity",
    "snap_to_grid",
    "zcdp_delta",
    "zcdp_rho",
]

#: Default public grid: 2**-20 (about 9.5e-7). A power of two, so grid multiples are exact doubles.
DEFAULT_GRID = 2.0**-20

_INT64_SAFE = 2**62  # bounds below this are handled in int64 without overflow

Rational = int | Fraction | float


def check_grid(grid: object) -> float:
    """Return ``grid`` as a float after checking it is a power of two in [2**-60, 1].

    >>> check_grid(2**-20) == 2.0**-20
    True
    >>> check_grid(0.001)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: grid must be a power of two such as 2**-20 (exact in floating point), got 0.001
    """
    if isinstance(grid, bool) or not isinstance(grid, numbers.Real):
        raise ParameterTypeError(f"grid must be a real number, got {type(grid).__name__}")
    g = float(grid)
    if not (math.isfinite(g) and g > 0) or math.frexp(g)[0] != 0.5 or not (2.0**-60 <= g <= 1.0):
        raise ParameterError(f"grid must be a power of two such as 2**-20 (exact in floating point), got {grid!r}")
    return g


def snap_to_grid(values: np.ndarray, grid: float) -> np.ndarray:
    """Integers ``k = rint(values / grid)`` (int64): the values rounded to the grid, in grid units.

    ``values / grid`` is exact for a power-of-two grid, and ``k * grid`` is exact
    while ``|k| < 2**53``; larger values are refused.

    >>> snap_to_grid(np.array([0.3, -0.26]), 0.25).tolist()
    [1, -1]
    """
    g = check_grid(grid)
    a = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(a)):
        raise ParameterError("values must be finite")
    k = np.rint(a / g)
    if np.any(np.abs(k) >= 2.0**52):
        raise ParameterError(f"values too large for the grid {g:g}: use a coarser grid")
    return k.astype(np.int64)


def rounded_sensitivity(sensitivity: float, grid: float, n_entries: int, norm: str = "l2") -> float:
    """Sensitivity of the grid-rounded query, in *value* units.

    Each entry moves by at most ``g/2`` when rounded, on either input, so the
    rounded difference is within ``g`` per entry of the true one: L2 grows by at
    most ``g sqrt(n_entries)``, L1 by at most ``g n_entries`` (triangle inequality).

    >>> rounded_sensitivity(0.5, 0.25, 4), rounded_sensitivity(2.0, 0.25, 4, "l1")
    (1.0, 3.0)
    """
    g = check_grid(grid)
    if norm == "l2":
        return float(sensitivity) + g * math.sqrt(n_entries)
    if norm == "l1":
        return float(sensitivity) + g * n_entries
    raise ParameterError(f"unknown norm {norm!r}; choose one of: l1, l2")


# --- exact integer randomness --------------------------------------------------------


def _as_fraction(value: Rational, name: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (numbers.Rational, float, np.floating)):
        raise ParameterTypeError(f"{name} must be an int, a Fraction or a float, got {type(value).__name__}")
    if isinstance(value, (float, np.floating)) and not math.isfinite(float(value)):
        raise ParameterError(f"{name} must be finite, got {value!r}")
    f = Fraction(value) if not isinstance(value, (float, np.floating)) else Fraction(float(value))
    if f <= 0:
        raise ParameterError(f"{name} must be > 0, got {value!r}")
    return f


def _uniform_below(gen: np.random.Generator, bound: int, size: int) -> np.ndarray:
    """``size`` exact uniform integers in ``[0, bound)``: int64 when it fits, else Python ints."""
    if bound < _INT64_SAFE:
        return gen.integers(0, bound, size=size, dtype=np.int64)
    nbits = bound.bit_length()
    nwords = (nbits + 63) // 64
    top_mask = np.uint64((1 << (nbits - 64 * (nwords - 1))) - 1)
    out = np.empty(size, dtype=object)
    todo = np.arange(size)
    while todo.size:  # rejection: accept words < bound (probability > 1/2)
        words = gen.integers(0, 2**64, size=(todo.size, nwords), dtype=np.uint64)
        words[:, -1] &= top_mask
        w = words.astype(object)
        v = w[:, 0].copy()
        for i in range(1, nwords):
            v = v + (w[:, i] << (64 * i))
        ok = v < bound
        out[todo[ok]] = v[ok]
        todo = todo[~ok]
    return out


def _bernoulli(gen: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Exact ``Bernoulli(num / den)`` per entry (``0 <= num <= den``)."""
    if num.size == 0:
        return np.zeros(0, dtype=bool)
    u = _uniform_below(gen, den, num.size)
    return np.asarray(u < num, dtype=bool)


def _bernoulli_exp_le1(gen: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """``Bernoulli(exp(-num/den))`` for ``0 <= num <= den`` (CKS20 Algorithm 1, first branch).

    ``K`` counts the trials ``A_K ~ Bernoulli(γ / K)`` until the first failure; the
    result is 1 iff ``K`` is odd. ``Bernoulli(γ/K)`` is drawn as the product of
    independent ``Bernoulli(1/K)`` and ``Bernoulli(γ)``.
    """
    n = num.size
    k = np.ones(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        first = gen.integers(0, k[active], dtype=np.int64) == 0
        cand = active[first]
        cont = cand[_bernoulli(gen, num[cand], den)]
        k[cont] += 1
        active = cont
    return (k % 2) == 1


def _bernoulli_exp_rational(gen: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """``Bernoulli(exp(-num/den))`` for any ``num >= 0`` (CKS20 Algorithm 1)."""
    n = num.size
    whole = num // den
    frac = num - whole * den
    if whole.dtype == object:
        whole = np.minimum(whole, 2**62).astype(np.int64)
    ok = np.ones(n, dtype=bool)
    ones = np.ones(n, dtype=np.int64)
    j = 0
    active = np.flatnonzero(whole > 0)
    while active.size:  # floor(γ) independent Bernoulli(exp(-1)); stop at the first failure
        b = _bernoulli_exp_le1(gen, ones[: active.size], 1)
        ok[active[~b]] = False
        active = active[b]
        j += 1
        active = active[whole[active] > j]
    out = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(ok)
    out[idx] = _bernoulli_exp_le1(gen, frac[idx], den)
    return out


def bernoulli_exp(gamma: Rational, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of ``Bernoulli(exp(-gamma))`` for rational ``gamma >= 0``.

    CKS20 Algorithm 1: only uniform integers and exact rational comparisons.

    >>> from textdp._rng import make_rng
    >>> x = bernoulli_exp(Fraction(1, 2), 20000, make_rng(0))
    >>> bool(abs(x.mean() - math.exp(-0.5)) < 0.02)
    True
    """
    if isinstance(gamma, (int, np.integer)) and not isinstance(gamma, bool) and int(gamma) == 0:
        return np.ones(int(size), dtype=bool)
    g = _as_fraction(gamma, "gamma")
    small = g.numerator < _INT64_SAFE and g.denominator < _INT64_SAFE
    num = np.full(int(size), g.numerator, dtype=np.int64 if small else object)
    return _bernoulli_exp_rational(rng, num, g.denominator)


def _geometric_exp1(gen: np.random.Generator, n: int) -> np.ndarray:
    """Number of successes of ``Bernoulli(exp(-1))`` before the first failure (int64)."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    ones = np.ones(n, dtype=np.int64)
    while active.size:
        a = _bernoulli_exp_le1(gen, ones[: active.size], 1)
        active = active[a]
        v[active] += 1
    return v


def _discrete_laplace(gen: np.random.Generator, t: int, s: int, n: int) -> np.ndarray:
    """``n`` draws of ``Lap_Z(t/s)`` for positive integers t, s (CKS20 Algorithm 2)."""
    big = t * 64 >= _INT64_SAFE
    out = np.empty(n, dtype=object if big else np.int64)
    todo = np.arange(n)
    while todo.size:
        u = _uniform_below(gen, t, todo.size)
        keep = np.flatnonzero(_bernoulli_exp_le1(gen, u, t))  # D ~ Bernoulli(exp(-U/t))
        v = _geometric_exp1(gen, keep.size)
        if big:
            x = u[keep].astype(object) + t * v.astype(object)
        else:
            x = u[keep] + t * v
        y = x // s
        b = gen.integers(0, 2, size=keep.size, dtype=np.int64) == 1
        acc = ~(b & (y == 0))  # B = 1 and Y = 0 would count zero twice: reject
        z = np.where(b, -y, y)
        out[todo[keep[acc]]] = z[acc]
        done = np.zeros(todo.size, dtype=bool)
        done[keep[acc]] = True
        todo = todo[~done]
    return out


def discrete_laplace(scale: Rational, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws from the discrete Laplace ``P[Z = z] ∝ exp(-|z| / scale)``.

    ``scale`` is used exactly (a float is taken as the rational it represents).
    Returns int64 (Python ints, dtype object, only if the scale exceeds 2**56).

    >>> from textdp._rng import make_rng
    >>> z = discrete_laplace(3, 20000, make_rng(1))
    >>> z.dtype, abs(float(z.mean())) < 0.15
    (dtype('int64'), True)
    """
    sc = _as_fraction(scale, "scale")
    return _discrete_laplace(rng, sc.numerator, sc.denominator, int(size))


def discrete_gaussian(sigma2: Rational, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws from the discrete Gaussian ``P[Z = z] ∝ exp(-z² / (2 sigma2))``.

    CKS20 Algorithm 3: propose ``Y ~ Lap_Z(t)`` with ``t = floor(σ) + 1`` and accept
    with probability ``exp(-(|Y| - σ²/t)² / (2σ²))``, evaluated exactly as
    ``Bernoulli(exp(-N/D))`` with integers ``N = (Q t |Y| - P)²`` and
    ``D = 2 P Q t²`` for ``σ² = P/Q``.

    >>> from textdp._rng import make_rng
    >>> z = discrete_gaussian(4, 20000, make_rng(2))
    >>> z.dtype, round(float(z.var()), 0)
    (dtype('int64'), 4.0)
    """
    s2 = _as_fraction(sigma2, "sigma2")
    n = int(size)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1
    den = 2 * p * q * t * t
    huge = t * 64 >= _INT64_SAFE
    out = np.empty(n, dtype=object if huge else np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _discrete_laplace(rng, t, 1, todo.size)
        u = np.abs(y)
        umax = int(u.max()) if u.size else 0
        if (q * t * umax + p) ** 2 < _INT64_SAFE and den < _INT64_SAFE:
            num = (q * t * u.astype(np.int64) - p) ** 2
        else:
            num = (q * t * u.astype(object) - p) ** 2
        c = _bernoulli_exp_rational(rng, num, den)
        out[todo[c]] = y[c] if huge else y[c].astype(np.int64)
        todo = todo[~c]
    return out


def discrete_laplace_pmf(scale: float, z: np.ndarray) -> np.ndarray:
    """Exact-formula pmf ``(1 - e^{-1/s}) / (1 + e^{-1/s}) e^{-|z|/s}`` (floats, for tests).

    >>> round(float(discrete_laplace_pmf(1.0, np.arange(-50, 51)).sum()), 12)
    1.0
    """
    s = float(scale)
    r = math.exp(-1.0 / s)
    return (1.0 - r) / (1.0 + r) * np.exp(-np.abs(np.asarray(z, dtype=float)) / s)


def discrete_gaussian_pmf(sigma2: float, z: np.ndarray) -> np.ndarray:
    """pmf ``exp(-z²/2σ²) / Σ_k exp(-k²/2σ²)`` (floats; the sum runs to 40σ + 40, for tests).

    >>> round(float(discrete_gaussian_pmf(2.0, np.arange(-60, 61)).sum()), 12)
    1.0
    """
    s2 = float(sigma2)
    kmax = int(40 * math.sqrt(s2)) + 40
    k = np.arange(-kmax, kmax + 1, dtype=float)
    norm = float(np.exp(-(k * k) / (2 * s2)).sum())
    zz = np.asarray(z, dtype=float)
    return np.exp(-(zz * zz) / (2 * s2)) / norm


# --- accounting ----------------------------------------------------------------------


def zcdp_delta(rho: float, epsilon: float) -> float:
    """Smallest δ this bound gives for ρ-zCDP ⇒ (ε, δ)-DP (CKS20 §2.3, Cor. 13).

    ``δ = inf_{α > 1} exp((α - 1)(α ρ - ε)) / (α - 1) · (1 - 1/α)^α``. Every α gives
    a valid δ, so the numerical minimisation can only err on the safe side; the
    result is rounded up by a relative 1e-9 to absorb floating-point error.

    >>> round(zcdp_delta(0.5, 3.0), 6) < 0.0105
    True
    """
    r = float(rho)
    e = float(epsilon)
    if r < 0 or e < 0 or not (math.isfinite(r) and math.isfinite(e)):
        raise ParameterError(f"rho and epsilon must be finite and >= 0, got {rho!r}, {epsilon!r}")
    if r == 0:
        return 0.0

    def log_delta(alpha: float) -> float:
        return (alpha - 1.0) * (alpha * r - e) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)

    hi = max((e + 1.0) / (2.0 * r) + 2.0, 2.0)
    res = minimize_scalar(log_delta, bounds=(1.0 + 1e-9, hi), method="bounded", options={"xatol": 1e-12})
    best = min(float(res.fun), log_delta(hi), log_delta((1.0 + e / r) / 2.0 if e > r else 1.5))
    return min(1.0, math.exp(best) * (1.0 + 1e-9))


@lru_cache(maxsize=256)
def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ (to 1e-12 relative, rounded down) with ``zcdp_delta(ρ, ε) <= δ``.

    >>> r = zcdp_rho(3.0, 1e-4)
    >>> zcdp_delta(r, 3.0) <= 1e-4 < zcdp_delta(r * 1.001, 3.0)
    True
    """
    e = float(epsilon)
    d = float(delta)
    if not (math.isfinite(e) and e > 0) or not (0 < d < 1):
        raise ParameterError(f"need epsilon > 0 and delta in (0, 1), got {epsilon!r}, {delta!r}")
    lo, hi = 0.0, e + 1.0
    while zcdp_delta(hi, e) <= d:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if zcdp_delta(mid, e) <= d:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return lo


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ of independent discrete Gaussians giving (ε, δ)-DP for integer L2 sensitivity Δ.

    ``σ = Δ / sqrt(2 ρ)`` with ``ρ = zcdp_rho(ε, δ)`` (CKS20 Thm. 14 + Cor. 13),
    rounded up by a relative 1e-12.

    >>> s = discrete_gaussian_sigma(3.0, 1e-4, 1.0)
    >>> zcdp_delta(1.0 / (2 * s * s), 3.0) <= 1e-4
    True
    """
    sens = float(sensitivity)
    if not (math.isfinite(sens) and sens > 0):
        raise ParameterError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return sens / math.sqrt(2.0 * zcdp_rho(epsilon, delta)) * (1.0 + 1e-12)
