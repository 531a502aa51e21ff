"""Random hostile arguments and input files at the command line (hypothesis; the fuzzing half of issue 10).

The CLI must end every run with exit status 0, 1 (``audit``: a violation) or 2 (one line
``error: ...`` or click's usage error), never a traceback, and never modify an input file.
Random argument lists are drawn from each command's own options and a pool of hostile values
(numbers at the edges, junk, markup, paths that exist, do not exist or are folders); each test
runs a bounded, derandomized number of examples in a fresh temporary directory holding a few
tiny inputs. The one-per-case regressions are in ``test_hostile_cli_cases.py``; hostile
embeddings files in ``test_embeddings_hostile.py``.

Bugs in files owned by other work are ``xfail(strict=True)`` regression tests (see the reasons):
they are the phase-2 list of issue 10.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer.main import get_command
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()
FUZZ = settings(max_examples=30, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

DOC = "The president greets the press in Chicago and talks about the economy, the weather and sports."
#: Four toy topics: 40 documents by 5 users, enough for `textdp topics` to build a vocabulary.
TOPICS = ["president press economy inflation markets investors", "farmer apples pears market river harvest",
          "football team match season fans training", "music band concert guitar songs album"]
FILES = {
    "doc.txt": DOC,
    "doc2.txt": "A farmer sells apples and pears at the market near the river every morning.",
    "docs.jsonl": "".join(json.dumps({"id": f"d{i}", "text": f"{TOPICS[i % 4]} {TOPICS[i // 4 % 4].split()[0]}",
                                      "author": f"u{i % 5}"}) + "\n" for i in range(40)),
    "bad.jsonl": '{"id": 1, "text": 5}\n',
    "config.toml": '[corpus]\nname = "docs.jsonl"\n[mechanism]\nepsilons = [0]\n',
    "empty.txt": "",
    "words.txt": "cat\ndog\n",
    "a.txt": "The harbour master counted boats, gulls and nets at dawn near the old pier.",
    "b.txt": "A farmer sells apples and pears at the market near the river every morning.",
    "one.jsonl": json.dumps({"id": "x", "text": "Gulls circle above the fishing boats in the harbour."}) + "\n",
    "users.jsonl": "".join(json.dumps({"author": f"u{i % 5}", "text": t}) + "\n" for i, t in enumerate(TOPICS * 10)),
}
#: Hostile values (numbers at the edges, junk, paths that exist, do not exist or are folders).
VALUES = ["-1", "0", "1", "2", "3", "0.5", "10", "nan", "inf", "-inf", "1e-9", "abc", "", " ", "-", "--",
          "x=y", "é😀", "doc.txt", "doc2.txt", "docs.jsonl", "bad.jsonl", "config.toml", "empty.txt",
          "missing.txt", "folder", "words.txt", "topicdp", "earth-movers-noise", "mvg", "1e-300", "1e300", "1e-6",
          "1e6", "99999999999", "[/x]", "[red]y", "a.txt", "one.jsonl", "users.jsonl", "english", "none", "text",
          "1,2", "3,,", "0.999", "1e-320"]
#: Options never fuzzed: they start clusters, build ANN indexes or pick sizes whose memory use is
#: a known phase-2 bug (--size 1e8 --bag sample), or sweep for minutes.
SKIP_OPTIONS = {"--engine", "--scheduler", "--workers", "--partitions", "--decoder", "--jobs", "-j", "--cache-dir",
                "--help", "--version", "--no-cache", "--sensitivity", "--n-words", "--repeats", "--list"}
#: Per command: report folders (audit, evaluate) and the topics release (its own test below) are not fuzzed;
#: the other commands' --output / --private-report are (an existing file must never be replaced).
SKIP_FOR = {"audit": {"--output", "-o"}, "evaluate": {"--output", "-o"}, "topics": {"--output", "-o", "--force"}}
#: A valid, small invocation of each command; random options and values are appended to it.
BASES = {
    "audit": ["audit", "laplace"],
    "guarantee": ["guarantee", "doc.txt", "doc2.txt", "-e", "1"],
    "obfuscate": ["obfuscate", "doc.txt", "-e", "10", "-k", "20000"],
    "obfuscate-bag": ["obfuscate", "a.txt", "-e", "10", "-n", "3", "-k", "20000"],
    "calibrate": ["calibrate", "-k", "3000", "--rank-min", "100", "--rank-max", "2000", "--epsilons", "10"],
    "topics": ["topics", "docs.jsonl", "--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2",
               "--topics", "2", "--keywords", "2"],
    "evaluate": ["evaluate", "config.toml"],
}
#: Appended last (the last occurrence of an option wins) so that every run stays small.
BOUNDS = {
    "audit": ["--samples", "400"],
    "calibrate": ["--n-words", "3", "--repeats", "1"],
    "topics": ["--sensitivity", "0.5", "--no-cache"],
}
EXAMPLES = {"audit": 20, "topics": 12, "calibrate": 12, "evaluate": 12, "guarantee": 12, "obfuscate": 12,
            "obfuscate-bag": 12}


def _option_pairs(command: str) -> st.SearchStrategy[list[str]]:
    """One option with a hostile or valid value (a flag alone); values follow the option's type."""
    name = BASES[command][0]
    click_cmd = get_command(app).commands[name]  # type: ignore[attr-defined]
    skip = SKIP_OPTIONS | SKIP_FOR.get(name, set())
    ctx = Context(click_cmd)
    choices = []
    for p in click_cmd.params:
        names = [n for n in (*p.opts, *p.secondary_opts) if n.startswith("-") and n not in skip]
        if not names:
            continue
        if getattr(p, "is_flag", False):
            choices.append(st.sampled_from(names).map(lambda n: [n]))
            continue
        pool = list(VALUES)  # a choice option: also its names (what shell completion offers)
        pool += [str(c.value) for c in p.shell_complete(ctx, "") if c.type == "plain"] * 3
        choices.append(st.tuples(st.sampled_from(names), st.sampled_from(pool)).map(list))
    return st.one_of(choices)


def _argv(command: str) -> st.SearchStrategy[list[str]]:
    extra = st.lists(_option_pairs(command), max_size=2).map(lambda xs: [t for x in xs for t in x])
    positional = st.one_of(st.just([]), st.just([]), st.just([]), st.sampled_from(VALUES).map(lambda v: [v]))
    return st.tuples(extra, positional).map(lambda t: [*BASES[command], *t[0], *t[1], *BOUNDS.get(command, [])])


@pytest.fixture()
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


def check_clean_exit(argv: list[str], allowed: tuple[int, ...] = (0, 2)) -> None:
    res = runner.invoke(app, argv)
    shown = f"argv={argv!r} exit={res.exit_code} output={res.output[-500:]!r} exc={res.exception!r}"
    assert res.exception is None or isinstance(res.exception, SystemExit), shown
    assert res.exit_code in allowed, shown
    assert "Traceback" not in res.output, shown
    if res.exit_code == 2:
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 or "Usage:" in res.stderr + res.output, shown  # ours, or click's usage or help


def _fuzz(command: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    @settings(FUZZ, max_examples=EXAMPLES.get(command, 30))
    @given(_argv(command))
    def run(argv: list[str]) -> None:
        before = _snapshot(Path.cwd())
        check_clean_exit(argv, allowed)
        after = _snapshot(Path.cwd())
        assert {k: v for k, v in after.items() if k in before} == before, "an input file was modified"

    run()


@pytest.mark.parametrize("command", ["audit", "guarantee", "obfuscate", "obfuscate-bag", "calibrate", "topics",
                                     "evaluate"])
def test_cli_random_arguments(sandbox, command):
    _fuzz(command, (0, 1, 2) if command == "audit" else (0, 2))


def test_cli_top_level_random_arguments(sandbox):
    @FUZZ
    @given(st.lists(st.sampled_from(["--help", "--version", "nope", "-x", "", "audit", "--list", "--json"]), max_size=4))
    def run(argv: list[str]) -> None:
        check_clean_exit(argv)

    run()


# -- known bugs in files owned by other work (phase 2 of issue 10) -------------------------------------
@pytest.mark.parametrize("argv", [["obfuscate", "[/x].txt", "-e", "10"], ["guarantee", "[/x]", "b", "-e", "1"],
                                  ["topics", "[/x].jsonl"], ["evaluate", "[/x].toml"]])
def test_markup_in_file_names(sandbox, argv):
    check_clean_exit(argv)


def test_markup_in_audit_names_is_escaped(sandbox):
    res = runner.invoke(app, ["audit", "[/x]"])
    assert res.exit_code == 2 and "[/x]" in res.stderr


def test_lone_surrogate_id(sandbox):
    Path("s.jsonl").write_text('{"id": "\\udc80", "text": "the cat sat on the mat with a dog"}\n', encoding="utf-8")
    check_clean_exit(["obfuscate", "s.jsonl", "-e", "10", "-n", "2", "--seed", "1", "-o", "out.jsonl"])



# -- Parquet ----------------------------------------------------------------------------------------------
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ARROW_COLUMNS = st.dictionaries(
    st.sampled_from(["text", "id", "body", "author"]),
    st.sampled_from(["str", "int", "null", "list", "float", "binary"]),
    max_size=3,
)


def _column(kind: str, n: int) -> object:
    return {
        "str": pa.array([DOC] * n),
        "int": pa.array(list(range(n))),
        "null": pa.array([None] * n, type=pa.string()),
        "list": pa.array([[1, 2]] * n),
        "float": pa.array([0.5] * n),
        "binary": pa.array([DOC.encode()] * n),
    }[kind]


@settings(max_examples=10, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ARROW_COLUMNS, st.integers(1, 3))
def test_parquet_schemas(sandbox, columns, rows):
    with tempfile.TemporaryDirectory(dir=sandbox) as d:
        path = Path(d) / "in.parquet"
        if columns:
            pq.write_table(pa.table({k: _column(v, rows) for k, v in columns.items()}), path)
        else:
            pq.write_table(pa.table({"x": pa.array([1] * rows)}), path)
        check_clean_exit(["obfuscate", str(path), "-e", "10", "-n", "2", "--seed", "1", "--engine", "local",
                          "-k", "2000", "-o", str(Path(d) / "out")])


def test_malformed_parquet(sandbox):
    Path("bad.parquet").write_bytes(b"PAR1 this is not parquet")
    check_clean_exit(["obfuscate", "bad.parquet", "-e", "10", "--engine", "local", "-o", "out"])


# -- topics: where the release goes ---------------------------------------------------------------------
PATHS = ["a.txt", "users.jsonl", "one.jsonl", "folder", "missing.json", "[/x]", "[red]y", "[/x]z.json", "-", "",
         "folder/r.json", "users.jsonl.settings.json"]


@settings(FUZZ, max_examples=16)
@given(st.sampled_from(PATHS), st.one_of(st.none(), st.sampled_from(PATHS)))
def test_topics_output_paths_end_cleanly_and_never_replace_a_file(output: str, private: str | None) -> None:
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            for name, text in FILES.items():
                Path(name).write_text(text, encoding="utf-8")
            Path("folder").mkdir()
            Path("[").mkdir()
            before = _snapshot(Path("."))
            argv = [*BASES["topics"], "-q", "-o", output, *(["--private-report", private] if private is not None else []),
                    *BOUNDS["topics"]]
            res = runner.invoke(app, argv)
            shown = f"argv={argv!r} exit={res.exit_code} stderr={res.stderr[-400:]!r} exc={res.exception!r}"
            assert res.exception is None or isinstance(res.exception, SystemExit), shown
            assert res.exit_code in (0, 2) and "Traceback" not in res.output, shown
            after = _snapshot(Path("."))
            assert {k: v for k, v in after.items() if k in before} == before, "an existing file was replaced"
            if res.exit_code == 0 and output not in ("-", ""):
                assert f"wrote {output} (" in res.stderr, shown  # the name as given, never read as markup
                assert Path(output).stat().st_mode & 0o044, "the release must not be owner-only"
        finally:
            os.chdir(cwd)
