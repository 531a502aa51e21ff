"""The private state of a partitioned run: its work directory, resume key and verified files.

A partitioned run keeps private files (spilled inputs, the vocabulary the workers
load, pieces of the private report) in a **work directory**: ``--work-dir``,
or ``<textdp cache>/runs/<name>``. Nothing found there is trusted (issue 19: a
squatted work dir with a planted vocabulary made a release copy its input):

* the folder must be owned by this user and not writable by anyone else, and every
  folder above it must pass OpenSSH's ``secure_path`` rule, else the run is refused
  (:func:`textdp._cache.check_secure_path`); textdp creates its folders with mode
  ``0700`` (the cache tree included) and its files ``0600``;
* it is **opened once** (:func:`textdp._cache.open_private_dir`): the run state, key,
  lock, spills, vocabulary and report pieces are created, read, listed and removed
  through that descriptor (``dir_fd``, ``O_NOFOLLOW``), so renaming a folder on its path
  after the check changes nothing (issue 28: an ancestor swap made a release copy its
  input); workers open it themselves the same way and verify the bytes they use;
* the **run state** ``state.json`` is authenticated: an HMAC-SHA-256 with a random
  per-run key (``secret.key``, 0600) that never leaves the work directory. It holds
  a keyed hash of the run's identity (output folder, input paths, devices, inodes, sizes and
  modification times, settings, a hash of the seed), never the identity itself (only the
  output folder's path, the public release's, so that ``runs list`` can tell a run whose
  output is gone: ``orphaned``), and the SHA-256 of every file this run wrote (spills,
  part files, report pieces). A
  file is reused on resume only if its hash matches that record; anything else is
  written again;
* the vocabulary is checked against the driver's own embeddings (loaded from the
  verified embeddings cache) before it is reused, and by every worker on the bytes
  it reads into its own memory (:func:`load_verified_vocabulary`; never memory-mapped);
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
import io
import json
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np

from .._cache import USER_SECRET, PrivateDir, cache_dir, open_private_dir, user_secret
from ..embeddings import Embeddings
from ..errors import ParameterError

__all__ = [
    "RunInfo",
    "RunState",
    "clean_runs",
    "default_work_dir",
    "fh_sha256",
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


def _lock_run(work: PrivateDir) -> None:
    """Take the run's exclusive lock (held until :meth:`RunState.remove` or the process ends).

    A process that already holds it (a run resumed in the same process) keeps it. The lock
    file is opened ``O_NOFOLLOW`` relative to the work directory's descriptor.
    """
    if str(work.path) in _HELD:
        return
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=work.fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ParameterError(f"another textdp process is running this job (its work directory {work.path} is "
                             "locked); wait for it to finish, or stop it and run the command again") from None
    _HELD[str(work.path)] = fd


def _unlock_run(work: Path) -> None:
    fd = _HELD.pop(str(work), None)
    if fd is not None:
        os.close(fd)


def _running(d: PrivateDir) -> bool:
    """Some process (this one included) holds the run lock of the work directory ``d``."""
    if str(d.path) in _HELD:
        return True
    try:
        fd = os.open(LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=d.fd)
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
    #: the run's release was charged to a ledger (a resumed run does not charge it again)
    ledger_charged: NotRequired[bool]
    #: the output (folder or file: the public release) the run writes, so that ``runs list`` can tell a run whose
    #: output is gone ("orphaned"); absent in states written before issue 38
    output: NotRequired[str]


def _mac(key: bytes, obj: object) -> str:
    return hmac.new(key, _canonical(obj), hashlib.sha256).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (one open)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fh_sha256(fh: io.BufferedReader) -> str:
    """SHA-256 of an open file's bytes from its start; leaves it at the start again."""
    fh.seek(0)
    digest = hashlib.file_digest(fh, "sha256").hexdigest()
    fh.seek(0)
    return digest


def _read_secret(d: PrivateDir, size: int) -> bytes | None:
    try:
        data = d.read_bytes(SECRET)
    except FileNotFoundError:
        return None
    return data if len(data) == size else None


def _new_secret(d: PrivateDir, size: int) -> bytes:
    data = secrets.token_bytes(size)
    d.write_bytes(SECRET, data)
    return data


def _json_bytes(obj: object) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


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
    ``dir`` is the work directory, opened once after every folder on its path was checked
    (:func:`textdp._cache.open_private_dir`): everything inside is reached through it.
    """

    def __init__(self, work: PrivateDir, secret: bytes, data: RunStateData, *, resumed: bool) -> None:
        self.dir, self._secret, self.data, self.resumed = work, secret, data, resumed

    @property
    def work(self) -> Path:
        """The work directory's real path (for messages and for the workers, who check it themselves)."""
        return self.dir.path

    @classmethod
    def open(cls, work: Path, key: dict[str, object], *, what: str = "the work directory",
             output: Path | None = None) -> RunState:
        """The state of the run ``key`` in ``work`` (created ``0700`` if absent, refused if unsafe).

        ``output`` (the release's folder or file) is recorded in a new state, so that :func:`list_runs` can tell
        a run whose output is gone (status ``orphaned``).

        Raises :class:`~textdp.errors.ParameterError` if ``work`` belongs to another
        run or its state does not verify.
        """
        created = not os.path.lexists(work)
        d = open_private_dir(Path(work), what=what, create=True)
        try:
            _lock_run(d)
        except BaseException:
            d.close()
            raise
        try:
            secret = _read_secret(d, 32)
            if secret is not None and d.exists(STATE):
                try:
                    data = json.loads(d.read_bytes(STATE).decode("utf-8"))
                    mac = data.pop("mac")
                except (OSError, ValueError, KeyError, AttributeError):
                    mac, data = None, {}
                if mac is None or not hmac.compare_digest(str(mac), _mac(secret, data)):
                    raise ParameterError(f"the run state in {d.path} does not verify (it was modified or damaged); "
                                         "delete that folder, or choose another --work-dir")
                if not hmac.compare_digest(str(data.get("identity")), _mac(secret, key)):
                    raise ParameterError(f"the work directory {d.path} belongs to a different run (inputs, output "
                                         "or settings differ); choose another --work-dir")
                return cls(d, secret, data, resumed=True)
            secret = _new_secret(d, 32)
        except BaseException:
            _unlock_run(d.path)
            d.close()
            raise
        fresh: RunStateData = {"run": secrets.token_hex(16), "identity": _mac(secret, key), "resolved_size": None,
                               "complete": False, "files": {}, "created_folder": created}
        if output is not None:
            fresh["output"] = str(Path(output).absolute())
        return cls(d, secret, fresh, resumed=False)

    @property
    def run(self) -> str:
        return str(self.data["run"])

    def close(self) -> None:
        """Release the run's lock and close the work directory (the private state stays, for a later resume)."""
        _unlock_run(self.work)
        self.dir.close()

    def save(self) -> None:
        """Write the state with its HMAC (atomically, 0600, through the work directory's descriptor)."""
        self.dir.write_bytes(STATE, _json_bytes({**self.data, "mac": _mac(self._secret, self.data)}))

    def record(self, name: str, sha256: str, *, save: bool = True) -> None:
        """Note that this run wrote ``name`` with content hash ``sha256``."""
        self.data["files"][name] = sha256
        if save:
            self.save()

    def open_verified(self, name: str) -> io.BufferedReader | None:
        """The file ``name`` of the work directory, opened once, if its bytes match the hash this run recorded.

        The bytes are hashed through the returned file object (at its start again), so what
        was checked is what the caller reads; ``None`` if it is absent, altered, or not a
        private file.
        """
        want = self.data["files"].get(name)
        if want is None:
            return None
        try:
            fh = self.dir.open_read(name)
        except (OSError, ParameterError):
            return None
        if hmac.compare_digest(fh_sha256(fh), str(want)):
            return fh
        fh.close()
        return None

    def verified_bytes(self, name: str) -> bytes | None:
        """The bytes of the work directory's ``name`` (read once) if they match the hash this run recorded."""
        want = self.data["files"].get(name)
        try:
            data = None if want is None else self.dir.read_bytes(name)
        except (OSError, ParameterError):
            return None
        ok = data is not None and hmac.compare_digest(hashlib.sha256(data).hexdigest(), str(want))
        return data if ok else None

    def verified(self, name: str, path: Path | None = None) -> bool:
        """True if ``name`` matches the hash this run recorded.

        Names of the work directory are read through its descriptor; ``out:`` names (the
        public output folder) are hashed at ``path`` in one open.
        """
        if not name.startswith("out:"):
            fh = self.open_verified(name)
            if fh is not None:
                fh.close()
            return fh is not None
        want = self.data["files"].get(name)
        try:
            return (want is not None and path is not None and path.is_file()
                    and hmac.compare_digest(file_sha256(path), str(want)))
        except OSError:
            return False

    def complete(self) -> None:
        """Mark the run complete (so a crash during cleanup resumes as done), then delete its private state."""
        self.data["complete"] = True
        self.save()
        self.remove()

    def remove(self) -> None:
        """Delete the run's private state, and the work directory itself if this run made it (and it is empty).

        Everything is removed through the work directory's descriptor (links never followed).
        """
        folder_too = bool(self.data.get("created_folder"))
        for name in OWN_ENTRIES:
            self.dir.remove(name)
        for name in self.dir.listdir():
            if name.startswith("vocabulary-") or (name.startswith(".") and name.endswith(".tmp")):
                self.dir.remove(name)  # vocabularies, and atomic writes cut short by a killed run
        _unlock_run(self.work)
        if folder_too:
            try:  # only if it is still the folder this run opened, and empty
                here, there = os.stat(self.work, follow_symlinks=False), os.fstat(self.dir.fd)
                if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
                    os.rmdir(self.work)
            except OSError:
                pass  # the user's own files are there: keep the folder


# -- the vocabulary the workers load --------------------------------------------------------------------
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


def _parse_vocabulary(words: bytes, vectors: bytes) -> tuple[list[str], np.ndarray] | None:
    """The words and matrix of a stored vocabulary, parsed from bytes already read (private memory)."""
    try:
        arr = np.load(io.BytesIO(vectors), allow_pickle=False)
        text = words.decode("utf-8")
    except (OSError, ValueError, EOFError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.ndim != 2:
        return None
    arr.flags.writeable = False
    return text.split("\n")[:-1], arr


def _read_vocabulary(d: PrivateDir) -> tuple[tuple[str, str], list[str], np.ndarray] | None:
    """Read ``words.txt`` and ``vectors.npy`` once each through ``d``; their digests and parsed contents."""
    try:
        words, vectors = d.read_bytes("words.txt"), d.read_bytes("vectors.npy")
    except (OSError, ParameterError):
        return None
    parsed = _parse_vocabulary(words, vectors)
    if parsed is None:
        return None
    return (_array_sha256(parsed[1]), hashlib.sha256(words).hexdigest()), parsed[0], parsed[1]


def save_vocabulary(emb: Embeddings, directory: Path | PrivateDir, fingerprint: str,
                    digests: tuple[str, str] | None = None) -> Path:
    """Write ``vectors.npy`` + ``words.txt`` into ``directory/vocabulary-<fingerprint>``; return that folder.

    ``directory``: the run's open work directory (or a path, opened and checked here).
    Files already there are reused only if their SHA-256 equals that of ``emb`` (the
    driver's embeddings; ``digests``: :func:`vocabulary_digests` of them, if already
    computed); otherwise they are written again, so a planted vocabulary is never
    used. Workers check the same hashes on the bytes they load.
    """
    if any("\n" in w for w in emb.words):
        raise ParameterError("a vocabulary word contains a newline; cannot store it for the workers")
    own = not isinstance(directory, PrivateDir)
    work = open_private_dir(Path(directory), create=True) if not isinstance(directory, PrivateDir) else directory
    try:
        want = digests or vocabulary_digests(emb)
        with work.sub(f"vocabulary-{fingerprint}", create=True) as d:
            got = _read_vocabulary(d) if d.exists("vectors.npy") else None
            if got is None or got[0] != want:
                d.write_bytes("words.txt", _words_bytes(list(emb.words)))
                with d.writer("vectors.npy") as fh:
                    np.save(fh, np.ascontiguousarray(emb.vectors, dtype=np.float32))
            return d.path
    finally:
        if own:
            work.close()


def load_verified_vocabulary(vocab_dir: str, name: str, vectors_sha256: str, words_sha256: str) -> Embeddings:
    """The vocabulary in ``vocab_dir``, refused unless it has the driver's SHA-256.

    The worker opens the folder itself (every folder on its path checked,
    :func:`textdp._cache.open_private_dir`), reads each file once through that
    descriptor into its own memory, and hashes the very matrix and words it then uses:
    nothing is re-opened by path or memory-mapped, so a file renamed or rewritten after
    the check cannot change what the mechanism uses.
    """
    with open_private_dir(Path(vocab_dir), what="the vocabulary folder") as d:
        got = _read_vocabulary(d)
    if got is None or got[0] != (vectors_sha256, words_sha256):
        raise ParameterError(f"the vocabulary in {vocab_dir} is not the one the driver wrote (hash mismatch); "
                             "it was modified: rerun in a private --work-dir")
    return Embeddings(got[1], got[2], name=name)


# -- abandoned runs: list and clean ------------------------------------------------------------------------
@dataclass(frozen=True)
class RunInfo:
    """One run folder under ``runs_dir()``: its name, age, size and status (never its inputs)."""

    name: str
    path: Path
    age_s: float
    bytes: int
    #: "running" (a process holds its lock), "interrupted", "orphaned" (interrupted or completing, and its output
    #: folder or file is gone: nothing can resume it), "completing" (complete, cleanup unfinished),
    #: "unverified" or "old-format"
    status: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "age_s": round(self.age_s, 1), "bytes": self.bytes,
                "status": self.status}


def _status(d: PrivateDir) -> str:
    if _running(d):
        return "running"
    if d.exists("key.json") and not d.exists(STATE):
        return "old-format"  # written by textdp before issue 19: holds input paths in plain text
    secret = _read_secret(d, 32)
    try:
        data = json.loads(d.read_bytes(STATE).decode("utf-8"))
        mac = data.pop("mac")
    except (OSError, ValueError, KeyError, AttributeError, ParameterError):
        return "unverified"
    if secret is None or not hmac.compare_digest(str(mac), _mac(secret, data)):
        return "unverified"
    output = data.get("output")
    if isinstance(output, str) and not os.path.lexists(output):  # deleted: the run can never be resumed
        return "orphaned"
    return "completing" if data.get("complete") else "interrupted"


def _open_runs_dir() -> PrivateDir | None:
    """``runs_dir()``, opened and checked; refused if it is a link or not this user's (``None``: absent).

    ``runs clean --all`` deletes everything inside: a ``runs/`` that is a link (to a project
    folder, say) or that another user owns is refused, never followed.
    """
    base = runs_dir()
    try:
        st = os.lstat(base)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise ParameterError(f"the runs folder {base} is a symbolic link (to {os.readlink(base)}); textdp never "
                             "follows it: remove the link, or set TEXTDP_CACHE_DIR to a private folder")
    if not stat.S_ISDIR(st.st_mode):
        return None
    d = open_private_dir(base, what="the runs folder")
    st2 = os.fstat(d.fd)
    if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):  # replaced between the two looks
        d.close()
        raise ParameterError(f"the runs folder {base} changed while textdp opened it; run the command again")
    return d


def _run_folders(base: PrivateDir) -> list[tuple[str, PrivateDir]]:
    """The run folders in ``base``: real folders of this user (links and anything else are skipped)."""
    out = []
    for name in base.listdir():
        try:
            st = os.stat(name, dir_fd=base.fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        try:
            out.append((name, base.sub(name)))
        except (OSError, ParameterError):
            continue  # not this user's private folder: never read, never deleted
    return out


def _size_and_newest(d: PrivateDir) -> tuple[int, float]:
    """Total bytes and newest modification time of the files below ``d`` (walked by descriptor, no links)."""
    size, newest = 0, os.fstat(d.fd).st_mtime
    for _, _, files, dirfd in os.fwalk(".", dir_fd=d.fd):
        for f in files:
            try:
                st = os.stat(f, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                size += st.st_size
                newest = max(newest, st.st_mtime)
    return size, newest


def list_runs() -> list[RunInfo]:
    """The run folders in the textdp cache (default work directories), oldest first."""
    base = _open_runs_dir()
    if base is None:
        return []
    now = time.time()
    out = []
    with base:
        for name, d in _run_folders(base):
            with d:
                size, newest = _size_and_newest(d)
                out.append(RunInfo(name, d.path, now - newest, size, _status(d)))
    return sorted(out, key=lambda r: -r.age_s)


def clean_runs(name: str | None = None, *, all_runs: bool = False, orphaned: bool = False) -> list[RunInfo]:
    """Delete one run folder (``name``, as :func:`list_runs` shows it), the orphaned ones (``orphaned``: their
    output folder is gone) or all of them (``all_runs``); return what was deleted (an empty list: nothing to clean).

    A running job's folder is never deleted: naming it is refused, ``all_runs`` skips it.
    The runs folder is opened once (refused if it is a link or not this user's) and every
    deletion goes through its descriptor.
    """
    if (name is not None) + all_runs + orphaned != 1:
        given = (name is not None) + all_runs + orphaned
        raise ParameterError(("give one of " if given else "say which runs to delete: ") + "NAME (a run from textdp "
                             "runs list), --orphaned (runs whose output is gone) or --all" + (", not two" if given
                                                                                              else ""))
    base = _open_runs_dir()
    if base is None:
        if name is None:
            return []
        raise ParameterError(f"no run named {name!r} in {runs_dir()} (textdp runs list shows them)")
    now = time.time()
    deleted = []
    with base:
        chosen = [(n, d) for n, d in _run_folders(base) if all_runs or orphaned or n == name]
        if not chosen and name is not None:
            raise ParameterError(f"no run named {name!r} in {runs_dir()} (textdp runs list shows them)")
        for n, d in chosen:
            with d:
                status = _status(d)
                if status == "running":
                    if name is not None:
                        raise ParameterError(f"run {n} is running (a textdp process holds its lock); stop that "
                                             "process first")
                    continue
                if orphaned and status != "orphaned":
                    continue
                size, newest = _size_and_newest(d)
                info = RunInfo(n, d.path, now - newest, size, status)
            base.remove(n)
            deleted.append(info)
    return sorted(deleted, key=lambda r: -r.age_s)
