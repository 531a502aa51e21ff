"""Mechanisms that release the topic-keyword matrix, their guarantees, and the release record.

Every mechanism rounds the true ``m x n`` matrix to a public power-of-two grid
``g`` (default ``2**-20``) and adds **exact integer noise times g**
(:mod:`textdp.samplers`), so every released value is an exact multiple of ``g``
and every multiple of ``g`` is a possible output from every input: the
floating-point attack on ``matrix + rng.normal(...)`` (Mironov, CCS 2012), which
reads the input off the low-order bits, has nothing to read. Rounding costs
``g sqrt(mn)`` of L2 (``g mn`` of L1) sensitivity, which every calibration adds.

* :class:`TopicDPGaussian` -- TopicDP: discrete Gaussian noise (Canonne, Kamath &
  Steinke, NeurIPS 2020, "CKS20") calibrated to the L2 (Frobenius) sensitivity of
  the released matrix (sampled, or supplied). ``calibration="analytic"``
  (default): σ is the smallest giving ρ-zCDP with ``zcdp_delta(ρ, ε) <= δ``
  (CKS20 Thm. 14 and Cor. 13), about 7-11 % above the continuous analytic
  Gaussian of Balle & Wang (2018), whose formula is *not* assumed for the
  discrete noise. ``calibration="thesis"`` reproduces the thesis's Algorithm 2
  (budget split as ``ε' = ε/(mn)`` per entry, classic σ per entry), far noisier
  than needed because Δ already bounds the change of the *whole* matrix; its
  guarantee is also proven with CKS20 (the thesis's own composition argument
  would give only (ε, mn·δ)).
* :class:`LaplaceBaseline` -- discrete Laplace noise (CKS20 Alg. 2, the geometric
  mechanism) with the global L1 sensitivity ``2m`` (each of the m rows is a
  sub-probability vector, whose L1 change is at most 2): pure ε-DP for the
  matrix values, no sampling needed.
* :class:`MVGMechanism` -- matrix-variate Gaussian (Chanyaswad, Dytso, Poor &
  Mittal, CCS 2018) with the sufficient condition of their Theorem 3 and the
  sampled sensitivity as ``s_2(f)`` (as the thesis does "for fair comparison").
  Its row covariance is the identity and its column covariance diagonal, so the
  noise is independent per entry with a per-column variance: it is discretised
  as independent discrete Gaussians with those variances, and its guarantee is
  proven with CKS20 (zCDP with ``ρ = Δ'² / (2 min_j σ_j²)``), checked to meet
  (ε, δ) -- Chanyaswad et al.'s theorem is for continuous noise and is not
  relied upon.

Every mechanism returns a frozen :class:`TopicGuarantee` (``guarantee(shape)``,
the :class:`textdp.guarantees.Guarantee` protocol, ``unit = "user"``); the
release holds it and nothing computed from the private corpus except the noisy
matrix (no sensitivity, no σ: σ is a function of the sampled sensitivity).

What the guarantees cover
-------------------------
Two releases share the mechanisms; the unit's :attr:`~textdp.topics.models.TopicMatrix.columns`
says which one:

* **keywords from the noisy values** (``columns == "public"``, the default of ``textdp topics``;
  :data:`KEYWORD_NOTE_NOISY`): the released function is the top ``m`` topics by prevalence, in that
  order, each as its *whole* row over a **public** vocabulary
  (:func:`~textdp.topics.models.topic_rows`). The noise is added to every entry of that ``m x V``
  matrix (calibrated to its L2 sensitivity, sampled or the global ``sqrt(2m)``: full probability rows),
  and each topic's ``n`` keywords are its ``n`` largest *noisy* values (:func:`make_release`): a
  function of the noisy matrix alone, so covered by post-processing, at no extra ε or δ. The topics
  and their order are rows of the released function, so the sensitivity that calibrates the noise
  bounds their change too (no separate selection is needed). Why this reading rather than a DP
  top-k selection (exponential mechanism / Gumbel top-k, or the one-shot top-k of Durfee & Rogers,
  NeurIPS 2019) composed with the values' noise: one Gaussian on the whole matrix uses the L2
  sensitivity of all ``m`` rows at once, while ``m n`` selections would each pay for a user's L-inf
  change of a row and compose over ``m n`` picks (a factor about ``sqrt(mn)`` more noise per pick
  under zCDP composition), and the values would still need their own budget. The cost is
  accuracy: the keywords are the true top words only where the noise is small against the
  probabilities (``docs/topics-results.md`` measures it). The vocabulary must be public: a
  vocabulary built from the private corpus would publish its own words as columns (a word that
  only one user's documents bring into it is an output its neighbour can never produce).
* **keywords chosen by the model** (``columns == "model"``, the thesis's release, opt-in as
  ``--keywords-from model``; :data:`KEYWORD_NOTE`): the noise protects the *values* of the
  ``m x n`` matrix at fixed positions; which topics are released (the top ``m`` by prevalence)
  and which words name the columns (each topic's top ``n``) are selected from the non-private
  model and published as they are: **not** covered by any guarantee here (a user's unique word
  can surface as a keyword). LiRA measures what that costs on Enron at ε = 1 with the global
  sensitivity (``docs/topics-membership.md``): 13 % TPR at 0.1 % FPR with 500 keywords per topic
  against the 0.27 % any (1, 1e-5)-DP release allows.

Every :class:`TopicRelease` says which in ``keyword_note``.

Post-processing (clip to [0, 1], then scale any row with sum > 1 down to sum 1)
is applied to the noisy matrix; it never weakens DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from .. import _rng
from .._rng import make_rng
from .._validation import (
    check_choice,
    check_epsilon,
    check_positive_int,
    check_probability,
)
from ..accounting.gaussian import check_sensitivity, mvg_precision_budget
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee, ReleaseRecord
from ..guarantees.events import ZCDPEvent
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
from .models import TopicMatrix
from .names import KEYWORD_SOURCES, MECHANISMS
from .sensitivity import SampledSensitivity, worst_case_sensitivity

__all__ = [
    "DEFAULT_GRID",
    "KEYWORD_NOTE",
    "KEYWORD_NOTE_NOISY",
    "KEYWORD_SOURCES",
    "MECHANISMS",
    "LaplaceBaseline",
    "MVGMechanism",
    "TopicDPGaussian",
    "TopicGuarantee",
    "TopicMechanism",
    "TopicRelease",
    "build_mechanism",
    "covered_guarantee",
    "make_release",
    "needs_sensitivity",
    "noisy_keywords",
    "postprocess",
    "release_topics",
]


KEYWORD_NOTE = (
    "Only the matrix values are randomized. The released topics (top m by prevalence) and their "
    "keyword identities (top n words per topic) are selected from the non-private topic model and "
    "are NOT covered by the privacy guarantee."
)

#: ``keyword_note`` of the covered release (keywords read off the noisy values over a public vocabulary).
KEYWORD_NOTE_NOISY = (
    "Covered: the noise is added to every word of the public vocabulary in each released topic (the top m "
    "topics by prevalence, in that order, are rows of the released function), and each topic's keywords are "
    "its largest noisy values: post-processing of the private release."
)


_MODEL_NOT_COVERED = ("Not covered: which topics and keywords are released (chosen by the non-private model, see "
                      "keyword_note).")
_NOISY_COVERED = ("Covered too: which topics are released (the top m by prevalence, in that order: rows of the "
                  "released function, whose change the sensitivity bounds) and their keywords (each topic's top {n} "
                  "of its noisy values over the public vocabulary of {v} words: post-processing).")

CKS20 = "Canonne, Kamath & Steinke, 'The Discrete Gaussian for Differential Privacy', NeurIPS 2020"
RANDOM_DP = "Rubinstein & Alda, 'Pain-Free Random Differential Privacy with Sensitivity Sampling', ICML 2017"

_SENSITIVITY_NOT_RELEASED = (
    "The sensitivity and the noise scale derived from it are computed from the private corpus and are not "
    "part of the release, but the spread of the noisy values reveals them approximately; that dependence is "
    "not covered."
)


def _check_sensitivity(value: object, name: str = "sensitivity") -> float:
    """``check_sensitivity``, also taking a :class:`SampledSensitivity` (its value)."""
    return check_sensitivity(value.value if isinstance(value, SampledSensitivity) else value, name)


def _resolve_gamma(sensitivity: object, gamma: float | None) -> float | None:
    if gamma is not None:
        return check_probability(gamma, "gamma")
    if isinstance(sensitivity, SampledSensitivity):
        return sensitivity.gamma
    return None


def _fmt_delta(delta: float) -> str:
    return f"{delta:.4g}" if delta >= 1e-300 else "below 1e-300"


def _grid_text(grid: float) -> str:
    e = math.frexp(grid)[1] - 1
    return f"2^{e}"


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




SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def _is_seeded(seed: SeedLike) -> bool:
    """Whether noise drawn with ``seed`` can be reproduced by someone holding a seed."""
    is_seeded = getattr(_rng, "is_seeded", None)  # textdp._rng's own answer where it has one
    if callable(is_seeded):
        return bool(is_seeded(seed))
    return seed is not None


@dataclass(frozen=True, kw_only=True)
class TopicGuarantee(Guarantee):
    """The guarantee of one topic-matrix release (a :class:`textdp.guarantees.Guarantee`).

    Holds only public parameters: never the sensitivity or the noise scale, which
    depend on the private corpus when the sensitivity is sampled.

    Attributes
    ----------
    mechanism : str
        One of :data:`MECHANISMS`.
    epsilon, delta : float
        The proven privacy parameters (``delta = 0`` for the Laplace baseline).
    gamma : float or None
        Random-DP confidence parameter (sampled sensitivity); None for ordinary DP.
    shape : (int, int)
        ``(m, n)``: topics x keywords.
    grid : float
        The public grid: every released (pre-post-processing) value is a multiple of it.
    noise : str
        Public description of the noise distribution and its calibration.
    statement : str
        The guarantee in words, including what it does not cover.
    unit : str
        ``"user"``: neighbours add or remove one user's documents.

    >>> from textdp.guarantees import Guarantee
    >>> g = LaplaceBaseline(epsilon=2.0, m=3).guarantee((3, 4))
    >>> isinstance(g, Guarantee), g.unit, g.delta, sorted(g.params)[:4]
    (True, 'user', 0.0, ['definition', 'gamma', 'grid', 'grid_text'])
    """

    gamma: float | None
    shape: tuple[int, int]
    grid: float
    noise: str
    vocabulary_note: str | None = None
    keywords_from: str = "model"
    keywords: int | None = None
    unit: str = "user"
    reference: str = CKS20

    def _derive(self) -> dict[str, object]:
        not_covered = (self.statement.split("Not covered: ", 1)[1] if "Not covered: " in self.statement
                       else "which topics and keywords are released (chosen by the non-private model)."
                       if self.keywords_from == "model" else "nothing beyond the public parameters.")
        noisy = self.keywords_from == "noisy"
        return {
            "not_covered": not_covered,
            "composition": "Basic composition over releases: k releases about the same users cost (k*epsilon, k*delta).",
            "parameters": (
                ("gamma", self.gamma),
                ("definition", "random differential privacy" if self.gamma is not None else "differential privacy"),
                ("topics", self.shape[0]),
                ("keywords_per_topic", self.keywords if noisy and self.keywords is not None else self.shape[1]),
                ("keywords_from", self.keywords_from), *((("noised_columns", self.shape[1]),) if noisy else ()),
                ("grid", self.grid), ("grid_text", _grid_text(self.grid)), ("noise", self.noise),
                ("keyword_note", KEYWORD_NOTE_NOISY if noisy else KEYWORD_NOTE),
                ("vocabulary_note", self.vocabulary_note),
            ),
        }



#: What the discretisation costs, stated in every record's ``noise``: it is folded into the sensitivity.
ROUNDING_L2 = ("the discretisation costs no extra delta or epsilon: rounding to the grid adds g*sqrt(mn) to the L2 "
               "sensitivity the noise is calibrated to")
ROUNDING_L1 = "the discretisation costs no extra epsilon: rounding to the grid adds g*mn to the L1 sensitivity"

#: Where a Gaussian mechanism's L2 sensitivity comes from (``--sensitivity``).
SENSITIVITY_SOURCES = ("sampled", "worst-case", "supplied")


def _dp_clause(epsilon: float, delta: float, gamma: float | None, source: str = "supplied") -> str:
    if gamma is None and source == "worst-case":
        return (f"({epsilon:g}, {delta:.4g})-differential privacy for user-level neighbours (one user's documents "
                "added or removed), for every pair of neighbours: the noise is calibrated to the global L2 "
                "sensitivity sqrt(2m) of the released matrix (each row is a sub-probability vector; no sampling, "
                "nothing computed from the data)")
    if gamma is None:
        return (f"({epsilon:g}, {delta:.4g})-differential privacy for user-level neighbours (one user's documents "
                "added or removed), provided the supplied L2 sensitivity bounds how much one user can change the "
                "released matrix (the user vouches for it)")
    return (f"({epsilon:g}, {delta:.4g}, {gamma:g})-random differential privacy (Rubinstein & Alda 2017) for "
            f"user-level neighbours (one user's documents added or removed): with probability >= {1 - gamma:g} over "
            f"a random neighbouring pair of databases drawn from the corpus's users, the noisy matrix values are "
            f"({epsilon:g}, {delta:.4g})-DP")


def _not_covered(gamma: float | None, source: str = "supplied") -> str:
    if gamma is not None:
        scale = _SENSITIVITY_NOT_RELEASED
    elif source == "worst-case":
        scale = "The sensitivity sqrt(2m) and the noise scale are public."
    else:
        scale = "The supplied sensitivity and the noise scale derived from it are not part of the release."
    return f"{_MODEL_NOT_COVERED} {scale}"


def _source(sensitivity: object, gamma: float | None, source: str | None) -> str:
    if source is not None:
        return check_choice(source, "sensitivity_source", SENSITIVITY_SOURCES)
    return "sampled" if gamma is not None or isinstance(sensitivity, SampledSensitivity) else "supplied"


def _check_privacy(epsilon: float, delta: float, sensitivity: float | SampledSensitivity, gamma: float | None,
                   source: str | None) -> tuple[float, float, float, float | None, str]:
    """Checked ``(ε, δ, Δ, γ, sensitivity source)`` of a mechanism with a supplied or sampled sensitivity."""
    eps, d, s = check_epsilon(epsilon), check_probability(delta, "delta"), _check_sensitivity(sensitivity)
    g = _resolve_gamma(sensitivity, gamma)
    return eps, d, s, g, _source(sensitivity, g, source)


class _GridMechanism:
    """Shared ``randomize``: round to the grid, add exact integer noise, scale back."""

    name: str
    epsilon: float
    grid: float

    def _integer_noise(self, shape: tuple[int, int], gen: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _check_shape(self, shape: tuple[int, int]) -> None:
        """Refuse shapes the mechanism cannot serve (before any noise is drawn)."""

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]:
        """PRIVATE: the noise scale of an ``m x n`` release, for ``--private-report`` only (it reveals a
        sampled sensitivity). Empty when the scale is public (the Laplace baseline's ``2m/epsilon``)."""
        return {}

    def randomize(self, matrix: np.ndarray, seed: SeedLike = None) -> np.ndarray:
        """The noisy matrix (before post-processing): ``(rint(matrix/g) + Z) * g``, exact multiples of ``g``.

        ``seed``: an int or SeedSequence for experiments, a Generator, or None
        for fresh OS entropy (:func:`textdp._rng.make_rng`).
        """
        a = _check_matrix(matrix)
        shape = (int(a.shape[0]), int(a.shape[1]))
        self._check_shape(shape)
        k = snap_to_grid(a, self.grid)
        z = self._integer_noise(shape, make_rng(seed))
        if z.dtype == object or np.any(np.abs(z) >= 2**52 - np.abs(k)):
            raise ParameterError(f"the noise exceeds the range of the grid {self.grid:g}; use a coarser grid")
        return (k + z).astype(np.float64) * self.grid


class TopicDPGaussian(_GridMechanism):
    """TopicDP: exact discrete Gaussian noise for the L2 sensitivity of the released matrix.

    Parameters
    ----------
    epsilon : float
        Privacy loss bound ε > 0.
    delta : float
        Failure probability δ in (0, 1).
    sensitivity : float or SampledSensitivity
        L2 (Frobenius) sensitivity ``Δ`` of the released (real-valued) matrix:
        sampled (:class:`~textdp.topics.sensitivity.SampledSensitivity`, random DP)
        or a bound supplied by the user.
    gamma : float or None
        Confidence parameter the sensitivity was sampled for (taken from a
        ``SampledSensitivity`` when omitted); None for a supplied global bound.
    calibration : {"analytic", "thesis"}
        ``"analytic"``: σ (in grid units) ``= Δ_g / sqrt(2ρ)`` with
        ``Δ_g = Δ/g + sqrt(mn)`` (the rounded query's sensitivity) and ρ the
        largest with ``zcdp_delta(ρ, ε) <= δ`` (CKS20 Thm. 14, Cor. 13).
        ``"thesis"``: Sharma (2021) Alg. 2 reproduction, σ = Δ' sqrt(2 ln(1.25/δ)) mn/ε;
        its guarantee is the CKS20 bound for that σ (zCDP with
        ``ρ = (ε/mn)² / (4 ln(1.25/δ))``), stated as δ when it is below δ.
    grid : float
        Public power-of-two grid (default ``2**-20``).

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential
    privacy. NeurIPS 2020 (Algorithms 1-3; Thm. 14; Cor. 13).
    B. Rubinstein, F. Aldà. Pain-free random differential privacy with
    sensitivity sampling. ICML 2017.

    Examples
    --------
    >>> mech = TopicDPGaussian(epsilon=3, delta=1e-4, sensitivity=0.1, gamma=0.1)
    >>> raw = mech.randomize(np.zeros((2, 2)), seed=0)
    >>> raw.shape, bool(np.all(raw / mech.grid == np.rint(raw / mech.grid)))
    ((2, 2), True)
    """

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float | SampledSensitivity,
                 gamma: float | None = None, calibration: str = "analytic", grid: float = DEFAULT_GRID,
                 sensitivity_source: str | None = None) -> None:
        self.epsilon, self.delta, self.sensitivity, self.gamma, self.sensitivity_source = _check_privacy(
            epsilon, delta, sensitivity, gamma, sensitivity_source)
        self.calibration = check_choice(calibration, "calibration", ("analytic", "thesis"))
        self.grid = check_grid(grid)
        self.name = "topicdp" if self.calibration == "analytic" else "topicdp-thesis"

    def grid_sensitivity(self, shape: tuple[int, int]) -> float:
        """L2 sensitivity of the grid-rounded matrix in grid units: ``Δ/g + sqrt(mn)``."""
        m, n = shape
        return rounded_sensitivity(self.sensitivity, self.grid, m * n) / self.grid

    def rho(self, shape: tuple[int, int]) -> float:
        """The zCDP parameter the noise is calibrated to (public: a function of ε, δ, m, n)."""
        m, n = shape
        if self.calibration == "analytic":
            return zcdp_rho(self.epsilon, self.delta)
        per = self.epsilon / (m * n)
        return per * per / (4.0 * math.log(1.25 / self.delta))

    def grid_variance(self, shape: tuple[int, int]) -> Fraction:
        """σ² of the integer noise, in grid units, as the exact rational the sampler uses."""
        s = self.grid_sensitivity(shape) / math.sqrt(2.0 * self.rho(shape)) * (1.0 + 1e-12)
        return Fraction(s * s)

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]:
        return {"noise_sigma": self.sigma(shape)}

    def sigma(self, shape: tuple[int, int]) -> float:
        """Noise standard deviation per entry in value units (private when Δ was sampled)."""
        return math.sqrt(float(self.grid_variance(shape))) * self.grid

    def proven_delta(self, shape: tuple[int, int]) -> float:
        """δ that CKS20's zCDP conversion proves at ε for this noise (public)."""
        return zcdp_delta(self.rho(shape), self.epsilon)

    def _integer_noise(self, shape: tuple[int, int], gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        return discrete_gaussian(self.grid_variance(shape), m * n, gen).reshape(shape)

    def guarantee(self, shape: tuple[int, int]) -> TopicGuarantee:
        """The frozen guarantee of an ``m x n`` release."""
        m, n = shape
        proven = self.proven_delta(shape)
        delta = max(self.delta, proven)
        grid = _grid_text(self.grid)
        noise = (f"exact discrete Gaussian (CKS20 Alg. 3) on the grid g={grid}, calibrated to rho-zCDP with "
                 f"rho={self.rho(shape):.6g} for the L2 sensitivity of the grid-rounded matrix; {ROUNDING_L2}")
        if self.calibration == "analytic":
            how = (f"Noise: {noise}; rho-zCDP implies ({self.epsilon:g}, {delta:.4g})-DP (CKS20 Thm. 14 and "
                   f"Cor. 13; rounding to the grid adds g*sqrt(mn) to the sensitivity).")
        else:
            noise += f" (thesis calibration: sigma per Sharma 2021 Alg. 2, budget eps/(mn)={self.epsilon / (m * n):g})"
            how = (f"Noise: {noise}. The thesis argues ({self.epsilon / (m * n):g}, {self.delta:g})-DP per entry and "
                   f"composes to ({self.epsilon:g}, {min(1.0, m * n * self.delta):g}); the CKS20 zCDP bound for "
                   f"this noise proves ({self.epsilon:g}, {_fmt_delta(proven)})-DP, and the stated delta is the larger of "
                   f"that and the requested {self.delta:g}.")
        src = self.sensitivity_source
        statement = f"{_dp_clause(self.epsilon, delta, self.gamma, src)}. {how} {_not_covered(self.gamma, src)}"
        # what ran, for the accountant: rho-zCDP when the sensitivity is a proven bound; with a sampled
        # sensitivity the guarantee holds only with probability 1 - gamma, which no zCDP event expresses, so the
        # release stays the (epsilon, delta) event of its numbers (basic composition)
        event = ZCDPEvent(self.rho(shape)) if self.gamma is None else None
        return TopicGuarantee(mechanism=self.name, epsilon=self.epsilon, delta=delta, gamma=self.gamma, event=event,
                              shape=(m, n), grid=self.grid, noise=noise, statement=statement,
                              reference=f"{CKS20}; {RANDOM_DP}" if self.gamma is not None else CKS20)


class LaplaceBaseline(_GridMechanism):
    """Exact discrete Laplace noise with the global L1 sensitivity ``2m`` (pure ε-DP).

    Each released row is part of a probability vector, so adding or removing a
    user changes it by at most 2 in L1 and the ``m x n`` matrix by at most
    ``2m``; rounding to the grid adds ``g mn``. Discrete Laplace noise
    ``P[Z = z] ∝ exp(-|z| ε / Δ₁_g)`` (CKS20 Alg. 2; the geometric mechanism) with
    ``Δ₁_g = 2m/g + mn`` grid units is ε-DP for the values, with no sampling and
    no γ. ``scale`` is the nominal (continuous) ``2m/ε``; the sampler uses
    :meth:`grid_scale` (rounded *up* to a multiple of 1/1024 grid units).

    >>> LaplaceBaseline(epsilon=2.0, m=10).scale
    10.0
    """

    name = "topicdp-laplace"

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
            raise ParameterError(f"matrix has {shape[0]} rows but the mechanism was built for m={self.m}")

    def _integer_noise(self, shape: tuple[int, int], gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        return discrete_laplace(self.grid_scale(shape), m * n, gen).reshape(shape)

    def guarantee(self, shape: tuple[int, int]) -> TopicGuarantee:
        """The frozen guarantee of an ``m x n`` release (everything here is public)."""
        self._check_shape(shape)
        m, n = shape
        grid = _grid_text(self.grid)
        scale = float(self.grid_scale(shape)) * self.grid
        noise = (f"exact discrete Laplace (CKS20 Alg. 2) on the grid g={grid}, scale {scale:.6g} "
                 f"(global L1 sensitivity 2m={2 * m} plus g*mn for the rounding, divided by epsilon; "
                 f"{ROUNDING_L1})")
        statement = (f"{self.epsilon:g}-differential privacy for user-level neighbours (one user's documents added "
                     f"or removed; no sampling). Noise: {noise}. {_MODEL_NOT_COVERED}")
        return TopicGuarantee(mechanism=self.name, epsilon=self.epsilon, delta=0.0, gamma=None, shape=(m, n),
                              grid=self.grid, noise=noise, statement=statement)


class MVGMechanism(_GridMechanism):
    """Matrix-variate Gaussian mechanism (Chanyaswad et al., CCS 2018), discretised.

    ``Z = Σ^{1/2} N Ψ^{1/2}`` with row covariance ``Σ = I_m`` and column
    covariance ``Ψ = diag(1/θ_j)``, where the precisions θ use the whole budget
    ``||σ(Σ^{-1})||_2 ||σ(Ψ^{-1})||_2 = sqrt(m) ||θ||_2 = P`` of
    :func:`textdp.accounting.gaussian.mvg_precision_budget` (computed with the sensitivity of the
    grid-rounded matrix):

    * ``"isotropic"``: equal θ (i.i.d. noise of variance ``sqrt(mn)/P``);
    * ``"directional"``: θ proportional to public ``precision_weights`` over
      keyword-rank positions (default ``n, n-1, ..., 1``: less noise on the
      top-ranked keywords), the paper's directional-noise design with a
      data-independent direction.

    With these covariances the entries are independent, entry ``(i, j)`` with
    variance ``1/θ_j``; the release draws an exact discrete Gaussian of that
    variance (in grid units) per entry. Chanyaswad et al.'s Theorem 3 is for
    continuous noise, so the guarantee is proven with CKS20 instead: the noise is
    ρ-zCDP with ``ρ = Δ_g² / (2 min_j σ_j²)`` (grid units), and
    ``zcdp_delta(ρ, ε) <= δ`` is checked before any noise is drawn (an error
    otherwise; the MVG condition is so conservative that it holds in practice).
    ``sup_norm`` is ``sup ||f||_F``; for rows that are sub-probability vectors
    it is ``sqrt(m)``, the default.

    >>> mech = MVGMechanism(epsilon=1, delta=0.1, sensitivity=1.0, sup_norm=1.0)
    >>> round(float(mech.column_variances((1, 1))[0]), 1)
    78.6
    """

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float | SampledSensitivity,
                 gamma: float | None = None, sup_norm: float | None = None,
                 covariance: str = "isotropic", precision_weights: np.ndarray | None = None,
                 grid: float = DEFAULT_GRID, sensitivity_source: str | None = None) -> None:
        self.epsilon, self.delta, self.sensitivity, self.gamma, self.sensitivity_source = _check_privacy(
            epsilon, delta, sensitivity, gamma, sensitivity_source)
        self.sup_norm = None if sup_norm is None else _check_sensitivity(sup_norm, "sup_norm")
        self.covariance = check_choice(covariance, "covariance", ("isotropic", "directional"))
        self.grid = check_grid(grid)
        self.name = "mvg" if self.covariance == "isotropic" else "mvg-directional"
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

    def _integer_noise(self, shape: tuple[int, int], gen: np.random.Generator) -> np.ndarray:
        m, n = shape
        self._check_shape(shape)
        var = self._checked[shape]
        out = np.empty((m, n), dtype=np.int64)
        for v in sorted(set(var)):  # one vectorised draw per distinct column variance
            cols = [j for j in range(n) if var[j] == v]
            out[:, cols] = discrete_gaussian(v, m * len(cols), gen).reshape(m, len(cols))
        return out

    def guarantee(self, shape: tuple[int, int]) -> TopicGuarantee:
        """The frozen guarantee of an ``m x n`` release (checked before it is stated)."""
        self._check_shape(shape)
        m, n = shape
        noise = (f"discretised matrix-variate Gaussian ({self.covariance} column covariance from the precision "
                 f"budget of Chanyaswad et al. 2018, Thm. 3): independent exact discrete Gaussians (CKS20 Alg. 3) "
                 f"on the grid g={_grid_text(self.grid)}, one variance per keyword-rank column; {ROUNDING_L2}")
        how = (f"Noise: {noise}; its privacy is proven with CKS20 (zCDP, Thm. 14 and Cor. 13, with the smallest "
               f"column variance), checked to give ({self.epsilon:g}, {self.delta:g})-DP; the continuous MVG "
               "theorem is not relied upon.")
        src = self.sensitivity_source
        statement = (f"{_dp_clause(self.epsilon, self.delta, self.gamma, src)}. {how} "
                     f"{_not_covered(self.gamma, src)}")
        return TopicGuarantee(mechanism=self.name, epsilon=self.epsilon, delta=self.delta, gamma=self.gamma,
                              shape=(m, n), grid=self.grid, noise=noise, statement=statement,
                              reference=(f"Chanyaswad, Dytso, Poor & Mittal, 'MVG Mechanism', CCS 2018; {CKS20}"
                                         + (f"; {RANDOM_DP}" if self.gamma is not None else "")))


class TopicMechanism(Protocol):
    """What :func:`release_topics` needs from a mechanism."""

    @property
    def name(self) -> str: ...

    @property
    def epsilon(self) -> float: ...

    @property
    def grid(self) -> float: ...

    def randomize(self, matrix: np.ndarray, seed: SeedLike = None) -> np.ndarray: ...

    def private_scale(self, shape: tuple[int, int]) -> dict[str, object]: ...

    def guarantee(self, shape: tuple[int, int]) -> TopicGuarantee: ...


def needs_sensitivity(name: str) -> bool:
    """Whether mechanism ``name`` needs an L2 sensitivity (sampled or supplied).

    >>> needs_sensitivity("topicdp-laplace"), needs_sensitivity("topicdp")
    (False, True)
    """
    return check_choice(name, "mechanism", MECHANISMS) != "topicdp-laplace"


def build_mechanism(name: str, *, epsilon: float, delta: float, m: int, gamma: float | None = None,
                    sensitivity: float | SampledSensitivity | str | None = None,
                    grid: float = DEFAULT_GRID) -> TopicDPGaussian | LaplaceBaseline | MVGMechanism:
    """The mechanism called ``name`` (one of :data:`MECHANISMS`).

    ``topicdp-laplace`` needs only ``m`` (its sensitivity ``2m`` is global); the others
    need ``sensitivity``: a sampled one (with ``gamma``), a number the user
    vouches for, or ``"worst-case"`` for the global bound ``sqrt(2m)``
    (:func:`~textdp.topics.sensitivity.worst_case_sensitivity`; ordinary
    (ε, δ)-DP, no γ).

    >>> build_mechanism("topicdp", epsilon=2, delta=1e-4, m=5, sensitivity="worst-case").guarantee((5, 5)).gamma is None
    True

    >>> build_mechanism("topicdp-laplace", epsilon=2, delta=1e-4, m=3).scale
    3.0
    >>> build_mechanism("mvg-directional", epsilon=2, delta=1e-4, m=3, sensitivity=0.1, gamma=0.1).name
    'mvg-directional'
    """
    check_choice(name, "mechanism", MECHANISMS)
    if name == "topicdp-laplace":
        return LaplaceBaseline(epsilon=epsilon, m=m, grid=grid)
    if sensitivity is None:
        raise ParameterError(f"mechanism {name!r} needs a sensitivity: sample one (SensitivitySampler) "
                             "or supply a bound (--sensitivity)")
    source: str | None = None
    if isinstance(sensitivity, str):
        if sensitivity != "worst-case":
            raise ParameterError(f"sensitivity {sensitivity!r}: give a number, a SampledSensitivity or 'worst-case'")
        if gamma is not None:
            raise ParameterError("the worst-case sensitivity is global: it takes no gamma")
        sensitivity, source = worst_case_sensitivity(m), "worst-case"
    if name in ("topicdp", "topicdp-thesis"):
        return TopicDPGaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity, gamma=gamma,
                               calibration="analytic" if name == "topicdp" else "thesis", grid=grid,
                               sensitivity_source=source)
    return MVGMechanism(epsilon=epsilon, delta=delta, sensitivity=sensitivity, gamma=gamma, grid=grid,
                        covariance="isotropic" if name == "mvg" else "directional", sensitivity_source=source)


@dataclass(frozen=True)
class TopicRelease(ReleaseRecord):
    """One release (a :class:`~textdp.guarantees.ReleaseRecord`): the noisy matrix and its guarantee -- nothing else.

    ``raw_matrix`` is the noisy matrix before post-processing: every entry is an
    exact multiple of ``grid`` (it is the DP output); ``content`` (:attr:`matrix`) is its
    post-processing (clipped to [0, 1], rows scaled to sum <= 1). No sensitivity,
    noise scale, user count or timing is held here. ``to_record()`` writes the one record
    layout (``release: "matrix"``, plus ``keywords`` and ``raw_matrix``).
    """

    release: str = "matrix"
    content: tuple[tuple[float, ...], ...] = ()
    keywords: tuple[tuple[str, ...], ...] = ()
    raw_matrix: tuple[tuple[float, ...], ...] = ()

    @property
    def matrix(self) -> tuple[tuple[float, ...], ...]:
        """The post-processed matrix."""
        return self.content

    @property
    def topic_guarantee(self) -> TopicGuarantee:
        """The guarantee, typed for this family."""
        assert isinstance(self.guarantee, TopicGuarantee)
        return self.guarantee

    @property
    def mechanism(self) -> str:
        return self.guarantee.mechanism

    @property
    def epsilon(self) -> float:
        return self.guarantee.epsilon

    @property
    def delta(self) -> float:
        return self.guarantee.delta

    @property
    def gamma(self) -> float | None:
        return self.topic_guarantee.gamma

    @property
    def grid(self) -> float:
        return self.topic_guarantee.grid

    @property
    def keyword_note(self) -> str:
        return KEYWORD_NOTE_NOISY if self.topic_guarantee.keywords_from == "noisy" else KEYWORD_NOTE

    def as_array(self) -> np.ndarray:
        """The post-processed matrix as an array."""
        return np.array(self.matrix, dtype=float)

    def to_record(self) -> dict[str, Any]:
        """The release record (the one layout) with the keywords and the grid-exact raw matrix."""
        out = super().to_record()
        out["raw_matrix"] = [list(r) for r in self.raw_matrix]
        out["keywords"] = [list(k) for k in self.keywords]
        return out


def covered_guarantee(guarantee: TopicGuarantee, keywords: int) -> TopicGuarantee:
    """The guarantee of a release whose ``keywords`` per topic are read off the noisy values (all covered).

    ``guarantee`` is the mechanism's guarantee for the whole ``m x V`` rows over the public vocabulary;
    the statement's "Not covered: which topics and keywords ..." becomes what is covered, and why.

    >>> g = covered_guarantee(LaplaceBaseline(epsilon=1.0, m=2).guarantee((2, 50)), 5)
    >>> g.keywords_from, g.params["keywords_per_topic"], g.params["noised_columns"], "Covered too" in g.statement
    ('noisy', 5, 50, True)
    """
    if guarantee.keywords_from == "noisy":
        return guarantee
    head, sep, tail = guarantee.statement.partition(_MODEL_NOT_COVERED)
    if not sep:  # pragma: no cover - every topics guarantee states the model's choice
        raise ParameterError("this guarantee does not describe a topic-keyword release")
    tail = tail.strip()
    public = "The sensitivity sqrt(2m) and the noise scale are public."
    rest = (f"Not covered: {tail}" if tail and not tail.startswith(public) else
            "Not covered: nothing else (the parameters, the shape and the public vocabulary are public"
            + ("; so are the sensitivity sqrt(2m) and the noise scale" if tail else "") + f").{tail[len(public):]}")
    covered = _NOISY_COVERED.format(n=keywords, v=guarantee.shape[1])
    return guarantee.evolve(keywords_from="noisy", keywords=keywords, statement=f"{head}{covered} {rest}")


def release_topics(topics: TopicMatrix, mechanism: TopicMechanism, seed: SeedLike = None, *,
                   vocabulary_note: str | None = None, keywords: int | None = None) -> TopicRelease:
    """Randomize ``topics.matrix`` with ``mechanism``, post-process, and record it.

    ``seed`` as in :func:`textdp._rng.make_rng`.
    ``vocabulary_note``: the record's sentence on the vocabulary
    (:func:`textdp.topics.vocabulary.vocabulary_note`).
    ``keywords``: for whole rows over a public vocabulary
    (:func:`~textdp.topics.models.topic_rows`), how many keywords per topic to read off the noisy
    values (default: every column); see :func:`make_release`.

    >>> tm = TopicMatrix(np.array([[0.5, 0.3]]), (("a", "b"),), (0,))
    >>> r = release_topics(tm, LaplaceBaseline(epsilon=1.0, m=1), seed=1)
    >>> r.mechanism, r.delta, r.gamma, len(r.matrix[0]), r.seeded
    ('topicdp-laplace', 0.0, None, 2, True)
    """
    if not isinstance(topics, TopicMatrix):
        raise ParameterTypeError(f"topics must be a TopicMatrix, got {type(topics).__name__}")
    guarantee = mechanism.guarantee(topics.shape)  # validates before any noise is drawn
    raw = mechanism.randomize(topics.matrix, seed=seed)
    return make_release("topics", topics, raw, guarantee.evolve(seeded=_is_seeded(seed),
                                                                 vocabulary_note=vocabulary_note), _is_seeded(seed),
                        keywords=keywords)


def noisy_keywords(raw: np.ndarray, n: int) -> np.ndarray:
    """Column indices of each row's ``n`` largest noisy values, largest first (ties: the earlier column).

    A function of the noisy matrix alone (post-processing).

    >>> noisy_keywords(np.array([[0.1, 0.5, 0.3], [0.2, 0.2, 0.0]]), 2).tolist()
    [[1, 2], [0, 1]]
    """
    return np.argsort(-np.asarray(raw, dtype=float), axis=1, kind="stable")[:, :n]


def make_release(uid: str, topics: TopicMatrix, raw: np.ndarray, guarantee: TopicGuarantee,
                 seeded: bool, *, keywords: int | None = None) -> TopicRelease:
    """The :class:`TopicRelease` of a noisy matrix ``raw`` (post-processed here).

    For whole rows over a public vocabulary (``topics.columns == "public"``) each topic keeps its
    ``keywords`` largest noisy values (:func:`noisy_keywords`; default: every column) and the
    guarantee says that the keywords are covered (:func:`covered_guarantee`). For the model's
    keywords (``"model"``) the matrix is released as it is.
    """
    kws = topics.keywords
    if topics.columns == "public":
        n = raw.shape[1] if keywords is None else check_positive_int(keywords, "keywords")
        if n > raw.shape[1]:
            raise ParameterError(f"cannot keep {n} keywords per topic from a vocabulary of {raw.shape[1]} words")
        cols = noisy_keywords(raw, n)
        kws = tuple(tuple(topics.keywords[i][c] for c in row) for i, row in enumerate(cols))
        raw = np.take_along_axis(raw, cols, axis=1)
        guarantee = covered_guarantee(guarantee, n)
    elif keywords is not None and keywords != raw.shape[1]:
        raise ParameterError(f"the model chose {raw.shape[1]} keywords per topic; keeping {keywords} of the noisy "
                             "values needs whole rows over a public vocabulary (textdp.topics.models.topic_rows)")
    return TopicRelease(
        id=uid, guarantee=guarantee, seeded=seeded, keywords=kws,
        raw_matrix=tuple(tuple(float(x) for x in row) for row in raw),
        content=tuple(tuple(float(x) for x in row) for row in postprocess(raw)))
