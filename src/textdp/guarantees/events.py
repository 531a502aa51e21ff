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
:class:`RandomizedResponseEvent`
    k-ary randomised response with noise parameter p (Warner 1965; Kairouz, Oh & Viswanath 2014): pure
    ``ε = ln(1 + k (1 − p) / p)``, with its exact privacy-loss distribution (random replacement, random sentence).
:class:`DiscreteLaplaceEvent`
    the discrete Laplace (geometric) mechanism with parameter ``a`` (``P(z) ∝ exp(−a |z|)``) for an L1
    sensitivity Δ: pure ``ε = a Δ`` (Ghosh, Roughgarden & Sundararajan 2009; CKS20 Alg. 2; TopicDP's Laplace).
:class:`SelfComposedEvent`, :class:`ComposedEvent`
    the same event ``count`` times (a document of ``n`` tokens, ``m`` sentences), or several different ones.

**Each event converts itself** for Google's ``dp_accounting`` (the accountant,
:mod:`textdp.accounting.accountant`, asks each library accountant whether it ``supports()`` the result):
:meth:`PrivacyEvent.to_dp_event` gives its ``DpEvent`` for the Rényi accountant (pure ε-DP as the
(ε²/2)-zCDP it implies, Bun & Steinke 2016, Prop. 3.3; an (ε, δ) event has none: ``UnsupportedDpEvent``), and
:meth:`PrivacyEvent.to_pld` its privacy-loss distribution for the PLD accountant (a zCDP event has none). A
new kind is one class here with these two methods and its ``kind``; :data:`EVENT_KINDS` is read from the
subclasses. An event whose class converts to neither is an error for the accountant, never a skip.

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
from typing import TYPE_CHECKING, ClassVar, Required, TypedDict, cast

from ..errors import ParameterError

if TYPE_CHECKING:  # dp_accounting is imported when an event is converted, never before
    from dp_accounting import DpEvent
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

__all__ = ["EVENT_KINDS", "ApproxEvent", "Charge", "ComposedEvent", "DiscreteLaplaceEvent", "EventForm",
           "GaussianEvent", "PrivacyEvent", "PureEvent", "RandomizedResponseEvent", "SelfComposedEvent", "ZCDPEvent", "event_from_dict",
           "format_charge"]


class EventForm(TypedDict, total=False):
    """The JSON form of an event (:meth:`PrivacyEvent.to_dict`): its ``kind`` and the fields of that kind.

    Each kind holds only its own fields: ``pure`` epsilon; ``approx`` epsilon, delta; ``gaussian``
    noise_multiplier; ``zcdp`` rho; ``randomized_response`` noise_parameter, num_buckets; ``discrete_laplace``
    parameter, sensitivity; ``self_composed`` event, count; ``composed`` events.
    """

    kind: Required[str]
    epsilon: float
    delta: float
    noise_multiplier: float
    rho: float
    noise_parameter: float
    num_buckets: int
    parameter: float
    sensitivity: float
    event: EventForm
    count: int
    events: list[EventForm]


def format_charge(epsilon: float, delta: float, unit: str, note: str = "") -> str:
    """The last sentence of every guarantee's statement: what a ledger charges one person per ``unit``.

    >>> format_charge(20.0, 0.0, "document", ", per unit of W_inf distance between the two documents")
    'Ledger charge: epsilon=20, delta=0 per document, per unit of W_inf distance between the two documents.'
    """
    return f"Ledger charge: epsilon={float(epsilon):.6g}, delta={float(delta):.6g} per {unit}{note}."


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

    @property
    def pure_epsilon(self) -> float | None:
        """ε when the event is pure ε-DP (exactly), else ``None``."""
        return None

    def to_dp_event(self) -> DpEvent:
        """This event as a ``dp_accounting.DpEvent`` (``UnsupportedDpEvent`` when no Rényi form exists)."""
        import dp_accounting

        eps = self.pure_epsilon
        if eps is not None:  # pure eps-DP implies (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 3.3)
            return dp_accounting.ZCDpEvent(eps * eps / 2.0) if eps > 0 else dp_accounting.NoOpDpEvent()
        return dp_accounting.UnsupportedDpEvent()

    def to_pld(self, interval: float) -> PrivacyLossDistribution | None:
        """This event's privacy-loss distribution (``dp_accounting.pld``), pessimistic; ``None`` when it has none."""
        eps = self.pure_epsilon
        if eps is None:
            return None
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                           value_discretization_interval=interval)

    def to_dict(self) -> EventForm:
        """The JSON form: ``{"kind": ..., <fields>}`` (nested events as their own forms)."""
        out: dict[str, object] = {"kind": self.kind}
        for key, value in vars(self).items():
            if isinstance(value, PrivacyEvent):
                out[key] = value.to_dict()
            elif isinstance(value, tuple):
                out[key] = [v.to_dict() for v in value]
            else:
                out[key] = value
        return cast("EventForm", out)  # the dataclass fields of this kind: the keys EventForm declares for it


@dataclass(frozen=True)
class PureEvent(PrivacyEvent):
    """ε-differential privacy for one unit."""

    kind: ClassVar[str] = "pure"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check(self.epsilon, "epsilon"))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon


@dataclass(frozen=True)
class ApproxEvent(PrivacyEvent):
    """(ε, δ)-differential privacy for one unit, with nothing finer known."""

    kind: ClassVar[str] = "approx"
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _check(self.delta, "delta", below_one=True))

    def to_pld(self, interval: float) -> PrivacyLossDistribution:
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(self.epsilon, self.delta),
                                           value_discretization_interval=interval)


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """The Gaussian mechanism with ``noise_multiplier = σ / Δ₂`` (L2 sensitivity Δ₂ of the released function)."""

    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check(self.noise_multiplier, "noise_multiplier", positive=True))

    def to_dp_event(self) -> DpEvent:
        import dp_accounting

        return dp_accounting.GaussianDpEvent(self.noise_multiplier)

    def to_pld(self, interval: float) -> PrivacyLossDistribution:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_gaussian_mechanism(self.noise_multiplier, sensitivity=1.0, pessimistic_estimate=True,
                                           value_discretization_interval=interval)


@dataclass(frozen=True)
class ZCDPEvent(PrivacyEvent):
    """ρ-zero-concentrated DP (Bun & Steinke 2016, Def. 1.1)."""

    kind: ClassVar[str] = "zcdp"
    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _check(self.rho, "rho", positive=True))

    def to_dp_event(self) -> DpEvent:
        import dp_accounting

        return dp_accounting.ZCDpEvent(self.rho)


@dataclass(frozen=True)
class RandomizedResponseEvent(PrivacyEvent):
    """k-ary randomised response: keep the input with probability ``1 − p``, else a uniform one of ``k`` buckets.

    >>> round(RandomizedResponseEvent(noise_parameter=0.5, num_buckets=4).pure_epsilon, 4)  # ln(1 + 4*0.5/0.5)
    1.6094
    """

    kind: ClassVar[str] = "randomized_response"
    noise_parameter: float
    num_buckets: int

    def __post_init__(self) -> None:
        p = _check(self.noise_parameter, "noise_parameter", positive=True)
        if p > 1:
            raise ParameterError(f"privacy event: noise_parameter must be in (0, 1], got {self.noise_parameter!r}")
        if isinstance(self.num_buckets, bool) or not isinstance(self.num_buckets, int) or self.num_buckets < 2:
            raise ParameterError(f"privacy event: num_buckets must be an integer >= 2, got {self.num_buckets!r}")
        object.__setattr__(self, "noise_parameter", p)

    @property
    def pure_epsilon(self) -> float:
        p, k = self.noise_parameter, self.num_buckets
        return math.log1p(k * (1.0 - p) / p)

    def to_dp_event(self) -> DpEvent:
        import dp_accounting

        return dp_accounting.RandomizedResponseDpEvent(self.noise_parameter, self.num_buckets)

    def to_pld(self, interval: float) -> PrivacyLossDistribution:
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_randomized_response(self.noise_parameter, self.num_buckets, pessimistic_estimate=True,
                                            value_discretization_interval=interval)


@dataclass(frozen=True)
class DiscreteLaplaceEvent(PrivacyEvent):
    """The discrete Laplace (geometric) mechanism, ``P(z) ∝ exp(−parameter |z|)``, for an L1 ``sensitivity``.

    Pure ``ε = parameter × sensitivity`` (of integer-valued queries). Its loss distribution is taken as that of
    pure ε-DP (which dominates every ε-DP mechanism), valid for any number of coordinates.

    >>> DiscreteLaplaceEvent(parameter=0.5, sensitivity=4).pure_epsilon
    2.0
    """

    kind: ClassVar[str] = "discrete_laplace"
    parameter: float
    sensitivity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameter", _check(self.parameter, "parameter", positive=True))
        object.__setattr__(self, "sensitivity", _check(self.sensitivity, "sensitivity", positive=True))

    @property
    def pure_epsilon(self) -> float:
        return self.parameter * self.sensitivity


@dataclass(frozen=True)
class SelfComposedEvent(PrivacyEvent):
    """``event`` run ``count`` times on the same unit (adaptive composition)."""

    kind: ClassVar[str] = "self_composed"
    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ParameterError(f"privacy event: count must be a positive integer, got {self.count!r}")

    def to_dp_event(self) -> DpEvent:
        import dp_accounting

        return dp_accounting.SelfComposedDpEvent(self.event.to_dp_event(), self.count)

    def to_pld(self, interval: float) -> PrivacyLossDistribution | None:
        one = self.event.to_pld(interval)
        return None if one is None else one.self_compose(self.count)


@dataclass(frozen=True)
class ComposedEvent(PrivacyEvent):
    """Each of ``events`` once, on the same unit."""

    kind: ClassVar[str] = "composed"
    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        if not self.events:
            raise ParameterError("privacy event: a composition needs at least one event")

    def to_dp_event(self) -> DpEvent:
        import dp_accounting

        return dp_accounting.ComposedDpEvent([e.to_dp_event() for e in self.events])

    def to_pld(self, interval: float) -> PrivacyLossDistribution | None:
        out = None
        for e in self.events:
            one = e.to_pld(interval)
            if one is None:
                return None
            out = one if out is None else out.compose(one)
        return out


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


def _kinds() -> dict[str, type[PrivacyEvent]]:
    out: dict[str, type[PrivacyEvent]] = {}
    todo = list(PrivacyEvent.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.kind:
            out.setdefault(cls.kind, cls)
    return out


#: every event kind, read from the subclasses of :class:`PrivacyEvent` (a new kind is one class)
EVENT_KINDS: dict[str, type[PrivacyEvent]] = _kinds()
_KINDS = EVENT_KINDS


def event_from_dict(data: object) -> PrivacyEvent:
    """The event of a JSON form (:meth:`PrivacyEvent.to_dict`); a one-line error for anything else.

    >>> event_from_dict({"kind": "pure", "epsilon": 1.5})
    PureEvent(epsilon=1.5)
    >>> event_from_dict({"kind": "laplace"})
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: unknown privacy event kind 'laplace' (known: approx, composed, discrete_laplace, gaussian, pure, randomized_response, self_composed, zcdp)
    """
    if not isinstance(data, Mapping):
        raise ParameterError(f"a privacy event must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    kinds = _kinds()
    cls = kinds.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ParameterError(f"unknown privacy event kind {kind!r} (known: {', '.join(sorted(kinds))})")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        if cls is SelfComposedEvent:
            return SelfComposedEvent(event=event_from_dict(fields["event"]), count=fields["count"])
        if cls is ComposedEvent:
            return ComposedEvent(events=tuple(event_from_dict(e) for e in fields["events"]))
        return cls(**fields)
    except (KeyError, TypeError) as exc:
        raise ParameterError(f"privacy event {kind!r}: malformed fields {sorted(fields)} ({exc})") from None
