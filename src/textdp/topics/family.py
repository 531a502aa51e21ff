"""The topics family on the one mechanism base: a topic-keyword matrix in, a noisy matrix out.

Registered names (:func:`textdp.mechanisms.get`): ``topicdp`` (analytic Gaussian calibration),
``topicdp-thesis`` (the thesis calibration), ``topicdp-laplace`` (the Laplace baseline; spelt
once across families, the n-dimensional Laplace noise of Earth Mover's privacy being another
thing), ``mvg`` and ``mvg-directional``. Each is a :class:`~textdp.mechanisms.base.Mechanism`:
parameters declared once on :class:`TopicsMechanism`, ``fit`` validates, one batch verb
``privatize_batch([topic_matrix, ...], seed=...)``, one ``guarantee(ReleaseContext(shape=(m, n)))``.

All take ``epsilon``, ``delta`` (unused by ``topicdp-laplace``, which is pure ε-DP),
``sensitivity`` (a number, a :class:`~textdp.topics.sensitivity.SampledSensitivity` or ``"worst-case"``;
none for ``topicdp-laplace``), ``gamma``, ``grid``, ``vocabulary_note`` (the public sentence on the
vocabulary, :func:`textdp.topics.vocabulary.vocabulary_note`), ``keywords_from``, ``keywords`` and ``seed``.

Which keywords a release names (:mod:`textdp.topics.release`, "What the guarantees cover"):
a unit built by :func:`~textdp.topics.models.topic_rows` (whole rows over a public vocabulary)
gets the noise on every entry and keeps each topic's ``keywords`` largest *noisy* values: every part
of the release is covered (``keywords_from="noisy"``, what ``textdp topics`` does by default). A unit
built by :func:`~textdp.topics.models.extract_topic_matrix` carries the non-private model's keywords,
released as they are and not covered (``keywords_from="model"``, the thesis's release). With
``keywords_from=None`` (default) the unit decides; naming it makes a mismatched unit an error.

The unit of a batch is a :class:`~textdp.topics.models.TopicMatrix`; its shape ``(m, n)`` is
public (the release's ``context.shape``). Each class builds its noise core for a shape
(:meth:`TopicsMechanism.noise`: :class:`~textdp.topics.noise.GaussianNoise`,
:class:`~textdp.topics.noise.LaplaceNoise` or :class:`~textdp.topics.noise.MatrixGaussianNoise`, chosen by the
class, never by its name), whose ``randomize(matrices, seed)`` is the pure batch function (one
vectorised draw per chunk), and states the guarantee (:meth:`TopicsMechanism.guarantee`). A
release is a :class:`~textdp.topics.release.TopicRelease` (one record: ``release: "matrix"``, the
post-processed ``matrix``, the grid-exact ``raw_matrix``, the ``keywords``, the compact guarantee;
unit ``user``).

>>> import numpy as np
>>> from textdp.topics.models import TopicMatrix
>>> tm = TopicMatrix(np.array([[0.5, 0.3], [0.2, 0.1]]), (("a", "b"), ("c", "d")), (0, 1))
>>> rel = TopicDPLaplace(epsilon=1.0, seed=1).privatize(tm)
>>> rec = rel.to_record()
>>> rec["release"], rec["mechanism"], rec["unit"], len(rec["matrix"]), rec["keywords"][1]
('matrix', 'topicdp-laplace', 'user', 2, ['c', 'd'])
>>> from textdp.topics.models import topic_rows
>>> rows = topic_rows(np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]), np.array([0.7, 0.3]), ["a", "b", "c"], 2)
>>> rel = TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", keywords=2, seed=1).privatize(rows)
>>> [len(k) for k in rel.keywords], rel.guarantee.params["keywords_from"], rel.keyword_note[:8]
([2, 2], 'noisy', 'Covered:')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from .._validation import check_choice, check_positive_int, check_probability
from ..accounting.gaussian import check_sensitivity
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee
from ..guarantees.events import DiscreteLaplaceEvent, ZCDPEvent
from ..mechanisms.base import Mechanism, ReleaseContext, SeedLike
from ..mechanisms.registry import get, mechanism_class, names
from ..samplers import DEFAULT_GRID, zcdp_rho
from .models import TopicMatrix
from .names import KEYWORD_SOURCES
from .noise import GaussianNoise, GridNoise, LaplaceNoise, MatrixGaussianNoise
from .release import (
    CKS20,
    MODEL_NOT_COVERED,
    RANDOM_DP,
    ROUNDING_L1,
    ROUNDING_L2,
    SENSITIVITY_SOURCES,
    TopicGuarantee,
    TopicRelease,
    covered_guarantee,
    dp_clause,
    fmt_delta,
    grid_text,
    make_release,
    not_covered,
)
from .sensitivity import SampledSensitivity, worst_case_sensitivity

__all__ = [
    "MVG",
    "MVGDirectional",
    "TopicDP",
    "TopicDPLaplace",
    "TopicDPThesis",
    "TopicsMechanism",
    "needs_sensitivity",
    "takes_corpus",
    "topics_mechanism",
]

Sensitivity = float | SampledSensitivity | str | None

#: Most matrix entries one chunk's vectorised noise draw holds (4M int64: 32 MiB).
CHUNK_ENTRIES = 1 << 22


class TopicsMechanism(Mechanism[TopicMatrix, np.ndarray, TopicRelease]):
    """Base of the topics family (see the module docstring)."""

    family = "topics"
    releases = "matrix"
    #: units per chunk by default; a chunk's noise is one vectorised draw, capped by :data:`CHUNK_ENTRIES`
    chunk_size = 4096
    #: whether the noise is calibrated to an L2 sensitivity (sampled, supplied or worst-case); the Laplace
    #: baseline's global L1 sensitivity ``2m`` needs none
    takes_sensitivity: ClassVar[bool] = True
    #: whether the unit is the user corpus itself (noise on a clipped statistic of it, the topics fitted after the
    #: noise: :mod:`textdp.topics.cooccurrence`) rather than a fitted model's topic matrix
    takes_corpus: ClassVar[bool] = False
    #: what a mechanism that takes no sensitivity is calibrated to instead, for the private report (``textdp topics``)
    sensitivity_note: ClassVar[str] = "none: the mechanism states its own bound"
    #: the mechanism's label in figures and tables (``textdp topics --report``)
    label: ClassVar[str] = ""

    epsilon: float
    delta: float | None = None
    sensitivity: Sensitivity = None
    gamma: float | None = None
    grid: float = DEFAULT_GRID
    vocabulary_note: str | None = None
    keywords_from: str | None = None
    keywords: int | None = None
    seed: SeedLike = None

    def _fit(self) -> None:
        self._check_delta()
        self._calibrate(self.epsilon, float(self.delta or 0.0))
        if self.keywords_from is not None:
            check_choice(self.keywords_from, "keywords_from", KEYWORD_SOURCES)
        if self.keywords is not None:
            check_positive_int(self.keywords, "keywords")
            if self.keywords_from == "model":
                raise ParameterError("keywords= keeps the largest noisy values of whole rows (keywords_from='noisy'); "
                                     "with the model's keywords the matrix is released as it is")
        self.noise_for((1, 1))  # validates the sensitivity, gamma and grid before any matrix is seen

    def _check_delta(self) -> None:
        if self.delta is None:
            raise ParameterError(f"{self.name} needs delta (an (epsilon, delta) guarantee)")
        check_probability(self.delta, "delta")

    def sensitivity_for(self, m: int) -> tuple[float, float | None, str]:
        """``(Δ, γ, source)``: the L2 sensitivity the noise is calibrated to, its γ and where it came from.

        ``source`` is one of ``sampled`` (a :class:`~textdp.topics.sensitivity.SampledSensitivity` or a
        ``gamma``: random DP), ``worst-case`` (the global ``sqrt(2m)``, no γ) or ``supplied`` (a number
        the user vouches for).
        """
        s = self.sensitivity
        if s is None:
            raise ParameterError(f"mechanism {self.name!r} needs a sensitivity: sample one (SensitivitySampler) "
                                 "or supply a bound (--sensitivity)")
        if isinstance(s, str):
            if s != "worst-case":
                raise ParameterError(f"sensitivity {s!r}: give a number, a SampledSensitivity or 'worst-case'")
            if self.gamma is not None:
                raise ParameterError("the worst-case sensitivity is global: it takes no gamma")
            return worst_case_sensitivity(m), None, "worst-case"
        sampled = isinstance(s, SampledSensitivity)
        value = check_sensitivity(s.value if isinstance(s, SampledSensitivity) else s)
        gamma = (check_probability(self.gamma, "gamma") if self.gamma is not None
                 else s.gamma if isinstance(s, SampledSensitivity) else None)
        source = "sampled" if gamma is not None or sampled else "supplied"
        assert source in SENSITIVITY_SOURCES
        return value, gamma, source

    def noise(self, shape: tuple[int, int]) -> GridNoise:
        """The noise core for an ``m x n`` release (a function of the parameters and the public shape)."""
        raise NotImplementedError  # pragma: no cover - every registered class supplies it

    def noise_for(self, shape: tuple[int, int]) -> GridNoise:
        """The fitted noise core of an ``m x n`` release, built once per shape from the calibration (:meth:`noise`).

        The guarantee, the release and the private report read this one object.
        """
        cores: dict[tuple[int, int], GridNoise] = self.__dict__.setdefault("noise_cores_", {})
        key = (int(shape[0]), int(shape[1]))
        if key not in cores:
            cores[key] = self.noise(key)
        return cores[key]

    def _stated(self, core: GridNoise, shape: tuple[int, int]) -> TopicGuarantee:
        """The guarantee of an ``m x n`` release with ``core`` (before the keywords' coverage is added)."""
        raise NotImplementedError  # pragma: no cover - every registered class supplies it

    def guarantee(self, context: ReleaseContext | None = None) -> TopicGuarantee:
        """The guarantee of an ``m x n`` release (``context.shape`` is required: the bound depends on it)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        if ctx.shape is None:
            raise ParameterError("the guarantee depends on the matrix shape: pass ReleaseContext(shape=(m, n))")
        g = self._stated(self.noise_for(ctx.shape), ctx.shape)
        if self.keywords_from == "noisy":  # shape = (m, V): whole rows over the public vocabulary
            g = covered_guarantee(g, min(self.keywords or ctx.shape[1], ctx.shape[1]))
        return g.evolve(seeded=ctx.seeded, empty=ctx.empty, vocabulary_note=self.vocabulary_note,
                        mechanism_parameters=self.own_parameters())

    def own_parameters(self) -> tuple[tuple[str, object], ...]:
        """The class's own parameters (declared beyond the family's), as every record states them.

        >>> from textdp.mechanisms import ReleaseContext, get
        >>> get("noisy-cooccurrence", epsilon=1.0, delta=1e-5).own_parameters()[:3]
        (('topics', 10), ('released_topics', None), ('words', 500))
        """
        family = set(TopicsMechanism.param_names())
        return tuple((k, getattr(self, k)) for k in self.param_names() if k not in family)

    def _prepare(self, unit: object, uid: str) -> TopicMatrix:
        if not isinstance(unit, TopicMatrix):
            raise ParameterTypeError(f"unit {uid}: a topics mechanism takes a TopicMatrix, got {type(unit).__name__}")
        if self.keywords_from == "noisy" and unit.columns != "public":
            raise ParameterError(f"unit {uid}: keywords_from='noisy' needs whole topic rows over a public vocabulary "
                                 "(textdp.topics.models.topic_rows); this matrix holds the model's keywords: pass "
                                 "keywords_from='model' (their identities are then not covered)")
        if self.keywords_from == "model" and unit.columns != "model":
            raise ParameterError(f"unit {uid}: keywords_from='model' releases the model's keywords "
                                 "(textdp.topics.models.extract_topic_matrix); this matrix holds whole rows")
        if self.keywords is not None and unit.columns != "public":
            raise ParameterError(f"unit {uid}: keywords={self.keywords} reads keywords off the noisy values of whole "
                                 "rows over a public vocabulary (textdp.topics.models.topic_rows)")
        return unit

    def release_context(self, prepared: Sequence[TopicMatrix], *, size: int | None = None,
                        size_from_data: bool = False, seeded: bool = False,
                        empty: str = "error") -> ReleaseContext:
        """The public shape ``(m, n)`` of the batch's matrices (one shape per batch)."""
        super().release_context(prepared, size=size, size_from_data=size_from_data, seeded=seeded, empty=empty)
        shapes = {p.shape for p in prepared}
        if len(shapes) != 1:
            raise ParameterError(f"one batch releases matrices of one shape, got {sorted(shapes)}")
        return ReleaseContext(shape=shapes.pop(), seeded=seeded, empty=empty)

    def _chunk_limit(self, context: ReleaseContext) -> int:
        """At most :data:`CHUNK_ENTRIES` matrix entries per chunk (the chunk's noise is drawn at once)."""
        assert context.shape is not None
        return max(1, CHUNK_ENTRIES // (context.shape[0] * context.shape[1]))

    def _privatize(self, prepared: Sequence[TopicMatrix], context: ReleaseContext,
                   rng: np.random.Generator) -> list[np.ndarray]:
        """The chunk's noisy matrices: the noise of the whole stack in one vectorised draw."""
        assert context.shape is not None
        raw = self.noise_for(context.shape).randomize(np.stack([p.matrix for p in prepared]), seed=rng)
        return list(raw)

    def _release(self, uid: str, prepared: TopicMatrix, output: np.ndarray | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> TopicRelease:
        assert isinstance(guarantee, TopicGuarantee) and output is not None  # a matrix is never empty
        return make_release(uid, prepared, output, guarantee, seeded, keywords=self.keywords)


def needs_sensitivity(name: str) -> bool:
    """Whether the registered topics mechanism ``name`` takes an L2 sensitivity (its class says so).

    >>> needs_sensitivity("topicdp-laplace"), needs_sensitivity("topicdp")
    (False, True)
    """
    check_choice(name, "mechanism", names("topics"))
    return bool(getattr(mechanism_class(name), "takes_sensitivity", True))


def takes_corpus(name: str) -> bool:
    """Whether the registered topics mechanism ``name`` takes the user corpus itself (its class says so).

    >>> takes_corpus("noisy-cooccurrence"), takes_corpus("topicdp")
    (True, False)
    """
    check_choice(name, "mechanism", names("topics"))
    return bool(getattr(mechanism_class(name), "takes_corpus", False))


def sensitivity_note(name: str) -> str:
    """What the registered topics mechanism ``name`` is calibrated to when it takes no sensitivity (its class says).

    >>> sensitivity_note("topicdp-laplace")
    'global L1 bound 2m (public)'
    """
    check_choice(name, "mechanism", names("topics"))
    return str(getattr(mechanism_class(name), "sensitivity_note", ""))


def topics_mechanism(name: str, **params: object) -> TopicsMechanism:
    """The registered topics mechanism ``name`` (:func:`textdp.mechanisms.get`), typed for this family."""
    mech = get(name, **params)
    if not isinstance(mech, TopicsMechanism):
        raise ParameterError(f"{name} is a {mech.family} mechanism, not a topics one; choose one of: "
                             f"{', '.join(names('topics'))}")
    return mech


class TopicDP(TopicsMechanism):
    """TopicDP: exact discrete Gaussian noise on the grid, analytic calibration (Sharma 2021; CKS20).

    Noise law: every entry of the grid-rounded ``m x n`` matrix gets an independent discrete
    Gaussian ``N_Z(0, sigma^2)`` in grid units, ``sigma = Delta_g / sqrt(2 rho)`` with
    ``Delta_g = Delta/g + sqrt(mn)`` and ``rho`` the largest value with
    ``zcdp_delta(rho, epsilon) <= delta`` (CKS20 Theorem 14 and Corollary 13).

    Guarantee: ``(epsilon, delta)``-DP per user for the released matrix when ``sensitivity``
    is a proven bound; with a :class:`~textdp.topics.sensitivity.SampledSensitivity` it is
    random DP with confidence ``gamma`` (the guarantee says so). The vocabulary and the shape
    are covered only as ``vocabulary_note`` states.
    """

    name = "topicdp"
    label = "TopicDP (analytic Gaussian)"
    reference = "Canonne, Kamath & Steinke 2020; Rubinstein & Alda 2017"
    #: the noise's calibration (:class:`~textdp.topics.noise.GaussianNoise`): ``analytic`` or ``thesis``
    calibration: ClassVar[str] = "analytic"

    def noise(self, shape: tuple[int, int]) -> GaussianNoise:
        """The discrete Gaussian core for an ``m x n`` release, calibrated to :meth:`sensitivity_for`."""
        value = self.sensitivity_for(shape[0])[0]
        return GaussianNoise(epsilon=self.epsilon_, delta=self.delta_, sensitivity=value,
                             calibration=self.calibration, grid=self.grid)

    def _stated(self, core: GridNoise, shape: tuple[int, int]) -> TopicGuarantee:
        assert isinstance(core, GaussianNoise)
        m, n = shape
        eps = core.epsilon
        _, gamma, src = self.sensitivity_for(m)
        proven = core.proven_delta(shape)
        delta = max(core.delta, proven)
        noise = (f"exact discrete Gaussian (CKS20 Alg. 3) on the grid g={grid_text(core.grid)}, calibrated to "
                 f"rho-zCDP with rho={core.rho(shape):.6g} for the L2 sensitivity of the grid-rounded matrix; "
                 f"{ROUNDING_L2}")
        if core.calibration == "analytic":
            how = (f"Noise: {noise}; rho-zCDP implies ({eps:g}, {delta:.4g})-DP (CKS20 Thm. 14 and "
                   f"Cor. 13; rounding to the grid adds g*sqrt(mn) to the sensitivity).")
        else:
            noise += f" (thesis calibration: sigma per Sharma 2021 Alg. 2, budget eps/(mn)={eps / (m * n):g})"
            how = (f"Noise: {noise}. The thesis argues ({eps / (m * n):g}, {core.delta:g})-DP per entry and "
                   f"composes to ({eps:g}, {min(1.0, m * n * core.delta):g}); the CKS20 zCDP bound for "
                   f"this noise proves ({eps:g}, {fmt_delta(proven)})-DP, and the stated delta is the larger of "
                   f"that and the requested {core.delta:g}.")
        statement = f"{dp_clause(eps, delta, gamma, src)}. {how} {not_covered(gamma, src)}"
        # what ran, for the accountant: rho-zCDP when the sensitivity is a proven bound; with a sampled
        # sensitivity the guarantee holds only with probability 1 - gamma, which no zCDP event expresses, so the
        # release stays the (epsilon, delta) event of its numbers (basic composition)
        # (the thesis noise is rho-zCDP for a smaller rho; its event is the largest rho that gives the stated
        # (epsilon, delta), so the ledger charges what the guarantee states, never less)
        event = ZCDPEvent(zcdp_rho(eps, delta)) if gamma is None else None
        return TopicGuarantee(mechanism=self.name, epsilon=eps, delta=delta, gamma=gamma, event=event,
                              shape=(m, n), grid=core.grid, noise=noise, statement=statement,
                              reference=f"{CKS20}; {RANDOM_DP}" if gamma is not None else CKS20)


class TopicDPThesis(TopicDP):
    """TopicDP with the thesis's calibration, ``sigma = Delta' sqrt(2 ln(1.25/delta)) mn / epsilon`` (Sharma 2021, Alg. 2).

    The budget is split as ``epsilon/(mn)`` per entry, far noisier than needed since ``Delta``
    already bounds the whole matrix; the thesis's own composition argument would give only
    ``(epsilon, mn delta)``. The release is proven with CKS20 instead: the noise is
    ``rho``-zCDP with ``rho = (epsilon/mn)^2 / (4 ln(1.25/delta))``, and the stated delta is the
    larger of the CKS20 delta at ``epsilon`` and the requested one. Same unit (user) and caveats
    as :class:`TopicDP`.
    """

    name = "topicdp-thesis"
    label = "TopicDP (thesis calibration)"
    reference = "Sharma 2021 (thesis calibration); Canonne, Kamath & Steinke 2020"
    calibration = "thesis"


class TopicDPLaplace(TopicsMechanism):
    """The Laplace baseline: exact discrete Laplace noise, global L1 sensitivity ``2m`` (pure ε-DP).

    ``delta`` is not used (the guarantee's delta is 0); it takes no ``sensitivity`` or ``gamma``.
    """

    name = "topicdp-laplace"
    label = "Laplace (L1 sens. 2m)"
    reference = "Canonne, Kamath & Steinke 2020 (discrete Laplace)"
    takes_sensitivity = False
    sensitivity_note = "global L1 bound 2m (public)"

    def _check_delta(self) -> None:
        if self.sensitivity is not None or self.gamma is not None:
            raise ParameterError(f"{self.name} has the global L1 sensitivity 2m: it takes no sensitivity or gamma")

    def noise(self, shape: tuple[int, int]) -> LaplaceNoise:
        """The discrete Laplace core for ``m`` rows (global L1 sensitivity ``2m``)."""
        return LaplaceNoise(epsilon=self.epsilon_, m=shape[0], grid=self.grid)

    def _stated(self, core: GridNoise, shape: tuple[int, int]) -> TopicGuarantee:
        assert isinstance(core, LaplaceNoise)
        m, n = shape
        scale = float(core.grid_scale(shape)) * core.grid
        noise = (f"exact discrete Laplace (CKS20 Alg. 2) on the grid g={grid_text(core.grid)}, scale {scale:.6g} "
                 f"(global L1 sensitivity 2m={2 * m} plus g*mn for the rounding, divided by epsilon; "
                 f"{ROUNDING_L1})")
        statement = (f"{core.epsilon:g}-differential privacy for user-level neighbours (one user's documents added "
                     f"or removed; no sampling). Noise: {noise}. {MODEL_NOT_COVERED}")
        l1 = 2 * m / core.grid + m * n  # the rounded matrix's L1 sensitivity in grid units
        event = DiscreteLaplaceEvent(parameter=1.0 / float(core.grid_scale(shape)), sensitivity=l1)
        return TopicGuarantee(mechanism=self.name, epsilon=core.epsilon, delta=0.0, gamma=None, shape=(m, n),
                              grid=core.grid, noise=noise, statement=statement, event=event)


class MVG(TopicsMechanism):
    """The matrix-variate Gaussian mechanism with isotropic covariance (Chanyaswad et al., CCS 2018).

    ``Z = Sigma^(1/2) N Psi^(1/2)`` with ``Sigma = I_m`` and equal column precisions spending the
    whole budget ``P`` of :func:`textdp.accounting.gaussian.mvg_precision_budget`: i.i.d. entries
    of variance ``sqrt(mn)/P``. Their Theorem 3 is for continuous noise, so the discretised
    release is proven with CKS20 (``rho = Delta_g^2 / (2 min_j sigma_j^2)``), checked against
    ``delta`` before any noise is drawn.
    """

    name = "mvg"
    label = "MVG (isotropic)"
    reference = "Chanyaswad, Dytso, Poor & Mittal, CCS 2018; Canonne, Kamath & Steinke 2020"
    #: the column covariance of the noise (:class:`~textdp.topics.noise.MatrixGaussianNoise`)
    covariance: ClassVar[str] = "isotropic"

    def noise(self, shape: tuple[int, int]) -> MatrixGaussianNoise:
        """The discretised MVG core for an ``m x n`` release, its budget from :meth:`sensitivity_for`."""
        value = self.sensitivity_for(shape[0])[0]
        return MatrixGaussianNoise(epsilon=self.epsilon_, delta=self.delta_, sensitivity=value,
                        covariance=self.covariance, grid=self.grid)

    def _stated(self, core: GridNoise, shape: tuple[int, int]) -> TopicGuarantee:
        assert isinstance(core, MatrixGaussianNoise)
        core._check_shape(shape)  # the CKS20 bound is checked before the guarantee is stated
        m, n = shape
        _, gamma, src = self.sensitivity_for(m)
        noise = (f"discretised matrix-variate Gaussian ({core.covariance} column covariance from the precision "
                 f"budget of Chanyaswad et al. 2018, Thm. 3): independent exact discrete Gaussians (CKS20 Alg. 3) "
                 f"on the grid g={grid_text(core.grid)}, one variance per keyword-rank column; {ROUNDING_L2}")
        how = (f"Noise: {noise}; its privacy is proven with CKS20 (zCDP, Thm. 14 and Cor. 13, with the smallest "
               f"column variance), checked to give ({core.epsilon:g}, {core.delta:g})-DP; the continuous MVG "
               "theorem is not relied upon.")
        statement = f"{dp_clause(core.epsilon, core.delta, gamma, src)}. {how} {not_covered(gamma, src)}"
        return TopicGuarantee(mechanism=self.name, epsilon=core.epsilon, delta=core.delta, gamma=gamma,
                              shape=(m, n), grid=core.grid, noise=noise, statement=statement,
                              reference=(f"Chanyaswad, Dytso, Poor & Mittal, 'MVG Mechanism', CCS 2018; {CKS20}"
                                         + (f"; {RANDOM_DP}" if gamma is not None else "")))


class MVGDirectional(MVG):
    """The matrix-variate Gaussian mechanism with directional precision over keyword ranks.

    As :class:`MVG`, but the column precisions are proportional to the public weights
    ``n, n-1, ..., 1`` (less noise on the top-ranked keywords): the paper's directional-noise
    design with a data-independent direction, so the same CKS20 proof applies with the
    smallest column variance.
    """

    name = "mvg-directional"
    label = "MVG (directional)"
    reference = "Chanyaswad, Dytso, Poor & Mittal, CCS 2018; Canonne, Kamath & Steinke 2020"
    covariance = "directional"
