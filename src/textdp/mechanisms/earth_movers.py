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

from collections.abc import Sequence

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon
from ..embeddings import (
    DECODERS,
    Decoder,
    ExactDecoder,
    make_decoder,
)
from ..errors import DocumentError
from ..guarantees import EARTH_MOVERS_REFERENCE, EarthMoversGuarantee
from ..text import BAG_MODES, make_bag
from .base import ReleaseContext, SeedLike
from .common import WORDS_PER_BLOCK, BagMechanism, BagOutput, PreparedText
from .laplace import laplace_noise
from .mbr import POSTPROCESSORS, MBRDecoder

__all__ = ["EarthMoversPrivacy", "noisy_vectors", "privatize_ids"]


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



def _too_short(first: PreparedText, n: int, count: int, total: int) -> DocumentError:
    """``bag="truncate"`` and documents with fewer than N in-vocabulary words: the first one's id, how many, and
    the ways out (Python's words; the command line's in ``cli``)."""
    what = (f"document {first.uid}: only {first.rows.size} in-vocabulary words, fewer than the bag size N={n}; "
            f"{count} of the {total} documents {'is' if count == 1 else 'are'} shorter than N, which truncation needs")
    return DocumentError(f"{what}: lower size, use bag='sample' (N words drawn with replacement: short documents "
                         "work), or leave them out",
                         cli=f"{what}: lower --size, use --bag sample (N words drawn with replacement: short "
                         "documents work), or remove them from the input (--empty skip leaves out only documents "
                         "with no in-vocabulary word)")

class EarthMoversPrivacy(BagMechanism):
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
        Seed or generator for experiments; ``None`` (use this for releases) uses fresh OS entropy.
        Records say whether a release was seeded.
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
    >>> from textdp.embeddings import Embeddings
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
    texts to private texts (the bag's words joined by spaces). Every call is a new release that
    spends ε again: it charges a ledger given with ``set_ledger``, else it warns.

    >>> import warnings
    >>> from textdp.errors import UnrecordedSpendWarning
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always", UnrecordedSpendWarning)
    ...     mech.fit_transform(["car dog"])
    ['dog car']
    >>> seen[0].category.__name__
    'UnrecordedSpendWarning'
    """

    bag: str = "truncate"
    decoder: str = "exact"
    known_source: bool = False
    postprocess: str | None = None
    candidates: int = 64

    name = "earth-movers"
    reference = EARTH_MOVERS_REFERENCE
    chunk_size = 128

    def _fit(self) -> None:
        self._check_epsilon_and_size()
        check_choice(self.bag, "bag mode", BAG_MODES)
        emb = self._load_embeddings()
        check_choice(self.decoder, "decoder", DECODERS)
        if self.postprocess is not None:
            check_choice(self.postprocess, "postprocess", POSTPROCESSORS)
            self.decoder_: Decoder = MBRDecoder(emb.vectors, epsilon=self.epsilon_, candidates=self.candidates)
        else:
            self.decoder_ = make_decoder(self.decoder, emb.vectors)

    def guarantee(self, context: ReleaseContext | None = None) -> EarthMoversGuarantee:
        """The guarantee of a release with bag size ``context.size`` (default: the constructor's ``size``)."""
        ctx, size = self._guarantee_context(context)
        emb = self.embeddings_
        return EarthMoversGuarantee(
            epsilon=self.epsilon_, size=size, dim=emb.dim, vocab_size=emb.vocab_size,
            embeddings=emb.name, bag=self.bag, size_from_data=ctx.size_from_data, seeded=ctx.seeded,
            empty=ctx.empty, decoder=str(getattr(self.decoder_, "name", self.decoder)),
        )

    def release_context(self, prepared: Sequence[PreparedText], *, size: int | None = None,
                        size_from_data: bool = False, seeded: bool = False,
                        empty: str = "error") -> ReleaseContext:
        """The bag size N; with ``bag="truncate"`` a document shorter than N fails here, before any noise."""
        ctx = super().release_context(prepared, size=size, size_from_data=size_from_data, seeded=seeded,
                                      empty=empty)
        n = int(ctx.size or 0)
        if self.bag == "truncate":
            shorts = [p for p in prepared if 0 < p.rows.size < n]
            if shorts:
                raise _too_short(shorts[0], n, len(shorts), len(prepared))
            short = next((p for p in prepared if p.rows.size < n), None)
            if short is not None:
                make_bag(short.rows, n, self.bag, doc_id=f"document {short.uid}")
        return ctx

    def privatize_ids(self, bags: np.ndarray, *, seed: SeedLike = None) -> np.ndarray:
        """Algorithms 1 + 2 on a ``(B, N)`` array of vocabulary rows (``seed``: default this object's generator)."""
        self._ensure_fitted()
        gen = self.rng_ if seed is None else make_rng(seed)
        return privatize_ids(
            bags, self.embeddings_.vectors, self.epsilon_, gen, self.decoder_, known_source=bool(self.known_source)
        )

    def _privatize(self, prepared: Sequence[PreparedText], context: ReleaseContext,
                   rng: np.random.Generator) -> list[BagOutput]:
        n = int(context.size or 0)
        bags = np.stack([make_bag(p.rows, n, self.bag, rng, doc_id=f"document {p.uid}") for p in prepared])
        private = privatize_ids(bags, self.embeddings_.vectors, self.epsilon_, rng, self.decoder_,
                                known_source=bool(self.known_source))
        return [BagOutput(bags[k], private[k]) for k in range(len(prepared))]
