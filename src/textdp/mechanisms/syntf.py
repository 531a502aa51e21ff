r"""SynTF: synthetic, differentially private term-frequency vectors (Weggenmann & Kerschbaum, SIGIR 2018).

SynTF (arXiv 1805.00904) releases, instead of a document's term-frequency vector ``x``,
a synthetic vector ``y`` of fixed ``l1`` norm ``n`` (a bag of ``n`` words) sampled with
the exponential mechanism (McSherry & Talwar, FOCS 2007) whose utility comes from the
document's own term weights. It is not a synonym swap: no input word is "replaced";
every output term is drawn from the whole vocabulary.

The mechanism (``variant="weights"``, the default)
--------------------------------------------------
Let ``w ∈ R^V_{≥0}`` be the document's term weights over a public vocabulary (counts,
or counts times a public idf; out-of-vocabulary words are dropped, never copied) and
``x̃ = w / max(w) ∈ [0, 1]^V`` (all zeros for a document with no vocabulary word). The
output space is ``Y_n = {y ∈ N^V : ||y||_1 = n}`` and the utility is linear,
``u(x, y) = <x̃, y>``. Its sensitivity over *any* two documents is

.. math:: Δu = \max_{y ∈ Y_n} \max_{x, x'} |<x̃ − x̃', y>| = n

(each coordinate of ``x̃ − x̃'`` lies in ``[−1, 1]`` and ``y`` has ``n`` units of mass),
so the exponential mechanism ``P(y | x) ∝ μ(y) exp(ε u(x, y) / (2n))`` is ε-DP for the
document as the unit, for any public base measure ``μ``. With ``μ(y)`` the multinomial
coefficient (the number of word orders giving the bag ``y``), the multinomial theorem
factorises it:

.. math:: y \sim \mathrm{Multinomial}\big(n,\ \mathrm{softmax}(ε\,x̃ / (2n))\big),

i.e. ``n`` i.i.d. terms, each ``P(t) ∝ exp(ε x̃_t / (2n))`` (ε/n per term, composing to
ε). Sampling is in log space (softmax via log-sum-exp).

``variant="composition"``
-------------------------
The patent by the same authors (US 10,999,256, "synthetic and differentially private
term frequency vectors") describes the synthetic vector as ``n`` repetitions of: draw a
term ``t`` from the document's composition vector ``π = w / ||w||_1``, then draw the
output term ``s`` with the exponential mechanism ``∝ exp(ε_t sim(t, s) / 2)`` over a
public similarity rating ``sim ∈ [0, 1]`` (here: the clipped cosine of public word
embeddings, or identity). For every ``t, t'`` the second draw's probabilities differ by
at most ``e^{ε_t}``, hence so do the mixtures over ``π(x)`` and ``π(x')``: ε_t per term,
``ε = n ε_t`` per document, the same accounting as above.

Not covered: the bag size ``n`` is public; word order is not released (a bag); the
vocabulary must be public (built without the private data).

The mechanism object
--------------------
:class:`SynTF` (registered as ``syntf``, document family: ``textdp obfuscate --mechanism syntf
--size N``, ``textdp.mechanisms.get("syntf", epsilon=...)``, ``[mechanism.syntf]`` in
``textdp evaluate``) applies it to texts: :func:`textdp.text.normalize`, the counts of the
in-vocabulary words (OOV tokens dropped), then :func:`sample_bags` over the public vocabulary
(the embeddings' words; all 400,000 of GloVe 6B by default, since :func:`sample_bags` costs
``O(k + N)`` per document whatever ``|V|``) for ``weights``, or :func:`syntf` with the
embeddings' clipped cosine for ``composition``. Records (:class:`~textdp.mechanisms.PrivateDocument`)
hold the id, the N words and the public guarantee, nothing about the input. The sentence
rewriter's ``syntf-sentence`` calls the same pure functions over the model's vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int, check_size
from ..errors import ParameterError
from ..guarantees import Guarantee
from .base import ReleaseContext, SeedLike
from .common import BagMechanism, BagOutput, PreparedText

__all__ = [
    "SYNTF_REFERENCE", "SYNTF_VARIANTS", "SynTF", "SynTFGuarantee", "cosine_similarity_rows", "sample_bags",
    "syntf", "syntf_distribution",
]

SYNTF_REFERENCE = (
    "Weggenmann & Kerschbaum, 'SynTF: Synthetic and Differentially Private Term Frequency Vectors for "
    "Privacy-Preserving Text Mining', SIGIR 2018 (arXiv 1805.00904); exponential mechanism: McSherry & Talwar 2007"
)
SYNTF_VARIANTS = ("weights", "composition")


def _as_weights(weights: np.ndarray) -> tuple[np.ndarray, bool]:
    w = np.asarray(weights, dtype=np.float64)
    single = w.ndim == 1
    w = np.atleast_2d(w)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ParameterError("weights must be a (V,) or (B, V) array over a vocabulary of at least 2 terms")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ParameterError("term weights must be finite and >= 0")
    return w, single


def syntf_distribution(
    weights: np.ndarray,
    epsilon: float,
    size: int,
    *,
    variant: str = "weights",
    similarity: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
) -> np.ndarray:
    """The exact law of one output term: ``(V,)`` or ``(B, V)`` probabilities.

    ``weights`` variant: ``softmax(ε x̃ / (2 size))`` with ``x̃ = w / max w``.
    ``composition`` variant: ``Σ_t π_t softmax(ε sim[t] / (2 size))`` with ``π = w / Σ w``
    (uniform over the vocabulary for an all-zero ``w``); ``sim`` is ``similarity``, or the
    clipped cosine of ``vectors`` (:func:`cosine_similarity_rows`), or the identity.

    >>> syntf_distribution(np.array([2.0, 1.0, 0.0]), 6.0, 1).round(3).tolist()
    [0.786, 0.175, 0.039]
    """
    w, single = _as_weights(weights)
    eps = check_epsilon(epsilon)
    n = check_positive_int(size, "size")
    check_choice(variant, "SynTF variant", SYNTF_VARIANTS)
    if variant == "weights":
        top = w.max(axis=1, keepdims=True)
        x = np.divide(w, top, out=np.zeros_like(w), where=top > 0)
        s = eps * x / (2.0 * n)
        q = np.exp(s - s.max(axis=1, keepdims=True))
        q /= q.sum(axis=1, keepdims=True)
    else:
        sim = (cosine_similarity_rows(vectors, np.arange(w.shape[1])) if vectors is not None and similarity is None
               else _check_similarity(similarity, w.shape[1]))
        s = eps * sim / (2.0 * n)
        rows = np.exp(s - s.max(axis=1, keepdims=True))
        rows /= rows.sum(axis=1, keepdims=True)  # (V, V): law of s given t
        tot = w.sum(axis=1, keepdims=True)
        pi = np.divide(w, tot, out=np.full_like(w, 1.0 / w.shape[1]), where=tot > 0)
        q = pi @ rows
    return q[0] if single else q


def _check_similarity(similarity: np.ndarray | None, v: int) -> np.ndarray:
    if similarity is None:
        return np.eye(v)
    sim = np.asarray(similarity, dtype=np.float64)
    if sim.shape != (v, v) or np.any(sim < 0) or np.any(sim > 1) or not np.all(np.isfinite(sim)):
        raise ParameterError(f"similarity must be a ({v}, {v}) matrix with entries in [0, 1]")
    return sim


def cosine_similarity_rows(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``max(0, cos(E_t, E_s))`` for the terms ``rows`` against all terms: a public similarity in [0, 1].

    >>> cosine_similarity_rows(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([0])).round(3).tolist()
    [[1.0, 0.0, 0.707]]
    """
    e = np.asarray(vectors, dtype=np.float64)
    unit = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    return np.clip(unit[np.asarray(rows)] @ unit.T, 0.0, 1.0)


def syntf(
    weights: np.ndarray,
    epsilon: float,
    size: int,
    rng: int | np.random.Generator | np.random.SeedSequence | None = None,
    *,
    variant: str = "weights",
    similarity: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
) -> np.ndarray:
    """Sample synthetic term-frequency vectors: ε-DP per row (the row is the unit).

    Parameters
    ----------
    weights : numpy.ndarray
        ``(V,)`` or ``(B, V)`` non-negative term weights (counts or tf-idf) over a public
        vocabulary of ``V`` terms.
    epsilon : float
        Privacy parameter per row (ε/size per drawn term).
    size : int
        ``n``: the ``l1`` norm of the output (terms in the bag); public.
    rng : int, Generator, SeedSequence or None
        Randomness (default: fresh OS entropy).
    variant : {"weights", "composition"}
        See the module docstring.
    similarity : numpy.ndarray, optional
        ``(V, V)`` public similarity in [0, 1] for ``composition`` (default: identity).
    vectors : numpy.ndarray, optional
        ``(V, d)`` public word vectors: ``composition`` then uses their clipped cosine,
        computed only for the terms drawn (for large vocabularies).

    Returns
    -------
    numpy.ndarray
        int64 counts of the same shape as ``weights``; each row sums to ``size``.

    Examples
    --------
    >>> y = syntf(np.array([3.0, 1.0, 0.0, 0.0]), epsilon=40.0, size=5, rng=0)
    >>> int(y.sum()), y.shape
    (5, (4,))
    """
    w, single = _as_weights(weights)
    n = check_positive_int(size, "size")
    g = make_rng(rng)
    if variant == "weights" or variant not in SYNTF_VARIANTS:
        q = np.atleast_2d(syntf_distribution(w, epsilon, n, variant=variant))
        out = g.multinomial(n, q)
    else:
        eps = check_epsilon(epsilon)
        sim = None if (vectors is not None and similarity is None) else _check_similarity(similarity, w.shape[1])
        tot = w.sum(axis=1, keepdims=True)
        pi = np.divide(w, tot, out=np.full_like(w, 1.0 / w.shape[1]), where=tot > 0)
        sources = g.multinomial(n, pi)  # (B, V): how many output terms each source term spawns
        out = np.zeros_like(sources)
        for t in np.unique(np.nonzero(sources)[1]):
            row = cosine_similarity_rows(vectors, np.array([t]))[0] if sim is None else sim[t]  # type: ignore[arg-type]
            s = eps * row / (2.0 * n)
            q = np.exp(s - s.max())
            q /= q.sum()
            rows = np.nonzero(sources[:, t])[0]
            out[rows] += g.multinomial(sources[rows, t], q)
    out = np.asarray(out, dtype=np.int64)
    return out[0] if single else out


@dataclass(frozen=True, kw_only=True)
class SynTFGuarantee(Guarantee):
    """The ε-DP guarantee of a SynTF release (a :class:`~textdp.guarantees.Guarantee`).

    >>> g = SynTFGuarantee(epsilon=8.0, size=20, vocab_size=1000)
    >>> isinstance(g, Guarantee), g.to_dict()["unit"], g.params["size"]
    (True, 'document', 20)
    """

    size: int
    vocab_size: int
    variant: str = "weights"
    embeddings: str | None = None
    size_from_data: bool = False
    mechanism: str = "syntf"
    unit: str = "document"
    reference: str = SYNTF_REFERENCE

    def _derive(self) -> dict[str, object]:
        n, e = self.size, self.epsilon
        how = (
            f"n={n} i.i.d. terms with P(t) ~ exp(epsilon * w_t / (2n)), w the {self.unit}'s term weights scaled to "
            f"[0, 1] (the exponential mechanism over term-frequency vectors of l1 norm n with utility <w, y>, "
            f"sensitivity n)"
            if self.variant == "weights"
            else f"n={n} terms, each a term drawn from the {self.unit}'s composition vector followed by the "
            f"exponential mechanism exp(epsilon/n * sim / 2) over a public similarity in [0, 1]"
        )
        vocab = f"|V|={self.vocab_size}" + (f", the words of {self.embeddings}" if self.embeddings else "")
        not_covered = (
            "the bag size n (public), the record id, and the vocabulary itself unless it was built from public "
            "data; word order is not released."
        )
        if self.size_from_data:
            not_covered += (f" n was taken from the data (the shortest {self.unit}'s in-vocabulary length): it "
                            "reveals that length.")
        return {
            "statement": (
                f"epsilon-DP with epsilon={e:g} per {self.unit} (SynTF, Weggenmann & Kerschbaum 2018): {how}; any "
                f"two {self.unit}s give any output bag with probabilities within a factor exp({e:g}) ({e / n:.4g} "
                f"per term, {vocab}; out-of-vocabulary words are dropped, never released). Not covered: "
                + not_covered
            ),
            "not_covered": not_covered,
            "composition": (f"Sequential composition over {self.unit}s: k {self.unit}s of one person cost "
                            f"k*{e:g}; every release of the same {self.unit} spends the budget again."),
            "parameters": (("size", n), ("vocab_size", self.vocab_size), ("variant", self.variant),
                           ("embeddings", self.embeddings), ("size_from_data", bool(self.size_from_data))),
        }


# -- the document job ------------------------------------------------------------------------------
def sample_bags(
    terms: Sequence[np.ndarray],
    weights: Sequence[np.ndarray],
    vocab_size: int,
    epsilon: float,
    size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """SynTF (``weights`` variant) over a vocabulary of ``vocab_size`` terms, from sparse documents.

    A pure batch function: ``(B,)`` documents in, a ``(B, size)`` int64 array of vocabulary rows
    out (each row sorted: a bag). Document ``b`` is given by its distinct term rows ``terms[b]``
    and their weights ``weights[b] > 0`` (e.g. counts); every other term has weight 0. The
    law is exactly :func:`syntf_distribution`: ``size`` i.i.d. terms with
    ``P(t) ∝ exp(ε x̃_t / (2 size))``, ``x̃ = w / max w``. A term of weight 0 has log-weight 0,
    so the ``V − k`` such terms form one category of log-mass ``log(V − k)``: the
    log-weights of the ``k + 1`` categories are normalised by log-sum-exp, the counts drawn
    from one multinomial per document, and each draw of the zero-weight category is a
    uniform term outside the document (exact conditional sampling). The cost is
    ``O(k + size)`` per document, whatever ``V``.

    >>> rng = make_rng(0)
    >>> sample_bags([np.array([1, 3])], [np.array([2.0, 1.0])], 5, 1e4, 3, rng).tolist()
    [[1, 1, 1]]
    >>> sample_bags([np.array([1])], [np.array([1.0])], 3, 1e-3, 4, rng).shape
    (1, 4)
    """
    eps = check_epsilon(epsilon)
    n = check_positive_int(size, "size")
    v = check_positive_int(vocab_size, "vocab_size", minimum=2)
    b = len(terms)
    if len(weights) != b:
        raise ParameterError(f"got {len(weights)} weight arrays for {b} documents")
    if b == 0:
        return np.zeros((0, n), dtype=np.int64)
    ks = np.fromiter((len(t) for t in terms), dtype=np.int64, count=b)
    k_max = int(ks.max())
    rows = np.zeros((b, max(k_max, 1)), dtype=np.int64)
    logits = np.full((b, k_max + 1), -np.inf)
    for i, (t, w) in enumerate(zip(terms, weights, strict=True)):  # fill the padded (B, K) arrays
        t = np.asarray(t, dtype=np.int64)
        w = np.asarray(w, dtype=np.float64)
        if t.shape != w.shape or t.ndim != 1:
            raise ParameterError("terms and weights of a document must be 1-d arrays of the same length")
        if t.size:
            rows[i, : t.size] = t
            logits[i, : t.size] = w / w.max()
    if np.any(rows < 0) or np.any(rows >= v):
        raise ParameterError(f"term rows must lie in [0, {v})")
    valid = np.arange(k_max)[None, :] < ks[:, None]
    if np.any(~np.isfinite(logits[:, :k_max][valid])) or np.any(logits[:, :k_max][valid] <= 0):
        raise ParameterError("term weights must be finite and > 0 (leave zero-weight terms out)")
    logits[:, :k_max] *= eps / (2.0 * n)  # log-weights s x̃_t of the document's terms
    rest = v - ks
    with np.errstate(divide="ignore"):
        logits[:, k_max] = np.log(rest.astype(np.float64))  # V - k terms of log-weight 0
    top = logits.max(axis=1, keepdims=True)
    lse = top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    p = np.exp(logits - lse)
    p /= p.sum(axis=1, keepdims=True)
    counts = rng.multinomial(n, p)  # (B, K + 1)
    # the document's own terms
    own_rows = np.repeat(rows[:, :k_max].reshape(-1), counts[:, :k_max].reshape(-1))
    own_docs = np.repeat(np.repeat(np.arange(b), k_max), counts[:, :k_max].reshape(-1))
    # uniform terms outside the document: the j-th term of the complement of the sorted set S is
    # j + #{i : S_i - i <= j}; one searchsorted for the whole batch (document b offset by b V)
    n_rest = counts[:, k_max]
    rest_docs = np.repeat(np.arange(b), n_rest)
    j = rng.integers(0, np.maximum(rest, 1)[rest_docs]) if rest_docs.size else np.zeros(0, dtype=np.int64)
    sorted_rows = np.sort(np.where(valid, rows[:, :k_max], v), axis=1)
    keys = (sorted_rows - np.arange(k_max)[None, :]) + np.arange(b)[:, None] * v
    keys = keys[valid]  # row-major: documents in order, each block sorted
    starts = np.concatenate([[0], np.cumsum(ks)[:-1]])
    below = np.searchsorted(keys, j + rest_docs * v, side="right") - starts[rest_docs]
    rest_rows = j + below
    docs = np.concatenate([own_docs, rest_docs])
    out = np.concatenate([own_rows, rest_rows])
    order = np.lexsort((out, docs))
    return out[order].reshape(b, n)


class SynTF(BagMechanism):
    """SynTF for documents: every document becomes a synthetic bag of ``size`` vocabulary words.

    Registered as ``syntf`` (``textdp obfuscate --mechanism syntf --size N``). Each text is
    normalised (:func:`textdp.text.normalize`: lower-case words, stop words removed); its
    in-vocabulary words give the term counts ``w`` (out-of-vocabulary tokens are dropped and
    never reach the output); the release is ``N`` terms over the whole public vocabulary:
    with ``variant="weights"`` i.i.d. with ``P(t) ∝ exp(ε w_t / (2 N max w))`` (Weggenmann &
    Kerschbaum 2018, §4: the exponential mechanism over the vectors of ``l1`` norm ``N`` with
    the linear utility ``<x̃, y>``, sensitivity ``N``), sampled exactly with :func:`sample_bags`;
    with ``variant="composition"`` the patent's two-step draw with the embeddings' clipped
    cosine as the public similarity (:func:`syntf`; dense over the vocabulary, so use a small
    ``vocab_size``).

    Guarantee: ε-DP with the document as the unit, for *any* two documents (whatever their
    lengths or topics; :class:`SynTFGuarantee`). N and the vocabulary are public. Unlike the
    metric-DP mechanisms the bound does not grow with the distance between documents, so the
    utility at a given ε is low: a document's own terms are only ``exp(ε / (2N))`` times as
    likely per draw as any other word of the vocabulary.

    Parameters
    ----------
    epsilon : float
        ε per document (``ε / N`` per drawn term).
    size : int or None
        The bag size N (public). Required unless ``size_from_data=True`` or given per call.
    embeddings : Embeddings, path or None
        The public vocabulary (its words; its vectors only for ``composition``). ``None``: GloVe
        6B 50d, all 400,000 words: :func:`sample_bags` costs ``O(k + N)`` per document, not
        ``O(|V|)`` (measured: 2.0 M released words/s at V = 400k against 2.2 k words/s for a dense
        softmax over V; BENCHMARKS.md).
    vocab_size : int or None
        Keep only the K most frequent words of the embeddings.
    stop_words : "english", iterable or None
        Words removed before counting.
    seed : int, numpy.random.Generator or None
        Seed or generator for experiments; ``None`` (use this for releases): fresh OS entropy.
    size_from_data : bool
        With ``size=None``, use the shortest document's in-vocabulary length (published:
        warns, and the guarantee says so).
    variant : {"weights", "composition"}
        See the module docstring.

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> emb = Embeddings(["cat", "dog", "car", "sun"], np.eye(4), name="toy")
    >>> mech = SynTF(epsilon=1e4, size=3, embeddings=emb, stop_words=None, seed=0)
    >>> doc = mech.privatize("dog dog car unicorn")
    >>> doc.words, doc.to_record()["mechanism"], "n_tokens" in doc.to_record()
    (('dog', 'dog', 'dog'), 'syntf', False)
    >>> report = []
    >>> _ = mech.privatize_batch(["dog car unicorn"], private_report=report)
    >>> report[0].dropped_oov, report[0].n_in_vocabulary
    (1, 2)
    """

    name = "syntf"
    reference = SYNTF_REFERENCE
    #: documents per chunk (sampling is O(k + N) per document, whatever V)
    chunk_size = 1024

    variant: str = "weights"

    def _fit(self) -> None:
        self._check_epsilon_and_size()
        check_choice(self.variant, "SynTF variant", SYNTF_VARIANTS)
        if self._load_embeddings().vocab_size < 2:
            raise ParameterError("SynTF needs a vocabulary of at least 2 words")

    def guarantee(self, context: ReleaseContext | None = None) -> SynTFGuarantee:
        """The guarantee of a release with bag size ``context.size`` (default: the constructor's ``size``)."""
        ctx, size = self._guarantee_context(context)
        return SynTFGuarantee(
            epsilon=self.epsilon_, size=size, vocab_size=self.embeddings_.vocab_size,
            variant=self.variant, embeddings=self.embeddings_.name, size_from_data=ctx.size_from_data,
            seeded=ctx.seeded, empty=ctx.empty,
        )

    def privatize_ids(self, bags: np.ndarray, *, size: int | None = None, seed: SeedLike = None) -> np.ndarray:
        """SynTF on a ``(B, M)`` array of input vocabulary rows: ``(B, N)`` released rows, each row sorted.

        ``N`` is ``size``, else the constructor's ``size``, else ``M``; ``seed``: default this
        object's generator.

        >>> from textdp.embeddings import Embeddings
        >>> m = SynTF(epsilon=1e4, embeddings=Embeddings(list("abcd"), np.eye(4), name="toy"), seed=0)
        >>> m.privatize_ids(np.array([[2, 2, 1], [0, 3, 3]])).tolist()
        [[2, 2, 2], [3, 3, 3]]
        """
        self._ensure_fitted()
        rows = np.asarray(bags, dtype=np.int64)
        if rows.ndim != 2 or rows.shape[1] == 0:
            raise ParameterError("bags must be a (B, M) array of vocabulary rows with M >= 1")
        n = check_size(size if size is not None else self.size if self.size is not None else rows.shape[1])
        gen = self.rng_ if seed is None else make_rng(seed)
        return self._sample(list(rows), n, gen)

    def _sample(self, rows: Sequence[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        v = self.embeddings_.vocab_size
        if self.variant == "composition":
            dense = np.zeros((len(rows), v))
            for i, r in enumerate(rows):
                np.add.at(dense[i], r, 1.0)
            counts = np.atleast_2d(syntf(dense, self.epsilon_, n, rng, variant="composition",
                                         vectors=self.embeddings_.vectors))
            return np.stack([np.repeat(np.arange(v), c) for c in counts])
        uniq = [np.unique(r, return_counts=True) for r in rows]
        return sample_bags([u[0] for u in uniq], [u[1].astype(np.float64) for u in uniq], v, self.epsilon_, n, rng)

    def _privatize(self, prepared: Sequence[PreparedText], context: ReleaseContext,
                   rng: np.random.Generator) -> list[BagOutput]:
        n = int(context.size or 0)
        bags = self._sample([p.rows for p in prepared], n, rng)
        # the private report's input bag: the document's first N in-vocabulary words, repeated when shorter
        return [BagOutput(np.resize(p.rows, n), bags[k]) for k, p in enumerate(prepared)]
