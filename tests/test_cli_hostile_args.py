"""Random option values for obfuscate / guarantee / calibrate / topics end in exit 0 or 2, never a traceback.

Each command starts from a small valid invocation; hypothesis appends up to two of the
command's own options with values drawn from a pool of hostile strings (numbers at the
edges, junk, markup, paths that exist, do not exist or are folders). Examples are
derandomized and few, so the test is deterministic and takes about a minute.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()

INPUTS = {
    "a.txt": "The harbour master counted boats, gulls and nets at dawn near the old pier.",
    "b.txt": "A farmer sells apples and pears at the market near the river every morning.",
    "one.jsonl": json.dumps({"id": "x", "text": "Gulls circle above the fishing boats in the harbour."}) + "\n",
    "two.jsonl": "".join(json.dumps({"id": "d", "text": t}) + "\n" for t in ["boats gulls harbour", "river snow"]),
    "words.txt": "harbour\nboats\ngulls\n",
    "users.jsonl": "".join(json.dumps({"author": f"u{i % 5}", "text": t}) + "\n" for i, t in enumerate(
        ["harbour boats gulls nets pier dawn", "farmer apples pears market river harvest",
         "football team match season fans training", "music band concert guitar songs album"] * 10)),
}
VALUES = ["-1", "0", "1", "3", "0.5", "1e-300", "1e300", "1e-6", "1e6", "99999999999", "nan", "inf", "abc", "",
          "-", "[/x]", "[red]y", "a.txt", "b.txt", "one.jsonl", "two.jsonl", "words.txt", "missing.txt", "folder",
          "english", "none", "text", "1,2", "3,,", "0.999", "1e-320"]
#: Options that start clusters or sweep for minutes, or whose own values would make a run long
#: (they are tested separately: --size bounds, --n-words, --repeats).
SKIP = {"--engine", "--scheduler", "--workers", "--partitions", "--decoder", "--help", "--version",
        "--n-words", "--repeats", "--rank-min", "--rank-max", "--work-dir"}
#: Per command: --force may replace an input on purpose; --sensitivity/--no-cache keep topics from sampling.
SKIP_FOR = {"topics": {"--force", "--sensitivity", "--no-cache", "--jobs", "-j"}}
BASES = {
    "obfuscate": ["obfuscate", "a.txt", "-e", "10", "-n", "3", "-k", "20000"],
    "guarantee": ["guarantee", "a.txt", "b.txt", "-e", "10", "-k", "20000"],
    "calibrate": ["calibrate", "-k", "3000", "--rank-min", "100", "--rank-max", "2000", "--epsilons", "10",
                  "--n-words", "4", "--repeats", "1"],
    "topics": ["topics", "users.jsonl", "--max-iter", "1", "--max-features", "30", "--model-topics", "2",
               "--topics", "2", "--keywords", "2", "-q"],
}
#: Appended last (the last occurrence wins): keeps each run small.
BOUNDS = {"calibrate": ["--n-words", "4", "--repeats", "1"], "topics": ["--sensitivity", "0.5", "--no-cache"]}
FUZZ = settings(max_examples=14, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _options(command: str) -> st.SearchStrategy[list[str]]:
    cmd = get_command(app).commands[command]  # type: ignore[attr-defined]
    choices = []
    for p in cmd.params:
        names = [n for n in (*p.opts, *p.secondary_opts)
                 if n.startswith("-") and n not in SKIP and n not in SKIP_FOR.get(command, ())]
        if not names:
            continue
        if getattr(p, "is_flag", False):
            choices.append(st.sampled_from(names).map(lambda n: [n]))
            continue
        pool = list(VALUES)
        ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
        if isinstance(ann, type) and issubclass(ann, enum.Enum):
            pool += [str(c.value) for c in ann] * 3
        choices.append(st.tuples(st.sampled_from(names), st.sampled_from(pool)).map(list))
    return st.one_of(choices)


def _argv(command: str) -> st.SearchStrategy[list[str]]:
    opts = st.lists(_options(command), max_size=2).map(lambda xs: [t for x in xs for t in x])
    return opts.map(lambda o: [*BASES[command], *o, *BOUNDS.get(command, [])])


@pytest.fixture()
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in INPUTS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


@pytest.mark.parametrize("command", ["obfuscate", "guarantee", "calibrate", "topics"])
def test_random_option_values_end_cleanly(sandbox: Path, command: str) -> None:
    @FUZZ
    @given(_argv(command))
    def run(argv: list[str]) -> None:
        before = _files(sandbox)
        res = runner.invoke(app, argv)
        shown = f"argv={argv!r} exit={res.exit_code} stderr={res.stderr[-400:]!r} exc={res.exception!r}"
        assert res.exception is None or isinstance(res.exception, SystemExit), shown
        assert res.exit_code in (0, 2), shown
        assert "Traceback" not in res.output, shown
        if res.exit_code == 2:
            errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 or "Usage:" in res.stderr, shown  # ours, or click's usage error
        after = _files(sandbox)
        assert {k: v for k, v in after.items() if k in before} == before, "an input file was modified"

    run()


# -- topics: where the release goes ---------------------------------------------------------------------
PATHS = ["a.txt", "users.jsonl", "one.jsonl", "folder", "missing.json", "[/x]", "[red]y", "[/x]z.json", "-", "",
         "folder/r.json", "users.jsonl.settings.json"]


@settings(FUZZ, max_examples=16)
@given(st.sampled_from(PATHS), st.one_of(st.none(), st.sampled_from(PATHS)))
def test_topics_output_paths_end_cleanly_and_never_replace_a_file(output: str, private: str | None) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            for name, text in INPUTS.items():
                Path(name).write_text(text, encoding="utf-8")
            Path("folder").mkdir()
            Path("[").mkdir()
            before = _files(Path("."))
            argv = [*BASES["topics"], "-o", output, *(["--private-report", private] if private is not None else []),
                    *BOUNDS["topics"]]
            res = runner.invoke(app, argv)
            shown = f"argv={argv!r} exit={res.exit_code} stderr={res.stderr[-400:]!r} exc={res.exception!r}"
            assert res.exception is None or isinstance(res.exception, SystemExit), shown
            assert res.exit_code in (0, 2) and "Traceback" not in res.output, shown
            after = _files(Path("."))
            assert {k: v for k, v in after.items() if k in before} == before, "an existing file was replaced"
            if res.exit_code == 0 and output not in ("-", ""):
                assert f"wrote {output} (" in res.stderr, shown  # the name as given, never read as markup
                assert Path(output).stat().st_mode & 0o044, "the release must not be owner-only"
        finally:
            os.chdir(cwd)
