"""Record and replay: TopicDP's declared sensitivity against the real release on neighbouring databases.

A sampled sensitivity (Rubinstein & Aldà, ICML 2017; :class:`~textdp.topics.sensitivity.SensitivitySampler`)
is an order statistic of distances the *sampler* measured; the privacy of a release rests on the
*release* moving by at most that much between neighbouring databases. Nothing else checks that the
two agree: a sampler measuring another function than the one released (a different vocabulary, topic
order, keyword choice or fit), or a calibration reading the wrong number, leaves every privacy-curve
audit of the noise law green, because those audits fix the sensitivity at a public 0.1.

This module checks it the way dp-recorder does for DP programs (record the random draws on one input,
replay them on its neighbour, and compare the outputs): for each of ``pairs`` fresh neighbouring pairs
``(D, D')`` drawn as the sampler draws them (:func:`~textdp.topics.sensitivity.draw_neighbours`), it
runs the **real release path** on both databases -- :func:`~textdp.topics.models.fit_database`, the
released unit (:func:`~textdp.topics.models.extract_topic_matrix`, or
:func:`~textdp.topics.models.topic_rows` over a public vocabulary), and the mechanism's own
``privatize_batch`` -- with **the noise frozen** (the same generator state for both). The noise then
cancels exactly (integer noise on the grid: ``(rint(a/g) + Z) g - (rint(b/g) + Z) g``), and the change
of the released matrix is measured in the norm the mechanism's calibration uses (Frobenius for the
Gaussian and MVG mechanisms, L1 for the Laplace baseline) against the declared bound: ``Δ + g sqrt(mn)``
(L2; the grid rounding adds at most ``g`` per entry) or ``2m + g mn`` (L1). The bound is recomputed
here from the declared ``Δ`` and the public shape and grid, not read from the calibration code.

Verdict: a global bound (a supplied number, ``"worst-case"``, the Laplace ``2m``) must never be
exceeded. A sampled one (a :class:`~textdp.topics.sensitivity.SampledSensitivity`: the ``k``-th
smallest of ``N`` sampled distances) is tested against the sampler itself: if the release moves as the
sampler measured, a fresh pair's change and the ``N`` sampled ones are exchangeable, so the chance that
a fresh pair exceeds the ``k``-th order statistic is ``F̄(Δ) ~ Beta(N - k + 1, k)`` and the count of
exceeding pairs among ``pairs`` is Beta-binomial(pairs, N - k + 1, k) -- a distribution-free null,
sharper than the γ the guarantee states (a Δ halved moved 3 to 4 of 24 fresh pairs past it on a synthetic
corpus and on Enron, which γ = 0.3 still allows). The count is also tested against
the stated γ (Binomial(pairs, γ), reported as ``claim_p_value``), the whole sample of replayed changes
against the sampler's recorded distances (one-sided Mann-Whitney U, ``shift_p_value``: a sampler that
measures a smaller function than the one released shifts every sample, not only the tail), and the
declared Δ must be the sampler's own order statistic of its recorded distances. The three p-values are
held to ``alpha / 3`` each (Bonferroni), so a correct release is flagged with probability at most
``alpha``. A plain number given with a ``gamma`` is tested against γ only, at ``alpha``.

Everything measured here (the distances, the declared Δ) describes the private corpus: a
:class:`ReplayReport` is an audit for a private place, never part of a release.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._rng import make_rng, spawn
from .._validation import check_choice, check_positive_int, check_probability
from ..errors import ParameterError, ParameterTypeError
from ..topics.family import TopicsMechanism
from ..topics.models import TopicMatrix, TopicModel, UserCorpus, extract_topic_matrix, fit_database, topic_rows
from ..topics.names import NEIGHBOURS
from ..topics.sensitivity import SampledSensitivity, draw_neighbours

__all__ = ["THEMES", "ReplayReport", "declared_bound", "release_unit", "replay_audit", "replay_sensitivity",
           "synthetic_corpus"]

#: How the released unit is built from a fit: the model's top ``n`` keywords, or whole rows over a public vocabulary.
COLUMNS = ("model", "public")


@dataclass(frozen=True)
class ReplayReport:
    """The record-and-replay audit of one mechanism on one corpus (PRIVATE: it describes the corpus).

    Attributes
    ----------
    mechanism : str
        The registered name audited.
    shape : (int, int)
        ``(m, n)`` of the released matrix (``n`` is the vocabulary size for whole rows).
    norm : str
        ``"l2"`` (Frobenius) or ``"l1"``: the norm the mechanism's calibration uses.
    declared : float
        The declared sensitivity ``Δ`` (value units, before the grid rounding).
    bound : float
        ``Δ + g sqrt(mn)`` (L2) or ``Δ + g mn`` (L1): what one neighbour may change the released matrix by.
    gamma : float or None
        The random-DP γ of a sampled sensitivity; None for a global bound (no pair may exceed it).
    distances : tuple of float
        The measured change of the released matrix, one per replayed pair.
    exceedances : int
        Pairs whose change exceeds ``bound``.
    p_value : float
        The verdict's p-value: ``P[Beta-binomial(pairs, N - k + 1, k) >= exceedances]`` for a sampled
        sensitivity, ``P[Binomial(pairs, γ) >= exceedances]`` for a number with a γ, 1 or 0 for a global
        bound (exceeded or not).
    claim_p_value : float
        ``P[Binomial(pairs, γ) >= exceedances]`` (γ the stated one); equal to ``p_value`` without a sample.
    shift_p_value : float
        One-sided Mann-Whitney U p-value of "the replayed changes are larger than the sampler's recorded
        distances" (1 without a sample).
    consistent : bool
        The declared Δ is the order statistic of the sampler's recorded distances (True without a sample).
    alpha : float
        The audit's level (family-wise: each of the three p-values of a sampled sensitivity is held to ``alpha/3``).
    passed : bool
        No evidence that the release moves more than declared (and every released keyword list is the top of
        its replayed noisy rows).
    keywords : int or None
        Keywords per topic of a covered release (whole rows, keywords read off the noise); None otherwise.
    keyword_mismatches : int
        Replayed releases whose keywords or values are not the top ``keywords`` of the same noisy rows
        (replayed without ``keywords``, noise frozen): a release that chose them from anything but the
        noise (0 for a correct release).
    """

    mechanism: str
    shape: tuple[int, int]
    norm: str
    declared: float
    bound: float
    gamma: float | None
    distances: tuple[float, ...]
    exceedances: int
    p_value: float
    claim_p_value: float
    shift_p_value: float
    consistent: bool
    alpha: float
    passed: bool
    keywords: int | None = None
    keyword_mismatches: int = 0

    @property
    def pairs(self) -> int:
        """How many neighbouring pairs were replayed."""
        return len(self.distances)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (PRIVATE: for a private report only)."""
        return {"mechanism": self.mechanism, "shape": list(self.shape), "norm": self.norm, "declared": self.declared,
                "bound": self.bound, "gamma": self.gamma, "pairs": self.pairs, "exceedances": self.exceedances,
                "max_distance": max(self.distances), "p_value": self.p_value,
                "claim_p_value": self.claim_p_value, "shift_p_value": self.shift_p_value,
                "consistent": self.consistent, "alpha": self.alpha,
                "keywords": self.keywords, "keyword_mismatches": self.keyword_mismatches,
                "passed": self.passed, "distances": list(self.distances)}

    def summary(self) -> str:
        """One line for a terminal."""
        verdict = "PASS" if self.passed else "FAIL"
        rule = (f"p={self.p_value:.3g} against the sampler's own law, p={self.claim_p_value:.3g} against "
                f"gamma={self.gamma:g}, p={self.shift_p_value:.3g} for a shift from the sampled distances"
                f"{'' if self.consistent else ', and the declared value is not the sampler order statistic'} "
                f"(alpha {self.alpha:g}, {self.alpha / 3:.3g} each)" if self.gamma is not None
                else "none may exceed it (a global bound)")
        return (f"{verdict} {self.mechanism} {self.shape[0]}x{self.shape[1]}: {self.exceedances} of {self.pairs} "
                f"neighbouring pairs moved the release by more than the declared {self.norm} bound {self.bound:.6g} "
                f"(largest {max(self.distances):.6g}); {rule}")


def declared_bound(mechanism: TopicsMechanism, shape: tuple[int, int]) -> tuple[str, float, float, float | None]:
    """``(norm, Δ, bound, γ)``: the sensitivity ``mechanism`` declares for an ``m x n`` release.

    Read from the mechanism's *parameters* (its ``sensitivity`` and ``gamma``, or the class's global
    L1 bound ``2m`` where it takes no sensitivity), and turned into the bound on the grid-rounded
    matrix here (``Δ + g sqrt(mn)`` in L2, ``Δ + g mn`` in L1), independently of the calibration code.

    >>> from textdp.mechanisms import get
    >>> norm, delta, bound, gamma = declared_bound(get("topicdp", epsilon=1.0, delta=1e-5, sensitivity=0.25), (2, 8))
    >>> norm, delta, bound == 0.25 + 2.0**-20 * 4, gamma
    ('l2', 0.25, True, None)
    >>> declared_bound(get("topicdp-laplace", epsilon=1.0), (3, 4))[:2]
    ('l1', 6.0)
    """
    m, n = shape
    g = float(mechanism.grid)
    if not mechanism.takes_sensitivity:  # the global L1 sensitivity of m sub-probability rows
        return "l1", 2.0 * m, 2.0 * m + g * m * n, None
    s, gamma = mechanism.sensitivity, mechanism.gamma
    if isinstance(s, SampledSensitivity):
        delta, gamma = float(s.value), (gamma if gamma is not None else s.gamma)
    elif isinstance(s, str):
        if s != "worst-case":
            raise ParameterError(f"sensitivity {s!r}: give a number, a SampledSensitivity or 'worst-case'")
        delta = math.sqrt(2.0 * m)  # each released row is a sub-probability vector: ||r - r'||_2 <= sqrt(2)
    elif isinstance(s, (int, float)) and not isinstance(s, bool):
        delta = float(s)
    else:
        raise ParameterTypeError(f"{mechanism.name} declares no sensitivity to replay against (got {s!r})")
    return "l2", delta, delta + g * math.sqrt(m * n), (None if gamma is None else float(gamma))


def release_unit(corpus: UserCorpus, model: TopicModel, users: list[int], *, m: int, n: int,
                 columns: str = "model") -> TopicMatrix:
    """The released unit of the database ``users``: what ``textdp topics`` privatizes.

    :func:`~textdp.topics.models.fit_database` (the vocabulary rebuilt by the corpus's rule, or its
    public vocabulary), then the top ``m`` topics by prevalence: each with its top ``n`` keywords
    (``columns="model"``, :func:`~textdp.topics.models.extract_topic_matrix`) or as whole rows over the
    public vocabulary (``"public"``, :func:`~textdp.topics.models.topic_rows`; ``n`` is ignored).
    """
    tw, prev, vocabulary = fit_database(corpus, model, users)
    if columns == "public":
        return topic_rows(tw, prev, vocabulary, m)
    return extract_topic_matrix(tw, prev, vocabulary, m, n)


def _released(mechanism: TopicsMechanism, unit: TopicMatrix, seed: np.random.SeedSequence,
              whole: TopicsMechanism | None = None) -> tuple[np.ndarray, bool]:
    """The DP output (the grid-exact noisy matrix before post-processing) of ``unit``, noise drawn from ``seed``.

    For whole rows the record lists each topic's columns by noisy value (its keywords); they are put
    back in the vocabulary's order, so two databases' outputs are compared column by column. A covered
    release with ``keywords`` (``textdp topics``' default) names only the top of each noisy row: the
    whole rows are then replayed through ``whole`` (the same mechanism without ``keywords``) with the same
    frozen noise, and the record must be their top ``keywords`` (names and values; ties to the earlier
    column). Returns the whole noisy rows and whether the keywords agreed.
    """
    rec = mechanism.privatize_batch([unit], seed=np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key))[0]
    raw = np.asarray(rec.raw_matrix, dtype=np.float64)
    if unit.columns != "public":
        return raw, True
    index = {w: j for j, w in enumerate(unit.keywords[0])}
    if raw.shape[1] != len(index):
        if whole is None:
            raise ParameterError("replaying a covered release with keywords needs its whole rows: pass whole=")
        rows, _ = _released(whole, unit, seed)
        cols = np.argsort(-rows, axis=1, kind="stable")[:, : raw.shape[1]]
        named = tuple(tuple(unit.keywords[i][c] for c in row) for i, row in enumerate(cols))
        agree = named == tuple(tuple(k) for k in rec.keywords) and np.array_equal(
            np.take_along_axis(rows, cols, axis=1), raw)
        return rows, bool(agree)
    out = np.empty_like(raw)
    for i, words in enumerate(rec.keywords):
        out[i, [index[w] for w in words]] = raw[i]
    return out, True


def _whole_rows(mechanism: TopicsMechanism, n_keywords: int | None) -> TopicsMechanism | None:
    """The covered release names the top of each noisy row: the mechanism that replays the whole rows too."""
    if n_keywords is None:
        return None
    from ..topics.family import topics_mechanism

    params = {**mechanism.get_params(), "keywords": None}
    return topics_mechanism(mechanism.name, **params).fit()


def _replay_pair(mechanism: TopicsMechanism, unit_a: TopicMatrix, unit_b: TopicMatrix, noise: np.random.SeedSequence,
                 whole: TopicsMechanism | None, norm: str) -> tuple[float, int]:
    """One neighbouring pair released with the same frozen noise: its distance and its keyword mismatches."""
    out_a, ok_a = _released(mechanism, unit_a, noise, whole)
    if not np.array_equal(out_a, _released(mechanism, unit_a, noise, whole)[0]):
        raise ParameterError("the release does not replay: the same noise seed gave two outputs")
    out_b, ok_b = _released(mechanism, unit_b, noise, whole)
    diff = (out_a - out_b).reshape(-1)
    return float(np.abs(diff).sum() if norm == "l1" else math.sqrt(float(diff @ diff))), int(not ok_a) + int(not ok_b)


def _exceedance_tests(over: int, k: int, gamma: float | None, sampled: SampledSensitivity | None,
                      distances: list[float]) -> tuple[float, float, float, bool]:
    """The p-values of ``over`` exceedances in ``k`` pairs (against the sampler's too), the shift test, consistency."""
    p_value = claim = 0.0 if over else 1.0
    shift, consistent = 1.0, True
    if gamma is not None:
        from scipy.stats import betabinom, binom, mannwhitneyu

        claim = p_value = float(binom.sf(over - 1, k, gamma)) if over else 1.0
        if sampled is not None:  # exchangeable with the sampler's N distances
            a_, b_ = sampled.n_samples - sampled.order_statistic + 1, sampled.order_statistic
            p_value = float(betabinom.sf(over - 1, k, a_, b_)) if over else 1.0
            recorded = np.sort(np.asarray(sampled.samples, dtype=float))
            consistent = (len(recorded) >= sampled.order_statistic
                          and float(recorded[sampled.order_statistic - 1]) == float(sampled.value))
            if len(recorded):
                shift = float(mannwhitneyu(distances, recorded, alternative="greater").pvalue)
    return p_value, claim, shift, consistent


def replay_sensitivity(corpus: UserCorpus, model: TopicModel, mechanism: TopicsMechanism, *, m: int, n: int,
                       columns: str = "model", pairs: int = 24, n_users: int | None = None,
                       neighbours: str | None = None, alpha: float = 0.05,
                       seed: int | np.random.SeedSequence | np.random.Generator | None = None,
                       release: Callable[[UserCorpus, TopicModel, list[int]], TopicMatrix] | None = None,
                       ) -> ReplayReport:
    """Replay ``mechanism``'s release on ``pairs`` fresh neighbouring pairs with frozen noise (module docstring).

    Parameters
    ----------
    corpus, model : UserCorpus, TopicModel
        The corpus and the (deterministic) topic model of the release, as given to the sampler.
    mechanism : TopicsMechanism
        The registered topics mechanism as configured for the release (its ``sensitivity`` is the
        declaration under test; build it without ``keywords=`` for whole rows).
    m, n : int
        Topics and keywords of the released matrix (``n`` unused for ``columns="public"``).
    columns : {"model", "public"}
        The released unit (:func:`release_unit`); ``"public"`` needs a corpus with a public vocabulary.
    pairs : int
        Fresh neighbouring pairs to replay (2 fits each).
    n_users, neighbours : int or None, str or None
        Users per database and the neighbouring relation; default: the sampler's (from a
        :class:`~textdp.topics.sensitivity.SampledSensitivity`), else the corpus's users and ``add-remove``.
    alpha : float
        The audit's false-alarm level (family-wise over its tests).
    seed : int, SeedSequence, Generator or None
        The pairs' and the frozen noise's streams (:func:`textdp._rng.spawn`); fresh OS entropy by default.
        Use a seed independent of the sampler's, or the replay re-measures the sampler's own pairs.
    release : callable or None
        ``release(corpus, model, users) -> TopicMatrix``: the release function to replay (default
        :func:`release_unit` with ``m``, ``n`` and ``columns``); tests pass broken variants.

    Returns
    -------
    ReplayReport
        PRIVATE: the measured distances and the declared Δ describe the corpus.
    """
    if not isinstance(mechanism, TopicsMechanism):
        raise ParameterTypeError(f"mechanism must be a registered topics mechanism, got {type(mechanism).__name__}")
    check_choice(columns, "columns", COLUMNS)
    sampled = mechanism.sensitivity if isinstance(mechanism.sensitivity, SampledSensitivity) else None
    relation = check_choice(neighbours or (sampled.neighbours if sampled else "add-remove"), "neighbours", NEIGHBOURS)
    k = check_positive_int(pairs, "pairs")
    level = check_probability(alpha, "alpha")
    users = check_positive_int(n_users or (sampled.per_db_users if sampled else corpus.n_users), "n_users", 2)
    fn = release or (lambda c, mod, u: release_unit(c, mod, u, m=m, n=n, columns=columns))
    mechanism.fit()
    n_keywords = mechanism.keywords if columns == "public" else None
    whole = _whole_rows(mechanism, n_keywords)
    mismatches = 0
    pair_gen, noise_seq = spawn(make_rng(seed), 2)
    noise_seeds = np.random.SeedSequence(int(noise_seq.integers(0, 2**63))).spawn(k)
    distances: list[float] = []
    shape: tuple[int, int] | None = None
    norm, bound, declared, gamma = "l2", 0.0, 0.0, None
    for i in range(k):
        a, b = draw_neighbours(corpus.n_users, users, relation, pair_gen)
        unit_a, unit_b = fn(corpus, model, a), fn(corpus, model, b)
        if unit_a.shape != unit_b.shape:
            raise ParameterError(f"the release has shape {unit_a.shape} on one database and {unit_b.shape} on its "
                                 "neighbour: its shape is not public")
        if shape is None:
            shape = unit_a.shape
            norm, declared, bound, gamma = declared_bound(mechanism, shape)
        distance, missed = _replay_pair(mechanism, unit_a, unit_b, noise_seeds[i], whole, norm)
        mismatches += missed
        distances.append(distance)
    assert shape is not None
    tol = bound * 1e-12  # float64 rounding of the norm itself
    over = int(sum(d > bound + tol for d in distances))
    p_value, claim, shift, consistent = _exceedance_tests(over, k, gamma, sampled, distances)
    tests = 3 if sampled is not None and gamma is not None else 1  # Bonferroni over the p-values computed
    passed = min(p_value, claim, shift) >= level / tests and consistent and mismatches == 0
    return ReplayReport(mechanism=mechanism.name, shape=shape, norm=norm, declared=declared, bound=bound, gamma=gamma,
                        distances=tuple(distances), exceedances=over, p_value=p_value, claim_p_value=claim,
                        shift_p_value=shift, consistent=bool(consistent), alpha=level, passed=bool(passed),
                        keywords=n_keywords, keyword_mismatches=mismatches)


#: The public word lists of :func:`synthetic_corpus`: four themes of eight words (no corpus text).
THEMES: tuple[tuple[str, ...], ...] = (
    ("gas", "power", "price", "market", "energy", "deal", "trade", "contract"),
    ("game", "team", "coach", "season", "player", "score", "win", "league"),
    ("music", "band", "concert", "guitar", "song", "album", "stage", "tour"),
    ("farm", "apple", "pear", "river", "harvest", "field", "crop", "barn"))


def synthetic_corpus(users: int = 20, docs: int = 3, words: int = 12, seed: int = 11, *,
                     public: bool = False) -> UserCorpus:
    """A public synthetic corpus of ``users`` users (``docs`` documents of ``words`` words each), bundled nowhere.

    Each user favours two of :data:`THEMES`; each document is drawn from the first with probability
    0.7, else the second, and its words uniformly from the theme. Generated from ``seed`` by
    :func:`textdp._rng.make_rng`: public data, so a replay on it may be printed.

    >>> c = synthetic_corpus(users=4, docs=2)
    >>> c.n_users, len(c.vocabulary) <= 32
    (4, True)
    """
    rng = make_rng(seed)
    texts, owners = [], []
    for u in range(check_positive_int(users, "users", 2)):
        fav = rng.choice(len(THEMES), size=2, replace=False)
        for _ in range(check_positive_int(docs, "docs")):
            texts.append(" ".join(THEMES[fav[0] if rng.random() < 0.7 else fav[1]][rng.integers(8)]
                                  for _ in range(check_positive_int(words, "words"))))
            owners.append(f"u{u}")
    vocabulary = sorted({w for theme in THEMES for w in theme}) if public else None  # the themes' words: public
    return UserCorpus.from_texts(texts, owners, min_df=1, max_df=1.0, vocabulary=vocabulary)


def replay_audit(name: str, *, epsilon: float | None = None, delta: float | None = None, gamma: float = 0.3,
                 pairs: int = 24, m: int = 2, n: int = 4, topics: int = 3, alpha: float = 0.05,
                 seed: int | np.random.SeedSequence | np.random.Generator | None = None,
                 keywords_from: str = "noisy",
                 ) -> tuple[ReplayReport, dict[str, object]]:
    """``textdp audit NAME --replay``: the real sampler and the real release on :func:`synthetic_corpus`.

    ``keywords_from="noisy"`` (default, as ``textdp topics``): the covered release -- whole rows over the
    corpus's public vocabulary (the words of :data:`THEMES`), the sampler measuring whole rows
    (``rows=True``), the mechanism built with ``keywords=n``, each replayed record checked to name the top
    ``n`` of its replayed noisy rows. ``"model"`` (``--keywords-from model``): the model's top ``n``
    keywords (the thesis's release).

    A real scikit-learn LDA (``topics`` topics, 3 iterations, seed 0: deterministic, as the sampler
    needs) on the public synthetic corpus; for a mechanism that takes an L2 sensitivity, the sensitivity
    of the ``m x n`` release is sampled by the real :class:`~textdp.topics.sensitivity.SensitivitySampler`
    at ``gamma`` (Rubinstein & Aldà 2017), the registered mechanism is built with it, and
    :func:`replay_sensitivity` replays ``pairs`` fresh neighbouring pairs through its ``privatize_batch``
    with the noise frozen. The Laplace baseline (a global L1 bound, ``2m``) is replayed against it.
    The sampler's and the replay's streams are independent children of ``seed``.

    Returns
    -------
    (ReplayReport, dict)
        The report and the public settings (corpus, model, shape, γ, seed). The corpus is synthetic and
        public, so both may be printed (on a private corpus they would describe it).
    """
    from ..topics import SensitivitySampler, SklearnLDA
    from ..topics.family import needs_sensitivity, topics_mechanism

    check_choice(name, "mechanism", tuple(_topic_names()))
    k = check_positive_int(pairs, "pairs")
    if k > 1000:
        raise ParameterError(f"pairs must be at most 1000 (two LDA fits each), got {k}")
    g = check_probability(gamma, "gamma")
    from .topic_cases import TOPIC_DEFAULT_DELTA, TOPIC_DEFAULT_EPSILON

    eps = TOPIC_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    check_choice(keywords_from, "keywords_from", ("noisy", "model"))
    rows = keywords_from == "noisy"
    corpus = synthetic_corpus(public=rows)
    model = SklearnLDA(n_topics=check_positive_int(topics, "topics"), max_iter=3, seed=0)
    sampler_gen, replay_gen = spawn(make_rng(seed), 2)
    settings: dict[str, object] = {
        "corpus": (f"synthetic (textdp.audit.replay.synthetic_corpus: {corpus.n_users} users x 3 documents of 12 "
                   f"words over {len(THEMES)} public themes; bundled nowhere)"),
        "model": f"scikit-learn LDA, {topics} topics, 3 iterations, seed 0", "shape": [m, n],
        "epsilon": eps, "seeded": seed is not None, "keywords_from": keywords_from,
        "released": (f"whole rows over the public vocabulary ({len(corpus.vocabulary)} words), the top {n} noisy values "
                     "named (the covered default of textdp topics)" if rows else f"the model's top {n} keywords")}
    size = (m, len(corpus.vocabulary)) if rows else (m, n)
    kw = {"keywords": n} if rows else {}
    if needs_sensitivity(name):
        sens = SensitivitySampler(corpus=corpus, model=model, sizes=[size], rows=rows).sample(
            g, seed=sampler_gen)[size]
        dlt = TOPIC_DEFAULT_DELTA if delta is None else float(delta)
        mech = topics_mechanism(name, epsilon=eps, delta=dlt, sensitivity=sens, **kw)
        k_th = sens.order_statistic
        nth = f"{k_th}{'th' if 10 <= k_th % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k_th % 10, 'th')}"
        settings.update(delta=dlt, gamma=g, sensitivity=(f"sampled: the {nth} smallest of {sens.n_samples} "
                                                         "neighbouring-pair distances"))
    else:
        if delta is not None:
            raise ParameterError(f"{name} is pure epsilon-DP (a global L1 bound): drop --delta")
        mech = topics_mechanism(name, epsilon=eps, **kw)
        settings["sensitivity"] = "the global L1 bound 2m (each released row is a sub-probability vector)"
    report = replay_sensitivity(corpus, model, mech, m=m, n=n, pairs=k, alpha=alpha, seed=replay_gen,
                                columns="public" if rows else "model")
    return report, settings


def _topic_names() -> tuple[str, ...]:
    from ..mechanisms import names

    return tuple(names("topics"))
