"""Every example in README.md and docs/*.md is a real run: this test re-runs them.

Each ```console block is one test case. Its ``$ ...`` lines are run in order through bash in a fresh
temporary directory that holds a copy of ``examples/`` (``textdp`` becomes ``python -m textdp``; pipes
and redirections are kept); the lines after a command are its expected output (stdout and stderr
together), compared with doctest's ELLIPSIS rule: ``...`` in the doc matches anything, also whole lines.
A command whose expected output has an ``error: ...`` line must exit with status 2, any other with 0.
Files a block needs are made by the block itself (``$ cp ...``, ``$ printf ... > notes.jsonl``), so a
reader can paste it too.

Each ```python block is run as a doctest when it holds ``>>>`` lines, otherwise executed as a script
that must not fail.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
#: terminal width for the commands (rich tables and help text wrap at it)
COLUMNS = "130"
#: commands whose examples take over a minute on 2 cores: run with ``-m slow``. ``examples/tiny_lm.py``: the
#: language-model blocks of docs/lm-rewriting.md (30-120 s each on 2 cores: every command imports torch and
#: transformers, and one audits at 20,000 samples; issue 38 item 9). What they show runs in the default suite:
#: the releases, records and refusals in tests/test_lm_cli.py and tests/test_lm_rewriters.py, the ledger's
#: budget, truncation and reset in tests/test_ledger_trust.py and tests/test_release_driver.py, the audits in
#: tests/test_lm_audit.py, the [lm] sweep refusals in tests/test_generation_eval_lm.py.
SLOW_COMMANDS = ("textdp calibrate", "python examples/tiny_lm.py")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str

    @property
    def id(self) -> str:
        first = next((ln for ln in self.text.splitlines() if ln.strip()), "")
        words = re.findall(r"[\w-]+", first.removeprefix("$ ").removeprefix(">>> "))
        what = "-".join(w for w in words[:3] if w not in {"textdp", "python", "m", "from", "import"})
        return f"{self.path.relative_to(ROOT)}:{self.line}:{what or self.lang}"


def blocks(lang: str) -> list[Block]:
    found = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if m and m.group(1):
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```"):
                    j += 1
                if m.group(1) == lang:
                    found.append(Block(path, i + 1, lang, "\n".join(lines[i + 1 : j]) + "\n"))
                i = j + 1
            else:
                i += 1
    return found


def commands(block: Block) -> list[tuple[str, str]]:
    """``(command, expected output)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for ln in block.text.splitlines():
        if ln.startswith("$ "):
            pairs.append((ln[2:], []))
        elif pairs:
            pairs[-1][1].append(ln)
        elif ln.strip():
            raise AssertionError(f"{block.id}: output before the first `$ ` command: {ln!r}")
    return [(cmd, "".join(x.rstrip() + "\n" for x in out)) for cmd, out in pairs]


def matches(want: str, got: str) -> bool:
    got = "".join(x.rstrip() + "\n" for x in got.splitlines())
    if want == got:
        return True
    return "..." in want and doctest._ellipsis_match(want, got)  # type: ignore[attr-defined]


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]),
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as on a terminal
        COLUMNS=COLUMNS,
        NO_COLOR="1",
        TERM="dumb",
    )
    return env


CONSOLE = blocks("console")
PYTHON = blocks("python")


def test_found_examples() -> None:
    # the parser sees the blocks (a renamed fence would silently drop them)
    assert len(CONSOLE) >= 8 and len(PYTHON) >= 3


def _param(block: Block) -> object:
    slow = any(cmd.startswith(SLOW_COMMANDS) for cmd, _ in commands(block))
    return pytest.param(block, id=block.id, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("block", [_param(b) for b in CONSOLE])
def test_console_example(block: Block, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = _env(tmp_path)
    for cmd, want in commands(block):
        shell = re.sub(r"(^|[|;&]\s*)textdp\b", rf"\1{sys.executable} -m textdp", cmd)
        shell = re.sub(r"(\|\s*)python\b", rf"\1{sys.executable}", shell)
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", shell],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
            check=False,
        )
        expect_rc = 2 if re.search(r"^error: ", want, re.M) else 0
        assert proc.returncode == expect_rc and matches(want, proc.stdout), (
            f"{block.id}: `$ {cmd}` exited {proc.returncode} (doc implies {expect_rc}); "
            f"the doc shows:\n{want}\nthe real run printed:\n{proc.stdout}"
        )


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_example(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    if ">>>" in block.text:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.text, {}, block.id, str(block.path), block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        out: list[str] = []
        result = runner.run(test, out=out.append)
        assert result.failed == 0, "".join(out)
    else:
        code = compile(block.text, f"{block.path.name}:{block.line}", "exec")
        exec(code, {"__name__": "__doc_example__"})


def test_commands_parse() -> None:
    # every console block starts with a command and every command names a real program
    for block in CONSOLE:
        for cmd, _ in commands(block):
            assert cmd.split()[0] in {"textdp", "cat", "cp", "printf", "echo", "python", "mkdir"}, (block.id, cmd)
