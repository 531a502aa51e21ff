"""The audit's own accountant: every claimed law and bound re-derived from the papers, sharing no code with the mechanisms.

An audit whose claim calls the mechanism's calibration (``samplers.zcdp_rho``,
``accounting.gaussian.thesis_gaussian_sigma``, ``mvg_precision_budget``, ``rounded_sensitivity``,
``generation.bounds.two_set_bound``) moves with a bug planted there: ρ×2.25 in ``zcdp_rho``
gives σ/1.5 in the mechanism *and* in the claimed law, and the audit passes. The functions here
compute the same quantities a second time, from the papers' formulas, with their own arithmetic
(``math``, ``fractions`` and ``scipy.special`` only; nothing from :mod:`textdp.samplers`,
:mod:`textdp.accounting` or :mod:`textdp.generation`). ``tests/test_audit_accountant.py`` checks
them against brute-force numerical integration and against numbers printed in the papers.

Two kinds of quantity:

* **the least noise a claim allows** (the *privacy* claim of a case): :func:`analytic_gaussian_sigma`
  is the smallest σ for which Gaussian noise on a query of L2 sensitivity Δ is (ε, δ)-DP
  (Balle & Wang 2018, Theorem 8: the condition is necessary and sufficient). Any correct
  (ε, δ) calibration adds at least this much noise, so the privacy curve of a topic release is
  compared with the discrete Gaussian at this σ: a mechanism with less noise than any (ε, δ)
  claim allows is flagged, whatever its own calibration says;
* **the law the paper states** (the *conformance* reference): TopicDP's CKS20 zCDP calibration
  (:func:`cks20_sigma`), the thesis's (:func:`thesis_sigma`), Chanyaswad et al.'s precision
  budget (:func:`mvg_budget`), the Laplace baseline's scale (:func:`laplace_scale`), ER-AE's
  two-set bound (:func:`two_set_per_token`). A planted error that keeps the release private
  (MVG adds ~30 times the noise (ε, δ) needs) is a change of law, found by the conformance test.

References
----------
B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential privacy: analytical
calibration and optimal denoising. ICML 2018 (Theorem 8). C. Canonne, G. Kamath, T. Steinke. The
discrete Gaussian for differential privacy. NeurIPS 2020 (Corollary 13, Theorem 14). T. Chanyaswad,
A. Dytso, H. V. Poor, P. Mittal. MVG mechanism: differential privacy under matrix-valued query. CCS
2018 (Theorem 3). A. Sharma. Differentially private topic modelling (thesis, 2021; Algorithm 2).
C. Dwork, A. Roth. The algorithmic foundations of differential privacy (2014), Theorem A.1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from ..errors import ParameterError

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "cks20_delta",
    "cks20_rho",
    "cks20_sigma",
    "exponential_per_token",
    "laplace_scale",
    "mvg_budget",
    "mvg_column_variances",
    "rounded_l1",
    "rounded_l2",
    "thesis_sigma",
    "two_set_per_token",
]


def _positive(value: float, name: str) -> float:
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return x


def _delta(value: float) -> float:
    d = float(value)
    if not (0.0 < d < 1.0):
        raise ParameterError(f"delta must lie in (0, 1), got {value!r}")
    return d


# -- sensitivities of the grid-rounded query --------------------------------------------------------------------
def rounded_l2(sensitivity: float, grid: float, entries: int) -> float:
    """L2 sensitivity, in grid units, of ``rint(X/g)`` when ``X`` has L2 sensitivity Δ: ``Δ/g + sqrt(entries)``.

    Each entry of either input moves by at most 1/2 grid unit when rounded, so the rounded
    difference is within 1 grid unit per entry of the exact one (triangle inequality).

    >>> rounded_l2(0.5, 0.25, 4)
    4.0
    """
    return _positive(sensitivity, "sensitivity") / _positive(grid, "grid") + math.sqrt(int(entries))


def rounded_l1(sensitivity: float, grid: float, entries: int) -> Fraction:
    """L1 sensitivity, in grid units, of ``rint(X/g)`` when ``X`` has L1 sensitivity Δ: ``Δ/g + entries`` (exact).

    >>> rounded_l1(2.0, 0.25, 4)
    Fraction(12, 1)
    """
    return Fraction(_positive(sensitivity, "sensitivity")) / Fraction(_positive(grid, "grid")) + int(entries)


# -- the analytic Gaussian (Balle & Wang 2018, Theorem 8) ----------------------------------------------------
def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """``Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)``: the exact δ(ε) of ``N(0, σ²)`` noise at L2 sensitivity Δ.

    The second term is evaluated as ``exp(ε + ln Φ(·))`` so that large ε does not overflow.

    >>> round(analytic_gaussian_delta(1.0, 1.0, 1.0), 4)
    0.1269
    """
    from scipy.special import log_ndtr, ndtr

    s = _positive(sigma, "sigma")
    e = float(epsilon)
    d = _positive(sensitivity, "sensitivity")
    u, v = d / (2.0 * s), e * s / d
    return float(ndtr(u - v) - math.exp(e + float(log_ndtr(-u - v))))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The least σ with ``analytic_gaussian_delta(σ, ε, Δ) <= δ``, rounded *down* (to 1e-10 relative).

    Rounded down on purpose: this is the least noise an (ε, δ) claim allows, and a smaller σ
    makes the claimed privacy curve larger, so the audit errs towards passing. Bisection on
    ``ln σ``; δ(σ) decreases in σ.

    >>> s = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    >>> round(s, 3), analytic_gaussian_delta(s * 1.000001, 1.0, 1.0) <= 1e-5
    (3.731, True)
    """
    e = _positive(epsilon, "epsilon")
    d = _delta(delta)
    sens = _positive(sensitivity, "sensitivity")
    lo, hi = math.log(sens) - 30.0, math.log(sens) + 30.0
    if analytic_gaussian_delta(math.exp(hi), e, sens) > d:
        raise ParameterError(f"no sigma below e^30 * sensitivity reaches delta={delta!r} at epsilon={epsilon!r}")
    return math.exp(_bisect(lambda t: analytic_gaussian_delta(math.exp(t), e, sens) <= d, lo, hi))


def _bisect(left: Callable[[float], bool], lo: float, hi: float) -> float:
    """The lower end of the final bracket of a bisection on ``[lo, hi]`` (width < 1e-10 or 200 steps).

    ``left(mid)``: the boundary lies at or left of ``mid`` (the bracket becomes ``[lo, mid]``). The
    audit's solvers all work on a log scale and return this lower end: the least σ rounded down
    (:func:`analytic_gaussian_sigma`), the largest ρ rounded down (:func:`cks20_rho`).

    >>> round(_bisect(lambda t: t * t >= 2.0, 0.0, 2.0), 9)
    1.414213562
    """
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if left(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-10:
            break
    return lo


# -- zCDP (Canonne, Kamath & Steinke 2020) -------------------------------------------------------------------
def cks20_delta(rho: float, epsilon: float) -> float:
    """CKS20 Corollary 13: ``δ = min_{α>1} e^{(α−1)(αρ−ε)} (1 − 1/α)^α / (α − 1)`` for ρ-zCDP at ε.

    Minimised here by a golden-section search on ``ln(α − 1)`` after a coarse scan (the log
    of the objective is convex in α); every α gives a valid δ.

    >>> round(cks20_delta(0.5, 3.0), 6)
    0.005143
    """
    r = _positive(rho, "rho")
    e = float(epsilon)

    def log_delta(t: float) -> float:  # t = ln(alpha - 1)
        a = 1.0 + math.exp(t)
        return (a - 1.0) * (a * r - e) + a * math.log1p(-1.0 / a) - math.log(a - 1.0)

    ts = [-20.0 + 0.25 * i for i in range(161)]  # alpha - 1 from 2e-9 to e^20
    k = min(range(len(ts)), key=lambda i: log_delta(ts[i]))
    lo, hi = ts[max(k - 1, 0)], ts[min(k + 1, len(ts) - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(100):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        if log_delta(c) < log_delta(d):
            hi = d
        else:
            lo = c
    return min(1.0, math.exp(min(log_delta(0.5 * (lo + hi)), log_delta(ts[k]))))


def cks20_rho(epsilon: float, delta: float) -> float:
    """The largest ρ with ``cks20_delta(ρ, ε) <= δ`` (bisection on ``ln ρ``, to 1e-10 relative).

    >>> r = cks20_rho(1.0, 1e-4)
    >>> cks20_delta(r, 1.0) <= 1e-4 < cks20_delta(r * 1.001, 1.0)
    True
    """
    e = _positive(epsilon, "epsilon")
    d = _delta(delta)
    return math.exp(_bisect(lambda t: cks20_delta(math.exp(t), e) > d, math.log(e) - 40.0, math.log(e) + 10.0))


def cks20_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """TopicDP's stated σ (grid units): ``Δ_g / sqrt(2ρ)``, ρ = :func:`cks20_rho` (CKS20 Thm. 14 + Cor. 13).

    >>> round(cks20_sigma(1.0, 1e-4, 1.0) / analytic_gaussian_sigma(1.0, 1e-4, 1.0), 2)
    1.1
    """
    return _positive(sensitivity, "sensitivity") / math.sqrt(2.0 * cks20_rho(epsilon, delta))


# -- the thesis, MVG and Laplace laws ------------------------------------------------------------------------------
def thesis_sigma(epsilon: float, delta: float, sensitivity: float, m: int, n: int) -> float:
    """Sharma (2021) Algorithm 2: ``Δ sqrt(2 ln(1.25/δ)) · mn / ε`` (Dwork & Roth's σ at the per-entry budget ε/mn).

    >>> round(thesis_sigma(3.0, 1e-4, 1.0, 10, 10), 1)
    144.8
    """
    e = _positive(epsilon, "epsilon")
    d = _delta(delta)
    return _positive(sensitivity, "sensitivity") * math.sqrt(2.0 * math.log(1.25 / d)) * int(m) * int(n) / e


def mvg_budget(epsilon: float, delta: float, sensitivity: float, sup_norm: float, m: int, n: int) -> float:
    """Chanyaswad et al. (CCS 2018) Theorem 3: the precision budget ``(−β + sqrt(β² + 8αε))² / (4α²)``.

    ``r = min(m, n)``, ``H_r = Σ 1/i``, ``H_{r,1/2} = Σ 1/sqrt(i)``, ``γ`` = sup of the query's
    Frobenius norm, ``s₂`` its L2 sensitivity, ``ζ(δ) = 2 sqrt(−mn ln δ) − 2 ln δ + mn``,
    ``α = (H_r + H_{r,1/2}) γ² + 2 H_r γ s₂``, ``β = 2 (mn)^{1/4} H_r s₂ ζ(δ)``. Evaluated as
    written (a difference of two close numbers), with ``math.fsum`` for the harmonic sums.

    >>> round(mvg_budget(1.0, 0.1, 1.0, 1.0, 1, 1), 6)
    0.012723
    """
    e = _positive(epsilon, "epsilon")
    d = _delta(delta)
    s2 = _positive(sensitivity, "sensitivity")
    gam = _positive(sup_norm, "sup_norm")
    mm, nn = int(m), int(n)
    r = min(mm, nn)
    h1 = math.fsum(1.0 / i for i in range(1, r + 1))
    hh = math.fsum(1.0 / math.sqrt(i) for i in range(1, r + 1))
    zeta = 2.0 * math.sqrt(-mm * nn * math.log(d)) - 2.0 * math.log(d) + mm * nn
    a = (h1 + hh) * gam ** 2 + 2.0 * h1 * gam * s2
    b = 2.0 * (mm * nn) ** 0.25 * h1 * s2 * zeta
    return (-b + math.sqrt(b * b + 8.0 * a * e)) ** 2 / (4.0 * a * a)


def mvg_column_variances(epsilon: float, delta: float, sensitivity: float, shape: tuple[int, int], grid: float,
                         covariance: str = "isotropic") -> list[float]:
    """Per-column σ_j² in grid units of the discretised MVG release (the paper's law, public parameters only).

    The budget of :func:`mvg_budget` for the rounded matrix (sensitivity ``Δ + g sqrt(mn)`` in value
    units, ``γ = sqrt(m)``) is spread over the column precisions ``θ_j = w_j P / (sqrt(m) ||w||)``
    (``w = 1``: isotropic; ``w = n, n − 1, ..., 1``: directional); ``σ_j² = 1/(θ_j g²)``.

    >>> v = mvg_column_variances(1.0, 1e-4, 0.1, (2, 2), 2.0**-20, "directional")
    >>> v[0] < v[1]
    True
    """
    mm, nn = int(shape[0]), int(shape[1])
    g = _positive(grid, "grid")
    s2 = rounded_l2(sensitivity, g, mm * nn) * g
    budget = mvg_budget(epsilon, delta, s2, math.sqrt(mm), mm, nn)
    if covariance == "isotropic":
        w = [1.0] * nn
    elif covariance == "directional":
        w = [float(nn - j) for j in range(nn)]
    else:
        raise ParameterError(f"unknown covariance {covariance!r}; choose isotropic or directional")
    norm = math.sqrt(math.fsum(x * x for x in w))
    return [math.sqrt(mm) * norm / (x * budget) / (g * g) for x in w]


def laplace_scale(epsilon: float, m: int, shape: tuple[int, int], grid: float) -> Fraction:
    """The Laplace baseline's stated scale (grid units): ``(2m/g + mn)/ε`` rounded up to a multiple of 1/1024.

    The global L1 sensitivity of ``m`` sub-probability rows is ``2m``; rounding adds ``mn`` grid units.

    >>> float(laplace_scale(1.0, 1, (1, 2), 2.0**-20))
    2097154.0
    """
    e = Fraction(_positive(epsilon, "epsilon"))
    l1 = rounded_l1(2.0 * int(m), grid, int(shape[0]) * int(shape[1]))
    return Fraction(math.ceil(l1 / e * 1024), 1024)


# -- the exponential mechanism (AE-DP's step) -----------------------------------------------------------------
def exponential_per_token(scale: float, width: float) -> float:
    """The per-draw bound of an exponential mechanism with log-weights ``scale · u``, scores ``u`` in an interval of ``width``.

    ``P(w | x) = e^{scale u(x, w)} / Σ_v e^{scale u(x, v)}``: between two inputs the numerator moves
    by at most ``e^{scale · width}`` and the normaliser by at most the same factor, so the log ratio is
    at most ``2 · scale · width`` (McSherry & Talwar 2007, Theorem 6). AE-DP's step has weights
    ``e^{ε p/2}`` on probabilities ``p ∈ [0, 1]``: ``exponential_per_token(ε/2, 1) = ε``.

    >>> exponential_per_token(2.5, 1.0), exponential_per_token(0.25, 4.0)
    (5.0, 2.0)
    """
    return 2.0 * _positive(scale, "scale") * _positive(width, "width")


# -- ER-AE's two-set exponential mechanism -----------------------------------------------------------------------
def two_set_per_token(epsilon: float, vocab_size: int, *, word_fraction: float = 0.1, k: int = 5) -> float:
    """The per-token bound of the two-set exponential mechanism, re-derived from its two steps.

    ``ε_word = f ε`` and ``ε_set = ε − ε_word``. The choice between the lexical set ``L`` and its
    complement has utilities in [0, 1] (probability masses) and weights ``e^{ε_set u/2}``: a log
    ratio of at most ``ε_set/2``. The draw inside a set of ``s`` words has weights ``e^{ε_word p/2}``
    in ``[1, e^b]`` (``b = ε_word/2``), so its log ratio is at most ``ln(s − 1 + e^b)``, the largest
    normaliser over the smallest weight; the sets have at most ``|V| − 1`` words (the complement)
    or ``k`` draws (the lexical multiset): ``ε_set/2 + ln max(|V| − 2 + e^b, 1 + (k − 1) e^b)``
    (textdp's bound; the poster's ``ε + ln s`` is not it).

    >>> round(two_set_per_token(5.0, 10_001), 2), round(two_set_per_token(2.0, 50), 3)
    (11.46, 4.794)
    """
    e = _positive(epsilon, "epsilon")
    v, kk = int(vocab_size), int(k)
    f = float(word_fraction)
    if not (0.0 <= f < 1.0) or v < kk + 1 or kk < 1:
        raise ParameterError(f"need 0 <= word_fraction < 1 and vocab_size >= k + 1 >= 2, got {f}, {v}, {kk}")
    b = f * e / 2.0
    big = max(math.log(v - 2 + math.exp(b)), math.log(1 + (kk - 1) * math.exp(b)))
    return (e - f * e) / 2.0 + big
