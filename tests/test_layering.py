"""The code flows one way (issue 13): leaf modules, then the layers, then audit/evaluation/engines/CLI.

Imports are parsed from the source, including imports inside functions, so a hidden cycle (an
import deferred into a function) fails here as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import textdp

ROOT = Path(textdp.__file__).resolve().parent
#: Modules that import nothing from textdp but other leaves.
LEAVES = {"errors", "_validation", "_rng", "_cache", "guarantees", "io", "samplers", "backend"}
#: The library layers: never import the command line, the engines, evaluation or the auditor.
LOWER = {"text", "embeddings", "mechanisms", "accounting", "topics", "attacks", "generation"}
UPPER = {"cli", "engines", "evaluation", "audit"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in ROOT.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every textdp module ``path`` imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = list(pkg[: len(pkg) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found |= {m for m in (mod, *(f"{mod}.{a.name}" for a in node.names)) if m in MODULES}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
    return found


def _part(module: str) -> str:
    """``textdp.mechanisms.laplace`` -> ``mechanisms``; ``textdp.io`` -> ``io``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "textdp"


GRAPH = {m: _imports(p) for m, p in MODULES.items()}


def test_the_parser_sees_imports_inside_functions():
    assert "textdp.mechanisms" in GRAPH["textdp.audit.cases"]  # imported only inside the case factories
    assert "textdp.errors" in GRAPH["textdp.io"]


def test_leaf_modules_import_only_leaves():
    for m, deps in GRAPH.items():
        if _part(m) in LEAVES:
            bad = sorted(d for d in deps if _part(d) not in LEAVES)
            assert not bad, f"{m} is a leaf module but imports {bad}"


def test_lower_layers_never_import_the_cli_engines_evaluation_or_audit():
    for m, deps in GRAPH.items():
        if _part(m) in LOWER:
            bad = sorted(d for d in deps if _part(d) in UPPER)
            assert not bad, f"{m} imports {bad}"


def test_no_cycles_between_packages():
    edges: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        for d in deps:
            a, b = _part(m), _part(d)
            if a != b and "textdp" not in (a, b):
                edges.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert edges["accounting"] >= {"mechanisms"} and "accounting" not in edges.get("mechanisms", set())
