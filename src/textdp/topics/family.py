"""The topics family on the one mechanism base: a topic-keyword matrix in, a noisy matrix out.

Registered names (:func:`textdp.mechanisms.get`): ``topicdp`` (analytic Gaussian calibration),
``topicdp-thesis`` (the thesis calibration), ``topicdp-laplace`` (the Laplace baseline; spelt
once across families, the n-dimensional Laplace noise of Earth Mover's privacy being another
thing), ``mvg`` and ``mvg-directional``. Each is a :class:`~textdp.mechanisms.base.Mechanism`:
parameters from ``__init__``, ``fit`` validates, one batch verb
``privatize_batch([topic_matrix, ...], seed=...)``, one ``guarantee(ReleaseContext(shape=(m, n)))``.

The unit of a batch is a :class:`~textdp.topics.models.TopicMatrix`; its shape ``(m, n)`` is
public (the release's ``context.shape``). The noise calibrations of
:mod:`textdp.topics.mechanisms` (:class:`~textdp.topics.mechanisms.TopicDPGaussian`,
:class:`~textdp.topics.mechanisms.LaplaceBaseline`, :class:`~textdp.topics.mechanisms.MVGMechanism`)
are the cores: :meth:`TopicsMechanism.noise` builds the one for a shape, and its
``randomize(matrix, rng)`` is the pure batch function. A release is a :class:`TopicMatrixRelease`
(one record: ``release: "matrix"``, the post-processed ``matrix``, the grid-exact ``raw_matrix``,
the ``keywords``, the compact guarantee; unit ``user``).

>>> import numpy as np
>>> from textdp.topics.models import TopicMatrix
>>> tm = TopicMatrix(np.array([[0.5, 0.3], [0.2, 0.1]]), (("a", "b"), ("c", "d")), (0, 1))
>>> rel = TopicDPLaplace(epsilon=1.0, seed=1).privatize(tm)
>>> rec = rel.to_record()
>>> rec["release"], rec["mechanism"], rec["unit"], len(rec["matrix"]), rec["keywords"][1]
('matrix', 'topicdp-laplace', 'user', 2, ['c', 'd'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validation import check_epsilon, check_probability
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee, ReleaseRecord, as_parameters
from ..mechanisms.base import Mechanism, ReleaseContext, SeedLike
from ..samplers import DEFAULT_GRID
from .mechanisms import KEYWORD_NOTE, TopicMechanism, build_mechanism, postprocess
from .models import TopicMatrix
from .sensitivity import SampledSensitivity

__all__ = [
    "MVG", "MVGDirectional", "TopicDP", "TopicDPLaplace", "TopicDPThesis", "TopicMatrixRelease", "TopicsMechanism",
]

Sensitivity = float | SampledSensitivity | None


@dataclass(frozen=True)
class TopicMatrixRelease(ReleaseRecord):
    """One released topic-keyword matrix: the post-processed matrix (``content``), the raw noisy one, the keywords."""

    release: str = "matrix"
    content: tuple[tuple[float, ...], ...] = ()
    keywords: tuple[tuple[str, ...], ...] = ()
    raw_matrix: tuple[tuple[float, ...], ...] = ()

    @property
    def matrix(self) -> tuple[tuple[float, ...], ...]:
        """The post-processed matrix (clipped to [0, 1], rows scaled to sum <= 1)."""
        return self.content

    def to_record(self) -> dict[str, Any]:
        out = super().to_record()
        out["raw_matrix"] = [list(r) for r in self.raw_matrix]
        out["keywords"] = [list(k) for k in self.keywords]
        return out


class TopicsMechanism(Mechanism[TopicMatrix, np.ndarray, TopicMatrixRelease]):
    """Base of the topics family (see the module docstring)."""

    family = "topics"
    releases = "matrix"
    chunk_size = 1
    #: the name :func:`textdp.topics.mechanisms.build_mechanism` knows this calibration by
    calibration: ClassVar[str] = ""

    epsilon: float
    delta: float
    sensitivity: Sensitivity
    gamma: float | None
    grid: float

    def _fit(self) -> None:
        self.epsilon_ = check_epsilon(self.epsilon)
        self._check_delta()
        self.noise((1, 1))  # validates the sensitivity, gamma and grid before any matrix is seen

    def _check_delta(self) -> None:
        check_probability(self.delta, "delta")

    def noise(self, shape: tuple[int, int]) -> TopicMechanism:
        """The noise calibration for an ``m x n`` release (a function of the parameters and the public shape)."""
        return build_mechanism(self.calibration, epsilon=self.epsilon, delta=self.delta, m=shape[0],
                               gamma=self.gamma, sensitivity=self.sensitivity, grid=self.grid)

    def guarantee(self, context: ReleaseContext | None = None) -> Guarantee:
        """The guarantee of an ``m x n`` release (``context.shape`` is required: the bound depends on it)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        if ctx.shape is None:
            raise ParameterError("the guarantee depends on the matrix shape: pass ReleaseContext(shape=(m, n))")
        g = self.noise(ctx.shape).guarantee(ctx.shape)
        d = g.to_dict()
        statement = g.statement
        not_covered = statement.split("Not covered: ", 1)[1] if "Not covered: " in statement else KEYWORD_NOTE
        public: dict[str, object] = {k: d[k] for k in ("gamma", "definition", "topics", "keywords_per_topic", "grid", "grid_text",
                                    "noise") if k in d}
        return Guarantee(
            mechanism=self.name, epsilon=g.epsilon, delta=g.delta, unit=g.unit, reference=str(d.get("reference", "")),
            parameters=as_parameters({**public, "keyword_note": KEYWORD_NOTE}), statement=statement,
            not_covered=not_covered,
            composition=("Basic composition over releases: k releases about the same users cost (k*epsilon, "
                         "k*delta)."),
            seeded=ctx.seeded, empty=ctx.empty,
        )

    def _prepare(self, unit: object, uid: str) -> TopicMatrix:
        if not isinstance(unit, TopicMatrix):
            raise ParameterTypeError(f"unit {uid}: a topics mechanism takes a TopicMatrix, got {type(unit).__name__}")
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
                 guarantee: Guarantee, seeded: bool) -> TopicMatrixRelease:
        raw = np.zeros((0, 0)) if output is None else output
        rows = tuple(tuple(float(x) for x in r) for r in (postprocess(raw) if raw.size else raw))
        return TopicMatrixRelease(id=uid, guarantee=guarantee, seeded=seeded, content=rows,
                                  keywords=prepared.keywords,
                                  raw_matrix=tuple(tuple(float(x) for x in r) for r in raw))


class TopicDP(TopicsMechanism):
    """TopicDP: exact discrete Gaussian noise, analytic calibration (Sharma 2021; CKS20)."""

    name = "topicdp"
    calibration = "topicdp"
    reference = "Canonne, Kamath & Steinke 2020; Rubinstein & Alda 2017"

    def __init__(self, *, epsilon: float, delta: float, sensitivity: Sensitivity, gamma: float | None = None,
                 grid: float = DEFAULT_GRID, seed: SeedLike = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.sensitivity = sensitivity
        self.gamma = gamma
        self.grid = grid
        self.seed = seed


class TopicDPThesis(TopicDP):
    """TopicDP with the thesis's per-entry calibration (the stated delta is the proven one)."""

    name = "topicdp-thesis"
    calibration = "topicdp-thesis"


class TopicDPLaplace(TopicsMechanism):
    """The Laplace baseline: exact discrete Laplace noise, global L1 sensitivity ``2m`` (pure ε-DP)."""

    name = "topicdp-laplace"
    calibration = "laplace"
    reference = "Canonne, Kamath & Steinke 2020 (discrete Laplace)"

    def __init__(self, *, epsilon: float, grid: float = DEFAULT_GRID, seed: SeedLike = None) -> None:
        self.epsilon = epsilon
        self.grid = grid
        self.seed = seed
        self.delta = 0.0
        self.sensitivity = None
        self.gamma = None

    def _check_delta(self) -> None:
        """Pure ε-DP: no delta."""


class MVG(TopicsMechanism):
    """The matrix-variate Gaussian mechanism, isotropic covariance (Chanyaswad et al. 2018; proven with CKS20)."""

    name = "mvg"
    calibration = "mvg"
    reference = "Chanyaswad, Dytso, Poor & Mittal, CCS 2018; Canonne, Kamath & Steinke 2020"

    def __init__(self, *, epsilon: float, delta: float, sensitivity: Sensitivity, gamma: float | None = None,
                 grid: float = DEFAULT_GRID, seed: SeedLike = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.sensitivity = sensitivity
        self.gamma = gamma
        self.grid = grid
        self.seed = seed


class MVGDirectional(MVG):
    """The matrix-variate Gaussian mechanism with directional (keyword-rank) precision."""

    name = "mvg-directional"
    calibration = "mvg-directional"
