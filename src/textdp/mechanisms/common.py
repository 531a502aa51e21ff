"""What the text families share on top of :class:`~textdp.mechanisms.base.Mechanism`.

* :class:`TextMechanism` - texts in: :func:`textdp.text.normalize`, then the public
  vocabulary's rows (out-of-vocabulary tokens dropped, never released); the document and
  word families derive from it.
* :class:`BagMechanism` - the document family (``releases = "bag"``): every document becomes
  exactly N words (a public size), released sorted by vocabulary row as a :class:`PrivateDocument`.
* :class:`DocumentDiagnostics` - the PRIVATE report entry of one document.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar, Unpack, overload

import numpy as np

from .._options import SIZE_FROM_DATA_WARNING
from .._validation import check_size, check_texts
from ..embeddings import Embeddings, ExactDecoder, load_embeddings
from ..errors import DocumentError, ParameterError, ParameterTypeError, PrivacyWarning
from ..guarantees import Guarantee, ReleaseRecord
from ..text import normalize
from .base import BatchOptions, Mechanism, ReleaseContext, SeedLike

__all__ = [
    "SIZE_FROM_DATA_WARNING", "WORDS_PER_BLOCK", "BagMechanism", "BagOutput", "DocumentDiagnostics", "PreparedText",
    "PrivateDocument", "TextMechanism", "resolve_bag_size", "resolve_embeddings",
]

#: Words noised and decoded at once: bounds the working memory (about 2 KB per word for
#: 50-d vectors: the float64 noise, the noisy vectors and the decoder's scores) whatever N is.
WORDS_PER_BLOCK = 32_768


R = TypeVar("R", bound=ReleaseRecord)
O = TypeVar("O")  # noqa: E741


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
    if not rows:
        raise ParameterError("size_from_data needs at least one document with an in-vocabulary word")
    n = min(int(r.size) for r in rows)
    warnings.warn(SIZE_FROM_DATA_WARNING.format(n=n), PrivacyWarning, stacklevel=5)
    return n, True


@dataclass(frozen=True)
class PreparedText:
    """PRIVATE: one text's record id, in-vocabulary rows, normalised token count and out-of-vocabulary count."""

    uid: str
    rows: np.ndarray
    n_tokens: int
    dropped_oov: int


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
        In-vocabulary tokens the bag was formed from (0: the document was emptied or skipped).
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

    @property
    def emptied(self) -> bool:
        """The document had no in-vocabulary word (released empty, or skipped)."""
        return self.n_in_vocabulary == 0

    def unchanged_fraction(self) -> float:
        """Share of words released unchanged: position-wise (aligned) or multiset overlap of the bags, over N."""
        if self.aligned:
            return float(np.mean(self.output_rows == self.input_rows)) if self.input_rows.size else 0.0
        overlap = Counter(self.output_rows.tolist()) & Counter(self.input_rows.tolist())
        return sum(overlap.values()) / max(int(self.input_rows.size), 1)


@dataclass(frozen=True)
class BagOutput:
    """One document's core output: the PRIVATE input bag (for the report) and the released rows (sorted)."""

    bag: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class PrivateDocument(ReleaseRecord):
    """One released bag: the record id, the N private words (sorted by vocabulary row), the guarantee.

    It holds nothing computed from the input except through the mechanism; input
    statistics go to a ``private_report`` (:class:`DocumentDiagnostics`).
    """

    release: str = "bag"
    content: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """The released words."""
        return self.content


class TextMechanism(Mechanism[PreparedText, O, R], Generic[O, R]):
    """Texts in: normalised, looked up in the public vocabulary (OOV tokens dropped, never released).

    The parameters every text mechanism takes are declared here, once (a mechanism adds its own
    below them); ``_fit`` calls :meth:`_load_embeddings`.

    Parameters
    ----------
    epsilon : float
        The privacy parameter (its unit is the family's: per word, per unit of distance, per document).
    embeddings : Embeddings, path or None
        The public vocabulary; ``None`` loads GloVe 6B 50d (400,000 words).
    vocab_size : int, optional
        Keep the K most frequent words.
    stop_words : "english", iterable or None
        Removed before the mechanism (never released).
    seed : int, Generator, SeedSequence or None
        ``None`` (the default) uses fresh OS entropy; a seed is for experiments.
    """

    #: stop words are kept in place (CusText+), not removed before the mechanism
    keeps_stop_words: ClassVar[bool] = False

    epsilon: float | None
    embeddings: Embeddings | str | os.PathLike[str] | None = None
    vocab_size: int | None = None
    stop_words: str | Iterable[str] | None = "english"
    seed: SeedLike = None

    def _load_embeddings(self) -> Embeddings:
        self.embeddings_ = resolve_embeddings(self.embeddings, self.vocab_size)
        return self.embeddings_

    @property
    def removes_stop_words(self) -> bool:
        """Stop words are removed before the mechanism (``stop_words`` given and not kept in place)."""
        return self.stop_words is not None and not self.keeps_stop_words and self.stop_words != ()

    def _prepare(self, unit: object, uid: str) -> PreparedText:
        if not isinstance(unit, str):
            raise ParameterTypeError(f"document {uid}: text must be a str, got {type(unit).__name__}")
        tokens = normalize(unit, None if self.keeps_stop_words else self.stop_words)
        rows, oov = self.embeddings_.ids(tokens)
        return PreparedText(uid, rows, len(tokens), int(oov))

    def _is_empty(self, prepared: PreparedText) -> bool:
        return prepared.rows.size == 0

    def _empty_message(self, uid: str, prepared: PreparedText) -> str:
        if prepared.n_tokens == 0:
            return f"document {uid}: no in-vocabulary word: empty after normalisation (no words left)"
        emb = self.embeddings_
        return (f"document {uid}: no in-vocabulary word: none of its {prepared.n_tokens} words is in the vocabulary "
                f"({emb.name}, {emb.vocab_size} words)")

    # an array of texts is a batch here (one unit in the base, whose topic matrices are arrays): hence the override
    @overload  # type: ignore[override]
    def privatize(self, units: str, **kwargs: Unpack[BatchOptions]) -> R: ...  # type: ignore[overload-overlap]

    @overload
    def privatize(self, units: Iterable[object], **kwargs: Unpack[BatchOptions]) -> list[R]: ...  # type: ignore[overload-overlap]

    @overload
    def privatize(self, units: object, **kwargs: Unpack[BatchOptions]) -> R: ...

    def privatize(self, units: object, **kwargs: Unpack[BatchOptions]) -> R | list[R]:
        """Privatize one text (one record) or an iterable of texts (a list); keywords as :meth:`privatize_batch`.

        ``bytes`` and ``None`` are refused in one line (iterating bytes would give integers).
        Typed by overloads: a ``str`` gives one record ``R``, an iterable of texts a ``list[R]``.
        """
        batch = check_texts(units)
        if batch is None:
            return self.privatize_batch([str(units)], **kwargs)[0]
        return self.privatize_batch(batch, **kwargs)

    def limit_threads(self, n: int) -> None:
        """Let this mechanism's exact nearest-word decoder use at most ``n`` threads (others: nothing to do)."""
        self._ensure_fitted()
        decoder = vars(self).get("decoder_")
        if isinstance(decoder, ExactDecoder):
            decoder.threads = max(1, int(n))

    def set_decoder_precision(self, precision: str) -> None:
        """Run this mechanism's exact decoder in ``precision`` (``auto``, ``float32``, ``bfloat16``; same words).

        Other decoders (and mechanisms without one) have no such setting: nothing to do.
        """
        self._ensure_fitted()
        decoder = vars(self).get("decoder_")
        if isinstance(decoder, ExactDecoder):
            decoder.set_precision(precision)

    def prepare(self, texts: Sequence[str], ids: Sequence[str] | None = None
                ) -> tuple[list[np.ndarray], list[int], list[int]]:
        """PRIVATE: each text's in-vocabulary rows, token count and OOV count (a text with none is an error).

        For callers that measure documents (:func:`textdp.accounting.document_guarantee`); never release these.
        """
        self._ensure_fitted()
        uids = [str(i) for i in range(len(texts))] if ids is None else [str(x) for x in ids]
        prepared = [self._prepare(t, u) for t, u in zip(texts, uids, strict=True)]
        for p in prepared:
            if self._is_empty(p):
                raise DocumentError(self._empty_message(p.uid, p))
        return [p.rows for p in prepared], [p.n_tokens for p in prepared], [p.dropped_oov for p in prepared]

    def tokens(self, text: str, doc_id: str = "document") -> np.ndarray:
        """The in-vocabulary rows of ``text`` that the mechanism protects, in order (PRIVATE)."""
        self._ensure_fitted()
        return self._prepare(text, doc_id).rows


class BagMechanism(TextMechanism[BagOutput, PrivateDocument]):
    """The document family: every document becomes a bag of exactly N words (N public).

    Parameters (besides :class:`TextMechanism`'s): ``size``, the public bag size N (or per call),
    and ``size_from_data`` (take N from the data, which the guarantee then says it reveals). A
    subclass supplies ``_privatize`` (prepared documents -> one :class:`BagOutput` each) and
    ``guarantee``.
    """

    family = "document"
    releases = "bag"

    epsilon: float
    size: int | None = None
    size_from_data: bool = False

    def _check_epsilon_and_size(self) -> None:
        """Build the calibration (ε validated there) and check the constructor's bag size, when given."""
        self._calibrate(self.epsilon)
        if self.size is not None:
            check_size(self.size)

    def _guarantee_context(self, context: ReleaseContext | None) -> tuple[ReleaseContext, int]:
        """A guarantee's release context (default: the constructor's ``size``) and its checked bag size N."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(size=self.size, seeded=self.seeded_)
        if ctx.size is None:
            raise ParameterError("the guarantee depends on the bag size N: pass ReleaseContext(size=N)")
        return ctx, check_size(ctx.size)

    def release_context(self, prepared: Sequence[PreparedText], *, size: int | None = None,
                        size_from_data: bool = False, seeded: bool = False,
                        empty: str = "error") -> ReleaseContext:
        """Resolve the public bag size N (per call, else the constructor's, else from the data, which warns)."""
        n, from_data = resolve_bag_size([p.rows for p in prepared], size, self.size,
                                        self.size_from_data or size_from_data)
        return ReleaseContext(size=n, size_from_data=from_data or bool(size_from_data), seeded=seeded,
                              empty=empty)

    def _chunk_limit(self, context: ReleaseContext) -> int:
        return max(1, WORDS_PER_BLOCK // int(context.size or 1))

    def _release(self, uid: str, prepared: PreparedText, output: BagOutput | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> PrivateDocument:
        words = self.embeddings_.words
        content = () if output is None else tuple(words[j] for j in output.rows)
        return PrivateDocument(id=uid, guarantee=guarantee, seeded=seeded, content=content)

    def _diagnose(self, uid: str, prepared: PreparedText, output: BagOutput | None) -> DocumentDiagnostics:
        none = np.zeros(0, dtype=np.int64)
        return DocumentDiagnostics(
            id=uid, n_tokens=prepared.n_tokens, dropped_oov=prepared.dropped_oov,
            n_in_vocabulary=int(prepared.rows.size),
            input_rows=none if output is None else np.sort(output.bag),
            output_rows=none if output is None else output.rows.copy(),
        )
