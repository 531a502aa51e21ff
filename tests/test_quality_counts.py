"""tools/quality_counts.py counts what issue 20 measures: Any annotations, long functions, signature( uses."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("quality_counts", ROOT / "tools" / "quality_counts.py")
assert _spec is not None and _spec.loader is not None
qc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(qc)


def test_any_annotations_of_parameters_returns_and_assignments():
    source = (
        "from typing import Any\n"
        "import typing\n"
        "def f(a: Any, b: int, *args: Any, c: dict[str, Any] = {}, **kw: typing.Any) -> list[Any]:\n"
        "    x: Any = 1\n"
        "    y: int = 2\n"
        "    z = 'Any'\n"
        "    return []\n"
        "def g(a: 'Any') -> object: ...\n"
        "def h(anything: int) -> None: ...\n"
    )
    assert sorted(qc.any_annotations(ast.parse(source))) == [3, 3, 3, 3, 3, 4, 8]


def test_long_functions_counts_from_def_to_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(78))
    tree = ast.parse(f"def short():\n    pass\n\ndef long():\n{body}\n    return x0\n")
    assert qc.long_functions(tree) == [("long", 4, 80)]


def test_it_runs_over_src(capsys):
    assert qc.main([str(ROOT / "src"), "--no-duplicates"]) == 0
    out = capsys.readouterr().out
    assert "functions of 80+ lines:" in out and "annotations mentioning Any:" in out and "signature(" in out


def _long_functions_in(src: Path, limit: int = 80) -> set[tuple[str, str, int]]:
    """``(path, name, lines)`` of every function over ``limit`` lines under ``src`` (decorators excluded)."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.add((path.relative_to(src).as_posix(), node.name, length))
    return found


def test_no_function_in_src_is_over_80_lines():
    """Issue 40: no function in src/textdp over 80 lines (def line to last line); split a long one into helpers."""
    long = sorted(_long_functions_in(ROOT / "src" / "textdp"))
    assert not long, f"functions over 80 lines (split them into named helpers): {long}"


def test_the_length_check_counts_from_def_to_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    nested = body.replace("    ", "        ")
    (tmp_path / "m.py").write_text(f"@decorated\ndef ok():\n{body}\n\nclass C:\n    async def long(self):\n{nested}\n"
                                   "        pass\n")
    assert _long_functions_in(tmp_path) == {("m.py", "long", 81)}


#: Issue 40 asked for fewer than 120 annotations mentioning ``Any`` in src/ (301 before, 22 after); the cap sits a
#: little above the count when it landed so that a new ``Any`` must be argued for. Lower it when the count falls.
ANY_CAP = 30


def test_any_annotations_in_src_stay_under_the_cap():
    total = 0
    per_file = {}
    for path in sorted((ROOT / "src" / "textdp").rglob("*.py")):
        n = len(qc.any_annotations(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
        total += n
        if n:
            per_file[path.relative_to(ROOT).as_posix()] = n
    assert total <= ANY_CAP, f"{total} annotations mention Any (cap {ANY_CAP}); use a real type: {per_file}"
