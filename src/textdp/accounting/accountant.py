"""The one accountant: composes releases from their events, basic and tight (Google's ``dp-accounting``).

Every release of a unit (a document, a user) is a :class:`Charge`: its :mod:`event <textdp.guarantees.events>`
(what ran) and the (ε, δ) its guarantee states. :func:`compose` returns both

* the **basic** composition (Dwork et al. 2006, Thm. 3.16 of Dwork & Roth 2014): ``(Σ εᵢ, Σ δᵢ)``, valid for
  any events; and
* the **tight** composition at the *same* total δ, through ``dp_accounting`` (Google's accounting library, not
  formulas written here): its privacy-loss-distribution accountant (Koskela et al. 2020; Doroshenko et al.
  2022; pessimistic discretisation, so an upper bound) for Gaussian, pure and (ε, δ) events, and its Rényi
  accountant (Mironov 2017) for Gaussian, zCDP and pure events (pure ε-DP is (ε²/2)-zCDP, Bun & Steinke 2016,
  Prop. 3.3). The smallest of the bounds that apply is the tight ε; each one is a valid upper bound, so the
  minimum is too.

``Composition.enforced`` is what a :class:`~textdp.accounting.ledger.PrivacyLedger` compares with a budget:
the tight bound (never larger than basic, at the same δ). With pure events only and no δ to spend, tight equals
basic (pure composition is exactly additive at δ = 0, Kairouz et al. 2015, Thm. 3.5).

>>> from textdp.guarantees.events import GaussianEvent
>>> c = compose([Charge(GaussianEvent(3.0), 1.41, 1e-5)] * 2)
>>> c.basic
(2.82, 2e-05)
>>> c.method, round(c.tight[0], 2) < 2.82
('pld', True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MissingDependencyError, ParameterError, require
from ..guarantees.events import (
    ApproxEvent,
    Charge,
    ComposedEvent,
    GaussianEvent,
    PrivacyEvent,
    PureEvent,
    SelfComposedEvent,
    ZCDPEvent,
)

__all__ = ["Charge", "Composition", "compose"]

#: above this basic ε a tight bound is not worth its cost (and every bound is vacuous)
_TIGHT_LIMIT = 200.0


@dataclass(frozen=True)
class Composition:
    """The composed bound of some charges: basic always, tight where ``dp_accounting`` can say more."""

    basic: tuple[float, float]
    tight: tuple[float, float]
    method: str  # "basic" (no tighter route), "pld" or "rdp" (which one gave ``tight``)
    note: str = ""  # why no tighter route was tried (e.g. the [accounting] extra is missing)

    @property
    def enforced(self) -> tuple[float, float]:
        """The bound a budget is checked against: the tight one (≤ basic at the same δ)."""
        return self.tight


class _Unsupported(Exception):
    """An event the route cannot express (that route is skipped)."""


def _pld(event: PrivacyEvent, interval: float) -> Any:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    if isinstance(event, GaussianEvent):
        return pld.from_gaussian_mechanism(event.noise_multiplier, sensitivity=1.0, pessimistic_estimate=True,
                                           value_discretization_interval=interval)
    if isinstance(event, PureEvent | ApproxEvent):
        delta = event.delta if isinstance(event, ApproxEvent) else 0.0
        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(event.epsilon, delta),
                                           value_discretization_interval=interval)
    if isinstance(event, SelfComposedEvent):
        return _pld(event.event, interval).self_compose(event.count)
    if isinstance(event, ComposedEvent):
        out = _pld(event.events[0], interval)
        for e in event.events[1:]:
            out = out.compose(_pld(e, interval))
        return out
    raise _Unsupported(event.kind)


def _rdp_event(event: PrivacyEvent) -> Any:
    import dp_accounting as dpa

    if isinstance(event, GaussianEvent):
        return dpa.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, ZCDPEvent):
        return dpa.ZCDpEvent(event.rho)
    if isinstance(event, PureEvent):
        return dpa.ZCDpEvent(event.epsilon ** 2 / 2)  # Bun & Steinke 2016, Prop. 3.3
    if isinstance(event, SelfComposedEvent):
        return dpa.SelfComposedDpEvent(_rdp_event(event.event), event.count)
    if isinstance(event, ComposedEvent):
        return dpa.ComposedDpEvent([_rdp_event(e) for e in event.events])
    raise _Unsupported(event.kind)


def _tight_routes(events: Sequence[PrivacyEvent], delta: float, basic_eps: float) -> dict[str, float]:
    require("dp_accounting", "accounting")
    from dp_accounting import rdp

    routes: dict[str, float] = {}
    interval = max(1e-4, basic_eps / 2e4)  # coarser for large ε: still pessimistic, bounded memory
    try:
        whole = _pld(ComposedEvent(tuple(events)), interval)
        routes["pld"] = float(whole.get_epsilon_for_delta(delta))
    except _Unsupported:
        pass
    try:
        acc = rdp.RdpAccountant()
        acc.compose(_rdp_event(ComposedEvent(tuple(events))))
        routes["rdp"] = float(acc.get_epsilon(delta))
    except _Unsupported:
        pass
    return {k: v for k, v in routes.items() if math.isfinite(v)}


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
        if not isinstance(c.event, PrivacyEvent):
            raise ParameterError(f"a charge needs a privacy event, got {type(c.event).__name__}")
    eps = math.fsum(float(c.epsilon) for c in items)
    delta = math.fsum(float(c.delta) for c in items)
    basic = (eps, delta)
    if delta <= 0 or not (0 < eps <= _TIGHT_LIMIT) or delta >= 1:
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
