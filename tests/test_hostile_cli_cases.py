"""Hostile input at the command line never wins (issue 10): one regression test per case.

Every case ends in a correct result, or in one ``error: ...`` line on stderr and exit
status 2 (130 / 143 after SIGINT / SIGTERM): never a traceback, a hang, unbounded memory,
or partial or clobbered output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from cli_checks import current_umask as _umask
from cli_checks import one_error as _one_error
from typer.testing import CliRunner

from textdp._validation import EPSILON_MAX, EPSILON_MIN, MAX_SIZE, check_epsilon
from textdp.accounting.bounds import format_multiplier
from textdp.cli import app
from textdp.embeddings import Embeddings
from textdp.errors import MissingDependencyError, OutputExistsError, ParameterError
from textdp.io import atomic_writer
from textdp.mechanisms import EarthMoversPrivacy
from textdp.mechanisms.earth_movers import WORDS_PER_BLOCK, privatize_ids
from textdp.mechanisms.laplace import laplace_noise
from textdp.text import make_bag, normalize

runner = CliRunner()
WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)
RANGE = f"[{EPSILON_MIN:g}, {EPSILON_MAX:g}]"


@pytest.fixture()
def toy(tmp_path: Path) -> list[str]:
    """``--embeddings/--words`` options of a 300-word, 8-d vocabulary (fast to load and decode)."""
    rng = np.random.default_rng(5)
    np.save(tmp_path / "v.npy", rng.standard_normal((300, 8)).astype(np.float32))
    (tmp_path / "w.txt").write_text("\n".join(WORDS) + "\n")
    return ["--embeddings", str(tmp_path / "v.npy"), "--words", str(tmp_path / "w.txt"), "--stop-words", "none"]


def _doc(path: Path, n: int = 12, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    path.write_text(" ".join(WORDS[j] for j in rng.integers(0, 300, n)) + "\n")
    return path


def _corpus(path: Path, n: int, ids: list[str] | None = None) -> Path:
    rng = np.random.default_rng(1)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            text = " ".join(WORDS[j] for j in rng.integers(0, 300, 10))
            fh.write(json.dumps({"id": ids[i] if ids else f"d{i}", "text": text}) + "\n")
    return path


# -- output clobbering ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "relative"])
def test_output_that_is_an_input_is_refused(tmp_path, toy, monkeypatch, how):
    monkeypatch.chdir(tmp_path)
    src = _doc(tmp_path / "in.txt")
    os.chmod(src, 0o644)
    before = src.read_bytes()
    target = {"same": "in.txt", "symlink": "link.txt", "hardlink": "hard.txt", "relative": "sub/../in.txt"}[how]
    if how == "symlink":
        os.symlink("in.txt", "link.txt")
    elif how == "hardlink":
        os.link("in.txt", "hard.txt")
    elif how == "relative":
        os.mkdir("sub")
    res = runner.invoke(app, ["obfuscate", "in.txt", "-e", "5", "-n", "4", *toy, "-o", target])
    _one_error(res, "is the input file", "--force")
    assert src.read_bytes() == before and stat.S_IMODE(src.stat().st_mode) == 0o644
    # the same goes for the private report, and for the embeddings files
    res = runner.invoke(app, ["obfuscate", "in.txt", "-e", "5", "-n", "4", *toy, "--private-report", target])
    _one_error(res, "--private-report", "is the input file")
    res = runner.invoke(app, ["obfuscate", "in.txt", "-e", "5", "-n", "4", *toy, "-o", toy[3]])
    _one_error(res, "is the input file")
    assert src.read_bytes() == before and Path(toy[3]).read_text().startswith("aaq\n")


def test_existing_output_is_refused_and_force_replaces_it_keeping_its_mode(tmp_path, toy):
    src = _doc(tmp_path / "in.txt")
    out = tmp_path / "out.jsonl"
    out.write_text("old release\n")
    out.chmod(0o444)  # read-only
    args = ["obfuscate", str(src), "-e", "5", "-n", "4", *toy, "-o", str(out)]
    _one_error(runner.invoke(app, args), "exists", "--force")
    assert out.read_text() == "old release\n" and not (tmp_path / "out.jsonl.settings.json").exists()
    res = runner.invoke(app, [*args, "--force"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["guarantee"]["parameters"]["size"] == 4
    assert stat.S_IMODE(out.stat().st_mode) == 0o444  # the user's mode stays; never silently 0600
    settings = tmp_path / "out.jsonl.settings.json"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o666 & ~_umask()
    # now the settings file exists too: a new run into the same path is refused again
    out.chmod(0o644)
    out.unlink()
    _one_error(runner.invoke(app, args), "settings file", "exists")
    assert not out.exists()


def test_new_files_get_the_umask_mode_and_the_private_report_is_owner_only(tmp_path, toy):
    src = _doc(tmp_path / "in.txt")
    old = os.umask(0o027)
    try:
        res = runner.invoke(app, ["obfuscate", str(src), "-e", "5", "-n", "4", *toy, "-o", str(tmp_path / "o.jsonl"),
                                  "--private-report", str(tmp_path / "private.jsonl")])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE((tmp_path / "o.jsonl").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "o.jsonl.settings.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "private.jsonl").stat().st_mode) == 0o600


def test_private_report_on_the_output_or_an_existing_file_is_refused(tmp_path, toy):
    src = _doc(tmp_path / "in.txt")
    out, report = tmp_path / "o.jsonl", tmp_path / "r.jsonl"
    base = ["obfuscate", str(src), "-e", "5", "-n", "4", *toy, "-o", str(out)]
    _one_error(runner.invoke(app, [*base, "--private-report", str(out), "--force"]), "same file")
    report.write_text("keep me\n")
    _one_error(runner.invoke(app, [*base, "--private-report", str(report)]), "--private-report", "exists")
    assert report.read_text() == "keep me\n" and not out.exists()


def test_atomic_writer_never_replaces_a_file_that_appears_meanwhile(tmp_path):
    target = tmp_path / "x.jsonl"
    with pytest.raises(OutputExistsError, match="exists"), atomic_writer(target, overwrite=False) as fh:
        fh.write("release\n")
        target.write_text("someone else's file\n")  # created while we were writing
    assert target.read_text() == "someone else's file\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]  # no temporary file left


def test_partitioned_output_folder_must_be_new_or_empty(tmp_path, toy, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    inp = _corpus(tmp_path / "c.jsonl", 12)
    out = tmp_path / "release"
    out.mkdir()
    (out / "settings.json").write_text("the user's own settings\n")
    args = ["obfuscate", str(inp), "-e", "5", "-n", "4", *toy, "--engine", "local", "--partitions", "2", "-o", str(out)]
    _one_error(runner.invoke(app, args), "not empty", "--force")
    assert [p.name for p in out.iterdir()] == ["settings.json"]
    res = runner.invoke(app, [*args, "--force"])
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == {"settings.json", "manifest.json", "part-00000.jsonl", "part-00001.jsonl"}
    assert stat.S_IMODE((out / "part-00000.jsonl").stat().st_mode) == 0o666 & ~_umask()
    # re-running the finished run: its private state (which could recognise it) is gone, so it is refused
    # like any other run's output, and nothing is overwritten
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _one_error(runner.invoke(app, args), "holds a completed run")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_evaluate_refuses_a_non_empty_report_folder_before_running(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[corpus]\nname = "reuter_50_50"\n[mechanism]\nepsilons = [10]\n')
    out = tmp_path / "report"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    t0 = time.perf_counter()
    _one_error(runner.invoke(app, ["evaluate", str(cfg), "-o", str(out)]), "not empty", "--force")
    assert time.perf_counter() - t0 < 30 and (out / "notes.md").read_text() == "mine\n"
    _one_error(runner.invoke(app, ["evaluate", str(cfg), "-o", str(cfg)]), "is a file")


# -- extreme epsilon -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", ["1e-300", "1e-320", "5e-7", "2e6", "1e300"])
def test_epsilon_outside_the_supported_range_is_a_one_line_error(tmp_path, toy, eps):
    src = _doc(tmp_path / "in.txt")
    _one_error(runner.invoke(app, ["obfuscate", str(src), "-e", eps, "-n", "4", *toy]), "supported range", RANGE)
    _one_error(runner.invoke(app, ["guarantee", str(src), str(src), "-e", eps, *toy]), "supported range", RANGE)
    _one_error(runner.invoke(app, ["calibrate", *toy[:4], "--epsilons", eps, "--n-words", "3", "--repeats", "1",
                                   "--rank-min", "1", "--rank-max", "300"]), RANGE)


def test_api_epsilon_outside_the_range_names_the_range_not_nan_queries():
    emb = Embeddings(["cat", "dog", "car"], np.array([[0.0, 0], [0, 1], [9, 9]]), name="toy")
    for eps in (1e-320, 1e-300, 1e300):
        with pytest.raises(ParameterError, match=re.escape(RANGE)):
            EarthMoversPrivacy(epsilon=eps, size=2, embeddings=emb, stop_words=None).privatize("cat dog")
        with pytest.raises(ParameterError, match="supported range"):
            laplace_noise(2, 3, eps, np.random.default_rng(0))
    assert check_epsilon(EPSILON_MIN) == EPSILON_MIN and check_epsilon(EPSILON_MAX) == EPSILON_MAX


def test_the_ends_of_the_range_work_on_glove(glove):
    text = "The president greets the press in Chicago"
    low = EarthMoversPrivacy(epsilon=EPSILON_MIN, size=40, bag="sample", embeddings=glove, seed=1).privatize(text)
    assert len(set(low.words)) > 20  # the old float32 overflow decoded every word to row 0: "the the the ..."
    high = EarthMoversPrivacy(epsilon=EPSILON_MAX, size=4, embeddings=glove, seed=1).privatize(text)
    assert sorted(high.words) == sorted(normalize(text))


def test_multiplier_text_stays_short():
    assert format_multiplier(1e13) == "10^4.343e+12"
    assert format_multiplier(1e300) == "10^4.343e+299"
    res = runner.invoke(app, ["guarantee", str(Path(__file__).parents[1] / "examples" / "doc_a.txt"),
                              str(Path(__file__).parents[1] / "examples" / "doc_b.txt"), "-e", "1e6", "-n", "40",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["multiplier"] is None and len(out["multiplier_text"]) < 16


# -- memory ----------------------------------------------------------------------------------------------
def test_a_huge_bag_size_is_refused_fast_without_allocating(tmp_path, toy):
    src = _doc(tmp_path / "in.txt")
    tracemalloc.start()
    try:
        res = runner.invoke(app, ["obfuscate", str(src), "-e", "10", "--size", "100000000", "--bag", "sample", *toy])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _one_error(res, f"at most {MAX_SIZE}")
    assert peak < 20e6, f"{peak / 1e6:.0f} MB allocated before refusing"
    rows = np.arange(5)
    with pytest.raises(ParameterError, match="at most"):
        make_bag(rows, MAX_SIZE + 1, "sample", np.random.default_rng(0))
    with pytest.raises(ParameterError, match="at most"):
        EarthMoversPrivacy(epsilon=1, size=10**8, embeddings=Embeddings(["a"], np.zeros((1, 2)))).fit()


def test_noise_and_decoding_work_in_bounded_blocks():
    """A bag of 200,000 words (50-d) would need ~250 MB at once; in blocks the peak stays far below."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 50)).astype(np.float32)
    ids = rng.integers(0, 500, (1, 200_000))
    assert ids.size > 4 * WORDS_PER_BLOCK
    tracemalloc.start()
    try:
        out = privatize_ids(ids, vectors, 1e6, np.random.default_rng(1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 60e6, f"{peak / 1e6:.0f} MB"
    assert (out == np.sort(ids, axis=-1)).all()  # epsilon 1e6: no word moves


def test_single_file_output_is_streamed(tmp_path, toy):
    """20 documents x N = 20,000 sampled words: the records are written as they are made, not collected."""
    docs = tmp_path / "d.jsonl"
    _corpus(docs, 20)
    tracemalloc.start()
    try:
        res = runner.invoke(app, ["obfuscate", str(docs), "-e", "5", "-n", "20000", "--bag", "sample", *toy,
                                  "--format", "text", "-o", str(tmp_path / "o.txt")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "o.txt").read_text().splitlines()
    assert len(lines) == 20 and all(len(line.split()) == 20_000 for line in lines)
    assert peak < 30e6, f"{peak / 1e6:.0f} MB for 400,000 output words"  # collected (before): 99 MB; streamed: 13 MB


# -- markup ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["[/x].txt", "[red]x.txt", "[bold]"])
def test_user_text_is_printed_verbatim_never_as_markup(tmp_path, toy, name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _one_error(runner.invoke(app, ["obfuscate", name, "-e", "10", "-n", "2", *toy]), name)
    _one_error(runner.invoke(app, ["guarantee", name, name, "-e", "1", *toy]), name)
    _one_error(runner.invoke(app, ["evaluate", name]), name)
    _one_error(runner.invoke(app, ["obfuscate", "-e", "10", "-n", "2", *toy, "--text-field", name,
                                   "--input-format", "jsonl"], input='{"text": "aaq abq"}\n'), repr(name))
    # a warning that names an id, and the guarantee table that names a file
    _corpus(tmp_path / "c.jsonl", 3, ids=[name, "b", name])
    res = runner.invoke(app, ["obfuscate", "c.jsonl", "-e", "10", "-n", "2", *toy])
    assert res.exit_code == 0 and f"(first: {name!r})" in res.stderr, res.stderr
    (tmp_path / name).parent.mkdir(exist_ok=True)  # "[/x].txt" is the file "x].txt" in the folder "["
    _doc(tmp_path / name)
    res = runner.invoke(app, ["guarantee", name, name, "-e", "1", "-n", "3", *toy])
    assert res.exit_code == 0 and f"{Path(name).name}: 12 words" in res.stdout, res.output


def test_missing_extra_hint_keeps_the_extra_name(capsys):
    import typer

    from textdp.cli._common import cli_errors

    with pytest.raises(typer.Exit), cli_errors():
        raise MissingDependencyError("this feature needs faiss; install it with: pip install 'textdp[faiss]'")
    assert "pip install 'textdp[faiss]'" in capsys.readouterr().err


def _help(*args: str) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return re.sub(r"[\s│]+", " ", res.stdout)


def test_help_text_is_shown_as_written():
    assert "OUTPUT.settings.json" in _help("topics") and "<bool>" not in _help("topics")
    assert "(default: [run] output, else report-<corpus>)" in _help("evaluate")
    text = _help("obfuscate")
    assert "epsilon*N*W_inf" in text and "<bool>" not in text and "--force" in text and "--strict-ids" in text
    assert "<bool>" not in _help() and "<bool>" not in _help("guarantee")


# -- interrupts (a real process, a real signal) --------------------------------------------------------------
def _spawn(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TEXTDP_CACHE_DIR": str(cwd / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    return subprocess.Popen([sys.executable, "-m", "textdp", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(cond, proc, seconds: float = 60) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if cond():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_on_the_single_engine_leaves_nothing_and_says_so(tmp_path, toy, sig, status):
    _corpus(tmp_path / "c.jsonl", 3000)
    proc = _spawn(["obfuscate", "c.jsonl", "-e", "5", "-n", "3000", "--bag", "sample", *toy, "-o", "out.jsonl"],
                  tmp_path)
    try:
        started = _wait_for(lambda: any(tmp_path.glob(".out.jsonl.*.tmp")), proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert started, "the run ended before it could be interrupted; make the workload larger"
    assert proc.returncode == status, err
    assert "interrupted: no output was written" in err and "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists() and not list(tmp_path.glob(".out*"))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_on_a_partitioned_run_says_what_remains_and_rerunning_resumes(tmp_path, toy):
    _corpus(tmp_path / "c.jsonl", 2400)
    args = ["obfuscate", "c.jsonl", "-e", "5", "-n", "400", "--bag", "sample", *toy, "--seed", "3",
            "--engine", "local", "--partitions", "300", "-o", "out"]
    proc = _spawn(args, tmp_path)
    try:
        started = _wait_for(lambda: len(list((tmp_path / "out").glob("part-*"))) >= 2, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert started, "the run ended before it could be interrupted; make the workload larger"
    parts = sorted((tmp_path / "out").glob("part-*"))
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert f"interrupted: {len(parts)} of 300 part files are finished in out" in err, err
    assert "run the same command again" in err and "no partial output" not in err
    assert 0 < len(parts) < 300 and not list((tmp_path / "out").glob(".*.tmp"))
    done = _spawn(args, tmp_path)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    ids = [json.loads(line)["id"] for p in sorted((tmp_path / "out").glob("part-*"))
           for line in p.read_text().splitlines()]
    assert sorted(ids) == sorted(f"d{i}" for i in range(2400))


# -- duplicate ids ---------------------------------------------------------------------------------------
def test_duplicate_ids_warn_on_stderr_or_are_refused(tmp_path, toy):
    inp = _corpus(tmp_path / "c.jsonl", 6, ids=["a", "b", "a", "c", "b", "a"])
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["obfuscate", str(inp), "-e", "5", "-n", "3", *toy, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "warning: 3 records repeat an earlier record's id (first: 'a')" in res.stderr
    assert "warning" not in out.read_text() and len(out.read_text().splitlines()) == 6
    _one_error(runner.invoke(app, ["obfuscate", str(inp), "-e", "5", "-n", "3", *toy, "-o", str(tmp_path / "s.jsonl"),
                                   "--strict-ids"]), "3 records repeat", "'a'")
    assert not (tmp_path / "s.jsonl").exists()
    # documents without an id field get sequence numbers, which can collide with given ids
    (tmp_path / "mixed.jsonl").write_text('{"text": "aaq abq acq"}\n{"id": "0", "text": "adq aeq afq"}\n')
    _one_error(runner.invoke(app, ["obfuscate", str(tmp_path / "mixed.jsonl"), "-e", "5", "-n", "3", *toy,
                                   "--strict-ids"]), "1 record repeats", "'0'")


def test_duplicate_ids_in_a_partitioned_run(tmp_path, toy, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    ids = [f"d{i}" for i in range(20)]
    ids[17] = "d3"
    inp = _corpus(tmp_path / "c.jsonl", 20, ids=ids)
    args = ["obfuscate", str(inp), "-e", "5", "-n", "3", *toy, "--engine", "local", "--partitions", "4"]
    _one_error(runner.invoke(app, [*args, "-o", str(tmp_path / "strict"), "--strict-ids"]), "first: 'd3'")
    assert not (tmp_path / "strict").exists()  # refused before anything was written
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert res.exit_code == 0 and "1 record repeats an earlier record's id (first: 'd3')" in res.stderr


# -- guarantee reads documents as obfuscate does -------------------------------------------------------------
def test_guarantee_reads_jsonl_like_obfuscate(tmp_path, glove):
    text = "Gulls circle above the fishing boats in the harbour at dawn."
    (tmp_path / "a.txt").write_text(text)
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "president", "text": text, "chicago": "economy"}) + "\n")
    (tmp_path / "a.body").write_text(json.dumps({"body": text}) + "\n")
    runs = [
        [str(tmp_path / "a.jsonl"), str(tmp_path / "a.txt")],
        [str(tmp_path / "a.body"), str(tmp_path / "a.body"), "--input-format", "jsonl", "--text-field", "body"],
    ]
    for files in runs:
        res = runner.invoke(app, ["guarantee", *files, "-e", "10", "--json"])
        assert res.exit_code == 0, res.output
        g = json.loads(res.stdout)
        # JSON keys and other fields are not words of the document
        assert g["n_tokens_a"] == g["n_tokens_b"] == len(normalize(text)) and g["distance"] == 0.0
    (tmp_path / "two.jsonl").write_text('{"text": "boats"}\n{"text": "gulls"}\n')
    _one_error(runner.invoke(app, ["guarantee", str(tmp_path / "two.jsonl"), str(tmp_path / "a.txt"), "-e", "1"]),
               "holds 2 documents")


# -- other hostile files -------------------------------------------------------------------------------------
def test_lone_surrogate_id_and_malformed_parquet_are_one_line_errors(tmp_path, toy, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "s.jsonl").write_text('{"id": "\\udc80", "text": "aaq abq acq adq"}\n')
    _one_error(runner.invoke(app, ["obfuscate", str(tmp_path / "s.jsonl"), "-e", "5", "-n", "2", *toy, "-o",
                                   str(tmp_path / "o.jsonl")]), "not valid Unicode")
    assert not (tmp_path / "o.jsonl").exists()
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    _one_error(runner.invoke(app, ["obfuscate", str(tmp_path / "bad.parquet"), "-e", "5", "-n", "2", *toy,
                                   "--engine", "local", "-o", str(tmp_path / "out")]), "not a readable Parquet file")
