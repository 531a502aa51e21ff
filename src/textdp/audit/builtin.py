"""The built-in audit cases, registered when :mod:`textdp.audit` is imported."""

from __future__ import annotations

import functools
from collections.abc import Callable

from .cases import (
    COVERED_MECHANISMS,
    covered_topic_case,
    earth_movers_case,
    earth_movers_noise_case,
    laplace_case,
    mvg_case,
    syntf_case,
    topicdp_case,
)
from .core import AuditCase
from .generation import ae_dp_case, er_ae_case
from .lm import register_lm_cases
from .registry import register_audit_case
from .sentence_release import random_sentence_case, syntf_sentence_case
from .word_level import register_word_level_cases

__all__ = ["register_builtin_cases"]


def register_builtin_cases() -> None:
    """Register every built-in case (idempotent): matrices, Earth Mover's, SynTF, ER-AE and the word-level family."""
    entries: dict[str, tuple[Callable[..., AuditCase], str]] = {
        "earth-movers": (earth_movers_case, ("Earth Mover's privacy, two GloVe words at distance d "
                         "(claim epsilon*d; default epsilon 10)")),
        "earth-movers-noise": (earth_movers_noise_case, ("Earth Mover's privacy, Algorithm 1's noisy vectors "
                               "(likelihood-ratio tails; claim epsilon*d; default epsilon 10)")),
        "earth-movers-2d": (lambda epsilon=None, delta=None: earth_movers_noise_case(epsilon, delta, dim=2),
                            ("Earth Mover's privacy, Algorithm 1 on GloVe's first 2 coordinates (likelihood-ratio "
                             "tails carry ~all of epsilon*d in low dimension; default epsilon 10)")),
        "topicdp": (topicdp_case, ("TopicDP Gaussian, analytic calibration (claim (epsilon, delta); "
                    "default 1, 1e-4)")),
        "topicdp-thesis": (lambda epsilon=None, delta=None: topicdp_case(epsilon, delta, calibration="thesis"),
                           "TopicDP Gaussian, thesis calibration (claim (epsilon, m*n*delta))"),
        "laplace": (laplace_case, "Laplace baseline, L1 sensitivity 2m (claim epsilon; default 1)"),
        "syntf": (syntf_case, ("SynTF, document 'monday' vs nine other words over a ten-word public vocabulary "
                  "(claim epsilon per document; default 3)")),
        "mvg": (mvg_case, "matrix-variate Gaussian, isotropic (claim (epsilon, delta))"),
        "mvg-directional": (lambda epsilon=None, delta=None: mvg_case(epsilon, delta, covariance="directional"),
                            "matrix-variate Gaussian, directional (claim (epsilon, delta))"),
    }
    for kind in COVERED_MECHANISMS:
        entries[f"{kind}-covered"] = (
            functools.partial(covered_topic_case, kind),
            f"{COVERED_MECHANISMS[kind]}, the covered default of textdp topics: one row over a public vocabulary, "
            "keywords read off the noise (the released keywords sampled; claim as its matrix case)")
    for name, (factory, text) in entries.items():
        register_audit_case(name, factory, description=text, replace=True)
    register_audit_case("er-ae", er_ae_case, replace=True,
                        description="ER-AE through privatize_batch on a tiny textdp model trained here, neighbouring "
                                    "texts (claim: L_max x the two-set bound per token; default epsilon 5; needs "
                                    "[generation])")
    register_audit_case("ae-dp", ae_dp_case, replace=True,
                        description="AE-DP through privatize_batch on a tiny textdp model trained here on reconstruction, "
                                    "neighbouring texts (claim: L_max x epsilon per step; default epsilon 5; needs "
                                    "[generation])")
    register_audit_case("syntf-sentence", syntf_sentence_case, replace=True,
                        description="SynTF per sentence through privatize_batch on a tiny model's 8-word vocabulary, "
                                    "bags of L_max = 2 terms (claim epsilon per sentence; default 3; needs [generation])")
    register_audit_case("random-sentence", random_sentence_case, replace=True,
                        description="Random-R per sentence through privatize_batch on a tiny model's 8-word "
                                    "vocabulary, two 2-token sentences (claim 2 x epsilon; default epsilon 2; needs "
                                    "[generation])")
    register_word_level_cases()
    register_lm_cases()
