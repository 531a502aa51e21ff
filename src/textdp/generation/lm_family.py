"""The language-model rewriters as mechanisms of the one base (:class:`textdp.mechanisms.base.Mechanism`).

``dp-prompt``, ``dp-paraphrase``, ``dp-mlm`` and ``dp-bart`` join the sentence family: parameters declared
once on :class:`LMRewriter` (scikit-learn style), ``fit`` loads the model (offline, safetensors only) and checks its
kind, ``privatize_batch`` is the one batch verb, and ``guarantee(context)`` returns an
:class:`~textdp.generation.lm.LMGuarantee` (per token, per sentence, per document, adjacency, bounds).
The maths, the derivations and the decoding are in :mod:`textdp.generation.lm`,
:mod:`textdp.generation.lm_decode` and :mod:`textdp.generation.decoding`.

>>> from textdp.mechanisms import get
>>> m = get("dp-mlm", epsilon=2.0, model="some/dir", clip=(-3.0, 3.0))
>>> m.get_params()["clip"], m.family, m.releases
((-3.0, 3.0), 'sentence', 'sentence')
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import SeedLike
from ..errors import ParameterError, ParameterTypeError
from ..mechanisms.base import ReleaseContext
from ..progress import ProgressCallback
from .decoding import ClipBounds
from .hf import LanguageModel, load_language_model
from .lm import REFERENCES, LMGuarantee, guarantee_of, rewrite_texts, units_of
from .lm_decode import resolve_prompt
from .lm_settings import MAX_NEW_TOKENS, MECHANISM_KIND, LMSettings
from .rewriter import TextRewriter

__all__ = ["DPBART", "DPMLM", "DPParaphrase", "DPPrompt", "LMRewriter", "rewrite_lm_documents"]

Units = list[str]


class LMRewriter(TextRewriter[str]):
    """Base of the four language-model rewriters (parameters: :class:`~textdp.generation.lm_settings.LMSettings`).

    ``model`` is a local Hugging Face directory of the mechanism's kind, or a GGUF file (or a folder
    holding one: :func:`~textdp.generation.hf.load_language_model`); ``clip`` the public clipping
    bounds, a :class:`~textdp.generation.decoding.ClipBounds` or ``(low, high)`` (with ``prior``: bounds
    of the difference to the public prior).
    """

    chunk_size = 64

    epsilon: float | None = None
    model: str | Path | None = None
    clip: ClipBounds | tuple[float, float] | None = None
    delta: float | None = None
    max_new_tokens: int = MAX_NEW_TOKENS
    max_tokens: int = 32
    max_input_tokens: int = 256
    copy_stopwords: bool = True
    prompt: str | None = None
    prompt_format: str = "auto"
    prior: bool = False
    public_top_k: int | None = None
    batch_size: int = 16
    batch_tokens: int = 16384
    sampler: str = "inverse-cdf"
    top_k: int | None = None
    top_p: float | None = None
    seed: SeedLike = None

    def _fit(self) -> None:
        if self.epsilon is None:
            raise ParameterError(f"{self.name} needs epsilon")
        if not isinstance(self.model, (str, Path)):
            raise ParameterTypeError(f"{self.name}: model must be a local model directory, got "
                                     f"{type(self.model).__name__}")
        if self.clip is None:
            raise ParameterError(f"{self.name} needs public clipping bounds (clip=(low, high) or a ClipBounds)")
        bounds = self.clip if isinstance(self.clip, ClipBounds) else ClipBounds(*self.clip)
        if self.name == "dp-bart" and self.delta is None:
            raise ParameterError("dp-bart needs delta (its (epsilon, delta) per sentence), e.g. delta=1e-5")
        settings = LMSettings(self.name, float(self.epsilon), bounds, delta=self.delta or 0.0,
                              max_new_tokens=self.max_new_tokens, max_tokens=self.max_tokens,
                              max_input_tokens=self.max_input_tokens, copy_stopwords=self.copy_stopwords,
                              prompt=self.prompt, prompt_format=self.prompt_format, prior=self.prior,
                              public_top_k=self.public_top_k, batch_size=self.batch_size,
                              batch_tokens=self.batch_tokens, sampler=self.sampler, top_k=self.top_k, top_p=self.top_p)
        self.model_dir_ = str(Path(self.model).resolve())
        # loads the model and checks its kind; the prompt format is made explicit (recorded)
        self.settings_ = self._resolve(load_language_model(self.model_dir_, MECHANISM_KIND[self.name]), settings)
        self.bound_ = guarantee_of(self.model_dir_, self.settings_)
        self.epsilon_ = float(self.epsilon)

    def _resolve(self, lm: LanguageModel, settings: LMSettings) -> LMSettings:
        """The settings with what depends on the (public) model made explicit; nothing by default."""
        return settings

    def guarantee(self, context: ReleaseContext | None = None) -> LMGuarantee:
        """The guarantee per unit (``context``: seeded and the empty policy)."""
        self._ensure_fitted()
        ctx = context or ReleaseContext(seeded=self.seeded_)
        return self.bound_.evolve(seeded=ctx.seeded, empty=ctx.empty)

    def units(self, text: str) -> Units:
        """The privacy units of ``text`` (:func:`~textdp.generation.lm.units_of` with the model's tokenizer)."""
        self._ensure_fitted()
        tokenizer = load_language_model(self.model_dir_, MECHANISM_KIND[self.name]).tokenizer
        return units_of(text, self.settings_, tokenizer)

    def rewrite_units(self, units: Sequence[str], rng: np.random.Generator) -> Units:
        return rewrite_texts(self.model_dir_, list(units), self.settings_, rng)

    def unit_text(self, unit: str) -> str:
        return unit

    def _diagnose(self, uid: str, prepared: Units, output: Units | None) -> dict[str, Any]:
        return {"id": uid, "units": len(prepared), "characters": sum(len(u) for u in prepared)}


class DPPrompt(LMRewriter):
    """DP-Prompt (Utpala et al. 2023): a causal LM, prompted with a public template, paraphrases each document.

    The prompt is the tokenizer's chat template around :data:`~textdp.generation.lm_settings.CHAT_PROMPT` when
    the model has one (instruct models), else the paper's template (``prompt_format``, ``prompt``: public, in
    the record). With ``prior=True`` the logits are clipped relative to the public prior (InvisibleInk:
    :func:`~textdp.generation.decoding.prior_log_weights`), optionally over the public top-k⁺ set. Each of the ``n = max_new_tokens`` tokens is an exponential-mechanism draw over the clipped
    logits (temperature ``2 Delta / epsilon``, the whole vocabulary). Guarantee: ``n epsilon`` per
    document for any two documents cut to ``max_input_tokens`` tokens (adaptive composition;
    the end token is drawn, so the length is covered). Unit: the document.
    """

    name = "dp-prompt"
    reference = REFERENCES["dp-prompt"]

    def _resolve(self, lm: LanguageModel, settings: LMSettings) -> LMSettings:
        """``prompt_format="auto"``: the chat template when the tokenizer has one; the template text made explicit."""
        return resolve_prompt(lm, settings)


class DPParaphrase(LMRewriter):
    """DP-Paraphrase (Mattern et al. 2022): a sequence-to-sequence paraphraser rewrites each sentence.

    Every generated token is an ε-DP draw over clipped logits, so a sentence costs
    ``max_new_tokens * epsilon`` for any two sentences (its length covered). A document of
    ``m`` sentences composes to ``m`` times that; ``m`` itself is not covered. Unit: the sentence.
    """

    name = "dp-paraphrase"
    reference = REFERENCES["dp-paraphrase"]


class DPMLM(LMRewriter):
    """DP-MLM (Meisenbacher et al. 2024): a masked LM replaces one token at a time.

    The input is the sentence followed by its copy with one token masked; the replacement is
    an ε-DP draw at the mask. Guarantee: ``r epsilon`` per sentence (``r`` replaced tokens,
    at most ``max_tokens``; the record states ``max_tokens * epsilon``) between sentences of the
    **same skeleton**: as many tokens and, with ``copy_stopwords``, the same stop words and
    punctuation in place, which are released as they are.
    """

    name = "dp-mlm"
    reference = REFERENCES["dp-mlm"]


class DPBART(LMRewriter):
    """DP-BART-CLV (Igamberdiev & Habernal 2023): noisy encoder output, decoded.

    The encoder output of the sentence (padded or cut to ``max_tokens``) is clipped to
    ``clip`` per coordinate and every coordinate of every token gets its own ``N(0, sigma^2)``,
    ``sigma`` from the analytic Gaussian mechanism (Balle & Wang 2018) for the L2 sensitivity
    ``(c_max - c_min) sqrt(d n)``. Guarantee: ``(epsilon, delta)``-DP per sentence for any two
    sentences; the noisy matrix is never released, only the greedily decoded tokens.
    """

    name = "dp-bart"
    reference = REFERENCES["dp-bart"]


def rewrite_lm_documents(mechanism: LMRewriter, documents: Sequence[tuple[str, str]], rng: SeedLike, *,
                         record_unit: str = "document", seeded: bool = False,
                         progress: ProgressCallback | None = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """Rewrite ``(id, text)`` documents: ``(records, private_diagnostics)`` (the one record layout).

    Records: one per document (``units`` = its sentences, ``total`` their sum), or one per
    sentence with ``record_unit="sentence"``; a document with nothing to rewrite gives an
    empty record (policy ``empty``, stated in the guarantee). The diagnostics (units and
    characters per document) describe the private input: keep them private.
    """
    diagnostics: list[Any] = []
    released = mechanism.privatize_batch([t for _, t in documents], [i for i, _ in documents], seed=rng,
                                         seeded=seeded, empty="empty", private_report=diagnostics,
                                         progress=progress) if documents else []
    if record_unit == "sentence" and mechanism.name != "dp-prompt":
        return [r.to_record() for doc in released for r in doc.sentence_records()], diagnostics
    return [doc.to_record() for doc in released], diagnostics
