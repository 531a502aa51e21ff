"""The one guarantee type: a frozen statement of what a release spent (a leaf module).

Every mechanism of every family (document, word, sentence, topics) describes its release
with an instance of :class:`Guarantee` or of a subclass that adds the family's public
parameters (bag size, vocabulary, model case, matrix shape, ...) and derives the texts
from them. In the style of Google's ``dp_accounting`` events and OpenDP's privacy maps,
the object is immutable and carries everything a reader of the release needs:

``mechanism``
    the registered name (:func:`textdp.mechanisms.get`);
``epsilon``, ``delta``
    the bound for one ``unit`` (``delta = 0`` for pure DP); for metric DP, ε per unit of
    distance as the family's statement says;
``unit``
    what two neighbouring inputs differ in: ``word``, ``sentence``, ``document``, ``user``;
``reference``
    paper, theorem or equation the bound comes from;
``parameters``
    the public parameters the bound depends on (bag size, vocabulary, decoder, ...);
``not_covered``
    what the bound does *not* protect (lengths, ids, what a seed reveals, ...);
``composition``
    how the bound composes over units (a document of T words, a line of m segments, ...);
``statement``
    the whole guarantee in words (the claim, ``composition`` and ``not_covered``);
``seeded``
    the noise came from a user seed (an experiment): anyone who knows it can undo the noise;
``event``
    what ran, as a structured :mod:`privacy event <textdp.guarantees.events>` (Gaussian with its noise
    multiplier, zCDP with ρ, pure ε, randomised response, ...) that the accountant
    (:mod:`textdp.accounting.accountant`) composes more tightly than the numbers; by default the pure or
    (ε, δ) event of :meth:`charged`. It must give exactly what :meth:`charged` states (the ledger recomputes
    it and refuses an event that does not);
``empty``
    what happened to an input unit with nothing to privatize (no in-vocabulary word):
    ``error`` (the run stops before any noise), ``skip`` (no record) or ``empty`` (an empty
    record). With ``skip`` and ``empty``, *which* units these were is public, and both
    ``not_covered`` and ``statement`` say so.

Two JSON forms, one type (``schemas/record.schema.json``, definition ``guarantee``):
:meth:`Guarantee.to_dict` (everything, written once to ``<output>.settings.json``) and
:meth:`Guarantee.to_dict` with ``compact=True`` (no ``statement``, no ``reference``: what
every release record carries, so the long text is not repeated on every line).

A family subclass declares its own fields (``kw_only``) and overrides :meth:`_derive`,
which returns the texts and parameters computed from them; fields given explicitly win.

**The charge is the guarantee.** :meth:`charged` is the one place a guarantee says what one ``unit`` costs a
person, the (ε, δ) a ledger charges per unit (:meth:`charge`): ``(epsilon, delta)`` by default, ``epsilon * N``
per unit of distance between documents for Earth Mover's privacy (:class:`~textdp.guarantees.earth_movers.
EarthMoversGuarantee`). Every statement ends with it ("Ledger charge: epsilon=..., delta=... per unit"), so the
number a ledger charges is the one the text states (``tests/test_calibration.py`` checks this for every
registered mechanism).

>>> g = Guarantee(mechanism="toy", epsilon=1.0, unit="word", statement="1-DP per word.",
...               not_covered="the length", composition="basic composition over words")
>>> g.to_dict(compact=True)["unit"], "statement" in g.to_dict(compact=True), g.to_dict()["statement"]
('word', False, '1-DP per word. Ledger charge: epsilon=1, delta=0 per word.')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Self

from .events import ApproxEvent, Charge, PrivacyEvent, PureEvent, SelfComposedEvent, format_charge

__all__ = ["COMPACT_KEYS", "EMPTY_POLICIES", "GUARANTEE_KEYS", "SEEDED_NOTE", "Guarantee", "as_parameters",
           "empty_note"]

#: the keys of every guarantee's compact JSON form (the ``guarantee`` object of a record)
COMPACT_KEYS = ("mechanism", "epsilon", "delta", "unit", "parameters", "not_covered", "composition", "seeded",
                "empty")
#: the keys of the full JSON form (settings files): the compact keys plus the reference, statement and event
GUARANTEE_KEYS = (*COMPACT_KEYS, "reference", "statement", "event")

SEEDED_NOTE = "Seeded run: anyone who knows the seed can undo the noise (for experiments only)."

#: what to do with an input unit that has nothing to privatize (the ``empty=`` option, CLI ``--empty``)
EMPTY_POLICIES = ("error", "skip", "empty")


def empty_note(policy: str) -> str:
    """The not-covered sentence of an ``empty`` policy (``""`` for ``error``: nothing is released then).

    >>> empty_note("skip")[:60]
    'which input units had no in-vocabulary word (policy skip: th'
    """
    if policy == "skip":
        return "which input units had no in-vocabulary word (policy skip: they have no record, so their ids are missing)"
    if policy == "empty":
        return "which input units had no in-vocabulary word (policy empty: their records are empty)"
    return ""


def as_parameters(params: Mapping[str, object] | None) -> tuple[tuple[str, object], ...]:
    """Public parameters as a hashable tuple of ``(name, value)`` pairs (the field's type).

    >>> as_parameters({"size": 3, "bag": "truncate"})
    (('size', 3), ('bag', 'truncate'))
    """
    return tuple((params or {}).items())


@dataclass(frozen=True, kw_only=True)
class Guarantee:
    """What one release guarantees (see the module docstring for every field)."""

    mechanism: str
    epsilon: float
    delta: float = 0.0
    unit: str = "document"
    reference: str = ""
    parameters: tuple[tuple[str, object], ...] = ()
    not_covered: str = ""
    composition: str = ""
    statement: str = ""
    seeded: bool = False
    empty: str = "error"
    event: PrivacyEvent | None = None
    # set by __post_init__ for evolve(): not parameters of the guarantee
    _derived_keys: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    _plain: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = self._derive()
        given = {key for key in derived if getattr(self, key)}
        for key, value in derived.items():
            if key not in given:
                object.__setattr__(self, key, value)
        # what evolve() needs to rebuild the texts: the derived keys, and the texts before the notes below
        object.__setattr__(self, "_derived_keys", frozenset(derived) - given)
        object.__setattr__(self, "_plain", {"statement": self.statement, "not_covered": self.not_covered})
        charged_eps, charged_delta = self.charged()
        if self.event is None:
            object.__setattr__(self, "event", PureEvent(charged_eps) if not charged_delta
                               else ApproxEvent(charged_eps, charged_delta))
        note = empty_note(self.empty)
        if note and note not in self.not_covered:
            object.__setattr__(self, "not_covered", f"{self.not_covered.rstrip('.')}; {note}." if self.not_covered
                               else f"{note}.")
            if self.statement:
                object.__setattr__(self, "statement", f"{self.statement} Also not covered: {note}.")
        if not self.statement:
            text = " ".join(t for t in (self.composition, f"Not covered: {self.not_covered}" if self.not_covered
                                        else "") if t)
            object.__setattr__(self, "statement", text)
        charge_text = format_charge(charged_eps, charged_delta, self.unit, self.charge_note())
        if charge_text not in self.statement:
            object.__setattr__(self, "statement", f"{self.statement} {charge_text}".strip())
        if self.seeded and SEEDED_NOTE not in self.statement:
            object.__setattr__(self, "statement", f"{self.statement} {SEEDED_NOTE}".strip())

    def _derive(self) -> dict[str, object]:
        """Texts and parameters computed from a subclass's own fields (none here)."""
        return {}

    def charged(self) -> tuple[float, float]:
        """What one ``unit`` costs a person, as a ledger charges it: ``(epsilon, delta)`` unless a family says more.

        The one place per mechanism where the charge is written; :meth:`charge`, the default event and the
        statement's last sentence read it.

        >>> Guarantee(mechanism="toy", epsilon=1.5, unit="word").charged()
        (1.5, 0.0)
        """
        return float(self.epsilon), float(self.delta)

    def charge_note(self) -> str:
        """What the per-unit charge is measured in, when it is not plain (ε, δ) per unit (none here)."""
        return ""

    def evolve(self, **changes: object) -> Self:
        """A copy with some fields changed and the derived texts recomputed (use this, not ``dataclasses.replace``).

        >>> g = Guarantee(mechanism="toy", epsilon=1.0, statement="1-DP.", not_covered="the length")
        >>> h = g.evolve(seeded=True, empty="skip")
        >>> h.seeded, "Seeded run" in h.statement, "policy skip" in h.not_covered
        (True, True, True)
        >>> "Seeded run" in h.evolve(seeded=False).statement
        False
        """
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(self._plain)
        for key in self._derived_keys:
            kwargs[key] = () if key == "parameters" else ""
        kwargs.update(changes)
        return type(self)(**kwargs)

    def charge(self, units: int = 1) -> Charge:
        """What ``units`` releases under this guarantee cost one person: its event composed ``units`` times.

        The stated (ε, δ) are the basic composition ``units ×`` :meth:`charged`; the accountant
        (:func:`textdp.accounting.accountant.compose`) may bound the event more tightly.

        >>> Guarantee(mechanism="toy", epsilon=1.5).charge(2)
        Charge(event=SelfComposedEvent(event=PureEvent(epsilon=1.5), count=2), epsilon=3.0, delta=0.0)
        """
        n = int(units)
        if n < 0:
            raise ValueError(f"units must be >= 0, got {units!r}")
        if n == 0:
            return Charge(PureEvent(0.0), 0.0, 0.0)
        assert self.event is not None  # set by __post_init__
        eps, delta = self.charged()
        return Charge(self.event if n == 1 else SelfComposedEvent(self.event, n), n * eps, n * delta)

    @property
    def params(self) -> dict[str, object]:
        """The public parameters as a dict."""
        return dict(self.parameters)

    def to_dict(self, *, compact: bool = False) -> dict[str, object]:
        """JSON form: :data:`GUARANTEE_KEYS`, or :data:`COMPACT_KEYS` with ``compact=True`` (records)."""
        out: dict[str, object] = {
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "unit": self.unit,
            "parameters": dict(self.parameters),
            "not_covered": self.not_covered,
            "composition": self.composition,
            "seeded": bool(self.seeded),
            "empty": self.empty,
        }
        if not compact:
            out["reference"] = self.reference
            out["statement"] = self.statement
            out["event"] = self.event.to_dict() if self.event is not None else None
        return out
