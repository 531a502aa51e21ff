"""Issue 38, items 1-8: the fourth round of first-contact traps of the command line.

Each test fails on e24cd34: ``--force`` replaced a character device or FIFO with a regular file (and wrote
``OUT.settings.json`` beside it); ``textdp rewrite MODEL.gguf`` was refused; the private input was accepted as the
``--clip-public`` text; ``audit --all`` did not say what a flag means nor how to re-audit it; an interrupted run's
private copy outlived its folder; ``runs clean`` without a name (or ``--all`` with nothing) failed; a Ctrl+C could
end in a traceback; and the small ones of item 8 (``--empty skip`` said nothing, Python words in CLI errors, ...).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from cli_checks import one_error
from typer.testing import CliRunner

from textdp.cli import COMMANDS, app
from textdp.errors import OutputExistsError
from textdp.io import atomic_writer

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)


@pytest.fixture()
def toy(tmp_path: Path) -> list[str]:
    """``--embeddings/--words`` options of a 300-word, 8-d vocabulary (fast to load and decode)."""
    rng = np.random.default_rng(5)
    np.save(tmp_path / "v.npy", rng.standard_normal((300, 8)).astype(np.float32))
    (tmp_path / "w.txt").write_text("\n".join(WORDS) + "\n")
    return ["--embeddings", str(tmp_path / "v.npy"), "--words", str(tmp_path / "w.txt"), "--stop-words", "none"]


def _doc(path: Path, n: int = 12) -> Path:
    path.write_text(" ".join(WORDS[:n]) + "\n")
    return path


# -- item 1: --force never replaces what is not a regular file ------------------------------------------------------
def _special_nodes(folder: Path) -> list[tuple[str, Path]]:
    """A FIFO, and (as root, where the system allows it) a character device like /dev/null."""
    nodes = []
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    nodes.append(("fifo", fifo))
    try:
        os.mknod(folder / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        nodes.append(("char", folder / "null"))
    except (PermissionError, OSError):
        pass
    return nodes


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


#: Every command that writes a file, and how it names each output (OUT: the special file; DIR: a folder holding a
#: special file called as the command's report file). Each is refused with --force where the command has it.
WRITERS = {
    "obfuscate": ["obfuscate {doc} -e 10 -n 5 {toy} -o OUT --force",
                  "obfuscate {doc} -e 10 -n 5 {toy} -o {tmp}/o.jsonl --private-report OUT --force",
                  "obfuscate {doc} -e 10 -n 5 {toy} -o {tmp}/sub/o.jsonl --ledger OUT",
                  "obfuscate {doc} -e 10 -n 5 {toy} --engine local -o OUT --force"],
    "topics": ["topics {corpus} -o OUT --force", "topics {corpus} --private-report OUT --force"],
    "topics-report": ["topics-report {corpus} -o OUT --force", "topics-report {corpus} -o DIR --force"],
    "evaluate": ["evaluate {root}/examples/evaluate-c50.toml -o OUT --force --no-plots",
                 "evaluate {root}/examples/evaluate-c50.toml -o DIR --force --no-plots"],
    "evaluate-generation": ["evaluate-generation {root}/examples/evaluate-generation-c50-small.toml -o OUT",
                            "evaluate-generation {root}/examples/evaluate-generation-c50-small.toml -o DIR",
                            "evaluate-generation {root}/examples/evaluate-generation-c50-small.toml "
                            "--write-training-corpus OUT"],
    "train-rewriter": ["train-rewriter {corpus} -o OUT"],
    "rewrite": ["rewrite {model} {doc} -e 10 -o OUT --force",
                "rewrite {model} {doc} -e 10 --mechanism dp-prompt -o OUT --force",
                "rewrite {model} {doc} -e 10 -o {tmp}/r.jsonl --private-report OUT --force",
                "rewrite {model} {doc} -e 10 -o {tmp}/r.jsonl --ledger OUT"],
    "ledger": ["ledger reset OUT"],
}
#: The commands that write no file (they print, serve, or delete runs of their own).
READERS = {"guarantee", "calibrate", "audit", "runs", "serve"}


def test_every_command_is_classified_as_writing_or_not():
    assert set(WRITERS) | READERS == set(COMMANDS) and not set(WRITERS) & READERS


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_force_never_replaces_a_device_or_fifo(command, tmp_path, toy, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TEXTDP_DATA_DIR", str(tmp_path / "no-data"))
    doc = _doc(tmp_path / "d.txt")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"user": f"u{i % 3}", "text": "the cat sat on the mat"}) + "\n"
                              for i in range(9)))
    (tmp_path / "model").mkdir()
    (tmp_path / "sub").mkdir()
    fill = {"doc": doc, "toy": " ".join(toy), "corpus": corpus, "root": ROOT, "model": tmp_path / "model",
            "tmp": tmp_path}
    for kind, node in _special_nodes(tmp_path):
        for template in WRITERS[command]:
            where = node
            if "DIR" in template:  # a report folder that holds a device or FIFO named like a report file
                where = tmp_path / f"rep-{kind}"
                where.mkdir()
                os.rename(node, where / "report.md")
                node = where / "report.md"
            args = template.format(**fill).replace("OUT", str(where)).replace("DIR", str(where)).split()
            before = _kind(node)
            res = runner.invoke(app, args)
            one_error(res)
            assert _kind(node) == before, (args, res.output)  # still the device or FIFO
            assert not Path(str(node) + ".settings.json").exists(), args
            if "DIR" in template:
                os.rename(node, tmp_path / kind)
                node = tmp_path / kind


def test_the_output_check_names_the_device_and_the_sidecar_is_refused_too(tmp_path, toy):
    doc = _doc(tmp_path / "d.txt")
    for kind, node in _special_nodes(tmp_path):
        res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", *toy, "-o", str(node), "--force"])
        line = one_error(res, f"--output {node} is a", "not a regular file", "not even with --force")
        assert ("FIFO" in line) if kind == "fifo" else ("character device" in line)
        out = tmp_path / f"{kind}.jsonl"  # the release is a new file, its settings file a device: refused
        os.rename(node, tmp_path / f"{kind}.jsonl.settings.json")
        res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", *toy, "-o", str(out), "--force"])
        one_error(res, "--output's settings file")
        assert not out.exists()


def test_atomic_writer_never_replaces_a_special_file_even_one_made_while_writing(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputExistsError, match="FIFO"), atomic_writer(fifo) as fh:
        fh.write("x")
    late = tmp_path / "late"
    with pytest.raises(OutputExistsError, match="FIFO"), atomic_writer(late) as fh:
        fh.write("x")
        os.mkfifo(late)  # appears while the release is written
    assert stat.S_ISFIFO(os.lstat(late).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "late"]  # no temporary file left


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_dash_and_dev_stdout_mean_standard_output(name, tmp_path, toy):
    doc = _doc(tmp_path / "d.txt")
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", *toy, "-o", name, "--seed", "1"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(rec["words"]) == 5
    assert not Path("/dev/stdout.settings.json").exists() and not Path("-.settings.json").exists()


# -- item 2: every documented way to name a model: a folder, a .gguf file or its folder (rewrite and serve) ----------
@pytest.fixture(scope="module")
def model_names(tmp_path_factory):
    """The three documented ways to name a language model, each holding a tiny random causal model."""
    from helpers import tiny_gguf, tiny_lms

    root = tmp_path_factory.mktemp("named-models")
    gguf = tiny_gguf(root / "gguf-folder" / "tiny.gguf")  # a folder that holds one .gguf file and no config.json
    return {"hf-folder": tiny_lms(root / "hf")["causal"], "gguf-file": gguf, "gguf-folder": gguf.parent}


@pytest.mark.parametrize("how", ["hf-folder", "gguf-file", "gguf-folder"])
def test_rewrite_takes_every_documented_model_name(how, model_names, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # also: no same-named file here changes what is loaded
    doc = tmp_path / "d.txt"
    doc.write_text("the cat sat on the mat . the dog ran in the park .\n")
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["rewrite", str(model_names[how]), str(doc), "--mechanism", "dp-prompt", "-e", "10",
                              "--clip=-2,2", "--max-new-tokens", "3", "-o", str(out), "--seed", "1", "-q"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["mechanism"] == "dp-prompt" and rec["epsilon"] == 30
    model = json.loads((tmp_path / "out.jsonl.settings.json").read_text())["model"]
    assert (model.get("format") == "gguf") == how.startswith("gguf")


def test_a_gguf_file_is_loaded_by_its_full_path_not_a_same_named_file_here(model_names, tmp_path, monkeypatch):
    from textdp.generation.hf import load_language_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.gguf").write_bytes(b"not the model that was checked")
    load_language_model.cache_clear()  # loaded again here, not taken from an earlier test's load
    lm = load_language_model(str(model_names["gguf-file"]), "causal")
    assert lm.identity["format"] == "gguf"


@pytest.mark.parametrize("how", ["hf-folder", "gguf-file", "gguf-folder"])
def test_serve_takes_every_documented_model_name(how, model_names, tmp_path, monkeypatch):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import textdp.serve.server as server

    ran = []

    class Server:
        def run(self, sockets):  # type: ignore[no-untyped-def]
            ran.append(sockets)

    monkeypatch.setattr(server, "make_server", lambda app, **kw: Server())
    emb = tmp_path / "e.txt"  # a tiny word-vector file: the page's word mechanisms need one
    emb.write_text("".join(f"{w} {' '.join(str((i * 7 + k) % 5 - 2) for k in range(4))}\n"
                           for i, w in enumerate(WORDS[:50])))
    res = runner.invoke(app, ["serve", "--port", "0", "--embeddings", str(emb), "--model", str(model_names[how])])
    assert res.exit_code == 0, res.output
    assert "the page offers dp-prompt" in res.output and len(ran) == 1


# -- item 3: the private input is never the public clip text ----------------------------------------------------------
LETTER = ("Dear Ann,\nthe results of your blood test came back this morning and we need to talk about them soon.\n"
          "Best, Dr Miller\n")


@pytest.mark.parametrize("how", ["same-path", "other-path", "same-bytes", "holds-it", "holds-it-jsonl"])
def test_clip_public_that_is_or_holds_the_input_is_refused_before_the_model_loads(how, tmp_path, monkeypatch):
    import textdp.generation.hf as hf

    monkeypatch.chdir(tmp_path)
    letter = tmp_path / "letter.txt"
    letter.write_text(LETTER)
    (tmp_path / "sub").mkdir()
    public = {"same-path": "letter.txt", "other-path": "sub/../letter.txt", "same-bytes": "copy.txt",
              "holds-it": "public.txt", "holds-it-jsonl": "public.jsonl"}[how]
    (tmp_path / "copy.txt").write_text(LETTER)
    (tmp_path / "public.txt").write_text("Boats sail from the harbour at dawn.\n" + LETTER + "The end.\n")
    (tmp_path / "public.jsonl").write_text(json.dumps({"text": "Boats sail at dawn."}) + "\n"
                                           + json.dumps({"text": LETTER.strip()}) + "\n")
    monkeypatch.setattr(hf, "load_language_model", lambda *a, **k: pytest.fail("the model was loaded"))
    (tmp_path / "model").mkdir()
    res = runner.invoke(app, ["rewrite", "model", "letter.txt", "--mechanism", "dp-prompt", "-e", "10",
                              "--clip-public", public, "-o", "out.jsonl"])
    line = one_error(res, f"--clip-public {public}", "PUBLIC text, never from the documents being rewritten")
    assert ("holds 1 of the 1 input document(s) verbatim" in line) == how.startswith("holds")
    assert not (tmp_path / "out.jsonl").exists()


def test_domain_vocab_shares_the_check_same_bytes_refused(tmp_path, toy):
    letter = tmp_path / "letter.txt"
    letter.write_text(" ".join(WORDS[:20]) + "\n")
    copy = tmp_path / "copy.txt"
    copy.write_bytes(letter.read_bytes())
    res = runner.invoke(app, ["obfuscate", str(letter), "-e", "10", "-n", "3", *toy, "--domain-vocab", str(copy)])
    one_error(res, "--domain-vocab", "has the same bytes as the input file", "PUBLIC text")


# -- item 4: audit --all says what a flag means and how to re-audit each flagged case ---------------------------------
def test_audit_all_explains_a_flag_and_prints_the_recheck_command(monkeypatch):
    import math
    import shlex

    from textdp.audit import AuditCase
    from textdp.audit import registry as audit_registry

    def rr(epsilon):  # type: ignore[no-untyped-def]
        p = math.exp(epsilon) / (1 + math.exp(epsilon))
        return lambda bit, n, rng: np.where(rng.random(n) < p, bit, 1 - bit)

    ok = AuditCase("rr", "bit 0 vs 1", 0, 1, rr(1.0), claimed_epsilon=1.0)
    lying = AuditCase("rr-lying", "bit 0 vs 1", 0, 1, rr(3.0), claimed_epsilon=1.0)
    monkeypatch.setattr(audit_registry, "_CASES", {
        "rr": audit_registry._Entry(lambda epsilon=None, delta=None: ok, "ok"),
        "rr-lying": audit_registry._Entry(lambda epsilon=None, delta=None: lying, "lying")})
    res = runner.invoke(app, ["audit", "--all", "--samples", "2000", "--seed", "29"])
    assert res.exit_code == 1, res.output
    out = " ".join(res.stdout.split())
    assert "A flag (VIOLATION) means that in this one run one of the case's tests crossed its level" in out
    assert "at most 5% per case (0.1 false alarms expected in 2 cases)" in out
    rechecks = [line for line in res.stdout.splitlines() if line.startswith("re-audit ")]
    assert len(rechecks) == 1 and rechecks[0].startswith("re-audit rr-lying: textdp audit rr-lying --samples 20000 "
                                                         "--seed ")
    command = shlex.split(rechecks[0].split(": ", 1)[1])
    as_json = json.loads(runner.invoke(app, ["audit", "--all", "--samples", "2000", "--seed", "29", "--json"]).stdout)
    assert as_json["recheck"] == {"rr-lying": " ".join(command)} and "false alarms expected" in as_json["flag_meaning"]
    seed = int(command[-1])
    assert seed not in {c["seed"] for c in as_json["cases"]}  # a new seed, not the run's own
    again = runner.invoke(app, command[1:] + ["--json"])  # the printed command runs as it is
    assert again.exit_code == 1 and json.loads(again.stdout)["samples"] == 20000


# -- items 5 and 6: an interrupted run names its clean command; runs whose output is gone; runs clean's edges -------
def _corpus(path: Path, n: int) -> Path:
    rng = np.random.default_rng(1)
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(WORDS[j] for j in rng.integers(0, 300, 8))})
                            + "\n" for i in range(n)))
    return path


def test_an_interrupted_run_says_runs_clean_name_and_an_orphan_is_found_and_cleaned(tmp_path, toy, monkeypatch):
    import shutil

    from cli_checks import Crash

    import textdp.cli.obfuscate as obfuscate_cli

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path / "c.jsonl", 60)
    monkeypatch.setattr(obfuscate_cli, "_backend", lambda o: Crash(1))
    res = runner.invoke(app, ["obfuscate", "c.jsonl", "-e", "5", "-n", "4", "--bag", "sample", *toy,
                              "--engine", "local", "--partitions", "6", "-o", "out"])
    assert res.exit_code == 130, res.output
    listed = [json.loads(line) for line in runner.invoke(app, ["runs", "list", "--json"]).stdout.splitlines()]
    assert [r["status"] for r in listed] == ["interrupted"]
    name = listed[0]["name"]
    message = " ".join(res.stderr.split())
    assert "interrupted: 1 of 6 part files are finished in out" in message
    assert f"delete the folder and textdp runs clean {name}" in message and "orphaned" in message
    shutil.rmtree(tmp_path / "out")  # the user deletes the output folder, as the message used to say
    listed = runner.invoke(app, ["runs", "list"]).stdout
    assert name in listed and "orphaned" in listed
    res = runner.invoke(app, ["runs", "clean", "--orphaned"])
    assert res.exit_code == 0 and f"deleted {name} (orphaned" in res.output, res.output
    assert runner.invoke(app, ["runs", "list", "--json"]).stdout == ""


def test_runs_clean_with_nothing_to_clean_and_without_an_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    for args in (["--all"], ["--orphaned"]):
        res = runner.invoke(app, ["runs", "clean", *args])
        assert res.exit_code == 0 and "nothing to clean" in res.output and "None" not in res.output, res.output
    (tmp_path / "cache" / "runs").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "cache", 0o700)
    res = runner.invoke(app, ["runs", "clean", "--all"])
    assert res.exit_code == 0 and "nothing to clean" in res.output, res.output
    line = one_error(runner.invoke(app, ["runs", "clean"]), "NAME", "--all")
    assert "not both" not in line and "not two" not in line
    one_error(runner.invoke(app, ["runs", "clean", "x", "--all"]), "not two")


# -- item 7: Ctrl+C at any moment ends in one line and exit 130, never a traceback -----------------------------------
#: A child that runs ``textdp`` as the console script does (``from textdp.__main__ import main; main()``) and says
#: when it calls ``main``: before that lie the interpreter's start-up and two small imports (a few milliseconds,
#: where a signal is Python's to handle); everything after, the command line's imports included, is textdp's.
CHILD = ("import sys; from textdp.__main__ import main; sys.argv[0] = 'textdp'; sys.stderr.write('ready\\n'); "
         "sys.stderr.flush(); main()")


def _interrupt_after(args: list[str], delay: float, cwd: Path) -> tuple[int, list[str]]:
    import signal
    import subprocess
    import sys
    import time

    import textdp

    src = Path(textdp.__file__).resolve().parents[1]  # the textdp this test imports, in the child too
    env = {**os.environ, "TEXTDP_CACHE_DIR": str(cwd / "cache"), "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None and proc.stderr.readline() == "ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("engine", ["single", "local"])
def test_ctrl_c_at_any_moment_ends_in_one_line_and_exit_130(engine, tmp_path, toy):
    _corpus(tmp_path / "c.jsonl", 3000)
    args = ["obfuscate", "c.jsonl", "-e", "5", "-n", "2000", "--bag", "sample", *toy, "--engine", engine,
            "-o", "out" if engine == "local" else "out.jsonl"]
    for delay in (0.01, 0.03, 0.1, 0.3, 0.8, 2.0):  # importing textdp.cli, typer, the command, numpy; the work
        status, lines = _interrupt_after(args, delay, tmp_path)
        assert status == 130 and len(lines) == 1 and lines[0].startswith("interrupted"), (delay, status, lines)
        if engine == "single":
            assert not (tmp_path / "out.jsonl").exists()


# -- item 8: the small ones ------------------------------------------------------------------------------------------
def _three(tmp_path: Path) -> Path:
    p = tmp_path / "e.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                         (("a", "aaq abq acq adq"), ("b", "zzzz yyyy"), ("c", "aaq"), ("d", "xxxx"))))
    return p


def test_empty_skip_says_how_many_on_stderr_and_which_ids_in_the_private_report(tmp_path, toy):
    docs = _three(tmp_path)
    report = tmp_path / "report.jsonl"
    res = runner.invoke(app, ["obfuscate", str(docs), "-e", "10", "--mechanism", "cmp", *toy, "--empty", "skip",
                              "-o", str(tmp_path / "o.jsonl"), "--private-report", str(report)])
    assert res.exit_code == 0, res.output
    assert f"warning: --empty skip left out 2 of 4 document(s) with nothing to release (their ids are in the " \
           f"private report {report})" in " ".join(res.stderr.split())
    assert "'b'" not in res.stderr and " b," not in res.stderr  # no id on the terminal
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["id"] for r in rows if r.get("skipped")] == ["b", "d"]
    res = runner.invoke(app, ["obfuscate", str(docs), "-e", "10", "--mechanism", "cmp", *toy, "--empty", "skip"])
    assert res.exit_code == 0 and "give --private-report FILE to see which" in res.stderr


def test_the_empty_document_error_speaks_the_command_line_and_python_its_own(tmp_path, toy):
    from textdp.embeddings import Embeddings
    from textdp.errors import DocumentError
    from textdp.mechanisms import get

    line = one_error(runner.invoke(app, ["obfuscate", str(_three(tmp_path)), "-e", "10", "--mechanism", "cmp", *toy]),
                     "document b: no in-vocabulary word", "add --empty skip (leave it out) or --empty empty")
    assert "empty='skip'" not in line
    with pytest.raises(DocumentError, match="use empty='skip' \\(leave it out\\) or empty='empty'") as exc:
        emb = Embeddings(WORDS, np.random.default_rng(5).standard_normal((300, 8)).astype(np.float32))
        get("cmp", epsilon=10.0, embeddings=emb).fit().privatize_batch(["zzzz"])
    assert "--empty" not in str(exc.value)


@pytest.mark.parametrize("engine", ["single", "local"])
def test_an_empty_input_file_has_no_documents(engine, tmp_path, toy, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = ["-o", str(tmp_path / "o")] if engine == "local" else []
    line = one_error(runner.invoke(app, ["obfuscate", str(empty), "-e", "10", "-n", "3", *toy, "--engine", engine,
                                         *out]), "input has no documents")
    assert "document 0" not in line and "normalisation" not in line


def test_ledger_show_says_not_a_ledger_before_its_folder_or_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # a folder others can write to: the ledger check would refuse it
    readme = shared / "README.md"
    readme.write_text("# My project\n\nSome notes.\n")
    os.chmod(readme, 0o644)
    for command in ("show", "reset"):
        one_error(runner.invoke(app, ["ledger", command, str(readme)]), "is not a textdp ledger")


def test_an_output_in_a_missing_folder_is_refused_not_made(tmp_path, toy):
    doc = _doc(tmp_path / "d.txt")
    target = tmp_path / "nodir" / "sub" / "out.jsonl"
    one_error(runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "3", *toy, "-o", str(target)]),
              f"--output {target}: the folder {target.parent} does not exist", "mkdir -p")
    assert not (tmp_path / "nodir").exists()
    report = tmp_path / "private" / "report.jsonl"  # a private file may make its folder (as the ledger does)
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "3", *toy, "-o", str(tmp_path / "o.jsonl"),
                              "--private-report", str(report)])
    assert res.exit_code == 0 and report.exists(), res.output


def test_bag_truncate_names_the_short_document_and_the_ways_out(tmp_path, toy):
    docs = _three(tmp_path)
    line = one_error(runner.invoke(app, ["obfuscate", str(docs), "-e", "10", "-n", "2", *toy, "--empty", "skip"]),
                     "document c: only 1 in-vocabulary words, fewer than the bag size N=2",
                     "1 of the 2 documents is shorter than N", "--bag sample", "remove them from the input")
    assert "bag='sample'" not in line
    res = runner.invoke(app, ["obfuscate", str(docs), "-e", "10", "-n", "2", *toy, "--empty", "skip", "--bag",
                              "sample", "--seed", "1"])
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 2  # the way out works
