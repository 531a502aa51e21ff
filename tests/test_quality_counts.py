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
