"""The noise cores of the topics family: exact integer noise on a public grid, as pure batch functions.

Every core rounds the true ``m x n`` matrix to a public power-of-two grid ``g``
(default ``2**-20``) and adds **exact integer noise times g** (:mod:`textdp.samplers`),
so every released value is an exact multiple of ``g`` and every multiple of ``g`` is a
possible output from every input: the floating-point attack on ``matrix + rng.normal(...)``
(Mironov, CCS 2012), which reads the input off the low-order bits, has nothing to read.
Rounding costs ``g sqrt(mn)`` of L2 sensitivity (``g mn`` of L1), which every calibration adds.

* :class:`GaussianNoise` -- TopicDP's discrete Gaussian (Canonne, Kamath & Steinke, NeurIPS
  2020, "CKS20") for an L2 sensitivity Δ. ``calibration="analytic"``: σ is the smallest
  giving ρ-zCDP with ``zcdp_delta(ρ, ε) <= δ`` (CKS20 Thm. 14 and Cor. 13), about 7-11 % above
  the continuous analytic Gaussian of Balle & Wang (2018), whose formula is *not* assumed for
  the discrete noise. ``calibration="thesis"``: Sharma (2021) Alg. 2 (budget ``ε/(mn)`` per
  entry, classic σ per entry).
* :class:`LaplaceNoise` -- discrete Laplace (CKS20 Alg. 2, the geometric mechanism) for the
  global L1 sensitivity ``2m`` (each row is a sub-probability vector): pure ε-DP.
* :class:`MatrixGaussianNoise` -- the matrix-variate Gaussian of Chanyaswad, Dytso, Poor & Mittal (CCS
  2018, Thm. 3) with identity row covariance and diagonal column covariance, so independent
  per entry with a per-column variance, discretised as independent discrete Gaussians.

A core is a function of public parameters and Δ only: :meth:`GridNoise.randomize` takes one
matrix ``(m, n)`` or a stack ``(k, m, n)`` and draws the whole stack's noise in one vectorised
call. The registered mechanisms of :mod:`textdp.topics.family` build the core for a shape
(:meth:`~textdp.topics.family.TopicsMechanism.noise`) and state the guarantee; a core states
none (the guarantee depends on where Δ came from, which the core does not know).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..accounting.gaussian import check_sensitivity, mvg_precision_budget, thesis_gaussian_sigma
from ..errors import ParameterError
from ..mechanisms.base import SeedLike
from ..samplers import (
    DEFAULT_GRID,
    check_grid,
    discrete_gaussian,
    discrete_laplace,
    rounded_sensitivity,
    snap_to_grid,
    zcdp_delta,
    zcdp_rho,
)

__all__ = ["DEFAULT_GRID", "GaussianNoise", "GridNoise", "LaplaceNoise", "MatrixGaussianNoise"]


def _check_matrices(matrix: object) -> np.ndarray:
    a = np.asarray(matrix, dtype=float)
    if a.ndim not in (2, 3) or a.size == 0:
        raise ParameterError(f"matrix must be a non-empty 2-D array (or a stack of them), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ParameterError("matrix must be finite")
    return a


class GridNoise:
    """Shared :meth:`randomize`: round to the grid, add exact integer noise, scale back.

    A subclass supplies ``_integer_noise(shape, count, gen)`` (``count`` independent ``m x n``
    draws in grid units, shape ``(count, m, n)``) and, where it refuses some shapes,
    ``_check_shape``.
    """

    epsilon: float
    grid: float

    def _integer_noise(self, shape: tuple[int, int], count: int, gen: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _check_shape(self, shape: tuple[int, int]) -> None:
        """Refuse shapes the noise cannot serve (before any noise is drawn)."""

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]:
        """PRIVATE: the noise scale of an ``m x n`` release, for ``--private-report`` only (it reveals a
        sampled sensitivity). Empty when the scale is public (the Laplace noise's ``2m/epsilon``)."""
        return {}

    def randomize(self, matrix: np.ndarray, seed: SeedLike = None) -> np.ndarray:
        """The noisy matrix (before post-processing): ``(rint(matrix/g) + Z) * g``, exact multiples of ``g``.

        ``matrix``: one ``(m, n)`` matrix, or a stack ``(k, m, n)`` of ``k`` matrices of one shape,
        whose ``k m n`` noise values are drawn in one vectorised call. ``seed``: an int or
        SeedSequence for experiments, a Generator, or None for fresh OS entropy
        (:func:`textdp._rng.make_rng`).
        """
        a = _check_matrices(matrix)
        shape = (int(a.shape[-2]), int(a.shape[-1]))
        self._check_shape(shape)
        k = snap_to_grid(a, self.grid)
        count = 1 if a.ndim == 2 else int(a.shape[0])
        z = self._integer_noise(shape, count, make_rng(seed)).reshape(a.shape)
        if z.dtype == object or np.any(np.abs(z) >= 2**52 - np.abs(k)):
            raise ParameterError(f"the noise exceeds the range of the grid {self.grid:g}; use a coarser grid")
        return (k + z).astype(np.float64) * self.grid


class GaussianNoise(GridNoise):
    """TopicDP's noise: i.i.d. exact discrete Gaussians for the L2 sensitivity of the released matrix.

    Parameters
    ----------
    epsilon : float
        Privacy loss bound ε > 0.
    delta : float
        Failure probability δ in (0, 1).
    sensitivity : float
        L2 (Frobenius) sensitivity ``Δ`` of the released (real-valued) matrix.
    calibration : {"analytic", "thesis"}
        ``"analytic"``: σ (in grid units) ``= Δ_g / sqrt(2ρ)`` with ``Δ_g = Δ/g + sqrt(mn)`` (the
        rounded query's sensitivity) and ρ the largest with ``zcdp_delta(ρ, ε) <= δ`` (CKS20 Thm. 14,
        Cor. 13). ``"thesis"``: Sharma (2021) Alg. 2, σ = Δ' sqrt(2 ln(1.25/δ)) mn/ε, that is
        ``ρ = (ε/mn)² / (4 ln(1.25/δ))``.
    grid : float
        Public power-of-two grid (default ``2**-20``).

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential privacy.
    NeurIPS 2020 (Algorithms 1-3; Thm. 14; Cor. 13). J. Sharma. TopicDP. MSc thesis, 2021 (Alg. 2).

    Examples
    --------
    >>> noise = GaussianNoise(epsilon=3, delta=1e-4, sensitivity=0.1)
    >>> raw = noise.randomize(np.zeros((5, 2, 2)), seed=0)
    >>> raw.shape, bool(np.all(raw / noise.grid == np.rint(raw / noise.grid)))
    ((5, 2, 2), True)
    """

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic",
                 grid: float = DEFAULT_GRID) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_probability(delta, "delta")
        self.sensitivity = check_sensitivity(sensitivity)
        self.calibration = check_choice(calibration, "calibration", ("analytic", "thesis"))
        self.grid = check_grid(grid)

    def grid_sensitivity(self, shape: tuple[int, int]) -> float:
        """L2 sensitivity of the grid-rounded matrix in grid units: ``Δ/g + sqrt(mn)``."""
        m, n = shape
        return rounded_sensitivity(self.sensitivity, self.grid, m * n) / self.grid

    def _grid_sigma(self, shape: tuple[int, int]) -> float:
        """σ in grid units before the safety margin: ``Δ_g / sqrt(2ρ)`` (analytic) or the thesis's Alg. 2 σ for ``Δ_g``."""
        if self.calibration == "analytic":
            return self.grid_sensitivity(shape) / math.sqrt(2.0 * zcdp_rho(self.epsilon, self.delta))
        return thesis_gaussian_sigma(self.epsilon, self.delta, self.grid_sensitivity(shape), *shape)

    def rho(self, shape: tuple[int, int]) -> float:
        """The zCDP parameter of the noise (public: a function of ε, δ, m, n): ``Δ_g² / (2σ²)``.

        Analytic: the largest ρ with ``zcdp_delta(ρ, ε) <= δ``; thesis: ``(ε/mn)² / (4 ln(1.25/δ))``.
        """
        if self.calibration == "analytic":
            return zcdp_rho(self.epsilon, self.delta)
        return self.grid_sensitivity(shape) ** 2 / (2.0 * self._grid_sigma(shape) ** 2)

    def grid_variance(self, shape: tuple[int, int]) -> Fraction:
        """σ² of the integer noise, in grid units, as the exact rational the sampler uses."""
        s = self._grid_sigma(shape) * (1.0 + 1e-12)
        return Fraction(s * s)

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]:
        return {"noise_sigma": self.sigma(shape)}

    def sigma(self, shape: tuple[int, int]) -> float:
        """Noise standard deviation per entry in value units (private when Δ was sampled)."""
        return math.sqrt(float(self.grid_variance(shape))) * self.grid

    def proven_delta(self, shape: tuple[int, int]) -> float:
        """δ that CKS20's zCDP conversion proves at ε for this noise (public)."""
        return zcdp_delta(self.rho(shape), self.epsilon)

    def _integer_noise(self, shape: tuple[int, int], count: int, gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        return discrete_gaussian(self.grid_variance(shape), count * m * n, gen).reshape(count, m, n)


class LaplaceNoise(GridNoise):
    """Exact discrete Laplace noise for the global L1 sensitivity ``2m`` (pure ε-DP).

    Each released row is part of a probability vector, so adding or removing a user changes it
    by at most 2 in L1 and the ``m x n`` matrix by at most ``2m``; rounding to the grid adds
    ``g mn``. Discrete Laplace noise ``P[Z = z] ∝ exp(-|z| ε / Δ₁_g)`` (CKS20 Alg. 2; the
    geometric mechanism) with ``Δ₁_g = 2m/g + mn`` grid units is ε-DP for the values. ``scale``
    is the nominal (continuous) ``2m/ε``; the sampler uses :meth:`grid_scale` (rounded *up* to a
    multiple of 1/1024 grid units).

    >>> LaplaceNoise(epsilon=2.0, m=10).scale
    10.0
    """

    def __init__(self, *, epsilon: float, m: int, grid: float = DEFAULT_GRID) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.m = check_positive_int(m, "m")
        self.grid = check_grid(grid)

    @property
    def sensitivity(self) -> float:
        """Global L1 sensitivity ``2m`` of the real-valued matrix (public)."""
        return 2.0 * self.m

    @property
    def scale(self) -> float:
        """Nominal Laplace scale ``2m/ε`` in value units."""
        return self.sensitivity / self.epsilon

    def grid_scale(self, shape: tuple[int, int]) -> Fraction:
        """The exact discrete Laplace scale in grid units: ``(2m/g + mn)/ε``, rounded up to 1/1024."""
        m, n = shape
        l1 = Fraction(2 * m) / Fraction(self.grid) + m * n  # exact: the grid is a power of two
        return Fraction(math.ceil(l1 / Fraction(self.epsilon) * 1024), 1024)

    def _check_shape(self, shape: tuple[int, int]) -> None:
        if shape[0] != self.m:
            raise ParameterError(f"matrix has {shape[0]} rows but the noise was built for m={self.m}")

    def _integer_noise(self, shape: tuple[int, int], count: int, gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        return discrete_laplace(self.grid_scale(shape), count * m * n, gen).reshape(count, m, n)


class MatrixGaussianNoise(GridNoise):
    """Matrix-variate Gaussian noise (Chanyaswad et al., CCS 2018), discretised.

    ``Z = Σ^{1/2} N Ψ^{1/2}`` with row covariance ``Σ = I_m`` and column covariance
    ``Ψ = diag(1/θ_j)``, where the precisions θ use the whole budget
    ``||σ(Σ^{-1})||_2 ||σ(Ψ^{-1})||_2 = sqrt(m) ||θ||_2 = P`` of
    :func:`textdp.accounting.gaussian.mvg_precision_budget` (computed with the sensitivity of the
    grid-rounded matrix):

    * ``"isotropic"``: equal θ (i.i.d. noise of variance ``sqrt(mn)/P``);
    * ``"directional"``: θ proportional to public ``precision_weights`` over keyword-rank
      positions (default ``n, n-1, ..., 1``: less noise on the top-ranked keywords), the
      paper's directional-noise design with a data-independent direction.

    Entry ``(i, j)`` gets an exact discrete Gaussian of variance ``1/θ_j`` (grid units).
    Chanyaswad et al.'s Theorem 3 is for continuous noise, so the release is proven with CKS20:
    ρ-zCDP with ``ρ = Δ_g² / (2 min_j σ_j²)``, checked against δ (:meth:`proven_delta`) before any
    noise is drawn. ``sup_norm`` is ``sup ||f||_F``; for sub-probability rows it is ``sqrt(m)``,
    the default.

    >>> noise = MatrixGaussianNoise(epsilon=1, delta=0.1, sensitivity=1.0, sup_norm=1.0)
    >>> round(float(noise.column_variances((1, 1))[0]), 1)
    78.6
    """

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float, sup_norm: float | None = None,
                 covariance: str = "isotropic", precision_weights: np.ndarray | None = None,
                 grid: float = DEFAULT_GRID) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_probability(delta, "delta")
        self.sensitivity = check_sensitivity(sensitivity)
        self.sup_norm = None if sup_norm is None else check_sensitivity(sup_norm, "sup_norm")
        self.covariance = check_choice(covariance, "covariance", ("isotropic", "directional"))
        self.grid = check_grid(grid)
        if precision_weights is not None:
            w = np.asarray(precision_weights, dtype=float)
            if w.ndim != 1 or np.any(~np.isfinite(w)) or np.any(w <= 0):
                raise ParameterError("precision_weights must be a 1-D array of positive numbers")
            self.precision_weights: np.ndarray | None = w
        else:
            self.precision_weights = None
        self._checked: dict[tuple[int, int], list[Fraction]] = {}

    def _rounded(self, shape: tuple[int, int]) -> float:
        return rounded_sensitivity(self.sensitivity, self.grid, shape[0] * shape[1])

    def budget(self, shape: tuple[int, int]) -> float:
        """The precision budget ``P`` of Chanyaswad et al. Thm. 3 for the rounded matrix."""
        m, n = shape
        sup = self.sup_norm if self.sup_norm is not None else math.sqrt(m)
        return mvg_precision_budget(self.epsilon, self.delta, self._rounded(shape), sup, m, n)

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]:
        return {"noise_column_variances": [float(v) for v in self.column_variances(shape)]}

    def column_variances(self, shape: tuple[int, int]) -> np.ndarray:
        """Per-column noise variance ``1/θ_j`` in value units (row covariance is the identity)."""
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

    def grid_variances(self, shape: tuple[int, int]) -> list[Fraction]:
        """Per-column σ_j² in grid units (exact rationals the sampler uses)."""
        g2 = self.grid * self.grid
        return [Fraction(float(v) / g2) for v in self.column_variances(shape)]

    def proven_delta(self, shape: tuple[int, int]) -> float:
        """δ that CKS20's zCDP conversion proves at ε for the discretised noise (private: depends on Δ)."""
        d_g = self._rounded(shape) / self.grid
        rho = d_g * d_g / (2.0 * float(min(self.grid_variances(shape))))
        return zcdp_delta(rho * (1.0 + 1e-12), self.epsilon)

    def _check_shape(self, shape: tuple[int, int]) -> None:
        if shape in self._checked:
            return
        if self.proven_delta(shape) > self.delta:
            raise ParameterError(
                "the MVG noise is too small for the discrete-Gaussian (CKS20) bound to prove "
                f"({self.epsilon:g}, {self.delta:g})-DP; use the topicdp mechanism")
        self._checked[shape] = self.grid_variances(shape)

    def _integer_noise(self, shape: tuple[int, int], count: int, gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        self._check_shape(shape)
        var = self._checked[shape]
        out = np.empty((count, m, n), dtype=np.int64)
        for v in sorted(set(var)):  # one vectorised draw per distinct column variance
            cols = [j for j in range(n) if var[j] == v]
            out[:, :, cols] = discrete_gaussian(v, count * m * len(cols), gen).reshape(count, m, len(cols))
        return out
