"""Rewriting text with a trained model: the sentence family of mechanisms, with honest records.

:class:`Rewriter` loads a model directory (:mod:`textdp.generation.training`). The sentence
family's mechanisms derive from :class:`TextRewriter` (itself a
:class:`textdp.mechanisms.base.Mechanism`: parameters declared as fields, ``fit`` loads the
model, one batch verb ``privatize_batch(texts, ids, seed=...)``, one ``guarantee(context)``);
each is registered under one name (:func:`textdp.mechanisms.get`):

``er-ae`` (:class:`ERAE`)
    the ER-AE model with textdp's two-set exponential mechanism
    (:func:`~textdp.generation.sampling.two_set_step`);
``ae-dp`` (:class:`AEDP`)
    the model with one exponential mechanism over the whole vocabulary per step
    (:func:`~textdp.generation.sampling.em_step`; train the model with
    ``--objective reconstruction`` for the baseline as published);
``syntf-sentence`` (:class:`SynTFSentence`)
    a bag of ``max_length`` words per sentence (:func:`textdp.mechanisms.syntf.syntf`);
``random-sentence`` (:class:`RandomSentence`)
    uniform random replacement at the rate calibrated to the per-token ε: the word family's
    :class:`~textdp.mechanisms.RandomReplacement` core over the model's vocabulary, with the same
    out-of-vocabulary handling (dropped, never released).

A unit is a document (a line); it is cut into segments of at most ``L_max`` tokens, each a
privacy unit (the guarantee's ``unit`` is ``sentence``). A release is a :class:`RewrittenText`:
the rewritten text, ``units`` = its number of segments and ``total`` = that many times the
per-segment bound (:class:`~textdp.guarantees.ReleaseRecord`). Two generation variants
(``er-ae``/``ae-dp``): ``autoregressive`` feeds the generator its own draws; ``teacher-forced``
(the authors' code) feeds it the private input's tokens while there are any. Both run at most
``max_length`` steps and stop when the mechanism draws the end token, so the output length is
covered by the bound.

A new sentence mechanism on a textdp model subclasses :class:`SentenceMechanism`, declares
``name`` and its own parameters as fields (``epsilon``, ``model``, ``model_data`` and ``seed`` are
declared there), and supplies :meth:`SentenceMechanism.rewrite_segments` (segments, rng -> output tokens) and
:meth:`SentenceMechanism.bound` (its :class:`~textdp.generation.bounds.RewriteGuarantee`).

:func:`rewrite_documents` is the pure batch function ``(mechanism, documents, rng) -> records`` of every
sentence mechanism (the language-model rewriters too) that the CLI maps over partitions with
:mod:`textdp.engines`; it returns the per-document diagnostics (counts describing the private input)
separately, for a private sidecar.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from .._options import UNITS, VARIANTS
from .._validation import check_choice, check_positive_int
from ..embeddings import Embeddings
from ..errors import ParameterError, ParameterTypeError
from ..guarantees import Guarantee, ReleaseRecord
from ..mechanisms import RandomReplacement, ReleaseContext
from ..mechanisms.base import Mechanism, SeedLike
from ..mechanisms.syntf import syntf
from ..progress import ProgressCallback
from .bounds import (
    MODEL_DATA_CASES,
    RewriteGuarantee,
    em_guarantee,
    random_r_guarantee,
    syntf_guarantee,
    two_set_guarantee,
)
from .model import build_network, generate
from .sampling import em_step, torch_module, two_set_step
from .training import load_model_files
from .vocab import PAD, detokenize, segment_text

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "AEDP",
    "ERAE",
    "UNITS",
    "VARIANTS",
    "RandomSentence",
    "Rewriter",
    "RewrittenText",
    "SentenceMechanism",
    "SynTFSentence",
    "load_rewriter",
    "rewrite_documents",
]


class Rewriter:
    """A loaded model directory: vocabulary, network and card.

    Parameters
    ----------
    model_dir : path
        Written by ``textdp train-rewriter`` (:func:`textdp.generation.training.train_rewriter`).
    """

    def __init__(self, model_dir: str | Path) -> None:
        torch = torch_module()
        self.model_dir = Path(model_dir)
        # every file checked against the SHA-256 its card recorded at training time
        self.card, self.vocab, cfg, state = load_model_files(self.model_dir)
        if cfg.vocab_size != self.vocab.size:
            raise ParameterError(f"{model_dir}: config.json and vocab.txt disagree on the vocabulary size")
        self.config = cfg
        self.net = build_network(cfg, state["word_emb"].numpy())
        self.net.load_state_dict(state)
        self.net.eval()
        self._allowed = torch.from_numpy(self.vocab.output_mask())
        self._word_ids = np.arange(4, self.vocab.size)

    @property
    def max_length(self) -> int:
        """``L_max``: tokens per segment and steps per generated sentence."""
        return self.config.max_length

    def resolve_model_data(self, model_data: str) -> str:
        """``auto`` -> ``public`` if the card declares the training data public, else ``unknown``."""
        if model_data != "auto":
            return check_choice(model_data, "model data case", tuple(MODEL_DATA_CASES))
        return "public" if self.card.get("data", {}).get("declared_public") else "unknown"

    def model_case(self, model_data: str, *, uses_model: bool) -> str:
        """The model-data case of a guarantee (``none``: no model and a public vocabulary)."""
        public_vocab = not self.card.get("vocabulary", {}).get("depends_on_training_data", True)
        return "none" if (not uses_model and public_vocab) else self.resolve_model_data(model_data)

    def segments(self, text: str) -> list[list[str]]:
        """The privacy units of ``text``: sentences cut to at most ``max_length`` tokens."""
        return segment_text(text, self.max_length)

    def check_segments(self, segments: Sequence[Sequence[str]]) -> None:
        """Segments must hold 1 to ``max_length`` tokens (:meth:`segments` makes them)."""
        if any(len(s) > self.max_length or len(s) == 0 for s in segments):
            raise ParameterError(f"segments must hold 1 to {self.max_length} tokens; use Rewriter.segments")

    def generate(self, segments: Sequence[Sequence[str]], choose: Callable[[Tensor], Tensor], *, variant: str,
                 batch_size: int) -> list[list[str]]:
        """Output tokens for every segment, each generation step drawn by ``choose(logp)``."""
        torch = torch_module()
        encoded = [self.vocab.encode(list(s)) for s in segments]
        order = np.argsort([len(e) for e in encoded], kind="stable")
        result: list[list[str]] = [[] for _ in segments]
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            lengths = np.array([len(encoded[i]) for i in idx], dtype=np.int64)
            enc = np.full((len(idx), int(lengths.max())), PAD, dtype=np.int64)
            for r, i in enumerate(idx):
                enc[r, : lengths[r]] = encoded[i]
            ids = generate(self.net, torch.from_numpy(enc), torch.from_numpy(lengths), choose, allowed=self._allowed,
                           max_length=self.max_length, teacher_forcing=variant == "teacher-forced")
            for r, i in enumerate(idx):
                result[i] = self.vocab.decode(ids[r])
        return result


@dataclass(frozen=True)
class RewrittenText(ReleaseRecord):
    """One rewritten document: its text, its rewritten segments, ``units`` = their number.

    :meth:`sentence_records` gives one record per segment (ids ``"<id>:<j>"``, ``units`` 1).
    """

    release: str = "sentence"
    content: str = ""
    sentences: tuple[str, ...] = ()
    #: ε-DP token draws that made the text (language-model rewriters; None when no token is drawn with ε)
    tokens_drawn: int | None = None

    def to_record(self) -> dict[str, object]:
        """The record; with ``tokens_drawn``, an ``ex_post`` entry beside the worst-case bound.

        ``ex_post.epsilon`` is the guarantee's ε per token times the tokens drawn for this text (the end token
        included when drawn): the privacy loss of this particular output, a public function of it (how many tokens
        it has, and whether the cap stopped it). ``ex_post.worst_case_epsilon`` is the bound the record states for
        any output (its ``total``, else its ``epsilon``); the ex-post figure never exceeds it.
        """
        out = super().to_record()
        per_token = self.guarantee.params.get("per_token")
        if self.tokens_drawn is not None and isinstance(per_token, (int, float)):
            worst = out["total"]["epsilon"] if "total" in out else out["epsilon"]
            out["ex_post"] = {"epsilon": float(per_token) * self.tokens_drawn, "tokens_drawn": int(self.tokens_drawn),
                              "worst_case_epsilon": float(worst)}
        return out

    @property
    def text(self) -> str:
        """The rewritten text (the segments joined by spaces)."""
        return self.content

    def sentence_records(self) -> list[ReleaseRecord]:
        """One release record per segment."""
        return [ReleaseRecord(id=f"{self.id}:{j}", guarantee=self.guarantee, seeded=self.seeded, release="sentence",
                              content=t, units=1) for j, t in enumerate(self.sentences)]


Segments = list[list[str]]
S = TypeVar("S")  # one privacy unit of a text (a token list, or a string)


class TextRewriter(Mechanism[list[S], list[S], RewrittenText], Generic[S]):
    """Base of the sentence family: a text is cut into privacy units, each rewritten, then joined.

    The batch loop is here once: a text's units come from :meth:`units`, all units of a
    chunk are rewritten in one :meth:`rewrite_units` call (a pure batch function of the units
    and ``rng``) and cut back per text; a text with no unit follows the ``empty`` policy. The
    release is a :class:`RewrittenText` (``units`` = its number of units). Subclasses:
    :class:`SentenceMechanism` (a trained textdp model; units are token lists) and
    :class:`~textdp.generation.lm_family.LMRewriter` (a language model; units are strings).
    """

    family = "sentence"
    releases = "sentence"
    #: the privacy unit: ``sentence`` (a text is cut into sentences, each one unit) or ``document`` (one unit)
    privacy_unit: ClassVar[str] = "sentence"

    @abstractmethod
    def units(self, text: str) -> list[S]:
        """The privacy units of ``text`` (PRIVATE)."""

    @abstractmethod
    def rewrite_units(self, units: Sequence[S], rng: np.random.Generator) -> list[S]:
        """The rewritten form of every unit (a pure batch function of ``units`` and ``rng``)."""

    @abstractmethod
    def unit_text(self, unit: S) -> str:
        """A rewritten unit as text."""

    def _prepare(self, unit: object, uid: str) -> list[S]:
        if not isinstance(unit, str):
            raise ParameterTypeError(f"document {uid}: text must be a str, got {type(unit).__name__}")
        return self.units(unit)

    def _is_empty(self, prepared: list[S]) -> bool:
        return not prepared

    def _empty_message(self, uid: str, prepared: list[S]) -> str:
        return f"document {uid}: nothing to rewrite"

    def charge_units(self, prepared: list[S], guarantee: Guarantee) -> int:
        """A per-sentence guarantee is spent once per unit of the text; a per-document one once."""
        return 1 if guarantee.unit == "document" else len(prepared)

    def _privatize(self, prepared: Sequence[list[S]], context: ReleaseContext,
                   rng: np.random.Generator) -> list[list[S]]:
        flat = [u for units in prepared for u in units]
        out = self.rewrite_units(flat, rng)
        cuts = np.cumsum([0] + [len(units) for units in prepared])
        return [out[cuts[i] : cuts[i + 1]] for i in range(len(prepared))]

    def _release(self, uid: str, prepared: list[S], output: list[S] | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> RewrittenText:
        texts = tuple(self.unit_text(o) for o in (output or []))
        drawn = [getattr(o, "drawn", None) for o in (output or [])]
        tokens = sum(d for d in drawn if d is not None) if drawn and all(d is not None for d in drawn) else None
        return RewrittenText(id=uid, guarantee=guarantee, seeded=seeded, content=" ".join(t for t in texts if t),
                             units=len(texts), sentences=texts, release=self.releases, tokens_drawn=tokens)


class SentenceMechanism(TextRewriter[list[str]]):
    """The sentence mechanisms on a trained textdp model (see the module docstring).

    Parameters every subclass takes: ``epsilon``, ``model`` (a :class:`Rewriter` or a model
    directory), ``model_data`` (which data the model saw: ``public``, ``disjoint``, ``same``,
    ``unknown`` or ``auto``) and ``seed``. A unit is a segment of at most ``L_max`` tokens.
    """

    #: every segment of a batch is rewritten in one call (the model batches by ``batch_size`` itself)
    chunk_size = 1 << 62
    #: the bound depends on a trained model (else only on its vocabulary)
    uses_model: ClassVar[bool] = True
    #: the training objective the model must have been trained with (``train-rewriter --objective``), or None
    objective: ClassVar[str | None] = None

    epsilon: float
    model: Rewriter | str | Path
    model_data: str = "auto"
    seed: SeedLike = None

    def _fit(self) -> None:
        self._calibrate(self.epsilon)
        check_choice(self.model_data, "model data case", (*MODEL_DATA_CASES, "auto"))
        if isinstance(self.model, Rewriter):
            self.model_ = self.model
        elif isinstance(self.model, (str, Path)):
            self.model_ = load_rewriter(str(Path(self.model).resolve()))
        else:
            raise ParameterTypeError(f"model must be a Rewriter or a model directory, got {type(self.model).__name__}")
        self._setup()

    def _setup(self) -> None:
        """Precompute what :meth:`rewrite_segments` needs (called by ``fit``)."""

    @abstractmethod
    def bound(self) -> RewriteGuarantee:
        """The per-sentence guarantee of this mechanism on the fitted model (no context)."""

    @abstractmethod
    def rewrite_segments(self, segments: Sequence[Sequence[str]], rng: np.random.Generator) -> list[list[str]]:
        """Output tokens for every segment (a pure batch function of the segments and ``rng``)."""

    def model_case(self) -> str:
        """The model-data case the guarantee states."""
        return self.model_.model_case(self.model_data, uses_model=self.uses_model)

    def guarantee(self, context: ReleaseContext | None = None) -> RewriteGuarantee:
        """The per-sentence guarantee (``context``: seeded and the empty policy)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        return self.bound().evolve(seeded=ctx.seeded, empty=ctx.empty)

    def units(self, text: str) -> Segments:
        """The segments of ``text`` (at most ``L_max`` tokens each; PRIVATE)."""
        return self.model_.segments(text)

    def rewrite_units(self, units: Sequence[list[str]], rng: np.random.Generator) -> Segments:
        self.model_.check_segments(units)
        return self.rewrite_segments(units, rng)

    def unit_text(self, unit: list[str]) -> str:
        return detokenize(unit)

    def _diagnose(self, uid: str, prepared: Segments, output: Segments | None) -> dict[str, object]:
        vocab = self.model_.vocab
        return {"id": uid, "segments": len(prepared), "input_tokens": sum(len(s) for s in prepared),
                "oov_tokens": sum(int((vocab.encode(s) == 2).sum()) for s in prepared),
                "output_tokens": sum(len(o) for o in (output or [])), "emptied": not prepared}


class ERAE(SentenceMechanism):
    """ER-AE: the model's distribution, each step drawn by the two-set exponential mechanism (Bo et al. 2021).

    ``epsilon`` is the nominal per-step budget, split ``word_fraction`` to the draw inside the
    chosen set and the rest to the set choice; ``k`` draws form the lexical set. The bound
    per sentence is :func:`~textdp.generation.bounds.two_set_bound`'s (dominated by ``ln |V|``).
    """

    name = "er-ae"
    reference = "Bo, Ding, Fung & Iqbal, NAACL 2021"
    objective = "er-ae"

    variant: str = "autoregressive"
    word_fraction: float = 0.1
    k: int = 5
    batch_size: int = 256

    def _setup(self) -> None:
        check_choice(self.variant, "variant", VARIANTS)
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.k, "k")

    def bound(self) -> RewriteGuarantee:
        m = self.model_
        return two_set_guarantee(self.name, self.epsilon_, vocab_size=m.vocab.output_size, max_length=m.max_length,
                                 model_data=self.model_case(), word_fraction=self.word_fraction, k=self.k)

    def rewrite_segments(self, segments: Sequence[Sequence[str]], rng: np.random.Generator) -> list[list[str]]:
        e_word = self.word_fraction * self.epsilon_
        e_set = self.epsilon_ - e_word

        def choose(logp: Tensor) -> Tensor:
            return two_set_step(logp, rng, epsilon_set=e_set, epsilon_word=e_word, k=self.k)

        return self.model_.generate(segments, choose, variant=self.variant, batch_size=self.batch_size)


class AEDP(SentenceMechanism):
    """AE-DP: the model's distribution, each step one exponential mechanism over the whole vocabulary."""

    name = "ae-dp"
    reference = "Bo, Ding, Fung & Iqbal, NAACL 2021 (baseline); McSherry & Talwar 2007"
    objective = "reconstruction"

    variant: str = "autoregressive"
    batch_size: int = 256

    def _setup(self) -> None:
        check_choice(self.variant, "variant", VARIANTS)
        check_positive_int(self.batch_size, "batch_size")

    def bound(self) -> RewriteGuarantee:
        m = self.model_
        return em_guarantee(self.name, self.epsilon_, vocab_size=m.vocab.output_size, max_length=m.max_length,
                            model_data=self.model_case())

    def rewrite_segments(self, segments: Sequence[Sequence[str]], rng: np.random.Generator) -> list[list[str]]:
        eps = self.epsilon_

        def choose(logp: Tensor) -> Tensor:
            return em_step(logp, rng, epsilon=eps)

        return self.model_.generate(segments, choose, variant=self.variant, batch_size=self.batch_size)


class _VocabularySentence(SentenceMechanism):
    """A sentence mechanism that uses only the model's vocabulary and card, never its network."""

    uses_model = False


class SynTFSentence(_VocabularySentence):
    """SynTF per sentence: a bag of ``max_length`` words over the model's vocabulary (no network)."""

    name = "syntf-sentence"
    reference = "Weggenmann & Kerschbaum, SIGIR 2018"

    def bound(self) -> RewriteGuarantee:
        m = self.model_
        return syntf_guarantee(self.name, self.epsilon_, vocab_size=len(m.vocab.words), max_length=m.max_length,
                               model_data=self.model_case())

    def rewrite_segments(self, segments: Sequence[Sequence[str]], rng: np.random.Generator) -> list[list[str]]:
        words = self.model_.vocab.words
        index = {w: i for i, w in enumerate(words)}
        counts = np.zeros((len(segments), len(words)))
        for i, seg in enumerate(segments):  # out-of-vocabulary tokens are dropped
            for t in seg:
                j = index.get(t)
                if j is not None:
                    counts[i, j] += 1.0
        bags = np.atleast_2d(syntf(counts, self.epsilon_, self.model_.max_length, rng))
        out = []
        for row in bags:  # sorted by count, then vocabulary order
            idx = np.nonzero(row)[0]
            idx = idx[np.argsort(-row[idx], kind="stable")]
            out.append([words[j] for j in idx for _ in range(int(row[j]))])
        return out


class RandomSentence(_VocabularySentence):
    """Random-R: the word family's :class:`~textdp.mechanisms.RandomReplacement` core over the model's vocabulary.

    ``epsilon`` is per token; out-of-vocabulary tokens are dropped (never released), exactly as
    the word family's ``random`` does.
    """

    name = "random-sentence"
    reference = "k-ary randomised response (Kairouz, Oh & Viswanath 2014)"

    def _setup(self) -> None:
        words = self.model_.vocab.words
        vocab = Embeddings(list(words), np.zeros((len(words), 1), dtype=np.float32), name="rewriter vocabulary")
        # the word core at this calibration's rate (|V| / (|V| + e^epsilon - 1)): epsilon is not validated again
        rate = 1.0 / (1.0 + math.expm1(self.epsilon_) / len(words)) if self.epsilon_ < 700 else \
            math.exp(math.log(len(words)) - self.epsilon_)
        self.replacement_ = RandomReplacement(rate=rate, embeddings=vocab, stop_words=None).fit()

    def bound(self) -> RewriteGuarantee:
        m = self.model_
        return random_r_guarantee(self.name, self.epsilon_, vocab_size=len(m.vocab.words), max_length=m.max_length,
                                  model_data=self.model_case())

    def rewrite_segments(self, segments: Sequence[Sequence[str]], rng: np.random.Generator) -> list[list[str]]:
        rep = self.replacement_
        rows = [rep.embeddings_.ids(list(seg))[0] for seg in segments]  # OOV dropped, as the word family does
        flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        out = rep.privatize_ids(flat, rng) if flat.size else flat
        words = rep.embeddings_.words
        bounds = np.cumsum([0] + [r.size for r in rows])
        return [[words[j] for j in out[bounds[i] : bounds[i + 1]]] for i in range(len(rows))]


@lru_cache(maxsize=4)
def load_rewriter(model_dir: str) -> Rewriter:
    """A cached :class:`Rewriter` (one load per process, e.g. per engine worker)."""
    return Rewriter(model_dir)


def rewrite_documents(
    mechanism: TextRewriter[Any],
    documents: Sequence[tuple[str, str]],
    rng: SeedLike = None,
    *,
    record_unit: str = "document",
    seeded: bool = False,
    progress: ProgressCallback | None = None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Rewrite ``(id, text)`` documents with a sentence mechanism: ``(records, private_diagnostics)``.

    Records (one per document, or with ``record_unit="sentence"`` one per privacy unit of a mechanism whose unit is
    the sentence) have the one layout of :class:`~textdp.guarantees.ReleaseRecord`: the per-unit bound at the top
    level (``epsilon``, ``unit``), ``units`` (the document's units) and ``total`` (their sum), and the compact
    guarantee; never the input text or anything computed from it. A document with nothing to rewrite gives an
    empty record (policy ``empty``, stated in the guarantee). The diagnostics (per document: segments, tokens,
    out-of-vocabulary tokens, or units and characters) describe the private input: keep them private.
    """
    check_choice(record_unit, "unit", UNITS)
    diagnostics: list[object] = []
    released = mechanism.privatize_batch([t for _, t in documents], [i for i, _ in documents], seed=rng,
                                         seeded=seeded, empty="empty", private_report=diagnostics,
                                         progress=progress) if documents else []
    if record_unit == "sentence" and mechanism.privacy_unit == "sentence":
        return [r.to_record() for doc in released for r in doc.sentence_records()], diagnostics
    return [doc.to_record() for doc in released], diagnostics
