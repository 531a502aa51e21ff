"""Issue 39, item 3: the inventory of every file a release opens, and how.

Every ``open``, ``io.open``, ``os.open``, ``np.load``, ``Path.read_text``/``read_bytes`` and
``mmap`` of a release is seen by a ``sys.addaudithook`` hook (the interpreter's ``open`` and
``mmap.__new__`` audit events, in every thread), on each path that runs fast: ``obfuscate`` on
the single, local and Dask engines, ``topics`` with its sensitivity cache, ``release()``, and ER-AE rewriting
through ``release()`` on the single and local engines.
Each file opened must be one of:

* **private state through a checked descriptor**: a name relative to a folder descriptor of the
  descriptor layer (``textdp._cache``, the ledger's and the run state's helpers, ``shutil.rmtree``'s
  descriptor walk), opened ``O_NOFOLLOW``; a descriptor already open (``os.fdopen``); a memory map of
  a file in the cache that is this user's and nobody else can write;
* **a user-named input**, opened by the input layer (``textdp.engines.plan``) or the one reader
  (``textdp.io``) **once** per run; a partitioned run's workers re-open a JSONL input through their
  own descriptor and refuse bytes whose hash differs (``_segment_bytes``);
* **an output** the user named, written (the release, its settings, manifest and parts, the
  private report);
* **a public file the user named** (the embeddings source, a model folder);
* **a public package file**: the interpreter, site-packages (the embeddings package among them),
  textdp's own modules, ``/proc/self`` and ``/etc`` (what Python and its libraries read).

A new code path that opens a file any other way (by path inside private state, an input read
twice, a cache read with ``read_text``) fails here, naming the file and the caller.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import sys
import sysconfig
import types
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import textdp
from textdp.cli import app

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]
runner = CliRunner()

# -- the recorder: one audit hook for the session (hooks cannot be removed), active only inside ``_traced``
_EVENTS: list[tuple[str, object, int, list[tuple[str, str]]]] = []
_ON = [False]
_SKIP = {"contextlib.py", "<frozen os>", "pathlib.py", "_bootstrap_external", "<frozen importlib._bootstrap_external>"}


def _hook(event: str, args: tuple) -> None:
    if not _ON[0] or event not in ("open", "mmap.__new__"):
        return
    frames: list[tuple[str, str]] = []
    f: types.FrameType | None = sys._getframe(1)
    while f is not None and len(frames) < 8:
        frames.append((f.f_code.co_filename, f.f_code.co_name))
        f = f.f_back
    if event == "mmap.__new__":
        fd = int(args[0])
        try:
            target, st = os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd)
        except OSError:
            target, st = f"<fd {fd}>", None
        _EVENTS.append(("mmap", target, -1 if st is None else (st.st_uid << 16) | stat.S_IMODE(st.st_mode), frames))
        return
    path, _mode, flags = args
    _EVENTS.append(("open", path, flags if isinstance(flags, int) else 0, frames))


sys.addaudithook(_hook)


@contextmanager
def _traced() -> Iterator[list[tuple[str, object, int, list[tuple[str, str]]]]]:
    start = len(_EVENTS)
    _ON[0] = True
    out: list[tuple[str, object, int, list[tuple[str, str]]]] = []
    try:
        yield out
    finally:
        _ON[0] = False
        out.extend(_EVENTS[start:])
        del _EVENTS[start:]


# -- the rules -------------------------------------------------------------------------------------------
#: modules whose opens are relative to a checked folder descriptor (``dir_fd``), each with ``O_NOFOLLOW``
DESCRIPTOR_LAYER = {"_cache.py", "ledger.py", "workdir.py"}
PUBLIC_ROOTS = tuple(sorted({os.path.realpath(p) for p in (
    sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"],
    str(Path(textdp.__file__).resolve().parent))}))
SYSTEM_ROOTS = ("/proc/self/", "/proc/", "/sys/", "/etc/", "/dev/null", "/dev/urandom", "/usr/share/", "/usr/lib/")
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT


@dataclass
class Run:
    """What the traced run may touch: its inputs, outputs, the cache, and public files the user named."""

    inputs: list[Path]
    outputs: list[Path]  # files or folders the run writes
    cache: Path
    public: list[Path] = field(default_factory=list)


def _caller(frames: list[tuple[str, str]]) -> tuple[str, str]:
    """The first frame that is not the os/io/pathlib/contextlib glue: (module file name, function)."""
    for filename, func in frames:
        name = Path(filename).name
        if name not in _SKIP and not filename.startswith("<frozen"):
            return name, func
    return Path(frames[0][0]).name if frames else "?", frames[0][1] if frames else "?"


_TEXTDP = str(Path(textdp.__file__).resolve().parent) + "/"


def _textdp_caller(frames: list[tuple[str, str]]) -> tuple[str, str]:
    """The innermost textdp frame (module file name, function): who asked for the file, through any library."""
    for filename, func in frames:
        if os.path.realpath(filename).startswith(_TEXTDP):
            return Path(filename).name, func
    return "?", "?"


def _inside(path: str, root: Path | str) -> bool:
    root = os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _is_output(path: str, output: Path) -> bool:
    """``path`` is inside the output folder, or the output file or the hidden temporary file written beside it."""
    out = Path(os.path.realpath(output.parent)) / output.name
    name = os.path.basename(path)
    return _inside(path, out) or (os.path.dirname(path) == str(out.parent)
                                  and (name == out.name or name.startswith(f".{out.name}.")))


def _classify(kind: str, path: object, flags: int, frames: list[tuple[str, str]], run: Run) -> str | None:
    """The category of one open, or None if it is not allowed."""
    module, func = _caller(frames)
    if kind == "mmap":
        if isinstance(path, str) and any(_inside(os.path.realpath(path), r) for r in PUBLIC_ROOTS):
            return "public package file, memory-mapped"  # e.g. the default GloVe matrix of its package
        ok = isinstance(path, str) and _inside(path, run.cache) and flags >= 0 and (flags >> 16) == os.geteuid() \
            and not (flags & 0o022)
        return "private memory map" if ok else None
    if isinstance(path, int):
        return "descriptor already open"
    p = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if not p.startswith("/"):  # a name relative to a folder descriptor
        if module == "shutil.py" and func in ("rmtree", "_rmtree_safe_fd"):
            return "private state, descriptor walk"
        if module in DESCRIPTOR_LAYER and flags & os.O_NOFOLLOW:
            return "private state through a checked descriptor"
        return None
    real = os.path.realpath(p)
    if p == "/" and module == "_cache.py":
        return "private state through a checked descriptor"  # the walk's root
    if any(_inside(real, i) or _inside(p, i) for i in run.inputs):
        who = _textdp_caller(frames)
        if who in (("plan.py", "__init__"), ("io.py", "_read_bytes")):
            return "input"  # the input layer's one open (the partitioned engines), the one reader's (single)
        if who == ("plan.py", "_segment_bytes"):
            return "input, verified worker read"
        return None
    if flags & WRITE and any(_is_output(real, o) or _is_output(p, o) for o in run.outputs):
        return "output"
    if any(_inside(real, q) or _inside(p, q) for q in run.public):
        return "public file named by the user"
    if _inside(real, run.cache / "dask") and ("distributed" in str(frames) or "dask" in str(frames)):
        return "Dask scratch (made for the run, every folder above it checked)"
    if ".egg-info/" in real or ".dist-info/" in real:
        return "public package file"  # an installed distribution's metadata (importlib.metadata)
    if any(_inside(real, r) for r in PUBLIC_ROOTS) or real.startswith(SYSTEM_ROOTS) or p.startswith(SYSTEM_ROOTS):
        return "public package or system file"
    return None


def _check(events: list[tuple[str, object, int, list[tuple[str, str]]]], run: Run) -> Counter[str]:
    """Every event classified; the inputs opened once each. Returns the count per category (for the test's own checks)."""
    bad: list[str] = []
    counts: Counter[str] = Counter()
    per_input: Counter[str] = Counter()
    for kind, path, flags, frames in events:
        what = _classify(kind, path, flags, frames, run)
        if what is None:
            bad.append(f"{kind} {path!r} flags={flags:#o} from {':'.join(_caller(frames))}")
            continue
        counts[what] += 1
        if what == "input":
            per_input[os.path.realpath(os.fsdecode(path))] += 1  # type: ignore[arg-type]
    assert not bad, "files opened outside the checked layers:\n" + "\n".join(sorted(set(bad)))
    twice = {p: n for p, n in per_input.items() if n > 1}
    assert not twice, f"inputs opened more than once: {twice}"
    return counts


# -- the scenarios ------------------------------------------------------------------------------------------
@pytest.fixture
def corpus(tmp_path, monkeypatch) -> dict[str, Path]:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    texts = [" ".join(WORDS[j] for j in rng.integers(0, 300, 12)) for _ in range(36)]
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts[:12])))
    packed = tmp_path / "packed.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps({"id": f"g{i}", "text": t}) + "\n" for i, t in enumerate(texts[12:24])))
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(12)], "text": texts[24:]}), table, row_group_size=5)
    vec = rng.standard_normal((300, 6))
    toy = tmp_path / "toy.txt"
    toy.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vec)))
    warm = runner.invoke(app, ["obfuscate", str(plain), "-e", "1", "-n", "6", "--embeddings", str(toy),
                               "--stop-words", "none", "-o", str(tmp_path / "warm.jsonl")])
    assert warm.exit_code == 0, warm.output  # the embeddings are converted into the cache, once
    from textdp.engines import jobs

    jobs._load_vocabulary.cache_clear()  # the worker loads its vocabulary again, under the recorder
    jobs._fitted.cache_clear()
    return {"plain": plain, "packed": packed, "table": table, "toy": toy, "cache": tmp_path / "cache"}


def _obfuscate_args(c: dict[str, Path], *inputs: Path) -> list[str]:
    return ["obfuscate", *map(str, inputs), "-e", "1", "-n", "6", "--embeddings", str(c["toy"]), "--stop-words",
            "none", "--seed", "5"]


def test_obfuscate_single_engine(tmp_path, corpus):
    out, rep, led = tmp_path / "out.jsonl", tmp_path / "private" / "rep.jsonl", tmp_path / "private" / "led.jsonl"
    with _traced() as events:
        res = runner.invoke(app, [*_obfuscate_args(corpus, corpus["plain"], corpus["packed"]), "-o", str(out),
                                  "--private-report", str(rep), "--ledger", str(led)])
    assert res.exit_code == 0, res.output
    counts = _check(events, Run([corpus["plain"], corpus["packed"]], [out.parent, rep, led], corpus["cache"],
                                [corpus["toy"]]))
    assert counts["input"] == 2 and counts["private memory map"] == 1 and counts["output"] >= 2


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_obfuscate_partitioned(tmp_path, corpus, engine):
    if engine == "dask":
        pytest.importorskip("distributed")
        pytest.importorskip("cryptography")
    from textdp.embeddings import load_embeddings
    from textdp.engines.corpus import obfuscate_corpus

    out, rep, led = tmp_path / "out", tmp_path / "private" / "rep.jsonl", tmp_path / "private" / "led.jsonl"
    inputs = [corpus["plain"], corpus["packed"], corpus["table"]]
    if engine == "local":
        with _traced() as events:
            res = runner.invoke(app, [*_obfuscate_args(corpus, *inputs), "--engine", "local", "--partitions", "4",
                                      "-o", str(out), "--private-report", str(rep), "--ledger", str(led)])
        assert res.exit_code == 0, res.output
    else:  # the Dask engine with its workers in this process, so that the hook sees them too
        from textdp.engines.dask import DaskBackend

        emb = load_embeddings(corpus["toy"])
        with DaskBackend(workers=1, processes=False) as backend, _traced() as events:
            obfuscate_corpus(inputs, out, embeddings=emb, epsilon=1.0, size=6, bag="truncate", stop_words=None,
                             decoder="exact", seed=5, backend=backend, partitions=4, private_report=rep, ledger=led)
    counts = _check(events, Run(inputs, [out, rep, led], corpus["cache"], [corpus["toy"]]))
    assert counts["input"] == 3 and counts["input, verified worker read"] >= 1
    assert counts["private state through a checked descriptor"] > 10


def test_release_api_single_and_local(tmp_path, corpus):
    from textdp.mechanisms import get
    from textdp.release import release

    mech = get("cmp", epsilon=5.0, embeddings=str(corpus["toy"]), stop_words=None, seed=1).fit()
    inputs = [corpus["plain"], corpus["table"]]
    with _traced() as single:
        release(mech, inputs, tmp_path / "one.jsonl", private_report=tmp_path / "r1")
    with _traced() as local:
        release(mech, inputs, tmp_path / "parts", engine="local", partitions=3, private_report=tmp_path / "r2")
    one = _check(single, Run(inputs, [tmp_path / "one.jsonl", tmp_path / "one.jsonl.settings.json", tmp_path / "r1"],
                             corpus["cache"]))
    parts = _check(local, Run(inputs, [tmp_path / "parts", tmp_path / "r2"], corpus["cache"]))
    assert one["input"] == 2 and parts["input"] == 2  # each input once per release


def test_topics_with_its_sensitivity_cache(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    themes = ["gas price power deal oil", "game team win coach season", "court judge ruling law case",
              "bank rate loan credit market"]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"{themes[i % 4]} {themes[i // 4 % 4].split()[0]}",
                                        "author": f"u{i % 6}"}) + "\n" for i in range(48)))
    cache = tmp_path / "senscache"
    args = ["topics", str(docs), "--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2",
            "--topics", "2",
            "--keywords", "2", "-q", "--seed", "1", "-e", "1", "--gamma", "0.3", "--cache-dir", str(cache)]
    for out in ("a.json", "b.json"):  # the first draws and writes the samples, the second reads them back
        with _traced() as events:
            res = runner.invoke(app, [*args, "-o", str(tmp_path / out)])
        assert res.exit_code == 0, res.output
        counts = _check(events, Run([docs], [tmp_path / out, tmp_path / f"{out}.settings.json"], tmp_path / "cache"))
        assert counts["input"] == 1
        names = [os.fsdecode(e[1]) for e in events if isinstance(e[1], (str, bytes))]
        assert any("sens-" in n for n in names)  # the cache was reached, through its folder's descriptor


def test_a_path_open_inside_private_state_fails_the_inventory(tmp_path, corpus):
    """Not vacuous: reading a cache file by its path (what topics did with read_text) is caught."""
    with _traced() as events:
        (corpus["cache"] / "runs" / ".salt").read_bytes()
        corpus["plain"].read_text()
        corpus["plain"].read_text()
    with pytest.raises(AssertionError, match="outside the checked layers"):
        _check(events, Run([corpus["plain"]], [], corpus["cache"]))
    with pytest.raises(AssertionError, match=r"outside the checked layers|more than once"):
        _check(events[1:], Run([corpus["plain"]], [], corpus["cache"]))


@pytest.mark.parametrize("engine", ["single", "local"])
def test_rewrite_er_ae_through_release(tmp_path, monkeypatch, glove, engine):
    """The sentence family on a textdp model: the model folder is a public file the user names."""
    pytest.importorskip("torch", reason="sentence rewriting needs the [generation] extra")
    from helpers import tiny_model

    from textdp.mechanisms import get
    from textdp.release import release

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    model = tiny_model(tmp_path / "model", glove)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(
        ["The cat ran to the garden. A dog slept there.", "The fox saw a cow near the river!",
         "A bird sat in the field."])))
    mech = get("er-ae", epsilon=3.0, model=str(model))
    mech.fit()  # the model is loaded (and its files checked against its card) before the release is traced
    out, rep = tmp_path / "out.jsonl", tmp_path / "private" / "rep.json"
    extra = {} if engine == "single" else {"engine": "local", "partition_size": 2}
    with _traced() as events:
        release(mech, [inp], out, private_report=rep, private_details={}, seed=4, command="rewrite", **extra)
    counts = _check(events, Run([inp], [out, Path(f"{out}.settings.json"), rep], tmp_path / "cache", [model]))
    assert counts["input"] == 1
