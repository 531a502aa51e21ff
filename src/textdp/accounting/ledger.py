"""A privacy ledger: every release of every document, across runs, and a budget that refuses overspending.

In the style of Google's ``dp_accounting`` (a release is an immutable *event*; the spend
is a function of the events), :class:`PrivacyLedger` keeps one :class:`LedgerEvent` per
document id and release in an append-only JSONL file:

* **immutable**: events are frozen dataclasses; the file is only ever extended;
* **atomic**: each append writes the whole new file beside the old one and renames it
  over, under an exclusive lock (``FILE.lock``), so a crash or a concurrent run never
  leaves half a line nor loses an event;
* **verified on read**: every line carries ``prev`` (the hash of the line before) and
  ``hash = SHA-256(prev ‖ canonical JSON of the event)``; a line edited, removed from the
  middle, reordered or inserted breaks the chain and the ledger is refused (it is not
  repaired: a ledger nobody can trust cannot say what was spent);
* **anchored**: a hash chain alone does not stop the removal of the *last* lines, a
  deleted ledger or one replaced by an older copy. So every charge also records the
  ledger's head (its event count and last hash) in textdp's per-user STATE folder
  (``<state>/ledger-anchors/``, mode ``0700``, :func:`textdp._cache.state_dir`; never under
  the cache, so neither a cache wipe, a second ``TEXTDP_CACHE_DIR`` nor ``runs clean`` removes
  it), under a name keyed (HMAC with the state's own key) by the ledger's **identity**: a
  random id bound into its first line's hash (``prev`` of line 1, repeated as ``ledger``), so
  a moved or copied ledger is recognised wherever it is. A second record, keyed by the real
  path, says which ledger lives there (so a deleted ledger is noticed). A ledger with fewer
  events than its anchor, another event at the anchored position, missing while its anchor
  records events, or **holding events but no anchor** (the state was deleted, or a copy textdp
  never anchored) is refused (:class:`LedgerMismatchError`) until the user says otherwise
  (:meth:`PrivacyLedger.adopt`, ``textdp ledger adopt`` for an unanchored one;
  :meth:`PrivacyLedger.reset`, ``textdp ledger reset``, ``--new-ledger`` of ``obfuscate``, ``rewrite`` and
  ``topics``). A ledger that *extends* its anchor (more events, the anchored head in place: a run
  that stopped between its two writes) is accepted, since extra events only over-count. Anchors
  that older textdp versions kept in ``<cache>/ledgers/`` are still read (the next charge anchors it in the state);
* **its folder is private**: it is opened once with :func:`textdp._cache.open_private_dir`:
  every ancestor from ``/`` down owned by root or this user and not writable by others
  unless root-owned and sticky (like ``/tmp``; OpenSSH's ``StrictModes`` rule), the folder
  itself owned by this user and not writable by others, created ``0700`` when missing
  (whatever the umask). The ledger, its lock file, the anchor and every temporary file are
  then opened relative to the checked descriptors with ``O_NOFOLLOW``, so nobody else can
  delete, replace or pre-create any of them, nor swap a folder on the path after the check;
* **a lock that cannot hang**: waiting for the lock ends after ``lock_timeout`` seconds
  with a one-line error naming the lock file (and the process that holds it);
* **events, composed by the accountant**: each line records what ran (the release's
  :mod:`privacy event <textdp.guarantees.events>`: Gaussian with its noise multiplier, pure ε,
  ...) beside its stated (ε, δ). A document's spend is composed by
  :func:`textdp.accounting.accountant.compose`: the basic sum (Σε, Σδ) and the tight ε at the
  same total δ (dp-accounting's PLD/RDP accountants, e.g. two DP-BART releases compose as one
  Gaussian with σ/√2). Lines written before events existed count as pure or (ε, δ) events;
* **budget**: :meth:`PrivacyLedger.charge` refuses a release if any document's *tight* ε
  (never above the basic sum, at the same δ; :attr:`Composition.enforced
  <textdp.accounting.accountant.Composition.enforced>`) would exceed ``budget``, or its total δ the δ
  budget (``--delta-budget``, default :data:`~textdp._validation.DEFAULT_DELTA_BUDGET` = 1e-3), and then
  records nothing. A charge whose event does not give the (ε, δ) it states is refused
  (:func:`~textdp.accounting.accountant.check_charge`): the accountant composes the events, so an event
  more private than its statement would let a budget under-count. ``textdp ledger show`` prints both bounds and says which one is enforced.
  Charges are written *before* the output, so a crash after the charge over-counts, never
  under-counts.

The ledger holds document ids and the ε spent on each: **private-side state**. It is
written with mode 0600, refused when others may read or write it, and must never be
published beside a release (a document id next to its spend tells which documents were
released how often). The refusal itself depends on how many sentences each document
has when a rewrite's unit is the sentence; that count is not covered by the per-sentence
guarantees anyway (see their statements).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import secrets
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from .._cache import PrivateDir, cache_dir, keyed_digest, open_private_dir, state_dir, state_secret
from .._validation import DEFAULT_DELTA_BUDGET, BudgetLike, check_budget
from ..errors import ParameterError
from ..guarantees.events import ApproxEvent, Charge, EventForm, PrivacyEvent, PureEvent, event_from_dict
from .accountant import Composition, check_charge, compose

__all__ = ["GENESIS", "LedgerEvent", "LedgerEventForm", "LedgerMismatchError", "LedgerRow", "LedgerState",
           "PrivacyLedger", "Spend", "charge_ledger", "reset_message"]

#: ``prev`` of the first line.
GENESIS = "0" * 64
_FORMAT = "textdp-ledger/1"
_ANCHOR_FORMAT = "textdp-ledger-anchor/1"
#: the folder of the anchors, under :func:`textdp._cache.state_dir`
ANCHOR_DIR = "ledger-anchors"
#: where textdp before issue 39 kept them, under :func:`textdp._cache.cache_dir` (read, never written)
LEGACY_ANCHOR_DIR = "ledgers"
_FOLDER = "the ledger's folder"
_ANCHORS = "textdp's ledger anchors folder"


class LedgerMismatchError(ParameterError):
    """The ledger is not the one textdp last wrote (truncated, replaced or deleted): its anchor disagrees."""


class LedgerEventForm(TypedDict):
    """The JSON form of a :class:`LedgerEvent` (a ledger line's ``event``, hashed into the chain)."""

    document: str
    mechanism: str
    epsilon: float
    delta: float
    unit: str
    command: str
    time: str
    #: absent on lines written before events (and on charges given as plain (ε, δ) pairs)
    privacy_event: NotRequired[EventForm]


class LedgerRow(TypedDict):
    """One line of the ledger file: the event, chained to the line before by ``prev`` and ``hash``."""

    format: str
    prev: str
    event: LedgerEventForm
    hash: str
    #: the ledger's random identity, on its first line only (``prev`` of that line)
    ledger: NotRequired[str]


class _AnchorForm(TypedDict, total=False):
    """An anchor file: the head of a ledger (``events``, ``head``) by identity, or a path's ``ledger`` identity."""

    format: str
    events: int
    head: str
    ledger: str


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
    #: the JSON form of what ran (:mod:`textdp.guarantees.events`); ``None`` on lines written before events
    privacy_event: EventForm | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.document, str) or not self.document:
            raise ParameterError("a ledger event needs a non-empty document id")
        for name in ("epsilon", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ParameterError(f"a ledger event's {name} must be a finite number >= 0, got {v!r}")
        if self.privacy_event is not None:
            event_from_dict(self.privacy_event)  # a one-line error for a malformed event

    def to_dict(self) -> LedgerEventForm:
        """JSON form (without ``privacy_event`` when there is none: the lines of older ledgers hash the same)."""
        out: LedgerEventForm = {"document": self.document, "mechanism": self.mechanism, "epsilon": self.epsilon,
                                "delta": self.delta, "unit": self.unit, "command": self.command, "time": self.time}
        if self.privacy_event is not None:
            out["privacy_event"] = copy.deepcopy(self.privacy_event)  # the caller may change it; the event stays
        return out

    def charge(self) -> Charge:
        """The accountant's view: the recorded event (pure or (ε, δ) from the numbers on older lines)."""
        if self.privacy_event is not None:
            event: PrivacyEvent = event_from_dict(self.privacy_event)
        else:
            event = PureEvent(self.epsilon) if not self.delta else ApproxEvent(self.epsilon, self.delta)
        return Charge(event, self.epsilon, self.delta)


@dataclass(frozen=True)
class Spend:
    """What was spent on one document: ``releases``, summed ``epsilon`` and ``delta``."""

    releases: int
    epsilon: float
    delta: float


@dataclass(frozen=True)
class LedgerState:
    """A ledger's head and its anchor: ``events``/``head`` in the file, ``anchored_*`` in the private state.

    ``anchored_events`` is ``None`` when the ledger was never anchored.
    """

    events: int
    head: str
    anchored_events: int | None
    anchored_head: str | None


def _is_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def ledger_identity(rows: Sequence[LedgerRow]) -> str | None:
    """A ledger's identity: the random id of its first line, or (ledgers before ids) its first hash; None if empty."""
    if not rows:
        return None
    return str(rows[0]["ledger"]) if _is_id(rows[0].get("ledger")) else str(rows[0]["hash"])


def _digest(prev: str, event: Mapping[str, object]) -> str:
    body = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256((prev + body).encode("ascii")).hexdigest()


# files inside the private folder, through its descriptor --------------------------------------------------
def _read_at(dir_fd: int, name: str, shown: Path, *, what: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes and status of the regular file ``name`` in ``dir_fd`` (``None`` if missing), one ``O_NOFOLLOW`` open."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ParameterError(f"{what} {shown} is a symbolic link; give the real file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ParameterError(f"{what} {shown} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _check_private(st: os.stat_result, shown: Path, *, what: str) -> None:
    """A file of this user that nobody else can read or write."""
    if st.st_uid != os.geteuid():
        raise ParameterError(f"{what} {shown} is not owned by you: refusing to trust it")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ParameterError(f"{what} {shown} is readable or writable by others (mode "
                             f"{stat.S_IMODE(st.st_mode):o}): it is private; run chmod 600 on it")


def _event(doc: str, charge: Charge | tuple[float, float], mechanism: str, unit: str, command: str,
           now: str) -> LedgerEvent:
    if isinstance(charge, Charge):
        check_charge(charge)  # its event must give what it states: the accountant composes the event
        return LedgerEvent(doc, mechanism, charge.epsilon, charge.delta, unit, command, now, charge.event.to_dict())
    e, d = charge
    return LedgerEvent(doc, mechanism, float(e), float(d), unit, command, now)


@functools.lru_cache(maxsize=4096)
def _compose(charges: tuple[Charge, ...]) -> Composition:
    """:func:`~textdp.accounting.accountant.compose`, once per distinct history (documents often share one)."""
    return compose(charges)


class PrivacyLedger:
    """The ledger file ``path`` (created on the first charge, in a private folder: see the module notes).

    ``lock_timeout``: seconds to wait for another run's lock before a one-line error.

    >>> import tempfile, pathlib
    >>> led = PrivacyLedger(pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")
    >>> _ = led.charge({"a": (2.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    >>> _ = led.charge({"a": (2.0, 0.0), "b": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    >>> led.spent()["a"]
    Spend(releases=2, epsilon=4.0, delta=0.0)
    >>> led.charge({"a": (2.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=5.0)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the privacy budget 5 would be exceeded for 1 document(s) (first: 'a' has spent 4 and would reach 6 with this release, composed by the accountant); nothing was released or recorded
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 60.0) -> None:
        self.path = Path(path)
        if not self.path.name or self.path.name in (".", ".."):
            raise ParameterError(f"ledger {self.path} is not a file name")
        if not (isinstance(lock_timeout, (int, float)) and math.isfinite(lock_timeout) and lock_timeout >= 0):
            raise ParameterError(f"lock_timeout must be a finite number >= 0, got {lock_timeout!r}")
        self.lock_timeout = float(lock_timeout)

    # the folder, the lock and the anchor --------------------------------------------------------
    def _open_folder(self, *, create: bool) -> PrivateDir:
        """The ledger's folder, checked and opened once; refused (one line) if unsafe, unless the file in it
        plainly is no ledger: that is said instead (a README given by mistake gets that advice, not "chmod 700
        its folder"; in a safe folder the checked read says it before the file's mode)."""
        try:
            return open_private_dir(self.path.parent, what=_FOLDER, create=create)
        except ParameterError:
            self._refuse_not_a_ledger()
            raise

    def _refuse_not_a_ledger(self) -> None:
        """Raise "not a textdp ledger" for a file that plainly is not one. Only its first line is looked at, to
        choose the message (the folder was refused: nothing read here is used)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return  # missing, a link, unreadable: the checked read says what is wrong
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            head = os.read(fd, 1 << 16)
        except OSError:
            return
        finally:
            os.close(fd)
        first, newline, _ = head.partition(b"\n")
        if not first or not (newline or len(head) < 1 << 16):
            return  # empty, or a first line longer than what was read: left to the checked read
        try:
            first.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"ledger {self.path} is not valid UTF-8 (byte 0x{first[exc.start]:02x} at offset "
                                 f"{exc.start}): it is not a textdp ledger; give the file written by --ledger"
                                 ) from None
        if f'"format": "{_FORMAT}"'.encode() not in first:
            raise ParameterError(f"{self.path} is not a textdp ledger (its first line is not a ledger event); give "
                                 "the file written by --ledger")

    @contextlib.contextmanager
    def _session(self, *, create: bool, exclusive: bool) -> Iterator[PrivateDir]:
        """The ledger's folder, opened once after every ancestor was checked, under the ledger's lock."""
        with self._open_folder(create=create) as folder, \
                self._locked(folder.fd, exclusive=exclusive):
            yield folder

    @contextlib.contextmanager
    def _locked(self, dir_fd: int, *, exclusive: bool) -> Iterator[None]:
        name = self.path.name + ".lock"
        shown = self.path.with_name(name)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600,
                         dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ParameterError(f"the ledger's lock file {shown} is a symbolic link; remove it (textdp makes "
                                     "its own)") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise ParameterError(f"the ledger's lock file {shown} is not a regular file of yours; remove it "
                                     "(textdp makes its own)")
            deadline = time.monotonic() + self.lock_timeout
            pause = 0.02
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                        who = f"process {holder}" if holder.isdigit() else "another process"
                        raise ParameterError(
                            f"ledger {self.path} is in use: {who} has held its lock file {shown} for more than "
                            f"{self.lock_timeout:g} s; wait until that run ends (or stop it) and try again") from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.25)
            if exclusive:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _name(kind: str, ident: str) -> str:
        """An anchor file's name: keyed by the STATE's key (which a cache wipe does not change)."""
        import hmac

        mac = hmac.new(state_secret(), f"textdp ledger anchor {kind}\0{ident}".encode(), "sha256").hexdigest()
        return f"{kind}-{mac[:40]}.json"

    def _path_ident(self, real: Path) -> str:
        return os.fsdecode(os.fsencode(str(real / self.path.name)))

    def _anchors(self) -> PrivateDir:
        return open_private_dir(state_dir(ANCHOR_DIR), what=_ANCHORS)

    def _load(self, folder: PrivateDir, name: str) -> _AnchorForm | None:
        found = _read_at(folder.fd, name, folder.path / name, what="ledger anchor")
        if found is None:
            return None
        _check_private(found[1], folder.path / name, what="ledger anchor")
        try:
            row = json.loads(found[0])
            if not isinstance(row, dict) or row.get("format") != _ANCHOR_FORMAT:
                raise ValueError
            return cast("_AnchorForm", row)  # an anchor file; its fields are checked where read (_head)
        except (ValueError, TypeError):
            raise LedgerMismatchError(f"the anchor of ledger {self.path} ({folder.path / name}) is damaged; run "
                                      f"`textdp ledger reset {self.path}` to anchor the ledger as it is now") from None

    def _head(self, row: _AnchorForm, shown: Path) -> tuple[int, str]:
        try:
            n, h = int(row["events"]), str(row["head"])
            if n < 0 or len(h) != 64:
                raise ValueError
        except (ValueError, TypeError, KeyError):
            raise LedgerMismatchError(f"the anchor of ledger {self.path} ({shown}) is damaged; run "
                                      f"`textdp ledger reset {self.path}` to anchor the ledger as it is now") from None
        return n, h

    def _legacy_anchor(self, real: Path) -> tuple[int, str] | None:
        """An anchor written before issue 39 (``<cache>/ledgers/``, keyed by the real path with the cache's key)."""
        try:
            folder = open_private_dir(cache_dir(LEGACY_ANCHOR_DIR), what=_ANCHORS)
        except FileNotFoundError:
            return None
        name = keyed_digest("textdp ledger anchor", os.fsencode(str(real / self.path.name)))[:40] + ".json"
        with folder:
            row = self._load(folder, name)
        return None if row is None else self._head(row, folder.path / name)

    def _read_anchor(self, real: Path, rows: list[LedgerRow] | None) -> tuple[int, str] | None:
        """The anchored head to check this ledger against.

        That of the ledger textdp last wrote at this path when the file is missing, empty or another ledger
        (replaced: its spend would vanish) and that one recorded events; else that of the file's own identity
        (wherever it was anchored: a moved ledger is recognised).
        """
        ident = ledger_identity(rows or [])
        with self._anchors() as folder:
            where = self._load(folder, self._name("path", self._path_ident(real)))
            here = str(where["ledger"]) if where and isinstance(where.get("ledger"), str) else None
            if here is not None and here != ident:
                name = self._name("id", here)
                row = self._load(folder, name)
                if row is not None and self._head(row, folder.path / name)[0] > 0:
                    return self._head(row, folder.path / name)
            if ident is not None:
                name = self._name("id", ident)
                row = self._load(folder, name)
                if row is not None:
                    return self._head(row, folder.path / name)
        return self._legacy_anchor(real) if rows else None

    def _write_anchor(self, real: Path, rows: Sequence[LedgerRow]) -> None:
        ident = ledger_identity(rows)
        with self._anchors() as folder:
            path_name = self._name("path", self._path_ident(real))
            if ident is None:  # an empty ledger (reset of a missing file): nothing lives at this path now
                folder.remove(path_name)
                return
            head = str(rows[-1]["hash"])
            folder.write_bytes(self._name("id", ident), json.dumps(
                {"format": _ANCHOR_FORMAT, "events": len(rows), "head": head}, sort_keys=True).encode())
            folder.write_bytes(path_name, json.dumps({"format": _ANCHOR_FORMAT, "ledger": ident}).encode())

    # reading ---------------------------------------------------------------------------------
    def _rows(self, dir_fd: int) -> list[LedgerRow] | None:
        """The verified lines of the file (``None`` when there is no file)."""
        found = _read_at(dir_fd, self.path.name, self.path, what="ledger")
        if found is None:
            return None
        data, st = found
        try:  # what the file is first (a wrong file gets the right advice), then whether it is private
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"ledger {self.path} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                                 f"{exc.start}): it is not a textdp ledger; give the file written by --ledger"
                                 ) from None
        first = text.split("\n", 1)[0]
        if first and f'"format": "{_FORMAT}"' not in first:
            raise ParameterError(f"{self.path} is not a textdp ledger (its first line is not a ledger event); give "
                                 "the file written by --ledger")
        _check_private(st, self.path, what="ledger")
        rows: list[LedgerRow] = []
        prev = GENESIS
        for n, line in enumerate(text.splitlines(keepends=True), 1):
            try:
                row = json.loads(line)
                if n == 1 and isinstance(row, dict) and _is_id(row.get("ledger")):
                    prev = row["ledger"]  # the ledger's random id, bound into the first hash
                ok = (isinstance(row, dict) and row.get("format") == _FORMAT and row.get("prev") == prev
                      and isinstance(row.get("event"), dict) and row.get("hash") == _digest(prev, row["event"])
                      and line.endswith("\n"))
            except (json.JSONDecodeError, TypeError, ValueError):
                ok, row = False, None
            if not ok:
                if n == 1 and not (isinstance(row, dict) and row.get("format") == _FORMAT):
                    raise ParameterError(f"{self.path} is not a textdp ledger (its first line is not a ledger "
                                         "event); give the file written by --ledger")
                raise ParameterError(f"ledger {self.path} was modified: line {n} breaks its hash chain; refusing "
                                     "to use it (restore it from a copy you trust)")
            rows.append(row)
            prev = row["hash"]
        return rows

    def _check_anchor(self, rows: list[LedgerRow] | None, anchor: tuple[int, str] | None) -> None:
        if anchor is None:
            if rows:
                raise LedgerMismatchError(
                    f"ledger {self.path} holds {len(rows)} events but textdp has no anchor for it in your state "
                    f"folder ({state_dir(ANCHOR_DIR)}): the state was deleted, or this is a copy textdp never "
                    f"anchored, so an older copy cannot be told apart; if it is the ledger you trust, run `textdp "
                    f"ledger adopt {self.path}`")
            return
        n, h = anchor
        have = len(rows or [])
        fix = (f"restore it from a copy you trust, or run `textdp ledger reset {self.path}` to accept it as it is "
               "now (the spend it no longer shows is then forgotten)")
        if rows is None and n > 0:
            raise LedgerMismatchError(f"ledger {self.path} is missing, but textdp recorded {n} events in it (head "
                                      f"{h[:12]}): it was deleted or moved; {fix}")
        if have < n:
            raise LedgerMismatchError(f"ledger {self.path} holds {have} events, but textdp recorded {n} (head "
                                      f"{h[:12]}): it was truncated or replaced by an older copy; {fix}")
        if n and (rows or [])[n - 1]["hash"] != h:
            raise LedgerMismatchError(f"ledger {self.path} is not the one textdp wrote: its event {n} is not the "
                                      f"recorded head {h[:12]} (it was replaced); {fix}")

    def _read(self) -> tuple[list[LedgerRow] | None, tuple[int, str] | None]:
        """The verified lines (``None``: no file) and the anchor, read under a shared lock.

        A missing folder is a missing file (checked against the anchor of the path it would have).
        """
        try:
            folder = self._open_folder(create=False)
        except FileNotFoundError:
            return None, self._read_anchor(Path(os.path.realpath(os.path.abspath(self.path.parent))), None)
        with folder:
            try:
                os.stat(self.path.name, dir_fd=folder.fd, follow_symlinks=False)
            except FileNotFoundError:  # nothing to lock (and no lock file made by a read)
                return None, self._read_anchor(folder.path, None)
            try:
                os.stat(self.path.name + ".lock", dir_fd=folder.fd, follow_symlinks=False)
            except FileNotFoundError:
                # never charged here: read without making a lock file (a wrong file is refused, nothing left)
                rows = self._rows(folder.fd)
                anchor = self._read_anchor(folder.path, rows)
                with contextlib.suppress(LedgerMismatchError):
                    self._check_anchor(rows, anchor)
                    return rows, anchor
            with self._locked(folder.fd, exclusive=False):  # read again under the lock: a run may be writing
                rows = self._rows(folder.fd)
                return rows, self._read_anchor(folder.path, rows)

    def _verified(self) -> list[LedgerRow]:
        rows, anchor = self._read()
        self._check_anchor(rows, anchor)
        return rows or []

    def exists(self) -> bool:
        """Whether the ledger file or its anchor exists (a ledger that was never written has neither)."""
        rows, anchor = self._read()
        return rows is not None or anchor is not None

    def events(self) -> list[LedgerEvent]:
        """Every recorded event, verified against its chain and its anchor (one-line error otherwise)."""
        return self._events(self._verified())

    def _events(self, rows: list[LedgerRow]) -> list[LedgerEvent]:
        try:
            return [LedgerEvent(**row["event"]) for row in rows]
        except TypeError:
            raise ParameterError(f"ledger {self.path} holds an event of an unknown shape") from None

    def state(self) -> LedgerState:
        """The file's head and the anchored one (not checked against each other: see :meth:`events`)."""
        rows, anchor = self._read()
        rows = rows or []
        return LedgerState(len(rows), rows[-1]["hash"] if rows else GENESIS, *(anchor or (None, None)))

    def head(self) -> str:
        """The hash of the last line (``GENESIS`` for an empty ledger), verified."""
        rows = self._verified()
        return rows[-1]["hash"] if rows else GENESIS

    def spent(self, events: Sequence[LedgerEvent] | None = None) -> dict[str, Spend]:
        """``{document id: Spend}`` summed over the events (basic composition)."""
        out: dict[str, Spend] = {}
        for e in self.events() if events is None else events:
            s = out.get(e.document, Spend(0, 0.0, 0.0))
            out[e.document] = Spend(s.releases + 1, s.epsilon + e.epsilon, s.delta + e.delta)
        return out

    def composed(self, events: Sequence[LedgerEvent] | None = None) -> dict[str, Composition]:
        """``{document id: Composition}``: each document's releases composed by the accountant (basic and tight)."""
        per_doc: dict[str, list[Charge]] = {}
        for e in self.events() if events is None else events:
            per_doc.setdefault(e.document, []).append(e.charge())
        return {doc: _compose(tuple(charges)) for doc, charges in per_doc.items()}

    def _check_budget(self, recorded: Sequence[LedgerEvent], new: Sequence[LedgerEvent],
                      limit: tuple[float, float]) -> None:
        """Refuse ``new`` if a document's composed spend, ``new`` included, would be above ``budget``.

        ``budget`` is ``(ε, δ)``: the tight ε at the total δ, and the total δ itself (the sum, the δ at which
        the tight ε is stated).
        """
        budget, delta_budget = limit
        history: dict[str, list[Charge]] = {}
        for e in recorded:
            history.setdefault(e.document, []).append(e.charge())
        over = []
        for e in new:
            charges = (*history.get(e.document, ()), e.charge())
            spent_delta = math.fsum(c.delta for c in charges)
            if spent_delta > delta_budget * (1 + 1e-9):
                raise ParameterError(
                    f"the delta budget {delta_budget:g} would be exceeded: document {e.document!r} has spent delta "
                    f"{spent_delta - e.delta:.4g} and would reach {spent_delta:.4g} with this release (--delta-budget "
                    f"raises the cap; the default is {DEFAULT_DELTA_BUDGET:g}); nothing was released or recorded")
            if math.fsum(c.epsilon for c in charges) <= budget * (1 + 1e-12):
                continue  # the basic sum fits, so the tight bound (never larger) does too
            after = _compose(charges).enforced[0]
            if after > budget * (1 + 1e-12):
                had = _compose(charges[:-1]).enforced[0] if len(charges) > 1 else 0.0
                over.append((e.document, had, after))
        if over:
            doc, had, after = over[0]
            raise ParameterError(
                f"the privacy budget {budget:g} would be exceeded for {len(over)} document(s) (first: {doc!r} has "
                f"spent {had:.4g} and would reach {after:.4g} with this release, composed by the accountant); nothing "
                "was released or recorded")

    # writing ---------------------------------------------------------------------------------
    def adopt(self) -> LedgerState:
        """Anchor a ledger that holds events but has no anchor (the state was deleted, or a copy never anchored here).

        The user's word that this file is the ledger to trust; its spend counts from now on, and an older
        copy is refused again. A ledger whose anchor disagrees with it is refused here (that needs
        :meth:`reset`, which says what is forgotten); an anchored one that agrees is only re-anchored (after a
        move, its path is recorded). Returns the state after.
        """
        with self._session(create=False, exclusive=True) as folder:
            rows = self._rows(folder.fd)
            if rows is None:
                raise ParameterError(f"{self.path}: no such ledger file")
            anchor = self._read_anchor(folder.path, rows)
            if anchor is not None:
                self._check_anchor(rows, anchor)
            self._write_anchor(folder.path, rows)
        head = rows[-1]["hash"] if rows else GENESIS
        return LedgerState(len(rows), head, len(rows), head)

    def reset(self) -> tuple[LedgerState, LedgerState]:
        """Anchor the ledger as it is now (an empty one when the file is missing): the user's word that it is right.

        Whatever the old anchor recorded beyond the file is forgotten: documents whose events were
        lost may be released again up to the full budget. A file whose chain is broken is still
        refused (move it away first). Returns the state before and after.
        """
        with self._session(create=True, exclusive=True) as folder:
            try:
                rows = self._rows(folder.fd) or []
            except LedgerMismatchError:
                raise
            except ParameterError as exc:
                raise ParameterError(f"{exc}; a reset accepts only a ledger whose chain verifies, or a missing one: "
                                     f"move {self.path} away first to start an empty ledger") from None
            anchor = self._read_anchor(folder.path, rows)
            head = rows[-1]["hash"] if rows else GENESIS
            self._write_anchor(folder.path, rows)
        before = LedgerState(len(rows), head, *(anchor or (None, None)))
        return before, LedgerState(len(rows), head, len(rows), head)

    def charge(self, charges: Mapping[str, Charge | tuple[float, float]], *, mechanism: str, unit: str,
               budget: BudgetLike | None, command: str = "rewrite", new_ledger: bool = False) -> list[LedgerEvent]:
        """Record one release: ``{document id: Charge}``; refuse it whole if a document would exceed ``budget``.

        A :class:`~textdp.guarantees.events.Charge` (``guarantee.charge(units)``) records what ran, so
        the accountant can compose it tightly; a plain ``(ε, δ)`` pair counts as a pure or (ε, δ) event.
        A document exceeds ``budget`` when the tight ε of all its releases, this one included
        (:attr:`Composition.enforced <textdp.accounting.accountant.Composition.enforced>`), is above it, or
        their total δ is above the δ budget: ``budget`` is ε (δ capped at
        :data:`~textdp._validation.DEFAULT_DELTA_BUDGET`) or ``(ε, δ)``. ``budget`` None records without a
        limit. A :class:`~textdp.guarantees.events.Charge` whose event does not give the (ε, δ) it states is
        refused (:func:`~textdp.accounting.accountant.check_charge`). ``new_ledger`` first accepts the file as
        it is (like :meth:`reset`, in the same lock). Returns the new events.
        """
        limit = check_budget(budget)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        new = [_event(str(doc), c, mechanism, unit, command, now) for doc, c in charges.items()]
        with self._session(create=True, exclusive=True) as folder:
            found = self._rows(folder.fd)
            if not new_ledger:
                self._check_anchor(found, self._read_anchor(folder.path, found))
            rows = found or []
            if limit is not None:
                self._check_budget(self._events(rows), new, limit)
            prev = rows[-1]["hash"] if rows else secrets.token_hex(32)  # a new ledger: its random identity
            lines = [json.dumps(r, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n" for r in rows]
            written = list(rows)
            for e in new:
                body = e.to_dict()
                h = _digest(prev, body)
                row: LedgerRow = {"format": _FORMAT, "prev": prev, "event": body, "hash": h}
                if not written:
                    row["ledger"] = prev
                lines.append(json.dumps(row, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n")
                written.append(row)
                prev = h
            folder.write_bytes(self.path.name, "".join(lines).encode("ascii"))
            self._write_anchor(folder.path, written)  # after the ledger: a crash between over-counts
        return new


def reset_message(before: LedgerState, after: LedgerState) -> str:
    """What a reset did: the new anchor, the old one, and the spend that is no longer counted."""
    if before.anchored_events is None:
        was = "it had no anchor"
    else:
        was = f"the anchor recorded {before.anchored_events} events (head {before.anchored_head})"
    lost = (before.anchored_events or 0) - after.events
    forgot = (f"; the spend of {lost} recorded events that the file no longer holds is forgotten: the documents "
              "they covered may be released again up to the full budget" if lost > 0 else "")
    if before.anchored_events is not None and before.anchored_head != after.head and lost <= 0:
        forgot = "; the anchored events were replaced by the file's: only the file's spend counts from now on"
    return f"now anchored at {after.events} events (head {after.head}); {was}{forgot}"


def charge_ledger(ledger: str | os.PathLike[str] | PrivacyLedger, charges: Mapping[str, Charge], *, mechanism: str,
                  unit: str, budget: BudgetLike | None = None, new_ledger: bool = False,
                  command: str = "release") -> tuple[int, str | None]:
    """Record one release in ``ledger`` (refused whole past ``budget``); return (events, ``new_ledger`` note).

    What every release path calls (:func:`textdp.release.release`, the partitioned engine). The note
    (``None`` unless ``new_ledger`` accepted a ledger that no longer matched its anchor) says what was
    forgotten; the command prints it as a warning.
    """
    led = PrivacyLedger(ledger) if isinstance(ledger, (str, os.PathLike)) else ledger
    before = led.state() if new_ledger else None
    new = led.charge(charges, mechanism=mechanism, unit=unit, budget=budget, command=command, new_ledger=new_ledger)
    note = None
    if before is not None and before.anchored_events is not None and \
            (before.anchored_events, before.anchored_head) != (before.events, before.head):
        now = LedgerState(before.events, before.head, before.events, before.head)
        note = f"--new-ledger: ledger {led.path} was accepted as it was before this run: {reset_message(before, now)}"
    return len(new), note
