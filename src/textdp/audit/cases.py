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
* ``earth-movers-noise`` -- the same pair, auditing Algorithm 1's noisy vectors
  (``noisy_vectors``) before decoding with the tails of their likelihood-ratio statistic: a much
  sharper check of the noise sampler (decoding is post-processing, so the claim is the same).
* ``earth-movers-2d`` -- Algorithm 1 on GloVe's first two coordinates, where those tails carry
  almost all of ε·d (a halved noise scale is caught; in 50-d it cannot be, see BENCHMARKS.md).
* the word-level mechanisms (``cmp`` ... ``random``) -- :mod:`textdp.audit.word_level`.
* ``topicdp`` / ``topicdp-thesis`` -- 2×2 topic matrices at Frobenius distance Δ (the stated L2
  sensitivity, one entry moved by Δ); events are bins of the projection onto ``a - b``, the
  likelihood-ratio direction of the Gaussian; the claim is (ε, δ) (thesis: (ε, m·n·δ)).
* ``laplace`` -- 1×2 matrices ``[[1, 0]]`` and ``[[0, 1]]``: each row moves by 2 in L1, the
  global sensitivity 2m; events are bins of the Laplace log-likelihood-ratio statistic
  ``Σ |x - b| - |x - a|``, whose extreme atom reaches the full ratio ``e^ε``.
* ``mvg`` / ``mvg-directional`` -- as ``topicdp`` with the MVG claim (ε, δ).
* the matrix cases also audit the privacy curve against their claimed discrete Gaussian / Laplace
  law, its parameter recomputed from public parameters (:mod:`textdp.audit.grid_curves`,
  :mod:`textdp.audit.claims`).
* ``syntf`` -- SynTF (ε-DP per document) over the public vocabulary of the ten GloVe words
  :data:`SYNTF_AUDIT_WORDS`: document ``a`` is the one word ``monday``, document ``b`` the nine
  others once each (the pair whose log-normalisers differ most, so the loss of the output
  ``monday`` is ``ε/2 + ln((1 + 9 e^{ε/2}) / (e^{ε/2} + 9))``: 2.62 of the claimed 3 at ε = 3 with
  N = 1; two one-word documents only reach ε/2). Events are the released bags; the claim is ε.

The TopicDP classes are called through their public ``randomize``
one release at a time (:func:`sample_releases`), unless a class offers ``randomize_batch``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np

from .._validation import check_epsilon, check_positive_int, check_probability
from ..errors import ParameterError
from ..samplers import DEFAULT_GRID, discrete_gaussian, discrete_laplace, snap_to_grid
from .claims import laplace_grid_scale, log_normalize, mvg_grid_variances, syntf_logp, topicdp_grid_variance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, Sampler, exact_profile, simulated_profile
from .grid_curves import gaussian_entry_curve, laplace_pair_curve

if TYPE_CHECKING:
    from ..embeddings import Embeddings

__all__ = [
    "EARTH_MOVERS_VOCABULARY",
    "SYNTF_AUDIT_WORDS",
    "TARGET_LOSS",
    "WORD_PAIRS",
    "choose_word_pair",
    "earth_movers_case",
    "earth_movers_noise_case",
    "exponential_curve",
    "grid_releases",
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
    "syntf_case",
    "table_curve",
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
_TOY_MATRIX = np.array([[0.4, 0.3], [0.2, 0.1]])


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
    eps = check_epsilon(epsilon)
    v = np.asarray(vectors, dtype=np.float64)

    def logp(x: int) -> np.ndarray:
        scores = -0.5 * eps * np.minimum(np.linalg.norm(v - v[x], axis=1), cap)
        scores[:first] = -np.inf
        return log_normalize(scores)

    law = f"the claimed score table (epsilon={eps:g}" + (f", cap {cap:.4g})" if math.isfinite(cap) else ")")
    return table_curve(sample, logp(a), logp(b), what=what, law=law)


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
    mechanism: str,
    release: Callable[[np.ndarray, np.random.Generator], np.ndarray],
    embeddings: Embeddings,
    epsilon: float,
    pair: tuple[str, str] | None = None,
    *,
    size: int = 1,
    claimed_epsilon: float | None = None,
    observe: Literal["words", "noise"] = "words",
    chunk: int | None = None,
    curve: PrivacyCurve | None = None,
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
    )


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


def earth_movers_case(epsilon: float | None = None, delta: float | None = None, *,
                      vocab_size: int = EARTH_MOVERS_VOCABULARY,
                      pair: tuple[str, str] | None = None, size: int = 1) -> AuditCase:
    """Earth Mover's privacy end to end (``privatize_ids``: Algorithms 1–2) on GloVe 6B 50d.

    Events are the decoded bags. Default ε = 10, for which the pair is ``monday``/``tuesday``
    (claim ε·d ≈ 3.5).
    """
    from ..embeddings import ExactDecoder, load_embeddings
    from ..mechanisms import privatize_ids

    if delta not in (None, 0, 0.0):
        raise ParameterError("earth-movers is pure metric DP (delta = 0); --delta does not apply")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    vectors = emb.vectors
    decoder = ExactDecoder(vectors)

    def privatize(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return privatize_ids(ids, vectors, eps, rng, decoder)

    chosen, _ = choose_word_pair(emb, eps, size, pair, "earth-movers")
    law = None
    if size == 1:
        from ..mechanisms import earth_movers as _em  # looked up at each call: tests patch its noise

        def noisy(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            return np.asarray(_em.noisy_vectors(np.full(n, int(np.asarray(x).reshape(-1)[0])), vectors, eps, rng))

        law = metric_noise_curve(noisy, vectors[emb.index[chosen[0]]], vectors[emb.index[chosen[1]]], eps,
                                 what="Algorithm 1's noisy vectors (noisy_vectors)")
    return word_pair_case("earth-movers", privatize, emb, eps, chosen, size=size, curve=law)


def earth_movers_noise_case(epsilon: float | None = None, delta: float | None = None, *,
                            vocab_size: int = EARTH_MOVERS_VOCABULARY,
                            pair: tuple[str, str] | None = None, size: int = 1,
                            dim: int | None = None,
                            noisy: Callable[[np.ndarray, np.ndarray, float, np.random.Generator], np.ndarray]
                            | None = None) -> AuditCase:
    """Earth Mover's privacy, Algorithm 1 only (``noisy_vectors``): the noise sampler itself.

    ``dim``: run Algorithm 1 on the public embedding made of GloVe's first ``dim`` coordinates
    (``earth-movers-2d``). The guarantee ε·d holds in every dimension, and in low dimension the
    likelihood-ratio tail events carry almost all of it: in 2-d a correct sampler reaches ~0.9 of
    ε·d and one with half the noise scale ~1.8 times it at 10^4 samples, while in 50-d no event
    of probability above ~10^-6 separates the two (the loss ε·(||z - b|| - ||z - a||) concentrates
    at ~ε·d/sqrt(50); BENCHMARKS.md). ``noisy(ids, vectors, epsilon, rng)`` replaces
    :func:`~textdp.mechanisms.noisy_vectors` (tests pass deliberately broken samplers).
    """
    from ..embeddings import Embeddings, load_embeddings

    name = "earth-movers-noise" if dim is None else f"earth-movers-{dim}d"
    if delta not in (None, 0, 0.0):
        raise ParameterError(f"{name} is pure metric DP (delta = 0); --delta does not apply")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    if dim is not None:
        k = check_positive_int(dim, "dim")
        if k > emb.dim:
            raise ParameterError(f"{name}: dim must be at most {emb.dim}")
        emb = Embeddings(emb.words, np.ascontiguousarray(emb.vectors[:, :k]),
                         name=f"{emb.name}[first {k} coordinates]")
    vectors = emb.vectors
    from ..mechanisms import earth_movers as _em

    def noisy_batch(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        sampler = _em.noisy_vectors if noisy is None else noisy  # looked up per call: tests patch it
        return sampler(ids, vectors, eps, rng)

    return word_pair_case(name, noisy_batch, emb, eps, pair, size=size, observe="noise")


#: The public vocabulary of the ``syntf`` case (all among GloVe's 5,000 most frequent words).
SYNTF_AUDIT_WORDS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                     "february", "march")


def syntf_case(epsilon: float | None = None, delta: float | None = None, *, size: int = 1,
               sampler: Callable[..., np.ndarray] | None = None) -> AuditCase:
    """SynTF end to end (:func:`textdp.mechanisms.syntf.sample_bags`) over :data:`SYNTF_AUDIT_WORDS`.

    Document ``a`` = ``monday``, document ``b`` = the other nine words once each; both are given
    to the sampler as their distinct vocabulary rows and counts, the released bags of ``size``
    rows are the events. Default ε = 3 (claimed ε per document). ``sampler`` (same signature as
    ``sample_bags``) replaces the mechanism, to show that a wrong law is flagged. With ``size=1``
    (the default) the privacy curve is audited too, against the exact one-term law
    (:func:`~textdp.audit.claims.syntf_logp`, computed from ε, |V| and the two documents only).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms.syntf import sample_bags

    if delta not in (None, 0, 0.0):
        raise ParameterError("syntf is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(3.0 if epsilon is None else epsilon)
    n_words = check_positive_int(size, "size")
    emb = load_embeddings(vocab_size=EARTH_MOVERS_VOCABULARY).restrict(words=SYNTF_AUDIT_WORDS, label="syntf audit")
    index = emb.index
    doc_a = np.array([index["monday"]], dtype=np.int64)
    doc_b = np.array(sorted(index[w] for w in SYNTF_AUDIT_WORDS if w != "monday"), dtype=np.int64)
    draw = sample_bags if sampler is None else sampler
    v = emb.vocab_size

    def sample(doc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        w = np.ones(doc.size)
        return np.asarray(draw([doc] * n, [w] * n, v, eps, n_words, rng))

    return AuditCase(
        mechanism="syntf",
        pair=(f"documents 'monday' vs the other {doc_b.size} words of a {v}-word public vocabulary "
              f"({', '.join(SYNTF_AUDIT_WORDS)}), bags of N={n_words}; claim epsilon={eps:g} per document; "
              "events: released bags"),
        input_a=doc_a,
        input_b=doc_b,
        sample=sample,
        claimed_epsilon=eps,
        events="discrete",
        chunk=16_384,
        curve=table_curve(sample, syntf_logp(eps, v, doc_a), syntf_logp(eps, v, doc_b), what="syntf's released terms",
                          law=f"SynTF's one-term law (epsilon={eps:g}, |V|={v})") if n_words == 1 else None,
    )


# -- TopicDP matrix mechanisms ---------------------------------------------------------------------
def randomizer(mechanism: object) -> Callable[..., np.ndarray]:
    """The mechanism's ``randomize(matrix, seed)`` method."""
    fn = getattr(mechanism, "randomize", None)
    if fn is None:
        raise ParameterError(f"{type(mechanism).__name__} has no randomize method")
    return fn


def sample_releases(mechanism: object, matrix: np.ndarray, n: int, rng: np.random.Generator, *,
                    exact_law: bool = True) -> np.ndarray:
    """``n`` independent releases of ``matrix``: shape ``(n,) + matrix.shape``.

    Uses ``mechanism.randomize_batch(matrices, seed=...)`` on an ``(n, m, k)`` stack when the
    class has one; else, for the grid mechanisms of :mod:`textdp.topics.mechanisms` (and
    ``exact_law``), their exact law in one vectorised draw (:func:`grid_releases`); else ``n``
    calls of ``randomize`` sharing ``rng``.
    """
    batch = getattr(mechanism, "randomize_batch", None)
    if callable(batch):
        return np.asarray(batch(np.broadcast_to(matrix, (n,) + matrix.shape), seed=rng), dtype=np.float64)
    if exact_law:
        fast = grid_releases(mechanism, matrix, n, rng)
        if fast is not None:
            return fast
    fn = randomizer(mechanism)
    out = np.empty((n,) + matrix.shape, dtype=np.float64)
    for i in range(n):
        out[i] = fn(matrix, seed=rng)
    return out


def grid_releases(mechanism: object, matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray | None:
    """``n`` releases of a TopicDP / Laplace / MVG mechanism in one vectorised draw, or ``None``.

    ``randomize`` of these classes is ``(rint(matrix/g) + Z) g`` with ``Z`` i.i.d. exact discrete
    noise whose parameter the class exposes publicly: ``grid_scale(shape)`` (discrete Laplace),
    ``grid_variance(shape)`` (discrete Gaussian) or ``grid_variances(shape)`` (one discrete
    Gaussian variance per column, MVG). Drawing all ``n`` releases' noise at once is the same law
    (tests compare it with ``n`` calls of ``randomize``) and removes the per-call overhead that made
    a 10^5-sample audit take minutes. Any other class returns ``None``.
    """
    from ..topics.mechanisms import LaplaceBaseline, MVGMechanism, TopicDPGaussian

    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2 or type(mechanism) not in (LaplaceBaseline, MVGMechanism, TopicDPGaussian):
        return None
    assert isinstance(mechanism, (LaplaceBaseline, MVGMechanism, TopicDPGaussian))  # exactly one of them (above)
    law = {LaplaceBaseline: "grid_scale", TopicDPGaussian: "grid_variance", MVGMechanism: "grid_variances"}
    if not callable(getattr(mechanism, law[type(mechanism)], None)):  # the class changed: per-call path
        return None
    shape = (int(a.shape[0]), int(a.shape[1]))
    check = getattr(mechanism, "_check_shape", None)
    if callable(check):
        check(shape)
    k = snap_to_grid(a, mechanism.grid)
    count = n * shape[0] * shape[1]
    if isinstance(mechanism, LaplaceBaseline):
        z = discrete_laplace(mechanism.grid_scale(shape), count, rng).reshape((n,) + shape)
    elif isinstance(mechanism, TopicDPGaussian):
        z = discrete_gaussian(mechanism.grid_variance(shape), count, rng).reshape((n,) + shape)
    else:
        var = mechanism.grid_variances(shape)
        z = np.empty((n,) + shape, dtype=np.int64)
        for v in sorted(set(var)):
            cols = [j for j in range(shape[1]) if var[j] == v]
            z[:, :, cols] = discrete_gaussian(v, n * shape[0] * len(cols), rng).reshape(n, shape[0], len(cols))
    if z.dtype == object or np.any(np.abs(z) >= 2**52 - np.abs(k)):
        raise ParameterError(f"the noise exceeds the range of the grid {mechanism.grid:g}; use a coarser grid")
    return np.asarray((k + z).astype(np.float64) * mechanism.grid)


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
                grid: float = DEFAULT_GRID) -> AuditCase:
    """An audit case for a matrix mechanism with an L2 (Frobenius) sensitivity claim.

    The pair is :func:`matrix_pair` at distance ``sensitivity``; events are the tails of the
    projection onto ``a - b`` (the likelihood-ratio direction of Gaussian noise). ``mechanism``
    is any object with ``randomize(matrix, seed=...)``; see :func:`sample_releases`.
    ``noise_variance``: the claimed σ² (grid units of ``grid``) of the discrete Gaussian on the
    differing entry, recomputed from public parameters by the caller: the privacy curve is then
    audited too (:func:`~textdp.audit.grid_curves.gaussian_entry_curve`).
    """
    a, b = matrix_pair(sensitivity)

    def sample(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_releases(mechanism, x, n, rng)

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
        curve=None if noise_variance is None else gaussian_entry_curve(
            sample, a, b, noise_variance, grid, what=f"{name}'s releases", law=f"{name}'s claimed discrete Gaussian"),
    )


def l1_matrix_case(name: str, mechanism: object, *, claimed_epsilon: float, noise_scale: float | None = None,
                   grid: float = DEFAULT_GRID) -> AuditCase:
    """An audit case for a 1-row matrix mechanism with the L1 sensitivity 2 of a probability row.

    The pair ``[[1, 0]]`` / ``[[0, 1]]`` moves the row by 2 in L1; events are the tails of
    :func:`l1_likelihood_statistic`, whose extreme atom carries the full ratio of Laplace noise.
    ``noise_scale``: the claimed discrete Laplace scale (grid units of ``grid``), recomputed from
    public parameters by the caller: the privacy curve is then audited too
    (:func:`~textdp.audit.grid_curves.laplace_pair_curve`).
    """
    a = np.array([[1.0, 0.0]])
    b = np.array([[0.0, 1.0]])

    def sample(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_releases(mechanism, x, n, rng)

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
        curve=None if noise_scale is None else laplace_pair_curve(
            sample, a, b, noise_scale, grid, what=f"{name}'s releases", law=f"{name}'s claimed discrete Laplace"),
    )


def _topic_params(epsilon: float | None, delta: float | None) -> tuple[float, float]:
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    dlt = check_probability(TOPIC_DEFAULT_DELTA if delta is None else delta, "delta")
    return eps, dlt


def topicdp_case(epsilon: float | None = None, delta: float | None = None, *,
                 calibration: str = "analytic") -> AuditCase:
    """TopicDP's Gaussian mechanism (analytic or thesis calibration) at its stated sensitivity."""
    from ..topics.mechanisms import TopicDPGaussian

    eps, dlt = _topic_params(epsilon, delta)
    mech = TopicDPGaussian(epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, gamma=0.1,
                           calibration=calibration)
    claimed_delta = dlt if calibration == "analytic" else min(1.0, 4 * dlt)
    if claimed_delta >= 1.0:
        raise ParameterError("topicdp-thesis composes to (epsilon, m*n*delta) = (epsilon, 4*delta): "
                             "choose delta < 0.25")
    name = "topicdp" if calibration == "analytic" else "topicdp-thesis"
    law = topicdp_grid_variance(eps, dlt, TOPIC_SENSITIVITY, _TOY_MATRIX.shape, DEFAULT_GRID, calibration)
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=claimed_delta,
                       noise_variance=law)


def laplace_case(epsilon: float | None = None, delta: float | None = None) -> AuditCase:
    """The Laplace baseline (global L1 sensitivity 2m) on the extreme pair ``[[1, 0]]`` / ``[[0, 1]]``."""
    from ..topics.mechanisms import LaplaceBaseline

    if delta not in (None, 0, 0.0):
        raise ParameterError("laplace is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    mech = LaplaceBaseline(epsilon=eps, m=1)
    return l1_matrix_case("laplace", mech, claimed_epsilon=eps,
                          noise_scale=laplace_grid_scale(eps, 1, (1, 2), DEFAULT_GRID))


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
             covariance: str = "isotropic") -> AuditCase:
    """The MVG mechanism (Chanyaswad et al. 2018) at its stated L2 sensitivity."""
    from ..topics.mechanisms import MVGMechanism

    eps, dlt = _topic_params(epsilon, delta)
    mech = MVGMechanism(epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, covariance=covariance)
    name = "mvg" if covariance == "isotropic" else "mvg-directional"
    law = mvg_grid_variances(eps, dlt, TOPIC_SENSITIVITY, _TOY_MATRIX.shape, DEFAULT_GRID, covariance)
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=dlt,
                       noise_variance=float(law[0]))  # matrix_pair moves entry (0, 0): column 0
