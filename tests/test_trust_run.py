"""Issue 19, items 1 and 5: a partitioned run trusts nothing it did not write, and leaves no trace.

The attack of the issue, reproduced: a folder another user prepared (world-writable,
or owned by someone else), with a planted ``vocabulary-<fingerprint>/`` holding the
real words and vectors scaled by 1000, made the release copy its input. Now such a
folder is refused, and the same plant in a private folder is detected and rewritten.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_checks import Crash as _Crash
from typer.testing import CliRunner

from textdp.cli import app
from textdp.embeddings import Embeddings, vocabulary_fingerprint
from textdp.engines import LocalBackend
from textdp.engines.corpus import obfuscate_corpus, save_vocabulary
from textdp.errors import ParameterError

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)
SEED = 73105519
runner = CliRunner()


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    rng = np.random.default_rng(5)
    return Embeddings(WORDS, rng.standard_normal((300, 8)).astype(np.float32), name="toy")


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(WORDS[j] for j in rng.integers(0, 300, 15)) for _ in range(n)]


def _inputs(folder: Path) -> list[Path]:
    """A JSONL file (read by byte ranges) and a gzipped one (spilled to the work directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    plain = folder / "carol_private_diary.jsonl"
    plain.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(_texts(30, 1))))
    packed = folder / "dave_hr_letters.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        for i, t in enumerate(_texts(20, 2)):
            fh.write(json.dumps({"id": f"g{i}", "text": t}) + "\n")
    return [plain, packed]


def _kw(emb: Embeddings, **extra: object) -> dict:
    return {"embeddings": emb, "epsilon": 1.0, "size": 10, "bag": "truncate", "stop_words": None,
            "decoder": "exact", "seed": SEED, "backend": LocalBackend(), "partitions": 3, **extra}


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def _copied(records: list[dict]) -> float:
    """Fraction of released words that are words of the record's own input document."""
    src = {f"p{i}": set(t.split()) for i, t in enumerate(_texts(30, 1))} | {
        f"g{i}": set(t.split()) for i, t in enumerate(_texts(20, 2))}
    pairs = [(w, src[r["id"]]) for r in records for w in r["words"]]
    return sum(w in s for w, s in pairs) / len(pairs)


def _plant_vocabulary(work: Path, emb: Embeddings) -> Path:
    """The attack: the real words with vectors scaled by 1000, where the run looks for its vocabulary."""
    planted = work / f"vocabulary-{vocabulary_fingerprint(emb.vectors)}"
    planted.mkdir(parents=True)
    (planted / "words.txt").write_text("\n".join(emb.words) + "\n")
    np.save(planted / "vectors.npy", np.asarray(emb.vectors, dtype=np.float32) * 1000)
    return planted


def _cli_args(tmp: Path, emb: Embeddings, inputs: list[Path]) -> list[str]:
    np.save(tmp / "v.npy", np.asarray(emb.vectors))
    (tmp / "w.txt").write_text("\n".join(WORDS) + "\n")
    return ["obfuscate", *map(str, inputs), "-e", "1", "-n", "10", "--embeddings", str(tmp / "v.npy"),
            "--words", str(tmp / "w.txt"), "--stop-words", "none", "--seed", str(SEED), "--engine", "local",
            "--partitions", "3"]


# -- item 1: a squatted work directory -------------------------------------------------------------
def test_world_writable_work_dir_with_planted_vocabulary_is_refused(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    squat = tmp_path / "shared-tmp"
    squat.mkdir()
    _plant_vocabulary(squat, toy_emb)
    squat.chmod(0o777)  # what another local user would prepare
    args = _cli_args(tmp_path, toy_emb, inputs)
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "out"), "--work-dir", str(squat)])
    assert res.exit_code == 2, res.output
    assert "writable by others" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_work_dir_owned_by_another_user_is_refused(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    other = tmp_path / "theirs"
    other.mkdir(mode=0o700)
    os.chown(other, 65534, 65534)
    with pytest.raises(ParameterError, match="owned by another user"):
        obfuscate_corpus(inputs, tmp_path / "out", work_dir=other, **_kw(toy_emb))


def test_squatted_cache_is_refused(tmp_path, toy_emb, monkeypatch):
    """The default work directory lives in the cache: a cache others can write to is refused too."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    res = runner.invoke(app, [*_cli_args(tmp_path, toy_emb, _inputs(tmp_path / "in")), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "writable by others" in res.stderr, res.output


def test_planted_vocabulary_in_a_private_work_dir_is_rewritten(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    obfuscate_corpus(inputs, tmp_path / "clean", work_dir=tmp_path / "w-clean", **_kw(toy_emb))
    clean = _records(tmp_path / "clean")
    work = tmp_path / "w"
    work.mkdir(mode=0o700)
    planted = _plant_vocabulary(work, toy_emb)
    obfuscate_corpus(inputs, tmp_path / "out", work_dir=work, **_kw(toy_emb))
    got = _records(tmp_path / "out")
    assert got == clean  # the release is the one a clean run makes
    assert _copied(got) < 0.2  # (with the plant, b4f2b11 released the input's own words: 1.0)
    assert not planted.exists()


def test_worker_refuses_a_vocabulary_changed_after_the_driver_wrote_it(tmp_path, toy_emb):
    from textdp.engines.workdir import load_verified_vocabulary, vocabulary_digests

    d = save_vocabulary(toy_emb, tmp_path / "w", "fp")
    digests = vocabulary_digests(toy_emb)
    assert list(load_verified_vocabulary(str(d), "toy", *digests).words) == WORDS
    np.save(d / "vectors.npy", np.asarray(toy_emb.vectors, dtype=np.float32) * 1000)
    with pytest.raises(ParameterError, match="hash mismatch"):
        load_verified_vocabulary(str(d), "toy", *digests)
    # and the driver rewrites it rather than skip writing because files exist
    assert save_vocabulary(toy_emb, tmp_path / "w", "fp") == d
    assert list(load_verified_vocabulary(str(d), "toy", *digests).words) == WORDS


def test_planted_spill_is_not_trusted(tmp_path, toy_emb):
    """A file waiting where the run spills its gzip input is never read as that input."""
    inputs = _inputs(tmp_path / "in")
    obfuscate_corpus(inputs, tmp_path / "clean", work_dir=tmp_path / "w-clean", **_kw(toy_emb))
    work = tmp_path / "w"
    (work / "input").mkdir(parents=True, mode=0o700)
    work.chmod(0o700)
    planted = [{"id": f"g{i}", "text": " ".join([WORDS[0]] * 15), "source": "x"} for i in range(20)]
    (work / "input" / "input-00001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in planted))
    obfuscate_corpus(inputs, tmp_path / "out", work_dir=work, **_kw(toy_emb))
    assert _records(tmp_path / "out") == _records(tmp_path / "clean")


def test_resume_reuses_only_files_that_verify(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    obfuscate_corpus(inputs, tmp_path / "clean", work_dir=tmp_path / "w-clean", **_kw(toy_emb))
    out, work = tmp_path / "out", tmp_path / "w"
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus(inputs, out, work_dir=work, **_kw(toy_emb, backend=_Crash(2)))
    assert stat.S_IMODE(work.stat().st_mode) == 0o700
    # a finished part altered while the run was down is redone, not published as it is
    part = out / "part-00000.jsonl"
    part.write_text(part.read_text().replace('"words": ["', '"words": ["planted", "'))
    obfuscate_corpus(inputs, out, work_dir=work, **_kw(toy_emb))
    assert _records(out) == _records(tmp_path / "clean")
    assert not work.exists()


def test_tampered_run_state_is_refused(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    out, work = tmp_path / "out", tmp_path / "w"
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus(inputs, out, work_dir=work, **_kw(toy_emb, backend=_Crash(1)))
    state = json.loads((work / "state.json").read_text())
    state["files"] = {k: hashlib.sha256(b"x").hexdigest() for k in state["files"]}
    (work / "state.json").write_text(json.dumps(state))
    with pytest.raises(ParameterError, match="does not verify"):
        obfuscate_corpus(inputs, out, work_dir=work, **_kw(toy_emb))


# -- item 5: traces that outlive a run ------------------------------------------------------------------
def test_completed_run_leaves_nothing_that_names_its_inputs_or_seed(tmp_path, toy_emb, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "release"
    report = tmp_path / "private" / "report.jsonl"
    res = runner.invoke(app, [*_cli_args(tmp_path, toy_emb, inputs), "-o", str(out), "--private-report",
                              str(report)])
    assert res.exit_code == 0, res.output
    assert report.exists()  # the user's own private file (it names the sources, by design)
    needles = [hashlib.sha256(str(SEED).encode()).hexdigest().encode()]
    for p in inputs:
        needles += [str(p).encode(), str(p.resolve()).encode(), p.name.encode()]
    files = [p for root in (cache, out) for p in root.rglob("*") if p.is_file()]
    found = {(str(p), n) for p in files for n in needles if n in p.read_bytes()}
    assert not found, sorted(found)
    assert not list((cache / "runs").glob("*/")), "a completed run left private state"
    # the whole cache tree textdp made is private
    for d in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    for f in cache.rglob("*"):
        if f.is_file():
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_runs_list_and_clean(tmp_path, toy_emb, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    inputs = _inputs(tmp_path / "in")
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus(inputs, tmp_path / "out", **_kw(toy_emb, backend=_Crash(1)))
    res = runner.invoke(app, ["runs", "list", "--json"])
    assert res.exit_code == 0, res.output
    (row,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert row["status"] == "interrupted" and row["bytes"] > 0
    assert all(p.name not in res.stdout for p in inputs)
    table = runner.invoke(app, ["runs", "list"])
    assert table.exit_code == 0 and row["name"] in table.stdout and "interrupted" in table.stdout
    res = runner.invoke(app, ["runs", "clean"])
    assert res.exit_code == 2 and "--all" in res.stderr
    res = runner.invoke(app, ["runs", "clean", "nosuchrun"])
    assert res.exit_code == 2 and "no run named" in res.stderr
    res = runner.invoke(app, ["runs", "clean", row["name"]])
    assert res.exit_code == 0, res.output
    assert not (cache / "runs" / row["name"]).exists()
    assert runner.invoke(app, ["runs", "list", "--json"]).stdout == ""
    # the output of the abandoned run is now refused (its key is gone): never mixed with a new run
    res = runner.invoke(app, [*_cli_args(tmp_path, toy_emb, inputs), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and "different run" in res.stderr


def test_a_running_job_is_locked_and_never_cleaned(tmp_path, toy_emb, monkeypatch):
    """A second process on the same job is refused, and ``runs clean`` keeps a running job's state."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus(inputs, out, **_kw(toy_emb, backend=_Crash(1)))
    (work,) = [d for d in (cache / "runs").iterdir() if d.is_dir()]
    rows = [json.loads(line) for line in runner.invoke(app, ["runs", "list", "--json"]).stdout.splitlines()]
    assert [r["status"] for r in rows] == ["interrupted"]  # the crashed run released its lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(120)",
         str(work / "run.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        rows = [json.loads(line) for line in runner.invoke(app, ["runs", "list", "--json"]).stdout.splitlines()]
        assert [r["status"] for r in rows] == ["running"]
        res = runner.invoke(app, ["runs", "clean", work.name])
        assert res.exit_code == 2 and "is running" in res.stderr
        res = runner.invoke(app, ["runs", "clean", "--all"])
        assert res.exit_code == 0 and work.is_dir() and f"kept {work.name} (running" in res.stderr
        with pytest.raises(ParameterError, match="another textdp process is running this job"):
            obfuscate_corpus(inputs, out, **_kw(toy_emb))
    finally:
        holder.kill()
        holder.communicate()
    summary = obfuscate_corpus(inputs, out, **_kw(toy_emb))  # the lock is free again: the run resumes
    assert summary["mechanism"] == "earth-movers" and not work.exists()


def test_a_run_refused_for_bad_input_leaves_no_private_state(tmp_path, toy_emb, monkeypatch):
    """Bad input is a one-line error and leaves no run folder behind (nothing to resume)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    inputs = _inputs(tmp_path / "in")
    bad = tmp_path / "in" / "zz-bad.jsonl"
    bad.write_text('{"id": "x", "body": "no text field here"}\n')
    res = runner.invoke(app, [*_cli_args(tmp_path, toy_emb, [*inputs, bad]), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and res.stderr.startswith("error:") and len(res.stderr.strip().splitlines()) == 1
    assert not [d for d in (cache / "runs").iterdir() if d.is_dir()]
    assert runner.invoke(app, ["runs", "list", "--json"]).stdout == ""


def test_the_cache_is_created_private_and_a_squatted_one_is_refused(tmp_path, monkeypatch):
    from textdp._cache import cache_dir

    base = tmp_path / "home" / ".cache" / "textdp"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(base))
    assert cache_dir("embeddings") == base / "embeddings"
    for d in (base, base.parent, base.parent.parent):  # every folder textdp had to make
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    runs = cache_dir("runs", create=True)
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    base.chmod(0o775)  # group-writable: someone else could plant entries
    with pytest.raises(ParameterError, match="writable by others"):
        cache_dir("embeddings")
