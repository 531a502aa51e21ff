"""Privacy events: a frozen, structured description of *what ran*, not only what it spent (a leaf module).

In the style of Google's ``dp_accounting`` (``DpEvent``): a release's :class:`~textdp.guarantees.Guarantee`
states a number (ε, δ) per unit, and its event says which mechanism produced it, so that an accountant
(:mod:`textdp.accounting.accountant`) can compose several releases more tightly than by adding the numbers.
Two Gaussian releases, for example, compose to one Gaussian with ``σ/√2`` (Dong, Roth & Su 2019, Cor. 3.3;
Balle & Wang 2018), whose ε at the same total δ is well below the sum of the two ε's.

The events, all for one unit of the guarantee (the neighbouring relation the family states):

:class:`PureEvent`
    ε-DP (Dwork et al. 2006): every word, document and exponential-mechanism release. Metric
    (E_d-) privacy is recorded at the distance the guarantee states its ε for.
:class:`ApproxEvent`
    (ε, δ)-DP with no finer structure known to the accountant.
:class:`GaussianEvent`
    the Gaussian mechanism with noise multiplier ``σ / Δ₂`` (its privacy depends on nothing else).
:class:`ZCDPEvent`
    ρ-zCDP (Bun & Steinke 2016), e.g. the discrete Gaussian of TopicDP (Canonne, Kamath & Steinke 2020).
:class:`SelfComposedEvent`, :class:`ComposedEvent`
    the same event ``count`` times (a document of ``n`` tokens, ``m`` sentences), or several different ones.

Events are JSON-round-trippable (:meth:`PrivacyEvent.to_dict`, :func:`event_from_dict`) so a ledger can keep
them, and contain public parameters only.

>>> e = SelfComposedEvent(GaussianEvent(noise_multiplier=2.0), count=3)
>>> event_from_dict(e.to_dict()) == e
True
>>> e.to_dict()
{'kind': 'self_composed', 'event': {'kind': 'gaussian', 'noise_multiplier': 2.0}, 'count': 3}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ParameterError

__all__ = ["ApproxEvent", "Charge", "ComposedEvent", "GaussianEvent", "PrivacyEvent", "PureEvent", "SelfComposedEvent",
           "ZCDPEvent", "event_from_dict"]


def _check(value: float, name: str, *, positive: bool = False, below_one: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0) or (below_one and v >= 1):
        raise ParameterError(f"privacy event: {name} must be a finite number "
                             f"{'> 0' if positive else '>= 0'}{' and < 1' if below_one else ''}, got {value!r}")
    return v


@dataclass(frozen=True)
class PrivacyEvent:
    """Base of the events: a ``kind`` tag and a JSON form."""

    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"kind": ..., <fields>}`` (nested events as their own forms)."""
        out: dict[str, Any] = {"kind": self.kind}
        for key, value in vars(self).items():
            if isinstance(value, PrivacyEvent):
                out[key] = value.to_dict()
            elif isinstance(value, tuple):
                out[key] = [v.to_dict() for v in value]
            else:
                out[key] = value
        return out


@dataclass(frozen=True)
class PureEvent(PrivacyEvent):
    """ε-differential privacy for one unit."""

    kind: ClassVar[str] = "pure"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check(self.epsilon, "epsilon"))


@dataclass(frozen=True)
class ApproxEvent(PrivacyEvent):
    """(ε, δ)-differential privacy for one unit, with nothing finer known."""

    kind: ClassVar[str] = "approx"
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _check(self.delta, "delta", below_one=True))


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """The Gaussian mechanism with ``noise_multiplier = σ / Δ₂`` (L2 sensitivity Δ₂ of the released function)."""

    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check(self.noise_multiplier, "noise_multiplier", positive=True))


@dataclass(frozen=True)
class ZCDPEvent(PrivacyEvent):
    """ρ-zero-concentrated DP (Bun & Steinke 2016, Def. 1.1)."""

    kind: ClassVar[str] = "zcdp"
    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _check(self.rho, "rho", positive=True))


@dataclass(frozen=True)
class SelfComposedEvent(PrivacyEvent):
    """``event`` run ``count`` times on the same unit (adaptive composition)."""

    kind: ClassVar[str] = "self_composed"
    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ParameterError(f"privacy event: count must be a positive integer, got {self.count!r}")


@dataclass(frozen=True)
class ComposedEvent(PrivacyEvent):
    """Each of ``events`` once, on the same unit."""

    kind: ClassVar[str] = "composed"
    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        if not self.events:
            raise ParameterError("privacy event: a composition needs at least one event")


@dataclass(frozen=True)
class Charge:
    """What one release costs one unit (a document, a user): what ran (``event``) and the stated (ε, δ).

    :meth:`textdp.guarantees.Guarantee.charge` makes one from a guarantee; the accountant
    (:func:`textdp.accounting.accountant.compose`) and the ledger compose them.
    """

    event: PrivacyEvent
    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise ParameterError(f"a charge needs a privacy event, got {type(self.event).__name__}")
        object.__setattr__(self, "epsilon", _check(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _check(self.delta, "delta", below_one=True))


_KINDS: dict[str, type[PrivacyEvent]] = {c.kind: c for c in (PureEvent, ApproxEvent, GaussianEvent, ZCDPEvent,
                                                              SelfComposedEvent, ComposedEvent)}


def event_from_dict(data: Mapping[str, Any]) -> PrivacyEvent:
    """The event of a JSON form (:meth:`PrivacyEvent.to_dict`); a one-line error for anything else.

    >>> event_from_dict({"kind": "pure", "epsilon": 1.5})
    PureEvent(epsilon=1.5)
    >>> event_from_dict({"kind": "laplace"})
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: unknown privacy event kind 'laplace' (known: approx, composed, gaussian, pure, self_composed, zcdp)
    """
    if not isinstance(data, Mapping):
        raise ParameterError(f"a privacy event must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ParameterError(f"unknown privacy event kind {kind!r} (known: {', '.join(sorted(_KINDS))})")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        if cls is SelfComposedEvent:
            return SelfComposedEvent(event=event_from_dict(fields["event"]), count=fields["count"])
        if cls is ComposedEvent:
            return ComposedEvent(events=tuple(event_from_dict(e) for e in fields["events"]))
        return cls(**fields)
    except (KeyError, TypeError) as exc:
        raise ParameterError(f"privacy event {kind!r}: malformed fields {sorted(fields)} ({exc})") from None
