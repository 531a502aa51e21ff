"""The one accountant: composes releases from their events, basic and tight (Google's ``dp-accounting``).

Every release of a unit (a document, a user) is a :class:`Charge`: its :mod:`event <textdp.guarantees.events>`
(what ran) and the (ε, δ) its guarantee states. :func:`compose` returns both

* the **basic** composition (Dwork et al. 2006, Thm. 3.16 of Dwork & Roth 2014): ``(Σ εᵢ, Σ δᵢ)``, valid for
  any events; and
* the **tight** composition at the *same* total δ, through ``dp_accounting`` (Google's accounting library, not
  formulas written here): its privacy-loss-distribution accountant (Koskela et al. 2020; Doroshenko et al.
  2022; pessimistic discretisation, so an upper bound) for Gaussian, pure and (ε, δ) events, and its Rényi
  accountant (Mironov 2017) for Gaussian, zCDP and pure events (pure ε-DP is (ε²/2)-zCDP, Bun & Steinke 2016,
  Prop. 3.3). Each event converts itself (:meth:`~textdp.guarantees.events.PrivacyEvent.to_dp_event`,
  :meth:`~textdp.guarantees.events.PrivacyEvent.to_pld`) and a route runs when ``dp_accounting`` ``supports()``
  the result. The smallest of the bounds that apply is the tight ε; each one is a valid upper bound, so the
  minimum is too. An event no route knows is an error (:func:`check_known`), never a skip.

``Composition.enforced`` is what a :class:`~textdp.accounting.ledger.PrivacyLedger` compares with a budget:
the tight bound (never larger than basic, at the same δ). With pure events only (total δ = 0) the tight bound is
the sum, method ``pure`` (pure composition is exactly additive at δ = 0, Kairouz et al. 2015, Thm. 3.5).
:func:`check_charge` refuses a charge whose event does not give the (ε, δ) it states (the ledger calls it).

>>> from textdp.guarantees.events import GaussianEvent
>>> c = compose([Charge(GaussianEvent(3.0), 1.41, 1e-5)] * 2)
>>> c.basic
(2.82, 2e-05)
>>> c.method, round(c.tight[0], 2) < 2.82
('pld', True)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import MissingDependencyError, ParameterError, require
from ..guarantees.events import ApproxEvent, Charge, ComposedEvent, PrivacyEvent, SelfComposedEvent

__all__ = ["CHARGE_TOLERANCE", "PURE_NOTE", "Charge", "Composition", "check_charge", "check_known", "compose",
           "event_epsilon"]

#: why a composition of pure releases is their sum (method ``pure``)
PURE_NOTE = ("pure releases: the sum of their epsilons is the tight composition at delta = 0 "
             "(Kairouz, Oh & Viswanath 2015, Thm. 3.5)")

#: above this basic ε a tight bound is not worth its cost (and every bound is vacuous)
_TIGHT_LIMIT = 200.0


@dataclass(frozen=True)
class Composition:
    """The composed bound of some charges: basic always, tight where ``dp_accounting`` can say more."""

    basic: tuple[float, float]
    tight: tuple[float, float]
    method: str  # "pure" (all pure: the sum is tight), "basic" (no tighter route), "pld" or "rdp" (which gave ``tight``)
    note: str = ""  # why no tighter route was tried (e.g. the [accounting] extra is missing)

    @property
    def enforced(self) -> tuple[float, float]:
        """The bound a budget is checked against: the tight one (≤ basic at the same δ)."""
        return self.tight


def check_known(event: PrivacyEvent) -> PrivacyEvent:
    """``event`` if the accountant knows how to compose it; a one-line error otherwise (never a silent skip).

    An event is known when it is pure (``pure_epsilon``), converts to a ``dp_accounting`` event, or has its
    own loss distribution (``to_pld``); :class:`~textdp.guarantees.events.SelfComposedEvent` and
    :class:`~textdp.guarantees.events.ComposedEvent` when every part is.
    """
    if not isinstance(event, PrivacyEvent):
        raise ParameterError(f"a charge needs a privacy event, got {type(event).__name__}")
    if isinstance(event, SelfComposedEvent):
        check_known(event.event)
    elif isinstance(event, ComposedEvent):
        for e in event.events:
            check_known(e)
    elif event.pure_epsilon is None and type(event).to_pld is PrivacyEvent.to_pld and \
            type(event).to_dp_event is PrivacyEvent.to_dp_event:
        raise ParameterError(f"privacy event {type(event).__name__} (kind {event.kind!r}) converts to no accountant: "
                             "give it to_dp_event() or to_pld() (textdp.guarantees.events)")
    return event


def _tight_routes(events: Sequence[PrivacyEvent], delta: float, basic_eps: float) -> dict[str, float]:
    """The ε at ``delta`` of each ``dp_accounting`` route that supports the composition of ``events``."""
    require("dp_accounting", "accounting")
    from dp_accounting import rdp

    routes: dict[str, float] = {}
    whole = ComposedEvent(tuple(events))
    interval = max(1e-4, basic_eps / 2e4)  # coarser for large ε: still pessimistic, bounded memory
    pld = whole.to_pld(interval)  # None when an event has no loss distribution (zCDP)
    if pld is not None:
        routes["pld"] = float(pld.get_epsilon_for_delta(delta))
    acc = rdp.RdpAccountant()
    dp_event = whole.to_dp_event()
    if acc.supports(dp_event):  # not when an event has no Rényi form ((epsilon, delta))
        acc.compose(dp_event)
        routes["rdp"] = float(acc.get_epsilon(delta))
    return {k: v for k, v in routes.items() if math.isfinite(v)}


@functools.lru_cache(maxsize=4096)
def event_epsilon(event: PrivacyEvent, delta: float, scale: float = 1.0) -> float:
    """The ε that ``event`` gives at ``delta`` (tightest ``dp_accounting`` route; ``inf`` when none gives one).

    Pure events give their ε exactly at any δ, an (ε, δ) event its ε when ``delta`` is at least its δ;
    ``scale`` (about the expected ε) only sets the PLD's discretisation.

    >>> from textdp.guarantees.events import GaussianEvent
    >>> round(event_epsilon(GaussianEvent(50.0), 1e-5), 3)  # a Gaussian this wide: far below epsilon = 2
    0.059
    """
    pure = check_known(event).pure_epsilon
    if pure is not None:
        return float(pure)
    if isinstance(event, ApproxEvent):
        return event.epsilon if delta >= event.delta * (1 - 1e-9) else math.inf
    if not 0 < delta < 1:
        return math.inf
    routes = _tight_routes([event], delta, max(scale, 1e-3))
    return min(routes.values(), default=math.inf)


#: how far an event's ε may lie from the stated one: dp-accounting's Rényi conversion of zCDP is up to 4 %
#: above the CKS20 conversion the topics mechanisms calibrate with (measured at epsilon = 0.1, delta = 1e-6)
CHARGE_TOLERANCE = 0.05


def check_charge(charge: Charge) -> Charge:
    """``charge`` if its event gives the (ε, δ) it states; a one-line :class:`ParameterError` otherwise.

    The stated numbers and the event must agree: an event *less* private than stated means the statement
    claims too much; an event *more* private than stated would let the tight composition charge less than
    the guarantee states (20 charges stating (2, 1e-5) with ``GaussianEvent(50)`` would compose to 0.22).
    A repeated event (``SelfComposedEvent``, ``count`` units) is checked per unit; a composition of different
    events must not compose to more than stated. Within :data:`CHARGE_TOLERANCE` (relative).

    >>> from textdp.guarantees.events import GaussianEvent, PureEvent
    >>> check_charge(Charge(PureEvent(2.0), 2.0)).epsilon
    2.0
    >>> check_charge(Charge(GaussianEvent(50.0), 2.0, 1e-5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: a charge states (epsilon=2, delta=1e-05) but its event (gaussian) gives epsilon=0.05...
    """
    event, eps, delta = check_known(charge.event), float(charge.epsilon), float(charge.delta)
    while isinstance(event, SelfComposedEvent):
        eps, delta, event = eps / event.count, delta / event.count, event.event
    got = event_epsilon(event, float(f"{delta:.12g}"), max(eps, 1e-3))
    slack = CHARGE_TOLERANCE * eps + 1e-9
    low_ok = isinstance(event, ComposedEvent) or got >= eps - slack
    if got <= eps + slack and low_ok:
        return charge
    how = "less private than stated" if got > eps else "more private than stated, so the accountant would charge less"
    raise ParameterError(f"a charge states (epsilon={eps:g}, delta={delta:g}) but its event ({event.kind}) gives "
                         f"epsilon={got:.4g} at that delta: the event is {how}; refusing to record it (build the "
                         "charge with Guarantee.charge, whose event and numbers come from one calibration)")


def compose(charges: Iterable[Charge]) -> Composition:
    """Compose ``charges`` (releases on one unit): basic ``(Σε, Σδ)`` and the tight ε at the same total δ.

    Parameters
    ----------
    charges
        One :class:`Charge` per release. An empty sequence composes to ``(0, 0)``.

    Returns
    -------
    Composition
        ``basic``, ``tight`` (``tight[1] == basic[1]``, ``tight[0] <= basic[0]``) and the ``method`` that gave
        ``tight``.
    """
    items = list(charges)
    for c in items:
        check_known(c.event)
    eps = math.fsum(float(c.epsilon) for c in items)
    delta = math.fsum(float(c.delta) for c in items)
    basic = (eps, delta)
    if delta <= 0:
        return Composition(basic=basic, tight=basic, method="pure", note=PURE_NOTE)
    if not (0 < eps <= _TIGHT_LIMIT) or delta >= 1:
        return Composition(basic=basic, tight=basic, method="basic")
    try:
        routes = _tight_routes([c.event for c in items], delta, eps)
    except MissingDependencyError as exc:
        return Composition(basic=basic, tight=basic, method="basic", note=str(exc))
    if not routes:
        return Composition(basic=basic, tight=basic, method="basic")
    method = min(routes, key=lambda k: routes[k])
    if routes[method] >= eps:
        return Composition(basic=basic, tight=basic, method="basic")
    return Composition(basic=basic, tight=(routes[method], delta), method=method)
