"""The LM audits' public settings: each rewriter's spec and the law-changing options, with their checks.

Each rewriter's audit (:data:`LM_RELEASE_DEFAULTS`, an :class:`LMAuditSpec`) fixes its paper, model kind, law,
candidate texts, ε, clipping and default samples; :data:`LM_LAW_OPTIONS` are the options ``textdp audit NAME
--param KEY=VALUE`` takes, :data:`LM_VARIANT_CASES` the non-default laws ``--all`` audits, and
:func:`law_options` checks given options and turns them into the audited mechanism's parameters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ParameterError
from .claims import as_int

#: The value of a mechanism option the audit sets (a prompt, a format, a count, a flag, or none).
OptionValue = str | int | bool | None

__all__ = [
    "COPY_TEXTS",
    "LAWS",
    "LAW_OPTION_NAMES",
    "LM_LAW_OPTIONS",
    "LM_RELEASE_DEFAULTS",
    "LM_VARIANT_CASES",
    "MAX_AUDITED_NEW_TOKENS",
    "MAX_TOKENS",
    "PROMPT",
    "SPECIALS",
    "SPREAD_TEXTS",
    "WORDS",
    "LMAuditSpec",
    "LawOptions",
    "OptionValue",
    "law_options",
    "parse_clip",
    "parse_flag",
]


#: Public words of the tiny models' tokenizer (written here; no corpus text).
WORDS = ("the", "a", "cat", "dog", "bird", "sat", "ran", "slept", "on", "in", "mat", "park", "tree", "today",
         "document", "paraphrase", ".", ",", ":")
#: Special tokens of the tiny tokenizer (excluded from every output but the end token ``</s>``).
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>")
#: dp-prompt's public template in the audit (plain format: no chat template on the tiny model).
PROMPT = "document : {document} paraphrase :"
#: How a rewriter's released tokens are drawn: ``steps`` (up to ``max_new_tokens`` adaptive draws, the end
#: token among the candidates), ``positions`` (one independent draw per token of the sentence, DP-MLM) or
#: ``gaussian`` (noisy encoder output, greedy decoding: DP-BART).
LAWS = ("steps", "positions", "gaussian")


@dataclass(frozen=True)
class LMAuditSpec:
    """The public settings of one rewriter's audit (frozen).

    Attributes
    ----------
    paper : str
        The paper's short name.
    kind : str
        The model kind (``causal``, ``seq2seq``, ``masked``).
    law : str
        One of :data:`LAWS`.
    texts : tuple of str
        Candidate texts of the neighbouring pair (one unit each: a one-sentence document for dp-prompt, a
        sentence otherwise; every two are neighbours; for ``positions`` of the same length). With a table
        (``steps``, ``positions``) the pair whose reference laws differ most (symmetrised Kullback-Leibler
        divergence, from the public model alone) is taken; with ``gaussian`` the first two.
    epsilon, delta : float
        Per-token ε (``gaussian``: the sentence's (ε, δ)).
    clip : tuple of float
        The public clipping bounds (logits; ``gaussian``: encoder outputs).
    max_new_tokens : int
        Generated tokens (``steps``, ``gaussian``).
    samples : int
        Default samples per input.
    params : tuple of (str, object)
        The mechanism's own parameters beside epsilon, model, clip and max_tokens.
    """

    paper: str
    kind: str
    law: str
    texts: tuple[str, ...]
    epsilon: float
    delta: float
    clip: tuple[float, float]
    max_new_tokens: int
    samples: int
    params: tuple[tuple[str, OptionValue], ...] = ()

    def __post_init__(self) -> None:
        if self.law not in LAWS:
            raise ParameterError(f"an LM audit's law must be one of {LAWS}, got {self.law!r}")


_SENTENCES = ("the cat sat", "a dog ran", "the bird slept on the mat", "today , a tree")
#: The four rewriters' audits.
LM_RELEASE_DEFAULTS = {
    "dp-prompt": LMAuditSpec("DP-Prompt", "causal", "steps", _SENTENCES, 2.0, 0.0, (-1.0, 1.0), 2, 10_000,
                             (("prompt", PROMPT), ("prompt_format", "plain"), ("max_input_tokens", 8),
                              ("max_new_tokens", 2), ("batch_tokens", 1 << 24),
                              # the drawn tokens as released (no stop string, repetition rule or post-processing)
                              ("stop", None), ("repeat_ngram", None), ("tidy", False))),
    "dp-paraphrase": LMAuditSpec("DP-Paraphrase", "seq2seq", "steps", _SENTENCES, 2.0, 0.0, (-1.0, 1.0), 2, 10_000,
                                 (("max_new_tokens", 2),)),
    "dp-mlm": LMAuditSpec("DP-MLM", "masked", "positions", ("cat sat", "dog ran", "bird slept", "tree today",
                                                            "mat park"), 2.0, 0.0, (-1.0, 1.0), 0, 10_000,
                          (("copy_stopwords", False),)),
    "dp-bart": LMAuditSpec("DP-BART", "seq2seq", "gaussian", ("the cat sat", "a dog ran"),
                           2.0, 1e-3, (-1.0, 1.0), 2, 10_000, (("max_new_tokens", 2),)),
}
#: The options of a rewriter that change its released law and that ``textdp audit NAME --param KEY=VALUE`` takes.
LM_LAW_OPTIONS: dict[str, tuple[str, ...]] = {"dp-prompt": ("prior", "public_top_k", "clip", "sampler",
                                                            "max_new_tokens", "stop", "repeat_ngram", "tidy"),
                                              "dp-paraphrase": ("clip", "sampler", "max_new_tokens"),
                                              "dp-mlm": ("clip", "sampler", "copy_stopwords"),
                                              "dp-bart": ("clip", "max_new_tokens")}
#: The non-default laws ``textdp audit --all`` audits: ``{case: (rewriter, ((option, value), ...))}``.
LM_VARIANT_CASES: dict[str, tuple[str, tuple[tuple[str, OptionValue], ...]]] = {
    "dp-prompt-prior": ("dp-prompt", (("prior", True),)),
    "dp-prompt-public-top-k": ("dp-prompt", (("prior", True), ("public_top_k", 5))),
    "dp-prompt-3-tokens": ("dp-prompt", (("max_new_tokens", 3),)),
    "dp-paraphrase-1-token": ("dp-paraphrase", (("max_new_tokens", 1),)),
    "dp-mlm-copy-stopwords": ("dp-mlm", (("copy_stopwords", True),)),
    "dp-bart-3-tokens": ("dp-bart", (("max_new_tokens", 3),)),
    "dp-prompt-stopping": ("dp-prompt", (("max_new_tokens", 3), ("stop", "."), ("repeat_ngram", 1), ("tidy", True))),
}
#: The most generated tokens the audit takes (``--param max_new_tokens``): its reference law lists every sequence
#: of up to ``n`` public words (``19^n``; 7,240 sequences at 3).
MAX_AUDITED_NEW_TOKENS = 3
#: dp-mlm's pair with ``copy_stopwords``: the same skeleton (``the`` copied in place), two tokens replaced.
COPY_TEXTS = ("the cat sat", "the dog ran", "the bird slept", "the tree today", "the mat park")
#: The pair of dp-bart's ``spread`` probe: the second sentence's first row differs, every other row (and the
#: padding) is the same.
SPREAD_TEXTS = ("cat sat", "dog sat")
#: The encoder / sentence shape of every case (``max_tokens``; dp-bart's public padded length).
MAX_TOKENS = 8


#: Every law-changing option :func:`law_options` reads (each rewriter takes those of :data:`LM_LAW_OPTIONS`).
LAW_OPTION_NAMES = ("clip", "prior", "public_top_k", "sampler", "max_new_tokens", "copy_stopwords", "stop",
                    "repeat_ngram", "tidy")


@dataclass(frozen=True)
class LawOptions:
    """The checked law-changing options of one LM audit (:func:`law_options`; frozen).

    Attributes
    ----------
    prior : bool
        dp-prompt's public-prior path.
    public_top_k : int or None
        Its public top-k+ candidate set.
    clip : tuple of float or None
        Clipping bounds (``None``: the spec's).
    steps : int
        Generated tokens (the spec's ``max_new_tokens`` unless given).
    copy : bool
        dp-mlm's ``copy_stopwords``.
    texts : tuple of str
        The candidate texts of the pair (:data:`COPY_TEXTS` with ``copy``).
    stopping : mapping
        dp-prompt's stopping rules as given (``stop``, ``repeat_ngram``, ``tidy``).
    mechanism : mapping
        The audited mechanism's options beyond the spec's (only those the caller set).
    """

    prior: bool
    public_top_k: int | None
    clip: tuple[float, float] | None
    steps: int
    copy: bool
    texts: tuple[str, ...]
    stopping: Mapping[str, object]
    mechanism: Mapping[str, object]


def law_options(name: str, spec: LMAuditSpec, options: Mapping[str, object]) -> LawOptions:
    """:func:`~textdp.audit.lm_release.lm_release_case`'s options (Python values or ``--param`` text), checked.

    In order: unknown names, prior, clip, public_top_k, steps, copy, the texts, the stopping rules; each a one-line
    :class:`~textdp.errors.ParameterError` naming what the case takes.
    """
    unknown = sorted(set(options) - set(LAW_OPTION_NAMES))
    if unknown:
        raise ParameterError(f"the audit case {name!r} takes {', '.join(LAW_OPTION_NAMES)} as options, not "
                             f"{', '.join(unknown)}")
    prior = parse_flag(options.get("prior", False), "prior")
    clip = parse_clip(options.get("clip"))
    public_top_k = _top_k(name, options.get("public_top_k"), prior)
    if prior and spec.kind != "causal":
        raise ParameterError(f"{name} has no public-prior path: prior and public_top_k are dp-prompt's options")
    max_new_tokens = options.get("max_new_tokens")
    steps = spec.max_new_tokens
    if max_new_tokens is not None:
        if spec.law == "positions":
            raise ParameterError(f"the audit case {name!r} does not take max_new_tokens (dp-prompt, dp-paraphrase "
                                 "and dp-bart do)")
        steps = _whole(max_new_tokens, "max_new_tokens")
        if not 1 <= steps <= MAX_AUDITED_NEW_TOKENS:
            raise ParameterError(f"{name}: the audit takes max_new_tokens from 1 to {MAX_AUDITED_NEW_TOKENS} (its "
                                 f"reference law lists {len(WORDS)}^n sequences), got {max_new_tokens}")
    copy_stopwords = options.get("copy_stopwords")
    copy = parse_flag(copy_stopwords, "copy_stopwords") if copy_stopwords is not None else False
    if copy and spec.law != "positions":
        raise ParameterError(f"the audit case {name!r} does not take copy_stopwords (dp-mlm does)")
    stopping = _stopping(name, spec, options)
    extra: dict[str, object] = {"prior": True, "public_top_k": public_top_k} if prior else {}
    if options.get("sampler") is not None:  # how each draw is made (inverse CDF or Gumbel): the same law
        extra["sampler"] = options["sampler"]
    if max_new_tokens is not None:
        extra["max_new_tokens"] = steps
    if copy_stopwords is not None:
        extra["copy_stopwords"] = copy
    extra.update(stopping)
    return LawOptions(prior=prior, public_top_k=public_top_k, clip=clip, steps=steps, copy=copy,
                      texts=COPY_TEXTS if copy else spec.texts, stopping=stopping, mechanism=extra)


def _top_k(name: str, value: object, prior: bool) -> int | None:
    """dp-prompt's ``public_top_k``: a positive whole number, given with ``prior`` only."""
    if value is None:
        return None
    public_top_k = as_int(value, "public_top_k")
    if public_top_k < 1:
        raise ParameterError(f"{name}: public_top_k must be a positive whole number, got {public_top_k}")
    if not prior:
        raise ParameterError(f"{name}: public_top_k needs prior=true (the candidate set comes from the public "
                             "prior); pass --param prior=true")
    return public_top_k


def _stopping(name: str, spec: LMAuditSpec, options: Mapping[str, object]) -> dict[str, object]:
    """dp-prompt's stopping rules as given (``stop``, ``repeat_ngram``, ``tidy``; ``none`` turns one off)."""
    stop, repeat_ngram, tidy = options.get("stop"), options.get("repeat_ngram"), options.get("tidy")
    stopping: dict[str, object] = {}
    if stop is not None or repeat_ngram is not None or tidy is not None:
        if spec.kind != "causal":
            raise ParameterError(f"the audit case {name!r} does not take stop, repeat_ngram or tidy (dp-prompt does)")
        if stop is not None:
            stopping["stop"] = None if str(stop).strip().lower() == "none" else str(stop)
        if repeat_ngram is not None:
            none = str(repeat_ngram).strip().lower() == "none"
            stopping["repeat_ngram"] = None if none else _whole(repeat_ngram, "repeat_ngram")
        if tidy is not None:
            stopping["tidy"] = parse_flag(tidy, "tidy")
    return stopping


def parse_clip(value: object) -> tuple[float, float] | None:
    """Clipping bounds given in Python or as ``--param clip=LOW,HIGH`` (a string)."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        low, high = (float(x) for x in parts)
    except (TypeError, ValueError):
        raise ParameterError(f"clip must be two numbers LOW,HIGH (e.g. -1,1), got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"clip must be two finite numbers LOW < HIGH, got {value!r}")
    return (low, high)


def _whole(value: object, key: str) -> int:
    """A whole number given in Python or as ``--param KEY=N`` (a string)."""
    try:
        out = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ParameterError(f"{key} must be a whole number, got {value!r}") from None
    return out


def parse_flag(value: object, key: str) -> bool:
    """A boolean option given in Python or as ``--param KEY=true|false`` (a string)."""
    if isinstance(value, str):
        low = value.strip().lower()
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise ParameterError(f"{key} must be true or false, got {value!r}")
        return low in ("true", "1", "yes")
    return bool(value)
