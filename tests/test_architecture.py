"""The layering of ARCHITECTURE.md, enforced on the source: every import is parsed,
those inside functions included, and the module graph has no cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import textdp

ROOT = Path(textdp.__file__).resolve().parent

#: Leaf modules: they import no other textdp module but each other (and only downwards).
LEAVES = {"errors", "_validation", "_rng", "_cache", "guarantees", "io", "samplers", "backend", "progress", "_options", "_lazy"}
#: The library below the engines and the command line.
LOWER = {"text", "embeddings", "mechanisms", "accounting", "topics", "attacks", "generation"}
#: Never imported by a lower layer, not even inside a function.
UPPER = ("textdp.cli", "textdp.engines", "textdp.evaluation", "textdp.audit", "textdp.pipeline", "textdp.release",
         "textdp.serve")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """``(module, line)`` for every import of a textdp module in ``path`` (function bodies included).

    ``from .pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("textdp"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("textdp"):
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                yield (sub if sub in MODULES else mod), node.lineno


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_module_list_is_complete():
    assert {"textdp.cli", "textdp.engines", "textdp.pipeline", "textdp.mechanisms.earth_movers"} <= set(MODULES)
    assert {_layer(m) for m in MODULES} - {""} <= LEAVES | LOWER | {"cli", "engines", "evaluation", "audit",
                                                                    "pipeline", "release", "serve", "__main__"}


@pytest.mark.parametrize("layer", sorted(LOWER | LEAVES))
def test_lower_layers_never_import_upper_ones(layer):
    bad = [(m, imp, line) for m, p in MODULES.items() if _layer(m) == layer
           for imp, line in _imports(p) if imp.startswith(UPPER)]
    assert not bad, f"lower layer imports an upper one: {bad}"


def test_leaves_import_only_leaves():
    bad = [(m, imp) for m, p in MODULES.items() if _layer(m) in LEAVES
           for imp, _ in _imports(p) if _layer(imp) not in LEAVES]
    assert not bad, bad


def test_engines_and_library_never_import_the_cli():
    bad = [(m, imp) for m, p in MODULES.items() if _layer(m) not in ("cli", "__main__")
           for imp, _ in _imports(p) if imp.startswith("textdp.cli")]
    assert not bad, bad


def test_mechanisms_never_import_accounting():
    """Accounting sits beside the data flow: it may read mechanisms, never the reverse."""
    bad = [(m, imp) for m, p in MODULES.items() if _layer(m) == "mechanisms"
           for imp, _ in _imports(p) if _layer(imp) == "accounting"]
    assert not bad, bad


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for imp, _ in _imports(p):
            if imp in MODULES and imp != m and not m.startswith(imp + "."):
                # a module importing its own package's __init__ (``from . import x``) is resolved to x above
                graph[m].add(imp)
    return graph


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _bad_progress(source: str) -> list[tuple[str, str]]:
    """``(function, annotation)`` of every ``progress`` parameter not typed as the one callback (unannotated too)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                if a.arg == "progress":
                    ann = "(unannotated)" if a.annotation is None else ast.unparse(a.annotation)
                    if ann not in ("ProgressCallback | None", "StageProgress | None"):
                        bad.append((node.name, ann))
    return bad


def test_one_progress_signature():
    """Every ``progress`` parameter is a ``ProgressCallback`` (or a ``StageProgress`` for multi-stage runs)."""
    bad = [(m, *b) for m, p in MODULES.items() for b in _bad_progress(p.read_text(encoding="utf-8"))]
    assert not bad, bad


def test_the_progress_check_bites():
    """An unannotated, a positional-only or a differently typed ``progress`` is reported (b4f2b11 skipped the first)."""
    planted = (
        "def a(x, progress=None): ...\n"
        "def b(x, progress=None, /): ...\n"
        "def c(*, progress: Callable[[int], None] | None = None): ...\n"
        "def ok(*, progress: ProgressCallback | None = None): ...\n"
    )
    assert _bad_progress(planted) == [("a", "(unannotated)"), ("b", "(unannotated)"),
                                      ("c", "Callable[[int], None] | None")]
