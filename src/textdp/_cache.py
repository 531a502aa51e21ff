"""The one textdp cache directory, and private folders that nobody else can plant files in.

Every cached artefact (converted embeddings, approximate-decoder indexes, sampled
sensitivities, the private state of partitioned runs) lives under :func:`cache_dir`:
``$TEXTDP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/textdp``, else ``~/.cache/textdp``.

:func:`private_dir` creates a folder (and every missing parent) with mode ``0700``,
and refuses one that another user owns or can write to (group/other-writable, or
inside a folder others can write to without the sticky bit): a folder someone else
prepared could hold planted files (issue 19: a planted vocabulary made a release copy
its input). :func:`cache_dir` applies it to the cache itself: created ``0700`` when
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
import hmac
import os
import secrets
import stat
from pathlib import Path

from .errors import ParameterError

__all__ = ["USER_SECRET", "cache_dir", "check_private_dir", "keyed_digest", "private_dir", "user_secret"]

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


def check_private_dir(path: Path, *, what: str = "the work directory") -> Path:
    """Refuse ``path`` (an existing folder) unless it is safe for private files; return it resolved.

    Safe: a real folder (a symbolic link is followed only if this user owns the link),
    owned by this user, not writable by group or others, in a parent folder that
    others cannot write to (or that has the sticky bit, like ``/tmp``).
    """
    path = Path(path)
    me = _uid()
    if me < 0:  # pragma: no cover - no POSIX ownership (Windows): nothing to check
        return path.resolve()
    ls = os.lstat(path)
    if stat.S_ISLNK(ls.st_mode) and ls.st_uid != me:
        raise ParameterError(f"{what} {path} is a link owned by another user; choose a folder you own")
    real = path.resolve()
    st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise ParameterError(f"{what} {path} is not a folder")
    if st.st_uid != me:
        raise ParameterError(f"{what} {path} is owned by another user (files in it could be planted); "
                             "choose a folder you own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ParameterError(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}; files in it "
                             "could be planted); use a new folder, or chmod 700 it")
    parent = os.stat(real.parent)
    if parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not parent.st_mode & stat.S_ISVTX:
        raise ParameterError(f"{what} {path} is in {real.parent}, which others can write to (they could replace "
                             "it); choose a folder elsewhere")
    return real


def private_dir(path: Path, *, what: str = "the work directory") -> Path:
    """Create ``path`` and its missing parents with mode ``0700``; check it with :func:`check_private_dir`.

    Folders that already exist are never changed, only checked (``path`` itself).
    """
    path = Path(path)
    missing = []
    p = path
    while not (p.exists() or p.is_symlink()) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # created meanwhile: checked below like any existing folder
            continue
        os.chmod(d, 0o700)  # whatever the umask
    return check_private_dir(path, what=what)


def user_secret() -> bytes:
    """This user's secret key: 32 random bytes in ``<cache>/runs/.salt`` (mode ``0600``, made once).

    The folder is made and checked with :func:`cache_dir` (``0700``, owned by this user). The
    file is created race-free (written aside, then hard-linked into place, which fails if
    another process made it first: both then use the same key); a file of the wrong size
    is replaced.
    """
    folder = cache_dir(USER_SECRET[0], create=True)
    path = folder / USER_SECRET[1]
    for _ in range(3):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) == _SECRET_BYTES:
            return data
        tmp = folder / f".salt-{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(_SECRET_BYTES))
            if data:  # a damaged key (wrong size): replace it
                os.replace(tmp, path)
            else:
                with contextlib.suppress(FileExistsError):  # made meanwhile by another process: use that one
                    os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    raise ParameterError(f"cannot create the secret key {path}; check that the textdp cache is writable")


def keyed_digest(purpose: str, message: bytes) -> str:
    """HMAC-SHA256 of ``message`` under :func:`user_secret`, separated by ``purpose`` (hex).

    Only this user can recompute it: a digest of private data made this way confirms
    no guess of that data to anyone else.
    """
    mac = hmac.new(user_secret(), purpose.encode() + b"\0", "sha256")
    mac.update(message)
    return mac.hexdigest()
