"""What every mechanism's ``fit`` and document step share: the vocabulary, the rows of a text, the bag size.

One copy of each, used by :class:`~textdp.mechanisms.EarthMoversPrivacy`,
:class:`~textdp.mechanisms.syntf.SynTFPrivacy` and the word-level mechanisms.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from .._validation import check_size
from ..embeddings import Embeddings, load_embeddings
from ..errors import DocumentError, ParameterError, ParameterTypeError, PrivacyWarning
from ..text import normalize

__all__ = ["SIZE_FROM_DATA_WARNING", "resolve_bag_size", "resolve_embeddings", "text_rows"]

SIZE_FROM_DATA_WARNING = (
    "the bag size N is taken from the data (the shortest document's in-vocabulary length, N={n}); N is "
    "published with every record, so this reveals that length. Pass a public size instead."
)


def resolve_embeddings(embeddings: Embeddings | str | os.PathLike[str] | None, vocab_size: int | None) -> Embeddings:
    """The public vocabulary of a mechanism: an :class:`Embeddings`, a path, or ``None`` (GloVe 6B 50d).

    >>> emb = Embeddings(["a", "b", "c"], np.eye(3), name="toy")
    >>> resolve_embeddings(emb, 2).words
    ('a', 'b')
    """
    if isinstance(embeddings, Embeddings):
        return embeddings.restrict(top_k=vocab_size) if vocab_size is not None else embeddings
    if embeddings is None or isinstance(embeddings, (str, os.PathLike)):
        return load_embeddings(embeddings, vocab_size=vocab_size)
    raise ParameterTypeError(f"embeddings must be an Embeddings, a path or None, got {type(embeddings).__name__}")


def text_rows(
    texts: Sequence[str], ids: Sequence[str] | None, embeddings: Embeddings, stop_words: str | Iterable[str] | None
) -> tuple[list[np.ndarray], list[int], list[int]]:
    """Normalize and look up each text: in-vocabulary rows, token counts, OOV counts (PRIVATE).

    Every text is checked before anything else happens: a text that is not a ``str``,
    empty after normalization, or without any vocabulary word is a one-line error.

    >>> emb = Embeddings(["cat", "dog"], np.eye(2), name="toy")
    >>> rows, n_tokens, dropped = text_rows(["the cat and a zebra"], None, emb, "english")
    >>> rows[0].tolist(), n_tokens, dropped
    ([0], [2], [1])
    """
    rows, n_tokens, dropped = [], [], []
    for i, text in enumerate(texts):
        doc_id = ids[i] if ids is not None else str(i)
        if not isinstance(text, str):
            raise ParameterTypeError(f"document {doc_id}: text must be a str, got {type(text).__name__}")
        tokens = normalize(text, stop_words)
        if not tokens:
            raise DocumentError(f"document {doc_id}: empty after normalisation (no words left)")
        r, oov = embeddings.ids(tokens)
        if r.size == 0:
            raise DocumentError(
                f"document {doc_id}: none of its {len(tokens)} words is in the vocabulary "
                f"({embeddings.name}, {embeddings.vocab_size} words)"
            )
        rows.append(r)
        n_tokens.append(len(tokens))
        dropped.append(oov)
    return rows, n_tokens, dropped


def resolve_bag_size(
    rows: Sequence[np.ndarray], size: int | None, default: int | None, size_from_data: bool
) -> tuple[int, bool]:
    """The public bag size N of a batch and whether it came from the data (which warns).

    ``size`` (per call) wins over ``default`` (the constructor's); with neither, N is the
    shortest document's in-vocabulary length if ``size_from_data``, else a one-line error.
    """
    if size is None:
        size = default
    if size is not None:
        return check_size(size), False
    if not size_from_data:
        raise ParameterError(
            "the bag size N must be public: pass size=N (CLI: --size N), or size_from_data=True "
            "(CLI: --size-from-data) to use the shortest document's length, which that reveals"
        )
    n = min(int(r.size) for r in rows)
    warnings.warn(SIZE_FROM_DATA_WARNING.format(n=n), PrivacyWarning, stacklevel=4)
    return n, True
