"""The built-in audit cases: Earth Mover's privacy and the TopicDP matrix mechanisms.

Every case uses public or toy inputs only (GloVe words, small hand-written matrices), never a
corpus. Each is registered under the mechanism's CLI name by
:func:`textdp.audit.builtin.register_builtin_cases`.

* ``earth-movers`` -- two GloVe words ``w_a``, ``w_b`` (bags of N = 1 word) at Euclidean
  distance ``d``; the claim of Theorem 5.1 is ``ε·N·E_d = ε·d``. The pair is picked from a fixed
  public list so that ``ε·d`` is close to :data:`TARGET_LOSS` (a claim the auditor can resolve
  with ~10^5 samples); outputs are decoded against the :data:`EARTH_MOVERS_VOCABULARY` most
  frequent words (a public vocabulary restriction, which is post-processing), events are the
  decoded words.
* ``earth-movers-noise`` -- the same pair, auditing the noisy vectors the release itself decodes
  (Algorithm 1 inside ``privatize_batch``, observed through a recording decoder) with the tails of
  their likelihood-ratio statistic: a much sharper check of the noise (decoding is
  post-processing, so the claim is the same).
* ``earth-movers-2d`` -- Algorithm 1 on GloVe's first two coordinates, where those tails carry
  almost all of ε·d (a halved noise scale is caught; in 50-d it cannot be, see BENCHMARKS.md).
* the word-level mechanisms (``cmp`` ... ``random``) -- :mod:`textdp.audit.word_level`.
* ``topicdp`` / ``topicdp-thesis`` -- 2×2 topic matrices at Frobenius distance Δ (the stated L2
  sensitivity, one entry moved by Δ), released through the registered mechanism's
  ``privatize_batch`` (:func:`topic_release_sampler`; its records' grid-exact ``raw_matrix``); events
  are bins of the projection onto ``a - b``, the likelihood-ratio direction of the Gaussian; the
  claim is the guarantee's (ε, δ).
* ``laplace`` -- 1×2 matrices ``[[1, 0]]`` and ``[[0, 1]]`` (``topicdp-laplace``): each row moves by 2
  in L1, the global sensitivity 2m; events are bins of the Laplace log-likelihood-ratio statistic
  ``Σ |x - b| - |x - a|``, whose extreme atom reaches the full ratio ``e^ε``.
* ``mvg`` / ``mvg-directional`` -- as ``topicdp`` with the MVG claim (ε, δ).
* the matrix cases also audit the privacy curve (reusing the event test's releases) against the
  discrete Gaussian with the least noise (ε, δ) allows, or the discrete Laplace of the rounded L1
  sensitivity over ε (:mod:`textdp.audit.grid_curves`, :mod:`textdp.audit.accountant`), and their
  conformance test checks every released entry against the paper's own law (:func:`topic_conformance`).
* ``syntf`` -- SynTF (ε-DP per document) over the public vocabulary of the ten GloVe words
  :data:`SYNTF_AUDIT_WORDS`: document ``a`` is the one word ``monday``, document ``b`` the nine
  others once each (the pair whose log-normalisers differ most, so the loss of the output
  ``monday`` is ``ε/2 + ln((1 + 9 e^{ε/2}) / (e^{ε/2} + 9))``: 2.62 of the claimed 3 at ε = 3 with
  N = 1; two one-word documents only reach ε/2). Events are the released bags; the claim is ε.

Every case samples through the release path (``privatize_batch`` or the family's release function,
with the real decoder, rounding and post-processing): never ``privatize_ids``, ``core`` or a sampler
(``tests/test_audit_public_path.py`` scans the imports). :func:`textdp.audit.power.exact_law_releases`
draws a topic mechanism's *declared* law instead: it exists for power studies only and no registered
case uses it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .._validation import check_epsilon, check_positive_int, check_probability
from ..errors import ParameterError
from . import accountant
from .claims import exponential_tables, syntf_logp
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, Sampler, exact_profile, simulated_profile
from .grid_curves import gaussian_entry_curve, laplace_pair_curve
from .public_lists import audit_stop_words

if TYPE_CHECKING:
    from ..embeddings import Embeddings

__all__ = [
    "EARTH_MOVERS_VOCABULARY",
    "SYNTF_AUDIT_WORDS",
    "TARGET_LOSS",
    "TOPIC_SAMPLES",
    "WORD_PAIRS",
    "bag_curve",
    "choose_word_pair",
    "custext_plus_document_case",
    "decoded_conformance",
    "earth_movers_case",
    "earth_movers_noise_case",
    "exponential_curve",
    "l1_likelihood_statistic",
    "l1_matrix_case",
    "laplace_case",
    "matrix_case",
    "matrix_pair",
    "metric_likelihood_statistic",
    "metric_noise_curve",
    "mvg_case",
    "randomizer",
    "sample_releases",
    "selected_noise_curve",
    "stop_word_document_case",
    "syntf_case",
    "table_curve",
    "topic_conformance",
    "topic_release_sampler",
    "topicdp_case",
    "word_pair_case",
]

#: Public word pairs the word-level cases choose from (all within GloVe's 5,000 most frequent
#: words), from very close (``monday``/``tuesday``, d = 0.35) to far (``london``/``paris``, 4.03).
WORD_PAIRS: tuple[tuple[str, str], ...] = (
    ("monday", "tuesday"), ("january", "february"), ("two", "three"), ("north", "south"),
    ("he", "she"), ("city", "town"), ("king", "queen"), ("london", "paris"),
)
#: The claimed loss ε·d the word-level cases aim for when they pick a pair.
TARGET_LOSS = 3.0
#: Vocabulary the ``earth-movers`` case decodes to (GloVe's most frequent words).
EARTH_MOVERS_VOCABULARY = 5_000

TOPIC_DEFAULT_EPSILON = 1.0
TOPIC_DEFAULT_DELTA = 1e-4
#: L2 sensitivity used by the matrix cases (any value works: the pair is placed at distance Δ).
TOPIC_SENSITIVITY = 0.1
#: Default releases per input of the topic cases: each is one call of the exact integer-noise
#: sampler through ``privatize_batch`` (~2-7 ms on 2 cores), so 10^4 keeps a case near a minute.
TOPIC_SAMPLES = 10_000
_TOY_MATRIX = np.array([[0.4, 0.3], [0.2, 0.1]])
#: The grid of the topic cases (2^-20, the mechanisms' public default, written here: the audit reads no
#: constant of :mod:`textdp.samplers`).
DEFAULT_GRID = 2.0 ** -20


def grid_units(values: object, grid: float) -> np.ndarray:
    """``rint(values / grid)`` as int64: the audit's own rounding to a public grid (shares no code with the release).

    >>> grid_units(np.array([0.3, -0.26]), 0.25).tolist()
    [1, -1]
    """
    return np.asarray(np.rint(np.asarray(values, dtype=np.float64) / float(grid)), dtype=np.int64)


def released_rows(records: Iterable[Any], index: Mapping[str, int], per_unit: int, name: str) -> np.ndarray:
    """The vocabulary rows of the words each release record names: ``(n, per_unit)`` int64.

    ``records`` are what the registered mechanism's ``privatize_batch`` returned (each record's
    ``content`` is its released words); ``index`` maps a word to its row. A record with another
    number of words is an error of the release (one-line, names the case).
    """
    recs = list(records)
    rows = np.fromiter((index[w] for r in recs for w in r.content), dtype=np.int64)
    if rows.size != len(recs) * per_unit:
        raise ParameterError(f"{name}: the release returned {rows.size} words for {len(recs)} units of "
                             f"{per_unit} word(s) each")
    return rows.reshape(len(recs), per_unit)


def text_batch(
    mech: object, words: object, name: str, *, per_unit: int | None = None, sort: bool = False, **options: object,
) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """``release(ids, rng)``: a ``(B, N)`` batch of vocabulary rows released through ``mech.privatize_batch``.

    Each row of ``ids`` becomes the text of its words (joined by spaces), all ``B`` texts go to the
    registered mechanism's ``privatize_batch`` in one call (one chunk: ``chunk=B``; ``options`` such
    as ``size=N`` pass through), and the released words of each record are mapped back to rows
    (``per_unit`` words each, default ``N``; ``sort``: as a bag, each row sorted). This is the path of
    ``textdp obfuscate`` and ``release()``: the class's ``_privatize`` with its real decoder.
    """
    vocab = list(words)  # type: ignore[call-overload]
    index = {w: i for i, w in enumerate(vocab)}
    batch = mech.privatize_batch  # type: ignore[attr-defined]

    def release(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        arr = np.asarray(ids, dtype=np.int64)
        arr2 = arr.reshape(len(arr), -1)
        texts: dict[bytes, str] = {}
        docs = []
        for row in arr2:
            key = row.tobytes()
            if key not in texts:
                texts[key] = " ".join(vocab[int(j)] for j in row)
            docs.append(texts[key])
        k = arr2.shape[1] if per_unit is None else per_unit
        out = released_rows(batch(docs, seed=rng, chunk=max(1, len(docs)), **options), index, k, name)
        if sort:
            out = np.sort(out, axis=1)
        return out.reshape(arr.shape) if per_unit is None else out

    return release


#: Draws of the claimed law's loss used to estimate its privacy curve (simulated profiles).
CLAIM_SIMULATIONS = 400_000


# -- privacy curves of the claimed laws ------------------------------------------------------------
def metric_noise_curve(noisy: Sampler, vec_a: np.ndarray,
                       vec_b: np.ndarray, epsilon: float, *, transform: np.ndarray | None = None,
                       what: str = "noisy vectors", simulations: int = CLAIM_SIMULATIONS) -> PrivacyCurve:
    """The curve audit of n-dimensional Laplace noise ``∝ exp(−ε ||T z||)`` (``T = I``: Fernandes et al.).

    ``noisy(x, n, rng)`` returns ``n`` noisy vectors ``(n, d)`` of word ``x`` from the mechanism
    under test. The claimed loss is ``ε(||T(z − e_b)|| − ||T(z − e_a)||)`` with the *public* ε; the
    claimed profile is simulated here with numpy (radius ``Gamma(d, 1/ε)`` times a uniform direction,
    mapped by ``T⁻¹``), never with the mechanism's sampler. Grid: ``CURVE_POINTS`` values of ε′ in
    ``[0, 0.75 ε d_T)``.
    """
    eps = check_epsilon(epsilon)
    a64 = np.asarray(vec_a, dtype=np.float64).reshape(-1)
    b64 = np.asarray(vec_b, dtype=np.float64).reshape(-1)
    dim = a64.size
    t = np.eye(dim) if transform is None else np.asarray(transform, dtype=np.float64)
    ta, tb = a64 @ t, b64 @ t
    dist = float(np.linalg.norm(ta - tb))

    def loss(z: np.ndarray) -> np.ndarray:
        tz = np.asarray(z, dtype=np.float64).reshape(len(z), dim) @ t
        return np.asarray(eps * (np.linalg.norm(tz - tb, axis=1) - np.linalg.norm(tz - ta, axis=1)))

    def claimed_loss(n: int, rng: np.random.Generator) -> np.ndarray:
        out = []
        for start in range(0, n, 65_536):  # in the transformed space the claimed noise is spherical
            k = min(65_536, n - start)
            g = rng.standard_normal((k, dim))
            g *= (rng.gamma(float(dim), 1.0 / eps, k) / np.linalg.norm(g, axis=1))[:, None]
            u = g + ta
            out.append(eps * (np.linalg.norm(u - tb, axis=1) - np.linalg.norm(g, axis=1)))
        return np.concatenate(out)

    return PrivacyCurve(
        sample=noisy, loss=loss, claimed=simulated_profile(claimed_loss, simulations),
        grid=tuple(np.linspace(0.0, 0.75 * eps * dist, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * eps * dist:.3g}] vs the claimed "
                     f"Laplace law (epsilon={eps:g}, simulated {simulations:,} times)"),
    )


def exponential_curve(sample: Sampler, vectors: np.ndarray,
                      a: int, b: int, epsilon: float, *, cap: float = math.inf, first: int = 0,
                      what: str = "released words") -> PrivacyCurve:
    """The curve audit of the exponential mechanism ``P(y | x) ∝ exp(−(ε/2) min(||e_x − e_y||, cap))``.

    SanText (``cap = inf``), TEM (``cap = γ``; its Gumbel race has exactly this law) and SanText+
    for two sensitive words (outputs: the sensitive rows ``first, first + 1, ...`` only). The score
    tables of ``a`` and ``b`` are computed here from the public vocabulary and ε; the claimed profile
    is exact. ``sample(x, n, rng)`` returns released word rows from the mechanism under test.
    """
    la, lb, law = exponential_tables(check_epsilon(epsilon), vectors, a, b, cap=cap, first=first)
    return table_curve(sample, la, lb, what=what, law=law)


def table_curve(sample: Sampler, logp_a: np.ndarray, logp_b: np.ndarray, *, what: str = "released words",
                law: str = "the claimed law") -> PrivacyCurve:
    """The curve audit of a claimed discrete law over vocabulary rows, given its two log-probability vectors.

    The loss of output ``o`` is ``logp_a[o] − logp_b[o]`` (an output impossible under both claimed
    laws has loss 0: it is in no event ``{L > ε′}``, ε′ ≥ 0); the claimed profile is exact
    (:func:`~textdp.audit.curve.exact_profile`); the curve reuses the event audit's released rows.
    Used by the exponential mechanisms (:func:`exponential_curve`), ``random`` and ``custext``.

    >>> c = table_curve(lambda x, n, rng: np.full(n, x), np.log([0.6, 0.2, 0.2]), np.log([0.2, 0.6, 0.2]))
    >>> c.loss(np.array([0, 1, 2])).round(4).tolist(), round(float(c.grid[-1]), 4)
    ([1.0986, -1.0986, 0.0], 0.824)
    """
    la = np.asarray(logp_a, dtype=np.float64).reshape(-1)
    lb = np.asarray(logp_b, dtype=np.float64).reshape(-1)
    both = np.isneginf(la)
    if la.shape != lb.shape or np.any(both != np.isneginf(lb)):
        raise ParameterError("the two claimed laws have different supports: the pair is not protected "
                             "from each other (infinite privacy loss)")
    table = np.where(both, 0.0, la) - np.where(both, 0.0, lb)
    top = float(np.max(np.abs(table)))

    def loss(o: np.ndarray) -> np.ndarray:
        return np.asarray(table[np.asarray(o, dtype=np.int64).reshape(-1)])

    return PrivacyCurve(
        sample=sample, loss=loss, claimed=exact_profile(la, lb),
        grid=tuple(np.linspace(0.0, 0.75 * top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * top:.3g}] vs the exact profile of "
                     f"{law}"),
        chunk=16_384,
        reuse_outputs=True,
    )


def bag_curve(sample: Sampler, logp_a: np.ndarray, logp_b: np.ndarray, size: int, *, what: str = "released bags",
              law: str = "the claimed law") -> PrivacyCurve:
    """The curve audit of bags of ``size`` i.i.d. terms of a claimed one-term law (SynTF with N > 1).

    A released bag ``o`` (a row of ``size`` term ids) has the loss ``Σ_i logp_a[o_i] − logp_b[o_i]``
    (the multinomial coefficient is the same under both inputs and cancels). The profile depends
    only on the law of that sum under ``a``: the per-term loss takes a few values, so its ``size``-fold
    convolution is computed exactly here, and ``P_b`` of each value is ``P_a`` times ``e^{−ℓ}``.
    Grid: ``CURVE_POINTS`` values of ε′ in ``[0, 0.75 max ℓ]``.

    >>> c = bag_curve(lambda x, n, rng: np.zeros((n, 2), dtype=int), np.log([0.6, 0.2, 0.2]),
    ...               np.log([0.2, 0.6, 0.2]), 2)
    >>> c.loss(np.array([[0, 0], [0, 1], [2, 2]])).round(4).tolist(), round(float(c.grid[-1]), 4)
    ([2.1972, 0.0, 0.0], 1.6479)
    """
    la = np.asarray(logp_a, dtype=np.float64).reshape(-1)
    lb = np.asarray(logp_b, dtype=np.float64).reshape(-1)
    if la.shape != lb.shape or np.any(np.isneginf(la) != np.isneginf(lb)):
        raise ParameterError("the two claimed laws have different supports: the pair is not protected "
                             "from each other (infinite privacy loss)")
    n_terms = check_positive_int(size, "size")
    live = ~np.isneginf(la)
    table = np.where(live, la, 0.0) - np.where(live, lb, 0.0)
    values, inv = np.unique(np.round(table[live], 12), return_inverse=True)
    step = np.bincount(inv.reshape(-1), weights=np.exp(la[live]), minlength=values.size)
    support, prob = np.zeros(1), np.ones(1)
    for _ in range(n_terms):  # the law of the summed loss under a, one term at a time
        sums = np.round((support[:, None] + values[None, :]).reshape(-1), 12)
        uniq, where = np.unique(sums, return_inverse=True)
        support = np.asarray(uniq, dtype=np.float64)
        prob = np.asarray(np.bincount(where.reshape(-1), weights=(prob[:, None] * step[None, :]).reshape(-1),
                                      minlength=support.size), dtype=np.float64)
    keep = prob > 0
    support, prob = support[keep], prob[keep]
    top = float(np.max(np.abs(support)))

    def loss(o: np.ndarray) -> np.ndarray:
        rows = np.asarray(o, dtype=np.int64).reshape(len(o), -1)
        return np.asarray(table[rows].sum(axis=1))

    return PrivacyCurve(
        sample=sample, loss=loss, claimed=exact_profile(np.log(prob), np.log(prob) - support),
        grid=tuple(np.linspace(0.0, 0.75 * top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * top:.3g}] vs the exact profile of "
                     f"bags of {n_terms} i.i.d. terms of {law}"),
        chunk=16_384,
        reuse_outputs=True,
    )


# -- word-level metric DP -------------------------------------------------------------------------
def choose_word_pair(embeddings: Embeddings, epsilon: float, size: int = 1,
                     pair: tuple[str, str] | None = None, mechanism: str = "audit") -> tuple[tuple[str, str], float]:
    """The audit pair and its Euclidean distance ``d``.

    Default: the pair of :data:`WORD_PAIRS` (present in the vocabulary) whose claim ``ε·N·d`` is
    closest to :data:`TARGET_LOSS` on a log scale.
    """
    eps = check_epsilon(epsilon)
    n_words = check_positive_int(size, "size")
    index = embeddings.index
    vec = embeddings.vectors
    candidates = [pair] if pair is not None else [p for p in WORD_PAIRS if p[0] in index and p[1] in index]
    if not candidates:
        raise ParameterError(f"{mechanism}: none of the audit word pairs is in the vocabulary {embeddings.name}")

    def dist(p: tuple[str, str]) -> float:
        for w in p:
            if w not in index:
                raise ParameterError(f"{mechanism}: audit word {w!r} is not in the vocabulary {embeddings.name}")
        return float(np.linalg.norm(vec[index[p[0]]].astype(np.float64) - vec[index[p[1]]].astype(np.float64)))

    chosen = min(candidates, key=lambda p: abs(math.log(max(eps * n_words * dist(p), 1e-300) / TARGET_LOSS)))
    d = dist(chosen)
    if d == 0.0:
        raise ParameterError(f"{mechanism}: the audit words {chosen} have identical vectors")
    return chosen, d


def _pair_text(chosen: tuple[str, str], d: float, n_words: int, eps: float, name: str, what: str) -> str:
    return (f"bags of N={n_words} x {chosen[0]!r} vs {chosen[1]!r}, E_d = d = {d:.4f} ({name}); "
            f"claim epsilon*N*E_d = {eps:g}*{n_words}*{d:.4f}; events: {what}")


def _word_bags(embeddings: Embeddings, eps: float, n_words: int, pair: tuple[str, str] | None,
               mechanism: str) -> tuple[tuple[str, str], float, np.ndarray, np.ndarray]:
    """The audit pair, its distance, and the two bags of ``n_words`` copies of each word (row ids)."""
    chosen, d = choose_word_pair(embeddings, eps, n_words, pair, mechanism)
    index = embeddings.index
    bag_a = np.full(n_words, index[chosen[0]], dtype=np.int64)
    bag_b = np.full(n_words, index[chosen[1]], dtype=np.int64)
    return chosen, d, bag_a, bag_b


def _copies_sampler(
    batch: Callable[[np.ndarray, np.random.Generator], np.ndarray],
) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """``sample(bag, n, rng)``: ``batch`` run on a ``(n, N)`` batch of ``n`` copies of ``bag``."""

    def sample(bag: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(batch(np.broadcast_to(bag, (n, bag.size)).copy(), rng))

    return sample


def word_pair_case(
        mechanism: str, release: Callable[[np.ndarray, np.random.Generator], np.ndarray], embeddings: Embeddings,
        epsilon: float, pair: tuple[str, str] | None = None, *, size: int = 1, claimed_epsilon: float | None = None,
        observe: Literal["words", "noise"] = "words", chunk: int | None = None, curve: PrivacyCurve | None = None,
        conformance: Conformance | None = None,
) -> AuditCase:
    """An audit case for a word-level metric-DP mechanism: two bags of ``size`` equal words.

    Adding a word-level mechanism to the auditor takes a few lines::

        def factory(epsilon=None, delta=None):
            emb = load_embeddings(vocab_size=5000)
            mech = ...  # the mechanism at epsilon
            return word_pair_case("cmp", lambda ids, rng: mech_batch(ids, rng), emb, epsilon or 10.0)
        register_audit_case("cmp", factory, description="...")

    Parameters
    ----------
    mechanism : str
        Registered name.
    release : callable
        ``release(ids, rng)`` on a ``(B, N)`` batch of vocabulary rows: the decoded rows
        (``observe="words"``) or the ``(B, N, d)`` noisy vectors (``observe="noise"``).
    embeddings : Embeddings
        The public vocabulary (the pair must be in it).
    epsilon : float
        The mechanism's ε per unit of distance.
    pair : (str, str), optional
        The two words (default: :func:`choose_word_pair`).
    size : int
        Bag size N (both bags repeat their word N times, so ``E_d = d``).
    claimed_epsilon : float, optional
        The claim for this pair; default ``ε·N·E_d = ε·N·d`` (Theorem 5.1 of Fernandes et al.).
    observe : {"words", "noise"}
        ``words``: each decoded bag is an event. ``noise``: the noisy vectors of Fernandes et al.'s
        Algorithm 1 before decoding; events are tails of their likelihood-ratio statistic
        (:func:`metric_likelihood_statistic`). The guarantee already holds for them (decoding is
        post-processing) and they resolve far more of the claim, so sampler bugs (a wrong radius
        law, coordinate-wise noise) show at affordable sample sizes.
    chunk : int, optional
        Outputs drawn per call (default 16,384 words, 65,536 noisy vectors).
    curve : PrivacyCurve, optional
        The curve audit (default: none for words; for noise with N = 1, the exact curve of
        n-dimensional Laplace noise, :func:`metric_noise_curve`).
    """
    if observe not in ("words", "noise"):
        raise ParameterError(f"observe must be 'words' or 'noise', got {observe!r}")
    eps = check_epsilon(epsilon)
    n_words = check_positive_int(size, "size")
    chosen, d, bag_a, bag_b = _word_bags(embeddings, eps, n_words, pair, mechanism)
    statistic: Callable[[np.ndarray], np.ndarray] | None = None
    if observe == "words":
        what, events, default_chunk = "decoded words", "discrete", 16_384
    else:
        what = "tails of the likelihood-ratio statistic of the noisy vectors"
        events, default_chunk = "histogram", 65_536
        vec = embeddings.vectors
        statistic = metric_likelihood_statistic(vec[bag_a], vec[bag_b])
        if curve is None and n_words == 1:
            curve = _noise_curve(release, vec, bag_a, bag_b, eps)
    return AuditCase(
        mechanism=mechanism,
        pair=_pair_text(chosen, d, n_words, eps, embeddings.name, what),
        input_a=bag_a,
        input_b=bag_b,
        sample=_copies_sampler(release),
        claimed_epsilon=eps * n_words * d if claimed_epsilon is None else float(claimed_epsilon),
        events=events,
        statistic=statistic,
        chunk=default_chunk if chunk is None else chunk,
        curve=curve,
        conformance=conformance,
    )


def stop_word_document_case(
    mechanism: str,
    release: Callable[[np.ndarray, np.random.Generator], np.ndarray],
    stop: int,
    pair: tuple[int, int],
    logp: tuple[np.ndarray, np.ndarray],
    claimed_epsilon: float,
    *,
    words: str = "",
    law: str = "the claimed law",
) -> AuditCase:
    """Two-word documents ``[stop, a]`` vs ``[stop, b]`` for a mechanism that releases stop words unchanged.

    CusText+ differs from CusText only in its stop-word branch (stop words kept, in place; the
    other words through CusText). Documents of single non-stop words never run that branch, so
    this case puts a public stop word first: the released document must be ``[stop, y]`` with
    ``y`` drawn from the claimed word law ``logp`` (``(ln P(·|a), ln P(·|b))`` over the vocabulary,
    from public parameters only). ``release(ids, rng)`` maps a ``(B, 2)`` batch of rows to the
    released rows. Events: the released documents; the curve and the conformance test see the
    pair ``(position 0 is the stop word, word at position 1)``: a document whose first word is
    not the stop word has probability 0 under both claimed laws (the conformance test rejects
    it; a release that moves a word out of its position leaks it, which the privacy tests see).
    """
    la = np.asarray(logp[0], dtype=np.float64).reshape(-1)
    lb = np.asarray(logp[1], dtype=np.float64).reshape(-1)
    v = la.size
    none = np.full(v, -np.inf)
    table_a, table_b = np.concatenate([la, none]), np.concatenate([lb, none])  # ids >= V: stop word moved
    doc_a = np.array([stop, pair[0]], dtype=np.int64)
    doc_b = np.array([stop, pair[1]], dtype=np.int64)

    def cell(out: np.ndarray) -> np.ndarray:
        o = np.asarray(out, dtype=np.int64).reshape(len(out), 2)
        return np.where(o[:, 0] == stop, o[:, 1], v + o[:, 1])

    sample = _copies_sampler(release)
    pa, pb = np.exp(table_a), np.exp(table_b)
    words_curve = table_curve(sample, table_a, table_b, what=f"{mechanism}'s released documents", law=law)
    return AuditCase(
        mechanism=mechanism,
        pair=(f"documents [stop word, {words or 'a vs b'}]: the stop word is released unchanged, the second word "
              f"through the mechanism; claim {claimed_epsilon:.4g} from public parameters; events: released documents"),
        input_a=doc_a,
        input_b=doc_b,
        sample=sample,
        claimed_epsilon=float(claimed_epsilon),
        events="discrete",
        chunk=16_384,
        curve=dataclasses.replace(words_curve, loss=lambda o: words_curve.loss(cell(o))),  # type: ignore[misc]
        conformance=Conformance(description=f"{mechanism}'s released documents vs {law} (stop word in place)",
                                kind="table", keep=lambda x, out: cell(out),
                                table=lambda x: pa if x is doc_a else pb),
    )


def custext_plus_document_case(name: str, mech: object, pair: tuple[str, str], epsilon: float,
                               embeddings: Embeddings, *, top_k: int | None = None,
                               stop_words: object = "english") -> AuditCase | None:
    """CusText+ on ``[stop, x]`` vs ``[stop, y]`` (:func:`stop_word_document_case`): its own branch runs.

    ``stop`` is the first word of the public stop list in the vocabulary's frequency order (``the``
    for GloVe); the law of the second word is CusText's in the pair's output set
    (:func:`~textdp.audit.claims.custext_logp`, from the public vocabulary, ε and ``top_k``); the
    claim is ε. ``None`` when the vocabulary holds no stop word (the single-word case applies).
    """
    from .claims import CUSTEXT_TOP_K, custext_logp

    stops = audit_stop_words(stop_words)  # type: ignore[arg-type]
    if pair[0] in stops or pair[1] in stops:
        raise ParameterError(f"{name}: stop words are released unchanged (not protected); audit two other words")
    stop = next((i for i, w in enumerate(embeddings.words) if w in stops), None)
    if stop is None:
        return None
    eps = check_epsilon(epsilon)
    k = CUSTEXT_TOP_K if top_k is None else int(top_k)
    a, b = embeddings.index[pair[0]], embeddings.index[pair[1]]
    la, lb = custext_logp(embeddings.vectors, eps, k, (a, b))
    return stop_word_document_case(
        name, text_batch(mech, embeddings.words, name), stop, (a, b), (la, lb), eps,
        words=f"{pair[0]!r} vs {pair[1]!r} ({embeddings.name}; stop word {embeddings.words[stop]!r})",
        law=f"CusText's law in the pair's output set (epsilon={eps:g}, top_k={k}, sets from the vocabulary)")


def metric_likelihood_statistic(a: np.ndarray, b: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``Σ_i ||z_i - b_i|| - ||z_i - a_i||`` over the N positions of a batch ``(B, N, d)``.

    Up to the factor ε this is the log-likelihood ratio of n-dimensional Laplace noise (density
    ``∝ exp(-ε ||z - x||)``), so its tails are the most distinguishing events.

    >>> f = metric_likelihood_statistic(np.array([[0.0, 0.0]]), np.array([[3.0, 0.0]]))
    >>> f(np.array([[[-1.0, 0.0]], [[1.5, 2.0]]])).tolist()
    [3.0, 0.0]
    """
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)

    def statistic(z: np.ndarray) -> np.ndarray:
        z64 = np.asarray(z, dtype=np.float64)
        return np.asarray((np.linalg.norm(z64 - b64, axis=-1) - np.linalg.norm(z64 - a64, axis=-1)).sum(axis=-1))

    return statistic


def _noise_curve(noisy: Callable[[np.ndarray, np.random.Generator], np.ndarray], vectors: np.ndarray,
                 bag_a: np.ndarray, bag_b: np.ndarray, eps: float) -> PrivacyCurve:
    """The curve of Algorithm 1's noise for bags of one word (the pair of the case)."""
    rows = {id(bag_a): bag_a, id(bag_b): bag_b}

    sample = _copies_sampler(noisy)

    def one(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample(rows.get(id(x), np.asarray(x)), n, rng).reshape(n, -1)

    return metric_noise_curve(one, vectors[bag_a[0]], vectors[bag_b[0]], eps, what="Algorithm 1's noisy vectors")


def selected_noise_curve(sample: Sampler, noise_curve: PrivacyCurve, what: str) -> PrivacyCurve:
    """The curve of a noise-then-decode mechanism on its *released words*, against the noise's claimed profile.

    The decoded word is post-processing of the noisy vector, so its privacy profile is at most
    the claimed noise law's (``noise_curve.claimed``: data processing for the hockey-stick
    divergence). The loss of a word has no closed form, so the events are selected on half of
    the released words and evaluated on the other half (``loss=None``,
    :func:`~textdp.audit.curve.curve_test`). This samples what is released: a bug in the decoder
    or in the release (``_privatize``, run by ``privatize_batch``) moves these words, not the noise helper.
    """
    return PrivacyCurve(sample=sample, loss=None, claimed=noise_curve.claimed, grid=noise_curve.grid,
                        description=(f"{what}: delta(eps') at {len(noise_curve.grid)} eps' in "
                                     f"[0, {noise_curve.grid[-1]:.3g}], events selected on half of the released "
                                     "words, vs the claimed noise law's profile (decoding is post-processing)"),
                        chunk=16_384, reuse_outputs=True)


def decoded_conformance(vectors: np.ndarray, epsilon: float, *, root: np.ndarray | None = None,
                        vickrey_t: float | None = None, what: str = "released words") -> Conformance:
    """Conformance of a noise-then-decode release against :mod:`textdp.audit.reference` (two-sample χ²).

    Each input is a vocabulary row or a bag of rows; the reference adds its own n-dimensional
    Laplace (``root``: Mahalanobis) noise to each row's vector and decodes it exactly (Vickrey's
    rule with ``vickrey_t``); bags are sorted as the releases are.
    """
    from . import reference as ref

    v = np.asarray(vectors, dtype=np.float64)
    eps = float(epsilon)

    def refsample(x: object, n: int, rng: np.random.Generator) -> np.ndarray:
        rows = np.asarray(x, dtype=np.int64).reshape(-1)
        flat = np.repeat(rows[None, :], n, axis=0).reshape(-1)
        z = v[flat] + ref.laplace_noise(flat.size, v.shape[1], eps, rng, root)
        if vickrey_t is None:
            out = ref.nearest(z, v)
        else:
            out = ref.vickrey_choice(*ref.two_nearest(z, v), float(vickrey_t), rng)
        if np.ndim(np.asarray(x)) == 0:
            return out
        return np.sort(out.reshape(n, rows.size), axis=1)

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        o = np.asarray(out)
        return o if o.ndim == 1 else o.reshape(len(o), -1)

    law = "Mahalanobis" if root is not None else "n-dimensional Laplace"
    rule = "Vickrey's rule" if vickrey_t is not None else "exact nearest word"
    return Conformance(description=(f"{what} vs the reference law ({law} noise at epsilon={eps:g}, {rule}; "
                                    "textdp.audit.reference)"), kind="reference", keep=keep, reference=refsample)


def _recording(decoder: object) -> object:
    """A decoder that keeps the noisy vectors it is given (the release's own Algorithm 1 output)."""

    class Recording:
        seen: list[np.ndarray]

        def __init__(self) -> None:
            self.seen = []
            self.name = getattr(decoder, "name", "exact")

        def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
            self.seen.append(np.array(queries, dtype=np.float64))
            inner = decoder.decode  # type: ignore[attr-defined]
            return np.asarray(inner(queries) if sources is None else inner(queries, sources=sources))

    return Recording()


#: Earth Mover's decoders whose released words are the exact nearest word (the reference law applies).
EXACT_DECODERS = ("exact", "faiss-exact", "torch")
#: The mechanism parameters ``textdp audit earth-movers --param KEY=VALUE`` takes (each changes the released law
#: or its decoding; ``size`` is the bag size N).
EARTH_MOVERS_PARAMS = ("size", "bag", "decoder", "postprocess", "candidates", "known_source")


def earth_movers_case(epsilon: float | None = None, delta: float | None = None, *,
                      vocab_size: int = EARTH_MOVERS_VOCABULARY,
                      pair: tuple[str, str] | None = None, size: int = 1, **params: object) -> AuditCase:
    """Earth Mover's privacy through the registered class's ``privatize_batch`` (what ``textdp obfuscate`` runs).

    The registered mechanism is built at ε on GloVe 6B 50d restricted to ``vocab_size`` words
    (its real decoder; no stop-word list: the audit's documents are the words themselves) and
    releases documents of ``size`` copies of each audited word as bags of ``size`` (:func:`text_batch`);
    events are the released bags. Default ε = 10, for which the pair is ``monday``/``tuesday`` (claim ε·d ≈ 3.5).
    With ``size=1`` the privacy curve of the released words is audited against the claimed
    noise law's (:func:`selected_noise_curve`). Conformance: the released bags against the
    reference law (:func:`decoded_conformance`). ``params``: the mechanism's own options
    (:data:`EARTH_MOVERS_PARAMS`; ``textdp audit earth-movers --param decoder=torch``); with a decoder that
    is not the exact nearest word (``postprocess="mbr"``, an approximate index) the reference law does not
    apply and only the privacy tests run (decoding is post-processing of the noise).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import get

    if delta not in (None, 0, 0.0):
        raise ParameterError("earth-movers is pure metric DP (delta = 0); --delta does not apply")
    bad = sorted(set(params) - set(EARTH_MOVERS_PARAMS))
    if bad:
        raise ParameterError(f"earth-movers: the audit takes {', '.join(EARTH_MOVERS_PARAMS)} as --param, not "
                             f"{', '.join(bad)} (epsilon with --epsilon; the vocabulary is GloVe's "
                             f"{EARTH_MOVERS_VOCABULARY:,} most frequent words)")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    n_words = check_positive_int(size, "size")
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    vectors = emb.vectors
    opts = {k: _option(v) for k, v in params.items()}
    mech = get("earth-movers", epsilon=eps, embeddings=emb, size=n_words, stop_words=None, **opts).fit()
    exact = opts.get("postprocess") is None and opts.get("decoder", "exact") in EXACT_DECODERS
    privatize = text_batch(mech, emb.words, "earth-movers", sort=True, size=n_words)

    chosen, _ = choose_word_pair(emb, eps, n_words, pair, "earth-movers")
    law = None
    if n_words == 1:
        noise = metric_noise_curve(lambda x, n, rng: np.zeros((n, emb.dim)), vectors[emb.index[chosen[0]]],
                                   vectors[emb.index[chosen[1]]], eps, what="Algorithm 1's noisy vectors")
        law = selected_noise_curve(_copies_sampler(privatize), noise, "earth-movers' released words")
    return word_pair_case("earth-movers", privatize, emb, eps, chosen, size=n_words, curve=law,
                          conformance=decoded_conformance(vectors, eps, what="earth-movers' released bags")
                          if exact else None)


def _option(value: object) -> object:
    """A mechanism option given as ``--param KEY=VALUE`` text: ``true``/``false``/``none`` and numbers parsed."""
    if not isinstance(value, str):
        return value
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def earth_movers_noise_case(epsilon: float | None = None, delta: float | None = None, *,
                            vocab_size: int = EARTH_MOVERS_VOCABULARY,
                            pair: tuple[str, str] | None = None, size: int = 1,
                            dim: int | None = None,
                            noisy: Callable[[np.ndarray, np.ndarray, float, np.random.Generator], np.ndarray]
                            | None = None) -> AuditCase:
    """Earth Mover's privacy, the noisy vectors its release decodes (Algorithm 1 inside the release).

    The registered mechanism releases documents of copies of the audited word through its
    ``privatize_batch`` (:func:`text_batch`, what ``textdp obfuscate`` runs); its decoder is
    wrapped so that the noisy vectors the release actually decodes are observed (a release that
    decodes nothing is observed as its released words' own vectors: no noise). ``dim``: the
    mechanism runs on GloVe's first ``dim`` coordinates (``earth-movers-2d``). The guarantee ε·d
    holds in every dimension, and in low dimension the likelihood-ratio tail events carry almost
    all of it: in 2-d a correct sampler reaches ~0.9 of ε·d and one with half the noise scale ~1.8
    times it at 10^4 samples, while in 50-d no event of probability above ~10^-6 separates the two
    (BENCHMARKS.md). ``noisy(ids, vectors, epsilon, rng)``: a power study's stand-in for the
    release (tests pass deliberately broken samplers); never used by ``textdp audit``.
    Conformance: the radius ``||z − e_x||`` of every noisy vector against ``Gamma(n, 1/ε)``.
    """
    from scipy.stats import gamma as _gamma

    from ..embeddings import Embeddings, load_embeddings
    from ..mechanisms import get

    name = "earth-movers-noise" if dim is None else f"earth-movers-{dim}d"
    if delta not in (None, 0, 0.0):
        raise ParameterError(f"{name} is pure metric DP (delta = 0); --delta does not apply")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    n_words = check_positive_int(size, "size")
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    if dim is not None:
        k = check_positive_int(dim, "dim")
        if k > emb.dim:
            raise ParameterError(f"{name}: dim must be at most {emb.dim}")
        emb = Embeddings(emb.words, np.ascontiguousarray(emb.vectors[:, :k]),
                         name=f"{emb.name}[first {k} coordinates]")
    vectors = emb.vectors
    v64 = vectors.astype(np.float64)
    mech = get("earth-movers", epsilon=eps, embeddings=emb, size=n_words, stop_words=None).fit()
    recorder = _recording(mech.decoder_)  # type: ignore[attr-defined]
    mech.decoder_ = recorder  # type: ignore[attr-defined]  # the audit's own instance: the release decodes through the recorder
    release = text_batch(mech, emb.words, name, size=n_words)

    def noisy_batch(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if noisy is not None:
            return noisy(ids, vectors, eps, rng)
        seen = recorder.seen  # type: ignore[attr-defined]
        seen.clear()
        rows = np.asarray(release(ids, rng))
        z = np.concatenate(seen, axis=0) if seen else v64[rows.reshape(-1)]
        seen.clear()
        if z.shape[0] != ids.size:
            raise ParameterError(f"{name}: the release decoded {z.shape[0]} vectors for {ids.size} words")
        return z.reshape(ids.shape + (vectors.shape[1],))

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        rows = np.asarray(x, dtype=np.int64).reshape(-1)
        z = np.asarray(out, dtype=np.float64).reshape(len(out), rows.size, -1)
        r = np.linalg.norm(z - v64[rows][None, :, :], axis=2).reshape(-1)
        return np.asarray(_gamma.cdf(r, float(vectors.shape[1]), scale=1.0 / eps))

    conformance = Conformance(description=(f"radius of the decoded noisy vectors vs Gamma({vectors.shape[1]}, "
                                           f"1/{eps:g}) (Algorithm 1)"), kind="uniform", keep=keep)
    return word_pair_case(name, noisy_batch, emb, eps, pair, size=n_words, observe="noise", conformance=conformance)


#: The public vocabulary of the ``syntf`` case (all among GloVe's 5,000 most frequent words).
SYNTF_AUDIT_WORDS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                     "february", "march")


def syntf_case(epsilon: float | None = None, delta: float | None = None, *, size: object = 1,
               variant: str = "weights", sampler: Callable[..., np.ndarray] | None = None) -> AuditCase:
    """SynTF through the registered class's ``privatize_batch`` (what ``textdp obfuscate`` runs) over :data:`SYNTF_AUDIT_WORDS`.

    Document ``a`` = ``monday``, document ``b`` = the other nine words once each, given to the
    registered mechanism (built at ε on the ten-word public vocabulary, bags of ``size`` terms);
    the released bags are the events. Default ε = 3 (claimed ε per document). ``sampler`` (the
    signature of :func:`~textdp.mechanisms.syntf.sample_bags`) replaces the release: a power
    study's stand-in, never used by ``textdp audit``. The privacy curve is audited too, against the
    exact one-term law (:func:`~textdp.audit.claims.syntf_logp`, from ε, |V| and the two documents
    only) for ``size=1``, and against the exact law of bags of ``size`` i.i.d. terms at ε/(2N) per
    term otherwise (:func:`bag_curve`). Conformance: χ² against that law (``size=1``), or a two-sample test
    against bags of ``size`` terms drawn from it (the multinomial factorisation). ``variant="composition"``
    (the patent's two-step draw; ``--param variant=composition``): its law is not written again here, so
    only the event test runs (claim ε).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import get

    if delta not in (None, 0, 0.0):
        raise ParameterError("syntf is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(3.0 if epsilon is None else epsilon)
    n_words = check_positive_int(_option(size), "size")
    if variant not in ("weights", "composition"):
        raise ParameterError(f"syntf: variant must be weights or composition, got {variant!r}")
    emb = load_embeddings(vocab_size=EARTH_MOVERS_VOCABULARY).restrict(words=SYNTF_AUDIT_WORDS, label="syntf audit")
    index = emb.index
    doc_a = np.array([index["monday"]], dtype=np.int64)
    doc_b = np.array(sorted(index[w] for w in SYNTF_AUDIT_WORDS if w != "monday"), dtype=np.int64)
    v = emb.vocab_size
    mech = get("syntf", epsilon=eps, embeddings=emb, size=n_words, stop_words=None, variant=variant).fit()
    release = text_batch(mech, emb.words, "syntf", per_unit=n_words, sort=True, size=n_words)

    def sample(doc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        if sampler is not None:
            w = np.ones(doc.size)
            return np.asarray(sampler([doc] * n, [w] * n, v, eps, n_words, rng))
        return release(np.broadcast_to(doc, (n, doc.size)), rng)

    la, lb = syntf_logp(eps, v, doc_a), syntf_logp(eps, v, doc_b)
    if n_words == 1:
        conformance = Conformance(description=f"released terms vs SynTF's one-term law (epsilon={eps:g}, |V|={v})",
                                  kind="table", keep=lambda x, out: np.asarray(out).reshape(-1),
                                  table=lambda x: np.exp(la if x is doc_a else lb))
    else:
        laws = {id(doc_a): np.exp(syntf_logp(eps, v, doc_a, n_words)),
                id(doc_b): np.exp(syntf_logp(eps, v, doc_b, n_words))}

        def refbags(x: object, n: int, rng: np.random.Generator) -> np.ndarray:
            p = laws[id(x)]
            return np.sort(rng.choice(v, size=(n, n_words), p=p / p.sum()), axis=1)

        conformance = Conformance(description=(f"released bags vs {n_words} i.i.d. terms of SynTF's law "
                                               f"(epsilon/(2N) per term, |V|={v})"), kind="reference",
                                  keep=lambda x, out: np.asarray(out).reshape(len(out), -1), reference=refbags)
    composition = variant == "composition"
    return AuditCase(
        mechanism="syntf",
        pair=(f"documents 'monday' vs the other {doc_b.size} words of a {v}-word public vocabulary "
              f"({', '.join(SYNTF_AUDIT_WORDS)}), bags of N={n_words}"
              + (", variant composition (law not written again: event test only)" if composition else "")
              + f"; claim epsilon={eps:g} per document; events: released bags"),
        input_a=doc_a,
        input_b=doc_b,
        sample=sample,
        claimed_epsilon=eps,
        events="discrete",
        chunk=16_384,
        curve=None if composition else
        table_curve(sample, la, lb, what="syntf's released terms",
                    law=f"SynTF's one-term law (epsilon={eps:g}, |V|={v})") if n_words == 1 else
        bag_curve(sample, syntf_logp(eps, v, doc_a, n_words), syntf_logp(eps, v, doc_b, n_words), n_words,
                  what="syntf's released bags", law=f"SynTF's law (epsilon/(2N) per term, |V|={v})"),
        conformance=None if composition else conformance,
    )


# -- TopicDP matrix mechanisms ---------------------------------------------------------------------
def randomizer(mechanism: object) -> Callable[..., np.ndarray]:
    """The mechanism's ``randomize(matrix, seed)`` method."""
    fn = getattr(mechanism, "randomize", None)
    if fn is None:
        raise ParameterError(f"{type(mechanism).__name__} has no randomize method")
    return fn


def topic_release_sampler(mechanism: object) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """``sample(matrix, n, rng)``: ``n`` releases of ``matrix`` through the mechanism's public entry point.

    A registered topics mechanism (:class:`~textdp.topics.family.TopicsMechanism`) releases a batch
    of ``n`` copies of the :class:`~textdp.topics.models.TopicMatrix` with ``privatize_batch`` (its
    grid rounding, exact noise and record), and the audit reads each record's grid-exact
    ``raw_matrix`` (the DP output; ``matrix`` is its post-processing). Any other object (a
    hand-built variant in a test) is called through its ``randomize(matrix, seed=rng)``.
    """
    from ..topics.family import TopicsMechanism
    from ..topics.models import TopicMatrix

    def sample(matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(matrix, dtype=np.float64)
        if isinstance(mechanism, TopicsMechanism):
            keywords = tuple(tuple(f"w{i}_{j}" for j in range(x.shape[1])) for i in range(x.shape[0]))
            unit = TopicMatrix(x, keywords, tuple(range(x.shape[0])))
            recs = mechanism.privatize_batch([unit] * n, seed=rng, chunk=n)
            return np.asarray([r.raw_matrix for r in recs], dtype=np.float64).reshape((n,) + x.shape)
        fn = randomizer(mechanism)
        out = np.empty((n,) + x.shape, dtype=np.float64)
        for k in range(n):
            out[k] = fn(x, seed=rng)
        return out

    return sample


def sample_releases(mechanism: object, matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` independent releases of ``matrix`` through the release path: shape ``(n,) + matrix.shape``.

    See :func:`topic_release_sampler` (the audit's sampler). The exact-law shortcut of earlier
    versions is :func:`textdp.audit.power.exact_law_releases`, for power studies only.
    """
    return topic_release_sampler(mechanism)(matrix, n, rng)


def topic_conformance(grid: float, *, variances: list[float] | None = None, scale: float | None = None,
                      law: str) -> Conformance:
    """Conformance of a topic release: its noise in grid units, every entry, against the paper's law.

    The kept values are ``o/g − rint(x/g)`` of every entry (i.i.d. under the law), mapped by the
    law's CDF: a Gaussian of the column's variance ``variances[j]``, or a Laplace of scale
    ``scale`` (the continuous CDFs; the integer laws differ from them by less than one atom, < 10⁻⁵).
    """
    from scipy.special import ndtr

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        o = np.asarray(out, dtype=np.float64)
        z = np.rint(o / grid) - grid_units(x, grid)[None]
        if variances is not None:
            sd = np.sqrt(np.asarray(variances, dtype=np.float64))[None, None, :]
            return np.asarray(ndtr(z / sd)).reshape(-1)
        assert scale is not None
        t = z / float(scale)
        return np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(t, 0.0))).reshape(-1)

    return Conformance(description=f"noise of every released entry (grid units) vs {law}", kind="uniform", keep=keep)


def matrix_pair(sensitivity: float) -> tuple[np.ndarray, np.ndarray]:
    """Two 2×2 sub-stochastic toy matrices at Frobenius distance ``sensitivity`` (entry (0, 0) moved).

    >>> a, b = matrix_pair(0.1)
    >>> round(float(np.linalg.norm(a - b)), 12)
    0.1
    """
    a = _TOY_MATRIX.copy()
    b = a.copy()
    b[0, 0] = a[0, 0] - sensitivity
    return a, b


def matrix_case(name: str, mechanism: object, *, sensitivity: float, claimed_epsilon: float,
                claimed_delta: float = 0.0, noise_variance: float | None = None,
                grid: float = DEFAULT_GRID, conformance: Conformance | None = None,
                default_samples: int = TOPIC_SAMPLES) -> AuditCase:
    """An audit case for a matrix mechanism with an L2 (Frobenius) sensitivity claim.

    The pair is :func:`matrix_pair` at distance ``sensitivity``; events are the tails of the
    projection onto ``a - b`` (the likelihood-ratio direction of Gaussian noise). ``mechanism``
    is a registered topics mechanism (released through ``privatize_batch``) or a hand-built
    object with ``randomize(matrix, seed=...)`` (:func:`topic_release_sampler`).
    ``noise_variance``: the claimed σ² (grid units of ``grid``) of the discrete Gaussian on the
    differing entry, computed from public parameters by the audit's accountant: the privacy
    curve is then audited too (:func:`~textdp.audit.grid_curves.gaussian_entry_curve`, reusing
    the event test's releases).
    """
    a, b = matrix_pair(sensitivity)
    sample = topic_release_sampler(mechanism)

    return AuditCase(
        mechanism=name,
        pair=f"2x2 toy topic matrices one entry apart, Frobenius distance {sensitivity:g} = the stated L2 sensitivity",
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
        events="histogram",
        chunk=8_192,
        curve=None if noise_variance is None else dataclasses.replace(gaussian_entry_curve(
            sample, a, b, noise_variance, grid, what=f"{name}'s releases",
            law="the discrete Gaussian with the least noise (epsilon, delta) allows"), reuse_outputs=True),
        conformance=conformance,
        default_samples=default_samples,
    )


def l1_matrix_case(name: str, mechanism: object, *, claimed_epsilon: float, noise_scale: float | None = None,
                   grid: float = DEFAULT_GRID, conformance: Conformance | None = None,
                   default_samples: int = TOPIC_SAMPLES) -> AuditCase:
    """An audit case for a 1-row matrix mechanism with the L1 sensitivity 2 of a probability row.

    The pair ``[[1, 0]]`` / ``[[0, 1]]`` moves the row by 2 in L1; events are the tails of
    :func:`l1_likelihood_statistic`, whose extreme atom carries the full ratio of Laplace noise.
    ``noise_scale``: the claimed discrete Laplace scale (grid units of ``grid``), recomputed from
    public parameters by the caller: the privacy curve is then audited too
    (:func:`~textdp.audit.grid_curves.laplace_pair_curve`).
    """
    a = np.array([[1.0, 0.0]])
    b = np.array([[0.0, 1.0]])
    sample = topic_release_sampler(mechanism)

    return AuditCase(
        mechanism=name,
        pair="1x2 topic matrices [[1, 0]] vs [[0, 1]]: L1 distance 2 = the global sensitivity 2m (m = 1)",
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claimed_epsilon,
        events="histogram",
        statistic=l1_likelihood_statistic(a, b),
        chunk=8_192,
        curve=None if noise_scale is None else dataclasses.replace(laplace_pair_curve(
            sample, a, b, noise_scale, grid, what=f"{name}'s releases", law=f"{name}'s claimed discrete Laplace"),
            reuse_outputs=True),
        conformance=conformance,
        default_samples=default_samples,
    )


def _topic_params(epsilon: float | None, delta: float | None) -> tuple[float, float]:
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    dlt = check_probability(TOPIC_DEFAULT_DELTA if delta is None else delta, "delta")
    return eps, dlt


def _grid(grid: object) -> float:
    """The grid of a topic case: the public default, or ``--param grid=G`` (a positive number)."""
    if grid is None:
        return DEFAULT_GRID
    try:
        g = float(grid)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"grid must be a positive number (a power of two, e.g. {DEFAULT_GRID:g}), got "
                             f"{grid!r}") from None
    if not (math.isfinite(g) and g > 0):
        raise ParameterError(f"grid must be a positive number (a power of two, e.g. {DEFAULT_GRID:g}), got {grid!r}")
    return g


def topicdp_case(epsilon: float | None = None, delta: float | None = None, *,
                 calibration: str = "analytic", mechanism: object | None = None, grid: object = None) -> AuditCase:
    """TopicDP (``topicdp`` or ``topicdp-thesis``) through ``privatize_batch`` at the supplied sensitivity Δ = 0.1.

    Privacy claim: (ε, δ), the mechanism's guarantee. The privacy curve is compared with the
    discrete Gaussian of the least noise any (ε, δ) claim allows on the rounded query
    (:func:`~textdp.audit.accountant.analytic_gaussian_sigma` at ``Δ_g = Δ/g + sqrt(mn)``, the audit's
    own accountant). Conformance: every released entry's noise against the paper's law, σ
    derived again by the audit (CKS20 Cor. 13 and Thm. 14; thesis: Sharma 2021 Alg. 2).
    ``mechanism``: sample this object instead (tests pass deliberately broken variants).
    """
    from ..topics.family import topics_mechanism

    eps, dlt = _topic_params(epsilon, delta)
    name = "topicdp" if calibration == "analytic" else "topicdp-thesis"
    if calibration not in ("analytic", "thesis"):
        raise ParameterError(f"unknown calibration {calibration!r}; choose one of: analytic, thesis")
    g = _grid(grid)
    mech = topics_mechanism(name, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, grid=g) \
        if mechanism is None else mechanism
    m, n = _TOY_MATRIX.shape
    d_g = accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n)
    least = accountant.analytic_gaussian_sigma(eps, dlt, d_g)
    if calibration == "analytic":
        paper, law = accountant.cks20_sigma(eps, dlt, d_g), "TopicDP's discrete Gaussian (CKS20 calibration)"
    else:
        paper, law = accountant.thesis_sigma(eps, dlt, d_g, m, n), "TopicDP's discrete Gaussian (thesis Alg. 2)"
    conformance = topic_conformance(g, variances=[paper * paper] * n,
                                    law=f"{law}, sigma {paper:.6g} grid units")
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=dlt,
                       noise_variance=least * least, conformance=conformance, grid=g)


def laplace_case(epsilon: float | None = None, delta: float | None = None, *,
                 mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The Laplace baseline (``topicdp-laplace``, global L1 sensitivity 2m) through ``privatize_batch``.

    The pair ``[[1, 0]]`` / ``[[0, 1]]`` is the extreme one. Privacy curve: the discrete Laplace
    of scale ``(2m/g + mn)/ε`` (the rounded L1 sensitivity over ε, the audit's accountant);
    conformance: the released noise against the stated scale (rounded up to 1/1024 grid unit).
    """
    from ..topics.family import topics_mechanism

    if delta not in (None, 0, 0.0):
        raise ParameterError("laplace is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    g = _grid(grid)
    mech = topics_mechanism("topicdp-laplace", epsilon=eps, grid=g) if mechanism is None else mechanism
    least = float(accountant.rounded_l1(2.0, g, 2) / Fraction(eps))
    stated = float(accountant.laplace_scale(eps, 1, (1, 2), g))
    return l1_matrix_case("laplace", mech, claimed_epsilon=eps, noise_scale=least, grid=g,
                          conformance=topic_conformance(g, scale=stated,
                                                        law=f"the discrete Laplace of scale {stated:.6g} grid units"))


def l1_likelihood_statistic(a: np.ndarray, b: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``Σ |x - b| - |x - a|`` (rounded to 1e-9): the Laplace log-likelihood ratio up to its scale.

    >>> f = l1_likelihood_statistic(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    >>> f(np.array([[[1.3, -0.2]], [[0.5, 0.5]]])).tolist()
    [2.0, 0.0]
    """
    a64 = np.asarray(a, dtype=np.float64).reshape(-1)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1)

    def statistic(x: np.ndarray) -> np.ndarray:
        flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        return np.round((np.abs(flat - b64) - np.abs(flat - a64)).sum(axis=1), 9)

    return statistic


def mvg_case(epsilon: float | None = None, delta: float | None = None, *,
             covariance: str = "isotropic", mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The MVG mechanism (Chanyaswad et al. 2018; ``mvg``, ``mvg-directional``) through ``privatize_batch``.

    Privacy claim (ε, δ): the curve is compared with the least noise (ε, δ) allows (the analytic
    Gaussian, as for TopicDP); MVG adds ~30 times more, so a calibration slip that keeps it private
    passes the privacy test and is found by the conformance test: every released entry against
    the paper's column variances (:func:`~textdp.audit.accountant.mvg_column_variances`).
    """
    from ..topics.family import topics_mechanism

    eps, dlt = _topic_params(epsilon, delta)
    name = "mvg" if covariance == "isotropic" else "mvg-directional"
    g = _grid(grid)
    mech = topics_mechanism(name, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, grid=g) \
        if mechanism is None else mechanism
    m, n = _TOY_MATRIX.shape
    least = accountant.analytic_gaussian_sigma(eps, dlt, accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n))
    paper = accountant.mvg_column_variances(eps, dlt, TOPIC_SENSITIVITY, (m, n), g, covariance)
    conformance = topic_conformance(g, variances=paper,
                                    law=f"the MVG law ({covariance}, Chanyaswad et al. Thm. 3)")
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=dlt,
                       noise_variance=least * least, conformance=conformance, grid=g)


# -- the covered topic release: keywords read off the noisy rows over a public vocabulary -------------------------
#: The public vocabulary of the covered topic cases (toy words; the unit is one topic row over all of them).
COVERED_WORDS: tuple[str, ...] = ("river", "market", "school", "garden")
#: Keywords per topic the covered cases release (the top of each noisy row, in order).
COVERED_KEYWORDS = 2
#: The registered topics mechanism each covered case releases through (case name without ``-covered``).
COVERED_MECHANISMS = {"topicdp": "topicdp", "topicdp-thesis": "topicdp-thesis", "laplace": "topicdp-laplace",
                      "mvg": "mvg", "mvg-directional": "mvg-directional"}
#: The paper's law of each covered case (the audit's own derivation: :mod:`textdp.audit.accountant`).
COVERED_LAWS = {"topicdp": "cks20", "topicdp-thesis": "thesis", "laplace": "laplace", "mvg": "isotropic",
                "mvg-directional": "directional"}


def keyword_codes(records: Iterable[Any], words: tuple[str, ...] = COVERED_WORDS) -> np.ndarray:
    """Each topic release's keywords (its one topic, in rank order) as one integer: ``Σ_p col_p |V|^p``.

    >>> class R:
    ...     keywords = (("market", "river"),)
    >>> keyword_codes([R()]).tolist()  # market = 1 at rank 0, river = 0 at rank 1
    [1]
    """
    index = {w: i for i, w in enumerate(words)}
    v = len(words)
    return np.asarray([sum(index[w] * v ** p for p, w in enumerate(r.keywords[0])) for r in records],
                      dtype=np.int64)


#: what a covered topic law builds: claim, pair, mechanism, claimed curve, the paper's noise (grid units), its name
_CoveredLaw = tuple[float, float, np.ndarray, np.ndarray, object, PrivacyCurve,
                    Callable[[tuple[int, ...], np.random.Generator], np.ndarray], str]


def _covered_laplace(reg: str, epsilon: float | None, delta: float | None, mechanism: object | None, g: float,
                     m: int, n: int, k: int) -> _CoveredLaw:
    """:func:`covered_topic_case`'s Laplace baseline (pure epsilon-DP)."""
    from ..topics.family import topics_mechanism

    if delta not in (None, 0, 0.0):
        raise ParameterError("laplace is pure epsilon-DP (delta = 0); --delta does not apply")
    eps, dlt = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon), 0.0
    a, b = np.array([[0.6, 0.4, 0.0, 0.0]]), np.array([[0.4, 0.6, 0.0, 0.0]])
    mech = topics_mechanism(reg, epsilon=eps, keywords=k, grid=g) if mechanism is None else mechanism
    scale = float(accountant.laplace_scale(eps, m, (m, n), g))
    claimed = laplace_pair_curve(lambda x, n_, rng: x, a, b,
                                 float(accountant.rounded_l1(2.0, g, m * n) / Fraction(eps)), g)

    def noise(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.asarray(rng.laplace(0.0, scale, size))

    law = f"the discrete Laplace of scale {scale:.6g} grid units"
    return eps, dlt, a, b, mech, claimed, noise, law


def _covered_gaussian(reg: str, paper: str, epsilon: float | None, delta: float | None, mechanism: object | None,
                      g: float, m: int, n: int, k: int) -> _CoveredLaw:
    """:func:`covered_topic_case`'s Gaussian mechanisms (the paper's variances, per column)."""
    from ..topics.family import topics_mechanism

    eps, dlt = _topic_params(epsilon, delta)
    a, b = np.array([[0.35, 0.3, 0.2, 0.1]]), np.array([[0.25, 0.3, 0.2, 0.1]])
    mech = topics_mechanism(reg, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, keywords=k, grid=g) \
        if mechanism is None else mechanism
    d_g = accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n)
    least = accountant.analytic_gaussian_sigma(eps, dlt, d_g)
    claimed = gaussian_entry_curve(lambda x, n_, rng: x, a, b, least * least, g)
    if paper == "cks20":
        variances = [accountant.cks20_sigma(eps, dlt, d_g) ** 2] * n
    elif paper == "thesis":
        variances = [accountant.thesis_sigma(eps, dlt, d_g, m, n) ** 2] * n
    else:
        variances = list(accountant.mvg_column_variances(eps, dlt, TOPIC_SENSITIVITY, (m, n), g, paper))
    sd = np.sqrt(np.asarray(variances, dtype=np.float64))

    def noise(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.asarray(rng.standard_normal(size) * sd)

    law = f"{reg}'s Gaussian noise (the paper's variances, per column)"
    return eps, dlt, a, b, mech, claimed, noise, law


def covered_topic_case(kind: str, epsilon: float | None = None, delta: float | None = None, *,
                       mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The covered topic release (``textdp topics``' default): one row over a public vocabulary, keywords from the noise.

    The registered mechanism (:data:`COVERED_MECHANISMS`) is built with ``keywords=2`` and releases,
    through ``privatize_batch``, a :class:`~textdp.topics.models.TopicMatrix` whose one row spans the
    public vocabulary :data:`COVERED_WORDS` (``columns="public"``): each record names the row's two
    largest *noisy* values. The audit samples those keywords (:func:`keyword_codes`; discrete events).
    The pair puts different words on top (``[.35, .3, .2, .1]`` vs ``[.25, .3, .2, .1]`` at the
    stated L2 sensitivity 0.1; the Laplace baseline: ``[.6, .4, 0, 0]`` vs ``[.4, .6, 0, 0]``), so a
    release that ranks by the private row releases a different keyword pair for each input with
    certainty. Claims as the model-column case's; the curve selects events on half of the keywords
    against the claimed noise law's profile (keywords are post-processing of the noisy row); the
    conformance test compares the keywords with the audit's own reference (the paper's noise,
    drawn by numpy and rounded, ranked with ties to the earlier column).
    """
    from ..topics.models import TopicMatrix

    if kind not in COVERED_MECHANISMS:
        raise ParameterError(f"unknown covered topic case {kind!r}; choose one of {', '.join(COVERED_MECHANISMS)}")
    reg, paper = COVERED_MECHANISMS[kind], COVERED_LAWS[kind]
    m, n = 1, len(COVERED_WORDS)
    g = _grid(grid)
    k = COVERED_KEYWORDS
    if paper == "laplace":
        eps, dlt, a, b, mech, claimed, noise, law = _covered_laplace(reg, epsilon, delta, mechanism, g, m, n, k)
    else:
        eps, dlt, a, b, mech, claimed, noise, law = _covered_gaussian(reg, paper, epsilon, delta, mechanism, g, m, n,
                                                                      k)

    def sample(x: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
        unit = TopicMatrix(np.asarray(x, dtype=np.float64), (COVERED_WORDS,), (0,), columns="public")
        recs = mech.privatize_batch([unit] * count, seed=rng, chunk=count)  # type: ignore[attr-defined]
        return keyword_codes(recs)

    def reference(x: object, count: int, rng: np.random.Generator) -> np.ndarray:
        noisy = grid_units(x, g).reshape(-1)[None, :] + np.rint(noise((count, n), rng))
        cols = np.argsort(-noisy, axis=1, kind="stable")[:, :k]
        return np.asarray((cols * (n ** np.arange(k))[None, :]).sum(axis=1), dtype=np.int64)

    curve = PrivacyCurve(sample=sample, loss=None, claimed=claimed.claimed, grid=claimed.grid,
                         description=(f"{kind}-covered's released keywords: delta(eps') at {len(claimed.grid)} eps' "
                                      f"in [0, {claimed.grid[-1]:.3g}], events selected on half of the keywords, vs "
                                      "the claimed noise law's profile (keywords are post-processing)"),
                         chunk=8_192, reuse_outputs=True)
    return AuditCase(
        mechanism=f"{kind}-covered",
        pair=(f"one topic row over the public vocabulary {', '.join(COVERED_WORDS)} (columns='public', "
              f"keywords={k}): {a.tolist()} vs {b.tolist()}; claim ({eps:g}, {dlt:g}); events: released keywords"),
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=eps,
        claimed_delta=dlt,
        events="discrete",
        chunk=8_192,
        curve=curve,
        conformance=Conformance(description=(f"released keywords vs the audit's reference ({law}, ranked by "
                                              "the noisy row)"), kind="reference",
                                keep=lambda x, out: np.asarray(out).reshape(-1), reference=reference),
        default_samples=TOPIC_SAMPLES,
    )
