"""The immutable :class:`Embeddings` object."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._validation import check_positive_int
from ..errors import EmbeddingsError, ParameterError


@dataclass(frozen=True, eq=False)
class Embeddings:
    """A vocabulary with one float32 vector per word.

    Parameters
    ----------
    words : sequence of str
        The vocabulary, row order (most frequent first for GloVe/word2vec).
    vectors : numpy.ndarray
        ``(V, d)`` matrix; stored as a read-only C-ordered float32 array.
    name : str
        A short description of the source, recorded in output metadata.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog"], np.array([[0, 1], [1, 0]]), name="toy")
    >>> emb.vocab_size, emb.dim, emb.index["dog"]
    (2, 2, 1)
    >>> emb.ids(["dog", "unicorn", "cat"])
    (array([1, 0]), 1)
    """

    words: tuple[str, ...]
    vectors: np.ndarray
    name: str = "custom"
    index: Mapping[str, int] = field(init=False, repr=False)

    def __init__(self, words: Sequence[str], vectors: np.ndarray, name: str = "custom") -> None:
        words_t = tuple(str(w) for w in words)
        arr = np.asarray(vectors)
        if arr.ndim != 2:
            raise EmbeddingsError(f"embedding matrix must be 2-D (V, d), got shape {arr.shape}")
        if arr.shape[0] != len(words_t):
            raise EmbeddingsError(
                f"embeddings have {arr.shape[0]} vectors but {len(words_t)} words; "
                "the words file and the matrix do not match"
            )
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise EmbeddingsError(f"embeddings are empty (shape {arr.shape})")
        if arr.dtype != np.float32 or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.flags.writeable:
            arr = arr.view()
            arr.flags.writeable = False
        index: dict[str, int] = {}
        for i, w in enumerate(words_t):
            index.setdefault(w, i)  # first (most frequent) row wins for duplicates
        object.__setattr__(self, "words", words_t)
        object.__setattr__(self, "vectors", arr)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "index", MappingProxyType(index))

    def __repr__(self) -> str:
        return f"Embeddings(name={self.name!r}, vocab_size={self.vocab_size}, dim={self.dim})"

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    @property
    def vocab_size(self) -> int:
        """Number of words V."""
        return len(self.words)

    @property
    def dim(self) -> int:
        """Vector dimension d (the paper's n)."""
        return int(self.vectors.shape[1])

    def ids(self, tokens: Iterable[str]) -> tuple[np.ndarray, int]:
        """Rows of the in-vocabulary ``tokens`` (order kept) and the number dropped as OOV."""
        index = self.index
        rows = []
        dropped = 0
        for t in tokens:
            r = index.get(t)
            if r is None:
                dropped += 1
            else:
                rows.append(r)
        return np.asarray(rows, dtype=np.int64), dropped

    def vector(self, word: str) -> np.ndarray:
        """The vector of ``word`` (raises :class:`KeyError` if absent)."""
        return self.vectors[self.index[word]]

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Words for an integer array of rows (same shape, dtype object)."""
        return np.asarray(self.words, dtype=object)[np.asarray(ids)]

    def restrict(self, top_k: int | None = None, words: Iterable[str] | None = None) -> Embeddings:
        """A smaller vocabulary: the ``top_k`` first rows and/or only ``words``.

        Restricting to words seen in a domain corpus is the paper's remedy for
        out-of-domain outputs such as ``ENERGY_STAR`` (Appendix B.3). Row order
        is kept. Decoding against a restricted public vocabulary is
        post-processing and does not change the privacy guarantee; the input
        words must still be in the (restricted) vocabulary to be released.

        >>> emb = Embeddings(list("abcd"), np.eye(4), name="toy")
        >>> emb.restrict(top_k=3, words=["c", "a", "z"]).words
        ('a', 'c')
        """
        keep = np.arange(self.vocab_size)
        name = self.name
        if top_k is not None:
            top_k = check_positive_int(top_k, "vocab_size")
            keep = keep[:top_k]
            name += f"[top {top_k}]"
        if words is not None:
            wanted = {str(w) for w in words}
            mask = np.fromiter((self.words[i] in wanted for i in keep), dtype=bool, count=keep.size)
            keep = keep[mask]
            name += f"[domain {len(wanted)} words]"
        if keep.size == 0:
            raise ParameterError("vocabulary restriction left no words")
        if keep.size == self.vocab_size:
            return self
        return Embeddings([self.words[i] for i in keep], self.vectors[keep], name=name)
