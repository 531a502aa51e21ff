"""Public parameters of the language-model rewriters (:mod:`textdp.generation.lm`), and DP-BART's σ."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .._validation import check_choice, check_epsilon, check_positive_int, check_probability
from ..accounting.gaussian import analytic_gaussian_sigma
from ..errors import ParameterError
from .decoding import SAMPLERS, ClipBounds, refuse_truncation

__all__ = ["DP_PROMPT_TEMPLATE", "LM_MECHANISMS", "MECHANISM_KIND", "LMSettings", "dp_bart_sigma"]

#: The language-model rewriters and the model kind each needs.
MECHANISM_KIND = {"dp-prompt": "causal", "dp-paraphrase": "seq2seq", "dp-mlm": "masked", "dp-bart": "seq2seq"}
LM_MECHANISMS = tuple(MECHANISM_KIND)
#: DP-Prompt's prompt (Utpala et al. 2023, §3); ``{document}`` is replaced by the private text.
DP_PROMPT_TEMPLATE = "Document : {document}\nParaphrase of the document :"

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
    prompt : str
        dp-prompt's template (with ``{document}``); public.
    batch_size : int
        Rows per forward pass.
    sampler : str
        ``inverse-cdf`` or ``gumbel`` (:func:`~textdp.generation.decoding.sample_log_weights`).
    top_k, top_p : optional
        Refused when set (:func:`~textdp.generation.decoding.refuse_truncation`).
    """

    mechanism: str
    epsilon: float
    bounds: ClipBounds
    delta: float = 0.0
    max_new_tokens: int = 32
    max_tokens: int = 32
    max_input_tokens: int = 256
    copy_stopwords: bool = True
    prompt: str = DP_PROMPT_TEMPLATE
    batch_size: int = 16
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
        for name in ("max_new_tokens", "max_tokens", "max_input_tokens", "batch_size"):
            check_positive_int(getattr(self, name), name.replace("_", "-"))
        check_choice(self.sampler, "sampler", SAMPLERS)
        if self.mechanism == "dp-prompt" and "{document}" not in self.prompt:
            raise ParameterError("the dp-prompt template must contain {document}")

    @property
    def unit(self) -> str:
        """``document`` for dp-prompt, ``sentence`` for the others."""
        return "document" if self.mechanism == "dp-prompt" else "sentence"

    def to_dict(self) -> dict[str, Any]:
        """Public JSON form (the bounds as a dict)."""
        out = asdict(self)
        out["bounds"] = self.bounds.to_dict()
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
