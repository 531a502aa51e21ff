r"""Rewriting text with pretrained language models: DP-Prompt, DP-Paraphrase, DP-MLM and DP-BART.

Four rewriters, each faithful to its paper where the paper is right, on local Hugging Face
directories (:mod:`textdp.generation.hf`). The three token-level ones draw every token with
the one decoding core (:func:`~textdp.generation.decoding.exponential_step`: clipped logits,
``T = 2Δ/ε``, the full vocabulary, no top-k/top-p); DP-BART adds Gaussian noise to the
clipped encoder output and decodes it.

``dp-prompt`` — Utpala, Hooker & Chen, Findings of EMNLP 2023
    A causal LM is prompted with ``Document : {document}\nParaphrase of the document :`` (the
    paper's template; public) and generates up to ``max_new_tokens`` tokens, each an ε-DP
    draw over clipped logits. The paper's released scripts sample at a temperature without
    clipping: that is no exponential mechanism (audit case ``lm-unclipped``). **Guarantee**:
    for *any* two documents (truncated to ``max_input_tokens`` tokens, a public cut), one
    step is ε-DP (decoding theorem); the ``n = max_new_tokens`` steps compose adaptively to
    ``nε`` per document. The end token is drawn by the mechanism, so the output length is
    covered. Unit: the document (a sentence changed is a document changed: same bound).
``dp-paraphrase`` — Mattern, Weggenmann & Kerschbaum, Findings of NAACL 2022
    A paraphrase model rewrites each sentence, sampling every token at temperature ``T`` over
    clipped logits. The paper fine-tunes GPT-2 as a paraphraser; textdp takes a
    sequence-to-sequence paraphraser (the issue's reading; the privacy argument is the same:
    the private sentence only conditions the logits). **Guarantee**: ``nε`` per sentence for
    any two sentences, ``n = max_new_tokens``; the output length is covered. A document of
    ``m`` sentences: ``m n ε`` (basic composition); ``m`` is not covered.
``dp-mlm`` — Meisenbacher, Chevli, Vladika & Matthes, Findings of ACL 2024
    A masked LM replaces one token at a time: the input is the original sentence followed by
    the sentence with that token masked (the paper's contextualisation), and the replacement
    is an ε-DP draw over the clipped logits at the mask. As in the paper, stop words and
    punctuation are copied by default and the length is kept. **Guarantee and adjacency**:
    ``rε`` per sentence where ``r`` is the number of replaced tokens, for two sentences with
    the **same skeleton**: the same number of tokens (at most ``max_tokens``) and, with
    ``copy_stopwords``, the same stop words and punctuation at the same places; those are
    released as they are. The record states the public bound ``max_tokens · ε``. With
    ``copy_stopwords=False`` every token is replaced and neighbours need only the same
    number of tokens.
``dp-bart`` — Igamberdiev & Habernal, Findings of ACL 2023 (DP-BART-CLV)
    The encoder output ``H`` (``n × d``, the sentence padded or cut to the public
    ``n = max_tokens`` tokens) is clipped per coordinate to ``[c_min, c_max]`` and every
    coordinate of every token gets its own Gaussian noise ``N(0, σ²)``, with σ from the
    analytic Gaussian mechanism (Balle & Wang 2018) for the L2 sensitivity of the whole
    clipped output, ``(c_max − c_min) √(d n)`` (any two sentences: every coordinate moves by
    at most the range). The decoder then generates from the noisy ``H`` alone (its
    attention mask is all ones: the input's length is not passed on), greedily, which is
    post-processing. **Guarantee**: (ε, δ)-DP per sentence for any two sentences. Two
    copied mistakes are refused here and flagged by the audit: one noise vector shared by
    all token rows (row differences come out noise-free: ``dp-bart-shared-noise``) and a
    σ calibrated for a range of 0.2 while clipping to ``[−0.2, 0.1]`` (``dp-bart-range``).
    *Floating point*: the noise is numpy's float64 Gaussian, so the noisy matrix is **never
    released** (its low-order bits could leak, Mironov 2012); only the decoded tokens are.

Every rewriter states what is not covered (:class:`LMGuarantee`): what the model memorised
from its training data (the model must be public or trained on data disjoint from the
private text), the number of sentences per document, and for dp-mlm the skeleton.

References
----------
Balle & Wang, Improving the Gaussian mechanism for differential privacy: analytical
calibration and optimal denoising, ICML 2018. See also :mod:`textdp.generation.decoding`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .._validation import check_choice, check_probability
from ..errors import ParameterError, require
from ..guarantees import Guarantee, as_parameters
from ..guarantees.events import Charge, PrivacyEvent
from ..text import split_sentences
from .decoding import ClipBounds, StreamingQuantiles
from .hf import LanguageModel, Tokenizer, load_language_model, release_free_memory

if TYPE_CHECKING:
    from torch import Tensor


class ClippingRewriter(Protocol):
    """What :func:`public_bounds` reads of a rewriter class (:class:`~textdp.generation.lm_family.LMRewriter`)."""

    name: str
    kind: str
    clip_target: str
    clip_rules: tuple[str, ...]
    clip_rule: str

    def clipped_values(self, lm: LanguageModel, ids: Tensor) -> Tensor:
        """What the rewriter clips on public token ids ``(1, n)``."""
        ...

__all__ = [
    "BOUND_RULES",
    "MEMORISED",
    "LMGuarantee",
    "document_charges",
    "lm_guarantee",
    "public_bounds",
    "sentence_pieces",
]


_VOCAB_NOTE = "which input units had no in-vocabulary word"
_BLANK_NOTE = "which documents were blank (no text to rewrite)"


@dataclass(frozen=True, kw_only=True)
class LMGuarantee(Guarantee):
    """What one language-model rewrite guarantees: the one :class:`~textdp.guarantees.Guarantee` type.

    ``epsilon``/``delta`` are per ``unit``; the public ``parameters`` (in every record's
    compact guarantee) hold ``per_token``, ``per_sentence`` and ``per_document``, each the worst-case ε
    bound at that level as a number, or None where it is not one number (``per_token`` for dp-bart: one
    Gaussian release per sentence; ``per_sentence`` for dp-prompt, whose unit is the whole document;
    ``per_document`` for a per-sentence rewriter: m times ``per_sentence`` for m sentences, the record's
    ``total``); ``composition`` says how the unit's bound composes over a document, in words;
    ``adjacency`` (which inputs are neighbours), ``bounds`` (the public clipping bounds and
    how they were chosen) and ``steps``; ``not_covered`` says what the bound does not protect.
    Each rewriter builds its own (``bound()`` of :class:`~textdp.generation.lm_family.LMRewriter`).

    >>> from textdp.mechanisms import get
    >>> g = get("dp-prompt", epsilon=2.0, clip=(-5.0, 5.0), max_new_tokens=10).bound()
    >>> g.epsilon, g.unit, g.per_token, g.params["per_document"], g.params["per_sentence"]
    (20.0, 'document', 2.0, 20.0, None)
    """

    per_token: float | None = None
    per_sentence: float | None = None
    per_document: float | None = None
    composition_text: str = ""
    steps: int = 1
    adjacency: str = ""
    bounds: tuple[tuple[str, object], ...] = ()
    length_covered: bool = True
    uncovered: tuple[str, ...] = ()
    detail: str = ""
    extra: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        # the base's empty-policy note speaks of vocabulary words; an LM rewriter's empty unit is a blank text
        for key in ("not_covered", "statement"):
            object.__setattr__(self, key, getattr(self, key).replace(_VOCAB_NOTE, _BLANK_NOTE))

    def _derive(self) -> dict[str, object]:
        d = f"(epsilon={self.epsilon:.4g}, delta={self.delta:.3g})-DP" if self.delta else \
            f"epsilon-DP with epsilon={self.epsilon:.4g} (pure, delta=0)"
        tok = f"epsilon {self.per_token:.4g} per token, " if self.per_token is not None else ""
        sent = f"{self.per_sentence:.4g} per sentence, " if self.per_sentence is not None else ""
        not_covered = "; ".join(self.uncovered)
        params = {"per_token": self.per_token, "per_sentence": self.per_sentence, "per_document": self.per_document,
                  "steps": self.steps, "adjacency": self.adjacency, "bounds": dict(self.bounds),
                  "length_covered": self.length_covered, **dict(self.extra)}
        return {"parameters": as_parameters(params), "not_covered": not_covered,
                "composition": self.composition_text,
                "statement": (f"{self.mechanism}: {d} per {self.unit}: {tok}{sent}{self.composition_text}. "
                              f"Neighbours: {self.adjacency}. {self.detail} Not covered: {not_covered}.")}

    def document_epsilon(self, sentences: int) -> tuple[float, float]:
        """``(ε, δ)`` spent on a document of ``sentences`` units of this rewrite (basic composition)."""
        m = 1 if self.unit == "document" else max(int(sentences), 0)
        return m * self.epsilon, m * self.delta


def lm_guarantee(mechanism: str, epsilon: float, delta: float, unit: str, per_token: float | None,
                 per_sentence: float | None, per_document: float | None, composition: str, steps: int,
                 adjacency: str, bounds: dict[str, object], length_covered: bool, uncovered: tuple[str, ...],
                 detail: str, reference: str, extra: dict[str, object] | None = None,
                 event: PrivacyEvent | None = None) -> LMGuarantee:
    """An :class:`LMGuarantee` from plain values (what each rewriter's ``bound()`` states)."""
    return LMGuarantee(mechanism=mechanism, epsilon=epsilon, delta=delta, unit=unit, reference=reference,
                       per_token=per_token, per_sentence=per_sentence, per_document=per_document,
                       composition_text=composition, steps=steps,
                       adjacency=adjacency, bounds=tuple(bounds.items()), length_covered=length_covered,
                       uncovered=uncovered, detail=detail, extra=tuple((extra or {}).items()), event=event)


#: What no rewriter's bound covers: the model's memory of its training data.
MEMORISED = "what the model memorised from its training data (use a public model, or one trained on data disjoint "\
            "from the private text)"


def sentence_pieces(text: str, max_tokens: int, tokenizer: Tokenizer | None = None) -> list[str]:
    """The sentences of ``text`` cut into pieces of at most ``max_tokens`` tokens of ``tokenizer`` (at word
    boundaries; two tokens are kept for the special ones), so that no part of a long sentence is dropped.
    Without a tokenizer, whole sentences.

    >>> sentence_pieces("One two three. Four.", 32)
    ['One two three.', 'Four.']
    """
    sentences = split_sentences(text)
    if tokenizer is None:
        return sentences
    room = max(max_tokens - 2, 1)
    out: list[str] = []
    for sentence in sentences:
        piece: list[str] = []
        used = 0
        for word in sentence.split():
            n = max(len(tokenizer(" " + word, add_special_tokens=False)["input_ids"]), 1)
            if piece and used + n > room:
                out.append(" ".join(piece))
                piece, used = [], 0
            piece.append(word)
            used += n
        if piece:
            out.append(" ".join(piece))
    return out


#: How :func:`public_bounds` reads the public values: ``step-max`` (upper bound from each position's largest
#: logit), ``all-values`` (quantiles of every value), ``auto`` (the rewriter's ``clip_rule``: step-max for the
#: token-level rewriters, all-values for dp-bart's encoder output).
BOUND_RULES = ("auto", "step-max", "all-values")


def public_bounds(model_dir: str, mechanism: ClippingRewriter, public_texts: Sequence[str], *,
                  low_quantile: float = 0.01, high_quantile: float = 0.99, source: str = "",
                  rule: str = "auto") -> ClipBounds:
    """Clipping bounds from **public** text: quantiles of what ``mechanism`` (a rewriter class, a subclass of
    :class:`~textdp.generation.lm_family.LMRewriter`: its ``kind``, ``clip_rules`` and ``clipped_values``) clips,
    computed by the same model.

    The values are the rewriter's :meth:`~textdp.generation.lm_family.LMRewriter.clipped_values`: the logits of a
    plain forward pass over every position of the public texts (decoder positions, teacher-forced, for seq2seq
    models), or for dp-bart the encoder output's coordinates; at most 256 texts of 128 tokens. Never pass private
    text: the bounds would then depend on it.

    ``rule="step-max"`` (the default for logits): the upper bound is the ``high_quantile`` of each
    position's largest logit over the output vocabulary, so that at that share of public steps no
    token is above it and the model's ranking of its best tokens survives clipping; the lower bound
    is the ``low_quantile`` of all logits. ``rule="all-values"``: both bounds are quantiles of all
    values (the earlier procedure; on real models it puts ``b`` below the top logit at most steps).
    The quantiles are streamed (:class:`~textdp.generation.decoding.StreamingQuantiles`: a fixed
    histogram of 1/64 wide bins, rounded outwards), so memory does not grow with the number of texts.
    """
    torch = require("torch", "generation")
    check_choice(rule, "bound rule", BOUND_RULES)
    lm = load_language_model(model_dir, mechanism.kind)
    lo_q = check_probability(low_quantile, "low_quantile")
    hi_q = check_probability(high_quantile, "high_quantile")
    if lo_q >= hi_q:
        raise ParameterError("the low quantile must be below the high quantile (e.g. 0.01,0.99)")
    texts = [t for t in public_texts if t.strip()]
    if not texts:
        raise ParameterError("the public text for the clipping bounds is empty")
    if rule == "auto":
        rule = mechanism.clip_rule
    if rule not in mechanism.clip_rules:
        raise ParameterError(f"the {rule} rule does not apply to {mechanism.name} (it clips its "
                             f"{mechanism.clip_target}): use {' or '.join(mechanism.clip_rules)}")
    every, tops = StreamingQuantiles(), StreamingQuantiles()
    with torch.inference_mode():
        for t in texts[:256]:
            ids = torch.tensor([lm.tokenizer(t, truncation=True, max_length=128)["input_ids"]])
            values = mechanism.clipped_values(lm, ids)
            every.add(values)
            if rule == "step-max":
                tops.add(values.amax(1))
    release_free_memory()  # the logits' freed blocks back to the system before the rewrite (hf.release_free_memory)
    if every.count < 2:
        raise ParameterError("need at least 2 finite public values to choose bounds")
    low = every.quantile(lo_q, "down")
    if rule == "step-max":
        high = tops.quantile(hi_q, "up")
        text = (f"upper: quantile {hi_q:g} of each position's largest logit; lower: quantile {lo_q:g} of all "
                f"logits; the model's values on public text")
        procedure = "public-step-max"
    else:
        high = every.quantile(hi_q, "up")
        text = f"quantiles {lo_q:g} and {hi_q:g} of the model's {mechanism.clip_target} on public text"
        procedure = "public-quantiles"
    if not high > low:
        raise ParameterError(f"the public quantiles give an empty range [{low:g}, {high:g}]: widen the quantiles")
    return ClipBounds(low, high, procedure, f"{text} ({source})" if source else text)


def document_charges(documents: Sequence[tuple[str, str]], units: Callable[[str], list[str]],
                     guarantee: LMGuarantee) -> dict[str, Charge]:
    """``{document id: Charge}`` each document costs under ``guarantee`` (its ``units(text)`` composed).

    A document-level rewrite (dp-prompt) is one unit per document, whatever its length.
    """
    counts: dict[str, int] = {}
    for doc_id, text in documents:
        counts[doc_id] = counts.get(doc_id, 0) + (1 if guarantee.unit == "document" else len(units(text)))
    return {doc_id: guarantee.charge(n) for doc_id, n in counts.items()}
