"""Hostile input to ``textdp topics`` and ``textdp topics-report`` never wins (issue 10).

Each case ends in a correct result, or in one ``error: ...`` line and exit status 2 (130 after
SIGINT): never a traceback, a silently replaced file, a release written owner-only, or markup
eaten from a file name. The runs use a 40-document toy corpus and a supplied sensitivity (no
sampling), except the interrupt test, which interrupts a real sampler in a real process.
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
from pathlib import Path

import pytest
from cli_checks import one_error as _one_error
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()
THEMES = ["president press economy inflation markets investors", "farmer apples pears market river harvest",
          "football team match season fans training", "music band concert guitar songs album"]
#: A valid, fast invocation (no sampling, no cache); the corpus and the outputs are appended.
FAST = ["--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2", "--topics", "2", "--keywords", "2",
        "--sensitivity", "0.5", "--no-cache", "-q", "--seed", "1"]


def _corpus(path: Path, users: int = 5, docs: int = 40) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(docs):
            text = f"{THEMES[i % 4]} {THEMES[i // 4 % 4].split()[0]}"
            fh.write(json.dumps({"id": f"d{i}", "text": text, "author": f"u{i % users}"}) + "\n")
    return path


@pytest.fixture()
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = _corpus(tmp_path / "docs.jsonl")
    os.chmod(path, 0o644)
    return path


# -- (a) clobbering ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "relative"])
def test_an_output_that_is_the_corpus_is_refused(corpus, how):
    before = corpus.read_bytes()
    target = {"same": "docs.jsonl", "symlink": "link.jsonl", "hardlink": "hard.jsonl",
              "relative": "sub/../docs.jsonl"}[how]
    if how == "symlink":
        os.symlink("docs.jsonl", "link.jsonl")
    elif how == "hardlink":
        os.link("docs.jsonl", "hard.jsonl")
    elif how == "relative":
        os.mkdir("sub")
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", target]), "is the input file", "--force")
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "--private-report", target]),
               "--private-report", "is the input file")
    assert corpus.read_bytes() == before and stat.S_IMODE(corpus.stat().st_mode) == 0o644


def test_the_settings_file_of_the_release_never_replaces_the_corpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = _corpus(tmp_path / "r.json.settings.json")
    before = src.read_bytes()
    _one_error(runner.invoke(app, ["topics", str(src), *FAST, "-o", "r.json"]), "settings file", "is the input file")
    assert src.read_bytes() == before and not (tmp_path / "r.json").exists()


def test_existing_outputs_are_refused_and_force_replaces_them(corpus):
    out = Path("out.json")
    out.write_text("old release\n")
    out.chmod(0o444)
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "out.json"]), "--output", "exists", "--force")
    assert out.read_text() == "old release\n" and not Path("out.json.settings.json").exists()
    Path("private.json").write_text("keep me\n")
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "new.json", "--private-report",
                                   "private.json"]), "--private-report", "exists")
    assert Path("private.json").read_text() == "keep me\n" and not Path("new.json").exists()
    res = runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "out.json", "--force"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["mechanism"] == "topicdp"
    assert stat.S_IMODE(out.stat().st_mode) == 0o444  # the user's mode stays
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "x.json", "--private-report", "x.json",
                                   "--force"]), "same file")


# -- (b) markup in file names ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["[/x]y.json", "[red]x.json", "[bold]"])
def test_output_names_are_printed_verbatim(corpus, name):
    Path(name).parent.mkdir(exist_ok=True)  # "[/x]y.json" is the file "x]y.json" in the folder "["
    res = runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", name])
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"wrote {name} (topicdp, epsilon 3)" in res.stderr, res.stderr
    assert json.loads(Path(name).read_text())["epsilon"] == 3.0


# -- (c) file modes -------------------------------------------------------------------------------------------
def test_the_release_gets_the_umask_mode_and_the_private_report_is_owner_only(corpus):
    old = os.umask(0o027)
    try:
        res = runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "r.json", "--private-report", "p.json"])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(Path("r.json").stat().st_mode) == 0o640
    assert stat.S_IMODE(Path("r.json.settings.json").stat().st_mode) == 0o640
    assert stat.S_IMODE(Path("p.json").stat().st_mode) == 0o600
    assert "n_users" in json.loads(Path("p.json").read_text())


# -- (d, e) help -------------------------------------------------------------------------------------------------
def _help(*args: str) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return re.sub(r"[\s│]+", " ", res.stdout)


def test_topics_help_shows_single_flags_and_the_usage_of_every_command():
    for command in ("topics", "topics-report"):
        text = _help(command)
        assert "--no-no-cache" not in text and "default: no-" not in text and "<bool>" not in text
        assert f"Usage: textdp {command} [OPTIONS] CORPUS " in text and "{corpus}" not in text
        assert "--force" in text and "--strip-quotes" in text
    assert "--no-cache Do not read or write the cache." in _help("topics")
    # one usage style for every command: arguments in upper case, optional ones in brackets
    assert "Usage: textdp guarantee [OPTIONS] DOC_A DOC_B " in _help("guarantee")
    assert "Usage: textdp obfuscate [OPTIONS] [FILES]... " in _help("obfuscate")
    assert "Usage: textdp evaluate [OPTIONS] CONFIG " in _help("evaluate")
    assert "Usage: textdp audit [OPTIONS] [MECHANISM] " in _help("audit")


# -- (f) topics-report -------------------------------------------------------------------------------------------
def test_topics_report_refuses_a_file_or_a_non_empty_folder_before_any_work(corpus):
    before = corpus.read_bytes()
    t0 = time.perf_counter()
    _one_error(runner.invoke(app, ["topics-report", "docs.jsonl", "-o", "docs.jsonl"]), "is a file")
    Path("rep").mkdir()
    Path("rep/notes.md").write_text("mine\n")
    _one_error(runner.invoke(app, ["topics-report", "docs.jsonl", "-o", "rep"]), "not empty", "--force")
    _one_error(runner.invoke(app, ["topics-report", "docs.jsonl", "-o", "new", "--epsilon", "1e300"]),
               "supported range")
    assert time.perf_counter() - t0 < 20 and corpus.read_bytes() == before
    assert Path("rep/notes.md").read_text() == "mine\n" and not Path("new").exists()


# -- interrupts (a real process, a real signal) ------------------------------------------------------------------
def _users_corpus(path: Path, users: int = 10, docs: int = 8) -> Path:
    words = [t.split() for t in THEMES]
    with open(path, "w", encoding="utf-8") as fh:
        for u in range(users):
            for d in range(docs):
                text = " ".join(words[(u + (k % 3 == 0) * d) % 4][(k * 7 + d) % 6] for k in range(30))
                fh.write(json.dumps({"author": f"u{u}", "text": text}) + "\n")
    return path


def _spawn(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TEXTDP_CACHE_DIR": str(cwd / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    return subprocess.Popen([sys.executable, "-m", "textdp", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_while_sampling_says_what_the_cache_keeps_and_rerunning_resumes(tmp_path):
    _users_corpus(tmp_path / "u.jsonl")
    args = ["topics", "u.jsonl", "--mechanism", "topicdp", "--gamma", "0.2", "--topics", "2", "--keywords", "2", "--max-iter", "1",
            "--model-topics", "2", "--max-features", "50", "--seed", "1", "-q", "-o", "r.json"]
    proc = _spawn(args, tmp_path)
    cache = tmp_path / "cache" / "topics"
    try:
        deadline = time.monotonic() + 120
        # saved = keyed: write_keyed writes the samples, then their MAC (a file without one is not used, and the
        # message rightly says no sample was saved yet: interrupting between the two failed under load)
        while time.monotonic() < deadline and proc.poll() is None and not list(cache.glob("sens-*.json.hmac")):
            time.sleep(0.02)
        started = proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert started, "the run ended before it could be interrupted; make the workload larger"
    assert proc.returncode == 130 and "Traceback" not in err, err
    (path,) = cache.glob("sens-*.json")
    kept = json.loads(path.read_text())["samples"]
    line = [x for x in err.splitlines() if x.startswith("interrupted:")]
    assert len(line) == 1, err
    assert f"no release was written; {len(kept)} of 61 sensitivity samples are saved in the cache" in line[0], err
    assert "run the same command again to resume" in line[0] and str(path) in err.replace("\n", "")
    assert 25 <= len(kept) < 61 and not (tmp_path / "r.json").exists() and not list(tmp_path.glob(".r.json*"))
    done = _spawn(args, tmp_path)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    resumed = json.loads(path.read_text())["samples"]
    assert len(resumed) == 61 and resumed[: len(kept)] == kept  # the saved samples were reused, not redrawn
    assert json.loads((tmp_path / "r.json").read_text())["mechanism"] == "topicdp"


def test_the_interrupt_message_without_a_cache_says_the_samples_are_lost(tmp_path):
    from textdp.cli.topics import _interrupted_message
    from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus

    data = UserCorpus.from_jsonl(_users_corpus(tmp_path / "u.jsonl"), max_features=50)
    model = SklearnLDA(n_topics=2, max_iter=1)
    lost = SensitivitySampler(corpus=data, model=model, sizes=[(2, 2)], cache_dir=None)
    assert _interrupted_message(lost, 61).startswith("no release was written; the sensitivity samples drawn so far "
                                                     "are lost (--no-cache)")
    empty = SensitivitySampler(corpus=data, model=model, sizes=[(2, 2)], cache_dir=tmp_path / "c")
    assert "no sensitivity sample was saved yet" in _interrupted_message(empty, 61)


def test_dash_is_stdout_and_an_empty_output_name_is_one_error(corpus):
    res = runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", "-"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mechanism"] == "topicdp" and not Path("-").exists()
    _one_error(runner.invoke(app, ["topics", "docs.jsonl", *FAST, "-o", ""]), "is a directory")
