"""Model folders: symbolic links are followed only inside the folder (issue 28 §3).

A model folder (a textdp rewriter's ``model.pt``/``vocab.txt``/``config.json``/``card.json``, or a
Hugging Face directory, or one ``.gguf`` file) is read by path, by textdp or by ``transformers``.
Before any file is read, :func:`check_model_folder` decides what a link may do:

* the folder (or the model file) named by the user may itself be a symbolic link only if this
  user or root owns the link (anyone else could point it at another model at any time); it is
  resolved once and the real path is what gets loaded;
* inside the real folder, a symbolic link is refused unless it resolves to a path inside that
  folder: a weights file, config or tokenizer file that points elsewhere (another user's file, a
  file that changes after the check, the Hugging Face hub cache's ``../../blobs``) is a one-line
  error that names the link and says how to make a folder of real files (``cp -rL``).

The model's bytes themselves are vouched for elsewhere: a textdp model's files by the hashes
in its card (:func:`textdp.generation.training.verify_model_files`), a language model's
weights by the SHA-256 named in every record.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ParameterError

__all__ = ["check_model_folder"]


def check_model_folder(path: str | os.PathLike[str], *, what: str = "model folder") -> Path:
    """The real path of the model folder or file ``path``, after refusing links that leave it.

    Raises :class:`~textdp.errors.ParameterError` (one line) for a link to the folder owned by
    another user, or a link inside the folder that resolves outside it. A missing path is
    returned as given (the loader says what is missing).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "config.json").write_text("{}") and None
    >>> (d / "vocab.txt").symlink_to(d / "config.json")  # inside the folder: followed
    >>> check_model_folder(d) == d.resolve()
    True
    >>> (d / "model.pt").symlink_to(Path(tempfile.mkdtemp()) / "weights.pt")  # outside: refused
    >>> check_model_folder(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    textdp.errors.ParameterError: model folder ...: model.pt is a link to .../weights.pt, outside the folder; ...
    """
    from .._cache import check_public_path, shared_files_allowed

    given = Path(path)
    try:
        ls = os.lstat(given)
    except FileNotFoundError:
        return given
    if stat.S_ISLNK(ls.st_mode) and ls.st_uid not in (0, os.geteuid()) and not shared_files_allowed():
        raise ParameterError(f"{what} {given} is a link owned by another user (they could point it at another model "
                             "at any time); give the real path, or pass --allow-shared-files")
    check_public_path(given, what=what)  # every folder above it, and the folder or file itself (issue 39 §3)
    real = given.resolve()
    if not real.is_dir():
        return real
    for top, dirs, files in os.walk(real, followlinks=False):
        for name in (*dirs, *files):
            p = Path(top, name)
            if not p.is_symlink():
                st = p.lstat()
                if (not shared_files_allowed() and (st.st_uid not in (0, os.geteuid())
                                                    or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))):
                    raise ParameterError(f"{what} {given}: {p.relative_to(real)} is owned by another user or writable "
                                         f"by others (mode {stat.S_IMODE(st.st_mode):o}), who could change the model; "
                                         "chmod go-w it, or pass --allow-shared-files if you trust them")
                continue
            target = p.resolve()
            if target != real and real not in target.parents:
                raise ParameterError(f"{what} {given}: {p.relative_to(real)} is a link to {target}, outside the "
                                     "folder; links may only point inside a model folder (make a copy of real files, "
                                     "e.g. cp -rL FOLDER NEW)")
    return real
