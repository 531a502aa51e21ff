"""docs/glossary.md is true: one name per concept, shared by the CLI and the API."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import typer.main

from textdp.cli import app
from textdp.embeddings import DECODERS
from textdp.engines import ENGINES
from textdp.mechanisms import MECHANISM_NAMES
from textdp.text import BAG_MODES
from textdp.topics.names import MECHANISMS as TOPIC_MECHANISMS
from textdp.topics.names import TOPIC_MODELS

GLOSSARY = (Path(__file__).resolve().parents[1] / "docs" / "glossary.md").read_text(encoding="utf-8")


def _commands() -> dict:
    group = typer.main.get_command(app)
    assert hasattr(group, "commands")
    return dict(group.commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("names", [MECHANISM_NAMES, TOPIC_MECHANISMS, DECODERS, BAG_MODES, ENGINES, TOPIC_MODELS])
def test_every_registered_name_is_in_the_glossary(names):
    missing = [n for n in names if f"`{n}`" not in GLOSSARY and f"{n}\\|" not in GLOSSARY and f"\\|{n}`" not in GLOSSARY]
    assert not missing, missing


def test_cli_options_use_the_glossary_names():
    """--seed for seeds, -n only for the bag size, --workers for workers; no visible old name."""
    for name, cmd in _commands().items():
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option" or p.hidden:
                continue
            opts = set(p.opts) | set(p.secondary_opts)
            assert not opts & {"--rng", "--random-state", "--jobs", "-j", "--backend", "--n-jobs"}, (name, opts)
            if "-n" in opts:
                assert "--size" in opts, (name, opts)
            if "seed" in p.name and p.name != "model_seed":
                assert "--seed" in opts, (name, opts)


def test_cli_options_named_in_the_glossary_exist():
    documented = set(re.findall(r"`(--[a-z][a-z-]*)", GLOSSARY))
    offered = {o for cmd in _commands().values() for p in cmd.params
               for o in (*p.opts, *p.secondary_opts) if getattr(p, "param_type_name", "") == "option"}
    assert documented - offered == set()


def _public_callables():
    import importlib
    import pkgutil

    import textdp

    for info in pkgutil.walk_packages(textdp.__path__, "textdp."):
        if ".cli" in info.name or info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isclass(obj):
                yield f"{mod.__name__}.{attr}", obj
                for m_name, m in vars(obj).items():
                    if inspect.isfunction(m) and not m_name.startswith("_"):
                        yield f"{mod.__name__}.{attr}.{m_name}", m
            elif inspect.isfunction(obj):
                yield f"{mod.__name__}.{attr}", obj


def test_the_api_says_seed_not_rng_or_random_state():
    """``rng`` is only the positional generator of pure batch functions; keywords are ``seed=``."""
    bad = []
    for name, obj in _public_callables():
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        for p in sig.parameters.values():
            if p.name == "random_state" and p.default is not None:
                bad.append((name, p.name))
            if p.name == "rng" and p.kind is inspect.Parameter.KEYWORD_ONLY and "seed" not in sig.parameters:
                bad.append((name, p.name))  # a keyword-only generator is a seed: call it seed= (rng= only as alias)
    assert not bad, bad


def test_one_spelling_family():
    """Public names use -ize (tokenize, normalize, privatize, randomize); -ise only as deprecated aliases."""
    bad = [n for n, obj in _public_callables()
           if re.search(r"(?:[a-z])is(e|ed|ing)$", n.rsplit(".", 1)[-1])
           and not (obj.__doc__ or "").startswith("Deprecated")]
    assert not [n for n in bad if n.rsplit(".", 1)[-1] in ("normalise", "randomise", "privatise", "tokenise")], bad


def test_cli_choices_are_the_library_tuples_and_defined_once():
    import ast

    import textdp.cli as cli_pkg
    from textdp.cli._choices import CHOICES

    for enum, values in CHOICES:
        assert tuple(m.value for m in enum) == tuple(values), enum.__name__
    for path in Path(cli_pkg.__file__).parent.glob("*.py"):
        if path.name == "_choices.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        enums = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and any(ast.unparse(b) in ("Enum", "str") for b in n.bases)]
        assert not enums, f"{path.name} defines its own choices {enums}; add them to cli/_choices.py"
