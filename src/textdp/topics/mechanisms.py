"""Mechanisms that release the topic-keyword matrix, and the release record.

* :class:`TopicDPGaussian` -- TopicDP: Gaussian noise calibrated to the sampled
  L2 (Frobenius) sensitivity. Default calibration is the *analytic* Gaussian
  mechanism (Balle & Wang, ICML 2018), exact for every eps > 0 (the classic
  ``sigma = Δ sqrt(2 ln(1.25/δ)) / ε`` is only proven for ε < 1).
  ``calibration="thesis"`` reproduces the thesis's Algorithm 2 (budget split as
  ``ε' = ε/(mn)`` per entry, classic sigma per entry): it is far noisier than
  needed, because Δ already bounds the change of the *whole* matrix in L2, and
  it composes to (ε, mn·δ), not (ε, δ); the record says so.
* :class:`LaplaceBaseline` -- output perturbation with the global L1
  sensitivity ``2m`` (each of the m rows is a sub-probability vector, whose L1
  change is at most 2): pure ε-DP for the matrix values, no sampling needed.
* :class:`MVGMechanism` -- matrix-variate Gaussian (Chanyaswad, Dytso, Poor &
  Mittal, CCS 2018), with the sufficient condition of their Theorem 3 and the
  sampled sensitivity as ``s_2(f)`` (as the thesis does "for fair comparison").

What the guarantees cover
-------------------------
Noise protects the *values* of the ``m x n`` matrix at fixed positions. Which
topics are released (the top ``m`` by prevalence) and which words name the
columns (each topic's top ``n``) are selected from the non-private model and
published as they are: that selection is data-dependent and **not** covered by
any guarantee here (a user's unique word can surface as a keyword). Releasing
keyword identities privately would need e.g. a public vocabulary or a private
selection step (exponential mechanism / noisy top-k), which this module does
not do. Every :class:`TopicRelease` repeats this in ``keyword_note``.

Post-processing (clip to [0, 1], then scale any row with sum > 1 down to sum 1)
is applied to the noisy matrix; it never weakens DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..errors import ParameterError, ParameterTypeError
from .models import TopicMatrix
from .sensitivity import SampledSensitivity

__all__ = [
    "gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "thesis_gaussian_sigma",
    "mvg_precision_budget",
    "TopicDPGaussian",
    "LaplaceBaseline",
    "MVGMechanism",
    "TopicRelease",
    "postprocess",
    "release_topics",
    "KEYWORD_NOTE",
]

KEYWORD_NOTE = (
    "Only the matrix values are randomised. The released topics (top m by prevalence) and their "
    "keyword identities (top n words per topic) are selected from the non-private topic model and "
    "are NOT covered by the privacy guarantee."
)


def _check_sensitivity(value: object, name: str = "sensitivity") -> float:
    if isinstance(value, SampledSensitivity):
        value = value.value
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
    sens = _check_sensitivity(sensitivity)
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
    """Dwork & Roth's ``Δ sqrt(2 ln(1.25/δ)) / ε`` (proven only for ε < 1).

    >>> round(classic_gaussian_sigma(0.5, 1e-5, 1.0), 3)
    9.69
    """
    eps = check_epsilon(epsilon)
    d = check_probability(delta, "delta")
    return _check_sensitivity(sensitivity) * math.sqrt(2.0 * math.log(1.25 / d)) / eps


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
    s2 = _check_sensitivity(sensitivity)
    g = _check_sensitivity(sup_norm, "sup_norm")
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


def postprocess(matrix: np.ndarray) -> np.ndarray:
    """Clip to [0, 1] and scale rows whose sum exceeds 1 down to sum 1.

    >>> postprocess(np.array([[0.9, 0.6, -0.2], [0.2, 0.1, 0.0]])).round(3).tolist()
    [[0.6, 0.4, 0.0], [0.2, 0.1, 0.0]]
    """
    out = np.clip(np.asarray(matrix, dtype=float), 0.0, 1.0)
    s = out.sum(axis=1, keepdims=True)
    return np.where(s > 1.0, out / np.where(s > 1.0, s, 1.0), out)


def _check_matrix(matrix: object) -> np.ndarray:
    a = np.asarray(matrix, dtype=float)
    if a.ndim != 2 or a.size == 0:
        raise ParameterError(f"matrix must be a non-empty 2-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ParameterError("matrix must be finite")
    return a


class TopicDPGaussian:
    """TopicDP: Gaussian noise with the sampled L2 sensitivity.

    Parameters
    ----------
    epsilon : float
        Privacy loss bound ε > 0.
    delta : float
        Failure probability δ in (0, 1).
    sensitivity : float or SampledSensitivity
        Sampled L2 (Frobenius) sensitivity ``Δ_s`` of the released matrix.
    gamma : float
        Confidence parameter the sensitivity was sampled for (recorded; the
        guarantee is (ε, δ, γ)-random DP).
    calibration : {"analytic", "thesis"}
        ``"analytic"``: Balle & Wang (2018) σ, exact for any ε. ``"thesis"``:
        Sharma (2021) Alg. 2 reproduction, σ = Δ sqrt(2 ln(1.25/δ)) mn/ε; it
        composes to (ε, mn·δ) and needs ε/(mn) < 1 for the classic bound.

    References
    ----------
    B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising. ICML 2018.
    B. Rubinstein, F. Aldà. Pain-free random differential privacy with
    sensitivity sampling. ICML 2017.

    Examples
    --------
    >>> mech = TopicDPGaussian(epsilon=3, delta=1e-4, sensitivity=0.1, gamma=0.1)
    >>> mech.randomise(np.zeros((2, 2)), rng=0).shape
    (2, 2)
    """

    name = "topicdp"

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float | SampledSensitivity,
                 gamma: float, calibration: str = "analytic") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_probability(delta, "delta")
        self.sensitivity = _check_sensitivity(sensitivity)
        self.gamma = check_probability(gamma, "gamma")
        self.calibration = check_choice(calibration, "calibration", ("analytic", "thesis"))

    def sigma(self, shape: tuple[int, int]) -> float:
        """Noise standard deviation per entry for an ``m x n`` matrix."""
        if self.calibration == "analytic":
            return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
        return thesis_gaussian_sigma(self.epsilon, self.delta, self.sensitivity, *shape)

    def randomise(self, matrix: np.ndarray, rng: int | np.random.Generator | None = None) -> np.ndarray:
        """Return ``matrix + N(0, σ²)`` entrywise (no post-processing)."""
        a = _check_matrix(matrix)
        return a + make_rng(rng).normal(0.0, self.sigma(a.shape), size=a.shape)

    def guarantee(self, shape: tuple[int, int]) -> tuple[float, str]:
        """``(effective δ, sentence)`` for an ``m x n`` release."""
        m, n = shape
        if self.calibration == "analytic":
            return self.delta, (
                f"({self.epsilon:g}, {self.delta:g}, {self.gamma:g})-random differential privacy "
                f"(Rubinstein & Alda 2017) for user-level neighbours: with probability >= "
                f"{1 - self.gamma:g} over a random neighbouring pair, the noisy matrix values are "
                f"({self.epsilon:g}, {self.delta:g})-DP (analytic Gaussian mechanism, Balle & Wang "
                f"2018, sigma={self.sigma(shape):.6g} for L2 sensitivity {self.sensitivity:.6g}).")
        eff = min(1.0, m * n * self.delta)
        per = self.epsilon / (m * n)
        valid = "" if per < 1 else (
            f" WARNING: the per-entry budget {per:g} >= 1, where the classic Gaussian bound is not "
            "proven, so no guarantee is established.")
        return eff, (
            f"thesis calibration (Sharma 2021, Alg. 2): each of the {m * n} entries gets "
            f"({per:g}, {self.delta:g})-DP Gaussian noise; by sequential composition the matrix is "
            f"({self.epsilon:g}, {eff:g}, {self.gamma:g})-random DP (the thesis states delta="
            f"{self.delta:g}; composition gives m*n*delta).{valid}")


class LaplaceBaseline:
    """Laplace output perturbation with global L1 sensitivity ``2m``.

    Each released row is part of a probability vector, so adding or removing a
    user changes it by at most 2 in L1 and the ``m x n`` matrix by at most
    ``2m``: ``Lap(2m/ε)`` noise per entry is ε-DP for the values, with no
    sampling and no γ.

    >>> LaplaceBaseline(epsilon=2.0, m=10).scale
    10.0
    """

    name = "laplace"

    def __init__(self, *, epsilon: float, m: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.m = check_positive_int(m, "m")

    @property
    def sensitivity(self) -> float:
        return 2.0 * self.m

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    def randomise(self, matrix: np.ndarray, rng: int | np.random.Generator | None = None) -> np.ndarray:
        """Return ``matrix + Lap(2m/ε)`` entrywise."""
        a = _check_matrix(matrix)
        if a.shape[0] != self.m:
            raise ParameterError(f"matrix has {a.shape[0]} rows but the mechanism was built for m={self.m}")
        return a + make_rng(rng).laplace(0.0, self.scale, size=a.shape)

    def guarantee(self, shape: tuple[int, int]) -> tuple[float, str]:
        return 0.0, (f"{self.epsilon:g}-differential privacy for the matrix values (Laplace mechanism, "
                     f"global L1 sensitivity 2m = {self.sensitivity:g}, scale {self.scale:.6g}).")


class MVGMechanism:
    """Matrix-variate Gaussian mechanism (Chanyaswad et al., CCS 2018).

    ``Z = Σ^{1/2} N Ψ^{1/2}`` with ``N`` i.i.d. standard normal, so
    ``vec(Z) ~ N(0, Ψ ⊗ Σ)``. Row covariance ``Σ = I_m``; column covariance
    ``Ψ = diag(1/θ_j)`` where the precisions θ use the whole budget
    ``||σ(Σ^{-1})||_2 ||σ(Ψ^{-1})||_2 = sqrt(m) ||θ||_2 = P`` of
    :func:`mvg_precision_budget`:

    * ``"isotropic"``: equal θ (i.i.d. noise of variance ``sqrt(mn)/P``);
    * ``"directional"``: θ proportional to public ``precision_weights`` over
      keyword-rank positions (default ``n, n-1, ..., 1``: less noise on the
      top-ranked keywords), the paper's directional-noise design with a
      data-independent direction.

    ``sup_norm`` is ``sup ||f||_F``; for rows that are sub-probability vectors
    it is ``sqrt(m)``, the default.

    >>> mech = MVGMechanism(epsilon=1, delta=0.1, sensitivity=1.0, sup_norm=1.0)
    >>> round(float(mech.column_variances((1, 1))[0]), 1)
    78.6
    """

    name = "mvg"

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float | SampledSensitivity,
                 gamma: float | None = None, sup_norm: float | None = None,
                 covariance: str = "isotropic", precision_weights: np.ndarray | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_probability(delta, "delta")
        self.sensitivity = _check_sensitivity(sensitivity)
        self.gamma = None if gamma is None else check_probability(gamma, "gamma")
        self.sup_norm = None if sup_norm is None else _check_sensitivity(sup_norm, "sup_norm")
        self.covariance = check_choice(covariance, "covariance", ("isotropic", "directional"))
        if precision_weights is not None:
            w = np.asarray(precision_weights, dtype=float)
            if w.ndim != 1 or np.any(~np.isfinite(w)) or np.any(w <= 0):
                raise ParameterError("precision_weights must be a 1-D array of positive numbers")
            self.precision_weights: np.ndarray | None = w
        else:
            self.precision_weights = None

    def budget(self, shape: tuple[int, int]) -> float:
        m, n = shape
        sup = self.sup_norm if self.sup_norm is not None else math.sqrt(m)
        return mvg_precision_budget(self.epsilon, self.delta, self.sensitivity, sup, m, n)

    def column_variances(self, shape: tuple[int, int]) -> np.ndarray:
        """Per-column noise variance ``1/θ_j`` (row covariance is the identity)."""
        m, n = shape
        if self.covariance == "isotropic":
            w = np.ones(n)
        elif self.precision_weights is not None:
            if self.precision_weights.shape[0] != n:
                raise ParameterError(f"precision_weights has {self.precision_weights.shape[0]} entries, need n={n}")
            w = self.precision_weights
        else:
            w = np.arange(n, 0, -1, dtype=float)
        theta = w * self.budget(shape) / (math.sqrt(m) * float(np.linalg.norm(w)))
        return 1.0 / theta

    def randomise(self, matrix: np.ndarray, rng: int | np.random.Generator | None = None) -> np.ndarray:
        """Return ``matrix + Z`` with ``Z ~ MVG(0, I_m, diag(column_variances))``."""
        a = _check_matrix(matrix)
        sd = np.sqrt(self.column_variances(a.shape))
        return a + make_rng(rng).standard_normal(a.shape) * sd[None, :]

    def guarantee(self, shape: tuple[int, int]) -> tuple[float, str]:
        g = "" if self.gamma is None else f", {self.gamma:g}"
        kind = "random " if self.gamma is not None else ""
        return self.delta, (
            f"({self.epsilon:g}, {self.delta:g}{g})-{kind}differential privacy via the MVG sufficient "
            f"condition (Chanyaswad et al. 2018, Thm. 3) with L2 sensitivity {self.sensitivity:.6g}"
            f"{' (sampled)' if self.gamma is not None else ''}, {self.covariance} covariance, "
            f"precision budget {self.budget(shape):.6g}.")


@dataclass(frozen=True)
class TopicRelease:
    """Immutable record of one release: the noisy matrix and what was spent."""

    mechanism: str
    epsilon: float
    delta: float
    gamma: float | None
    sensitivity: float
    sensitivity_kind: str
    noise: str
    guarantee: str
    keyword_note: str
    keywords: tuple[tuple[str, ...], ...]
    matrix: tuple[tuple[float, ...], ...]
    raw_matrix: tuple[tuple[float, ...], ...]

    def as_array(self) -> np.ndarray:
        return np.array(self.matrix, dtype=float)

    def to_dict(self) -> dict[str, object]:
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "delta": self.delta,
                "gamma": self.gamma, "sensitivity": self.sensitivity,
                "sensitivity_kind": self.sensitivity_kind, "noise": self.noise,
                "guarantee": self.guarantee, "keyword_note": self.keyword_note,
                "keywords": [list(k) for k in self.keywords],
                "matrix": [list(r) for r in self.matrix]}


Mechanism = TopicDPGaussian | LaplaceBaseline | MVGMechanism


def release_topics(topics: TopicMatrix, mechanism: Mechanism,
                   rng: int | np.random.Generator | None = None) -> TopicRelease:
    """Randomise ``topics.matrix`` with ``mechanism``, post-process, and record it.

    >>> tm = TopicMatrix(np.array([[0.5, 0.3]]), (("a", "b"),), (0,))
    >>> r = release_topics(tm, LaplaceBaseline(epsilon=1.0, m=1), rng=1)
    >>> r.mechanism, r.delta, r.gamma, len(r.matrix[0])
    ('laplace', 0.0, None, 2)
    """
    if not isinstance(topics, TopicMatrix):
        raise ParameterTypeError(f"topics must be a TopicMatrix, got {type(topics).__name__}")
    raw = mechanism.randomise(topics.matrix, rng=rng)
    shape = topics.shape
    eff_delta, sentence = mechanism.guarantee(shape)
    if isinstance(mechanism, TopicDPGaussian):
        name = "topicdp" if mechanism.calibration == "analytic" else "topicdp-thesis"
        noise = f"gaussian sigma={mechanism.sigma(shape):.6g} ({mechanism.calibration} calibration)"
        kind, gamma = "L2 (Frobenius), sampled", mechanism.gamma
    elif isinstance(mechanism, LaplaceBaseline):
        name, noise, kind, gamma = "laplace", f"laplace scale={mechanism.scale:.6g}", "L1, global (2m)", None
    else:
        name = "mvg"
        noise = (f"matrix-variate gaussian, {mechanism.covariance}, column variances "
                 f"{np.array2string(mechanism.column_variances(shape), precision=4)}")
        kind = "L2 (Frobenius), sampled" if mechanism.gamma is not None else "L2 (Frobenius)"
        gamma = mechanism.gamma
    return TopicRelease(
        mechanism=name, epsilon=mechanism.epsilon, delta=eff_delta, gamma=gamma,
        sensitivity=float(mechanism.sensitivity), sensitivity_kind=kind, noise=noise,
        guarantee=sentence, keyword_note=KEYWORD_NOTE, keywords=topics.keywords,
        matrix=tuple(tuple(float(x) for x in row) for row in postprocess(raw)),
        raw_matrix=tuple(tuple(float(x) for x in row) for row in raw))
