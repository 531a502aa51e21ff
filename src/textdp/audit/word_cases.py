"""Word-pair audit cases of word-level metric DP: the pair, the case, stop-word documents and the decoded conformance.

Two bags of ``N`` equal public GloVe words at Euclidean distance ``d`` (the claim of Theorem 5.1 of
Fernandes et al. is ``ε·N·E_d = ε·N·d``); the pair is picked from :data:`WORD_PAIRS` so that the claim is
close to :data:`TARGET_LOSS` (a claim the auditor can resolve with ~10^5 samples). The registered cases
built on these: :mod:`textdp.audit.word_level` (``cmp`` ... ``random``) and :mod:`textdp.audit.bag_cases`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from .claimed_curves import metric_noise_curve, table_curve
from .conformance import Conformance
from .core import AuditCase
from .curve import PrivacyCurve
from .public_lists import audit_stop_words
from .release_batch import copies_sampler, text_batch

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from ..mechanisms.base import Mechanism

__all__ = [
    "EXACT_DECODERS",
    "TARGET_LOSS",
    "WORD_PAIRS",
    "choose_word_pair",
    "custext_plus_document_case",
    "decoded_conformance",
    "metric_likelihood_statistic",
    "stop_word_document_case",
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
#: Earth Mover's decoders whose released words are the exact nearest word (the reference law applies).
EXACT_DECODERS = ("exact", "faiss-exact", "torch")


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
        n-dimensional Laplace noise, :func:`~textdp.audit.claimed_curves.metric_noise_curve`).
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
        sample=copies_sampler(release),
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

    sample = copies_sampler(release)
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


def custext_plus_document_case(name: str, mech: Mechanism, pair: tuple[str, str], epsilon: float,
                               embeddings: Embeddings, *, top_k: object = None,
                               stop_words: object = "english") -> AuditCase | None:
    """CusText+ on ``[stop, x]`` vs ``[stop, y]`` (:func:`stop_word_document_case`): its own branch runs.

    ``stop`` is the first word of the public stop list in the vocabulary's frequency order (``the``
    for GloVe); the law of the second word is CusText's in the pair's output set
    (:func:`~textdp.audit.claims.custext_logp`, from the public vocabulary, ε and ``top_k``); the
    claim is ε. ``None`` when the vocabulary holds no stop word (the single-word case applies).
    """
    from .claims import CUSTEXT_TOP_K, as_int, custext_logp

    stops = audit_stop_words(stop_words)
    if pair[0] in stops or pair[1] in stops:
        raise ParameterError(f"{name}: stop words are released unchanged (not protected); audit two other words")
    stop = next((i for i, w in enumerate(embeddings.words) if w in stops), None)
    if stop is None:
        return None
    eps = check_epsilon(epsilon)
    k = CUSTEXT_TOP_K if top_k is None else as_int(top_k, "top_k")
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

    sample = copies_sampler(noisy)

    def one(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample(rows.get(id(x), np.asarray(x)), n, rng).reshape(n, -1)

    return metric_noise_curve(one, vectors[bag_a[0]], vectors[bag_b[0]], eps, what="Algorithm 1's noisy vectors")


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
