"""What every mechanism's ``fit`` and document step share: the vocabulary, the rows of a text, the bag size.

One copy of each, used by :class:`~textdp.mechanisms.EarthMoversPrivacy`,
:class:`~textdp.mechanisms.syntf.SynTFPrivacy` and the word-level mechanisms.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Self

import numpy as np

from .._validation import check_size, check_texts
from ..embeddings import Embeddings, load_embeddings
from ..errors import DocumentError, ParameterError, ParameterTypeError, PrivacyWarning
from ..progress import ProgressCallback
from ..text import normalize

__all__ = ["SIZE_FROM_DATA_WARNING", "BagEstimator", "resolve_bag_size", "resolve_embeddings", "text_rows"]

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


class BagEstimator:
    """What the bag mechanisms (Earth Mover's, SynTF) share: the scikit-learn protocol and the batch verbs.

    A subclass sets ``_PARAMS`` (its constructor parameters) and ``CHUNK`` (documents per
    chunk by default) and implements ``fit`` and ``iter_privatize_batch``; ``get_params``,
    ``set_params``, ``transform``, ``prepare``, ``resolve_size``, ``privatize_batch`` and
    ``privatize`` are defined once, here.
    """

    _PARAMS: tuple[str, ...] = ()
    CHUNK = 128
    size: int | None
    size_from_data: bool
    stop_words: str | Iterable[str] | None
    embeddings_: Embeddings

    def fit(self, X: object = None, y: object = None) -> Self:  # pragma: no cover - every subclass has one
        raise NotImplementedError

    def iter_privatize_batch(
        self, texts: Sequence[str], ids: Sequence[str] | None = None, *, size: int | None = None,
        seed: int | np.random.Generator | None = None, seeded: bool | None = None,
        size_from_data: bool | None = None, private_report: Any = None,
        progress: ProgressCallback | None = None, chunk: int = 128,
    ) -> Iterator[list[Any]]:  # pragma: no cover - every subclass has one
        raise NotImplementedError

    # -- scikit-learn protocol -------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn protocol)."""
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params: Any) -> Self:
        """Set constructor parameters (scikit-learn protocol); call ``fit`` again afterwards."""
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ParameterTypeError(f"unknown parameter {k!r}; valid: {', '.join(self._PARAMS)}")
            setattr(self, k, v)
        self.__dict__.pop("embeddings_", None)
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

    # -- the document step -------------------------------------------------------
    def prepare(
        self, texts: Sequence[str], ids: Sequence[str] | None = None
    ) -> tuple[list[np.ndarray], list[int], list[int]]:
        """Normalize and look up each text: in-vocabulary rows, token counts, OOV counts.

        These describe the private input; callers must not release them (:func:`text_rows`).
        """
        self._ensure_fitted()
        return text_rows(texts, ids, self.embeddings_, self.stop_words)

    def resolve_size(self, rows: Sequence[np.ndarray], size: int | None = None) -> tuple[int, bool]:
        """The bag size N of a batch and whether it came from the data (which warns).

        ``size`` (per call) wins over the constructor's ``size``; with neither,
        ``size_from_data=True`` is required (:func:`resolve_bag_size`).
        """
        return resolve_bag_size(rows, size, self.size, self.size_from_data)

    def privatize_batch(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        size: int | None = None,
        seed: int | np.random.Generator | None = None,
        seeded: bool | None = None,
        size_from_data: bool | None = None,
        private_report: Any = None,
        progress: ProgressCallback | None = None,
        chunk: int | None = None,
    ) -> list[Any]:
        """Privatise a batch of texts; see the class docstring for the steps.

        Parameters
        ----------
        texts, ids : sequences of str
            The documents and their record ids (default: ``"0"``, ``"1"``, ...).
        size : int, optional
            Bag size N for this call (default: the constructor's ``size``).
        seed : int or numpy.random.Generator, optional
            Randomness for this call (default: this object's generator). Nothing
            on the estimator is modified, so one fitted estimator can serve many
            partitions at once.
        seeded : bool, optional
            Whether the randomness came from a user seed, as recorded in the
            guarantee (default: ``seed`` here or in the constructor was given).
        size_from_data : bool, optional
            Record that ``size`` was computed from the data by the caller (the
            guarantee then says so).
        private_report : list or callable, optional
            Receives one :class:`~textdp.mechanisms.DocumentDiagnostics` per document (appended to a
            list, or passed to a callable). PRIVATE: describes the input.
        progress : callable, optional
            ``progress(done, total)`` (:mod:`textdp.progress`): documents finished, after each chunk.
        chunk : int, optional
            At most this many documents are privatized at once (fewer when N is
            large; default: the mechanism's ``CHUNK``; see ``iter_privatize_batch``).

        Every document is validated before any noise is drawn, so a bad document
        fails the whole batch early.
        """
        return [
            doc
            for part in self.iter_privatize_batch(
                texts, ids, size=size, seed=seed, seeded=seeded, size_from_data=size_from_data,
                private_report=private_report, progress=progress, chunk=self.CHUNK if chunk is None else chunk,
            )
            for doc in part
        ]

    def privatize(self, texts: str | Iterable[str], **kwargs: Any) -> Any:
        """Privatize one text (one release document) or an iterable of texts (a list of them).

        Keyword arguments go to :meth:`privatize_batch`.
        """
        batch = check_texts(texts)  # bytes or None: a one-line error, not "got int"
        if batch is None:
            return self.privatize_batch([str(texts)], **kwargs)[0]
        return self.privatize_batch(batch, **kwargs)
