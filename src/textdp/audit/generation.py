"""Audit case of the sentence rewriter: one step of ER-AE's two-set exponential mechanism.

The samplers come from :func:`textdp.generation.audit.two_set_audit_case` (point masses on words
0 and 1 of a toy alphabet of 50 words, the pair that attains the per-token bound up to
``e^{ε_word/2} − 1``, drawn by the mechanism's own ``two_set_step``); the claim is derived again
by :func:`textdp.audit.accountant.two_set_per_token` (never read from ``two_set_bound``, which
also sets the sampler's budgets); this module wraps them as an
:class:`~textdp.audit.core.AuditCase` with discrete events (the output word). Needs the
``[generation]`` extra (torch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import require
from .accountant import two_set_per_token
from .core import AuditCase

__all__ = ["ER_AE_DEFAULT_EPSILON", "er_ae_case"]

#: Nominal per-token ε of the default audit (the claim is the two-set bound at this ε).
ER_AE_DEFAULT_EPSILON = 2.0


def er_ae_case(epsilon: float | None = None, delta: float | None = None, *, broken: str | None = None,
               vocab_size: int = 50) -> AuditCase:
    """The ``er-ae`` audit case (``broken``: a deliberately wrong variant, for the tests).

    ``delta`` is ignored: the two-set mechanism is pure ε-DP per token.
    """
    require("torch", "generation")
    from ..generation.audit import two_set_audit_case

    eps = ER_AE_DEFAULT_EPSILON if epsilon is None else epsilon
    sample_a, sample_b, stated, claimed_delta = two_set_audit_case(eps, vocab_size=vocab_size, broken=broken)
    # the claim is derived again by the audit's accountant, never read from the bound that drives the sampler
    # (the poster-claim variant keeps its deliberately wrong claim)
    claimed = stated if broken == "poster-claim" else two_set_per_token(float(eps), vocab_size)

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_a(n, rng) if which == "a" else sample_b(n, rng)

    return AuditCase(
        mechanism="er-ae", pair=f"one step, point masses on words 0 and 1 of a {vocab_size}-word toy alphabet",
        input_a="a", input_b="b", sample=sample, claimed_epsilon=claimed, claimed_delta=claimed_delta,
        events="discrete", chunk=50_000,
    )
