"""Earth Mover's privacy for documents (Fernandes, Dras & McIver 2019).

Algorithm 1 adds n-dimensional Laplace noise to every word vector of a bag;
Algorithm 2 maps each noisy vector back to the nearest vocabulary word. For two
documents whose bags b, b' both hold N words, Theorem 5.1 bounds the ratio of the
probabilities of any output bag by ``exp(epsilon * N * E_d(b, b'))``, where
``E_d`` is the Earth Mover's distance (the mean distance of the best one-to-one
matching of the two bags' word vectors).

Design choices, and why:

* The output is a *bag*: the private words are returned sorted by vocabulary row
  (most frequent word first), not in
  the order of the input. The guarantee of Theorem 5.1 is stated for bags; a
  sequence aligned with the input positions would only enjoy the weaker
  position-matched bound ``epsilon * sum_i d(b_i, b'_i)`` and would leak word order.
* Out-of-vocabulary tokens are dropped *before* the mechanism and only counted;
  nothing that bypasses the noise ever reaches an output.
* The bag size N is fixed for a release (``size``); with ``size=None`` it is the
  shortest document of the batch, the paper's Appendix B protocol.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int
from ..embeddings import (
    DECODERS,
    Decoder,
    Embeddings,
    ExactDecoder,
    load_embeddings,
    make_decoder,
)
from ..errors import DocumentError, ParameterTypeError
from ..guarantees import EarthMoversGuarantee
from ..text import BAG_MODES, make_bag, normalise
from .laplace import laplace_noise

MECHANISM_NAME = "earth-movers-privacy"


def noisy_vectors(
    ids: np.ndarray, vectors: np.ndarray, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 1: the word vectors of ``ids`` plus independent n-dim Laplace noise.

    ``ids`` may have any shape; the result has shape ``ids.shape + (d,)``.
    """
    ids = np.asarray(ids, dtype=np.int64)
    flat = ids.reshape(-1)
    base = np.asarray(vectors[flat], dtype=np.float64)
    noise = laplace_noise(flat.size, base.shape[1], epsilon, rng)
    return (base + noise).reshape(ids.shape + (base.shape[1],))


def privatize_ids(
    ids: np.ndarray,
    vectors: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    decoder: Decoder | None = None,
) -> np.ndarray:
    """Algorithms 1 and 2 on a batch of bags of vocabulary rows: ``(B, N)`` -> ``(B, N)``.

    A pure batch function: the output depends only on its arguments and the
    state of ``rng``. Each output row is sorted (a bag, see the module notes).

    >>> vec = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    >>> privatize_ids(np.array([[2, 1, 1]]), vec, 1e6, make_rng(0)).tolist()
    [[1, 1, 2]]
    """
    epsilon = check_epsilon(epsilon)
    ids = np.asarray(ids, dtype=np.int64)
    if decoder is None:
        decoder = ExactDecoder(vectors)
    z = noisy_vectors(ids, vectors, epsilon, rng)
    # the sources only let the decoder skip work (exact decoders return the same rows)
    out = decoder.decode(z.reshape(-1, z.shape[-1]), sources=ids.reshape(-1)).reshape(ids.shape)
    return np.sort(out, axis=-1)


@dataclass(frozen=True)
class PrivateDocument:
    """One released document: the private bag plus what it guarantees.

    ``input_words`` is the preprocessed bag that was privatised. It is the
    *sensitive input*: it is kept for diagnostics and evaluation and is never
    written by :meth:`to_record`.
    """

    id: str
    words: tuple[str, ...]
    guarantee: EarthMoversGuarantee
    n_tokens: int
    dropped_oov: int
    input_words: tuple[str, ...] = field(repr=False)
    decoder: str = "exact"

    def unchanged_fraction(self) -> float:
        """Multiset overlap of output and input bag divided by N (a diagnostic of the input)."""
        from collections import Counter

        overlap = Counter(self.words) & Counter(self.input_words)
        return sum(overlap.values()) / max(len(self.input_words), 1)

    def to_record(self) -> dict[str, Any]:
        """The JSON record written for this document (no input words)."""
        g = self.guarantee
        return {
            "id": self.id,
            "words": list(self.words),
            "epsilon": g.epsilon,
            "size": g.size,
            "dim": g.dim,
            "vocab_size": g.vocab_size,
            "embeddings": g.embeddings,
            "bag": g.bag,
            "n_tokens": self.n_tokens,
            "dropped_oov": self.dropped_oov,
            "mechanism": g.mechanism,
            "guarantee": g.statement,
            "decoder": self.decoder,
        }


class EarthMoversPrivacy:
    """Earth Mover's privacy for documents (Fernandes, Dras & McIver 2019).

    Each document is normalised (lower-case letters, stop words removed), its
    out-of-vocabulary words are dropped, the rest form a bag of exactly N words,
    every word vector gets n-dimensional Laplace noise (radius ~ Gamma(n, 1/eps),
    uniform direction) and is decoded to the nearest vocabulary word.

    Guarantee (Theorem 5.1): epsilon*N*E_d-privacy between any two bags of N
    words, E_d being the Earth Mover's distance over Euclidean word-vector
    distance. Smaller epsilon = more noise = more privacy. Roughly, a word
    survives when the noise radius (mean n/epsilon) is small compared with the
    distance to its nearest neighbours: on GloVe 50d about 74% of words survive
    at epsilon = 10 and almost none at epsilon = 4.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per unit of embedding distance, > 0.
    size : int or None
        Bag size N. ``None``: the shortest document in each batch (paper's protocol).
    embeddings : Embeddings, path or None
        The vocabulary; ``None`` loads GloVe 6B 50d (400,000 words).
    vocab_size : int or None
        Keep only the K most frequent words of the embeddings.
    bag : {"truncate", "sample"}
        ``truncate`` keeps the first N words; ``sample`` draws N with replacement.
    stop_words : "english", iterable or None
        Words removed before forming the bag.
    rng : int, numpy.random.Generator or None
        Seed or generator; ``None`` uses fresh OS entropy (never a constant).
    decoder : str
        Nearest-word decoder: ``"exact"`` (default), ``"faiss-exact"`` or ``"torch"``
        (same results, faster), ``"approximate"``/``"hnsw"`` or ``"ivf"`` (opt-in; decoding
        is post-processing, so the guarantee is unchanged, but utility differs). Each
        record names the decoder used.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = EarthMoversPrivacy(epsilon=1e6, size=2, embeddings=emb, stop_words=None, rng=0)
    >>> doc = mech.privatize("dog cat unicorn")
    >>> doc.words, doc.dropped_oov
    (('cat', 'dog'), 1)

    The estimator also works in a scikit-learn ``Pipeline``: ``transform`` maps
    texts to private texts (the bag's words joined by spaces).

    >>> mech.fit_transform(["car dog"])
    ['dog car']
    """

    def __init__(
        self,
        *,
        epsilon: float,
        size: int | None = None,
        embeddings: Embeddings | str | os.PathLike[str] | None = None,
        vocab_size: int | None = None,
        bag: str = "truncate",
        stop_words: str | Iterable[str] | None = "english",
        rng: int | np.random.Generator | None = None,
        decoder: str = "exact",
    ) -> None:
        self.epsilon = epsilon
        self.size = size
        self.embeddings = embeddings
        self.vocab_size = vocab_size
        self.bag = bag
        self.stop_words = stop_words
        self.rng = rng
        self.decoder = decoder

    # -- scikit-learn protocol -------------------------------------------------
    _PARAMS = ("epsilon", "size", "embeddings", "vocab_size", "bag", "stop_words", "rng", "decoder")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn protocol)."""
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params: Any) -> EarthMoversPrivacy:
        """Set constructor parameters (scikit-learn protocol); call ``fit`` again afterwards."""
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ParameterTypeError(f"unknown parameter {k!r}; valid: {', '.join(self._PARAMS)}")
            setattr(self, k, v)
        self.__dict__.pop("embeddings_", None)
        return self

    def fit(self, X: object = None, y: object = None) -> EarthMoversPrivacy:
        """Validate the parameters and load the embeddings (``X`` and ``y`` are ignored)."""
        self.epsilon_ = check_epsilon(self.epsilon)
        if self.size is not None:
            check_positive_int(self.size, "size")
        check_choice(self.bag, "bag mode", BAG_MODES)
        if isinstance(self.embeddings, Embeddings):
            emb = self.embeddings
            if self.vocab_size is not None:
                emb = emb.restrict(top_k=self.vocab_size)
        elif self.embeddings is None or isinstance(self.embeddings, (str, os.PathLike)):
            emb = load_embeddings(self.embeddings, vocab_size=self.vocab_size)
        else:
            raise ParameterTypeError(
                f"embeddings must be an Embeddings, a path or None, got {type(self.embeddings).__name__}"
            )
        self.embeddings_ = emb
        check_choice(self.decoder, "decoder", DECODERS)
        self.decoder_ = make_decoder(self.decoder, emb.vectors)
        self.rng_ = make_rng(self.rng)
        return self

    def transform(self, X: Iterable[str]) -> list[str]:
        """Private texts (space-joined private bags) for an iterable of texts."""
        return [" ".join(d.words) for d in self.privatize_batch(list(X))]

    def fit_transform(self, X: Iterable[str], y: object = None) -> list[str]:
        """``fit`` then ``transform``."""
        return self.fit(X, y).transform(X)

    def _ensure_fitted(self) -> None:
        if not hasattr(self, "embeddings_"):
            self.fit()

    # -- the verbs ---------------------------------------------------------------
    def guarantee(self, size: int) -> EarthMoversGuarantee:
        """The guarantee of a release with bag size ``size``."""
        self._ensure_fitted()
        emb = self.embeddings_
        return EarthMoversGuarantee(
            epsilon=self.epsilon_,
            size=int(size),
            dim=emb.dim,
            vocab_size=emb.vocab_size,
            embeddings=emb.name,
            bag=self.bag,
        )

    def prepare(self, texts: Sequence[str], ids: Sequence[str] | None = None) -> tuple[list[np.ndarray], list[int], list[int]]:
        """Normalise and look up each text: in-vocabulary rows, token counts, OOV counts."""
        self._ensure_fitted()
        rows, n_tokens, dropped = [], [], []
        for i, text in enumerate(texts):
            doc_id = ids[i] if ids is not None else str(i)
            if not isinstance(text, str):
                raise ParameterTypeError(f"document {doc_id}: text must be a str, got {type(text).__name__}")
            tokens = normalise(text, self.stop_words)
            if not tokens:
                raise DocumentError(f"document {doc_id}: empty after normalisation (no words left)")
            r, oov = self.embeddings_.ids(tokens)
            if r.size == 0:
                raise DocumentError(
                    f"document {doc_id}: none of its {len(tokens)} words is in the vocabulary "
                    f"({self.embeddings_.name}, {self.embeddings_.vocab_size} words)"
                )
            rows.append(r)
            n_tokens.append(len(tokens))
            dropped.append(oov)
        return rows, n_tokens, dropped

    def privatize_ids(self, bags: np.ndarray) -> np.ndarray:
        """Algorithms 1 + 2 on a ``(B, N)`` array of vocabulary rows, using this object's generator."""
        self._ensure_fitted()
        return privatize_ids(bags, self.embeddings_.vectors, self.epsilon_, self.rng_, self.decoder_)

    def privatize_batch(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        progress: Callable[[int], None] | None = None,
        chunk: int = 128,
    ) -> list[PrivateDocument]:
        """Privatise a batch of texts; see the class docstring for the steps.

        ``progress`` (optional) is called with the number of documents finished
        after each chunk of ``chunk`` documents. Every document is validated
        before any noise is drawn, so a bad document fails the whole batch early.
        """
        self._ensure_fitted()
        texts = list(texts)
        if ids is not None and len(ids) != len(texts):
            raise ParameterTypeError(f"got {len(ids)} ids for {len(texts)} texts")
        doc_ids = [str(x) for x in ids] if ids is not None else [str(i) for i in range(len(texts))]
        if not texts:
            return []
        rows, n_tokens, dropped = self.prepare(texts, doc_ids)
        size = self.size if self.size is not None else min(r.size for r in rows)
        bags = np.stack(
            [make_bag(r, size, self.bag, self.rng_, doc_id=f"document {d}") for r, d in zip(rows, doc_ids)]
        )
        private = np.empty_like(bags)
        for start in range(0, len(texts), chunk):
            private[start : start + chunk] = self.privatize_ids(bags[start : start + chunk])
            if progress is not None:
                progress(min(chunk, len(texts) - start))
        guarantee = self.guarantee(size)
        words = self.embeddings_.words
        return [
            PrivateDocument(
                id=doc_ids[i],
                words=tuple(words[j] for j in private[i]),
                guarantee=guarantee,
                n_tokens=n_tokens[i],
                dropped_oov=dropped[i],
                decoder=getattr(self.decoder_, "name", self.decoder),
                input_words=tuple(sorted(words[j] for j in bags[i])),
            )
            for i in range(len(texts))
        ]

    def privatize(self, texts: str | Iterable[str]) -> PrivateDocument | list[PrivateDocument]:
        """Privatise one text (returns a :class:`PrivateDocument`) or an iterable of texts (a list)."""
        if isinstance(texts, str):
            return self.privatize_batch([texts])[0]
        return self.privatize_batch(list(texts))
