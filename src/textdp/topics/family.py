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

Which keywords a release names (:mod:`textdp.topics.mechanisms`, "What the guarantees cover"):
a unit built by :func:`~textdp.topics.models.topic_rows` (whole rows over a public vocabulary)
gets the noise on every entry and keeps each topic's ``keywords`` largest *noisy* values: every part
of the release is covered (``keywords_from="noisy"``, what ``textdp topics`` does by default). A unit
built by :func:`~textdp.topics.models.extract_topic_matrix` carries the non-private model's keywords,
released as they are and not covered (``keywords_from="model"``, the thesis's release). With
``keywords_from=None`` (default) the unit decides; naming it makes a mismatched unit an error.

The unit of a batch is a :class:`~textdp.topics.models.TopicMatrix`; its shape ``(m, n)`` is
public (the release's ``context.shape``). The noise calibrations of
:mod:`textdp.topics.mechanisms` (:class:`~textdp.topics.mechanisms.TopicDPGaussian`,
:class:`~textdp.topics.mechanisms.LaplaceBaseline`, :class:`~textdp.topics.mechanisms.MVGMechanism`)
are the cores: :meth:`TopicsMechanism.noise` builds the one for a shape, and its
``randomize(matrix, rng)`` is the pure batch function. A release is a :class:`~textdp.topics.mechanisms.TopicRelease`
(one record: ``release: "matrix"``, the post-processed ``matrix``, the grid-exact ``raw_matrix``,
the ``keywords``, the compact guarantee; unit ``user``).

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

import numpy as np

from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee
from ..mechanisms.base import Mechanism, ReleaseContext, SeedLike
from ..mechanisms.registry import get, names
from ..samplers import DEFAULT_GRID
from .mechanisms import (
    KEYWORD_SOURCES,
    TopicGuarantee,
    TopicMechanism,
    TopicRelease,
    build_mechanism,
    covered_guarantee,
    make_release,
)
from .models import TopicMatrix
from .sensitivity import SampledSensitivity

__all__ = [
    "MVG",
    "MVGDirectional",
    "TopicDP",
    "TopicDPLaplace",
    "TopicDPThesis",
    "TopicsMechanism",
    "topics_mechanism",
]

Sensitivity = float | SampledSensitivity | str | None


class TopicsMechanism(Mechanism[TopicMatrix, np.ndarray, TopicRelease]):
    """Base of the topics family (see the module docstring)."""

    family = "topics"
    releases = "matrix"
    chunk_size = 1

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
        self.epsilon_ = check_epsilon(self.epsilon)
        self._check_delta()
        if self.keywords_from is not None:
            check_choice(self.keywords_from, "keywords_from", KEYWORD_SOURCES)
        if self.keywords is not None:
            check_positive_int(self.keywords, "keywords")
            if self.keywords_from == "model":
                raise ParameterError("keywords= keeps the largest noisy values of whole rows (keywords_from='noisy'); "
                                     "with the model's keywords the matrix is released as it is")
        self.noise((1, 1))  # validates the sensitivity, gamma and grid before any matrix is seen

    def _check_delta(self) -> None:
        if self.delta is None:
            raise ParameterError(f"{self.name} needs delta (an (epsilon, delta) guarantee)")
        check_probability(self.delta, "delta")

    def noise(self, shape: tuple[int, int]) -> TopicMechanism:
        """The noise calibration for an ``m x n`` release (a function of the parameters and the public shape)."""
        return build_mechanism(self.name, epsilon=self.epsilon_, delta=self.delta or 0.0, m=shape[0],
                               gamma=self.gamma, sensitivity=self.sensitivity, grid=self.grid)

    def guarantee(self, context: ReleaseContext | None = None) -> TopicGuarantee:
        """The guarantee of an ``m x n`` release (``context.shape`` is required: the bound depends on it)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        if ctx.shape is None:
            raise ParameterError("the guarantee depends on the matrix shape: pass ReleaseContext(shape=(m, n))")
        g = self.noise(ctx.shape).guarantee(ctx.shape)
        if self.keywords_from == "noisy":  # shape = (m, V): whole rows over the public vocabulary
            g = covered_guarantee(g, min(self.keywords or ctx.shape[1], ctx.shape[1]))
        return g.evolve(seeded=ctx.seeded, empty=ctx.empty, vocabulary_note=self.vocabulary_note)

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

    def _privatize(self, prepared: Sequence[TopicMatrix], context: ReleaseContext,
                   rng: np.random.Generator) -> list[np.ndarray]:
        assert context.shape is not None
        core = self.noise(context.shape)
        return [core.randomize(p.matrix, seed=rng) for p in prepared]

    def _release(self, uid: str, prepared: TopicMatrix, output: np.ndarray | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> TopicRelease:
        assert isinstance(guarantee, TopicGuarantee) and output is not None  # a matrix is never empty
        return make_release(uid, prepared, output, guarantee, seeded, keywords=self.keywords)


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
    reference = "Canonne, Kamath & Steinke 2020; Rubinstein & Alda 2017"


class TopicDPThesis(TopicsMechanism):
    """TopicDP with the thesis's calibration, ``sigma = Delta' sqrt(2 ln(1.25/delta)) mn / epsilon`` (Sharma 2021, Alg. 2).

    The budget is split as ``epsilon/(mn)`` per entry, far noisier than needed since ``Delta``
    already bounds the whole matrix; the thesis's own composition argument would give only
    ``(epsilon, mn delta)``. The release is proven with CKS20 instead: the noise is
    ``rho``-zCDP with ``rho = (epsilon/mn)^2 / (4 ln(1.25/delta))``, and the stated delta is the
    larger of the CKS20 delta at ``epsilon`` and the requested one. Same unit (user) and caveats
    as :class:`TopicDP`.
    """

    name = "topicdp-thesis"
    reference = "Sharma 2021 (thesis calibration); Canonne, Kamath & Steinke 2020"


class TopicDPLaplace(TopicsMechanism):
    """The Laplace baseline: exact discrete Laplace noise, global L1 sensitivity ``2m`` (pure ε-DP).

    ``delta`` is not used (the guarantee's delta is 0); it takes no ``sensitivity`` or ``gamma``.
    """

    name = "topicdp-laplace"
    reference = "Canonne, Kamath & Steinke 2020 (discrete Laplace)"

    def _check_delta(self) -> None:
        if self.sensitivity is not None or self.gamma is not None:
            raise ParameterError("topicdp-laplace has the global L1 sensitivity 2m: it takes no sensitivity or gamma")


class MVG(TopicsMechanism):
    """The matrix-variate Gaussian mechanism with isotropic covariance (Chanyaswad et al., CCS 2018).

    ``Z = Sigma^(1/2) N Psi^(1/2)`` with ``Sigma = I_m`` and equal column precisions spending the
    whole budget ``P`` of :func:`textdp.accounting.gaussian.mvg_precision_budget`: i.i.d. entries
    of variance ``sqrt(mn)/P``. Their Theorem 3 is for continuous noise, so the discretised
    release is proven with CKS20 (``rho = Delta_g^2 / (2 min_j sigma_j^2)``), checked against
    ``delta`` before any noise is drawn.
    """

    name = "mvg"
    reference = "Chanyaswad, Dytso, Poor & Mittal, CCS 2018; Canonne, Kamath & Steinke 2020"


class MVGDirectional(TopicsMechanism):
    """The matrix-variate Gaussian mechanism with directional precision over keyword ranks.

    As :class:`MVG`, but the column precisions are proportional to the public weights
    ``n, n-1, ..., 1`` (less noise on the top-ranked keywords): the paper's directional-noise
    design with a data-independent direction, so the same CKS20 proof applies with the
    smallest column variance.
    """

    name = "mvg-directional"
    reference = "Chanyaswad, Dytso, Poor & Mittal, CCS 2018; Canonne, Kamath & Steinke 2020"
