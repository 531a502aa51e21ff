"""The registry of audit cases, keyed by mechanism name, and :func:`audit`.

A mechanism joins the auditor with one call::

    register_audit_case("my-mechanism", factory, description="...")

or with the decorator :func:`audit_case_factory` on the factory itself. The word-level cases are
declared on their claim functions (:func:`textdp.audit.claims.word_claim_case`).

where ``factory(epsilon=None, delta=None) -> AuditCase`` builds the case at the requested
privacy parameters (``None``: the case's defaults). See :mod:`textdp.audit.builtin` for the
built-in cases and :func:`textdp.audit.word_cases.word_pair_case` for word-level metric-DP mechanisms.

A registered mechanism with no case (its registry line says ``None``, or names a case nobody
registered) is still usable everywhere; it is **NOT AUDITED**, and says so: :func:`not_audited`
lists it (``textdp audit --all`` prints it), and auditing it by name is a one-line error saying how
to add a claim (docs/new-mechanism.md §audit). Its claim is a separate step on purpose, written from the
paper in this layer, so that it shares nothing with the mechanism's calibration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError, ParameterTypeError
from ..progress import ProgressCallback
from .core import AuditCase, AuditResult, run_audit

__all__ = ["NOT_AUDITED", "AuditFactory", "audit", "audit_case", "audit_case_factory", "audit_case_names",
           "describe_audit_cases", "not_audited", "register_audit_case"]

AuditFactory = Callable[..., AuditCase]


@dataclass(frozen=True)
class _Entry:
    factory: AuditFactory
    description: str
    #: the factory takes the mechanism's own parameters as keywords (the word-level cases)
    takes_params: bool = False


_CASES: dict[str, _Entry] = {}


def register_audit_case(name: str, factory: AuditFactory, *, description: str = "",
                        replace: bool = False, takes_params: bool = False) -> None:
    """Register ``factory(epsilon=None, delta=None) -> AuditCase`` under ``name``.

    ``takes_params``: the factory also takes the mechanism's own parameters as keywords
    (``factory(epsilon=..., delta=..., lambd=0.2)``), and computes the claim from them too.

    >>> register_audit_case("earth-movers", lambda **kw: None)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: an audit case named 'earth-movers' is already registered (pass replace=True)
    """
    if not isinstance(name, str) or not name:
        raise ParameterTypeError("an audit case needs a non-empty string name")
    if not callable(factory):
        raise ParameterTypeError(f"the factory of audit case {name!r} must be callable")
    if name in _CASES and not replace:
        raise ParameterError(f"an audit case named {name!r} is already registered (pass replace=True)")
    _CASES[name] = _Entry(factory, description, takes_params)


def audit_case_factory(name: str, *, description: str = "", replace: bool = False,
                       takes_params: bool = False) -> Callable[[AuditFactory], AuditFactory]:
    """Decorator form of :func:`register_audit_case`: register the function below as the factory of ``name``.

    >>> @audit_case_factory("doc-example", description="an example")
    ... def doc_example(epsilon=None, delta=None):
    ...     raise NotImplementedError
    >>> describe_audit_cases()["doc-example"]
    'an example'
    >>> del _CASES["doc-example"]
    """

    def register(factory: AuditFactory) -> AuditFactory:
        register_audit_case(name, factory, description=description, replace=replace, takes_params=takes_params)
        return factory

    return register


def audit_case_names() -> tuple[str, ...]:
    """The registered mechanism names, sorted.

    >>> {"earth-movers", "topicdp", "laplace", "mvg"} <= set(audit_case_names())
    True
    """
    return tuple(sorted(_CASES))


#: Why ``textdp audit --all`` lists a registered mechanism as NOT AUDITED (its registry line says ``None``).
NOT_AUDITED = "no independent claim registered: see docs/new-mechanism.md §audit"


def not_audited() -> dict[str, str]:
    """``{name: why}`` of every registered mechanism that no registered audit case checks, in registry order.

    ``textdp audit --all`` lists these as NOT AUDITED (never a silent gap): a mechanism whose registry line
    says ``None`` (:data:`NOT_AUDITED`), or names a case that is not registered.

    >>> set(not_audited()).isdisjoint({"cmp", "earth-movers", "topicdp-laplace"})
    True
    """
    from ..mechanisms.registry import REGISTRY

    out = {}
    for e in REGISTRY.values():
        if e.audit is None:
            out[e.name] = NOT_AUDITED
        elif e.audit not in _CASES:
            out[e.name] = f"its audit case {e.audit!r} is not registered: see docs/new-mechanism.md §audit"
    return out


def _no_case(name: object) -> ParameterError:
    """The one-line error for a name with no registered case (a NOT AUDITED mechanism says how to add one)."""
    from ..mechanisms.registry import REGISTRY

    e = REGISTRY.get(name) if isinstance(name, str) else None
    if e is not None and e.audit is not None and e.audit != name and e.audit in _CASES:
        return ParameterError(f"mechanism {name!r} is audited by the case {e.audit!r}: run textdp audit {e.audit}")
    if e is not None:
        return ParameterError(f"mechanism {name!r} is NOT AUDITED (no independent claim registered): declare its "
                              "claim from the paper in textdp/audit/claims.py (word level: @word_claim_case; "
                              "others: @audit_case_factory) and name it in its registry line; see "
                              "docs/new-mechanism.md §audit")
    return ParameterError(f"no audit case for mechanism {name!r}; choose one of: {', '.join(audit_case_names())}")


def describe_audit_cases() -> dict[str, str]:
    """``{name: one-line description}`` of every registered case."""
    return {k: _CASES[k].description for k in audit_case_names()}


def audit_case(name: str, *, epsilon: float | None = None, delta: float | None = None,
               params: Mapping[str, object] | None = None) -> AuditCase:
    """Build the registered case ``name`` at ``epsilon`` / ``delta`` (``None``: its defaults).

    ``params``: the mechanism's own parameters (``{"lambd": 0.2}``), for the cases that take them.

    >>> audit_case("earth-movers-2d", params={"size": 2})
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the audit case 'earth-movers-2d' takes no mechanism parameters (size): its claim is set by epsilon and delta
    """
    entry = _CASES.get(name) if isinstance(name, str) else None
    if entry is None:
        raise _no_case(name)
    extra = dict(params or {})
    for key in ("epsilon", "delta"):
        if key in extra:
            raise ParameterError(f"set {key} with --{key} (epsilon=/delta= in Python), not as a mechanism parameter")
    if extra and not entry.takes_params:
        raise ParameterError(f"the audit case {name!r} takes no mechanism parameters ({', '.join(extra)}): its claim "
                             "is set by epsilon and delta")
    case = entry.factory(epsilon=epsilon, delta=delta, **extra)
    if not isinstance(case, AuditCase):
        raise ParameterTypeError(f"the audit factory of {name!r} returned {type(case).__name__}, not an AuditCase")
    return case


def audit(
    mechanism: str | AuditCase,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    samples: int | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    confidence: float = 0.95,
    progress: ProgressCallback | None = None,
    params: Mapping[str, object] | None = None,
    conformance: bool = False,
) -> AuditResult:
    """Audit a registered mechanism (by name) or an :class:`AuditCase`.

    Parameters
    ----------
    mechanism : str or AuditCase
        A name from :func:`audit_case_names`, or a case built by hand (for example a
        deliberately broken variant).
    epsilon, delta : float, optional
        Privacy parameters of the mechanism under audit (``None``: the case's defaults; ignored
        for an :class:`AuditCase`, which carries its own claim).
    samples : int, optional
        Outputs drawn from each of the two inputs (half select the event, half bound it);
        default: the case's ``default_samples`` (10^5; 10^4 for the topic matrices).
    seed : int, Generator or None
        Seed for reproducible audits; ``None`` draws fresh OS entropy.
    confidence : float
        Confidence level of the Clopper–Pearson lower bound.
    progress : callable, optional
        ``progress(done, total)`` over the outputs drawn (:mod:`textdp.progress`).
    params : mapping, optional
        The mechanism's own parameters, for the word-level cases (``{"lambd": 0.2}`` for vickrey):
        the mechanism is built with them and the claim computed from them.
    conformance : bool
        Also test the released outputs against an independent reference of the paper's law
        (:mod:`textdp.audit.conformance`); ``passed`` then requires both verdicts, and the two
        share the false-alarm budget ``1 - confidence``.

    Returns
    -------
    AuditResult
        ``passed`` is ``lower_bound <= claimed_epsilon``.

    Examples
    --------
    >>> r = audit("laplace", epsilon=1.0, samples=500, seed=3, conformance=True)
    >>> r.passed, r.claimed_epsilon, r.conformance.passed, sorted(r.to_dict())[:4]
    (True, 1.0, True, ['claimed_delta', 'claimed_epsilon', 'conformance', 'curve'])
    """
    if isinstance(mechanism, AuditCase):
        case = mechanism
    else:
        case = audit_case(mechanism, epsilon=epsilon, delta=delta, params=params)
    return run_audit(case, samples=samples, seed=seed, confidence=confidence, progress=progress,
                     conformance=conformance)
