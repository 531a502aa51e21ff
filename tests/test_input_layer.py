"""Issue 39, item 1: one input layer. Every input is opened once; nothing reads it by its path again.

On e24cd34 a partitioned run read a JSONL input by byte ranges (a Parquet one by row ranges) four
times by its path: the scan, the id check, the ledger's charge and each worker. A symbolic link
renamed over the input between those reads made the release publish another file's documents
while the ledger was charged the first file's ids. Here the swap is made from inside the run (a
hook wrapped around the planner, or the driver's step before the workers), as the attacker would
make it between two reads. A pipe (``<(cat in.jsonl)``), a FIFO and ``-`` work on every engine.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.embeddings import Embeddings
from textdp.engines import LocalBackend
from textdp.engines import corpus as corpus_mod
from textdp.engines.corpus import obfuscate_corpus
from textdp.errors import DocumentError

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)
runner = CliRunner()


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    rng = np.random.default_rng(5)
    return Embeddings(WORDS, rng.standard_normal((300, 8)).astype(np.float32), name="toy")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))  # never the real ~/.cache/textdp


def _rows(prefix: str, n: int, seed: int, words: list[str]) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    return [{"id": f"{prefix}{i}", "text": " ".join(words[j] for j in rng.integers(0, len(words), 12))}
            for i in range(n)]


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    if path.name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), path,
                       row_group_size=7)
    elif path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _victim_and_other(tmp: Path, name: str) -> tuple[Path, Path]:
    """The victim's input (ids v*, words of the first half) and another file of theirs (ids x*, the second half)."""
    inp = _write(tmp / name, _rows("v", 30, 1, WORDS[:150]))
    (tmp / "other").mkdir()
    other = _write(tmp / "other" / name, _rows("x", 30, 2, WORDS[150:]))
    return inp, other


def _swap(inp: Path, other: Path) -> None:
    """What the attacker does: rename a symbolic link to ``other`` over ``inp``."""
    link = inp.with_name(inp.name + ".swap")
    os.symlink(other, link)
    os.replace(link, inp)


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def _kw(emb: Embeddings, tmp: Path, name: str, **extra: object) -> dict[str, object]:
    return {"embeddings": emb, "epsilon": 20.0, "size": 8, "bag": "truncate", "stop_words": None,
            "decoder": "exact", "seed": 7, "partitions": 3, "work_dir": tmp / f"wd-{name}", **extra}


def _swap_after_planning(monkeypatch: pytest.MonkeyPatch, inp: Path, other: Path) -> list[bool]:
    """Swap the input right after the driver's scan, before its id check, its ledger charge and the workers."""
    real = corpus_mod.plan_partitions
    done: list[bool] = []

    def plan_then_swap(*a, **k):
        plan = real(*a, **k)
        _swap(inp, other)
        done.append(True)
        return plan

    monkeypatch.setattr(corpus_mod, "plan_partitions", plan_then_swap)
    return done


def _backend(engine: str):
    if engine == "local":
        return LocalBackend()
    pytest.importorskip("distributed")
    from textdp.engines.dask import DaskBackend

    return DaskBackend(workers=1, processes=True)


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_jsonl_input_swapped_after_the_scan_is_refused_and_the_ledger_charges_what_was_read(
        tmp_path, toy_emb, monkeypatch, engine):
    inp, other = _victim_and_other(tmp_path, "in.jsonl")
    done = _swap_after_planning(monkeypatch, inp, other)
    ledger = tmp_path / "private" / "ledger.jsonl"
    backend = _backend(engine)
    try:
        with pytest.raises(DocumentError) as exc:
            obfuscate_corpus([inp], tmp_path / "out", backend=backend, ledger=ledger, budget=1000.0,
                             **_kw(toy_emb, tmp_path, engine))
    finally:
        backend.close()
    assert done and inp.is_symlink()
    msg = str(exc.value)
    assert "\n" not in msg and "is not the one the driver read" in msg and str(inp.resolve()) not in msg
    assert not list((tmp_path / "out").glob("part-*"))  # the workers refused the other file's bytes
    # the driver's id check and charge read through the descriptor it opened: the victim's ids, never x*
    from textdp.accounting.ledger import PrivacyLedger

    assert set(PrivacyLedger(ledger).spent()) == {f"v{i}" for i in range(30)}


@pytest.mark.parametrize("name", ["in.parquet", "in.jsonl.gz"])
def test_a_spilled_input_swapped_after_the_scan_changes_nothing(tmp_path, toy_emb, monkeypatch, name):
    inp, other = _victim_and_other(tmp_path, name)
    obfuscate_corpus([inp], tmp_path / "clean", backend=LocalBackend(), **_kw(toy_emb, tmp_path, "clean"))
    clean = [p.read_bytes() for p in sorted((tmp_path / "clean").glob("part-*"))]
    done = _swap_after_planning(monkeypatch, inp, other)
    obfuscate_corpus([inp], tmp_path / "out", backend=LocalBackend(), **_kw(toy_emb, tmp_path, "out"))
    assert done and inp.is_symlink()
    assert [p.read_bytes() for p in sorted((tmp_path / "out").glob("part-*"))] == clean
    assert {r["id"] for r in _records(tmp_path / "out")} == {f"v{i}" for i in range(30)}


def test_a_swap_between_two_worker_reads_is_refused(tmp_path, toy_emb, monkeypatch):
    """The first partition is read from the victim's file, then the file is swapped: the next worker refuses."""
    from textdp.engines import jobs

    inp, other = _victim_and_other(tmp_path, "in.jsonl")
    real = jobs.run_partition
    calls: list[int] = []

    def run_then_swap(job):
        result = real(job)
        calls.append(job[0].index)
        if len(calls) == 1:
            _swap(inp, other)
        return result

    monkeypatch.setattr(corpus_mod, "run_partition", run_then_swap)
    with pytest.raises(DocumentError, match="is not the one the driver read"):
        obfuscate_corpus([inp], tmp_path / "out", backend=LocalBackend(), **_kw(toy_emb, tmp_path, "out"))
    released = {r["id"] for r in _records(tmp_path / "out")}
    assert released and all(i.startswith("v") for i in released)


# -- pipes, FIFOs and standard input --------------------------------------------------------------
def _cli_files(tmp: Path, emb: Embeddings) -> list[str]:
    np.save(tmp / "v.npy", np.asarray(emb.vectors))
    (tmp / "w.txt").write_text("\n".join(WORDS) + "\n")
    return ["-e", "5", "-n", "6", "--embeddings", str(tmp / "v.npy"), "--words", str(tmp / "w.txt"),
            "--stop-words", "none", "--seed", "3", "--partitions", "3", "--input-format", "jsonl"]


def _feed_fifo(path: Path, data: bytes) -> threading.Thread:
    os.mkfifo(path, 0o600)

    def write() -> None:
        time.sleep(0.3)  # textdp opens the FIFO first and waits for its writer, as any reader would
        with open(path, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_fifo_input_works_on_the_partitioned_engines(tmp_path, toy_emb, engine):
    if engine == "dask":
        pytest.importorskip("distributed")
        pytest.importorskip("cryptography")
    opts = _cli_files(tmp_path, toy_emb)
    inp = _write(tmp_path / "in.jsonl", _rows("d", 20, 4, WORDS))
    ref = runner.invoke(app, ["obfuscate", str(inp), *opts, "--engine", "local", "-o", str(tmp_path / "ref")])
    assert ref.exit_code == 0, ref.output
    fifo = tmp_path / "pipe"
    writer = _feed_fifo(fifo, inp.read_bytes())
    extra = ["--workers", "1"] if engine == "dask" else []
    res = runner.invoke(app, ["obfuscate", str(fifo), *opts, "--engine", engine, *extra, "-o", str(tmp_path / "out")])
    writer.join(5)
    assert res.exit_code == 0, res.output
    assert _records(tmp_path / "out") == _records(tmp_path / "ref")
    assert not list((tmp_path / "cache" / "runs").glob("[0-9a-f]*"))  # nothing left in the private state


def test_standard_input_works_on_the_local_engine(tmp_path, toy_emb):
    opts = _cli_files(tmp_path, toy_emb)
    inp = _write(tmp_path / "in.jsonl", _rows("d", 20, 4, WORDS))
    ref = runner.invoke(app, ["obfuscate", str(inp), *opts, "--engine", "local", "-o", str(tmp_path / "ref")])
    res = runner.invoke(app, ["obfuscate", "-", *opts, "--engine", "local", "-o", str(tmp_path / "out")],
                        input=inp.read_bytes())
    assert ref.exit_code == 0 and res.exit_code == 0, res.output
    assert _records(tmp_path / "out") == _records(tmp_path / "ref")


@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_of_a_gzip_stream_works(tmp_path, toy_emb):
    """The issue's example: ``textdp obfuscate <(zcat in.jsonl.gz) --engine local`` (was: not seekable)."""
    opts = _cli_files(tmp_path, toy_emb)
    rows = _rows("d", 20, 4, WORDS)
    gz = _write(tmp_path / "in.jsonl.gz", rows)
    cmd = (f'{sys.executable} -m textdp obfuscate <(gzip -dc "{gz}") {" ".join(opts)} --engine local '
           f'-o "{tmp_path / "out"}"')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert sorted(r["id"] for r in _records(tmp_path / "out")) == sorted(r["id"] for r in rows)


def test_an_interrupted_run_that_read_a_pipe_keeps_nothing(tmp_path, toy_emb):
    """SECURITY.md: 'a run that reads a pipe or standard input cannot be resumed: when it is interrupted, its
    private state (the spill included) is deleted'."""
    from cli_checks import Crash

    inp = _write(tmp_path / "in.jsonl", _rows("d", 30, 4, WORDS))
    fifo = tmp_path / "pipe"
    writer = _feed_fifo(fifo, inp.read_bytes())
    work = tmp_path / "wd"
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus([fifo], tmp_path / "out", backend=Crash(1), input_format="jsonl",
                         **_kw(toy_emb, tmp_path, "x", work_dir=work))
    writer.join(5)
    assert len(list((tmp_path / "out").glob("part-*"))) == 1  # one part was finished before the kill
    assert not work.exists() or not any(work.iterdir())  # no spill, no key, no state: nothing to resume from
    # a file input keeps its state, so that the same command resumes
    with pytest.raises(KeyboardInterrupt):
        obfuscate_corpus([inp], tmp_path / "out2", backend=Crash(1), **_kw(toy_emb, tmp_path, "y", work_dir=work))
    assert (work / "state.json").is_file()


def test_security_md_states_the_input_layer():
    """The sentences of SECURITY.md's "Inputs" section that the tests above check."""
    import re

    text = re.sub(r"\s+", " ", (Path(__file__).resolve().parents[1] / "SECURITY.md").read_text(encoding="utf-8"))
    inputs = text[text.index("## Inputs"):text.index("## The cache")]
    for claim in ("**Each input is opened once.**", "never reads it by its path again; only the workers of a "
                  "partitioned run open a JSONL input again, each through a descriptor of its own",
                  "every worker (Dask worker processes too) opens the file through a descriptor of its own, reads its "
                  "range once and refuses bytes whose hash differs",
                  "Every other input (Parquet, gzip, plain text, a pipe, standard input) is read once, through the "
                  "driver's descriptor, into a JSONL spill",
                  "**A swapped input changes nothing or stops the run.**",
                  "every part and every ledger charge comes from the bytes the driver read first",
                  "**A pipe cannot be read twice**"):
        assert claim in inputs, claim


# -- the attack as a second user (a throwaway account; skipped when not root, as in CI's other two-user tests) --
SWAP_INPUT = r"""
import os, sys
inp, target = sys.argv[1:3]
os.symlink(target, inp + ".x")   # a link to another file of the victim's (which the attacker cannot read)
os.rename(inp + ".x", inp)       # renamed over the victim's input: the attacker may rename in this folder
"""


@pytest.fixture(scope="module")
def attacker():
    from helpers import second_user

    with second_user("tdpi") as user:
        yield user


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_second_user_who_swaps_the_input_mid_run_gets_nothing(toy_emb, attacker, engine):
    """The issue's attack: rename rights in the input's folder, a link to another 0600 file of the victim's."""
    import tempfile

    from helpers import run_as

    from textdp.accounting.ledger import PrivacyLedger

    base = Path(tempfile.mkdtemp(prefix="textdp-input-"))
    try:
        base.chmod(0o755)
        shared = base / "shared"
        shared.mkdir()
        os.chown(shared, *attacker)
        shared.chmod(0o777)  # the attacker's folder, writable by all, no sticky bit: they can rename in it
        inp = _write(shared / "in.jsonl", _rows("v", 30, 1, WORDS[:150]))
        inp.chmod(0o600)
        (base / "private").mkdir(mode=0o700)
        secret = _write(base / "private" / "secret.jsonl", _rows("x", 30, 2, WORDS[150:]))
        secret.chmod(0o600)
        swapped: list[bool] = []

        def attack(done: int, total: int) -> None:  # the victim's first progress report: after the driver's reads
            if not swapped:
                res = run_as(attacker, SWAP_INPUT, str(inp), str(secret), check=False)
                assert res.returncode == 0, res.stderr
                swapped.append(True)

        backend = _backend(engine)
        ledger = base / "ledger" / "l.jsonl"
        try:
            with pytest.raises(DocumentError, match="is not the one the driver read"):
                obfuscate_corpus([inp], base / "out", backend=backend, progress=attack, ledger=ledger, budget=1000.0,
                                 **_kw(toy_emb, base, engine))
        finally:
            backend.close()
        assert swapped and inp.is_symlink()
        assert not list((base / "out").glob("part-*"))  # nothing of the secret file was released
        assert set(PrivacyLedger(ledger).spent()) == {f"v{i}" for i in range(30)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_cli_says_an_interrupted_pipe_run_cannot_resume(tmp_path, toy_emb, monkeypatch):
    from cli_checks import Crash

    from textdp.cli import obfuscate as cli_obfuscate

    opts = _cli_files(tmp_path, toy_emb)
    inp = _write(tmp_path / "in.jsonl", _rows("d", 20, 4, WORDS))
    fifo = tmp_path / "pipe"
    writer = _feed_fifo(fifo, inp.read_bytes())
    monkeypatch.setattr(cli_obfuscate, "_backend", lambda o: Crash(1))
    res = runner.invoke(app, ["obfuscate", str(fifo), *opts, "--engine", "local", "-o", str(tmp_path / "out")])
    writer.join(5)
    assert res.exit_code == 130, res.output
    assert "read a pipe or standard input" in res.output and "cannot resume" in res.output
    assert not list((tmp_path / "cache" / "runs").glob("[0-9a-f]*"))  # nothing kept to resume from
