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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError

__all__ = [
    "SYNTF_REFERENCE", "SYNTF_VARIANTS", "SynTF", "SynTFGuarantee", "cosine_similarity_rows", "syntf",
    "syntf_distribution",
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


@dataclass(frozen=True)
class SynTFGuarantee:
    """The ε-DP guarantee of a SynTF release (follows :class:`textdp.guarantees.Guarantee`).

    >>> from textdp.guarantees import Guarantee
    >>> g = SynTFGuarantee(epsilon=8.0, size=20, vocab_size=1000)
    >>> isinstance(g, Guarantee), g.to_dict()["unit"]
    (True, 'document')
    """

    epsilon: float
    size: int
    vocab_size: int
    variant: str = "weights"
    unit: str = "document"
    mechanism: str = "syntf"
    delta: float = 0.0

    @property
    def statement(self) -> str:
        """The guarantee in one sentence."""
        n, e = self.size, self.epsilon
        how = (
            f"n={n} i.i.d. terms with P(t) ~ exp(epsilon * w_t / (2n)), w the {self.unit}'s term weights scaled to "
            f"[0, 1] (the exponential mechanism over term-frequency vectors of l1 norm n with utility <w, y>, "
            f"sensitivity n)"
            if self.variant == "weights"
            else f"n={n} terms, each a term drawn from the {self.unit}'s composition vector followed by the "
            f"exponential mechanism exp(epsilon/n * sim / 2) over a public similarity in [0, 1]"
        )
        return (
            f"epsilon-DP with epsilon={e:g} per {self.unit} (SynTF, Weggenmann & Kerschbaum 2018): {how}; any two "
            f"{self.unit}s give any output bag with probabilities within a factor exp({e:g}) ({e / n:.4g} per term, "
            f"|V|={self.vocab_size}). Not covered: the bag size n (public), and the vocabulary itself unless it was "
            "built from public data; word order is not released."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form with the keys of :data:`textdp.guarantees.GUARANTEE_KEYS`."""
        out = asdict(self)
        out["guarantee"] = self.statement
        out["reference"] = SYNTF_REFERENCE
        return out


class SynTF:
    """SynTF over a public vocabulary: token lists in, bags of ``size`` words out.

    Parameters
    ----------
    epsilon : float
        Per-document (per-row) ε.
    size : int
        Output bag size ``n``.
    vocabulary : sequence of str
        The public vocabulary (output terms); tokens outside it are dropped.
    variant : {"weights", "composition"}
        See the module docstring.
    similarity : numpy.ndarray, optional
        ``(V, V)`` public similarity for ``composition``.
    vectors : numpy.ndarray, optional
        ``(V, d)`` public word vectors for ``composition`` (clipped cosine similarity).
    unit : str
        What one row is (``"document"``; the rewriter uses ``"sentence"``).

    Examples
    --------
    >>> m = SynTF(epsilon=60.0, size=4, vocabulary=["cat", "dog", "fish", "bird"])
    >>> bags = m.privatize([["cat", "cat", "unicorn"]], rng=1)
    >>> len(bags[0]), m.guarantee.epsilon
    (4, 60.0)
    """

    def __init__(
        self,
        epsilon: float,
        size: int,
        vocabulary: Sequence[str],
        *,
        variant: str = "weights",
        similarity: np.ndarray | None = None,
        vectors: np.ndarray | None = None,
        unit: str = "document",
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.size = check_positive_int(size, "size")
        self.vocabulary = tuple(vocabulary)
        if len(self.vocabulary) < 2:
            raise ParameterError("SynTF needs a vocabulary of at least 2 terms")
        self.variant = check_choice(variant, "SynTF variant", SYNTF_VARIANTS)
        self.similarity = None if similarity is None else _check_similarity(similarity, len(self.vocabulary))
        self.vectors = None if vectors is None else np.asarray(vectors, dtype=np.float64)
        if self.vectors is not None and self.vectors.shape[0] != len(self.vocabulary):
            raise ParameterError("vectors must have one row per vocabulary term")
        self.unit = unit
        self._index = {w: i for i, w in enumerate(self.vocabulary)}

    @property
    def guarantee(self) -> SynTFGuarantee:
        """The frozen guarantee of every release of this mechanism."""
        return SynTFGuarantee(self.epsilon, self.size, len(self.vocabulary), self.variant, self.unit)

    def term_counts(self, documents: Sequence[Sequence[str]]) -> np.ndarray:
        """``(B, V)`` term counts of token lists (out-of-vocabulary tokens dropped)."""
        w = np.zeros((len(documents), len(self.vocabulary)))
        for i, toks in enumerate(documents):
            for t in toks:
                j = self._index.get(t)
                if j is not None:
                    w[i, j] += 1.0
        return w

    def privatize(
        self, documents: Sequence[Sequence[str]], rng: int | np.random.Generator | np.random.SeedSequence | None = None
    ) -> list[list[str]]:
        """One bag of ``size`` words per document (sorted by count, then vocabulary order)."""
        if not len(documents):
            return []
        counts = syntf(self.term_counts(documents), self.epsilon, self.size, rng, variant=self.variant,
                       similarity=self.similarity, vectors=self.vectors)
        counts = np.atleast_2d(counts)
        bags = []
        for row in counts:
            idx = np.nonzero(row)[0]
            idx = idx[np.argsort(-row[idx], kind="stable")]
            bags.append([self.vocabulary[j] for j in idx for _ in range(int(row[j]))])
        return bags
