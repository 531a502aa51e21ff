"""Earth Mover's privacy for documents (Fernandes, Dras & McIver 2019).

Algorithm 1 adds n-dimensional Laplace noise to every word vector of a bag;
Algorithm 2 maps each noisy vector back to the nearest vocabulary word. For two
documents whose bags b, b' both hold N words, Theorem 5.1 bounds the ratio of the
probabilities of any output bag by ``exp(epsilon * N * E_d(b, b'))``, where
``E_d`` is the Earth Mover's distance (the mean distance of the best one-to-one
matching of the two bags' word vectors). With ``bag="sample"`` the bound is
``exp(epsilon * N * W_inf(p_D, p_D'))`` between the documents' word distributions
(see :class:`textdp.guarantees.EarthMoversGuarantee`).

Design choices, and why:

* The output is a *bag*: the private words are returned sorted by vocabulary row
  (most frequent word first), not in the order of the input. The guarantee of
  Theorem 5.1 is stated for bags; a sequence aligned with the input positions
  would only enjoy the weaker position-matched bound
  ``epsilon * sum_i d(b_i, b'_i)`` and would leak word order.
* The rows of each bag are put in uniformly random order before the noise is
  added, so the noisy vectors ``Z`` themselves (not only their decoded multiset)
  carry the bag guarantee: the density of ``Z`` given ``b`` is the average over
  permutations ``pi`` of ``prod_i Lap(z_i - e_{b_pi(i)})``, and matching every
  term with the optimal matching of ``b`` and ``b'`` bounds it by
  ``exp(epsilon N E_d(b, b'))`` times the density given ``b'``.
* Timing. The default decoding reads only ``Z`` (no source words, no cache
  keyed by input words), so its running time is a function of ``Z`` and is
  covered by the guarantee as post-processing (Lemma 3). ``known_source=True``
  passes the input rows to the decoder (the exact known-source shortcut of
  :class:`~textdp.embeddings.ExactDecoder`): same words, faster at large epsilon,
  but its running time then depends on the private words directly (measured: a
  200-word document of rare words takes 1.7x as long as one of frequent words at
  epsilon 40, against 1.08x, through the noisy vectors only, for the default; see
  BENCHMARKS.md) and on the words earlier documents of the process used. It is for
  experiments only.
* Out-of-vocabulary tokens are dropped *before* the mechanism; nothing that
  bypasses the noise ever reaches an output.
* The bag size N is a public parameter of the release (``size``). Taking it from
  the data (``size_from_data=True``: the shortest document of the batch, the
  paper's Appendix B protocol) reveals that length and warns.
* Nothing returned for release holds the input: :class:`PrivateDocument` has the
  output words and the guarantee only. Diagnostics that need the input (token
  and OOV counts, the input bag) are handed to an explicit ``private_report``
  as :class:`DocumentDiagnostics`, for the data owner only.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._deprecation import renamed_parameter
from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_size
from ..embeddings import (
    DECODERS,
    Decoder,
    Embeddings,
    ExactDecoder,
    make_decoder,
)
from ..errors import ParameterTypeError
from ..guarantees import EarthMoversGuarantee
from ..progress import ProgressCallback
from ..text import BAG_MODES, make_bag
from .common import BagEstimator, resolve_embeddings
from .laplace import laplace_noise
from .mbr import POSTPROCESSORS, MBRDecoder

MECHANISM_NAME = "earth-movers"

#: Words noised and decoded at once: bounds the working memory (about 2 KB per word for
#: 50-d vectors: the float64 noise, the noisy vectors and the decoder's scores) whatever N is.
WORDS_PER_BLOCK = 32_768



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
    *,
    known_source: bool = False,
) -> np.ndarray:
    """Algorithms 1 and 2 on a batch of bags of vocabulary rows: ``(B, N)`` -> ``(B, N)``.

    A pure batch function: the output depends only on its arguments and the
    state of ``rng``. Each bag is shuffled before the noise and each output row
    is sorted (a bag, see the module notes). The decoder sees only the noisy
    vectors unless ``known_source=True`` (an opt-in shortcut whose running time
    depends on the input words; see the module notes).

    >>> vec = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    >>> privatize_ids(np.array([[2, 1, 1]]), vec, 1e6, make_rng(0)).tolist()
    [[1, 1, 2]]
    """
    epsilon = check_epsilon(epsilon)
    ids = np.asarray(ids, dtype=np.int64)
    if decoder is None:
        decoder = ExactDecoder(vectors)
    if ids.ndim >= 1 and ids.shape[-1] > 1:
        ids = rng.permuted(ids, axis=-1)
    flat = ids.reshape(-1)
    out = np.empty(flat.size, dtype=np.int64)
    for a in range(0, flat.size, WORDS_PER_BLOCK):  # bounded memory; one block for up to 32,768 words
        block = flat[a : a + WORDS_PER_BLOCK]
        z = noisy_vectors(block, vectors, epsilon, rng)
        if known_source:  # exact decoders return the same rows; only the running time differs
            out[a : a + block.size] = decoder.decode(z, sources=block)
        else:
            out[a : a + block.size] = decoder.decode(z)
    return np.sort(out.reshape(ids.shape), axis=-1)


@dataclass(frozen=True)
class PrivateDocument:
    """One released document: the private bag plus what it guarantees.

    It holds nothing computed from the input except through the mechanism: the
    output words, the record id and the (public) guarantee. Input statistics go
    to a ``private_report`` (:class:`DocumentDiagnostics`).
    """

    id: str
    words: tuple[str, ...]
    guarantee: EarthMoversGuarantee
    decoder: str = "exact"

    def to_record(self) -> dict[str, Any]:
        """The JSON record written for this document: the output, the id and public parameters."""
        g = self.guarantee
        return {
            "id": self.id,
            "words": list(self.words),
            "mechanism": g.mechanism,
            "epsilon": g.epsilon,
            "delta": g.delta,
            "unit": g.unit,
            "size": g.size,
            "bag": g.bag,
            "dim": g.dim,
            "vocab_size": g.vocab_size,
            "embeddings": g.embeddings,
            "decoder": self.decoder,
            "seeded": g.seeded,
            "guarantee": g.statement,
        }


@dataclass(frozen=True)
class DocumentDiagnostics:
    """PRIVATE facts about one input document, for the data owner's report; never release them.

    Attributes
    ----------
    id : str
        The record id of the released document.
    n_tokens : int
        Tokens after normalisation (before the out-of-vocabulary filter).
    dropped_oov : int
        Out-of-vocabulary tokens removed (never released).
    n_in_vocabulary : int
        In-vocabulary tokens the bag was formed from.
    input_rows, output_rows : numpy.ndarray
        The input bag and the released bag as vocabulary rows (sorted), or, with
        ``aligned=True`` (word-level mechanisms), the input words and their
        replacements position by position.
    aligned : bool
        ``output_rows[i]`` replaced ``input_rows[i]`` (text mechanisms); ``False``: two bags.
    """

    id: str
    n_tokens: int
    dropped_oov: int
    n_in_vocabulary: int
    input_rows: np.ndarray = field(repr=False)
    output_rows: np.ndarray = field(repr=False)
    aligned: bool = False

    def unchanged_fraction(self) -> float:
        """Share of words released unchanged: position-wise (aligned) or multiset overlap of the bags, over N."""
        if self.aligned:
            return float(np.mean(self.output_rows == self.input_rows)) if self.input_rows.size else 0.0
        overlap = Counter(self.output_rows.tolist()) & Counter(self.input_rows.tolist())
        return sum(overlap.values()) / max(int(self.input_rows.size), 1)


PrivateReport = list[DocumentDiagnostics] | Callable[[DocumentDiagnostics], None]


class EarthMoversPrivacy(BagEstimator):
    """Earth Mover's privacy for documents (Fernandes, Dras & McIver 2019).

    Each document is normalised (lower-case letters, stop words removed), its
    out-of-vocabulary words are dropped, the rest form a bag of exactly N words,
    every word vector gets n-dimensional Laplace noise (radius ~ Gamma(n, 1/eps),
    uniform direction) and is decoded to the nearest vocabulary word.

    Guarantee (Theorem 5.1): epsilon*N*E_d-privacy between any two bags of N
    words, E_d being the Earth Mover's distance over Euclidean word-vector
    distance; with ``bag="sample"``, epsilon*N*W_inf between the documents' word
    distributions (:class:`~textdp.guarantees.EarthMoversGuarantee`). N is
    public. Smaller epsilon = more noise = more privacy. Roughly, a word survives
    when the noise radius (mean n/epsilon) is small compared with the distance to
    its nearest neighbours: on GloVe 50d about 74% of words survive at
    epsilon = 10 and 3% at epsilon = 4.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per unit of embedding distance, > 0.
    size : int or None
        Bag size N, a public parameter of the release. Required unless
        ``size_from_data=True`` (or given per call to :meth:`privatize_batch`).
    size_from_data : bool
        With ``size=None``, use the shortest document of each batch (the paper's
        protocol). This publishes that length (N is in every record), so it warns
        (:class:`~textdp.errors.PrivacyWarning`) and the guarantee says so.
    embeddings : Embeddings, path or None
        The vocabulary; ``None`` loads GloVe 6B 50d (400,000 words).
    vocab_size : int or None
        Keep only the K most frequent words of the embeddings.
    bag : {"truncate", "sample"}
        ``truncate`` keeps the first N words; ``sample`` draws N with replacement.
    stop_words : "english", iterable or None
        Words removed before forming the bag.
    seed : int, numpy.random.Generator or None
        Seed or generator for experiments (``rng=`` is its deprecated name); ``None`` (use this for releases) uses
        fresh OS entropy. Records say whether a release was seeded.
    decoder : str
        Nearest-word decoder: ``"exact"`` (default), ``"faiss-exact"`` or ``"torch"``
        (same results, faster), ``"approximate"``/``"hnsw"`` or ``"ivf"`` (opt-in; decoding
        is post-processing, so the guarantee is unchanged, but utility differs). Each
        record names the decoder used.
    known_source : bool
        Let the decoder use the input words to skip work (same output words, faster
        at epsilon >~ 35). Its running time then depends on the private words: a
        timing side channel the guarantee does not cover. For experiments only.
    postprocess : {None, "mbr"}
        ``"mbr"``: decode with :class:`~textdp.mechanisms.MBRDecoder` (the posterior
        medoid among the noisy vector's ``candidates`` nearest words) instead of the
        nearest word; a function of the noisy vector only (post-processing), so the
        guarantee is unchanged. Records name the decoder ``"mbr"``.
    candidates : int
        Candidate words of the ``"mbr"`` post-processing.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = EarthMoversPrivacy(epsilon=1e6, size=2, embeddings=emb, stop_words=None, seed=0)
    >>> doc = mech.privatize("dog cat unicorn")
    >>> doc.words, doc.guarantee.size
    (('cat', 'dog'), 2)

    Input statistics are only available through an explicit private report:

    >>> report = []
    >>> _ = mech.privatize_batch(["dog cat unicorn"], private_report=report)
    >>> report[0].dropped_oov, report[0].unchanged_fraction()
    (1, 1.0)

    The estimator also works in a scikit-learn ``Pipeline``: ``transform`` maps
    texts to private texts (the bag's words joined by spaces).

    >>> mech.fit_transform(["car dog"])
    ['dog car']
    """

    @renamed_parameter("rng", "seed")
    def __init__(
        self,
        *,
        epsilon: float,
        size: int | None = None,
        embeddings: Embeddings | str | os.PathLike[str] | None = None,
        vocab_size: int | None = None,
        bag: str = "truncate",
        stop_words: str | Iterable[str] | None = "english",
        seed: int | np.random.Generator | None = None,
        decoder: str = "exact",
        size_from_data: bool = False,
        known_source: bool = False,
        postprocess: str | None = None,
        candidates: int = 64,
    ) -> None:
        self.epsilon = epsilon
        self.size = size
        self.embeddings = embeddings
        self.vocab_size = vocab_size
        self.bag = bag
        self.stop_words = stop_words
        self.seed = seed
        self.decoder = decoder
        self.size_from_data = size_from_data
        self.known_source = known_source
        self.postprocess = postprocess
        self.candidates = candidates

    CHUNK = 128

    #: what a release holds: a bag (the private words sorted by vocabulary row)
    output = "bag"

    # -- scikit-learn protocol -------------------------------------------------
    _PARAMS = (
        "epsilon", "size", "embeddings", "vocab_size", "bag", "stop_words", "seed", "decoder", "size_from_data",
        "known_source", "postprocess", "candidates",
    )

    def fit(self, X: object = None, y: object = None) -> EarthMoversPrivacy:
        """Validate the parameters and load the embeddings (``X`` and ``y`` are ignored)."""
        self.epsilon_ = check_epsilon(self.epsilon)
        if self.size is not None:
            check_size(self.size)
        check_choice(self.bag, "bag mode", BAG_MODES)
        emb = resolve_embeddings(self.embeddings, self.vocab_size)
        self.embeddings_ = emb
        check_choice(self.decoder, "decoder", DECODERS)
        if self.postprocess is not None:
            check_choice(self.postprocess, "postprocess", POSTPROCESSORS)
            self.decoder_: Decoder = MBRDecoder(emb.vectors, epsilon=self.epsilon_, candidates=self.candidates)
        else:
            self.decoder_ = make_decoder(self.decoder, emb.vectors)
        self.rng_ = make_rng(self.seed)
        return self

    # -- the verbs ---------------------------------------------------------------
    def guarantee(self, size: int, *, seeded: bool | None = None, size_from_data: bool = False) -> EarthMoversGuarantee:
        """The guarantee of a release with bag size ``size`` (``seeded``: default, whether ``seed`` was given)."""
        self._ensure_fitted()
        emb = self.embeddings_
        return EarthMoversGuarantee(
            epsilon=self.epsilon_,
            size=check_size(size),
            dim=emb.dim,
            vocab_size=emb.vocab_size,
            embeddings=emb.name,
            bag=self.bag,
            size_from_data=bool(size_from_data),
            seeded=(self.seed is not None) if seeded is None else bool(seeded),
        )

    def privatize_ids(self, bags: np.ndarray, *, seed: int | np.random.Generator | None = None) -> np.ndarray:
        """Algorithms 1 + 2 on a ``(B, N)`` array of vocabulary rows (``seed``: default this object's generator)."""
        self._ensure_fitted()
        gen = self.rng_ if seed is None else make_rng(seed)
        return privatize_ids(
            bags, self.embeddings_.vectors, self.epsilon_, gen, self.decoder_, known_source=bool(self.known_source)
        )

    def iter_privatize_batch(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        size: int | None = None,
        seed: int | np.random.Generator | None = None,
        seeded: bool | None = None,
        size_from_data: bool | None = None,
        private_report: PrivateReport | None = None,
        progress: ProgressCallback | None = None,
        chunk: int = 128,
    ) -> Iterator[list[PrivateDocument]]:
        """:meth:`privatize_batch`, yielded a chunk of documents at a time (same arguments).

        Every document is validated (normalised, looked up, checked against N)
        before the first chunk is noised. A chunk holds at most ``chunk``
        documents and at most ``WORDS_PER_BLOCK`` words (one document when N is
        larger; its words are then noised and decoded block by block), so the
        working memory does not grow with N or with the number of documents:
        only what the caller keeps of the yielded documents does.
        """
        self._ensure_fitted()
        texts = list(texts)
        if ids is not None and len(ids) != len(texts):
            raise ParameterTypeError(f"got {len(ids)} ids for {len(texts)} texts")
        doc_ids = [str(x) for x in ids] if ids is not None else [str(i) for i in range(len(texts))]
        if not texts:
            return
        rows, n_tokens, dropped = self.prepare(texts, doc_ids)
        n, from_data = self.resolve_size(rows, size)
        from_data = from_data or bool(size_from_data)
        if self.bag == "truncate":  # a document shorter than N fails before any noise is drawn
            short = next((i for i, r in enumerate(rows) if r.size < n), None)
            if short is not None:
                make_bag(rows[short], n, self.bag, doc_id=f"document {doc_ids[short]}")
        gen = self.rng_ if seed is None else make_rng(seed)
        if seeded is None:
            seeded = seed is not None or self.seed is not None
        guarantee = self.guarantee(n, seeded=seeded, size_from_data=from_data)
        words = self.embeddings_.words
        decoder_name = str(getattr(self.decoder_, "name", self.decoder))
        emit = None
        if private_report is not None:
            emit = private_report.append if isinstance(private_report, list) else private_report
        per_chunk = max(1, min(int(chunk), WORDS_PER_BLOCK // n))
        for start in range(0, len(texts), per_chunk):
            idx = range(start, min(start + per_chunk, len(texts)))
            bags = np.stack([make_bag(rows[i], n, self.bag, gen, doc_id=f"document {doc_ids[i]}") for i in idx])
            private = privatize_ids(
                bags, self.embeddings_.vectors, self.epsilon_, gen, self.decoder_,
                known_source=bool(self.known_source),
            )
            if emit is not None:
                for k, i in enumerate(idx):
                    emit(DocumentDiagnostics(
                        id=doc_ids[i], n_tokens=n_tokens[i], dropped_oov=dropped[i],
                        n_in_vocabulary=int(rows[i].size), input_rows=np.sort(bags[k]),
                        output_rows=private[k].copy(),
                    ))
            if progress is not None:
                progress(idx.stop, len(texts))
            yield [
                PrivateDocument(
                    id=doc_ids[i], words=tuple(words[j] for j in private[k]), guarantee=guarantee,
                    decoder=decoder_name,
                )
                for k, i in enumerate(idx)
            ]

