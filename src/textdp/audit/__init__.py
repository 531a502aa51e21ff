"""Empirical privacy auditing: does a mechanism exceed the ε it claims?

The auditor samples a mechanism on two neighbouring inputs many times and turns the frequencies of
output events into a Clopper–Pearson *lower* confidence bound on the privacy loss (see
:mod:`textdp.audit.core`). A lower bound above the claimed ε is evidence of a bug; a lower bound
below it is a pass (not a proof).

* :func:`audit` -- audit a registered mechanism by name (``textdp audit NAME`` on the command
  line) or a hand-built :class:`AuditCase`;
* :func:`register_audit_case` -- add a mechanism (a factory ``(epsilon, delta) -> AuditCase``);
* the built-in cases and helpers, by family: :mod:`textdp.audit.word_cases` (:func:`word_pair_case`),
  :mod:`textdp.audit.bag_cases`, :mod:`textdp.audit.topic_cases` (:func:`sample_releases`),
  :mod:`textdp.audit.covered_topics`, :mod:`textdp.audit.lm_release`; every case samples the release path
  (``privatize_batch`` or the family's release function);
* :mod:`textdp.audit.accountant` -- the claims, derived again from the papers (no code shared
  with the mechanisms' calibration); :mod:`textdp.audit.conformance` -- the released outputs
  against independent reference laws (``audit(..., conformance=True)``).

This package sits above the mechanisms (like :mod:`textdp.evaluation`); lower layers never import it.

>>> r = audit("laplace", epsilon=2.0, samples=500, seed=0)
>>> r.passed, r.claimed_epsilon
(True, 2.0)
"""

from __future__ import annotations

from .builtin import register_builtin_cases
from .core import (
    AuditCase,
    AuditResult,
    clopper_pearson,
    projection_statistic,
    run_audit,
)
from .registry import (
    AuditFactory,
    audit,
    audit_case,
    audit_case_names,
    describe_audit_cases,
    register_audit_case,
)
from .topic_cases import sample_releases
from .word_cases import word_pair_case

register_builtin_cases()

__all__ = [
    "AuditCase",
    "AuditFactory",
    "AuditResult",
    "audit",
    "audit_case",
    "audit_case_names",
    "clopper_pearson",
    "describe_audit_cases",
    "projection_statistic",
    "register_audit_case",
    "run_audit",
    "sample_releases",
    "word_pair_case",
]
