"""The private state of a partitioned run: its work directory, resume key and verified files.

A partitioned run keeps private files (spilled inputs, the vocabulary the workers
memory-map, pieces of the private report) in a **work directory**: ``--work-dir``,
or ``<textdp cache>/runs/<name>``. Nothing found there is trusted (issue 19: a
squatted work dir with a planted vocabulary made a release copy its input):

* the folder must be owned by this user and not writable by anyone else, else
  the run is refused (:func:`textdp._cache.check_private_dir`); textdp creates its
  folders with mode ``0700`` (the cache tree included) and its files ``0600``;
* the **run state** ``state.json`` is authenticated: an HMAC-SHA-256 with a random
  per-run key (``secret.key``, 0600) that never leaves the work directory. It holds
  a keyed hash of the run's identity (output folder, input paths, sizes and
  modification times, settings, a hash of the seed), never the identity itself, and
  the SHA-256 of every file this run wrote (spills, part files, report pieces). A
  file is reused on resume only if its hash matches that record; anything else is
  written again;
* the vocabulary is checked against the driver's own embeddings (loaded from the
  verified embeddings cache) before it is reused, and by every worker when it
  loads it (:func:`load_verified_vocabulary`);
* when the run completes, the whole private state (key included) is deleted, so
  nothing is left that names or fingerprints the inputs or the seed. The name of a
  default work directory is an HMAC of the run's identity with a per-user salt
  (``runs/.salt``), so even an abandoned run's folder name confirms no guess.

* a running job holds an exclusive lock on ``run.lock`` in its work directory (``flock``,
  released when the process ends, however it ends): a second process started on the
  same job is refused in one line instead of interleaving writes with the first, and
  :func:`clean_runs` never deletes a running job's state.

Abandoned runs are listed and removed with :func:`list_runs` / :func:`clean_runs`
(``textdp runs list|clean``).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from .._cache import USER_SECRET, cache_dir, check_private_dir, private_dir, user_secret
from ..embeddings import Embeddings
from ..errors import ParameterError
from ..io import atomic_writer, write_json

__all__ = [
    "RunInfo",
    "RunState",
    "clean_runs",
    "default_work_dir",
    "file_sha256",
    "list_runs",
    "load_verified_vocabulary",
    "runs_dir",
    "save_vocabulary",
    "vocabulary_digests",
]

STATE = "state.json"
SECRET = "secret.key"
SALT = USER_SECRET[1]
LOCK = "run.lock"
#: what a run creates in its work directory (all of it is removed at completion)
OWN_ENTRIES = (STATE, SECRET, "input", "report", LOCK)
#: the run locks this process holds (work directory -> locked descriptor)
_HELD: dict[str, int] = {}


def _lock_run(work: Path) -> None:
    """Take the run's exclusive lock (held until :meth:`RunState.remove` or the process ends).

    A process that already holds it (a run resumed in the same process) keeps it.
    """
    if str(work) in _HELD:
        return
    fd = os.open(work / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ParameterError(f"another textdp process is running this job (its work directory {work} is "
                             "locked); wait for it to finish, or stop it and run the command again") from None
    _HELD[str(work)] = fd


def _unlock_run(work: Path) -> None:
    fd = _HELD.pop(str(work), None)
    if fd is not None:
        os.close(fd)


def _running(d: Path) -> bool:
    """Some process (this one included) holds the run lock of the work directory ``d``."""
    if str(d) in _HELD:
        return True
    try:
        fd = os.open(d / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


class RunStateData(TypedDict):
    """The authenticated state of a run (``state.json`` in the work directory, with its HMAC)."""

    run: str
    identity: str
    resolved_size: int | None
    complete: bool
    files: dict[str, str]
    created_folder: bool


def _mac(key: bytes, obj: object) -> str:
    return hmac.new(key, _canonical(obj), hashlib.sha256).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _read_secret(path: Path, size: int) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data if len(data) == size else None


def _new_secret(path: Path, size: int) -> bytes:
    data = secrets.token_bytes(size)
    with atomic_writer(path, "wb", overwrite=True, private=True) as fh:
        fh.write(data)
    return data


# -- where runs live ------------------------------------------------------------------------------
def runs_dir(*, create: bool = False) -> Path:
    """``<textdp cache>/runs`` (``create=True``: made ``0700`` and checked)."""
    return cache_dir("runs", create=create)


def default_work_dir(key: dict[str, object]) -> Path:
    """``<cache>/runs/<HMAC of the run's identity with a per-user salt>`` (created ``0700``).

    The same command finds the same folder again; the name confirms no guess about
    the inputs to anyone without the salt (``runs/.salt``, 0600, in the user's own
    0700 cache).
    """
    return runs_dir(create=True) / _mac(user_secret(), key)[:32]


# -- the authenticated run state -----------------------------------------------------------------
class RunState:
    """The authenticated state of one run in its work directory (see the module notes).

    ``data``: ``run`` (a random token, also in the public manifest), ``identity`` (a
    keyed hash of the run's private key), ``resolved_size``, ``complete``, and
    ``files`` (work-dir-relative or ``out:``-prefixed name -> SHA-256 of what this run wrote).
    """

    def __init__(self, work: Path, secret: bytes, data: RunStateData, *, resumed: bool) -> None:
        self.work, self._secret, self.data, self.resumed = work, secret, data, resumed

    @classmethod
    def open(cls, work: Path, key: dict[str, object], *, what: str = "the work directory") -> RunState:
        """The state of the run ``key`` in ``work`` (created ``0700`` if absent, refused if unsafe).

        Raises :class:`~textdp.errors.ParameterError` if ``work`` belongs to another
        run or its state does not verify.
        """
        created = not (Path(work).exists() or Path(work).is_symlink())
        work = private_dir(Path(work), what=what)
        _lock_run(work)
        secret = _read_secret(work / SECRET, 32)
        state_path = work / STATE
        if secret is not None and state_path.exists():
            try:
                data = json.loads(state_path.read_text(encoding="utf-8"))
                mac = data.pop("mac")
            except (OSError, ValueError, KeyError, AttributeError):
                mac, data = None, {}
            if mac is None or not hmac.compare_digest(str(mac), _mac(secret, data)):
                _unlock_run(work)
                raise ParameterError(f"the run state in {work} does not verify (it was modified or damaged); "
                                     "delete that folder, or choose another --work-dir")
            if not hmac.compare_digest(str(data.get("identity")), _mac(secret, key)):
                _unlock_run(work)
                raise ParameterError(f"the work directory {work} belongs to a different run (inputs, output or "
                                     "settings differ); choose another --work-dir")
            return cls(work, secret, data, resumed=True)
        secret = _new_secret(work / SECRET, 32)
        fresh: RunStateData = {"run": secrets.token_hex(16), "identity": _mac(secret, key), "resolved_size": None,
                               "complete": False, "files": {}, "created_folder": created}
        return cls(work, secret, fresh, resumed=False)

    @property
    def run(self) -> str:
        return str(self.data["run"])

    def close(self) -> None:
        """Release the run's lock (the private state stays, for a later resume)."""
        _unlock_run(self.work)

    def save(self) -> None:
        """Write the state with its HMAC (atomically, 0600)."""
        write_json(self.work / STATE, {**self.data, "mac": _mac(self._secret, self.data)})

    def record(self, name: str, sha256: str, *, save: bool = True) -> None:
        """Note that this run wrote ``name`` with content hash ``sha256``."""
        self.data["files"][name] = sha256
        if save:
            self.save()

    def verified(self, name: str, path: Path) -> bool:
        """True if ``path`` exists and matches the hash this run recorded for ``name``."""
        want = self.data["files"].get(name)
        try:
            return want is not None and path.is_file() and hmac.compare_digest(file_sha256(path), str(want))
        except OSError:
            return False

    def complete(self) -> None:
        """Mark the run complete (so a crash during cleanup resumes as done), then delete its private state."""
        self.data["complete"] = True
        self.save()
        self.remove()

    def remove(self) -> None:
        """Delete the run's private state, and the work directory itself if this run made it (and it is empty)."""
        folder_too = bool(self.data.get("created_folder"))
        for name in OWN_ENTRIES:
            p = self.work / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        for p in self.work.glob("vocabulary-*"):
            shutil.rmtree(p, ignore_errors=True)
        for p in self.work.glob(".*.tmp"):  # an atomic write cut short by a killed run
            p.unlink(missing_ok=True)
        _unlock_run(self.work)
        if folder_too:
            try:
                self.work.rmdir()
            except OSError:
                pass  # the user's own files are there: keep the folder


# -- the vocabulary the workers memory-map ------------------------------------------------------------
def _words_bytes(words: list[str]) -> bytes:
    return "".join(w + "\n" for w in words).encode("utf-8")


def _array_sha256(arr: np.ndarray) -> str:
    a = np.ascontiguousarray(arr, dtype=np.float32)
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.data.cast("B"))
    return h.hexdigest()


def vocabulary_digests(emb: Embeddings) -> tuple[str, str]:
    """SHA-256 of the vocabulary's float32 matrix (dtype, shape, values) and of its words file."""
    return _array_sha256(np.asarray(emb.vectors)), hashlib.sha256(_words_bytes(list(emb.words))).hexdigest()


def _stored_digests(d: Path) -> tuple[str, str] | None:
    try:
        vectors = np.load(d / "vectors.npy", mmap_mode="r", allow_pickle=False)
        words = (d / "words.txt").read_bytes()
    except (OSError, ValueError):
        return None
    if vectors.dtype != np.float32 or vectors.ndim != 2:
        return None
    return _array_sha256(vectors), hashlib.sha256(words).hexdigest()


def save_vocabulary(emb: Embeddings, directory: Path, fingerprint: str,
                    digests: tuple[str, str] | None = None) -> Path:
    """Write ``vectors.npy`` + ``words.txt`` into ``directory/vocabulary-<fingerprint>``; return that folder.

    Files already there are reused only if their SHA-256 equals that of ``emb`` (the
    driver's embeddings; ``digests``: :func:`vocabulary_digests` of them, if already
    computed); otherwise they are written again, so a planted vocabulary is never
    used. Workers check the same hashes when they load it.
    """
    d = Path(directory) / f"vocabulary-{fingerprint}"
    want = digests or vocabulary_digests(emb)
    if d.is_dir() and _stored_digests(d) == want:
        return d
    if any("\n" in w for w in emb.words):
        raise ParameterError("a vocabulary word contains a newline; cannot store it for the workers")
    private_dir(d, what="the vocabulary folder")
    with atomic_writer(d / "words.txt", "wb") as fh:
        fh.write(_words_bytes(list(emb.words)))
    with atomic_writer(d / "vectors.npy", "wb") as fh:
        np.save(fh, np.ascontiguousarray(emb.vectors, dtype=np.float32))
    return d


def load_verified_vocabulary(vocab_dir: str, name: str, vectors_sha256: str, words_sha256: str) -> Embeddings:
    """The vocabulary in ``vocab_dir`` (memory-mapped), refused unless it has the driver's SHA-256."""
    d = Path(vocab_dir)
    got = _stored_digests(d)
    if got != (vectors_sha256, words_sha256):
        raise ParameterError(f"the vocabulary in {d} is not the one the driver wrote (hash mismatch); "
                             "it was modified: rerun in a private --work-dir")
    words = (d / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(d / "vectors.npy", mmap_mode="r", allow_pickle=False)  # one copy per machine
    return Embeddings(words, vectors, name=name)


# -- abandoned runs: list and clean ------------------------------------------------------------------------
@dataclass(frozen=True)
class RunInfo:
    """One run folder under ``runs_dir()``: its name, age, size and status (never its inputs)."""

    name: str
    path: Path
    age_s: float
    bytes: int
    #: "running" (a process holds its lock), "interrupted", "completing" (complete, cleanup unfinished),
    #: "unverified" or "old-format"
    status: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "age_s": round(self.age_s, 1), "bytes": self.bytes,
                "status": self.status}


def _status(d: Path) -> str:
    if _running(d):
        return "running"
    if (d / "key.json").exists() and not (d / STATE).exists():
        return "old-format"  # written by textdp before issue 19: holds input paths in plain text
    secret = _read_secret(d / SECRET, 32)
    try:
        data = json.loads((d / STATE).read_text(encoding="utf-8"))
        mac = data.pop("mac")
    except (OSError, ValueError, KeyError, AttributeError):
        return "unverified"
    if secret is None or not hmac.compare_digest(str(mac), _mac(secret, data)):
        return "unverified"
    return "completing" if data.get("complete") else "interrupted"


def list_runs() -> list[RunInfo]:
    """The run folders in the textdp cache (default work directories), oldest first."""
    base = runs_dir()
    if not base.is_dir():
        return []
    check_private_dir(base, what="the runs folder")
    now = time.time()
    out = []
    for d in base.iterdir():
        if not d.is_dir() or d.is_symlink():
            continue
        files = [p for p in d.rglob("*") if p.is_file() and not p.is_symlink()]
        newest = max([os.stat(d).st_mtime] + [p.stat().st_mtime for p in files])
        out.append(RunInfo(d.name, d, now - newest, sum(p.stat().st_size for p in files), _status(d)))
    return sorted(out, key=lambda r: -r.age_s)


def clean_runs(name: str | None = None, *, all_runs: bool = False) -> list[RunInfo]:
    """Delete one run folder (``name``, as :func:`list_runs` shows it) or all of them; return what was deleted.

    A running job's folder is never deleted: naming it is refused, ``all_runs`` skips it.
    """
    if (name is None) == (not all_runs):
        raise ParameterError("name one run (textdp runs list shows them) or pass --all, not both")
    runs = list_runs()
    chosen = runs if all_runs else [r for r in runs if r.name == name]
    if not chosen:
        raise ParameterError(f"no run named {name!r} in {runs_dir()} (textdp runs list shows them)")
    if not all_runs and chosen[0].status == "running":
        raise ParameterError(f"run {name} is running (a textdp process holds its lock); stop that process first")
    idle = [r for r in chosen if r.status != "running"]
    for r in idle:
        shutil.rmtree(r.path)
    return idle
