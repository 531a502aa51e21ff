"""Public parameters of the language-model rewriters (:mod:`textdp.generation.lm`), and DP-BART's σ."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..accounting.gaussian import analytic_gaussian_sigma
from ..errors import ParameterError
from .decoding import SAMPLERS, ClipBounds, refuse_truncation

__all__ = ["CHAT_PROMPT", "DP_PROMPT_TEMPLATE", "LM_MECHANISMS", "MECHANISM_KIND", "PROMPT_FORMATS", "LMSettings",
           "dp_bart_sigma"]

#: The language-model rewriters and the model kind each needs.
MECHANISM_KIND = {"dp-prompt": "causal", "dp-paraphrase": "seq2seq", "dp-mlm": "masked", "dp-bart": "seq2seq"}
LM_MECHANISMS = tuple(MECHANISM_KIND)
#: DP-Prompt's prompt (Utpala et al. 2023, §3); ``{document}`` is replaced by the private text.
DP_PROMPT_TEMPLATE = "Document : {document}\nParaphrase of the document :"
#: dp-prompt's user message when the model's chat template is used (public; ``{document}`` is the private text).
CHAT_PROMPT = "Paraphrase the following text. Reply with the paraphrase only.\n\n{document}"
#: How dp-prompt's prompt is built: ``chat`` (the tokenizer's chat template around :data:`CHAT_PROMPT`), ``plain``
#: (the template text as it is, with the model's BOS token), ``auto`` (``chat`` when the tokenizer has a template).
PROMPT_FORMATS = ("auto", "chat", "plain")
#: Default cap on generated tokens: covers ordinary sentences and short paragraphs (90th percentile of a
#: public corpus' sentences: 47 tokens); each step costs epsilon, so the unit costs max_new_tokens * epsilon.
MAX_NEW_TOKENS = 64

@dataclass(frozen=True)
class LMSettings:
    """Public parameters of a language-model rewrite.

    Attributes
    ----------
    mechanism : str
        One of :data:`LM_MECHANISMS`.
    epsilon : float
        ε per token (dp-prompt, dp-paraphrase, dp-mlm); ε per sentence (dp-bart).
    bounds : ClipBounds
        Public clipping bounds: of the logits, or for dp-bart of the encoder output
        (``[c_min, c_max]``).
    delta : float
        dp-bart's δ per sentence (0 for the others).
    max_new_tokens : int
        Generation steps per unit (dp-prompt, dp-paraphrase).
    max_tokens : int
        Input tokens per sentence (dp-paraphrase, dp-mlm, dp-bart; longer ones are cut).
    max_input_tokens : int
        dp-prompt: document tokens in the prompt (longer documents are cut).
    copy_stopwords : bool
        dp-mlm: copy stop words and punctuation (the paper's default).
    prompt : str or None
        dp-prompt's template (with ``{document}``); public. None: :data:`CHAT_PROMPT` with the chat
        format, :data:`DP_PROMPT_TEMPLATE` (the paper's) with the plain one.
    prompt_format : str
        dp-prompt: one of :data:`PROMPT_FORMATS`; the mechanism resolves ``auto`` when it loads the
        model, so a record states ``chat`` or ``plain``.
    prior : bool
        dp-prompt: clip relative to the public prior (the logits without the document;
        :func:`~textdp.generation.decoding.prior_log_weights`), ``bounds`` then bound the difference.
    public_top_k : int or None
        dp-prompt with ``prior``: draw from the public top-k⁺ set of the prior
        (:func:`~textdp.generation.decoding.public_top_k_plus`); None: the whole vocabulary.
    batch_size : int
        Most rows per forward pass.
    batch_tokens : int
        dp-prompt: most ``rows × (prompt + max_new_tokens)`` tokens per batch (bounds the KV cache and
        the memory of a batch; rows are sorted by length so that batches are dense).
    sampler : str
        ``inverse-cdf`` or ``gumbel`` (:func:`~textdp.generation.decoding.sample_log_weights`).
    top_k, top_p : optional
        Refused when set (:func:`~textdp.generation.decoding.refuse_truncation`).
    """

    mechanism: str
    epsilon: float
    bounds: ClipBounds
    delta: float = 0.0
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

    def __post_init__(self) -> None:
        check_choice(self.mechanism, "mechanism", LM_MECHANISMS)
        refuse_truncation(self.top_k, self.top_p)
        check_epsilon(self.epsilon)
        if not isinstance(self.bounds, ClipBounds):
            raise ParameterError("bounds must be a ClipBounds (public clipping bounds)")
        if self.mechanism == "dp-bart":
            check_probability(self.delta, "delta")
        elif self.delta != 0:
            raise ParameterError(f"{self.mechanism} is pure epsilon-DP: delta must be 0")
        for name in ("max_new_tokens", "max_tokens", "max_input_tokens", "batch_size", "batch_tokens"):
            check_positive_int(getattr(self, name), name.replace("_", "-"))
        check_choice(self.sampler, "sampler", SAMPLERS)
        check_choice(self.prompt_format, "prompt format", PROMPT_FORMATS)
        if self.prompt is not None and "{document}" not in self.prompt:
            raise ParameterError("the dp-prompt template must contain {document} (where the private text goes)")
        if self.mechanism != "dp-prompt" and (self.prompt is not None or self.prior or self.public_top_k is not None):
            raise ParameterError(f"prompt, prior and public_top_k apply to dp-prompt, not to {self.mechanism}")
        if self.public_top_k is not None:
            check_positive_int(self.public_top_k, "public-top-k")
            if not self.prior:
                raise ParameterError("public_top_k needs prior=True (the candidate set is chosen from the public "
                                     "prior's logits)")

    @property
    def template(self) -> str:
        """The prompt text actually used: ``prompt``, or the default of the format."""
        if self.prompt is not None:
            return self.prompt
        return CHAT_PROMPT if self.prompt_format == "chat" else DP_PROMPT_TEMPLATE

    @property
    def unit(self) -> str:
        """``document`` for dp-prompt, ``sentence`` for the others."""
        return "document" if self.mechanism == "dp-prompt" else "sentence"

    def to_dict(self) -> dict[str, Any]:
        """Public JSON form (the bounds as a dict)."""
        out = asdict(self)
        out["bounds"] = self.bounds.to_dict()
        if self.mechanism != "dp-prompt":
            for key in ("prompt", "prompt_format", "prior", "public_top_k", "batch_tokens"):
                del out[key]
        return out


def dp_bart_sigma(s: LMSettings, hidden_size: int | None) -> tuple[float, float]:
    """``(L2 sensitivity, σ)`` of DP-BART: ``(c_max − c_min) √(d n)`` and the analytic Gaussian σ.

    >>> s = LMSettings("dp-bart", 1.0, ClipBounds(-0.2, 0.1), delta=1e-5, max_tokens=4)
    >>> sens, sigma = dp_bart_sigma(s, 16)
    >>> round(sens, 6), sigma > sens
    (2.4, True)
    """
    if hidden_size is None:
        raise ParameterError("dp-bart needs the model's hidden size to calibrate sigma")
    d = check_positive_int(hidden_size, "hidden size")
    sens = s.bounds.width * math.sqrt(d * s.max_tokens)
    return sens, analytic_gaussian_sigma(s.epsilon, s.delta, sens)
