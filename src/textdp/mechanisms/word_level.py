"""The common frame of the word-level mechanisms: estimator API, guarantee, record.

Every word-level mechanism replaces each in-vocabulary word of a text, in place,
by a randomised vocabulary word; the output is text (a token sequence in input
order), not a bag. The pipeline is the one of the whole library:

1. ``textdp.text.normalize(text, stop_words)`` -> tokens (lower-case letter runs,
   stop words and one-letter tokens removed);
2. ``Embeddings.ids(tokens)`` -> in-vocabulary rows; out-of-vocabulary tokens are
   dropped, never copied to the output;
3. the mechanism's pure batch core ``core(ids, rng) -> ids`` on all rows of the batch;
4. rows -> words, joined by spaces; :meth:`PrivateText.to_record` adds the guarantee.

Guarantees are per word (``unit="word"``). Over a document they compose by basic
(sequential) composition over positions: two documents of the same length ``T``
are ``sum_i loss(w_i, w'_i)`` apart. The length ``T`` itself, and which tokens were
removed as stop words or out of vocabulary, are *not* protected (the output has
exactly one word per protected input word).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._rng import is_seeded, make_rng
from .._validation import check_epsilon, check_texts
from ..embeddings import Embeddings
from ..errors import DocumentError, ParameterError, ParameterTypeError
from ..progress import ProgressCallback
from ..text import normalize
from .common import resolve_embeddings
from .earth_movers import DocumentDiagnostics, PrivateReport

__all__ = ["PrivateText", "SeedLike", "WordLevelGuarantee", "WordLevelMechanism"]

SeedLike = int | np.random.Generator | np.random.SeedSequence | None

def composition(per_word: str) -> str:
    """The document-level sentence for a per-word loss expression in ``w_i, w'_i``.

    >>> composition("eps*d(w_i, w'_i)")[:40]
    'Over a document: for two documents of th'
    """
    return (
        "Over a document: for two documents of the same length T, the probability of any output differs by a "
        f"factor <= exp(sum_i {per_word}) (position-matched basic composition)."
    )


def not_covered(stop_words_released: bool = False) -> str:
    """The 'Not covered' sentence of every word-level statement."""
    removed = "one-letter or out-of-vocabulary tokens" if stop_words_released else (
        "stop words, one-letter or out-of-vocabulary tokens"
    )
    kind = "in-vocabulary input tokens" if stop_words_released else "in-vocabulary, non-stop-word input tokens"
    return (
        f"Not covered: the number of released words T (it equals the number of {kind}), which tokens were removed "
        f"as {removed}, and anything learnt from several releases of the same text (each release spends the "
        "budget again)."
    )


@dataclass(frozen=True)
class WordLevelGuarantee:
    """The guarantee of one word-level mechanism release (follows :class:`textdp.guarantees.Guarantee`).

    Attributes
    ----------
    mechanism : str
        Registered mechanism name (``"cmp"``, ``"santext"``, ...).
    epsilon : float
        Privacy parameter per word.
    statement : str
        One paragraph: definition, metric, per-word bound, composition over a document
        and what is not covered. Written to every record as ``guarantee``.
    reference : str
        Paper, theorem/equation.
    metric : str
        ``"euclidean"`` (metric DP over embedding distance), ``"regularized-mahalanobis"``
        or ``"discrete"`` (pure epsilon-DP between the stated neighbouring words).
    delta : float
        0 for every mechanism here (pure guarantees).
    unit : str
        ``"word"``.
    params : tuple of (str, object)
        Public parameters the statement depends on (vocabulary, lambda, gamma, ...).

    Examples
    --------
    >>> from textdp.guarantees import Guarantee
    >>> g = WordLevelGuarantee(mechanism="cmp", epsilon=10.0, statement="...", reference="paper",
    ...                        metric="euclidean")
    >>> isinstance(g, Guarantee), g.to_dict()["unit"]
    (True, 'word')
    """

    mechanism: str
    epsilon: float
    statement: str
    reference: str
    metric: str
    delta: float = 0.0
    unit: str = "word"
    params: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form: mechanism, epsilon, delta, unit, guarantee (the statement), metric, reference, params."""
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "unit": self.unit,
            "guarantee": self.statement,
            "metric": self.metric,
            "reference": self.reference,
            "params": dict(self.params),
        }


@dataclass(frozen=True)
class PrivateText:
    """One released text of a word-level mechanism.

    Holds only the output words and public facts: no input word, no input
    statistic (token counts, dropped counts) is kept, so the object itself may be
    released.
    """

    id: str
    words: tuple[str, ...]
    guarantee: WordLevelGuarantee
    seeded: bool

    @property
    def text(self) -> str:
        """The released words joined by single spaces."""
        return " ".join(self.words)

    def to_record(self) -> dict[str, Any]:
        """The JSON record of this release (output text, parameters, guarantee, seeded flag)."""
        g = self.guarantee
        return {
            "id": self.id,
            "text": self.text,
            "mechanism": g.mechanism,
            "epsilon": g.epsilon,
            "delta": g.delta,
            "unit": g.unit,
            "guarantee": g.statement,
            "seeded": self.seeded,
            "params": dict(g.params),
        }


class WordLevelMechanism:
    """Base class: scikit-learn style estimator for the word-level mechanisms.

    Subclasses set ``name``, ``reference`` and ``_EXTRA`` (their own constructor
    parameters), and implement :meth:`_prepare` (precomputation at ``fit``),
    :meth:`core` (the pure batch function) and :meth:`_statement`.
    """

    name: ClassVar[str] = "word-level"
    reference: ClassVar[str] = ""
    metric: ClassVar[str] = "euclidean"
    _BASE: ClassVar[tuple[str, ...]] = ("epsilon", "embeddings", "vocab_size", "stop_words", "seed")
    _EXTRA: ClassVar[tuple[str, ...]] = ()
    #: what a release holds: ``"text"`` (the words in input order) -- bag mechanisms say ``"bag"``
    output: ClassVar[str] = "text"
    #: True: stop words are kept in place (and released unchanged), not removed (CusText+)
    _skip_stop_words: ClassVar[bool] = False

    def __init__(
        self,
        *,
        epsilon: float | None,
        embeddings: Embeddings | str | os.PathLike[str] | None = None,
        vocab_size: int | None = None,
        stop_words: str | Iterable[str] | None = "english",
        seed: SeedLike = None,
    ) -> None:
        self.epsilon = epsilon
        self.embeddings = embeddings
        self.vocab_size = vocab_size
        self.stop_words = stop_words
        self.seed = seed

    # -- scikit-learn protocol --------------------------------------------------
    @classmethod
    def _param_names(cls) -> tuple[str, ...]:
        return cls._BASE + cls._EXTRA

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn protocol)."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params: Any) -> WordLevelMechanism:
        """Set constructor parameters; the next use refits."""
        for k, v in params.items():
            if k not in self._param_names():
                raise ParameterTypeError(f"unknown parameter {k!r}; valid: {', '.join(self._param_names())}")
            setattr(self, k, v)
        self.__dict__.pop("embeddings_", None)
        return self

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._param_names() if k != "embeddings")
        return f"{type(self).__name__}({inner})"

    def fit(self, X: object = None, y: object = None) -> WordLevelMechanism:
        """Validate parameters, load the embeddings and precompute (``X``, ``y`` ignored)."""
        self.epsilon_ = self._check_epsilon()
        emb = resolve_embeddings(self.embeddings, self.vocab_size)
        self.embeddings_ = emb
        self.rng_ = make_rng(self.seed)
        self.seeded_ = is_seeded(self.seed)
        self._prepare(emb)
        self.guarantee_ = WordLevelGuarantee(
            mechanism=self.name,
            epsilon=float(self.epsilon_),
            statement=self._statement(),
            reference=self.reference,
            metric=self.metric,
            params=tuple(self._public_params().items()),
        )
        return self

    def _check_epsilon(self) -> float:
        return check_epsilon(self.epsilon)

    def _ensure_fitted(self) -> None:
        if not hasattr(self, "embeddings_"):
            self.fit()

    def transform(self, X: Iterable[str]) -> list[str]:
        """Private texts for an iterable of texts."""
        return [d.text for d in self.privatize_batch(list(X))]

    def fit_transform(self, X: Iterable[str], y: object = None) -> list[str]:
        """``fit`` then ``transform``."""
        return self.fit(X, y).transform(X)

    # -- to implement ----------------------------------------------------------------
    def _prepare(self, emb: Embeddings) -> None:
        """Precompute what the core needs (called by ``fit``)."""

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The pure batch function: vocabulary rows ``(n,)`` -> released rows ``(n,)``."""
        raise NotImplementedError

    def _statement(self) -> str:
        raise NotImplementedError

    def _public_params(self) -> dict[str, Any]:
        emb = self.embeddings_
        return {"embeddings": emb.name, "vocab_size": emb.vocab_size, "dim": emb.dim}

    # -- the verbs ---------------------------------------------------------------------
    @property
    def guarantee(self) -> WordLevelGuarantee:
        """The per-word guarantee of this configured mechanism."""
        self._ensure_fitted()
        return self.guarantee_

    def privatize_ids(self, ids: np.ndarray, rng: SeedLike = None) -> np.ndarray:
        """Apply :meth:`core` to an int array of vocabulary rows of any shape.

        ``rng`` defaults to this object's generator (from ``seed``).
        """
        self._ensure_fitted()
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= self.embeddings_.vocab_size):
            raise ParameterError(f"ids must be vocabulary rows in [0, {self.embeddings_.vocab_size})")
        gen = self.rng_ if rng is None else make_rng(rng)
        flat = arr.reshape(-1)
        out = self.core(flat, gen) if flat.size else flat.copy()
        return np.asarray(out, dtype=np.int64).reshape(arr.shape)

    def tokens(self, text: str, doc_id: str = "document") -> np.ndarray:
        """The in-vocabulary rows of ``text`` that the mechanism protects, in order."""
        return self._rows(text, doc_id)[0]

    def _rows(self, text: str, doc_id: str) -> tuple[np.ndarray, int, int]:
        """In-vocabulary rows, normalised token count and dropped (OOV) count of ``text`` (PRIVATE)."""
        self._ensure_fitted()
        if not isinstance(text, str):
            raise ParameterTypeError(f"document {doc_id}: text must be a str, got {type(text).__name__}")
        toks = normalize(text, None if self._skip_stop_words else self.stop_words)
        rows, oov = self.embeddings_.ids(toks)
        return rows, len(toks), int(oov)

    def _assemble(self, rows: np.ndarray, released: np.ndarray) -> tuple[str, ...]:
        words = self.embeddings_.words
        return tuple(words[j] for j in released)

    def privatize_batch(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        seed: SeedLike = None,
        seeded: bool | None = None,
        private_report: PrivateReport | None = None,
        progress: ProgressCallback | None = None,
        chunk: int = 4096,
    ) -> list[PrivateText]:
        """Privatize a batch of texts; every text is validated before any noise is drawn.

        Parameters
        ----------
        texts, ids : sequences of str
            The documents and their record ids (default ``"0"``, ``"1"``, ...).
        seed : int, Generator, SeedSequence or None
            Randomness for this call (default: this object's generator). Nothing on
            the fitted object is modified, so one object can serve many partitions.
        seeded : bool, optional
            Whether the randomness came from a user seed, as recorded (default:
            ``seed`` or the constructor's ``seed`` was given).
        private_report : list or callable, optional
            Receives one :class:`~textdp.mechanisms.DocumentDiagnostics` per text
            (position-aligned input and output rows). PRIVATE: describes the input.
        progress : callable, optional
            ``progress(done, total)`` (:mod:`textdp.progress`), once, after the batch.

        Examples
        --------
        >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
        >>> from textdp.mechanisms import CMP
        >>> report = []
        >>> out = CMP(epsilon=1e6, embeddings=emb, stop_words=None).privatize_batch(
        ...     ["dog unicorn car"], seed=0, private_report=report)
        >>> out[0].text, out[0].seeded, report[0].dropped_oov, report[0].unchanged_fraction()
        ('dog car', True, 1, 1.0)
        """
        self._ensure_fitted()
        texts = list(texts)
        if ids is not None and len(ids) != len(texts):
            raise ParameterTypeError(f"got {len(ids)} ids for {len(texts)} texts")
        doc_ids = [str(x) for x in ids] if ids is not None else [str(i) for i in range(len(texts))]
        prepared = [self._rows(t, d) for t, d in zip(texts, doc_ids)]
        rows = [p[0] for p in prepared]
        for r, d in zip(rows, doc_ids):
            if r.size == 0:
                raise DocumentError(
                    f"document {d}: no in-vocabulary word left after normalisation "
                    f"({self.embeddings_.name}); nothing to privatize"
                )
        if not texts:
            return []
        gen = self.rng_ if seed is None else make_rng(seed)
        if seeded is None:
            seeded = is_seeded(seed) if seed is not None else self.seeded_
        flat = np.concatenate(rows)
        out = np.empty_like(flat)
        for s in range(0, flat.size, chunk):
            out[s : s + chunk] = self.privatize_ids(flat[s : s + chunk], rng=gen)
        bounds = np.cumsum([0] + [r.size for r in rows])
        if progress is not None:
            progress(len(texts), len(texts))
        if private_report is not None:
            emit = private_report.append if isinstance(private_report, list) else private_report
            for i, (r, n_tok, oov) in enumerate(prepared):
                emit(DocumentDiagnostics(
                    id=doc_ids[i], n_tokens=n_tok, dropped_oov=oov, n_in_vocabulary=int(r.size),
                    input_rows=r.copy(), output_rows=out[bounds[i] : bounds[i + 1]].copy(), aligned=True,
                ))
        g = self.guarantee_
        return [
            PrivateText(
                id=doc_ids[i],
                words=self._assemble(rows[i], out[bounds[i] : bounds[i + 1]]),
                guarantee=g,
                seeded=bool(seeded),
            )
            for i in range(len(texts))
        ]

    def privatize(self, texts: str | Iterable[str]) -> PrivateText | list[PrivateText]:
        """Privatize one text (a :class:`PrivateText`) or an iterable of texts (a list)."""
        batch = check_texts(texts)  # bytes or None: a one-line error, not "got int"
        if batch is None:
            return self.privatize_batch([str(texts)])[0]
        return self.privatize_batch(batch)

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """The claimed bound on ``|log P(y | x) - log P(y | x2)|`` over all outputs ``y`` (rows)."""
        raise NotImplementedError
