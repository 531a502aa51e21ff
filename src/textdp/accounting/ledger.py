"""A privacy ledger: every release of every document, across runs, and a budget that refuses overspending.

In the style of Google's ``dp_accounting`` (a release is an immutable *event*; the spend
is a function of the events), :class:`PrivacyLedger` keeps one :class:`LedgerEvent` per
document id and release in an append-only JSONL file:

* **immutable**: events are frozen dataclasses; the file is only ever extended;
* **atomic**: each append writes the whole new file beside the old one and renames it
  over (:func:`textdp.io.atomic_writer`), under an exclusive lock (``FILE.lock``), so a
  crash or a concurrent run never leaves half a line nor loses an event;
* **verified on read**: every line carries ``prev`` (the hash of the line before) and
  ``hash = SHA-256(prev ‖ canonical JSON of the event)``; a line edited, removed from the
  middle, reordered or inserted breaks the chain and the ledger is refused (it is not
  repaired: a ledger nobody can trust cannot say what was spent). A hash chain does not
  stop someone who rewrites the whole file and recomputes every hash, nor the removal of
  the *last* lines: keep a copy of the head hash (``textdp ledger show`` prints it) where
  only you can change it;
* **budget**: :meth:`PrivacyLedger.charge` refuses a release if any document would exceed
  ``budget`` (ε, summed over its releases: basic sequential composition; δ summed and shown)
  and then records nothing. Charges are written *before* the output, so a crash after the
  charge over-counts, never under-counts.

The ledger holds document ids and the ε spent on each: **private-side state**. It is
written with mode 0600, refused when others may read or write it, and must never be
published beside a release (a document id next to its spend tells which documents were
released how often). The refusal itself depends on how many sentences each document
has when a rewrite's unit is the sentence; that count is not covered by the per-sentence
guarantees anyway (see their statements).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ParameterError
from ..io import atomic_writer

__all__ = ["GENESIS", "LedgerEvent", "PrivacyLedger", "Spend"]

#: ``prev`` of the first line.
GENESIS = "0" * 64
_FORMAT = "textdp-ledger/1"


@dataclass(frozen=True)
class LedgerEvent:
    """One release of one document: what was spent on it, by which mechanism, in which unit.

    >>> LedgerEvent("doc-1", "dp-mlm", 12.5, 0.0, "sentence", "rewrite", "2026-01-01T00:00:00Z").epsilon
    12.5
    """

    document: str
    mechanism: str
    epsilon: float
    delta: float
    unit: str
    command: str
    time: str

    def __post_init__(self) -> None:
        if not isinstance(self.document, str) or not self.document:
            raise ParameterError("a ledger event needs a non-empty document id")
        for name in ("epsilon", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ParameterError(f"a ledger event's {name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class Spend:
    """What was spent on one document: ``releases``, summed ``epsilon`` and ``delta``."""

    releases: int
    epsilon: float
    delta: float


def _digest(prev: str, event: Mapping[str, Any]) -> str:
    body = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256((prev + body).encode("ascii")).hexdigest()


class PrivacyLedger:
    """The ledger file ``path`` (created on the first charge).

    >>> import tempfile, pathlib
    >>> led = PrivacyLedger(pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")
    >>> _ = led.charge({"a": (2.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    >>> _ = led.charge({"a": (2.0, 0.0), "b": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    >>> led.spent()["a"]
    Spend(releases=2, epsilon=4.0, delta=0.0)
    >>> led.charge({"a": (2.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the privacy budget 5 would be exceeded for 1 document(s) (first: 'a' has spent 4 and this release costs 2); nothing was released or recorded
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # reading ---------------------------------------------------------------------------------
    def _check_file(self) -> None:
        st = self.path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ParameterError(f"ledger {self.path} is not a regular file")
        if st.st_uid != os.getuid():
            raise ParameterError(f"ledger {self.path} is not owned by you: refusing to trust it")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ParameterError(f"ledger {self.path} is readable or writable by others (mode "
                                 f"{stat.S_IMODE(st.st_mode):o}): it is private; run chmod 600 on it")

    def _lines(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        self._check_file()
        rows = []
        prev = GENESIS
        with open(self.path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    row = json.loads(line)
                    ok = (isinstance(row, dict) and row.get("format") == _FORMAT and row.get("prev") == prev
                          and isinstance(row.get("event"), dict) and row.get("hash") == _digest(prev, row["event"]))
                except (json.JSONDecodeError, TypeError, ValueError):
                    ok = False
                if not ok:
                    raise ParameterError(f"ledger {self.path} was modified: line {n} breaks its hash chain; refusing "
                                         "to use it (restore it from a copy you trust)")
                rows.append(row)
                prev = row["hash"]
        return rows

    def events(self) -> list[LedgerEvent]:
        """Every recorded event, verified (:class:`~textdp.errors.ParameterError` if the chain is broken)."""
        try:
            return [LedgerEvent(**row["event"]) for row in self._lines()]
        except TypeError:
            raise ParameterError(f"ledger {self.path} holds an event of an unknown shape") from None

    def head(self) -> str:
        """The hash of the last line (``GENESIS`` for an empty ledger): keep a copy to detect truncation."""
        rows = self._lines()
        return rows[-1]["hash"] if rows else GENESIS

    def spent(self, events: Sequence[LedgerEvent] | None = None) -> dict[str, Spend]:
        """``{document id: Spend}`` summed over the events (basic composition)."""
        out: dict[str, Spend] = {}
        for e in self.events() if events is None else events:
            s = out.get(e.document, Spend(0, 0.0, 0.0))
            out[e.document] = Spend(s.releases + 1, s.epsilon + e.epsilon, s.delta + e.delta)
        return out

    # writing ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def charge(self, charges: Mapping[str, tuple[float, float]], *, mechanism: str, unit: str, budget: float | None,
               command: str = "rewrite") -> list[LedgerEvent]:
        """Record one release: ``{document id: (ε, δ)}``; refuse it whole if a document would exceed ``budget``.

        ``budget`` None records without a limit. Returns the new events.
        """
        if budget is not None and (not math.isfinite(float(budget)) or float(budget) <= 0):
            raise ParameterError(f"budget must be a finite number > 0, got {budget!r}")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        new = [LedgerEvent(str(doc), mechanism, float(e), float(d), unit, command, now) for doc, (e, d) in charges.items()]
        with self._locked():
            rows = self._lines()
            spent = self.spent([LedgerEvent(**r["event"]) for r in rows])
            if budget is not None:
                over = [(e.document, spent.get(e.document, Spend(0, 0.0, 0.0)).epsilon, e.epsilon) for e in new
                        if spent.get(e.document, Spend(0, 0.0, 0.0)).epsilon + e.epsilon > float(budget) * (1 + 1e-12)]
                if over:
                    doc, had, cost = over[0]
                    raise ParameterError(
                        f"the privacy budget {float(budget):g} would be exceeded for {len(over)} document(s) (first: "
                        f"{doc!r} has spent {had:.4g} and this release costs {cost:.4g}); nothing was released or "
                        "recorded")
            prev = rows[-1]["hash"] if rows else GENESIS
            with atomic_writer(self.path, overwrite=True, private=True) as fh:
                for r in rows:
                    fh.write(json.dumps(r, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n")
                for e in new:
                    body = e.to_dict()
                    h = _digest(prev, body)
                    fh.write(json.dumps({"format": _FORMAT, "prev": prev, "event": body, "hash": h}, sort_keys=True,
                                        ensure_ascii=True, allow_nan=False) + "\n")
                    prev = h
        return new
