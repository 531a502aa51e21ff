"""Issue 27 section 3: the next round of first-contact traps of the command line.

Each test fails on a779fc6: ``train-rewriter`` stopped before its first checkpoint could not be resumed (and said
"nothing was kept" beside config.json and vocab.txt); ``--engine single`` read a Parquet file as text; ``evaluate``
worked for minutes before saying it needed [eval]; ``-o file/out.jsonl`` said "File exists"; a run refused for an
unwritable output folder left an "interrupted" run in the cache; ``--param`` errors hid the value or listed
epsilon and seed; UTF-16 was "byte 0xff"; ``rewrite --help`` cut option names at 80 columns; there was no ``-h``,
``-V`` or completion; and ``textdp --version`` imported scipy.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
from cli_checks import one_error
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()


# -- item 1: train-rewriter interrupted before its first checkpoint resumes ------------------------------------------
ANIMALS = ["cat", "dog", "horse", "bird", "fox", "cow", "sheep"]
PLACES = ["garden", "river", "house", "field", "forest", "barn"]
TOY = [f"The {a} ran to the {p} and slept there." for a in ANIMALS for p in PLACES]
TINY = ["--vocab-size", "40", "--encoder-hidden", "8", "--latent", "8", "--decoder-hidden", "16",
        "--max-length", "12", "--batch-size", "16", "--epochs", "2", "--seed", "1234567", "--threads", "1", "-q"]


def test_train_rewriter_stopped_before_its_first_checkpoint_resumes(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import textdp.generation.training as training

    corpus = tmp_path / "train.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in TOY))
    real = training.train_rewriter
    threads = torch.get_num_threads()

    def interrupted(*args, **kwargs):  # 3 steps per epoch, one checkpoint per epoch: step 1 is before the first
        def on_step(step):
            if step == 1:
                signal.raise_signal(signal.SIGTERM)
        return real(*args, **{**kwargs, "on_step": on_step})

    out = tmp_path / "m"
    try:
        with monkeypatch.context() as m:
            m.setattr(training, "train_rewriter", interrupted)
            res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])
        assert res.exit_code == 143, res.output
        assert "nothing was kept" not in res.output, res.output  # config.json and vocab.txt are there
        assert "checkpoint.pt holds step 0 (the start of the run)" in res.output, res.output
        assert "run the same command again" in res.output and (out / "checkpoint.pt").exists()
        res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])  # the promised resume
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        assert not summary["stopped_early"] and summary["steps"] == 6 and not (out / "checkpoint.pt").exists()
        alone = tmp_path / "alone"  # the same model as a run that was never interrupted
        assert runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(alone), *TINY]).exit_code == 0
        a = torch.load(out / "model.pt", weights_only=True)
        b = torch.load(alone / "model.pt", weights_only=True)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    finally:
        torch.set_num_threads(threads)


# -- item 2: Parquet input ---------------------------------------------------------------------------------------------
DOCS = [("a", "the cat sat on the mat by the river today"), ("b", "a dog ran through the green park at noon")]


@pytest.fixture()
def parquet_and_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [i for i, _ in DOCS], "text": [t for _, t in DOCS]}), tmp_path / "in.parquet")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in DOCS))
    return tmp_path / "in.parquet", tmp_path / "in.jsonl"


def test_engine_single_reads_parquet_as_parquet(parquet_and_jsonl):
    pq_file, jsonl = parquet_and_jsonl
    args = ["-e", "10", "--size", "4", "--seed", "7", "--engine", "single"]
    res = runner.invoke(app, ["obfuscate", str(pq_file), *args])
    assert res.exit_code == 0, res.output
    same = runner.invoke(app, ["obfuscate", str(jsonl), *args])  # the same documents, ids and seed
    assert same.exit_code == 0 and res.stdout == same.stdout
    assert [json.loads(line)["id"] for line in res.stdout.splitlines()] == ["a", "b"]
    res = runner.invoke(app, ["obfuscate", str(pq_file), *args, "--input-format", "text"])  # as text: says what it is
    one_error(res, "in.parquet: is a Parquet file", "--input-format")


def test_default_engine_on_parquet_suggests_engine_local(parquet_and_jsonl, tmp_path, monkeypatch):
    import sys

    pq_file, _ = parquet_and_jsonl
    args = ["-e", "10", "--size", "4", "--seed", "7"]
    monkeypatch.setitem(sys.modules, "distributed", None)  # the [dask] extra is not installed
    one_error(runner.invoke(app, ["obfuscate", str(pq_file), *args]), "-o DIRECTORY", "--engine local",
              "--engine single")
    res = runner.invoke(app, ["obfuscate", str(pq_file), *args, "-o", str(tmp_path / "out")])
    one_error(res, "add --engine local", "no extra needed")
    assert not (tmp_path / "out").exists()
    res = runner.invoke(app, ["obfuscate", str(pq_file), *args, "-o", str(tmp_path / "out"), "--engine", "local"])
    assert res.exit_code == 0, res.output  # what was suggested works without the extra
    assert (tmp_path / "out" / "manifest.json").exists()


def _help(*command: str) -> str:
    """The ``--help`` text of ``command`` at 80 columns, box lines dropped and white space joined."""
    res = runner.invoke(app, [*command, "--help"], terminal_width=80)
    assert res.exit_code == 0, res.output
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())


def test_files_help_lists_parquet():
    for command in ("obfuscate", "rewrite", "train-rewriter"):  # they all read through textdp.io
        assert "Parquet files (.parquet or .pq: one document per row" in _help(command), command


# -- item 3: evaluate checks its extras before any work ---------------------------------------------------------------
def test_evaluate_without_its_extra_fails_before_any_work(tmp_path, monkeypatch):
    import sys

    import textdp.evaluation.experiment as experiment

    config = tmp_path / "c.toml"
    config.write_text('[corpus]\nname = "reuter_50_50"\n[mechanism]\nepsilons = [10]\n'
                      '[attackers]\nmodels = ["nn-author", "char-ngram"]\n')

    def no_work(*args, **kwargs):
        raise AssertionError("the experiment started before its extras were checked")

    monkeypatch.setattr(experiment, "build_evaluation_set", no_work)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # scikit-learn ([eval]) is not installed
    res = runner.invoke(app, ["evaluate", str(config), "-o", str(tmp_path / "r"), "--no-plots"])
    one_error(res, "'sklearn'", "[eval]", "pip install '.[eval]'")
    monkeypatch.delitem(sys.modules, "sklearn")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the plots need it too, unless --no-plots
    one_error(runner.invoke(app, ["evaluate", str(config), "-o", str(tmp_path / "r")]), "'matplotlib'", "[eval]")
    assert not (tmp_path / "r").exists()


# -- item 4: an output path through a file -----------------------------------------------------------------------------
def test_output_under_a_file_is_one_clear_line(tmp_path):
    (tmp_path / "notadir").write_text("a file the user keeps")
    (tmp_path / "in.txt").write_text("the cat sat on the mat")
    args = ["obfuscate", str(tmp_path / "in.txt"), "-e", "10", "--size", "3"]
    for out in ("notadir/out.jsonl", "notadir/deeper/out.jsonl"):
        res = runner.invoke(app, [*args, "-o", str(tmp_path / out)])
        one_error(res, f"--output {tmp_path / out}: {tmp_path / 'notadir'} is a file, not a folder")
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "o.jsonl"), "--private-report",
                              str(tmp_path / "notadir" / "r.jsonl")])
    one_error(res, "--private-report", "is a file, not a folder")
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "notadir" / "out"), "--engine", "local"])
    one_error(res, "is a file, not a folder")
    assert (tmp_path / "notadir").read_text() == "a file the user keeps" and not (tmp_path / "o.jsonl").exists()


# -- item 5: a run refused for an unwritable output folder leaves nothing in the cache -------------------------------
def test_unwritable_output_folder_leaves_no_run_in_the_cache(tmp_path, glove, monkeypatch):
    import os

    import numpy as np

    if os.geteuid() == 0:  # root writes through permission bits: a read-only file system refuses it too
        out = Path("/sys") / "textdp-test-output"
        try:
            out.mkdir()
        except OSError:
            pass
        else:  # pragma: no cover - a writable /sys
            out.rmdir()
            pytest.skip("no folder here refuses root")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        out = locked / "out"
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    np.save(tmp_path / "v.npy", np.asarray(glove.vectors[:3000]))
    (tmp_path / "w.txt").write_text("\n".join(glove.words[:3000]) + "\n")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for _, t in DOCS))
    res = runner.invoke(app, ["obfuscate", str(tmp_path / "in.jsonl"), "-e", "10", "--size", "3", "--engine", "local",
                              "--embeddings", str(tmp_path / "v.npy"), "--words", str(tmp_path / "w.txt"),
                              "-o", str(out)])
    one_error(res, f"--output {out}: cannot write in {out.parent}")
    runs = cache / "runs"
    assert not runs.exists() or not [p for p in runs.iterdir() if not p.name.startswith(".")], list(runs.iterdir())
    res = runner.invoke(app, ["runs", "list"])
    assert res.exit_code == 0 and "interrupted" not in res.output, res.output


# -- item 7: --param errors, UTF-16, --empty in the README -----------------------------------------------------------
def test_param_errors_show_the_value_and_only_the_param_keys(tmp_path):
    (tmp_path / "in.txt").write_text("the cat sat on the mat")
    args = ["obfuscate", str(tmp_path / "in.txt"), "-e", "10", "--mechanism", "vickrey"]
    line = one_error(runner.invoke(app, [*args, "--param", "lambd=abc"]), "lambd", "'abc'")
    assert "got str" not in line
    line = one_error(runner.invoke(app, [*args, "--param", "bogus=1"]), "'bogus'", "t, lambd")
    keys = line.rsplit(":", 1)[1]
    assert "epsilon" not in keys and "seed" not in keys, line  # those have their own options
    one_error(runner.invoke(app, [*args, "--param", "seed=3"]), "--param seed", "its own option --seed")
    one_error(runner.invoke(app, ["audit", "vickrey", "--param", "lambd=abc"]), "lambd", "'abc'")


def test_utf16_input_is_named_with_how_to_convert(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_bytes("The cat sat on the mat.".encode("utf-16"))  # with its byte-order mark
    line = one_error(runner.invoke(app, ["obfuscate", str(f), "-e", "10", "--size", "3"]), "is UTF-16",
                     f"iconv -f UTF-16 -t UTF-8 {f}")
    assert "0xff" not in line


def test_the_empty_input_errors_option_is_in_the_readme_option_list(tmp_path):
    (tmp_path / "stop.txt").write_text("the and of")
    line = one_error(runner.invoke(app, ["obfuscate", str(tmp_path / "stop.txt"), "-e", "10", "--size", "3"]),
                     "--empty")
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    synopsis = readme[readme.index("Every option of `textdp obfuscate`:"):]
    synopsis = synopsis[: synopsis.index("```", synopsis.index("```") + 3)]
    for option in re.findall(r"--[a-z][a-z-]+", line):
        assert f"[{option} " in synopsis or f"[{option}]" in synopsis, (option, synopsis)


# -- item 9: --help at 80 columns never cuts an option name -----------------------------------------------------------
def _commands(group, path=()):  # type: ignore[no-untyped-def]
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))


def test_help_at_80_columns_shows_every_option_name_whole():
    import typer

    root = typer.main.get_command(app)
    checked = 0
    for path, cmd in _commands(root):
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert res.exit_code == 0, (path, res.output)
        assert "…" not in res.output, (path, [line for line in res.output.splitlines() if "…" in line])
        words = set(re.findall(r"--[a-z0-9][a-z0-9-]*", res.output))
        for p in cmd.params:
            for name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())):
                if name.startswith("--"):
                    assert name in words, (path, name)
                    checked += 1
    assert checked > 100  # every command's options were seen


# -- item 10: privatize() is typed (one record for a text, a list for an iterable), not Any ---------------------------
def test_privatize_is_typed_by_overloads_not_any():
    import typing

    from textdp import EarthMoversPrivacy
    from textdp.mechanisms.base import Mechanism

    for cls in (EarthMoversPrivacy, Mechanism):
        overloads = typing.get_overloads(cls.privatize)
        returns = [o.__annotations__["return"] for o in overloads]
        assert returns[:2] == ["R", "list[R]"], (cls, returns)  # a str: one record; an iterable: a list
        assert "Any" not in cls.privatize.__annotations__["return"]


# -- item 10: -h, -V, shell completion, and a start-up that imports only what the command uses ------------------------
def test_short_help_and_version_options():
    from textdp import __version__

    for args in (["-V"], ["--version"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and res.stdout.strip() == f"textdp {__version__}", res.output
    for path in ([], ["obfuscate"], ["runs"], ["runs", "list"], ["ledger", "show"]):
        short, long = runner.invoke(app, [*path, "-h"]), runner.invoke(app, [*path, "--help"])
        assert short.exit_code == 0 and "Usage: textdp" in short.output, (path, short.output)
        assert short.output == long.output


def test_shell_completion_is_offered_and_completes_commands_and_options():
    import os
    import subprocess
    import sys

    # the shell is named, not detected from the process tree (which differs between a terminal, CI and a test
    # runner); typer takes the name as the option's value when detection is off
    shown = subprocess.run([sys.executable, "-m", "textdp", "--show-completion", "bash"], capture_output=True,
                           text=True, check=False,
                           env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.returncode == 0 and "_TEXTDP_COMPLETE=complete_bash" in shown.stdout, shown.stdout + shown.stderr
    assert "--install-completion" in _help()

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_TEXTDP_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        out = subprocess.run([sys.executable, "-m", "textdp"], env=env, capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert complete("textdp obf", 1) == ["obfuscate"]
    assert complete("textdp obfuscate --private-re", 2) == ["--private-report"]
    assert complete("textdp runs ", 2) == ["list", "clean"]


def test_version_and_help_of_a_light_command_import_no_numerics():
    import subprocess
    import sys

    code = ("import sys\nfrom textdp.cli import app\n"
            "for args in (['--version'], ['-V'], ['runs', '-h'], ['ledger', 'show', '-h'], ['obfuscat']):\n"
            "    try:\n        app(args)\n    except SystemExit:\n        pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'torch', 'sklearn'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_the_lazy_command_table_is_what_the_modules_register():
    from textdp.cli import COMMAND_MODULES, COMMANDS, load_module_commands

    registered = {name: module for module in COMMAND_MODULES for name in load_module_commands(module)}
    assert registered == COMMANDS


def test_calibrate_prints_plain_progress_lines_off_a_terminal(monkeypatch):
    import functools

    import textdp.cli._common as common

    monkeypatch.setattr(common, "progress_lines", functools.partial(common.progress_lines, every=0.0))
    args = ["calibrate", "--vocab-size", "20000", "--n-words", "20", "--repeats", "2", "--rank-min", "100",
            "--rank-max", "3000", "--epsilons", "10", "--seed", "1"]
    res = runner.invoke(app, args)  # CliRunner's stderr is not a terminal: no bar, lines
    assert res.exit_code == 0, res.output
    scanned = [line for line in res.stderr.splitlines() if line.startswith("calibrate: vocabulary scanned: ")]
    done = [int(line.split(": ")[2].split("/")[0]) for line in scanned]
    assert len(done) >= 4 and done == sorted(done) and scanned[-1].startswith(
        "calibrate: vocabulary scanned: 20000/20000 (100%)"), res.stderr
    assert "calibrate: epsilons decoded: 2/2 (100%)" in res.stderr
    quiet = runner.invoke(app, [*args, "--json"])  # machine output: no progress lines
    assert quiet.exit_code == 0 and "calibrate:" not in quiet.stderr


# -- item 11: the docs say what their examples need ------------------------------------------------------------------
def test_new_mechanism_doc_names_the_extra_its_example_needs():
    from textdp.errors import install_hint

    text = (Path(__file__).resolve().parents[1] / "docs" / "new-mechanism.md").read_text(encoding="utf-8")
    first_import = text.index(">>> from sklearn")
    before = " ".join(text[:first_import].split())
    assert "scikit-learn" in before and "[eval]" in before, "say which extra the example's sklearn import needs"
    assert install_hint("eval").split(": ", 1)[1] in before  # the same command as the library's hints


@pytest.mark.slow  # one unseeded calibration at 400,000 words: a minute or two on 2 cores
def test_an_unseeded_calibration_lies_in_the_range_the_readme_states():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    item = " ".join(readme[readme.index("**Which ε keeps most words?**"):].split())
    low, high = map(float, re.search(r"expect (\d+(?:\.\d+)?)–(\d+(?:\.\d+)?)", item).groups())
    res = runner.invoke(app, ["calibrate", "--target-unchanged", "0.5", "--epsilons", "", "--json"])
    assert res.exit_code == 0, res.output
    eps = json.loads(res.stdout)["epsilon"]
    assert low <= eps <= high, (eps, low, high)


@pytest.mark.slow  # the whole Reuters C50 evaluation: about 5 CPU minutes
def test_evaluate_c50_reproduces_the_counts_of_evaluation_results(tmp_path, shared_data, monkeypatch):
    if not (shared_data / "reuter_50_50").is_dir():
        pytest.skip("reuter_50_50 not in the shared data")
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "evaluation-results.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Reuters C50"):]
    header = "| eps | words unchanged | koppel-pan | koppel-2011 | nn-author (mean vec) | char-ngram (TF-IDF+SVM) |"
    lines = section[section.index(header):].splitlines()[2:]
    documented = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("|") or cells[0] == "chance":
            break
        documented[cells[0]] = [int(c) for c in cells[2:6]]
    monkeypatch.setenv("TEXTDP_DATA_DIR", str(shared_data))
    res = runner.invoke(app, ["evaluate", str(root / "examples" / "evaluate-c50.toml"), "-q", "--no-plots",
                              "-o", str(tmp_path / "report")])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "report" / "results.json").read_text())
    models = ["koppel-pan", "koppel-2011", "nn-author", "char-ngram"]
    measured: dict[str, list[int]] = {}
    for r in rows:
        if r["kind"] == "attack" and r.get("text", "bag") == "bag" and r["model"] in models:
            eps = "none" if r["epsilon"] is None else f"{r['epsilon']:g}"
            measured.setdefault(eps, [0] * 4)[models.index(r["model"])] = r["correct"]
    assert measured == documented
