"""Differentially private sentence rewriting: ER-AE, AE-DP, SynTF and Random-R (extra ``[generation]``).

ER-AE (Bo, Ding, Fung & Iqbal, NAACL 2021) rewrites a sentence with an auto-encoder whose
generator draws every token through the *two-set exponential mechanism*. textdp
implements the model after the authors' public code, counts every draw in the budget,
and states the bound its implementation satisfies (:mod:`textdp.generation.bounds`):
per sentence ``L_max · (ε_set/2 + ln(|V| − 2 + e^{ε_word/2}))`` — dominated by ``ln |V|``.

* :func:`train_rewriter` / ``textdp train-rewriter`` — train the model (resumable; a model
  card records the data description and settings, never the text);
* :class:`Rewriter`, :func:`rewrite_documents` / ``textdp rewrite`` — rewrite text with
  ``er-ae``, ``ae-dp``, ``syntf-sentence`` or ``random-sentence`` (``textdp.mechanisms.get(name, ...)``);
  every record carries a :class:`RewriteGuarantee`;
* :func:`two_set_bound`, :func:`two_set_step`, :func:`two_set_distribution` — the
  mechanism, its exact law and its accounting;
* :func:`two_set_audit_case` — the two samplers and the claim the auditor (``textdp audit er-ae``) needs.

Torch is needed to train and to generate (:class:`~textdp.errors.MissingDependencyError`
naming the ``[generation]`` extra otherwise); the accounting works without it.
"""

from __future__ import annotations

from .audit import two_set_audit_case
from .bounds import (
    MODEL_DATA_CASES,
    RewriteGuarantee,
    TwoSetBound,
    em_bound,
    random_r_epsilon,
    random_r_rate,
    two_set_bound,
    two_set_epsilon_for_budget,
)
from .rewriter import Rewriter, load_rewriter, rewrite_documents
from .sampling import em_distribution, em_step, two_set_distribution, two_set_step
from .training import TrainingSettings, train_rewriter
from .vocab import Vocabulary, detokenize, segment_text

__all__ = [
    "MODEL_DATA_CASES",
    "RewriteGuarantee",
    "Rewriter",
    "TrainingSettings",
    "TwoSetBound",
    "Vocabulary",
    "detokenize",
    "em_bound",
    "em_distribution",
    "em_step",
    "load_rewriter",
    "random_r_epsilon",
    "random_r_rate",
    "rewrite_documents",
    "segment_text",
    "train_rewriter",
    "two_set_audit_case",
    "two_set_bound",
    "two_set_distribution",
    "two_set_epsilon_for_budget",
    "two_set_step",
]
