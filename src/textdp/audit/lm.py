"""The known-bad variants of the language-model rewriters' laws, and the registration of the LM cases.

The four rewriters themselves (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``, ``dp-bart``) are audited on
their own release path: :mod:`textdp.audit.lm_release` (``privatize_batch`` on a tiny model, the
reference law recomputed from the model). This module keeps :func:`token_case`, the toy step that shows
what the token-level variants get wrong: one clipped exponential-mechanism step on the pair of score
vectors where the loss is largest, ``u(a) = (b, a, ..., a)`` against ``u(b) = (a, b, ..., b)`` over a toy
vocabulary of ``V`` tokens (loss ``→ ε`` as ``V`` grows: decoding's docstring).

Known-bad variants (registered too; ``textdp audit NAME`` must flag them, exit status 1), each planted in a
rewriter's **real release loop**: ``privatize_batch`` on the audit's own model, a function of the loop (or
DP-BART's σ calibration) replaced while the audit draws and put back after, the claim and reference law of
the correct loop kept. The three token-level ones (:data:`RELEASE_LOOP_BAD`) in DP-Prompt's loop
(:func:`planted_release_case`: ``clipped_log_weights`` or ``exponential_step``), the two DP-BART ones
(:data:`BART_LOOP_BAD`) in DP-BART's loop on its probe model (:func:`planted_bart_case`;
:class:`~textdp.audit.lm_models.GaussianProbe`):

``lm-unclipped``
    temperature sampling ``T = 2Δ/ε`` without clipping (DP-Prompt's released scripts): a
    logit beyond the assumed range ``Δ`` breaks the claim.
``lm-topk-clipped``
    clipping and ``T = 2Δ/ε``, but top-k kept from the private logits (DP-GTR's
    ``top_k=50``): a token outside one input's top-k has probability 0 there.
``lm-factor-one``
    ``T = Δ/ε``, the factor 2 dropped (decoding's docstring: the loss tends to ``2ε``).
``dp-bart-shared-noise``
    one noise vector added to every token row (``clip_and_noise`` replaced): row differences come out
    noise-free, and the ``spread`` probe's read-out with them.
``dp-bart-range``
    clipping to ``[-0.2, 0.1]`` but σ calibrated for a range of 0.2 (``DPBART.sigma`` replaced; the true
    range is 0.3, so σ is 2/3 of the claim's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError, require
from .core import AuditCase
from .registry import register_audit_case

if TYPE_CHECKING:
    from torch import Tensor

    from ..generation.decoding import ClipBounds
    from ..generation.lm_family import DPBART

#: A function of a rewriter's release loop that a known-bad variant replaces (its scores or hidden rows in, a
#: tensor out: ``clipped_log_weights``, ``exponential_step``, ``clip_and_noise``).
LoopFunction = Callable[..., "Tensor"]

__all__ = ["BART_LOOP_BAD", "KNOWN_BAD", "LM_DEFAULT_EPSILON", "RELEASE_LOOP_BAD", "planted_bart_case",
           "planted_release_case", "register_lm_cases", "token_case"]

#: Per-token ε of the default token-level audits.
LM_DEFAULT_EPSILON = 2.0
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

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        return draw_a(n, rng) if which == "a" else draw_b(n, rng)

    return AuditCase(mechanism=name, pair=f"one token, clipped scores (b, a, ..., a) vs (a, b, ..., b) over {vocab} "
                     f"tokens, [a, b] = [{bounds.low:g}, {bounds.high:g}]", input_a="a", input_b="b", sample=sample,
                     claimed_epsilon=eps, claimed_delta=0.0, events="discrete", chunk=50_000)


#: The known-bad token-level variants planted in DP-Prompt's real release loop (audit/lm_release.py's case):
#: the loop's function replaced while the audit draws, the claim and reference law kept.
RELEASE_LOOP_BAD = ("lm-unclipped", "lm-topk-clipped", "lm-factor-one")


@contextlib.contextmanager
def _planted(attr: str, make: Callable[[LoopFunction], LoopFunction]) -> Iterator[None]:
    """Replace ``attr`` in every loaded ``textdp.generation`` module that binds it, for the block only."""
    from ..generation import decoding, lm_decode  # (loaded, so every module binding it is found)

    mods = [m for m in list(sys.modules.values())
            if getattr(m, "__name__", "").startswith("textdp.generation") and hasattr(m, attr)]
    original = getattr(decoding, attr) if hasattr(decoding, attr) else getattr(lm_decode, attr)
    bound = [m for m in mods if getattr(m, attr) is original]
    planted = make(original)
    for m in bound:
        setattr(m, attr, planted)
    try:
        yield
    finally:
        for m in bound:
            setattr(m, attr, original)


def _loop_variant(variant: str) -> tuple[str, Callable[[LoopFunction], LoopFunction]]:
    """``(attr, make)``: the function of the release loop a known-bad variant replaces, and its replacement."""
    torch = require("torch", "generation")

    if variant == "lm-factor-one":  # T = Δ/ε: each step at 2ε
        return "exponential_step", lambda step: lambda scores, rng, *, epsilon, **kw: step(
            scores, rng, epsilon=2.0 * epsilon, **kw)

    def make(clipped: LoopFunction) -> LoopFunction:
        def planted(scores: Tensor, *, epsilon: float, bounds: ClipBounds, allowed: Tensor | None = None) -> Tensor:
            s = torch.as_tensor(scores).to(torch.float64, copy=True)
            if variant == "lm-unclipped":  # softmax(s / T) with T = 2Δ/ε, nothing clipped
                lw = s * (epsilon / (2.0 * bounds.width))
                if allowed is not None:
                    lw = lw.masked_fill(~torch.as_tensor(allowed, dtype=torch.bool).expand_as(lw), -math.inf)
                return lw - lw.max(dim=1, keepdim=True).values
            lw = clipped(scores, epsilon=epsilon, bounds=bounds, allowed=allowed)  # lm-topk-clipped
            ok = torch.isfinite(lw)
            k = max(1, int(ok[0].sum()) // 4)  # top-k of the private logits among the allowed tokens
            top = torch.topk(torch.where(ok, s, torch.full((), -math.inf, dtype=torch.float64)), k, dim=1).indices
            kept = torch.zeros_like(ok).scatter_(1, top, True)
            return torch.where(kept, lw, torch.full((), -math.inf, dtype=torch.float64))
        return planted

    return "clipped_log_weights", make


def planted_release_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                         variant: str | None = None, base: str = "dp-prompt") -> AuditCase:
    """A known-bad variant planted in ``base``'s real release loop (:data:`RELEASE_LOOP_BAD`; module docstring).

    The case is :func:`~textdp.audit.lm_release.lm_release_case` of ``base`` (claim, reference law, curve and
    conformance table from the correct law), sampled with the loop's function replaced while it draws.
    """
    from .lm_release import lm_release_case

    attr, make = _loop_variant(variant or name)
    case = lm_release_case(base, epsilon, delta)
    real = case.sample

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        with _planted(attr, make):
            return real(which, n, rng)

    curve = dataclasses.replace(case.curve, sample=sample) if case.curve is not None else None
    return dataclasses.replace(case, mechanism=name, sample=sample, curve=curve,
                               pair=f"{case.pair}; KNOWN-BAD: {variant or name} planted in the loop")


#: The DP-BART known-bad variants, planted in DP-BART's real release loop on its probe model
#: (:class:`~textdp.audit.lm_models.GaussianProbe`).
BART_LOOP_BAD = ("dp-bart-shared-noise", "dp-bart-range")
#: ``dp-bart-range``: the clipping bounds, and the range its σ is calibrated for (the true range is 0.3).
BART_RANGE_CLIP = (-0.2, 0.1)
BART_RANGE_CALIBRATED = 0.2


@contextlib.contextmanager
def _range_calibration(width: float) -> Iterator[None]:
    """DP-BART's σ calibrated for a clipping range of ``width`` instead of its own (``dp-bart-range``), for the
    block only: the sensitivity ``width sqrt(d n)`` goes to the library's own analytic-Gaussian calibration."""
    from ..generation import lm_family

    original = lm_family.DPBART.sigma

    def sigma(self: DPBART, hidden_size: int | None) -> tuple[float, float]:
        original(self, hidden_size)  # the real method's checks
        sens = width * math.sqrt(int(hidden_size or 0) * self.max_tokens)
        if self.epsilon is None:  # (the real method's checks refused it already)
            raise ParameterError("dp-bart-range: epsilon is not set")
        return sens, lm_family.analytic_gaussian_sigma(float(self.epsilon), self.delta_value(), sens)

    lm_family.DPBART.sigma = sigma  # type: ignore[method-assign]
    try:
        yield
    finally:
        lm_family.DPBART.sigma = original  # type: ignore[method-assign]


def _shared_noise(clip_and_noise: LoopFunction) -> LoopFunction:
    """``clip_and_noise`` with one noise row per sentence added to every token row (``dp-bart-shared-noise``)."""
    torch = require("torch", "generation")

    def planted(hidden: Tensor | np.ndarray, bounds: ClipBounds, sigma: float, rng: np.random.Generator) -> Tensor:
        clipped = clip_and_noise(hidden, bounds, 0.0, rng)
        row = torch.from_numpy(rng.standard_normal((clipped.shape[0], 1, clipped.shape[2])))
        return clipped + float(sigma) * row

    return planted


def planted_bart_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                      variant: str | None = None) -> AuditCase:
    """A DP-BART known-bad variant planted in DP-BART's real release loop (:data:`BART_LOOP_BAD`).

    The case is :func:`~textdp.audit.lm_release.lm_release_case` of ``dp-bart`` (claim and reference law of the
    correct loop), sampled with the fault planted while it draws: ``dp-bart-shared-noise`` replaces
    ``clip_and_noise`` (one noise row shared by every token row) and is audited on the ``spread`` probe, whose
    read-out is exactly 0 for equal rows once a shared row cancels; ``dp-bart-range`` clips to
    :data:`BART_RANGE_CLIP` with σ calibrated for a range of :data:`BART_RANGE_CALIBRATED` (σ×2/3), audited on
    the ``mean`` probe.
    """
    from .lm_release import lm_release_case

    v = variant or name
    if v not in BART_LOOP_BAD:
        raise ParameterError(f"unknown DP-BART known-bad variant {v!r}; choose one of {', '.join(BART_LOOP_BAD)}")
    if v == "dp-bart-shared-noise":
        case = lm_release_case("dp-bart", epsilon, delta, design="spread")

        def fault() -> contextlib.AbstractContextManager[None]:
            return _planted("clip_and_noise", _shared_noise)
    else:
        def fault() -> contextlib.AbstractContextManager[None]:
            return _range_calibration(BART_RANGE_CALIBRATED)

        # σ is fixed in the calibration that ``fit`` builds (and the release reads): the fault is planted there,
        # so the case's mechanism is built and fitted inside it (a fault active only while sampling changes nothing)
        with fault():
            case = lm_release_case("dp-bart", epsilon, delta, clip=BART_RANGE_CLIP)
    real = case.sample

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        with fault():
            return real(which, n, rng)

    curve = dataclasses.replace(case.curve, sample=sample) if case.curve is not None else None
    return dataclasses.replace(case, mechanism=name, sample=sample, curve=curve,
                               pair=f"{case.pair}; KNOWN-BAD: {v} planted in the loop")


def register_lm_cases() -> None:
    """Register the four rewriters' release-path cases (:mod:`textdp.audit.lm_release`) and the known-bad variants
    (idempotent)."""
    from .lm_release import register_lm_release_cases

    register_lm_release_cases()
    bad = {
        "lm-unclipped": "temperature 2*Delta/epsilon with no clipping (DP-Prompt's scripts)",
        "lm-topk-clipped": "top-k from the private logits next to clipping (DP-GTR)",
        "lm-factor-one": "temperature Delta/epsilon: the factor 2 dropped",
        "dp-bart-shared-noise": "DP-BART with one noise vector shared by all tokens",
        "dp-bart-range": "DP-BART clipped to [-0.2, 0.1] but calibrated for a range of 0.2",
    }
    for name, text in bad.items():
        build = planted_bart_case if name in BART_LOOP_BAD else planted_release_case
        factory = functools.partial(build, name, variant=name)
        register_audit_case(name, factory, description=f"KNOWN-BAD variant, must be flagged: {text}", replace=True)
