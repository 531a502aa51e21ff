"""The language-model rewriters, each one class: its parameters (dataclass fields) and its behaviour (methods).

``dp-prompt`` (:class:`DPPrompt`), ``dp-paraphrase`` (:class:`DPParaphrase`), ``dp-mlm`` (:class:`DPMLM`) and
``dp-bart`` (:class:`DPBART`) join the sentence family of the one base
(:class:`textdp.mechanisms.base.Mechanism`): the parameters shared by all four are declared once on
:class:`LMRewriter`, each rewriter adds its own (``prompt``, ``prior``, ... on DP-Prompt; ``copy_stopwords`` on
DP-MLM; ``delta`` on DP-BART) and overrides what differs: its model ``kind``, its privacy unit, its decoding loop
(:meth:`LMRewriter.decode`), its bound (:meth:`LMRewriter.bound`), the positions it needs
(:meth:`LMRewriter.context_need`) and what it clips (:meth:`LMRewriter.clipped_values`). ``fit`` loads the model
(offline, safetensors only) and checks its kind; ``privatize_batch`` is the one batch verb; ``guarantee(context)``
returns an :class:`~textdp.generation.lm.LMGuarantee`. Nothing here chooses behaviour by a mechanism's name.

The decoding loops are in :mod:`textdp.generation.lm_decode`, the token draw in
:mod:`textdp.generation.decoding`, the derivations in :mod:`textdp.generation.lm`.

>>> from textdp.mechanisms import get
>>> m = get("dp-mlm", epsilon=2.0, model="some/dir", clip=(-3.0, 3.0))
>>> m.get_params()["clip"], m.family, m.releases, m.kind
((-3.0, 3.0), 'sentence', 'sentence', 'masked')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .._rng import SeedLike
from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..accounting.gaussian import analytic_gaussian_sigma
from ..errors import ParameterError, ParameterTypeError
from ..guarantees.events import GaussianEvent
from ..mechanisms.base import ReleaseContext
from ..text import ENGLISH_STOP_WORDS
from . import lm_decode
from .decoding import MAX_NEW_TOKENS, SAMPLERS, ClipBounds, refuse_truncation
from .hf import LanguageModel, load_language_model
from .lm import MEMORISED, LMGuarantee, lm_guarantee, sentence_pieces
from .rewriter import TextRewriter

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["CHAT_PROMPT", "DEFAULT_INSTRUCTION", "DPBART", "DPMLM", "DP_PROMPT_TEMPLATE", "INSTRUCTIONS",
           "PROMPT_FORMATS", "RESPONSE_PREFIX", "DPParaphrase", "DPPrompt", "Instruction", "LMRewriter", "instruction"]

#: DP-Prompt's prompt (Utpala et al. 2023, §3); ``{document}`` is replaced by the private text.
DP_PROMPT_TEMPLATE = "Document : {document}\nParaphrase of the document :"
#: dp-prompt's user message when the model's chat template is used (public; ``{document}`` is the private text).
CHAT_PROMPT = "Paraphrase the following text. Reply with the paraphrase only.\n\n{document}"
#: dp-prompt's default public opening of the assistant turn (chat format, default prompt): the model continues after
#: it, so it writes the paraphrase rather than a preamble or a reply (public conditioning: the same for every input)
RESPONSE_PREFIX = "Paraphrase:"
#: How dp-prompt's prompt is built: ``chat`` (the tokenizer's chat template around :data:`CHAT_PROMPT`), ``plain``
#: (the template text as it is, with the model's BOS token), ``auto`` (``chat`` when the tokenizer has a template).
PROMPT_FORMATS = ("auto", "chat", "plain")

Units = list[str]


@dataclass(frozen=True)
class Instruction:
    """A named public instruction of dp-prompt: the user message (``chat``, with ``{document}``), the opening of the
    assistant turn (``response_prefix``) and the template of a model without a chat template (``plain``).

    Public conditioning: each is fixed text chosen without looking at any private document (the frontier of
    docs/lm-rewriting.md chose among them on development corpora), the same for every input, and written to the
    settings; the private text enters only where ``{document}`` stands. The guarantee does not depend on it.
    """

    name: str
    chat: str
    response_prefix: str
    plain: str
    summary: str


#: dp-prompt's library of named instructions (``instruction=NAME``; ``--param instruction=NAME``).
INSTRUCTIONS: dict[str, Instruction] = {i.name: i for i in (
    Instruction("paraphrase", CHAT_PROMPT, RESPONSE_PREFIX, DP_PROMPT_TEMPLATE, "paraphrase the text"),
    Instruction("neutral", "Rewrite the following text in plain, neutral language, keeping its meaning. Reply with "
                "the rewritten text only.\n\n{document}", "Rewritten:",
                "Document : {document}\nThe document in plain, neutral language :",
                "rewrite it in plain, neutral style"),
    Instruction("simplify", "Rewrite the following text in simple words and short sentences, keeping its meaning. "
                "Reply with the simplified text only.\n\n{document}", "Simplified:",
                "Document : {document}\nThe document in simple words :", "simplify it"),
    Instruction("formal", "Rewrite the following text in a formal style, keeping its meaning. Reply with the "
                "rewritten text only.\n\n{document}", "Formal version:",
                "Document : {document}\nThe document in a formal style :", "rewrite it formally"),
)}
#: the instruction dp-prompt uses when none is named
DEFAULT_INSTRUCTION = "paraphrase"


def instruction(name: str) -> Instruction:
    """The named instruction of :data:`INSTRUCTIONS` (a one-line error naming the choices otherwise).

    >>> instruction("neutral").response_prefix
    'Rewritten:'
    """
    if not isinstance(name, str) or name not in INSTRUCTIONS:
        raise ParameterError(f"unknown dp-prompt instruction {name!r}; choose one of: {', '.join(INSTRUCTIONS)}")
    return INSTRUCTIONS[name]

_SENTENCES = ("m times this for a document of m sentences (basic composition; m is not covered): the record's "
              "total")


class LMRewriter(TextRewriter[str]):
    """Base of the four language-model rewriters: the parameters they share, and the batch loop's hooks.

    ``model`` is a local Hugging Face directory of the rewriter's ``kind``, or a GGUF file (or a folder
    holding one: :func:`~textdp.generation.hf.load_language_model`); ``clip`` the public clipping
    bounds, a :class:`~textdp.generation.decoding.ClipBounds` or ``(low, high)``. ``max_new_tokens``: generation
    steps per unit; ``max_tokens``: input tokens per sentence (longer ones are rewritten in pieces);
    ``batch_size``: most rows per forward pass; ``sampler``: ``inverse-cdf`` or ``gumbel``
    (:func:`~textdp.generation.decoding.sample_log_weights`); ``top_k``/``top_p`` are refused
    (:func:`~textdp.generation.decoding.refuse_truncation`).

    Fitted: ``model_dir_``, ``bounds_`` (the :class:`ClipBounds`), ``delta_``, ``bound_`` (the guarantee).
    """

    chunk_size = 64
    #: the model kind the rewriter loads (:data:`~textdp.generation.hf.MODEL_KINDS`)
    kind: ClassVar[str] = ""
    #: what is clipped, and the rules :func:`~textdp.generation.lm.public_bounds` may read it with (first: ``auto``)
    clip_target: ClassVar[str] = "logits"
    clip_rules: ClassVar[tuple[str, ...]] = ("step-max", "all-values")
    #: the rule ``--clip-rule auto`` stands for
    clip_rule: ClassVar[str] = "step-max"

    epsilon: float | None = None
    model: str | Path | None = None
    clip: ClipBounds | tuple[float, float] | None = None
    max_new_tokens: int = MAX_NEW_TOKENS
    max_tokens: int = 32
    batch_size: int = 16
    sampler: str = "inverse-cdf"
    top_k: int | None = None
    top_p: float | None = None
    seed: SeedLike = None

    # -- parameters ----------------------------------------------------------------------------------------------
    def _checked_bounds(self) -> ClipBounds:
        """Validate the parameters (no model needed) and return the clipping bounds."""
        if self.epsilon is None:
            raise ParameterError(f"{self.name} needs epsilon")
        if "calibration_" not in self.__dict__:  # before fit; fit validates epsilon once, in the calibration
            check_epsilon(self.epsilon)
        if self.clip is None:
            raise ParameterError(f"{self.name} needs public clipping bounds (clip=(low, high) or a ClipBounds)")
        bounds = self.clip if isinstance(self.clip, ClipBounds) else ClipBounds(*self.clip)
        refuse_truncation(self.top_k, self.top_p)
        for name in ("max_new_tokens", "max_tokens", "batch_size"):
            check_positive_int(getattr(self, name), name.replace("_", "-"))
        check_choice(self.sampler, "sampler", SAMPLERS)
        self._check_own()
        return bounds

    def _check_own(self) -> None:
        """Validate the rewriter's own parameters (none here)."""

    def _eps(self) -> float:
        """ε of the bound and the noise: the fitted calibration's (before fit, the checked parameter)."""
        cal = self.__dict__.get("calibration_")
        return cal.epsilon if cal is not None else check_epsilon(self.epsilon)

    def delta_value(self) -> float:
        """δ per unit: 0 (pure ε-DP) unless the rewriter is Gaussian."""
        return 0.0

    def _fit(self) -> None:
        if self.epsilon is None:
            raise ParameterError(f"{self.name} needs epsilon")
        self._calibrate(self.epsilon, self.delta_value())
        self.bounds_ = self._checked_bounds()
        if not isinstance(self.model, (str, Path)):
            raise ParameterTypeError(f"{self.name}: model must be a local model directory, got "
                                     f"{type(self.model).__name__}")
        self.model_dir_ = str(Path(self.model).resolve())
        lm = load_language_model(self.model_dir_, self.kind)  # loads the model and checks its kind
        self.resolve(lm)
        self.check_context(lm)  # refused before any text is seen: the cuts are public
        hidden = getattr(lm.model.config, "d_model", None) or getattr(lm.model.config, "hidden_size", None)
        self.bound_ = self.bound(hidden)
        object.__setattr__(self, "calibration_", self.calibration_.with_noise(**self.noise_parameters(hidden)))

    def noise_parameters(self, hidden_size: int | None) -> dict[str, object]:
        """The public noise parameters the sampler reads from the calibration (none beyond ε here)."""
        return {}

    def resolve(self, lm: LanguageModel) -> None:
        """Make explicit (as fitted attributes) what depends on the public model; nothing by default."""

    def public_settings(self) -> dict[str, object]:
        """The public parameters as recorded in a settings file (fitted: what the model resolved made explicit)."""
        self._ensure_fitted()
        out: dict[str, object] = {"mechanism": self.name, "epsilon": self.epsilon_, "bounds": self.bounds_.to_dict(),
                               "delta": self.delta_}
        for k in self.param_names():
            if k not in ("epsilon", "model", "clip", "seed", "delta"):
                out[k] = getattr(self, k)
        return out

    # -- behaviour each rewriter overrides -----------------------------------------------------------------------
    def bound(self, hidden_size: int | None = None) -> LMGuarantee:
        """The guarantee per unit, from the parameters (``hidden_size``: the model's, for dp-bart)."""
        raise NotImplementedError

    def check_context(self, lm: LanguageModel) -> None:
        """Refuse parameters whose longest public input does not fit the model's positions (before any text is seen).

        The cuts are public (``max_input_tokens``, ``max_tokens``, ``max_new_tokens``), so the longest input a
        rewriter can build is known in advance (:meth:`context_need`). Checking this here, and not per document,
        means no error ever depends on a private text's length.
        """
        limit = lm_decode.context_length(lm.model.config)
        if limit is None:
            return
        need, what, fix = self.context_need(lm)
        if need > limit:
            raise ParameterError(f"{self.name}: {what} need {need} positions, but the model has {limit}; {fix}")

    def context_need(self, lm: LanguageModel) -> tuple[int, str, str]:
        """``(positions, what needs them, how to lower it)`` of the longest input this rewriter builds: here the
        seq2seq encoder's ``max_tokens`` and decoder's ``max_new_tokens + 1``."""
        need = max(self.max_tokens, self.max_new_tokens + 1)
        return need, (f"max_tokens={self.max_tokens} input tokens and max_new_tokens={self.max_new_tokens} output "
                      "tokens"), "lower --max-tokens or --max-new-tokens"

    @classmethod
    def clipped_values(cls, lm: LanguageModel, ids: Tensor) -> Tensor:
        """What the rewriter clips, on public token ids ``(1, n)``: the logits over the output mask."""
        if lm.kind == "seq2seq":
            values = lm.model(input_ids=ids, labels=ids).logits[0]
        else:
            values = lm.model(input_ids=ids).logits[0]
        allowed = lm.output_mask(keep=lm_decode.stop_ids(lm))
        return values[:, allowed[: values.shape[1]]]

    def decode(self, lm: LanguageModel, units: Sequence[str], rng: np.random.Generator) -> Units:
        """Rewrite every unit with the loaded model (a pure batch function of ``units`` and ``rng``)."""
        raise NotImplementedError

    # -- the batch loop's hooks (TextRewriter) -------------------------------------------------------------------
    def guarantee(self, context: ReleaseContext | None = None) -> LMGuarantee:
        """The guarantee per unit (``context``: seeded and the empty policy)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        return self.bound_.evolve(seeded=ctx.seeded, empty=ctx.empty)

    def units(self, text: str) -> Units:
        """The privacy units of ``text``: its sentences, cut into pieces of at most ``max_tokens`` tokens."""
        self._ensure_fitted()
        return sentence_pieces(text, self.max_tokens, load_language_model(self.model_dir_, self.kind).tokenizer)

    def rewrite_units(self, units: Sequence[str], rng: np.random.Generator) -> Units:
        self._ensure_fitted()
        if not units:
            return []
        return self.decode(load_language_model(self.model_dir_, self.kind), units, rng)

    def unit_text(self, unit: str) -> str:
        return unit

    def _diagnose(self, uid: str, prepared: Units, output: Units | None) -> dict[str, object]:
        return {"id": uid, "units": len(prepared), "characters": sum(len(u) for u in prepared)}


class DPPrompt(LMRewriter):
    """DP-Prompt (Utpala et al. 2023): a causal LM, prompted with a public template, paraphrases each document.

    The prompt is the tokenizer's chat template around :data:`CHAT_PROMPT` when the model has one (instruct
    models), else the paper's template :data:`DP_PROMPT_TEMPLATE` (``prompt_format``: one of
    :data:`PROMPT_FORMATS`, resolved at ``fit``; ``prompt``: a template with ``{document}``; both public, in the
    record; ``instruction``: the name of a public instruction of :data:`INSTRUCTIONS`, default
    :data:`DEFAULT_INSTRUCTION`, each with its own response prefix and plain template). ``max_input_tokens``: document tokens in the prompt (longer documents are cut); ``batch_tokens``: most
    ``rows × (prompt + max_new_tokens)`` tokens per batch. With ``prior=True`` the logits are clipped relative to the
    public prior (InvisibleInk: :func:`~textdp.generation.decoding.prior_log_weights`), optionally over the public
    top-k⁺ set (``public_top_k``). Each of the ``n = max_new_tokens`` tokens is an exponential-mechanism draw over
    the clipped logits (temperature ``2 Delta / epsilon``, the whole vocabulary). Guarantee: ``n epsilon`` per
    document for any two documents cut to ``max_input_tokens`` tokens (adaptive composition; the end token is
    drawn, so the length is covered). Unit: the document.

    Outputs that are paraphrases, by public means only (none changes the law of a draw or the bound):
    ``response_prefix`` opens the assistant turn with public text (default :data:`RESPONSE_PREFIX` for the chat
    format with the default prompt; ``""`` for none), so the model continues with the paraphrase (public
    conditioning: part of the public prompt, the same for every input); ``stop`` (default a blank line) and
    ``repeat_ngram`` (default 4: stop when the last 4 tokens repeat an earlier 4-gram) end a row after a draw by
    reading only the tokens already released (adaptive composition: fewer draws, never more); ``tidy`` (default on)
    post-processes each released text (:func:`~textdp.generation.lm_decode.tidy_output`: cut at the stop string and
    the repeat, a known preamble removed, a capped text cut after its last complete sentence). The end token is
    still drawn by the mechanism.
    """

    name = "dp-prompt"
    reference = ("Utpala, Hooker & Chen, 'Locally Differentially Private Document Generation Using Zero Shot "
                 "Prompting', Findings of EMNLP 2023")
    kind = "causal"
    privacy_unit = "document"
    #: the record's release form: the document rewritten whole (not per sentence)
    releases = "document"

    max_input_tokens: int = 256
    instruction: str = DEFAULT_INSTRUCTION
    prompt: str | None = None
    prompt_format: str = "auto"
    prior: bool = False
    public_top_k: int | None = None
    batch_tokens: int = 16384
    response_prefix: str | None = None
    stop: str | None = "\n\n"
    repeat_ngram: int | None = 4
    tidy: bool = True

    def _check_own(self) -> None:
        for name in ("max_input_tokens", "batch_tokens"):
            check_positive_int(getattr(self, name), name.replace("_", "-"))
        check_choice(self.prompt_format, "prompt format", PROMPT_FORMATS)
        instruction(self.instruction)
        if self.prompt is not None and self.instruction != DEFAULT_INSTRUCTION:
            raise ParameterError("give the prompt once: a named instruction or a prompt text (--prompt), not both")
        if self.prompt is not None and "{document}" not in self.prompt:
            raise ParameterError("the dp-prompt template must contain {document} (where the private text goes)")
        if self.repeat_ngram is not None:
            check_positive_int(self.repeat_ngram, "repeat-ngram")
        for name in ("response_prefix", "stop"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ParameterTypeError(f"dp-prompt: {name} must be text, got {type(value).__name__}")
        if self.public_top_k is not None:
            check_positive_int(self.public_top_k, "public-top-k")
            if not self.prior:
                raise ParameterError("public_top_k needs prior=True (the candidate set is chosen from the public "
                                     "prior's logits)")

    def resolve(self, lm: LanguageModel) -> None:
        """``prompt_format="auto"``: the chat template when the tokenizer has one; the template text made explicit."""
        fmt = self.prompt_format
        if fmt == "auto":
            fmt = "chat" if lm_decode.chat_template(lm) else "plain"
        elif fmt == "chat" and not lm_decode.chat_template(lm):
            raise ParameterError("the model's tokenizer has no chat template: use --prompt-format plain (with "
                                 "--prompt or the paper's template)")
        self.prompt_format_ = fmt
        self.template_ = self.template(fmt)
        self.response_prefix_ = (self.response_prefix if self.response_prefix is not None else
                                 instruction(self.instruction).response_prefix if fmt == "chat" and self.prompt is None
                                 else "")

    def template(self, prompt_format: str | None = None) -> str:
        """The prompt text used with ``prompt_format`` (default: the resolved one): ``prompt``, or the default."""
        if self.prompt is not None:
            return self.prompt
        fmt = prompt_format or self.__dict__.get("prompt_format_", self.prompt_format)
        named = instruction(self.instruction)
        return named.chat if fmt == "chat" else named.plain

    def public_settings(self) -> dict[str, object]:
        return {**super().public_settings(), "prompt": self.template_, "prompt_format": self.prompt_format_,
                "response_prefix": self.response_prefix_}

    def units(self, text: str) -> Units:
        """The document itself (one unit), or nothing when it is blank."""
        return [text] if text.strip() else []

    def context_need(self, lm: LanguageModel) -> tuple[int, str, str]:
        frame = len(lm_decode.prompt_frame(lm, self).public) + lm_decode.EDGE_TOKENS
        return frame + self.max_input_tokens + self.max_new_tokens, (
            f"the prompt ({frame} tokens) around a document cut to max_input_tokens={self.max_input_tokens}, plus "
            f"max_new_tokens={self.max_new_tokens}"), ("lower --max-input-tokens (the cut is public and stated in "
                                                       "the guarantee) or --max-new-tokens")

    def decode(self, lm: LanguageModel, units: Sequence[str], rng: np.random.Generator) -> Units:
        return lm_decode.dp_prompt(lm, units, self, rng)

    def bound(self, hidden_size: int | None = None) -> LMGuarantee:
        """``n ε`` per document, ``n = max_new_tokens`` (adaptive composition of the exponential-mechanism draws)."""
        b, e, n = self._checked_bounds(), self._eps(), self.max_new_tokens
        fmt = self.__dict__.get("prompt_format_", self.prompt_format)
        if self.prior:
            cand = (f" over the public top-k+ set (k={self.public_top_k}: tokens whose prior logit is within "
                    f"Delta of the k-th largest; chosen from public logits only)" if self.public_top_k else
                    " over the full vocabulary")
            detail = (f"Exponential mechanism{cand} on scores p + clip(l - p, {b.low:.4g}, {b.high:.4g}), where l "
                      f"are the logits with the document and p the logits of the public prompt without it, on the "
                      f"same released tokens (InvisibleInk's clipping; Delta={b.width:.4g}), temperature "
                      f"2*Delta/epsilon={b.temperature(e):.4g}, {n} steps composed; the end token is drawn by the "
                      "mechanism.")
        else:
            detail = (f"Exponential mechanism over the full vocabulary with logits clipped to [{b.low:.4g}, "
                      f"{b.high:.4g}] (Delta={b.width:.4g}), temperature 2*Delta/epsilon={b.temperature(e):.4g}, "
                      f"{n} steps composed; the end token is drawn by the mechanism.")
        detail += f" Prompt format: {fmt} (public template in the settings)."
        return lm_guarantee(self.name, n * e, 0.0, "document", e, None, n * e, f"epsilon={n * e:.4g} per document "
                            "(one unit: the whole document, whatever its number of sentences)", n, f"any two documents (cut to {self.max_input_tokens} tokens); the prompt is "
                            "public", b.to_dict(), True, (MEMORISED,), detail, self.reference,
                            {"prompt_format": fmt, "instruction": self.instruction if self.prompt is None else None,
                             "prior": self.prior, "public_top_k": self.public_top_k})


class DPParaphrase(LMRewriter):
    """DP-Paraphrase (Mattern et al. 2022): a sequence-to-sequence paraphraser rewrites each sentence.

    Every generated token is an ε-DP draw over clipped logits, so a sentence costs
    ``max_new_tokens * epsilon`` for any two sentences (its length covered). A document of
    ``m`` sentences composes to ``m`` times that; ``m`` itself is not covered. Unit: the sentence.
    """

    name = "dp-paraphrase"
    reference = ("Mattern, Weggenmann & Kerschbaum, 'The Limits of Word Level Differential Privacy', "
                 "Findings of NAACL 2022")
    kind = "seq2seq"

    def decode(self, lm: LanguageModel, units: Sequence[str], rng: np.random.Generator) -> Units:
        return lm_decode.seq2seq(lm, units, self, rng)

    def bound(self, hidden_size: int | None = None) -> LMGuarantee:
        """``n ε`` per sentence, ``n = max_new_tokens``."""
        b, e, n = self._checked_bounds(), self._eps(), self.max_new_tokens
        detail = (f"Exponential mechanism per decoding step over clipped logits [{b.low:.4g}, {b.high:.4g}], "
                  f"temperature {b.temperature(e):.4g}, {n} steps per sentence; the end token is drawn by the "
                  "mechanism.")
        return lm_guarantee(self.name, n * e, 0.0, "sentence", e, n * e, None, _SENTENCES, n,
                            f"any two sentences of at most {self.max_tokens} tokens (a longer sentence is rewritten "
                            "in pieces, each a unit)", b.to_dict(), True,
                            (MEMORISED, "the number of sentences per document"), detail, self.reference)


class DPMLM(LMRewriter):
    """DP-MLM (Meisenbacher et al. 2024): a masked LM replaces one token at a time.

    The input is the sentence followed by its copy with one token masked; the replacement is
    an ε-DP draw at the mask. Guarantee: ``r epsilon`` per sentence (``r`` replaced tokens,
    at most ``max_tokens``; the record states ``max_tokens * epsilon``) between sentences of the
    **same skeleton**: as many tokens and, with ``copy_stopwords`` (the paper's default), the same stop
    words and punctuation in place, which are released as they are.
    """

    name = "dp-mlm"
    reference = ("Meisenbacher, Chevli, Vladika & Matthes, 'DP-MLM: Differentially Private Text Rewriting Using "
                 "Masked Language Models', Findings of ACL 2024")
    kind = "masked"

    copy_stopwords: bool = True

    def context_need(self, lm: LanguageModel) -> tuple[int, str, str]:
        return 2 * self.max_tokens + 3, f"a sentence of max_tokens={self.max_tokens} and its masked copy", \
            "lower --max-tokens"

    def decode(self, lm: LanguageModel, units: Sequence[str], rng: np.random.Generator) -> Units:
        return lm_decode.dp_mlm(lm, units, self, rng, stop_words=ENGLISH_STOP_WORDS)

    def bound(self, hidden_size: int | None = None) -> LMGuarantee:
        """``r ε <= max_tokens ε`` per sentence between sentences of the same skeleton."""
        b, e, n = self._checked_bounds(), self._eps(), self.max_tokens
        skeleton = ("the same number of tokens and the same stop words and punctuation at the same positions (they "
                    "are copied)" if self.copy_stopwords else "the same number of tokens (every token is replaced)")
        detail = (f"One exponential-mechanism draw per replaced token at the mask, logits clipped to "
                  f"[{b.low:.4g}, {b.high:.4g}], temperature {b.temperature(e):.4g}; r replaced "
                  f"tokens cost r*epsilon <= {n}*epsilon.")
        return lm_guarantee(self.name, n * e, 0.0, "sentence", e, n * e, None, _SENTENCES, n,
                            f"two sentences of at most {n} tokens (a longer sentence is rewritten in pieces, each a "
                            f"unit) with {skeleton}", b.to_dict(), False,
                            (MEMORISED, "the number of sentences per document", "the sentence length (kept)",
                             *(("the stop words and punctuation (copied)",) if self.copy_stopwords else ())),
                            detail, self.reference)


class DPBART(LMRewriter):
    """DP-BART-CLV (Igamberdiev & Habernal 2023): noisy encoder output, decoded.

    The encoder output of the sentence (padded or cut to ``max_tokens``) is clipped to
    ``clip`` per coordinate and every coordinate of every token gets its own ``N(0, sigma^2)``,
    ``sigma`` from the analytic Gaussian mechanism (Balle & Wang 2018) for the L2 sensitivity
    ``(c_max - c_min) sqrt(d n)`` (:meth:`sigma`). Guarantee: ``(epsilon, delta)``-DP per sentence for any two
    sentences; the noisy matrix is never released, only the greedily decoded tokens (``max_new_tokens`` of them).
    """

    name = "dp-bart"
    reference = ("Igamberdiev & Habernal, 'DP-BART for Privatized Text Rewriting under Local Differential Privacy', "
                 "Findings of ACL 2023; sigma: Balle & Wang, ICML 2018")
    kind = "seq2seq"
    clip_target = "encoder outputs"
    clip_rules = ("all-values",)
    clip_rule = "all-values"

    delta: float | None = None

    def delta_value(self) -> float:
        if self.delta is None:
            raise ParameterError("dp-bart needs delta (its (epsilon, delta) per sentence), e.g. delta=1e-5")
        return check_probability(self.delta, "delta")

    def _check_own(self) -> None:
        self.delta_value()

    @classmethod
    def clipped_values(cls, lm: LanguageModel, ids: Tensor) -> Tensor:
        """The encoder output's coordinates (what DP-BART clips)."""
        return lm.model.get_encoder()(input_ids=ids).last_hidden_state[0]

    def sigma(self, hidden_size: int | None) -> tuple[float, float]:
        """``(L2 sensitivity, σ)``: ``(c_max − c_min) √(d n)`` and the analytic Gaussian σ for (ε, δ).

        >>> from textdp.mechanisms import get
        >>> sens, sigma = get("dp-bart", epsilon=1.0, clip=(-0.2, 0.1), delta=1e-5, max_tokens=4).sigma(16)
        >>> round(sens, 6), sigma > sens
        (2.4, True)
        """
        bounds = self._checked_bounds()
        if hidden_size is None:
            raise ParameterError("dp-bart needs the model's hidden size to calibrate sigma")
        d = check_positive_int(hidden_size, "hidden size")
        sens = bounds.width * math.sqrt(d * self.max_tokens)
        return sens, analytic_gaussian_sigma(self._eps(), self.delta_value(), sens)

    def noise_parameters(self, hidden_size: int | None) -> dict[str, object]:
        stated = self.bound_.params  # the σ the guarantee states, computed once in bound()
        return {"sigma": stated["sigma"], "l2_sensitivity": stated["l2_sensitivity"]}

    def decode(self, lm: LanguageModel, units: Sequence[str], rng: np.random.Generator) -> Units:
        return lm_decode.dp_bart(lm, units, self, rng)

    def bound(self, hidden_size: int | None = None) -> LMGuarantee:
        """(ε, δ) per sentence with the sensitivity and σ of a model of ``hidden_size``."""
        b, e, dl = self._checked_bounds(), self._eps(), self.delta_value()
        sens, sigma = self.sigma(hidden_size)
        n = self.max_tokens
        detail = (f"Encoder output ({n} tokens x {hidden_size} coordinates) clipped per coordinate to "
                  f"[{b.low:.4g}, {b.high:.4g}]; independent Gaussian noise per coordinate and per token with "
                  f"sigma={sigma:.6g} (analytic Gaussian, L2 sensitivity {b.width:.4g}*sqrt({hidden_size}*{n})="
                  f"{sens:.6g}); the noisy encoder output is never released, only greedily decoded tokens "
                  "(post-processing).")
        return lm_guarantee(self.name, e, dl, "sentence", None, e, None,
                            "m times (epsilon, delta) for a document of m sentences by basic composition, less by "
                            "the Gaussian's tight composition (the ledger's accountant); m is not covered",
                            1, f"any two sentences of at most {n} tokens, padded to {n} (a longer sentence is "
                            "rewritten in pieces, each a unit)", b.to_dict(), True,
                            (MEMORISED, "the number of sentences per document"), detail, self.reference,
                            {"sigma": sigma, "l2_sensitivity": sens, "hidden_size": hidden_size},
                            GaussianEvent(sigma / sens))
