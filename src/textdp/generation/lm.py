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
from typing import Any

import numpy as np

from .._validation import check_choice, check_probability
from ..errors import ParameterError, require
from ..guarantees import Guarantee, as_parameters
from ..guarantees.events import Charge, GaussianEvent, PrivacyEvent
from ..text import ENGLISH_STOP_WORDS, split_sentences
from . import lm_decode
from .decoding import ClipBounds, StreamingQuantiles
from .hf import load_language_model
from .lm_decode import clip_and_noise
from .lm_settings import DP_PROMPT_TEMPLATE, LM_MECHANISMS, MECHANISM_KIND, LMSettings, dp_bart_sigma

__all__ = [
    "BOUND_RULES",
    "DP_PROMPT_TEMPLATE",
    "LM_MECHANISMS",
    "MECHANISM_KIND",
    "LMGuarantee",
    "LMSettings",
    "clip_and_noise",
    "document_charges",
    "dp_bart_guarantee",
    "dp_bart_sigma",
    "guarantee_of",
    "lm_guarantee",
    "public_bounds",
    "rewrite_texts",
    "units_of",
]

REFERENCES = {
    "dp-prompt": "Utpala, Hooker & Chen, 'Locally Differentially Private Document Generation Using Zero Shot "
                 "Prompting', Findings of EMNLP 2023",
    "dp-paraphrase": "Mattern, Weggenmann & Kerschbaum, 'The Limits of Word Level Differential Privacy', "
                     "Findings of NAACL 2022",
    "dp-mlm": "Meisenbacher, Chevli, Vladika & Matthes, 'DP-MLM: Differentially Private Text Rewriting Using "
              "Masked Language Models', Findings of ACL 2024",
    "dp-bart": "Igamberdiev & Habernal, 'DP-BART for Privatized Text Rewriting under Local Differential Privacy', "
               "Findings of ACL 2023; sigma: Balle & Wang, ICML 2018",
}


_VOCAB_NOTE = "which input units had no in-vocabulary word"
_BLANK_NOTE = "which documents were blank (no text to rewrite)"


@dataclass(frozen=True, kw_only=True)
class LMGuarantee(Guarantee):
    """What one language-model rewrite guarantees: the one :class:`~textdp.guarantees.Guarantee` type.

    ``epsilon``/``delta`` are per ``unit``; the public ``parameters`` (in every record's
    compact guarantee) hold ``per_token``, ``per_sentence`` and ``per_document`` (the bound at
    each level; ``per_token`` None for dp-bart: one Gaussian release per sentence),
    ``adjacency`` (which inputs are neighbours), ``bounds`` (the public clipping bounds and
    how they were chosen) and ``steps``; ``not_covered`` says what the bound does not protect.

    >>> g = lm_guarantee(LMSettings("dp-prompt", 2.0, ClipBounds(-5.0, 5.0), max_new_tokens=10))
    >>> g.epsilon, g.unit, g.per_token, g.params["per_document"]
    (20.0, 'document', 2.0, 'epsilon=20 per document (one unit)')
    """

    per_token: float | None = None
    per_sentence: float = 0.0
    per_document: str = ""
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
        not_covered = "; ".join(self.uncovered)
        params = {"per_token": self.per_token, "per_sentence": self.per_sentence, "per_document": self.per_document,
                  "steps": self.steps, "adjacency": self.adjacency, "bounds": dict(self.bounds),
                  "length_covered": self.length_covered, **dict(self.extra)}
        return {"parameters": as_parameters(params), "not_covered": not_covered, "composition": self.per_document,
                "statement": (f"{self.mechanism}: {d} per {self.unit}: {tok}{self.per_sentence:.4g} per sentence, "
                              f"{self.per_document}. Neighbours: {self.adjacency}. {self.detail} Not covered: "
                              f"{not_covered}.")}

    def document_epsilon(self, sentences: int) -> tuple[float, float]:
        """``(ε, δ)`` spent on a document of ``sentences`` units of this rewrite (basic composition)."""
        m = 1 if self.unit == "document" else max(int(sentences), 0)
        return m * self.epsilon, m * self.delta


def _guarantee(mechanism: str, epsilon: float, delta: float, unit: str, per_token: float | None, per_sentence: float,
               per_document: str, steps: int, adjacency: str, bounds: dict[str, Any], length_covered: bool,
               uncovered: tuple[str, ...], detail: str, reference: str,
               extra: dict[str, Any] | None = None, event: PrivacyEvent | None = None) -> LMGuarantee:
    return LMGuarantee(mechanism=mechanism, epsilon=epsilon, delta=delta, unit=unit, reference=reference,
                       per_token=per_token, per_sentence=per_sentence, per_document=per_document, steps=steps,
                       adjacency=adjacency, bounds=tuple(bounds.items()), length_covered=length_covered,
                       uncovered=uncovered, detail=detail, extra=tuple((extra or {}).items()), event=event)


_MEMORISED = "what the model memorised from its training data (use a public model, or one trained on data disjoint "\
             "from the private text)"


def lm_guarantee(s: LMSettings, hidden_size: int | None = None) -> LMGuarantee:
    """The :class:`LMGuarantee` of settings ``s`` (derivations: module docstring).

    ``hidden_size`` (the encoder's ``d``) is needed for dp-bart only.
    """
    e, m, ref = float(s.epsilon), s.mechanism, REFERENCES[s.mechanism]
    b = s.bounds.to_dict()
    sentences = "m times this for a document of m sentences (basic composition; m is not covered)"
    if m == "dp-prompt":
        n = s.max_new_tokens
        if s.prior:
            cand = (f" over the public top-k+ set (k={s.public_top_k}: tokens whose prior logit is within "
                    f"Delta of the k-th largest; chosen from public logits only)" if s.public_top_k else
                    " over the full vocabulary")
            detail = (f"Exponential mechanism{cand} on scores p + clip(l - p, {s.bounds.low:.4g}, "
                      f"{s.bounds.high:.4g}), where l are the logits with the document and p the logits of the public "
                      f"prompt without it, on the same released tokens (InvisibleInk's clipping; Delta="
                      f"{s.bounds.width:.4g}), temperature 2*Delta/epsilon={s.bounds.temperature(e):.4g}, {n} steps "
                      "composed; the end token is drawn by the mechanism.")
        else:
            detail = (f"Exponential mechanism over the full vocabulary with logits clipped to [{s.bounds.low:.4g}, "
                      f"{s.bounds.high:.4g}] (Delta={s.bounds.width:.4g}), temperature 2*Delta/epsilon="
                      f"{s.bounds.temperature(e):.4g}, {n} steps composed; the end token is drawn by the mechanism.")
        detail += f" Prompt format: {s.prompt_format} (public template in the settings)."
        return _guarantee(m, n * e, 0.0, "document", e, n * e, f"epsilon={n * e:.4g} per document (one unit)", n,
                          f"any two documents (cut to {s.max_input_tokens} tokens); the prompt is public", b, True,
                          (_MEMORISED,), detail, ref,
                          {"prompt_format": s.prompt_format, "prior": s.prior, "public_top_k": s.public_top_k})
    if m == "dp-paraphrase":
        n = s.max_new_tokens
        detail = (f"Exponential mechanism per decoding step over clipped logits [{s.bounds.low:.4g}, "
                  f"{s.bounds.high:.4g}], temperature {s.bounds.temperature(e):.4g}, {n} steps per sentence; the end "
                  "token is drawn by the mechanism.")
        return _guarantee(m, n * e, 0.0, "sentence", e, n * e, sentences, n,
                           f"any two sentences of at most {s.max_tokens} tokens (a longer sentence is rewritten in pieces, each "
                          "a unit)", b, True,
                           (_MEMORISED, "the number of sentences per document"), detail, ref)
    if m == "dp-mlm":
        n = s.max_tokens
        skeleton = ("the same number of tokens and the same stop words and punctuation at the same positions (they "
                    "are copied)" if s.copy_stopwords else "the same number of tokens (every token is replaced)")
        detail = (f"One exponential-mechanism draw per replaced token at the mask, logits clipped to "
                  f"[{s.bounds.low:.4g}, {s.bounds.high:.4g}], temperature {s.bounds.temperature(e):.4g}; r replaced "
                  f"tokens cost r*epsilon <= {n}*epsilon.")
        return _guarantee(m, n * e, 0.0, "sentence", e, n * e, sentences, n,
                           f"two sentences of at most {n} tokens (a longer sentence is rewritten in pieces, each a "
                           f"unit) with {skeleton}", b, False,
                           (_MEMORISED, "the number of sentences per document", "the sentence length (kept)",
                            *(("the stop words and punctuation (copied)",) if s.copy_stopwords else ())), detail, ref)
    return dp_bart_guarantee(s, hidden_size)


def dp_bart_guarantee(s: LMSettings, hidden_size: int | None) -> LMGuarantee:
    """DP-BART's (ε, δ) per sentence with the sensitivity and σ of a model of ``hidden_size``."""
    sens, sigma = dp_bart_sigma(s, hidden_size)
    assert hidden_size is not None
    detail = (f"Encoder output ({s.max_tokens} tokens x {hidden_size} coordinates) clipped per coordinate to "
              f"[{s.bounds.low:.4g}, {s.bounds.high:.4g}]; independent Gaussian noise per coordinate and per token "
              f"with sigma={sigma:.6g} (analytic Gaussian, L2 sensitivity {s.bounds.width:.4g}*sqrt({hidden_size}*"
              f"{s.max_tokens})={sens:.6g}); the noisy encoder output is never released, only greedily decoded "
              "tokens (post-processing).")
    return _guarantee("dp-bart", float(s.epsilon), float(s.delta), "sentence", None, float(s.epsilon),
                      "m times (epsilon, delta) for a document of m sentences by basic composition, less by the "
                      "Gaussian's tight composition (the ledger's accountant); m is not covered",
                      1, f"any two sentences of at most {s.max_tokens} tokens, padded to {s.max_tokens} (a longer sentence is "
                      "rewritten in pieces, each a unit)", s.bounds.to_dict(), True,
                      (_MEMORISED, "the number of sentences per document"), detail, REFERENCES["dp-bart"],
                      {"sigma": sigma, "l2_sensitivity": sens, "hidden_size": hidden_size},
                      GaussianEvent(sigma / sens))


def rewrite_texts(model_dir: str, texts: Sequence[str], settings: LMSettings,
                  rng: np.random.Generator) -> list[str]:
    """Rewrite every unit of ``texts`` (documents for dp-prompt, sentences otherwise): a pure batch function."""
    if not texts:
        return []
    lm = load_language_model(model_dir, MECHANISM_KIND[settings.mechanism])
    if settings.mechanism == "dp-prompt":
        return lm_decode.dp_prompt(lm, texts, settings, rng)
    if settings.mechanism == "dp-paraphrase":
        return lm_decode.dp_paraphrase(lm, texts, settings, rng)
    if settings.mechanism == "dp-mlm":
        return lm_decode.dp_mlm(lm, texts, settings, rng, stop_words=ENGLISH_STOP_WORDS)
    return lm_decode.dp_bart(lm, texts, settings, rng)


def units_of(text: str, settings: LMSettings, tokenizer: Any = None) -> list[str]:
    """The privacy units of a document: itself (dp-prompt), or its sentences cut into pieces of at most
    ``max_tokens`` tokens of ``tokenizer`` (at word boundaries; two tokens are kept for the special ones), so
    that no part of a long sentence is dropped. Without a tokenizer, whole sentences (longer ones are cut).

    >>> units_of("One two three. Four.", LMSettings("dp-mlm", 1.0, ClipBounds(0.0, 1.0)))
    ['One two three.', 'Four.']
    """
    if settings.mechanism == "dp-prompt":
        return [text] if text.strip() else []
    sentences = split_sentences(text)
    if tokenizer is None:
        return sentences
    room = max(settings.max_tokens - 2, 1)
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
#: logit), ``all-values`` (quantiles of every value), ``auto`` (step-max for the token-level rewriters, all-values
#: for dp-bart's encoder output).
BOUND_RULES = ("auto", "step-max", "all-values")


def public_bounds(model_dir: str, mechanism: str, public_texts: Sequence[str], *, low_quantile: float = 0.01,
                  high_quantile: float = 0.99, source: str = "", rule: str = "auto") -> ClipBounds:
    """Clipping bounds from **public** text: quantiles of what the mechanism clips, computed by the same model.

    The values are the logits of a plain forward pass over every position of the public texts
    (with the BOS token the model expects; decoder positions, teacher-forced, for seq2seq models), or
    for dp-bart the encoder output's coordinates; at most 256 texts of 128 tokens. Never pass private
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
    lm = load_language_model(model_dir, MECHANISM_KIND[check_choice(mechanism, "mechanism", LM_MECHANISMS)])
    lo_q = check_probability(low_quantile, "low_quantile")
    hi_q = check_probability(high_quantile, "high_quantile")
    if lo_q >= hi_q:
        raise ParameterError("the low quantile must be below the high quantile (e.g. 0.01,0.99)")
    texts = [t for t in public_texts if t.strip()]
    if not texts:
        raise ParameterError("the public text for the clipping bounds is empty")
    if rule == "auto":
        rule = "all-values" if mechanism == "dp-bart" else "step-max"
    if rule == "step-max" and mechanism == "dp-bart":
        raise ParameterError("the step-max rule is for logits; dp-bart clips its encoder output: use all-values")
    every, tops = StreamingQuantiles(), StreamingQuantiles()
    allowed = None if mechanism == "dp-bart" else lm.output_mask(keep=lm_decode.stop_ids(lm))
    with torch.inference_mode():
        for t in texts[:256]:
            ids = torch.tensor([lm.tokenizer(t, truncation=True, max_length=128)["input_ids"]])
            if mechanism == "dp-bart":
                values = lm.model.get_encoder()(input_ids=ids).last_hidden_state[0]
            elif lm.kind == "seq2seq":
                values = lm.model(input_ids=ids, labels=ids).logits[0]
            else:
                values = lm.model(input_ids=ids).logits[0]
            if allowed is not None:
                values = values[:, allowed[: values.shape[1]]]
            every.add(values)
            if rule == "step-max":
                tops.add(values.amax(1))
    if every.count < 2:
        raise ParameterError("need at least 2 finite public values to choose bounds")
    what = "encoder outputs" if mechanism == "dp-bart" else "logits"
    low = every.quantile(lo_q, "down")
    if rule == "step-max":
        high = tops.quantile(hi_q, "up")
        text = (f"upper: quantile {hi_q:g} of each position's largest logit; lower: quantile {lo_q:g} of all "
                f"logits; the model's values on public text")
        procedure = "public-step-max"
    else:
        high = every.quantile(hi_q, "up")
        text = f"quantiles {lo_q:g} and {hi_q:g} of the model's {what} on public text"
        procedure = "public-quantiles"
    if not high > low:
        raise ParameterError(f"the public quantiles give an empty range [{low:g}, {high:g}]: widen the quantiles")
    return ClipBounds(low, high, procedure, f"{text} ({source})" if source else text)


def guarantee_of(model_dir: str, settings: LMSettings) -> LMGuarantee:
    """The guarantee of ``settings`` with the model of ``model_dir`` (its hidden size, for dp-bart).

    Settings whose longest input does not fit the model's positions are refused here
    (:func:`~textdp.generation.lm_decode.check_context`).
    """
    lm = load_language_model(model_dir, MECHANISM_KIND[settings.mechanism])
    lm_decode.check_context(lm, settings)
    hidden = getattr(lm.model.config, "d_model", None) or getattr(lm.model.config, "hidden_size", None)
    return lm_guarantee(settings, hidden)


def document_charges(documents: Sequence[tuple[str, str]], units: Callable[[str], list[str]],
                     guarantee: LMGuarantee) -> dict[str, Charge]:
    """``{document id: Charge}`` each document costs under ``guarantee`` (its ``units(text)`` composed).

    A document-level rewrite (dp-prompt) is one unit per document, whatever its length.
    """
    counts: dict[str, int] = {}
    for doc_id, text in documents:
        counts[doc_id] = counts.get(doc_id, 0) + (1 if guarantee.unit == "document" else len(units(text)))
    return {doc_id: guarantee.charge(n) for doc_id, n in counts.items()}
