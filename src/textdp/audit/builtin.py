"""The built-in audit cases, registered when :mod:`textdp.audit` is imported."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from ..errors import ParameterError
from .bag_cases import EARTH_MOVERS_PARAMS, earth_movers_case, earth_movers_noise_case, syntf_case
from .core import AuditCase
from .covered_topics import COVERED_MECHANISMS, covered_topic_case
from .generation import ae_dp_case, er_ae_case
from .lm import register_lm_cases
from .registry import register_audit_case
from .sentence_release import random_sentence_case, syntf_sentence_case
from .topic_cases import laplace_case, mvg_case, topicdp_case
from .topic_moments import register_topic_moment_cases
from .word_level import register_word_level_cases

__all__ = ["TAKES_PARAMS", "register_builtin_cases"]

#: The built-in cases that take the mechanism's own options as ``--param KEY=VALUE`` (each factory checks which).
TAKES_PARAMS = frozenset({"earth-movers", "syntf", "topicdp", "topicdp-thesis", "laplace", "mvg", "mvg-directional",
                          "topicdp-covered", "topicdp-thesis-covered", "laplace-covered", "mvg-covered",
                          "mvg-directional-covered"})


def _only(name: str, kw: dict[str, object], allowed: tuple[str, ...]) -> dict[str, object]:
    """``kw`` when every key is one of the case's ``--param`` options (else a one-line error)."""
    bad = sorted(set(kw) - set(allowed))
    if bad:
        raise ParameterError(f"the audit case {name!r} takes {', '.join(allowed)} as --param, not {', '.join(bad)} "
                             "(epsilon and delta with --epsilon and --delta)")
    return kw


def _grid_only(name: str, kw: dict[str, object]) -> dict[str, object]:
    return _only(name, kw, ("grid",))


def _with_params(name: str, factory: Callable[..., AuditCase], allowed: tuple[str, ...]) -> Callable[..., AuditCase]:
    """``factory`` taking only ``allowed`` as mechanism options (checked: nothing else reaches it)."""

    def build(epsilon: float | None = None, delta: float | None = None, **kw: object) -> AuditCase:
        return factory(epsilon, delta, **_only(name, kw, allowed))

    return build


def _teacher_forced(name: str, factory: Callable[..., AuditCase], epsilon: float | None = None,
                    delta: float | None = None) -> AuditCase:
    """The case of ``name`` with ``variant="teacher-forced"`` (registered for ``--all``)."""
    return dataclasses.replace(factory(epsilon, delta, variant="teacher-forced"), mechanism=f"{name}-teacher-forced")


def register_builtin_cases() -> None:
    """Register every built-in case (idempotent): matrices, Earth Mover's, SynTF, ER-AE and the word-level family."""
    entries: dict[str, tuple[Callable[..., AuditCase], str]] = {
        "earth-movers": (_with_params("earth-movers", earth_movers_case, EARTH_MOVERS_PARAMS), ("Earth Mover's privacy, two GloVe words at distance d "
                         "(claim epsilon*d; default epsilon 10)")),
        "earth-movers-noise": (earth_movers_noise_case, ("Earth Mover's privacy, Algorithm 1's noisy vectors "
                               "(likelihood-ratio tails; claim epsilon*d; default epsilon 10)")),
        "earth-movers-2d": (lambda epsilon=None, delta=None: earth_movers_noise_case(epsilon, delta, dim=2),
                            ("Earth Mover's privacy, Algorithm 1 on GloVe's first 2 coordinates (likelihood-ratio "
                             "tails carry ~all of epsilon*d in low dimension; default epsilon 10)")),
        "topicdp": (_with_params("topicdp", topicdp_case, ("grid",)), ("TopicDP Gaussian, analytic calibration (claim (epsilon, delta); "
                    "default 1, 1e-4)")),
        "topicdp-thesis": (lambda epsilon=None, delta=None, **kw: topicdp_case(epsilon, delta, calibration="thesis",
                                                                               **_grid_only("topicdp-thesis", kw)),
                           "TopicDP Gaussian, thesis calibration (claim (epsilon, m*n*delta))"),
        "laplace": (_with_params("laplace", laplace_case, ("grid",)), "Laplace baseline, L1 sensitivity 2m (claim epsilon; default 1)"),
        "syntf": (_with_params("syntf", syntf_case, ("size", "variant")), ("SynTF, document 'monday' vs nine other words over a ten-word public vocabulary "
                  "(claim epsilon per document; default 3)")),
        "mvg": (_with_params("mvg", mvg_case, ("grid",)), "matrix-variate Gaussian, isotropic (claim (epsilon, delta))"),
        "mvg-directional": (lambda epsilon=None, delta=None, **kw: mvg_case(epsilon, delta, covariance="directional",
                                                                            **_grid_only("mvg-directional", kw)),
                            "matrix-variate Gaussian, directional (claim (epsilon, delta))"),
    }
    for kind in COVERED_MECHANISMS:
        entries[f"{kind}-covered"] = (
            _with_params(f"{kind}-covered", functools.partial(covered_topic_case, kind), ("grid",)),
            f"{COVERED_MECHANISMS[kind]}, the covered default of textdp topics: one row over a public vocabulary, "
            "keywords read off the noise (the released keywords sampled; claim as its matrix case)")
    entries["syntf-n3"] = (lambda epsilon=None, delta=None: dataclasses.replace(
        syntf_case(epsilon, delta, size=3), mechanism="syntf-n3"),
                           "SynTF with bags of N = 3 terms (a law users select: --size 3; claim epsilon per document)")
    for name, (factory, text) in entries.items():
        register_audit_case(name, factory, description=text, replace=True, takes_params=name in TAKES_PARAMS)
    register_audit_case("er-ae", _with_params("er-ae", er_ae_case, ("word_fraction", "k", "variant")), replace=True,
                        takes_params=True,
                        description="ER-AE through privatize_batch on a tiny textdp model trained here, neighbouring "
                                    "texts (claim: L_max x the two-set bound per token; default epsilon 5; --param "
                                    "word_fraction, k, variant; needs [generation])")
    register_audit_case("er-ae-k3", lambda epsilon=None, delta=None: dataclasses.replace(
        er_ae_case(epsilon, delta, word_fraction=0.3, k=3), mechanism="er-ae-k3"), replace=True,
                        description="ER-AE with k = 3 and word_fraction = 0.3 (a law users select: textdp audit er-ae "
                                    "--param k=3 --param word_fraction=0.3; needs [generation])")
    register_audit_case("ae-dp", _with_params("ae-dp", ae_dp_case, ("variant",)), replace=True, takes_params=True,
                        description="AE-DP through privatize_batch on a tiny textdp model trained here on reconstruction, "
                                    "neighbouring texts (claim: L_max x epsilon per step; default epsilon 5; --param "
                                    "variant; needs [generation])")
    for base, factory in (("er-ae", er_ae_case), ("ae-dp", ae_dp_case)):
        register_audit_case(f"{base}-teacher-forced", functools.partial(_teacher_forced, base, factory), replace=True,
                            description=f"{base.upper()} with variant = teacher-forced (a law users select: textdp "
                                        f"audit {base} --param variant=teacher-forced; needs [generation])")
    register_audit_case("syntf-sentence", syntf_sentence_case, replace=True,
                        description="SynTF per sentence through privatize_batch on a tiny model's 8-word vocabulary, "
                                    "bags of L_max = 2 terms (claim epsilon per sentence; default 3; needs [generation])")
    register_audit_case("random-sentence", random_sentence_case, replace=True,
                        description="Random-R per sentence through privatize_batch on a tiny model's 8-word "
                                    "vocabulary, two 2-token sentences (claim 2 x epsilon; default epsilon 2; needs "
                                    "[generation])")
    register_word_level_cases()
    register_lm_cases()
    register_topic_moment_cases()
