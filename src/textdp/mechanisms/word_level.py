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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._rng import make_rng
from ..embeddings import Embeddings
from ..errors import ParameterError
from ..guarantees import Guarantee, ReleaseRecord, as_parameters
from ..guarantees.events import PrivacyEvent
from .base import ReleaseContext, SeedLike
from .common import DocumentDiagnostics, PreparedText, TextMechanism

__all__ = ["PrivateText", "SeedLike", "WordLevelGuarantee", "WordLevelMechanism", "composition", "not_covered"]

#: words given to a mechanism's core at once
WORDS_PER_CALL = 4096

def composition(per_word: str) -> str:
    """The document-level sentence for a per-word loss expression in ``w_i, w'_i``.

    >>> composition("eps*d(w_i, w'_i)")[:40]
    'Over a document: for two documents of th'
    """
    return (
        "Over a document: for two documents of the same length T, the probability of any output differs by a "
        f"factor <= exp(sum_i {per_word}) (position-matched basic composition)."
    )


def not_covered(stop_words_removed: bool = True) -> str:
    """What no word-level guarantee covers (without the leading "Not covered: ").

    With ``stop_words_removed=False`` (``stop_words=None``, or CusText+ which keeps them in
    place) nothing is said about removed stop words, since none were removed.

    >>> "stop words" in not_covered(False), "stop words" in not_covered(True)
    (False, True)
    """
    removed = "stop words, one-letter or out-of-vocabulary tokens" if stop_words_removed else (
        "one-letter or out-of-vocabulary tokens"
    )
    kind = "in-vocabulary, non-stop-word input tokens" if stop_words_removed else "in-vocabulary input tokens"
    return (
        f"the number of released words T (it equals the number of {kind}), which tokens were removed "
        f"as {removed}, and anything learnt from several releases of the same text (each release spends the "
        "budget again)."
    )


@dataclass(frozen=True, kw_only=True)
class WordLevelGuarantee(Guarantee):
    """The guarantee of one word-level mechanism release (a :class:`~textdp.guarantees.Guarantee`).

    ``statement`` is the mechanism's paragraph (definition, metric, per-word bound, composition
    over a document, what is not covered); ``metric`` is ``"euclidean"`` (metric DP over
    embedding distance), ``"regularized-mahalanobis"`` or ``"discrete"`` (pure ε-DP between
    the stated neighbouring words); ``unit`` is ``"word"``.

    Examples
    --------
    >>> g = WordLevelGuarantee(mechanism="cmp", epsilon=10.0, statement="...", reference="paper",
    ...                        metric="euclidean", not_covered="the length T")
    >>> isinstance(g, Guarantee), g.to_dict()["unit"], g.params["metric"]
    (True, 'word', 'euclidean')
    """

    metric: str = "euclidean"
    unit: str = "word"

    def _derive(self) -> dict[str, object]:
        return {
            "composition": ("Over a document: for two documents of the same length T, the probability of any "
                            "output differs by at most the product of the per-word factors (position-matched "
                            "basic composition); every release spends the budget again."),
            "parameters": (("metric", self.metric), *self.parameters),
        }

    def __post_init__(self) -> None:
        if not any(k == "metric" for k, _ in self.parameters):
            object.__setattr__(self, "parameters", (("metric", self.metric), *self.parameters))
        super().__post_init__()


@dataclass(frozen=True)
class PrivateText(ReleaseRecord):
    """One released text of a word-level mechanism: the output words in input order and the guarantee.

    Holds only the output words and public facts: no input word, no input statistic (token
    counts, dropped counts) is kept, so the object itself may be released.
    """

    release: str = "text"
    content: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """The released words."""
        return self.content

    @property
    def text(self) -> str:
        """The released words joined by single spaces."""
        return " ".join(self.content)

    def payload(self) -> str:
        return self.text


class WordLevelMechanism(TextMechanism[np.ndarray, PrivateText]):
    """Base of the word family: scikit-learn style estimators that replace each word in place.

    The parameters are :class:`~textdp.mechanisms.common.TextMechanism`'s; a subclass declares
    its own below them, sets ``name``, ``reference`` and ``metric`` and implements :meth:`_setup`
    (precomputation at ``fit``), :meth:`core` (the pure batch function ``(ids, rng) -> ids``)
    and :meth:`_statement`; they may extend :meth:`_public_params`.
    """

    family = "word"
    releases = "text"
    metric: ClassVar[str] = "euclidean"
    #: one chunk (the core draws over all words of the batch, WORDS_PER_CALL at a time)
    chunk_size = 1 << 62

    def _fit(self) -> None:
        emb = self._load_embeddings()
        self._calibrate_words(emb)
        self._setup(emb)
        self.guarantee_ = WordLevelGuarantee(
            mechanism=self.name, epsilon=float(self.epsilon_), statement=self._statement(),
            reference=self.reference, metric=self.metric, not_covered=self._not_covered_text(),
            parameters=as_parameters(self._public_params()), event=self._event(),
        )

    def _event(self) -> PrivacyEvent | None:
        """What one word's release is, for the accountant (``None``: the pure event of ε, the default)."""
        return None

    def _calibrate_words(self, emb: Embeddings) -> None:
        """Build the calibration (ε validated there, once); a class whose ε follows from another parameter overrides it."""
        self._calibrate(self.epsilon)

    # -- to implement ----------------------------------------------------------------
    def _setup(self, emb: Embeddings) -> None:
        """Precompute what the core needs (called by ``fit``)."""

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The pure batch function: vocabulary rows ``(n,)`` -> released rows ``(n,)``."""
        raise NotImplementedError

    def _statement(self) -> str:
        raise NotImplementedError

    def _public_params(self) -> dict[str, object]:
        emb = self.embeddings_
        return {"embeddings": emb.name, "vocab_size": emb.vocab_size, "dim": emb.dim,
                "stop_words_removed": self.removes_stop_words}

    def _not_covered_text(self) -> str:
        return not_covered(self.removes_stop_words)

    def _not_covered(self) -> str:
        """The 'Not covered' sentence of the statement (true to ``stop_words``)."""
        return "Not covered: " + self._not_covered_text()

    def charge_units(self, prepared: PreparedText, guarantee: Guarantee) -> int:
        """A document spends the per-word guarantee once per protected word (position-matched composition)."""
        return int(prepared.rows.size)

    # -- the verbs ---------------------------------------------------------------------
    def guarantee(self, context: ReleaseContext | None = None) -> WordLevelGuarantee:
        """The per-word guarantee (``context``: seeded and the empty policy; nothing else matters)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        return self.guarantee_.evolve(seeded=ctx.seeded, empty=ctx.empty)

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

    def _privatize(self, prepared: Sequence[PreparedText], context: ReleaseContext,
                   rng: np.random.Generator) -> list[np.ndarray]:
        flat = np.concatenate([p.rows for p in prepared])
        out = np.empty_like(flat)
        for s in range(0, flat.size, WORDS_PER_CALL):
            out[s : s + WORDS_PER_CALL] = self.privatize_ids(flat[s : s + WORDS_PER_CALL], rng=rng)
        bounds = np.cumsum([0] + [p.rows.size for p in prepared])
        return [out[bounds[i] : bounds[i + 1]] for i in range(len(prepared))]

    def _release(self, uid: str, prepared: PreparedText, output: np.ndarray | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> PrivateText:
        words = self.embeddings_.words
        content = () if output is None else tuple(words[j] for j in output)
        return PrivateText(id=uid, guarantee=guarantee, seeded=seeded, content=content)

    def _diagnose(self, uid: str, prepared: PreparedText, output: np.ndarray | None) -> DocumentDiagnostics:
        none = np.zeros(0, dtype=np.int64)
        return DocumentDiagnostics(
            id=uid, n_tokens=prepared.n_tokens, dropped_oov=prepared.dropped_oov,
            n_in_vocabulary=int(prepared.rows.size), input_rows=prepared.rows.copy() if output is not None else none,
            output_rows=none if output is None else output.copy(), aligned=True,
        )

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """The claimed bound on ``|log P(y | x) - log P(y | x2)|`` over all outputs ``y`` (rows)."""
        raise NotImplementedError
