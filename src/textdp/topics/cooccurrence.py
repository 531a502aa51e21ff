"""Topics from a noisy word co-occurrence matrix: user-level (ε, δ)-DP with a deterministic sensitivity.

The topics family's original mechanisms (:mod:`textdp.topics.family`) add noise to a *fitted* topic
model, so their noise is calibrated to how much one user moves a fit: a sampled sensitivity (random DP)
or the global ``sqrt(2m)``, which drowns the topics (``docs/topics-results.md``). The mechanisms here add
the noise to a statistic of the corpus whose sensitivity is a public clip, and fit the topics to the noisy
statistic, which is post-processing: every part of the release (which topics, their order, their keywords
and values) is covered for every user, with no γ.

:class:`CorpusTopicsMechanism`
    The base: its unit is a :class:`~textdp.topics.models.UserCorpus` over a **public** vocabulary
    (``textdp topics --vocabulary glove:K``); it keeps the first ``words`` columns of that list (GloVe's list
    is in frequency order, so these are its ``words`` most frequent words minus stop words: a public rule),
    and each user contributes through :func:`user_pair_moments`.
:class:`NoisyCooccurrence` (``noisy-cooccurrence``)
    Noise on the sum of per-user clipped co-occurrence distributions, then non-negative matrix
    factorisation (the default of ``textdp topics``).

The per-user statistic
----------------------
For a document with count vector ``x`` over the ``V`` kept words and ``n = sum(x) >= 2`` tokens,
``(x x^T - diag(x)) / (n (n - 1))`` is the distribution of an ordered pair of two distinct token
positions' words (it sums to 1; Arora et al. 2013, Sec. 4, and Anandkumar et al. 2012 use the same
unbiased pair estimator). A user's statistic ``Q_u`` is the mean over their documents with at least two
kept tokens (at most ``max_docs_per_user`` documents: the corpus's contribution bound), and it is scaled
to Frobenius norm at most ``C``: ``c_u Q_u`` with ``c_u = min(1, C / ||Q_u||_F)``. The released
statistic's pre-noise value is ``S = sum_u c_u Q_u``.

**Sensitivity (Lemma).** For add/remove neighbours ``D' = D + {u}``, ``S(D') - S(D) = c_u Q_u``, a
function of ``u``'s documents and the public ``C``, ``V`` and vocabulary only, so
``||S(D') - S(D)||_F <= C`` for every pair of neighbours (a user with no kept document contributes 0).
The ``V^2`` entries of ``S`` are a vector of L2 sensitivity ``C``: no sampling, no γ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from .._validation import check_positive_int
from ..accounting.gaussian import analytic_gaussian_sigma, check_sensitivity, gaussian_delta
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee
from ..guarantees.events import GaussianEvent
from ..mechanisms.base import Mechanism, ReleaseContext
from .family import TopicsMechanism
from .models import UserCorpus
from .noise import GridNoise
from .release import TopicGuarantee, TopicRelease, grid_text, noisy_keywords, postprocess

__all__ = [
    "BALLE_WANG",
    "CorpusTopicsMechanism",
    "NoisyCooccurrence",
    "UserMoments",
    "factorize",
    "low_rank",
    "relevance",
    "user_pair_moments",
]

BALLE_WANG = ("Balle & Wang, 'Improving the Gaussian Mechanism for Differential Privacy: Analytical Calibration "
              "and Optimal Denoising', ICML 2018, Theorem 8")
ARORA = "Arora, Ge, Halpern, Mimno, Moitra, Sontag, Wu & Zhu, 'A Practical Algorithm for Topic Modeling with "\
        "Provable Guarantees', ICML 2013"


class UserMoments:
    """Per-user pair statistics of a corpus over ``V`` public columns, ready to be clipped and summed.

    ``A`` stacks every kept document's row ``x / sqrt(n (n - 1) D_u)`` (``D_u`` the user's kept documents)
    and ``diag[u]`` is ``sum_d x_d / (n_d (n_d - 1) D_u)``, so that user ``u``'s statistic is
    ``Q_u = A_u^T A_u - diag(diag[u])`` (entries summing to 1) and ``norms[u] = ||Q_u||_F`` is computed in the
    small dimension of the user's documents (``||A^T A||_F = ||A A^T||_F``). Users with no document of two
    kept tokens have norm 0 and contribute nothing. PRIVATE: every field describes the corpus.
    """

    def __init__(self, X: sparse.csr_matrix, user_rows: Sequence[np.ndarray]) -> None:
        X = sparse.csr_matrix(X, dtype=np.float64)
        n = np.asarray(X.sum(axis=1)).ravel()
        blocks: list[sparse.csr_matrix] = []
        diags: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        norms = np.zeros(len(user_rows))
        V = X.shape[1]
        for u, rows in enumerate(user_rows):
            rows = np.asarray(rows, dtype=np.int64)
            rows = rows[n[rows] >= 2]
            if rows.size == 0:
                diags.append(np.zeros(V))
                continue
            pairs = n[rows] * (n[rows] - 1.0) * rows.size
            block = sparse.diags(1.0 / np.sqrt(pairs)) @ X[rows]
            d = np.asarray((sparse.diags(1.0 / pairs) @ X[rows]).sum(axis=0)).ravel()
            gram = (block @ block.T).toarray()
            col_sq = np.asarray(block.multiply(block).sum(axis=0)).ravel()  # diagonal of A^T A
            sq = float((gram ** 2).sum() - 2.0 * (d * col_sq).sum() + (d ** 2).sum())
            norms[u] = math.sqrt(max(sq, 0.0))
            blocks.append(sparse.csr_matrix(block))
            diags.append(d)
            owners.append(np.full(rows.size, u, dtype=np.int64))
        self.V = V
        self.A = sparse.vstack(blocks, format="csr") if blocks else sparse.csr_matrix((0, V))
        self.owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        self.diag = np.array(diags).reshape(len(user_rows), V)
        self.norms = norms

    def scales(self, clip: float) -> np.ndarray:
        """``c_u = min(1, C / ||Q_u||_F)`` per user (0-norm users: 1, they add nothing)."""
        with np.errstate(divide="ignore"):
            return np.where(self.norms > clip, clip / np.where(self.norms > 0, self.norms, 1.0), 1.0)

    def clipped_sum(self, clip: float) -> np.ndarray:
        """``S = sum_u c_u Q_u`` (dense ``V x V``, symmetric): the statistic before the noise."""
        c = self.scales(clip)
        B = sparse.diags(np.sqrt(c[self.owner])) @ self.A if self.A.shape[0] else self.A
        S = (B.T @ B).toarray() if B.shape[0] else np.zeros((self.V, self.V))
        S[np.diag_indices(self.V)] -= c @ self.diag
        return S


def user_pair_moments(corpus: UserCorpus, words: int) -> UserMoments:
    """The :class:`UserMoments` of ``corpus`` over its first ``words`` (public) columns.

    >>> c = UserCorpus.from_texts(["gas power gas", "power price", "gas price power"], ["a", "a", "b"],
    ...                           vocabulary=["gas", "power", "price"])
    >>> m = user_pair_moments(c, 3)
    >>> S = m.clipped_sum(10.0)
    >>> round(float(S.sum()), 6), bool(np.allclose(S, S.T))  # two users, each a distribution summing to 1
    (2.0, True)
    """
    if corpus.rule is not None:
        raise ParameterError("these topics mechanisms need a public vocabulary (textdp topics --vocabulary glove:K "
                             "or a word-list FILE): the columns must not come from the private corpus")
    V = min(check_positive_int(words, "words", minimum=2), len(corpus.vocabulary))
    return UserMoments(corpus.X[:, :V], corpus.user_rows)


def gaussian_noise(shape: tuple[int, ...], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """I.i.d. ``N(0, sigma^2)`` of ``shape`` (float64; the continuous Gaussian of Balle & Wang 2018)."""
    return rng.normal(0.0, sigma, size=shape)


def low_rank(M: np.ndarray, rank: int) -> np.ndarray:
    """The best rank-``rank`` approximation of the symmetric ``M`` by its largest eigenvalues, clipped at 0.

    The model's co-occurrence matrix ``E[x1 x2^T] = A R A^T`` has rank ``K`` (the topics; Arora et al. 2013,
    Sec. 2), while the i.i.d. noise spreads evenly over all ``V`` directions: keeping the ``K`` largest
    eigenvalues removes most of the noise (post-processing).

    >>> M = np.outer([1.0, 1.0, 0.0], [1.0, 1.0, 0.0]) + np.diag([0.0, 0.0, 0.01])
    >>> low_rank(M, 1).round(3).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    """
    w, U = np.linalg.eigh(0.5 * (M + M.T))
    top = np.argsort(-w, kind="stable")[:rank]
    return np.maximum((U[:, top] * w[top]) @ U[:, top].T, 0.0)


def factorize(M: np.ndarray, k: int, *, max_iter: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(topic_word, prevalence)`` of ``k`` topics from a non-negative symmetric co-occurrence matrix ``M``.

    Non-negative matrix factorisation ``M ~ W H`` (scikit-learn's coordinate descent, NNDSVD initialisation:
    deterministic given ``M``); topic ``k``'s word distribution is row ``H_k`` normalised, its prevalence
    ``sum(W[:, k]) sum(H_k)`` (its share of the factorised mass); topics in decreasing prevalence.
    Post-processing only.

    >>> M = np.zeros((4, 4)); M[:2, :2] = 1; M[2:, 2:] = 2
    >>> tw, prev = factorize(M, 2)
    >>> tw.round(2).tolist(), prev.round(2).tolist()
    ([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 0.0, 0.0]], [0.67, 0.33])
    """
    import warnings

    from ..errors import require

    decomposition = require("sklearn.decomposition", "topics")
    exceptions = require("sklearn.exceptions", "topics")
    nmf = decomposition.NMF(n_components=k, init="nndsvd", max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():  # max_iter is a public parameter of the function: stopping there is its output
        warnings.simplefilter("ignore", exceptions.ConvergenceWarning)
        W = nmf.fit_transform(np.maximum(M, 0.0))
    H = nmf.components_
    mass = W.sum(axis=0) * H.sum(axis=1)
    rows = H.sum(axis=1, keepdims=True)
    tw = np.divide(H, rows, out=np.full_like(H, 1.0 / H.shape[1]), where=rows > 0)
    total = mass.sum()
    prev = mass / total if total > 0 else np.full(k, 1.0 / k)
    order = np.argsort(-prev, kind="stable")
    return tw[order], prev[order]


def relevance(topic_word: np.ndarray, marginal: np.ndarray, weight: float) -> np.ndarray:
    """Sievert & Shirley's relevance ``weight log p(w|k) + (1 - weight) log(p(w|k) / p(w))`` (LDAvis, 2014).

    ``weight = 1`` ranks by probability; below 1 it favours words specific to the topic over words frequent
    everywhere (the generic words that otherwise head every co-occurrence topic). Post-processing.

    >>> relevance(np.array([[0.5, 0.5]]), np.array([0.9, 0.1]), 0.6).round(3).tolist()
    [[-0.651, 0.228]]
    """
    tiny = 1e-300
    lt = np.log(np.maximum(topic_word, tiny))
    return weight * lt + (1.0 - weight) * (lt - np.log(np.maximum(marginal, tiny)))


class CorpusTopicsMechanism(TopicsMechanism):
    """Base of the topics mechanisms whose unit is the user corpus (noise on a clipped statistic of it).

    Parameters (besides the family's ``epsilon``, ``delta``, ``grid``, ``vocabulary_note``, ``keywords``,
    ``seed``; ``sensitivity`` and ``gamma`` are refused: the sensitivity is the public ``clip``):

    topics : int
        Topics ``K`` fitted to the noisy statistic.
    released_topics : int or None
        Topics ``m`` released (the top ``m`` by the factorisation's prevalence, in that order); all ``K`` by default.
    words : int
        The first ``words`` columns of the public vocabulary are the statistic's columns (GloVe's list is in
        frequency order: its most frequent words).
    clip : float
        ``C``: each user's statistic is scaled to Frobenius norm at most ``C`` (the L2 sensitivity).
    relevance : float
        ``lambda`` in [0, 1] of the keywords' ranking (:func:`relevance`; 1 = by probability).

    The release is a :class:`~textdp.topics.release.TopicRelease` of ``m`` rows over the ``words`` columns
    (rounded to the public grid), each topic's keywords its ``keywords`` largest values: all of it
    post-processing of the noisy statistic.
    """

    takes_sensitivity = False
    takes_corpus = True
    chunk_size = 1

    topics: int = 10
    released_topics: int | None = None
    words: int = 500
    clip: float = 0.02
    relevance: float = 0.6

    def _fit(self) -> None:
        super()._check_delta()
        self._calibrate(self.epsilon, float(self.delta or 0.0))  # epsilon validated once, in the calibration
        if self.sensitivity is not None or self.gamma is not None:
            raise ParameterError(f"{self.name} is calibrated to its public clip C (clip=): it takes no sensitivity "
                                 "or gamma")
        if self.keywords_from not in (None, "noisy"):
            raise ParameterError(f"{self.name} reads every keyword off its noisy factorisation (keywords_from="
                                 "'noisy'); the model's keywords do not apply")
        check_positive_int(self.topics, "topics", minimum=2)
        if self.released_topics is not None and check_positive_int(self.released_topics, "released_topics") > \
                self.topics:
            raise ParameterError(f"released_topics={self.released_topics} is more than topics={self.topics}")
        check_positive_int(self.words, "words", minimum=2)
        if self.keywords is not None:
            check_positive_int(self.keywords, "keywords")
        check_sensitivity(self.clip, "clip")
        if not 0.0 <= float(self.relevance) <= 1.0:
            raise ParameterError(f"relevance must be in [0, 1] (1 ranks keywords by probability), got {self.relevance!r}")

    @property
    def m(self) -> int:
        return self.released_topics or self.topics

    def _prepare(self, unit: object, uid: str) -> UserCorpus:  # type: ignore[override]
        if not isinstance(unit, UserCorpus):
            raise ParameterTypeError(f"unit {uid}: {self.name} takes a UserCorpus (textdp.topics.UserCorpus) over a "
                                     f"public vocabulary, got {type(unit).__name__}")
        if unit.rule is not None:
            raise ParameterError(f"unit {uid}: {self.name} needs a public vocabulary (--vocabulary glove:K or FILE); "
                                 "this corpus builds its columns from the private data")
        if len(unit.vocabulary) < self.topics:
            raise ParameterError(f"unit {uid}: the vocabulary has {len(unit.vocabulary)} words, fewer than the "
                                 f"{self.topics} topics")
        if self.keywords is not None and self.keywords > min(self.words, len(unit.vocabulary)):
            raise ParameterError(f"keywords={self.keywords} is more than the {min(self.words, len(unit.vocabulary))} "
                                 "columns of the statistic; lower it or raise words=")
        return unit

    def release_context(self, prepared: Sequence[UserCorpus], *, size: int | None = None,  # type: ignore[override]
                        size_from_data: bool = False, seeded: bool = False,
                        empty: str = "error") -> ReleaseContext:
        """The public shape ``(m, V)``: ``V`` the kept columns (``words``, or fewer if the public list is shorter)."""
        Mechanism.release_context(self, prepared, size=size, size_from_data=size_from_data,  # type: ignore[misc]
                                  seeded=seeded, empty=empty)
        widths = {min(self.words, len(p.vocabulary)) for p in prepared}
        if len(widths) != 1:
            raise ParameterError(f"one batch releases matrices of one shape, got widths {sorted(widths)}")
        return ReleaseContext(shape=(self.m, widths.pop()), seeded=seeded, empty=empty)

    def _chunk_limit(self, context: ReleaseContext) -> int:
        return 1

    def guarantee(self, context: ReleaseContext | None = None) -> TopicGuarantee:
        """The guarantee of an ``m x V`` release (``context.shape`` is required, as for the family)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        if ctx.shape is None:
            raise ParameterError("the guarantee depends on the matrix shape: pass ReleaseContext(shape=(m, V)), V the "
                                 "public columns kept")
        shape = ctx.shape
        n = min(self.keywords or shape[1], shape[1])
        g = self._stated(shape, n)
        return g.evolve(seeded=ctx.seeded, empty=ctx.empty, vocabulary_note=self.vocabulary_note,
                        mechanism_parameters=self.own_parameters())

    def _stated(self, shape: tuple[int, int], n: int) -> TopicGuarantee:  # type: ignore[override]
        raise NotImplementedError  # pragma: no cover - every registered class supplies it

    def noise(self, shape: tuple[int, int]) -> GridNoise:
        raise ParameterError(f"{self.name} draws its noise on the corpus statistic, not on a topic matrix")

    def topic_word(self, corpus: UserCorpus, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(topic_word K x V, prevalence, marginal)`` from the noisy statistic (the core; topics by prevalence)."""
        raise NotImplementedError  # pragma: no cover

    def _privatize(self, prepared: Sequence[UserCorpus], context: ReleaseContext,  # type: ignore[override]
                   rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per corpus: the top ``m`` topic rows (on the grid) and their keyword scores (:func:`relevance`)."""
        out = []
        for corpus in prepared:
            tw, _, marginal = self.topic_word(corpus, rng)
            rows = np.round(tw[: self.m] / self.grid) * self.grid  # the public grid (post-processing)
            out.append((rows, relevance(tw[: self.m], marginal, float(self.relevance))))
        return out

    def _release(self, uid: str, prepared: UserCorpus,  # type: ignore[override]
                 output: tuple[np.ndarray, np.ndarray] | None, context: ReleaseContext, guarantee: Guarantee,
                 seeded: bool) -> TopicRelease:
        """The record: each topic's keywords (largest scores) with their probabilities, all post-processing."""
        assert isinstance(guarantee, TopicGuarantee) and output is not None and context.shape is not None
        rows, scores = output
        words = prepared.vocabulary[: context.shape[1]]
        n = min(self.keywords or rows.shape[1], rows.shape[1])
        cols = noisy_keywords(scores, n)
        raw = np.take_along_axis(rows, cols, axis=1)
        return TopicRelease(id=uid, guarantee=guarantee, seeded=seeded,
                            keywords=tuple(tuple(words[c] for c in r) for r in cols),
                            raw_matrix=tuple(map(tuple, raw.tolist())),
                            content=tuple(map(tuple, postprocess(raw).tolist())))

    def keyword_text(self) -> str:
        """The release's ``keyword_note``: how its topics and keywords are read off the noisy statistic."""
        return ("Covered: the topics are fitted to the noisy statistic and each topic's keywords are its most "
                f"relevant words (relevance lambda={float(self.relevance):g}) in that fit, listed with their "
                "probabilities: post-processing of the private release.")

    def _covered(self, shape: tuple[int, int], n: int) -> str:
        return (f"Covered: every part of the release -- which {shape[0]} topics, their order, each topic's {n} "
                f"keywords and all values over the {shape[1]} public columns -- is post-processing of the noisy "
                "statistic. Not covered: nothing beyond the public parameters (the vocabulary, its first "
                f"{shape[1]} words, the clip, the shape and the noise scale are public). Floating point: the proof "
                "is for real-valued Gaussian noise; it is drawn in float64 (numpy), and the noisy statistic itself is "
                "never released, only its post-processing rounded to the grid (topicdp's exact discrete sampler is "
                "not used here).")


class NoisyCooccurrence(CorpusTopicsMechanism):
    """Topics from a Gaussian-noised, per-user-clipped word co-occurrence matrix, factorised by NMF.

    The release (what runs): ``S = sum_u c_u Q_u`` (:class:`UserMoments`: each user's co-occurrence
    distribution over the first ``words`` public columns, scaled to Frobenius norm at most ``clip`` = ``C``);
    ``S~ = S + Z`` with ``Z`` i.i.d. ``N(0, sigma^2)`` on all ``V^2`` entries and
    ``sigma = analytic_gaussian_sigma(epsilon, delta, C)``; then post-processing only: ``M = (S~ + S~^T)/2``,
    its best rank-``topics`` approximation clipped at 0 (:func:`low_rank`: the denoising), NMF with ``topics``
    components (:func:`factorize`), topics ordered by prevalence, the top ``released_topics`` rows released
    over the ``V`` columns (rounded to the grid), each topic's keywords its ``keywords`` most relevant words
    (:func:`relevance` with the denoised matrix's word marginal) with their probabilities.

    Calibration (proof). The module docstring's Lemma gives ``||S(D) - S(D')||_F <= C`` for every pair of
    add/remove neighbours, a bound that holds by construction (no sampling: no γ). The Gaussian mechanism
    ``S + N(0, sigma^2 I)`` on a vector of L2 sensitivity ``C`` is ``(epsilon, delta)``-DP iff
    ``Phi(C/(2 sigma) - epsilon sigma / C) - e^epsilon Phi(-C/(2 sigma) - epsilon sigma / C) <= delta``
    (Balle & Wang 2018, Theorem 8); :func:`~textdp.accounting.gaussian.analytic_gaussian_sigma` returns the
    smallest such ``sigma`` (bisection, checked). Symmetrising, clipping, the NMF, the ordering, the rounding
    to the grid and the keyword choice read ``S~`` and public parameters only, so the whole release is
    ``(epsilon, delta)``-DP for every user (post-processing, Dwork & Roth 2014, Prop. 2.1). The composition
    event is the Gaussian with noise multiplier ``sigma / C``.

    Floating point: the proof is for real-valued noise. The noise is numpy's float64 Gaussian (the low-order-bit
    attack on ``x + normal()`` of ``docs/topics-results.md`` concerns releasing the noisy value itself; here only an
    eigendecomposition and NMF of it, rounded to the grid, are released, which is not proven safe either); the
    exact discrete Gaussian of :class:`~textdp.topics.noise.GaussianNoise` would cost about 10% more sigma at
    ``V = 500`` (its zCDP conversion and the rounding of ``V^2`` entries) and is not used.

    Method: Arora et al. (ICML 2013) learn topics from the word co-occurrence matrix (anchor words); NMF of the
    co-occurrence matrix is the symmetric form of the same model (``E[x x^T] = A R A^T``). The per-user clip
    and the Gaussian noise on the co-occurrence statistic follow the moment-perturbation approach of DeCarolis
    et al. (AISTATS 2020) for user-level neighbours.
    """

    name = "noisy-cooccurrence"
    label = "Noisy co-occurrence + NMF"
    reference = f"{BALLE_WANG}; {ARORA}"

    nmf_iter: int = 400

    def _fit(self) -> None:
        super()._fit()
        check_positive_int(self.nmf_iter, "nmf_iter")

    def sigma(self) -> float:
        """The noise's standard deviation (public: a function of ``epsilon``, ``delta`` and ``clip``)."""
        return analytic_gaussian_sigma(self.epsilon_, self.delta_, float(self.clip))

    def noisy_statistic(self, corpus: UserCorpus, rng: np.random.Generator) -> np.ndarray:
        """``S~ = S + Z`` (``V x V``, not symmetrised): the only step that reads the private corpus.

        The release (:meth:`topic_word`, hence ``privatize_batch``) calls this method and post-processes its
        result with :meth:`fit_topics`; ``textdp audit noisy-cooccurrence`` runs ``privatize_batch`` of the
        registered class and records what this method returns (on its own instance, it replaces the
        post-processing :meth:`fit_topics` by a recorder: ``tests/test_audit_topic_moments.py`` checks the release
        path goes through this very function).
        """
        S = user_pair_moments(corpus, self.words).clipped_sum(float(self.clip))
        return S + gaussian_noise(S.shape, self.sigma(), rng)

    def topic_word(self, corpus: UserCorpus, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.fit_topics(self.noisy_statistic(corpus, rng))

    def fit_topics(self, noisy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(topic_word, prevalence, marginal)`` from the noisy statistic: post-processing only (reads no data)."""
        L = low_rank(noisy, self.topics)
        tw, prev = factorize(L, self.topics, max_iter=self.nmf_iter)
        mass = L.sum(axis=1)
        return tw, prev, mass / mass.sum() if mass.sum() > 0 else np.full(mass.size, 1.0 / mass.size)

    def _stated(self, shape: tuple[int, int], n: int) -> TopicGuarantee:  # type: ignore[override]
        eps, delta, C = self.epsilon_, self.delta_, float(self.clip)
        sigma = self.sigma()
        V = shape[1]
        noise = (f"Gaussian N(0, sigma^2) with sigma={sigma:.6g} on each of the {V}x{V} entries of the sum of "
                 f"per-user word co-occurrence distributions over the first {V} public words, each user's scaled "
                 f"to Frobenius norm at most C={C:g} (L2 sensitivity C, deterministic); then symmetrised, rank-"
                 f"{self.topics} eigen-truncation, NMF with {self.topics} topics, rows rounded to the grid "
                 f"g={grid_text(self.grid)}, keywords by relevance (lambda={float(self.relevance):g})")
        statement = (f"({eps:g}, {gaussian_delta(sigma, eps, C):.4g})-differential privacy for user-level neighbours "
                     f"(one user's documents added or removed), for every pair of neighbours: {noise}. The analytic "
                     f"Gaussian calibration (Balle & Wang 2018, Thm. 8) for sensitivity C gives delta <= {delta:g}. "
                     + self._covered(shape, n))
        return TopicGuarantee(mechanism=self.name, epsilon=eps, delta=delta, gamma=None,
                              event=GaussianEvent(sigma / C), shape=shape, grid=self.grid, noise=noise,
                              statement=statement, keywords_from="noisy", keywords=n,
                              keyword_text=self.keyword_text(), reference=f"{BALLE_WANG}; {ARORA}")

