"""Issue 28, section 1: no file inside private state is opened by path after its check.

Every ``open``, ``os.open``, ``np.load`` and ``mmap`` made by a partitioned release (the CLI,
local engine, a gzip input spilled to the work dir, a private report, embeddings loaded from the
verified cache) is recorded. Each one that touches the work dir or the cache must go through a
checked descriptor: ``os.open`` relative to a folder's descriptor (``dir_fd``) with
``O_NOFOLLOW``; no ``open``/``np.load`` of a path inside them; and a memory map only of a
descriptor opened that way, of a file of this user that nobody else can write. On a779fc6 the
worker hashed ``vectors.npy`` through one open and then memory-mapped the path again.
"""

from __future__ import annotations

import builtins
import gzip
import io
import json
import mmap
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.engines import jobs

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]
runner = CliRunner()


class _Recorder:
    """Wraps open, io.open, os.open, np.load and mmap.mmap; records every call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, dict[str, object]]] = []
        self.fd_opened_at: dict[int, bool] = {}  # fd -> opened relative to a descriptor with O_NOFOLLOW
        real_open, real_os_open, real_load, real_mmap = builtins.open, os.open, np.load, mmap.mmap

        def rec_open(file, *a, **k):
            if not isinstance(file, int):
                self.calls.append(("open", os.path.abspath(os.fspath(file)), {}))
            return real_open(file, *a, **k)

        def rec_os_open(path, flags, mode=0o777, *, dir_fd=None):
            fd = real_os_open(path, flags, mode, dir_fd=dir_fd)
            where = os.readlink(f"/proc/self/fd/{fd}")
            caller = Path(sys._getframe(1).f_code.co_filename).name
            self.calls.append(("os.open", where, {"dir_fd": dir_fd, "flags": flags, "name": os.fspath(path),
                                                  "caller": caller}))
            self.fd_opened_at[fd] = dir_fd is not None and bool(flags & os.O_NOFOLLOW)
            return fd

        def rec_load(file, *a, **k):
            name = os.path.abspath(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else type(file).__name__
            self.calls.append(("np.load", name, {}))
            return real_load(file, *a, **k)

        def rec_mmap(fileno, *a, **k):
            st = os.fstat(fileno)
            self.calls.append(("mmap", os.readlink(f"/proc/self/fd/{fileno}"),
                               {"fd": fileno, "by_descriptor": self.fd_opened_at.get(fileno, False),
                                "uid": st.st_uid, "mode": stat.S_IMODE(st.st_mode)}))
            return real_mmap(fileno, *a, **k)

        monkeypatch.setattr(builtins, "open", rec_open)
        monkeypatch.setattr(io, "open", rec_open)
        monkeypatch.setattr(os, "open", rec_os_open)
        monkeypatch.setattr(np, "load", rec_load)
        monkeypatch.setattr(mmap, "mmap", rec_mmap)


def _inside(path: str, *folders: Path) -> bool:
    return any(path == str(f) or path.startswith(str(f) + "/") for f in folders)


def _setup(tmp: Path) -> list[str]:
    rng = np.random.default_rng(3)
    texts = [" ".join(WORDS[j] for j in rng.integers(0, 300, 12)) for _ in range(24)]
    (tmp / "plain.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n"
                                             for i, t in enumerate(texts[:12])))
    with gzip.open(tmp / "packed.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps({"id": f"g{i}", "text": t}) + "\n" for i, t in enumerate(texts[12:])))
    vec = rng.standard_normal((300, 6))
    (tmp / "toy.txt").write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vec)))
    return ["obfuscate", str(tmp / "plain.jsonl"), str(tmp / "packed.jsonl.gz"), "-e", "1", "-n", "6",
            "--embeddings", str(tmp / "toy.txt"), "--stop-words", "none", "--seed", "5", "--engine", "local",
            "--partitions", "3", "--work-dir", str(tmp / "wd")]


def test_every_open_on_the_release_path_goes_through_a_checked_descriptor(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    args = _setup(tmp_path)
    first = runner.invoke(app, [*args, "-o", str(tmp_path / "warm")])  # converts the embeddings into the cache
    assert first.exit_code == 0, first.output
    jobs._load_vocabulary.cache_clear()  # the worker loads its vocabulary again, under the recorder
    jobs._fitted.cache_clear()
    rec = _Recorder(monkeypatch)
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "out"), "--private-report", str(tmp_path / "rep.jsonl")])
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    private = (tmp_path / "wd", cache.resolve())
    by_path = [c for c in rec.calls if c[0] in ("open", "np.load") and _inside(c[1], *private)]
    assert by_path == [], "opened by path inside private state"
    os_opens = [c for c in rec.calls if c[0] == "os.open" and _inside(c[1], *private)]
    # shutil.rmtree's descriptor-based walk (dir_fd=) compares lstat before and fstat after each open
    # (os.path.samestat) instead of passing O_NOFOLLOW: the same guarantee, so it is accepted
    bad = [c for c in os_opens if c[2]["dir_fd"] is None
           or not (c[2]["flags"] & os.O_NOFOLLOW or c[2]["caller"] == "shutil.py")]
    assert bad == [], "os.open inside private state without a checked folder descriptor and O_NOFOLLOW"
    names = {Path(c[1]).name for c in os_opens}
    # not vacuous: the run state, the lock, the spill, the vocabulary, the report pieces and the cached
    # embeddings were all reached, each through a descriptor
    for name in ("state.json", "run.lock", "input-00001.jsonl", "vectors.npy", "words.txt", "part-00000.jsonl",
                 "meta.json"):
        assert name in names or any(n.startswith(f".{name}.") for n in names), name
    maps = [c for c in rec.calls if c[0] == "mmap"]
    assert maps, "the cached embeddings are memory-mapped"
    for _, path, info in maps:
        assert _inside(path, cache.resolve()) and path.endswith("/vectors.npy")
        assert info["by_descriptor"] and info["uid"] == os.geteuid() and not info["mode"] & 0o022
    loads = [c for c in rec.calls if c[0] == "np.load"]
    assert loads and all(c[1] == "BytesIO" or not _inside(c[1], *private) for c in loads)
    assert not (tmp_path / "wd").exists()  # and the run cleaned up after itself
