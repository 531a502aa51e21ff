"""Audit case of the sentence rewriter: one step of ER-AE's two-set exponential mechanism.

The samplers come from :func:`textdp.generation.audit.two_set_audit_case` (point masses on words
0 and 1 of a toy alphabet of 50 words, the pair that attains the per-token bound up to
``e^{ε_word/2} − 1``, drawn by the mechanism's own ``two_set_step``); the claim is derived again
by :func:`textdp.audit.accountant.two_set_per_token` (never read from ``two_set_bound``, which
also sets the sampler's budgets); this module wraps them as an
:class:`~textdp.audit.core.AuditCase` with discrete events (the output word), the privacy curve of the
two-set law on the point masses and a conformance table (:func:`two_set_point_mass_law`, derived again
from er-ae-notes.md's steps, not from the sampler). Needs the ``[generation]`` extra (torch).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import require
from .accountant import two_set_per_token
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, exact_profile

__all__ = ["ER_AE_DEFAULT_EPSILON", "er_ae_case", "two_set_point_mass_law"]

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

    table = two_set_point_mass_law(float(eps), vocab_size)
    conf = Conformance(description=f"two-set exponential mechanism on a point mass (er-ae-notes.md): the lexical "
                                   f"set chosen with probability 1/(1 + e^(-eps_set/2)), eps_set = 0.9 eps, else a "
                                   f"uniform word of the other {vocab_size - 1}",
                       kind="table", keep=lambda which, out: out, table=lambda which: table[0 if which == "a" else 1])
    la, lb = np.log(table[0]), np.log(table[1])
    curve = PrivacyCurve(sample=sample, loss=lambda out: (la - lb)[np.asarray(out, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, 0.75 * claimed, CURVE_POINTS)),
                         description="the exact loss of the two-set law on the point masses", chunk=50_000,
                         reuse_outputs=True)
    return AuditCase(
        mechanism="er-ae", pair=f"one step, point masses on words 0 and 1 of a {vocab_size}-word toy alphabet",
        input_a="a", input_b="b", sample=sample, claimed_epsilon=claimed, claimed_delta=claimed_delta,
        events="discrete", chunk=50_000, curve=curve, conformance=conf,
    )


def two_set_point_mass_law(epsilon: float, vocab_size: int, *, word_fraction: float = 0.1) -> np.ndarray:
    """The two-set law's output probabilities on the point masses ``δ_0`` (row 0) and ``δ_1`` (row 1), derived again.

    With all the mass on word ``j`` the lexical multiset is ``k`` copies of ``j`` (utility 1) and the other set
    is every other word (utility 0, each with probability 0, so the draw inside it is uniform); the set is
    chosen with weights ``e^{ε_set u/2}``, ``ε_set = (1 − f) ε`` (er-ae-notes.md, steps 1-5):
    ``P(j) = 1/(1 + e^{−ε_set/2})`` and ``P(w) = (1 − P(j))/(|V| − 1)`` for ``w != j``.

    The loss of word 0, ``ε_set/2 + ln(|V| − 1)``, sits just under the per-token bound (4.794 at ε = 2):

    >>> p = two_set_point_mass_law(2.0, 50)
    >>> round(float(p[0, 0]), 4), round(float(np.log(p[0, 0] / p[1, 0])), 3)
    (0.7109, 4.792)
    """
    e_set = (1.0 - float(word_fraction)) * float(epsilon)
    keep = 1.0 / (1.0 + math.exp(-e_set / 2.0))
    law = np.full((2, int(vocab_size)), (1.0 - keep) / (int(vocab_size) - 1))
    law[0, 0] = law[1, 1] = keep
    return law
