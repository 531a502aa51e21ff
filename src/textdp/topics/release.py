"""The topics family's release: guarantee text, post-processing, keywords and the :class:`TopicRelease` record.

The noise itself is drawn by :mod:`textdp.topics.noise`; the registered mechanisms of
:mod:`textdp.topics.family` state each release's :class:`TopicGuarantee` (with the sentences
here) and build its record with :func:`make_release`.


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

import numpy as np

from .._validation import check_positive_int
from ..errors import ParameterError
from ..guarantees import Guarantee, ReleaseRecord
from ..guarantees.events import format_charge
from .models import TopicMatrix
from .names import KEYWORD_SOURCES

__all__ = [
    "CKS20",
    "KEYWORD_NOTE",
    "KEYWORD_NOTE_NOISY",
    "KEYWORD_SOURCES",
    "MODEL_NOT_COVERED",
    "RANDOM_DP",
    "ROUNDING_L1",
    "ROUNDING_L2",
    "SENSITIVITY_SOURCES",
    "TopicGuarantee",
    "TopicRelease",
    "covered_guarantee",
    "dp_clause",
    "fmt_delta",
    "grid_text",
    "make_release",
    "noisy_keywords",
    "not_covered",
    "postprocess",
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


MODEL_NOT_COVERED = ("Not covered: which topics and keywords are released (chosen by the non-private model, see "
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


def fmt_delta(delta: float) -> str:
    """``delta`` as a statement writes it (``below 1e-300`` where it underflows)."""
    return f"{delta:.4g}" if delta >= 1e-300 else "below 1e-300"


def grid_text(grid: float) -> str:
    """The power-of-two grid as text: ``grid_text(2**-20) == "2^-20"``."""
    e = math.frexp(grid)[1] - 1
    return f"2^{e}"


def postprocess(matrix: np.ndarray) -> np.ndarray:
    """Clip to [0, 1] and scale rows whose sum exceeds 1 down to sum 1 (a stack: every matrix's rows).

    >>> postprocess(np.array([[0.9, 0.6, -0.2], [0.2, 0.1, 0.0]])).round(3).tolist()
    [[0.6, 0.4, 0.0], [0.2, 0.1, 0.0]]
    """
    out = np.minimum(np.maximum(np.asarray(matrix, dtype=float), 0.0), 1.0)
    return out / np.maximum(out.sum(axis=-1, keepdims=True), 1.0)  # a row with sum <= 1 is divided by 1: unchanged


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
    mechanism_parameters : tuple of (str, object)
        The mechanism class's own parameters (those beyond the family's), stated after the family's ones
        (:meth:`~textdp.topics.family.TopicsMechanism.own_parameters`): a new class's parameter reaches every
        record with no code of its own.

    >>> from textdp.guarantees import Guarantee
    >>> from textdp.mechanisms import ReleaseContext, get
    >>> g = get("topicdp-laplace", epsilon=2.0).guarantee(ReleaseContext(shape=(3, 4)))
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
    #: the release's own ``keyword_note`` (a mechanism that reads its keywords otherwise than as the largest noisy
    #: values of noised rows says how); the family's note by default
    keyword_text: str | None = None
    unit: str = "user"
    reference: str = CKS20
    mechanism_parameters: tuple[tuple[str, object], ...] = ()

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
                ("grid", self.grid), ("grid_text", grid_text(self.grid)), ("noise", self.noise),
                ("keyword_note", self.keyword_text or (KEYWORD_NOTE_NOISY if noisy else KEYWORD_NOTE)),
                ("vocabulary_note", self.vocabulary_note),
            ),
        }

    def __post_init__(self) -> None:
        super().__post_init__()
        family = dict(self.parameters)  # the family's names win: a class parameter spelt the same is stated there
        own = tuple((k, v) for k, v in self.mechanism_parameters if k not in family)
        if own:
            object.__setattr__(self, "parameters", self.parameters + own)


#: What the discretisation costs, stated in every record's ``noise``: it is folded into the sensitivity.
ROUNDING_L2 = ("the discretisation costs no extra delta or epsilon: rounding to the grid adds g*sqrt(mn) to the L2 "
               "sensitivity the noise is calibrated to")
ROUNDING_L1 = "the discretisation costs no extra epsilon: rounding to the grid adds g*mn to the L1 sensitivity"

#: Where a Gaussian mechanism's L2 sensitivity comes from (``--sensitivity``).
SENSITIVITY_SOURCES = ("sampled", "worst-case", "supplied")


def dp_clause(epsilon: float, delta: float, gamma: float | None, source: str = "supplied") -> str:
    """The DP sentence of a Gaussian release: its definition, by where its sensitivity came from."""
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


def not_covered(gamma: float | None, source: str = "supplied") -> str:
    """What a Gaussian release's guarantee does not cover, by where its sensitivity came from."""
    if gamma is not None:
        scale = _SENSITIVITY_NOT_RELEASED
    elif source == "worst-case":
        scale = "The sensitivity sqrt(2m) and the noise scale are public."
    else:
        scale = "The supplied sensitivity and the noise scale derived from it are not part of the release."
    return f"{MODEL_NOT_COVERED} {scale}"


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
        if self.topic_guarantee.keyword_text:
            return self.topic_guarantee.keyword_text
        return KEYWORD_NOTE_NOISY if self.topic_guarantee.keywords_from == "noisy" else KEYWORD_NOTE

    def as_array(self) -> np.ndarray:
        """The post-processed matrix as an array."""
        return np.array(self.matrix, dtype=float)

    def to_record(self) -> dict[str, object]:
        """The release record (the one layout) with the keywords and the grid-exact raw matrix."""
        out = super().to_record()
        out["raw_matrix"] = [list(r) for r in self.raw_matrix]
        out["keywords"] = [list(k) for k in self.keywords]
        return out


def covered_guarantee(guarantee: TopicGuarantee, keywords: int) -> TopicGuarantee:
    """The guarantee of a release whose ``keywords`` per topic are read off the noisy values (all covered).

    ``guarantee`` is the mechanism's guarantee for the whole ``m x V`` rows over the public vocabulary;
    the statement's "Not covered: which topics and keywords ..." becomes what is covered, and why.

    >>> from textdp.mechanisms import ReleaseContext, get
    >>> g = covered_guarantee(get("topicdp-laplace", epsilon=1.0).guarantee(ReleaseContext(shape=(2, 50))), 5)
    >>> g.keywords_from, g.params["keywords_per_topic"], g.params["noised_columns"], "Covered too" in g.statement
    ('noisy', 5, 50, True)
    >>> g.not_covered  # the ledger's sentence ends the statement; it is not something left uncovered
    'nothing else (the parameters, the shape and the public vocabulary are public).'
    """
    if guarantee.keywords_from == "noisy":
        return guarantee
    head, sep, tail = guarantee.statement.partition(MODEL_NOT_COVERED)
    if not sep:  # pragma: no cover - every topics guarantee states the model's choice
        raise ParameterError("this guarantee does not describe a topic-keyword release")
    # the statement ends with the ledger's sentence (Guarantee adds it, and adds it again to the evolved statement):
    # it is not something left uncovered
    tail = tail.replace(format_charge(*guarantee.charged(), guarantee.unit, guarantee.charge_note()), "").strip()
    public = "The sensitivity sqrt(2m) and the noise scale are public."
    rest = (f"Not covered: {tail}" if tail and not tail.startswith(public) else
            "Not covered: nothing else (the parameters, the shape and the public vocabulary are public"
            + ("; so are the sensitivity sqrt(2m) and the noise scale" if tail else "") + f").{tail[len(public):]}")
    covered = _NOISY_COVERED.format(n=keywords, v=guarantee.shape[1])
    return guarantee.evolve(keywords_from="noisy", keywords=keywords, statement=f"{head}{covered} {rest}")


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
        raw_matrix=tuple(map(tuple, np.asarray(raw, dtype=np.float64).tolist())),
        content=tuple(map(tuple, postprocess(raw).tolist())))
