"""The one textdp cache directory, and private folders that nobody else can plant files in.

Every cached artefact (converted embeddings, approximate-decoder indexes, sampled
sensitivities, the private state of partitioned runs) lives under :func:`cache_dir`:
``$TEXTDP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/textdp``, else ``~/.cache/textdp``.

:func:`check_secure_path` applies OpenSSH's ``secure_path`` rule from ``/`` down: every
folder on the way must be owned by root or this user and not writable by group or others
unless it is root-owned and sticky (like ``/tmp``), or whoever can write it could rename
the folder below and put their own tree in its place (issue 28: a swapped ancestor made
an ε = 1 release copy its input). Each component is opened relative to its parent's
descriptor with ``O_NOFOLLOW`` and checked through that descriptor.

:func:`private_dir` creates a folder (and every missing parent) with mode ``0700``,
and refuses one that another user owns or can write to, or that fails the ancestor
rule: a folder someone else prepared could hold planted files (issue 19: a planted
vocabulary made a release copy its input). :func:`open_private_dir` does the same and
keeps the checked folder open: a :class:`PrivateDir` creates, opens, lists and removes
everything inside relative to that descriptor (``dir_fd=``, ``O_NOFOLLOW`` at each step),
so renaming any folder on the path after the check changes nothing. :func:`cache_dir` applies it to the cache itself: created ``0700`` when
missing, refused when unsafe, so everything below it (embeddings, indexes, run
folders) is out of other users' reach; ``cache_dir(sub, create=True)`` makes the
subfolder ``0700`` too (every cache subfolder should be made this way, never with a plain ``mkdir``).

:func:`user_secret` is the per-user secret key (32 random bytes, ``<cache>/runs/.salt``,
mode ``0600``): keyed hashes made with it (the default work-directory names of
partitioned runs, the ``run_key`` of a model card) can be recomputed by this user only.

>>> import os, tempfile
>>> old = os.environ.pop("TEXTDP_CACHE_DIR", None)
>>> os.environ["XDG_CACHE_HOME"] = tmp = tempfile.mkdtemp()
>>> cache_dir("topics") == Path(tmp, "textdp", "topics")
True
>>> oct(Path(tmp, "textdp").stat().st_mode & 0o777)
'0o700'
>>> del os.environ["XDG_CACHE_HOME"]
>>> if old is not None: os.environ["TEXTDP_CACHE_DIR"] = old
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import hmac
import io
import os
import secrets
import shutil
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal, overload

from .errors import CacheWarning, ParameterError

__all__ = [
    "SHARED_FLAG",
    "USER_SECRET",
    "PrivateDir",
    "PublicFile",
    "allow_shared_files",
    "cache_dir",
    "check_private_dir",
    "check_public_path",
    "check_secure_path",
    "keyed_digest",
    "load_keyed",
    "open_private_dir",
    "open_public",
    "private_dir",
    "public_sha256",
    "read_keyed",
    "read_public_file",
    "shared_files_allowed",
    "state_dir",
    "state_secret",
    "user_secret",
    "verify_keyed",
    "write_keyed",
]

#: where :func:`user_secret` lives, under the cache
USER_SECRET = ("runs", ".salt")
_SECRET_BYTES = 32


def cache_dir(sub: str | None = None, *, create: bool = False) -> Path:
    """The textdp cache directory, or its subdirectory ``sub`` (created only with ``create=True``).

    The cache itself is made with :func:`private_dir` when missing (mode ``0700``)
    and refused (:class:`~textdp.errors.ParameterError`) if another user owns it or
    can write to it. ``create=True`` makes ``sub`` the same way.
    """
    env = os.environ.get("TEXTDP_CACHE_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "textdp"
    what = "the textdp cache directory"
    if base.exists() or base.is_symlink():
        check_private_dir(base, what=what)
    else:
        try:
            private_dir(base, what=what)
        except OSError:  # e.g. a read-only home: the caller's own write fails as it always did
            pass
    if not sub:
        return base
    return private_dir(base / sub, what=what) if create else base / sub


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: O_NONBLOCK: a FIFO planted in place of a file is refused at once (fstat), never waited on
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_MAX_LINKS = 40  # like the kernel's limit on symbolic links in one path


def _check_ancestor(st: os.stat_result, shown: str, path: Path, what: str, me: int) -> None:
    """OpenSSH's ``secure_path`` rule for one folder on the way to ``path``."""
    if st.st_uid not in (0, me):
        raise ParameterError(f"{what} {path}: the folder {shown} on its path is owned by another user (uid "
                             f"{st.st_uid}), who could rename or replace what is inside it; choose a folder whose "
                             "every parent belongs to you or to root")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (st.st_uid == 0 and st.st_mode & stat.S_ISVTX):
        raise ParameterError(f"{what} {path}: the folder {shown} on its path is writable by others (mode "
                             f"{stat.S_IMODE(st.st_mode):o}, not a root-owned sticky folder like /tmp), who could "
                             "rename or replace what is inside it; choose a folder elsewhere")


def _check_own(st: os.stat_result, path: Path, what: str, me: int) -> None:
    """The private folder itself: a folder of this user that nobody else can write to."""
    if not stat.S_ISDIR(st.st_mode):
        raise ParameterError(f"{what} {path} is not a folder")
    if st.st_uid != me:
        raise ParameterError(f"{what} {path} is owned by another user (files in it could be planted); "
                             "choose a folder you own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ParameterError(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}; files in it "
                             "could be planted); use a new folder, or chmod 700 it")


def _check_public(st: os.stat_result, shown: str, path: Path, what: str, me: int) -> None:
    """A user-named file or folder itself: owned by root or this user, writable by nobody else."""
    if st.st_uid not in (0, me):
        raise ParameterError(f"{what} {path}: {shown} is owned by another user (uid {st.st_uid}), who could change "
                             "it at any time")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (stat.S_ISDIR(st.st_mode) and st.st_uid == 0
                                                          and st.st_mode & stat.S_ISVTX):
        raise ParameterError(f"{what} {path}: {shown} is writable by others (mode {stat.S_IMODE(st.st_mode):o}), "
                             "who could change it at any time")


def _stat_or_make(name: str, dir_fd: int, create: bool) -> os.stat_result:
    """The status of ``name`` in the folder ``dir_fd``, not following a link; ``create``: a missing folder made ``0700``."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:  # made meanwhile: checked below like any existing folder
            pass
        else:
            made = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                os.fchmod(made, 0o700)  # whatever the umask
            finally:
                os.close(made)
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _open_public_file(name: str, dir_fd: int, shown: str, path: Path, what: str, me: int) -> int:
    """Open the regular file ``name`` in the folder ``dir_fd`` (``O_NOFOLLOW``) and check it by its descriptor."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)  # O_NOFOLLOW: a link swapped in fails here
    fst = os.fstat(fd)
    try:
        if not stat.S_ISREG(fst.st_mode):
            raise ParameterError(f"{what} {path} is not a regular file")
        _check_public(fst, shown, path, what, me)
    except ParameterError:
        os.close(fd)
        raise
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd


def _check_last(fd: int, names: list[str], path: Path, what: str, me: int, *, public: bool, own: bool) -> None:
    """The last folder of :func:`_walk`, by the rule that applies to it (public, own or ancestor)."""
    if public:
        _check_public(os.fstat(fd), "/" + "/".join(names), path, what, me)
    elif own:
        _check_own(os.fstat(fd), path, what, me)
    else:
        _check_ancestor(os.fstat(fd), "/" + "/".join(names), path, what, me)


def _walk(path: Path, *, what: str, create: bool = False, own: bool = True, public: bool = False,
          open_file: bool = True) -> tuple[int, Path]:
    """Open ``path`` from ``/`` down, one component at a time, checking each; return its descriptor and real path.

    Every folder is opened relative to its parent's descriptor with ``O_NOFOLLOW`` and
    checked through :func:`os.fstat` of that descriptor (owned by root or this user, not
    writable by group or others unless root-owned and sticky), so what is checked is what
    is opened. A symbolic link on the way is followed only if root or this user owns it
    (read through the descriptor of the folder holding it). ``create``: missing folders are
    made ``0700`` relative to their parent's descriptor. ``own``: the last folder must also
    be this user's and writable by nobody else (:func:`check_private_dir`'s rule).
    ``public``: the last component may be a regular file or a folder, owned by root or this
    user and writable by nobody else (:func:`check_public_path`'s rule); a file is opened
    ``O_NOFOLLOW`` relative to its folder's descriptor and that descriptor is returned (with
    ``open_file=False`` it is checked by its status, read relative to that descriptor without
    following a link, and not opened: -1 is returned).
    """
    me = _uid()
    path = Path(path)
    todo = [c for c in reversed(os.path.normpath(os.path.abspath(os.fspath(path))).split("/")) if c]
    fds = [os.open("/", _DIR_FLAGS)]
    names: list[str] = []
    links = 0
    try:
        _check_ancestor(os.fstat(fds[0]), "/", path, what, me)
        while todo:
            name = todo.pop()
            if name == ".":
                continue
            if name == "..":
                if len(fds) > 1:
                    os.close(fds.pop())
                    names.pop()
                continue
            shown = "/" + "/".join([*names, name])
            st = _stat_or_make(name, fds[-1], create)
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (0, me):
                    raise ParameterError(f"{what} {path}: {shown} is a link owned by another user; choose a "
                                         "folder you own")
                links += 1
                if links > _MAX_LINKS:
                    raise ParameterError(f"{what} {path}: too many symbolic links on its path")
                target = os.readlink(name, dir_fd=fds[-1])
                if target.startswith("/"):
                    while len(fds) > 1:
                        os.close(fds.pop())
                    names.clear()
                todo.extend(c for c in reversed(target.split("/")) if c)
                continue
            if not stat.S_ISDIR(st.st_mode):
                if todo:  # an ancestor that is a file: the caller's own write would fail the same way
                    raise NotADirectoryError(20, "not a folder", shown)
                if public and stat.S_ISREG(st.st_mode) and not open_file:  # only checked (an input opens itself)
                    _check_public(st, shown, path, what, me)
                    return -1, Path("/" + "/".join([*names, name]))
                if public and stat.S_ISREG(st.st_mode):
                    return _open_public_file(name, fds[-1], shown, path, what, me), Path("/" + "/".join([*names, name]))
                raise ParameterError(f"{what} {path} is not a folder")
            fd = os.open(name, _DIR_FLAGS, dir_fd=fds[-1])  # O_NOFOLLOW: a link swapped in since fails here
            fds.append(fd)
            names.append(name)
            if todo:  # the last folder is checked below, by the rule that applies to it
                _check_ancestor(os.fstat(fd), shown, path, what, me)
        _check_last(fds[-1], names, path, what, me, public=public, own=own)
        last = fds.pop()
    finally:
        for fd in fds:
            os.close(fd)
    return last, Path("/" + "/".join(names))


def check_secure_path(path: Path, *, what: str = "the folder") -> Path:
    """Refuse ``path`` (an existing folder) unless nobody else can change what it holds; return it resolved.

    OpenSSH's ``StrictModes``/``secure_path`` rule, from ``/`` down: every folder on the
    way, ``path`` included, must be owned by root or this user, and not writable by group
    or others unless it is root-owned and sticky (like ``/tmp``); a symbolic link on the way
    must be owned by root or this user. Each component is opened with ``O_NOFOLLOW``
    relative to its parent's descriptor and checked through that descriptor. A refusal is
    one line (a :class:`~textdp.errors.ParameterError`) naming the folder at fault.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_secure_path(d) == d.resolve()
    True
    >>> (d / "shared").mkdir(); (d / "shared").chmod(0o777)
    >>> check_secure_path(d / "shared" / ".." / "shared")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    textdp.errors.ParameterError: the folder .../shared: the folder .../shared on its path is writable by others ...
    """
    if _uid() < 0:  # pragma: no cover - no POSIX ownership (Windows): nothing to check
        return Path(path).resolve()
    fd, real = _walk(Path(path), what=what, own=False)
    os.close(fd)
    return real


def check_private_dir(path: Path, *, what: str = "the work directory") -> Path:
    """Refuse ``path`` (an existing folder) unless it is safe for private files; return it resolved.

    Safe: every folder on its path passes :func:`check_secure_path`, and ``path`` itself
    is a folder owned by this user that neither group nor others can write to.
    """
    if _uid() < 0:  # pragma: no cover - no POSIX ownership (Windows): nothing to check
        return Path(path).resolve()
    fd, real = _walk(Path(path), what=what)
    os.close(fd)
    return real


def private_dir(path: Path, *, what: str = "the work directory") -> Path:
    """Create ``path`` and its missing parents with mode ``0700``; check it with :func:`check_private_dir`.

    Folders that already exist are never changed, only checked. Prefer
    :func:`open_private_dir`, which keeps the folder open.
    """
    if _uid() < 0:  # pragma: no cover - no POSIX ownership (Windows)
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)
        return Path(path).resolve()
    fd, real = _walk(Path(path), what=what, create=True)
    os.close(fd)
    return real


def open_private_dir(path: Path, *, what: str = "the work directory", create: bool = False) -> PrivateDir:
    """Check ``path`` like :func:`check_private_dir` (created ``0700`` with ``create``) and keep it open.

    The returned :class:`PrivateDir` holds the descriptor that was checked: everything
    inside is created, opened, listed and removed relative to it, so renaming or replacing
    any folder on the path afterwards changes nothing.
    """
    fd, real = _walk(Path(path), what=what, create=create)
    return PrivateDir(fd, real, what=what)


#: the command-line flag that accepts a user-named file others could change (named in every refusal)
SHARED_FLAG = "--allow-shared-files"
_ALLOW_SHARED: contextvars.ContextVar[bool] = contextvars.ContextVar("textdp_allow_shared_files", default=False)


@contextlib.contextmanager
def allow_shared_files(allow: bool = True) -> Iterator[None]:
    """Within the block, :func:`check_public_path` accepts files others can change (``--allow-shared-files``)."""
    token = _ALLOW_SHARED.set(bool(allow))
    try:
        yield
    finally:
        _ALLOW_SHARED.reset(token)


def shared_files_allowed() -> bool:
    """Whether :func:`allow_shared_files` is in force."""
    return _ALLOW_SHARED.get()


@dataclasses.dataclass(frozen=True)
class PublicFile:
    """A user-named public file read once through the descriptor that was checked.

    ``data`` are the bytes every later step uses (the file is never opened by path again),
    ``sha256`` their hash (recorded in the public settings), ``path`` the name as given (for
    messages) and ``real`` the path that was opened.
    """

    path: Path
    real: Path
    data: bytes
    sha256: str

    def text(self) -> str:
        """The bytes as UTF-8 text (a one-line error if they are not)."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"{self.path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _a_stream(path: Path) -> bool:
    """Whether ``path`` is a pipe or a device (``<(zcat ...)``, ``/dev/stdin``): nothing anyone can rename or edit."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def _public_fd(path: Path, what: str, *, open_file: bool = True) -> tuple[int, Path]:
    """Open ``path`` (a file or folder) after checking it and every folder above it; refusals name the flag."""
    try:
        return _walk(Path(path), what=what, own=False, public=True, open_file=open_file)
    except ParameterError as exc:
        msg = str(exc)
        for advice in ("; choose a folder whose every parent belongs to you or to root", "; choose a folder elsewhere",
                       "; choose a folder you own"):
            msg = msg.removesuffix(advice)
        raise ParameterError(f"{msg}; keep it where only you and root can change it, or pass {SHARED_FLAG} if you "
                             "trust every user who can") from None


def check_public_path(path: str | os.PathLike[str], *, what: str = "the file") -> Path:
    """Refuse a user-named file or folder a release depends on unless nobody else can change it; return its real path.

    The rule of :func:`check_secure_path` from ``/`` down (every folder on the way owned by
    root or this user and not writable by others unless root-owned and sticky; a symbolic
    link on the way owned by root or this user), and the file or folder itself owned by root
    or this user and writable by nobody else. A refusal is one line naming the component at
    fault and :data:`SHARED_FLAG`; inside :func:`allow_shared_files` nothing is refused.
    A missing path raises :class:`FileNotFoundError` (the folders above it are checked first).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "words.txt").write_text("a\\n") and None
    >>> check_public_path(d / "words.txt") == (d / "words.txt").resolve()
    True
    >>> (d / "words.txt").chmod(0o666)
    >>> check_public_path(d / "words.txt", what="--vocabulary")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    textdp.errors.ParameterError: --vocabulary .../words.txt: .../words.txt is writable by others (mode 666), ... --allow-shared-files ...
    """
    if _uid() < 0 or shared_files_allowed():  # pragma: no cover - no POSIX ownership (Windows)
        return Path(path).resolve()
    if _a_stream(Path(path)):
        return Path(path)
    fd, real = _public_fd(Path(path), what, open_file=False)  # a file is not opened: its reader opens it once
    if fd >= 0:
        os.close(fd)
    return real


def read_public_file(path: str | os.PathLike[str], *, what: str = "the file") -> PublicFile:
    """Check ``path`` like :func:`check_public_path` and read it once, through the checked descriptor.

    The bytes returned are the ones checked and hashed: nothing reopens the file by its name,
    so a file renamed over it afterwards is never used.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "p.txt").write_text("hi") and None
    >>> f = read_public_file(d / "p.txt")
    >>> f.data, f.sha256[:12]
    (b'hi', '8f434346648f')
    """
    given = Path(path)
    if _uid() < 0 or shared_files_allowed() or _a_stream(given):
        real = given if _a_stream(given) else given.resolve()
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise ParameterError(f"{what} {given} is a folder, not a file")
    else:
        fd, real = _public_fd(given, what)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise ParameterError(f"{what} {given} is a folder, not a file")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    return PublicFile(given, real, data, hashlib.sha256(data).hexdigest())


def open_public(path: str | os.PathLike[str], *, what: str = "the file") -> io.BufferedReader:
    """Check ``path`` like :func:`check_public_path` and return the very descriptor that was checked, open for reading.

    For a loader that reads or memory-maps a large file itself (a ``.npy`` matrix): what it reads is the file that
    was checked, never a file renamed over it afterwards.
    """
    given = Path(path)
    if _uid() < 0 or shared_files_allowed() or _a_stream(given):
        return open(given, "rb")
    fd, _ = _public_fd(given, what)
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise ParameterError(f"{what} {given} is a folder, not a file")
    return os.fdopen(fd, "rb")


def public_sha256(path: str | os.PathLike[str], *, what: str = "the file") -> str:
    """The SHA-256 of a user-named public file, streamed through the descriptor :func:`check_public_path` checked.

    For large files (embeddings) that a loader then converts or maps itself: after the check nobody but you and root
    can change the file, and the hash recorded is of the bytes that were checked.
    """
    given = Path(path)
    if _uid() < 0 or shared_files_allowed() or _a_stream(given):
        fd = os.open(given, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    else:
        fd, _ = _public_fd(given, what)
    with os.fdopen(fd, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class PrivateDir:
    """A private folder opened once (``O_DIRECTORY | O_NOFOLLOW``) after every ancestor was checked.

    Names are relative to the folder (``"a/b"`` walks sub-folders, each opened with
    ``O_NOFOLLOW`` and checked private); no file is ever reached through a path again.
    Files read are opened with ``O_NOFOLLOW`` and refused unless they are regular files of
    this user that nobody else can write to. ``path`` is for messages only.
    """

    def __init__(self, fd: int, path: Path, *, what: str = "the work directory") -> None:
        self.fd, self.path, self.what = fd, Path(path), what

    # -- lifetime
    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> PrivateDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def fileno(self) -> int:
        return self.fd

    # -- navigation
    def _parent(self, name: str, *, create: bool = False) -> tuple[PrivateDir, str]:
        """The folder holding ``name`` (``self``, or a sub-folder opened for the call) and the last component."""
        parts = [p for p in str(name).split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise ParameterError(f"{name!r} is not a name inside {self.path}")
        if len(parts) == 1:
            return self, parts[0]
        return self.sub("/".join(parts[:-1]), create=create), parts[-1]

    def sub(self, name: str, *, create: bool = False) -> PrivateDir:
        """The sub-folder ``name`` (made ``0700`` if missing and ``create``), opened and checked private."""
        cur: PrivateDir = self
        me = _uid()
        for part in [p for p in str(name).split("/") if p]:
            if part in (".", ".."):
                raise ParameterError(f"{name!r} is not a name inside {self.path}")
            made = False
            if create:
                try:
                    os.mkdir(part, 0o700, dir_fd=cur.fd)
                    made = True
                except FileExistsError:  # an existing folder is only checked, never changed
                    pass
            try:
                fd = os.open(part, _DIR_FLAGS, dir_fd=cur.fd)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                raise ParameterError(f"{self.what} {cur.path / part} is not a folder (or is a link); delete it "
                                     "and run again") from None
            nxt = PrivateDir(fd, cur.path / part, what=self.what)
            st = os.fstat(fd)
            if made and st.st_uid == me and stat.S_IMODE(st.st_mode) != 0o700:
                os.fchmod(fd, 0o700)  # whatever the umask
                st = os.fstat(fd)
            try:
                _check_own(st, nxt.path, self.what, me)
            except ParameterError:
                nxt.close()
                raise
            if cur is not self:
                cur.close()
            cur = nxt
        if cur is self:
            raise ParameterError(f"{name!r} is not a name inside {self.path}")
        return cur

    def exists(self, name: str) -> bool:
        """Whether ``name`` exists (a link counts; it is never followed)."""
        try:
            parent, last = self._parent(name)
        except (FileNotFoundError, ParameterError):
            return False
        try:
            os.stat(last, dir_fd=parent.fd, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False
        finally:
            if parent is not self:
                parent.close()

    def listdir(self) -> list[str]:
        """The names in the folder (through its descriptor)."""
        return sorted(os.listdir(self.fd))

    # -- files
    def open_read(self, name: str) -> io.BufferedReader:
        """Open the file ``name`` for reading (``O_NOFOLLOW``; a regular file of this user, not writable by others).

        Raises :class:`FileNotFoundError` if it is absent and
        :class:`~textdp.errors.ParameterError` if it is anything else.
        """
        parent, last = self._parent(name)
        try:
            try:
                fd = os.open(last, _FILE_FLAGS, dir_fd=parent.fd)
            except FileNotFoundError:
                raise
            except OSError:
                raise ParameterError(f"{parent.path / last} in {self.what} is a link or cannot be read; delete it "
                                     "and run again") from None
        finally:
            if parent is not self:
                parent.close()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != _uid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            os.close(fd)
            raise ParameterError(f"{self.path / name} in {self.what} is not a private file of yours (another owner, "
                                 "writable by others, or not a regular file); delete it and run again")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def read_bytes(self, name: str) -> bytes:
        """The bytes of ``name``, read once through :meth:`open_read`."""
        with self.open_read(name) as fh:
            return fh.read()

    @overload
    def writer(self, name: str, mode: Literal["wb"] = "wb") -> contextlib.AbstractContextManager[IO[bytes]]: ...

    @overload
    def writer(self, name: str, mode: Literal["w"]) -> contextlib.AbstractContextManager[IO[str]]: ...

    def writer(self, name: str, mode: str = "wb") -> contextlib.AbstractContextManager[IO[bytes] | IO[str]]:
        """Write ``name`` atomically (``0600``): a temporary file beside it, renamed over it on success only.

        The temporary file is created ``O_EXCL | O_NOFOLLOW`` and both the creation and the
        rename are relative to the folder's descriptor.
        """
        return self._writer(name, mode)

    @contextlib.contextmanager
    def _writer(self, name: str, mode: str) -> Iterator[IO[bytes] | IO[str]]:
        """:meth:`writer`'s work (one writer for both modes)."""
        parent, last = self._parent(name, create=True)
        tmp = f".{last}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=parent.fd)
            try:
                fh = os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8", newline="\n")
                with fh:
                    yield fh
                    fh.flush()
                    os.fchmod(fh.fileno(), 0o600)
                    os.fsync(fh.fileno())
                os.replace(tmp, last, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=parent.fd)
                raise
        finally:
            if parent is not self:
                parent.close()

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` atomically (:meth:`writer`)."""
        with self.writer(name) as fh:
            fh.write(data)

    def remove(self, name: str) -> None:
        """Delete the file, link or folder tree ``name`` (never following a link; absent is fine)."""
        try:
            parent, last = self._parent(name)
        except FileNotFoundError:
            return
        try:
            st = os.stat(last, dir_fd=parent.fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(last, dir_fd=parent.fd)  # symlink-attack safe: works through descriptors
            else:
                os.unlink(last, dir_fd=parent.fd)
        except FileNotFoundError:
            pass
        finally:
            if parent is not self:
                parent.close()


def state_dir(sub: str | None = None) -> Path:
    """textdp's per-user STATE folder (made ``0700``, checked like the cache), or its subfolder ``sub`` (made too).

    ``$TEXTDP_STATE_DIR`` if set, else ``$XDG_STATE_HOME/textdp``, else ``~/.local/state/textdp``. It holds what
    must outlive the cache: the privacy ledgers' anchors (``ledger-anchors/``) and their key (``.key``). Nothing
    textdp deletes (``runs clean``, a cache wipe, ``rebuild_cache``) is under it.

    >>> import os, tempfile
    >>> old = os.environ.get("TEXTDP_STATE_DIR")
    >>> os.environ["TEXTDP_STATE_DIR"] = tmp = tempfile.mkdtemp() + "/state"
    >>> state_dir("x") == Path(tmp, "x"), oct(Path(tmp).stat().st_mode & 0o777)
    (True, '0o700')
    >>> os.environ.pop("TEXTDP_STATE_DIR") and None
    >>> if old is not None: os.environ["TEXTDP_STATE_DIR"] = old
    """
    env = os.environ.get("TEXTDP_STATE_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")) / "textdp"
    base = private_dir(base, what="the textdp state folder")
    return private_dir(base / sub, what="the textdp state folder") if sub else base


def state_secret() -> bytes:
    """The key of the STATE folder (32 random bytes in ``<state>/.key``, ``0600``): :func:`user_secret`'s rule."""
    return _folder_secret(state_dir(), ".key", what="the textdp state folder")


def user_secret() -> bytes:
    """This user's secret key: 32 random bytes in ``<cache>/runs/.salt`` (mode ``0600``, made once).

    The folder is made and checked with :func:`open_private_dir` (``0700``, owned by this
    user, every folder above it checked) and the key is read and written through its
    descriptor (``O_NOFOLLOW``). The file is created race-free (written aside, then
    hard-linked into place, which fails if another process made it first: both then use
    the same key); a file of the wrong size is replaced.
    """
    cache_dir()  # checks (or makes) the cache itself
    return _folder_secret(cache_dir() / USER_SECRET[0], USER_SECRET[1], what="the textdp cache directory")


def _folder_secret(where: Path, name: str, *, what: str) -> bytes:
    """32 random bytes in ``where/name`` (``0600``), made once, race-free, through the checked folder's descriptor."""
    with open_private_dir(where, what=what, create=True) as folder:
        for _ in range(3):
            try:
                data = folder.read_bytes(name)
            except FileNotFoundError:
                data = b""
            if len(data) == _SECRET_BYTES:
                return data
            tmp = f".salt-{secrets.token_hex(8)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder.fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(secrets.token_bytes(_SECRET_BYTES))
                if data:  # a damaged key (wrong size): replace it
                    os.replace(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
                else:
                    with contextlib.suppress(FileExistsError):  # made meanwhile by another process: use that one
                        os.link(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd, follow_symlinks=False)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=folder.fd)
        raise ParameterError(f"cannot create the secret key {folder.path / name}; check that the textdp cache is "
                             "writable")


def keyed_digest(purpose: str, message: bytes) -> str:
    """HMAC-SHA256 of ``message`` under :func:`user_secret`, separated by ``purpose`` (hex).

    Only this user can recompute it: a digest of private data made this way confirms
    no guess of that data to anyone else.
    """
    mac = hmac.new(user_secret(), purpose.encode() + b"\0", "sha256")
    mac.update(message)
    return mac.hexdigest()


def write_keyed(folder: PrivateDir, name: str, data: bytes, purpose: str) -> None:
    """Write ``data`` to ``name`` with its keyed digest in ``name + ".hmac"`` (both atomic, ``0600``).

    The digest is :func:`keyed_digest` of the name and the bytes: only this user can make
    one, so a cached file planted or edited by anyone else is refused by :func:`read_keyed`.
    """
    folder.remove(name + ".hmac")
    folder.write_bytes(name, data)
    folder.write_bytes(name + ".hmac", keyed_digest(purpose, name.encode() + b"\0" + data).encode())


def read_keyed(folder: PrivateDir, name: str, purpose: str) -> bytes | None:
    """The bytes of ``name`` (read once, through ``folder``), or ``None`` if absent or not keyed by this user."""
    try:
        data, mac = folder.read_bytes(name), folder.read_bytes(name + ".hmac")
    except (OSError, ParameterError):
        return None
    want = keyed_digest(purpose, name.encode() + b"\0" + data)
    return data if hmac.compare_digest(mac.decode("ascii", "replace"), want) else None


def load_keyed(folder: PrivateDir, name: str, purpose: str, *, what: str) -> bytes | None:
    """:func:`read_keyed`, with a one-line :class:`~textdp.errors.CacheWarning` when ``name``'s MAC is wrong.

    ``None`` when the file is absent, has no MAC (an older textdp's file, or a plant: silently)
    or a MAC that does not verify (edited, planted, or copied from another cache: warned); the
    caller computes it again and writes it with its MAC.
    """
    if not folder.exists(name):
        return None
    data = read_keyed(folder, name, purpose)
    if data is None and folder.exists(name + ".hmac"):  # without one: an older layout (or a plant), silently redone
        warnings.warn(f"{what} {folder.path / name} was not written by your textdp (its keyed MAC is "
                      "wrong: planted, edited or copied from elsewhere); it is ignored and computed again",
                      CacheWarning, stacklevel=3)
    return data


def verify_keyed(folder: PrivateDir, name: str, data: bytes, purpose: str) -> bool:
    """Whether ``data`` (the bytes of ``name``, already read once) carry this user's keyed MAC (``name + ".hmac"``).

    For a file whose bytes the caller must read itself (to hash or map them through one
    descriptor): the MAC is checked on those very bytes, never on a second read.
    """
    try:
        mac = folder.read_bytes(name + ".hmac")
        want = keyed_digest(purpose, name.encode() + b"\0" + data)
    except (OSError, ParameterError):
        return False
    return hmac.compare_digest(mac.decode("ascii", "replace"), want)
