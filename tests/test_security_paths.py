"""Issue 28, section 1: every ancestor of a private folder is checked, and the folder is used by descriptor.

``check_private_dir`` used to check the folder and its immediate parent only: an attacker
who owned (or could write) any folder further up renamed the victim's folder away and put
their own tree in its place. Now every component from ``/`` down passes OpenSSH's
``secure_path`` rule, and :class:`textdp._cache.PrivateDir` works through the descriptor it
checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from textdp._cache import check_private_dir, check_secure_path, open_private_dir, private_dir
from textdp.errors import ParameterError

root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="giving a folder to another user (chown) needs root")
NOBODY = 65534


def _one_line(exc: pytest.ExceptionInfo[ParameterError]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_an_ancestor_writable_by_others_is_refused_and_named(tmp_path, mode):
    shared = tmp_path / "shared"
    (shared / "sub" / "wd").mkdir(parents=True, mode=0o700)
    shared.chmod(mode)  # group or others could rename sub away (no sticky bit)
    with pytest.raises(ParameterError) as exc:
        check_private_dir(shared / "sub" / "wd")
    msg = _one_line(exc)
    assert f"the folder {shared} on its path is writable by others" in msg and f"mode {mode:o}" in msg


def test_a_sticky_folder_is_accepted_only_when_root_owns_it(tmp_path):
    sticky = tmp_path / "sticky"
    (sticky / "wd").mkdir(parents=True, mode=0o700)
    sticky.chmod(0o1777)
    if os.geteuid() == 0:
        assert check_private_dir(sticky / "wd") == (sticky / "wd").resolve()  # like /tmp
        os.chown(sticky, NOBODY, NOBODY)
        with pytest.raises(ParameterError, match=f"{sticky} on its path is owned by another user"):
            check_private_dir(sticky / "wd")
    else:  # the user's own sticky folder: others can still create a squat in it
        with pytest.raises(ParameterError, match="not a root-owned sticky folder"):
            check_private_dir(sticky / "wd")


@root_only
def test_an_ancestor_owned_by_another_user_is_refused_and_named(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "mine" / "wd").mkdir(parents=True, mode=0o700)
    theirs.chmod(0o755)
    os.chown(theirs, NOBODY, NOBODY)  # mode 0755, but its owner can rename "mine"
    with pytest.raises(ParameterError) as exc:
        check_private_dir(theirs / "mine" / "wd")
    assert f"the folder {theirs} on its path is owned by another user (uid {NOBODY})" in _one_line(exc)
    with pytest.raises(ParameterError, match="owned by another user"):
        check_secure_path(theirs / "mine")


@root_only
def test_a_link_on_the_path_is_followed_only_if_root_or_the_user_owns_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    mine = tmp_path / "mine-link"
    mine.symlink_to(real)
    assert check_private_dir(mine) == real.resolve()
    theirs = tmp_path / "their-link"
    theirs.symlink_to(real)
    os.lchown(theirs, NOBODY, NOBODY)
    with pytest.raises(ParameterError, match="is a link owned by another user"):
        check_private_dir(theirs)


def test_the_folder_itself_must_be_private(tmp_path):
    d = tmp_path / "wd"
    d.mkdir(mode=0o700)
    d.chmod(0o770)
    with pytest.raises(ParameterError, match=r"is writable by others \(mode 770"):
        check_private_dir(d)
    assert check_secure_path(tmp_path) == tmp_path.resolve()
    with pytest.raises(ParameterError, match="is not a folder"):
        check_private_dir(Path(__file__))


def test_private_dir_creates_every_missing_folder_0700_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        made = private_dir(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", made):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_renaming_the_folder_after_it_was_opened_changes_nothing(tmp_path):
    """Everything goes through the descriptor: a swapped tree at the old path is never read or written."""
    wd = tmp_path / "sub" / "wd"
    with open_private_dir(wd, create=True) as d:
        d.write_bytes("vocabulary/words.txt", b"real\n")
        (tmp_path / "sub").rename(tmp_path / "moved")
        (tmp_path / "sub" / "wd" / "vocabulary").mkdir(parents=True)  # the attacker's tree in its place
        (tmp_path / "sub" / "wd" / "vocabulary" / "words.txt").write_bytes(b"planted\n")
        assert d.read_bytes("vocabulary/words.txt") == b"real\n"
        d.write_bytes("report/piece.jsonl", b"private\n")
        assert sorted(d.listdir()) == ["report", "vocabulary"]
        d.remove("vocabulary")
    assert (tmp_path / "moved" / "wd" / "report" / "piece.jsonl").read_bytes() == b"private\n"
    assert not (tmp_path / "moved" / "wd" / "vocabulary").exists()
    assert (tmp_path / "sub" / "wd" / "vocabulary" / "words.txt").read_bytes() == b"planted\n"
    assert not (tmp_path / "sub" / "wd" / "report").exists()


def test_links_and_foreign_files_inside_are_never_followed_or_trusted(tmp_path):
    wd = tmp_path / "wd"
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not yours to read through the work dir")
    with open_private_dir(wd, create=True) as d:
        (wd / "vectors.npy").symlink_to(secret)
        with pytest.raises(ParameterError, match="is a link"):
            d.read_bytes("vectors.npy")
        (wd / "sub").symlink_to(tmp_path)
        with pytest.raises(ParameterError, match="is not a folder"):
            d.sub("sub")
        d.remove("sub")
        d.remove("vectors.npy")
        assert secret.exists() and not (wd / "sub").exists()
        (wd / "words.txt").write_text("x")
        (wd / "words.txt").chmod(0o666)
        with pytest.raises(ParameterError, match="not a private file of yours"):
            d.read_bytes("words.txt")
