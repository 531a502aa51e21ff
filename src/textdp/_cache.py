"""The one textdp cache directory, and private folders that nobody else can plant files in.

Every cached artefact (converted embeddings, approximate-decoder indexes, sampled
sensitivities, the private state of partitioned runs) lives under :func:`cache_dir`:
``$TEXTDP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/textdp``, else ``~/.cache/textdp``.

:func:`private_dir` creates a folder (and every missing parent) with mode ``0700``,
and refuses one that another user owns or can write to (group/other-writable, or
inside a folder others can write to without the sticky bit): a folder someone else
prepared could hold planted files (issue 19: a planted vocabulary made a release copy
its input). ``cache_dir(sub, create=True)`` applies it to the cache and its subfolder.

>>> import os
>>> old = os.environ.pop("TEXTDP_CACHE_DIR", None)
>>> os.environ["XDG_CACHE_HOME"] = "/tmp/xdg"
>>> str(cache_dir("topics"))
'/tmp/xdg/textdp/topics'
>>> del os.environ["XDG_CACHE_HOME"]
>>> if old is not None: os.environ["TEXTDP_CACHE_DIR"] = old
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import ParameterError

__all__ = ["cache_dir", "check_private_dir", "private_dir"]


def cache_dir(sub: str | None = None, *, create: bool = False) -> Path:
    """The textdp cache directory, or its subdirectory ``sub``.

    ``create=True`` makes it (and the cache itself) with :func:`private_dir`: mode
    ``0700``, owned by this user, refused if anyone else could write to it.
    """
    env = os.environ.get("TEXTDP_CACHE_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "textdp"
    if not create:
        return base / sub if sub else base
    private_dir(base, what="the textdp cache directory")
    return private_dir(base / sub, what="the textdp cache directory") if sub else base


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
