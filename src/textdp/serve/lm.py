"""The language-model rewriters on the page: which ones a model folder runs, and the public settings each starts from.

``textdp serve --model DIR`` with a language model (Hugging Face safetensors, or a GGUF file) offers the rewriters
of the sentence family that take public clipping bounds: ``dp-prompt`` on a causal model, ``dp-paraphrase`` and
``dp-bart`` on a sequence-to-sequence one, ``dp-mlm`` on a masked one. Each is fitted here as a caller would
(``get(name, model=..., clip=...).fit()``); one whose model kind the folder does not hold refuses in ``fit`` and is
not offered. The settings are public parameters, chosen without the private text and stated in every release.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError, TextDPError
from ..mechanisms import get, mechanism_class, names

__all__ = ["LM_DEFAULT_CLIP", "LM_DEFAULT_CLIP_GAUSSIAN", "LM_DEFAULT_DELTA", "LM_PRIOR_CLIP", "LM_PRIOR_DEFAULTS",
           "LMSettings", "lm_extra", "probe_lm"]

#: Public clipping bounds the page starts from for a language-model rewriter (``textdp serve --clip`` replaces them;
#: each release may set its own): the logits clipped to [-2, 2] (docs/lm-rewriting.md's dp-mlm example).
LM_DEFAULT_CLIP = (-2.0, 2.0)
#: What the page starts from for a rewriter with a public prior (dp-prompt): the prior and its public top-k+ set, the
#: difference to the prior clipped to [-8, 8], ε 64 per token and 48 new tokens (docs/lm-rewriting.md's route on
#: SmolLM2: paraphrases, where [-2, 2] on the raw logits ties every plausible token and releases random tokens)
LM_PRIOR_CLIP: tuple[float, float] = (-8.0, 8.0)
_PRIOR_TOP_K = 20
_PRIOR_EPSILON = 64.0
_PRIOR_NEW_TOKENS = 48
LM_PRIOR_DEFAULTS: dict[str, object] = {"prior": True, "public_top_k": _PRIOR_TOP_K, "clip": LM_PRIOR_CLIP,
                                        "epsilon": _PRIOR_EPSILON, "max_new_tokens": _PRIOR_NEW_TOKENS}
#: ... and for a rewriter with δ (Gaussian noise on the clipped encoder output, DP-BART): [-0.2, 0.1] per coordinate
#: (docs/lm-rewriting.md's dp-bart example).
LM_DEFAULT_CLIP_GAUSSIAN = (-0.2, 0.1)
#: δ per sentence the page starts from for a rewriter with δ.
LM_DEFAULT_DELTA = 1e-5


@dataclass(frozen=True)
class LMSettings:
    """The public settings the page starts from for one language-model rewriter (each request may change them).

    Attributes
    ----------
    clip : (float, float)
        The clipping bounds (for dp-prompt with its prior: of the difference to the prior).
    delta : float or None
        δ per sentence for a rewriter with Gaussian noise (DP-BART); None when it is pure ε-DP.
    prior : bool
        Whether the rewriter has a public prior (dp-prompt), on by default.
    public_top_k : int or None
        The prior's top-k+ set the page starts from (None: no prior).
    epsilon : float or None
        The ε the page starts from when it is not the page's common default (None).
    """

    clip: tuple[float, float]
    delta: float | None
    prior: bool = False
    public_top_k: int | None = None
    epsilon: float | None = None

    def to_json(self) -> dict[str, object]:
        """What ``/api/mechanisms`` lists for the rewriter (the prior's fields only for one that has it).

        >>> LMSettings(clip=(-2.0, 2.0), delta=None).to_json()
        {'clip': [-2.0, 2.0], 'delta': None}
        """
        out: dict[str, object] = {"clip": list(self.clip), "delta": self.delta}
        if self.prior:
            out.update(prior=True, public_top_k=self.public_top_k)
        if self.epsilon is not None:
            out["epsilon"] = self.epsilon
        return out


def lm_extra(name: str, public_top_k: int | bool | None) -> dict[str, object]:
    """The public prior's parameters of ``name`` (none for a rewriter without a prior): the prior on with
    ``public_top_k`` (None: over the whole vocabulary; False: the prior off), and the page's token cap.

    >>> lm_extra("dp-prompt", 20)
    {'prior': True, 'public_top_k': 20, 'max_new_tokens': 48}
    >>> lm_extra("dp-prompt", False), lm_extra("dp-mlm", 20)
    ({'prior': False, 'max_new_tokens': 48}, {})
    """
    if "prior" not in mechanism_class(name).param_names():
        return {}
    if public_top_k is False:
        return {"prior": False, "max_new_tokens": _PRIOR_NEW_TOKENS}
    return {"prior": True, "public_top_k": public_top_k, "max_new_tokens": _PRIOR_NEW_TOKENS}


def _settings(name: str, clip: tuple[float, float] | None) -> LMSettings:
    """The settings ``name`` starts from: ``clip`` (``textdp serve --clip``) or its kind's default bounds."""
    params = mechanism_class(name).param_names()
    if "prior" in params:
        return LMSettings(clip=clip or LM_PRIOR_CLIP, delta=None, prior=True, public_top_k=_PRIOR_TOP_K,
                          epsilon=_PRIOR_EPSILON)
    if "delta" in params:
        return LMSettings(clip=clip or LM_DEFAULT_CLIP_GAUSSIAN, delta=LM_DEFAULT_DELTA)
    return LMSettings(clip=clip or LM_DEFAULT_CLIP, delta=None)


def probe_lm(model: str, clip: tuple[float, float] | None = None) -> dict[str, LMSettings]:
    """The language-model rewriters that fit on ``model``, with the public settings the page starts from.

    The language-model rewriters (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``, ``dp-bart``) are the sentence
    mechanisms that take public clipping bounds (a ``clip`` parameter); one with a ``delta`` parameter adds
    Gaussian noise to the clipped encoder output (DP-BART) and starts from :data:`LM_DEFAULT_CLIP_GAUSSIAN`; one
    with a public prior (dp-prompt) from :data:`LM_PRIOR_DEFAULTS`. ``clip`` (``textdp serve --clip``) replaces
    every default bound. Raises :class:`ParameterError` when none fits.
    """
    offered: dict[str, LMSettings] = {}
    why: list[str] = []
    for name in names("sentence"):
        if "clip" not in mechanism_class(name).param_names():
            continue
        settings = _settings(name, clip)
        delta = {} if settings.delta is None else {"delta": settings.delta}
        try:
            get(name, epsilon=1.0, model=model, clip=settings.clip, **delta,
                **lm_extra(name, settings.public_top_k)).fit()
        except TextDPError as exc:
            why.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        offered[name] = settings
    if not offered:
        raise ParameterError(f"no language-model rewriter runs on {model}: {why[0] if why else ''}; give a model "
                             "folder from textdp train-rewriter, or a causal, sequence-to-sequence or masked language "
                             "model (safetensors or GGUF)")
    return offered
