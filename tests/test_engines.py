"""Corpus-scale engines: local vs Dask give the same output; partitions; resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_checks import Crash as _Crash

from textdp.embeddings import Embeddings
from textdp.engines import LocalBackend, get_backend
from textdp.engines.corpus import obfuscate_corpus, plan_partitions, read_partition
from textdp.errors import ParameterError

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    rng = np.random.default_rng(5)
    return Embeddings(WORDS, rng.standard_normal((300, 8)).astype(np.float32), name="toy")


def _corpus(path: Path, n: int, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            words = " ".join(WORDS[j] for j in rng.integers(0, 300, rng.integers(6, 20)))
            fh.write(json.dumps({"id": f"d{i}", "text": words}) + "\n")
    return path


def _read_parts(out: Path) -> list[dict]:
    recs = []
    for p in sorted(out.glob("part-*.jsonl")):
        recs.extend(json.loads(line) for line in p.read_text().splitlines())
    return recs


def _run(inp, out, emb, backend, **kw):
    opts = {"embeddings": emb, "epsilon": 5.0, "size": 6, "bag": "truncate", "stop_words": None, "decoder": "exact", "seed": 11,
                "backend": backend, "partitions": 4, "work_dir": Path(out).with_name(Path(out).name + "-work")}
    opts.update(kw)
    return obfuscate_corpus([inp], out, **opts)


def test_jsonl_partitions_cover_every_line(tmp_path):
    inp = _corpus(tmp_path / "c.jsonl", 101)
    plan = plan_partitions([inp], partitions=7)
    ids = [d.id for p in plan for d in read_partition(p)]
    assert ids == [f"d{i}" for i in range(101)]
    assert sum(p.n_docs for p in plan) == 101
    assert sorted({p.n_docs for p in plan}) == [14, 15]  # equal counts: the plan reveals no byte sizes


def test_parquet_partitions(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tbl = pa.table({"id": [f"p{i}" for i in range(50)], "text": ["w1 w2 w3"] * 50})
    pq.write_table(tbl, tmp_path / "c.parquet", row_group_size=8)
    plan = plan_partitions([tmp_path / "c.parquet"], spill_dir=tmp_path)
    assert len(plan) == 1
    assert [d.id for p in plan for d in read_partition(p)] == [f"p{i}" for i in range(50)]
    plan3 = plan_partitions([tmp_path / "c.parquet"], partitions=3, spill_dir=tmp_path / "s3")
    assert [d.id for p in plan3 for d in read_partition(p)] == [f"p{i}" for i in range(50)]
    # without an id column: sequence numbers across files, in input order
    pq.write_table(pa.table({"text": ["w1 w2"] * 7}), tmp_path / "noid.parquet", row_group_size=3)
    plan = plan_partitions([tmp_path / "noid.parquet", tmp_path / "c.parquet"], partitions=4, spill_dir=tmp_path / "s4")
    ids = [d.id for p in plan for d in read_partition(p)]
    assert ids == [str(i) for i in range(7)] + [f"p{i}" for i in range(50)]


def test_dask_equals_local(tmp_path, toy_emb):
    from textdp.engines.dask import DaskBackend

    inp = _corpus(tmp_path / "c.jsonl", 60)
    local = _run(inp, tmp_path / "local", toy_emb, LocalBackend())
    with DaskBackend(workers=2, processes=False) as be:
        scratch = str(be.scratch)
        dask = _run(inp, tmp_path / "dask", toy_emb, be)
    # in-process workers put their folders on sys.path; once the scratch is deleted, none is left there (a stale
    # entry made every later import of the process probe the deleted private folder)
    assert not [p for p in sys.path if str(p).startswith(scratch)]
    a, b = _read_parts(tmp_path / "local"), _read_parts(tmp_path / "dask")
    assert a == b and len(a) == 60
    assert local["size"] == dask["size"] and local["partitions"] == 4
    assert sorted(r["id"] for r in a) == sorted(f"d{i}" for i in range(60))
    # a different seed gives a different release
    other = _run(inp, tmp_path / "other", toy_emb, LocalBackend(), seed=12)
    assert other["size"] == local["size"] and _read_parts(tmp_path / "other") != a


def test_resume_skips_finished_parts_and_refuses_other_settings(tmp_path, toy_emb):
    inp = _corpus(tmp_path / "c.jsonl", 40)
    _run(inp, tmp_path / "clean", toy_emb, LocalBackend())
    full = _read_parts(tmp_path / "clean")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        _run(inp, out, toy_emb, _Crash(2))
    assert sorted(p.name for p in out.glob("part-*")) == ["part-00000.jsonl", "part-00001.jsonl"]
    mtime = (out / "part-00000.jsonl").stat().st_mtime_ns
    with pytest.raises(ParameterError, match="different run"):
        _run(inp, out, toy_emb, LocalBackend(), epsilon=6.0)
    _run(inp, out, toy_emb, LocalBackend())
    assert (out / "part-00000.jsonl").stat().st_mtime_ns == mtime  # not redone
    assert _read_parts(out) == full  # seeded: the same release as an uninterrupted run
    assert not (tmp_path / "out-work").exists()  # complete: the private state is gone


def test_get_backend_errors():
    with pytest.raises(ParameterError, match="unknown engine"):
        get_backend("spark")
    with pytest.raises(ParameterError, match="dask"):
        get_backend("local", scheduler="tcp://x:1")


def test_cli_partitioned_local(tmp_path, toy_emb, monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))  # the default private work directory

    from textdp.cli import app

    np.save(tmp_path / "v.npy", np.asarray(toy_emb.vectors))
    (tmp_path / "w.txt").write_text("\n".join(WORDS) + "\n")
    inp = _corpus(tmp_path / "c.jsonl", 30)
    res = CliRunner().invoke(app, ["obfuscate", str(inp), "-e", "5", "-n", "6", "--embeddings", str(tmp_path / "v.npy"),
                                   "--words", str(tmp_path / "w.txt"), "--stop-words", "none", "--seed", "3",
                                   "--engine", "local", "--partitions", "3", "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    recs = _read_parts(tmp_path / "out")
    assert len(recs) == 30 and all(r["guarantee"]["parameters"]["decoder"] == "exact" for r in recs)
    settings = json.loads((tmp_path / "out" / "settings.json").read_text())
    assert settings["partitions"] == 3 and settings["engine"] == "local" and settings["seeded"] is True
    assert "seed" not in settings


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, toy_emb):
    """Kill a partitioned CLI run mid-way (SIGKILL), restart it, check every document once."""
    np.save(tmp_path / "v.npy", np.asarray(toy_emb.vectors))
    (tmp_path / "w.txt").write_text("\n".join(WORDS) + "\n")
    inp = _corpus(tmp_path / "c.jsonl", 4000, seed=2)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "textdp", "obfuscate", str(inp), "-e", "5", "-n", "6", "--embeddings", str(tmp_path / "v.npy"),
           "--words", str(tmp_path / "w.txt"), "--stop-words", "none", "--seed", "9", "--engine", "local",
           "--partitions", "400", "-o", str(out)]
    cache = tmp_path / "cache"  # the default private work directory lives here, outside the output
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TEXTDP_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(out.glob("part-*.jsonl"))) < 5 and proc.poll() is None:
            time.sleep(0.01)
        killed = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    n_before = len(list(out.glob("part-*.jsonl")))
    assert killed and 0 < n_before < 400, "the run was not killed mid-way; make the workload larger"
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    recs = _read_parts(out)
    ids = [r["id"] for r in recs]
    assert len(ids) == 4000 and sorted(ids) == sorted(f"d{i}" for i in range(4000))
    assert not list(out.glob(".*.tmp"))
    # the restart found the same private work directory; once complete, all of it is deleted
    assert [p.name for p in (cache / "runs").iterdir()] == [".salt"], [list(p.rglob("*")) for p in (cache / "runs").iterdir()]
    assert {p.name for p in out.iterdir()} == {"manifest.json", "settings.json"} | {f"part-{i:05d}.jsonl" for i in range(400)}
