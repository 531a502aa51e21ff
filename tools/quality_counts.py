"""Count the code-quality numbers of issue 20 over ``src/``.

Prints the functions of 80 or more lines, the ``signature(`` occurrences, the
annotations that mention ``Any`` (parameters, returns and annotated
assignments, counted over the AST) and, where the ``duplicates`` command is on
the PATH, its pairs that are not boilerplate.

Usage::

    python tools/quality_counts.py [SRC] [--list]
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and re.search(r"\bAny\b", sub.value):
            return True
    return False


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def any_annotations(tree: ast.AST) -> list[int]:
    """Line numbers of the annotations in ``tree`` that mention ``Any``."""
    lines: list[int] = []
    for fn in _functions(tree):
        args = fn.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        lines += [a.lineno for a in every if _mentions_any(a.annotation)]
        if _mentions_any(fn.returns):
            lines.append(fn.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and _mentions_any(node.annotation):
            lines.append(node.lineno)
    return lines


def long_functions(tree: ast.AST, limit: int = 80) -> list[tuple[str, int, int]]:
    """``(name, line, length)`` of the functions of ``limit`` or more lines."""
    out = []
    for fn in _functions(tree):
        length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
        if length >= limit:
            out.append((fn.name, fn.lineno, length))
    return out


def duplicate_pairs(src: Path) -> tuple[int, list[str]] | None:
    """Pairs ``duplicates`` reports under ``src`` that are not boilerplate."""
    exe = shutil.which("duplicates")
    if exe is None:
        return None
    run = subprocess.run([exe, "--repo", str(src), "--most", "200", "--seconds", "120"],
                         capture_output=True, text=True, check=False)
    rows = [line for line in run.stdout.splitlines() if line.startswith("D")]
    real = [row for row in rows if "boilerplate" not in row]
    return len(real), real


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", default="src", type=Path)
    parser.add_argument("--list", action="store_true", help="list every finding, not only the counts")
    parser.add_argument("--no-duplicates", action="store_true", help="skip the duplicates command")
    args = parser.parse_args(argv)
    files = sorted(args.src.rglob("*.py"))
    longs: list[str] = []
    anys: list[str] = []
    sigs: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        longs += [f"{path}:{line} {name} {n}" for name, line, n in long_functions(tree)]
        anys += [f"{path}:{line}" for line in any_annotations(tree)]
        sigs += [f"{path}:{i}" for i, line in enumerate(text.splitlines(), 1) if "signature(" in line]
    print(f"functions of 80+ lines: {len(longs)}")
    print(f"annotations mentioning Any: {len(anys)}")
    print(f"signature( occurrences: {len(sigs)}")
    if args.list:
        for row in longs + sigs:
            print("  " + row)
        per_file: dict[str, int] = {}
        for row in anys:
            name = row.rsplit(":", 1)[0]
            per_file[name] = per_file.get(name, 0) + 1
        for name, n in sorted(per_file.items(), key=lambda kv: -kv[1]):
            print(f"  Any {n:4d} {name}")
    if not args.no_duplicates:
        found = duplicate_pairs(args.src)
        if found is None:
            print("duplicates: command not found")
        else:
            print(f"duplicate pairs (not boilerplate): {found[0]}")
            if args.list:
                for row in found[1]:
                    print("  " + row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
