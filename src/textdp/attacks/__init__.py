"""Attackers that measure what a privatised text still reveals.

* :class:`KoppelAttacker` -- Koppel et al. (2011) character 4-gram attribution,
  the PAN replication and the original reading (different representation).
* :class:`NearestNeighbourAttacker` -- 1-NN authorship / k-NN topic in the word
  embedding space (same representation; Fernandes et al. 2019, Section 6).
* :class:`CharNgramAttacker` -- character n-gram TF-IDF + linear classifier
  (the PAN 2019 baseline family); needs the ``eval`` extra.
* :class:`SentenceEmbeddingAttacker` -- 1-NN on all-MiniLM-L6-v2 sentence
  embeddings; needs the ``minilm`` extra.
"""

from __future__ import annotations

from .char_ngrams import CharNgramAttacker
from .koppel import VARIANTS, KoppelAttacker, KoppelResult, KoppelVariant, token_grams
from .neighbours import NearestNeighbourAttacker, document_vectors, emd_distance_matrix
from .sentence import SentenceEmbeddingAttacker, minilm_embed

__all__ = [
    "VARIANTS",
    "CharNgramAttacker",
    "KoppelAttacker",
    "KoppelResult",
    "KoppelVariant",
    "NearestNeighbourAttacker",
    "SentenceEmbeddingAttacker",
    "document_vectors",
    "emd_distance_matrix",
    "minilm_embed",
    "token_grams",
]
