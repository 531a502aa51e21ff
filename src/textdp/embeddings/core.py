"""The immutable :class:`Embeddings` object."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from .._options import OUTPUT_VOCABULARIES
from .._validation import check_positive_int
from ..errors import EmbeddingsError, ParameterError


@runtime_checkable
class EmbeddingsLike(Protocol):
    """What the attacks, the auditor and the utility models read from a vocabulary.

    :class:`Embeddings` satisfies it; so does any object with these attributes (a
    fitted mechanism's ``embeddings_``, a test double built from real vectors).

    >>> isinstance(Embeddings(["a"], np.zeros((1, 2))), EmbeddingsLike)
    True
    """

    @property
    def words(self) -> Sequence[str]: ...

    @property
    def vectors(self) -> np.ndarray: ...

    @property
    def index(self) -> Mapping[str, int]: ...


@dataclass(frozen=True, eq=False)
class Embeddings:
    """A vocabulary with one float32 vector per word.

    Parameters
    ----------
    words : sequence of str
        The vocabulary, row order (most frequent first for GloVe/word2vec).
    vectors : numpy.ndarray
        ``(V, d)`` matrix of real numbers; stored as a read-only C-ordered float32
        array. A NaN or infinite value (also one beyond the float32 range) is
        refused with an :class:`~textdp.errors.EmbeddingsError` naming the word.
    name : str
        A short description of the source, recorded in output metadata.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog"], np.array([[0, 1], [1, 0]]), name="toy")
    >>> emb.vocab_size, emb.dim, emb.index["dog"]
    (2, 2, 1)
    >>> emb.ids(["dog", "unicorn", "cat"])
    (array([1, 0]), 1)
    >>> Embeddings(["cat", "dog"], np.array([[0, 1], [np.inf, 0]]), name="toy")
    Traceback (most recent call last):
    textdp.errors.EmbeddingsError: embeddings toy: the vector of 'dog' (row 1) holds NaN or infinity; remove that word from the embeddings and load again
    """

    words: tuple[str, ...]
    vectors: np.ndarray
    name: str = "custom"
    index: Mapping[str, int] = field(init=False, repr=False)

    def __init__(self, words: Sequence[str], vectors: np.ndarray, name: str = "custom") -> None:
        self._setup(words, vectors, name, check=True)

    @classmethod
    def _validated(cls, words: Sequence[str], vectors: np.ndarray, name: str) -> Embeddings:
        """Build from vectors already known to be finite (a verified cache entry, a restriction)."""
        obj = cls.__new__(cls)
        obj._setup(words, vectors, name, check=False)
        return obj

    def _setup(self, words: Sequence[str], vectors: np.ndarray, name: str, *, check: bool) -> None:
        name = str(name)
        if isinstance(words, (str, bytes)):
            raise EmbeddingsError(f"embeddings {name}: words must be a sequence of words, not one string")
        words_t = tuple(str(w) for w in words)
        arr = as_float32_matrix(vectors, name)
        if arr.shape[0] != len(words_t):
            raise EmbeddingsError(
                f"embeddings have {arr.shape[0]} vectors but {len(words_t)} words; "
                "the words file and the matrix do not match"
            )
        if check:
            check_finite(words_t, arr, name)
        if arr.flags.writeable:
            arr = arr.view()
            arr.flags.writeable = False
        index = dict(zip(words_t, range(len(words_t))))
        if len(index) != len(words_t):  # duplicates: the first (most frequent) row wins
            index = dict(zip(reversed(words_t), range(len(words_t) - 1, -1, -1)))
        object.__setattr__(self, "words", words_t)
        object.__setattr__(self, "vectors", arr)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "index", MappingProxyType(index))

    def __repr__(self) -> str:
        return f"Embeddings(name={self.name!r}, vocab_size={self.vocab_size}, dim={self.dim})"

    # immutable (read-only vectors, a read-only index): copies share it, as scikit-learn's ``clone`` expects
    def __copy__(self) -> Embeddings:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Embeddings:
        return self

    def __reduce__(self) -> tuple[Callable[[Sequence[str], np.ndarray, str], Embeddings],
                                  tuple[tuple[str, ...], np.ndarray, str]]:
        """Pickle by words, vectors and name (for process pools such as joblib's)."""
        return (Embeddings._validated, (self.words, np.asarray(self.vectors), self.name))

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

    def restrict(
        self, top_k: int | None = None, words: Iterable[str] | None = None, *, label: str | None = None
    ) -> Embeddings:
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
            name += f"[{label}]" if label else f"[domain {len(wanted)} words]"
        if keep.size == 0:
            raise ParameterError("vocabulary restriction left no words")
        if keep.size == self.vocab_size:
            return self
        return Embeddings._validated([self.words[i] for i in keep], self.vectors[keep], name)


#: Rows checked per step by :func:`check_finite` (bounds the temporary boolean array).
_CHUNK_ROWS = 1 << 16


def as_float32_matrix(vectors: object, name: str) -> np.ndarray:
    """``vectors`` as a C-ordered float32 ``(V, d)`` array, or a one-line :class:`EmbeddingsError`.

    Only real numbers are accepted (bool, integer or floating dtypes); values beyond
    the float32 range become infinite here and are refused by :func:`check_finite`.

    >>> as_float32_matrix([[1, 2]], "toy").dtype
    dtype('float32')
    >>> as_float32_matrix(np.array([["1", "2"]]), "toy")
    Traceback (most recent call last):
    textdp.errors.EmbeddingsError: embeddings toy: vectors must be real numbers, got dtype <U1
    """
    try:
        arr = np.asarray(vectors)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise EmbeddingsError(f"embeddings {name}: vectors are not a (V, d) matrix of numbers ({exc})") from None
    if arr.dtype.kind not in "biuf":
        raise EmbeddingsError(f"embeddings {name}: vectors must be real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise EmbeddingsError(f"embedding matrix must be 2-D (V, d), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise EmbeddingsError(f"embeddings are empty (shape {arr.shape})")
    if arr.dtype != np.float32 or not arr.flags.c_contiguous:
        with np.errstate(over="ignore", invalid="ignore"):
            arr = np.ascontiguousarray(arr, dtype=np.float32)
    return arr


def check_finite(words: Sequence[str], vectors: np.ndarray, name: str) -> None:
    """Refuse a matrix holding NaN or infinity, naming the first bad word and row.

    One vectorised pass in blocks of rows (about 6 ms for GloVe 6B 50d). A
    non-finite vector would otherwise poison nearest-word decoding (every distance
    to it is NaN, so every word decodes to row 0, silently).

    >>> check_finite(["a", "b"], np.array([[0.0], [np.nan]], dtype=np.float32), "toy")
    Traceback (most recent call last):
    textdp.errors.EmbeddingsError: embeddings toy: the vector of 'b' (row 1) holds NaN or infinity; remove that word from the embeddings and load again
    """
    for start in range(0, vectors.shape[0], _CHUNK_ROWS):
        block = np.asarray(vectors[start : start + _CHUNK_ROWS])
        if not np.isfinite(block).all():
            row = start + int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
            word = words[row] if row < len(words) else "?"
            shown = repr(word) if len(word) <= 60 else repr(word[:60]) + "..."
            raise EmbeddingsError(
                f"embeddings {name}: the vector of {shown} (row {row}) holds NaN or infinity; "
                "remove that word from the embeddings and load again"
            )


#: What an API taking embeddings accepts: loaded ones, a file path, or ``None`` for GloVe 6B 50d.
EmbeddingsSource = Embeddings | str | os.PathLike[str] | None


def output_vocabulary(
    emb: Embeddings, kind: str = "full", stop_words: str | Iterable[str] | None = "english"
) -> Embeddings:
    """The vocabulary a mechanism may release: all of ``emb`` or only its *words*.

    ``kind="words"`` keeps the rows ``w`` with ``normalize(w, stop_words) == [w]``:
    lower-case letter runs of two letters or more that are not stop words. GloVe's
    punctuation tokens (``''``, ``_``), numbers and stop words (``but``) are then never
    output. Input words are normalised the same way, so every protected input word is
    still in the vocabulary; only the candidate outputs shrink. The choice depends on
    the public vocabulary alone (post-processing: the guarantee is unchanged, stated
    over the smaller vocabulary). On GloVe 6B 50d, 326,568 of the 400,000 rows remain.

    >>> emb = Embeddings(["the", "cat", "''", "_", "dog", "2019"], np.eye(6), name="toy")
    >>> output_vocabulary(emb, "words").words, output_vocabulary(emb, "words").name
    (('cat', 'dog'), 'toy[words]')
    >>> output_vocabulary(emb, "full") is emb
    True
    """
    from ..text import normalize

    if kind not in OUTPUT_VOCABULARIES:
        raise ParameterError(f"unknown output vocabulary {kind!r}; choose one of: {', '.join(OUTPUT_VOCABULARIES)}")
    if kind == "full":
        return emb
    keep = [w for w in emb.words if normalize(w, stop_words) == [w]]
    return emb.restrict(words=keep, label="words")
