"""Audit cases of the language-model rewriters, and the known-bad variants the field's code ships.

The token-level rewriters (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``) draw every token with
:func:`textdp.generation.decoding.exponential_step`; their cases audit that draw on the pair of
score vectors where the loss is largest: ``u(a) = (b, a, ..., a)`` against ``u(b) = (a, b, ..., b)``
over a toy vocabulary of ``V`` tokens (loss ``→ ε`` as ``V`` grows: decoding's docstring). The
``dp-bart`` case audits :func:`textdp.generation.lm_decode.clip_and_noise`, the clip-and-noise
step, on the farthest pair of encoder outputs (all ``c_min`` against all ``c_max``), with the
claimed (ε, δ) and events on the projection onto their difference.

Known-bad variants (registered too; ``textdp audit NAME`` must flag them, exit status 1):

``lm-unclipped``
    temperature sampling ``T = 2Δ/ε`` without clipping (DP-Prompt's released scripts): a
    logit beyond the assumed range ``Δ`` breaks the claim.
``lm-topk-clipped``
    clipping and ``T = 2Δ/ε``, but top-k kept from the private logits (DP-GTR's
    ``top_k=50``): a token outside one input's top-k has probability 0 there.
``lm-factor-one``
    ``T = Δ/ε``, the factor 2 dropped (decoding's docstring: the loss tends to ``2ε``).
``dp-bart-shared-noise``
    one noise vector added to every token row: row differences come out noise-free.
``dp-bart-range``
    clipping to ``[-0.2, 0.1]`` but σ calibrated for a range of 0.2 (the true range is 0.3).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import require
from .core import AuditCase
from .registry import register_audit_case

__all__ = ["KNOWN_BAD", "LM_DEFAULT_EPSILON", "dp_bart_case", "register_lm_cases", "token_case"]

#: Per-token ε of the default token-level audits, and ε of the DP-BART audits (δ below).
LM_DEFAULT_EPSILON = 2.0
DP_BART_DEFAULT = (2.0, 1e-3)
#: Toy vocabulary of the token-level cases, and the clipping bounds they use.
TOY_VOCAB = 200
TOY_BOUNDS = (-4.0, 4.0)
#: The known-bad variant names.
KNOWN_BAD = ("lm-unclipped", "lm-topk-clipped", "lm-factor-one", "dp-bart-shared-noise", "dp-bart-range")


def _extreme_pair(v: int, low: float, high: float, spread: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(b+s, a-s, ..., a-s)`` and ``(a-s, b+s, ..., b+s)``: the worst pair (``s``: beyond the bounds)."""
    a = np.full(v, low - spread)
    a[0] = high + spread
    b = np.full(v, high + spread)
    b[0] = low - spread
    return a, b


def token_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
               variant: str = "correct", vocab: int = TOY_VOCAB) -> AuditCase:
    """One token-level step on the worst pair; ``variant`` selects a known-bad law (module docstring).

    ``delta`` is ignored (pure ε-DP). Outputs are token ids (discrete events).
    """
    torch = require("torch", "generation")
    from ..generation.decoding import ClipBounds, clipped_log_weights, sample_log_weights

    eps = LM_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    bounds = ClipBounds(*TOY_BOUNDS)
    spread = 6.0 if variant == "lm-unclipped" else 0.0
    score_a, score_b = _extreme_pair(vocab, bounds.low, bounds.high, spread)

    def law(scores: np.ndarray) -> Callable[[int, np.random.Generator], np.ndarray]:
        s = torch.from_numpy(scores)[None, :]
        if variant == "lm-unclipped":  # softmax(s / T) with T = 2Δ/ε, nothing clipped
            lw = s.double() * (eps / (2.0 * bounds.width))
        elif variant == "lm-factor-one":  # T = Δ/ε: the clipped law at 2ε
            lw = clipped_log_weights(s, epsilon=2.0 * eps, bounds=bounds)
        else:
            lw = clipped_log_weights(s, epsilon=eps, bounds=bounds)
        if variant == "lm-topk-clipped":  # top-k of the private logits (k = V/4), next to clipping
            kept = torch.zeros_like(lw, dtype=torch.bool)
            kept[0, torch.topk(s, vocab // 4, dim=1).indices[0]] = True
            lw = torch.where(kept, lw, torch.full((), -math.inf, dtype=torch.float64))

        def draw(n: int, rng: np.random.Generator) -> np.ndarray:
            return np.asarray(sample_log_weights(lw.expand(n, -1), rng).numpy())

        return draw

    draw_a, draw_b = law(score_a), law(score_b)

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return draw_a(n, rng) if which == "a" else draw_b(n, rng)

    return AuditCase(mechanism=name, pair=f"one token, clipped scores (b, a, ..., a) vs (a, b, ..., b) over {vocab} "
                     f"tokens, [a, b] = [{bounds.low:g}, {bounds.high:g}]", input_a="a", input_b="b", sample=sample,
                     claimed_epsilon=eps, claimed_delta=0.0, events="discrete", chunk=50_000)


def dp_bart_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                 variant: str = "correct", tokens: int = 2, dim: int = 2) -> AuditCase:
    """DP-BART's clip-and-noise on ``tokens × dim`` toy encoder outputs, all ``c_min`` vs all ``c_max``."""
    require("torch", "generation")
    from ..generation.decoding import ClipBounds
    from ..generation.lm import LMSettings, dp_bart_sigma
    from ..generation.lm_decode import clip_and_noise

    eps = DP_BART_DEFAULT[0] if epsilon is None else float(epsilon)
    dlt = DP_BART_DEFAULT[1] if delta is None else float(delta)
    bounds = ClipBounds(-0.2, 0.1)
    settings = LMSettings("dp-bart", eps, bounds, delta=dlt, max_tokens=tokens)
    if variant == "dp-bart-range":  # the copied re-implementation: calibrated for a range of 0.2
        settings = LMSettings("dp-bart", eps, ClipBounds(-0.1, 0.1), delta=dlt, max_tokens=tokens)
    _, sigma = dp_bart_sigma(settings, dim)
    h_a = np.full((tokens, dim), bounds.low)
    h_b = np.full((tokens, dim), bounds.high)
    if variant == "dp-bart-shared-noise":  # the rows differ from each other in b only
        h_a = np.full((tokens, dim), bounds.low)
        h_b = h_a.copy()
        h_b[0] = bounds.high

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        row = np.asarray(which, dtype=np.float64).reshape(tokens, dim)
        h = np.ascontiguousarray(np.broadcast_to(row, (n, tokens, dim)))
        if variant == "dp-bart-shared-noise":  # one noise row, the same for every token
            noisy = np.clip(h, bounds.low, bounds.high) + sigma * rng.standard_normal((n, 1, dim))
            return np.asarray(noisy).reshape(n, -1)
        return np.asarray(clip_and_noise(h, bounds, sigma, rng).numpy()).reshape(n, -1)

    statistic = None
    if variant == "dp-bart-shared-noise":
        def statistic(x: np.ndarray) -> np.ndarray:  # row 0 minus row 1: exactly 0 from a
            r = x.reshape(len(x), tokens, dim)
            return np.asarray((r[:, 0] - r[:, 1]).sum(1))
    return AuditCase(mechanism=name, pair=f"clipped encoder outputs of {tokens} tokens x {dim} coordinates, "
                     f"[{bounds.low:g}, {bounds.high:g}]", input_a=h_a.ravel(), input_b=h_b.ravel(), sample=sample,
                     claimed_epsilon=eps, claimed_delta=dlt, events="histogram", statistic=statistic,
                     chunk=100_000)


def register_lm_cases() -> None:
    """Register the four rewriters' cases and the known-bad variants (idempotent)."""
    tok = "needs [generation]"
    for name, paper in (("dp-prompt", "DP-Prompt"), ("dp-paraphrase", "DP-Paraphrase"), ("dp-mlm", "DP-MLM")):
        register_audit_case(name, lambda epsilon=None, delta=None, name=name: token_case(name, epsilon, delta),
                            description=f"{paper}: one clipped exponential-mechanism token on the worst pair of "
                                        f"logit vectors (claim epsilon per token; default {LM_DEFAULT_EPSILON:g}; "
                                        f"{tok})", replace=True)
    register_audit_case("dp-bart", lambda epsilon=None, delta=None: dp_bart_case("dp-bart", epsilon, delta),
                        description="DP-BART: clipped encoder output + Gaussian noise per coordinate and token "
                                    f"(claim (epsilon, delta); default {DP_BART_DEFAULT}; {tok})", replace=True)
    bad = {
        "lm-unclipped": "temperature 2*Delta/epsilon with no clipping (DP-Prompt's scripts)",
        "lm-topk-clipped": "top-k from the private logits next to clipping (DP-GTR)",
        "lm-factor-one": "temperature Delta/epsilon: the factor 2 dropped",
        "dp-bart-shared-noise": "DP-BART with one noise vector shared by all tokens",
        "dp-bart-range": "DP-BART clipped to [-0.2, 0.1] but calibrated for a range of 0.2",
    }
    for name, text in bad.items():
        build = dp_bart_case if name.startswith("dp-bart") else token_case
        factory = functools.partial(build, name, variant=name)
        register_audit_case(name, factory, description=f"KNOWN-BAD variant, must be flagged: {text}", replace=True)
