"""docs/glossary.md is true: one name per concept, shared by the CLI and the API."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import typer.main

from textdp.cli import app
from textdp.embeddings import DECODER_PRECISIONS, DECODERS
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


@pytest.mark.parametrize("names", [MECHANISM_NAMES, TOPIC_MECHANISMS, DECODERS, DECODER_PRECISIONS, BAG_MODES, ENGINES, TOPIC_MODELS])
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
            if "seed" in p.name and p.name not in ("model_seed", "seed_file"):
                assert "--seed" in opts, (name, opts)
            if p.name == "seed_file":  # the secret seed's other source, beside --seed (issue 39 §4)
                assert opts == {"--seed-file"} and any(q.name == "seed" for q in cmd.params), (name, opts)


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
                seen = set()
                for klass in obj.__mro__:  # inherited methods too (b4f2b11 missed those of private bases)
                    if not klass.__module__.startswith("textdp"):
                        continue
                    for m_name, m in vars(klass).items():
                        if inspect.isfunction(m) and not m_name.startswith("_") and m_name not in seen:
                            seen.add(m_name)
                            yield f"{mod.__name__}.{attr}.{m_name}", m
            elif inspect.isfunction(obj):
                yield f"{mod.__name__}.{attr}", obj


#: ``rng`` / ``random_state`` parameters that still act as seeds in files owned by other work of issue 20
#: (listed in its closing note); each must still exist, so the list only shrinks.
SEED_NAMES_LEFT = {
    "textdp.generation.rewriter.rewrite_documents",
    "textdp.mechanisms.syntf.syntf",
    "textdp.mechanisms.word_level.WordLevelMechanism.privatize_ids",
}


def _seed_in_disguise(obj) -> list[str]:
    """The parameters of ``obj`` that take a seed under another name than ``seed``.

    ``random_state`` with a default; ``rng`` keyword-only; ``rng`` with a default (``rng=None``,
    positional or not) unless it is annotated as a numpy ``Generator`` only. ``rng`` is the
    required positional generator of pure batch functions ``(batch, rng) -> batch``.
    """
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    bad = []
    for p in sig.parameters.values():
        ann = "" if p.annotation is inspect.Parameter.empty else str(p.annotation)
        generator_only = "Generator" in ann and not any(k in ann for k in ("int", "SeedSequence", "SeedLike"))
        if p.name == "random_state" and p.default is not inspect.Parameter.empty:
            bad.append(p.name)
        elif p.name == "rng" and (p.kind is inspect.Parameter.KEYWORD_ONLY
                                  or (p.default is not inspect.Parameter.empty and not generator_only)):
            bad.append(p.name)
    return bad


def test_the_api_says_seed_not_rng_or_random_state():
    """``rng`` is only the positional generator of pure batch functions; a seed is ``seed=``."""
    bad = sorted({f"{obj.__module__}.{obj.__qualname__}" for _, obj in _public_callables() if _seed_in_disguise(obj)})
    assert [n for n in bad if n not in SEED_NAMES_LEFT] == []
    assert sorted(SEED_NAMES_LEFT - set(bad)) == [], "fixed: remove these from SEED_NAMES_LEFT"


def test_the_seed_check_bites():
    """Positional ``rng=None`` (missed on b4f2b11), keyword-only ``rng`` and ``random_state`` are caught."""
    import numpy as np

    def positional(batch, rng=None): ...
    def seed_like(batch, rng: int | np.random.Generator | None = None): ...
    def keyword(batch, *, rng: np.random.Generator): ...
    def sklearn_like(batch, random_state=0): ...
    def pure(batch, rng: np.random.Generator): ...
    def optional_generator(batch, rng: np.random.Generator | None = None): ...

    assert [_seed_in_disguise(f) for f in (positional, seed_like, keyword, sklearn_like)] == [
        ["rng"], ["rng"], ["rng"], ["random_state"]]
    assert _seed_in_disguise(pure) == _seed_in_disguise(optional_generator) == []


#: Words that end in -ise and are not the British form of an -ize verb.
_ISE_WORDS = {"noise", "denoise", "precise", "concise", "raise", "rise", "arise", "promise", "exercise", "advise",
              "revise", "devise", "supervise", "compromise", "surprise", "enterprise", "expertise", "premise",
              "disguise", "paradise", "cruise", "bruise", "poise", "praise", "guise", "improvise", "comprise",
              "excise", "demise", "treatise", "advertise", "chastise", "despise"}


def _british(names) -> list[str]:
    """The names with a word in the British -ise / -isation spelling (``normalise``, ``Randomisation``, ...)."""
    bad = []
    for name in names:
        for word in re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()):
            m = re.fullmatch(r"([a-z]+)is(e|ed|es|ing|er|ers|ation|ations)", word)
            if m and m.group(1) + "ise" not in _ISE_WORDS and not m.group(1).endswith("w"):
                bad.append(name)
                break
    return bad


def _api_and_cli_names():
    """Every public callable, its parameters, every command and option of the CLI."""
    for name, obj in _public_callables():
        yield name.rsplit(".", 1)[-1]
        try:
            yield from inspect.signature(obj).parameters
        except (TypeError, ValueError):
            pass
    for cmd_name, cmd in _commands().items():
        yield cmd_name
        for p in cmd.params:
            yield from (o.lstrip("-") for o in (*p.opts, *p.secondary_opts))


def test_one_spelling_family():
    """Every public name, parameter, command and option uses -ize (tokenize, normalize, privatize, randomize)."""
    assert sorted(set(_british(_api_and_cli_names()))) == []


def test_the_spelling_check_bites():
    planted = ["normalise", "privatise_batch", "randomised", "tokeniser", "Randomisation", "summarise-report"]
    fine = ["laplace_noise", "precise", "raise_on_error", "pairwise", "otherwise", "normalize", "randomized"]
    assert _british(planted) == planted and _british(fine) == []


def _glossary_rows():
    """``(section, cells)`` of every table row of the glossary (escaped pipes kept inside a cell)."""
    section = ""
    for line in GLOSSARY.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("| ") and not line.startswith("|---") and not line.startswith("| Concept"):
            if not line.startswith("| Old"):
                yield section, [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _resolves(token: str) -> bool:
    """Whether an API token of the glossary names something real in textdp."""
    import importlib
    import pkgutil

    import numpy as np

    import textdp

    token = token.split("(")[0].rstrip("=")
    if token in ("Generator", "SeedSequence"):  # numpy's, as the seed's types
        return hasattr(np.random, token)
    if token.startswith("textdp."):
        parts = token.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                return False
            return True
        return False
    head, _, attr = token.partition(".")
    for info in pkgutil.walk_packages(textdp.__path__, "textdp."):
        if ".cli" in info.name or info.name.endswith("__main__"):
            continue
        obj = getattr(importlib.import_module(info.name), head, None)
        if obj is not None and (not attr or hasattr(obj, attr) or attr in getattr(obj, "__dataclass_fields__", {})
                                or attr in getattr(obj, "__annotations__", {})):
            return True
    return False


def _glossary_api_tokens():
    """``(concept, token)``: the names in the API column (``textdp.x.y``, ``Name``, ``Name.attr``, ``param=``)."""
    for section, cells in _glossary_rows():
        if len(cells) < 3 or section.startswith("Deprecated"):
            continue
        for token in re.findall(r"`([^`]+)`", cells[2]):
            for part in re.split(r"\s*/\s*", token):
                if re.fullmatch(r"(textdp\.)?[A-Za-z_][A-Za-z0-9_.]*(\(.*\))?=?", part):
                    yield cells[0], part


def test_every_api_name_of_the_glossary_exists():
    """Every concept's API column names real objects; every ``param=`` is a parameter of a public callable."""
    params = set()
    for _, obj in _public_callables():
        try:
            params |= set(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            pass
        params |= set(getattr(obj, "__dataclass_fields__", {}))
    tokens = list(_glossary_api_tokens())
    assert len(tokens) > 40  # the parser reads the tables
    names = params | {n.rsplit(".", 1)[-1] for n, _ in _public_callables()}
    missing = [(concept, t) for concept, t in tokens
               if not (t.rstrip("=") in params if t.endswith("=") else t.split("(")[0] in names or _resolves(t))]
    assert missing == []


def test_every_cli_option_of_the_glossary_exists():
    """Every option in the CLI column (long and short) is an option of some command."""
    offered = {o for cmd in _commands().values() for p in cmd.params
               for o in (*p.opts, *p.secondary_opts) if getattr(p, "param_type_name", "") == "option"}
    named = [(cells[0], o) for section, cells in _glossary_rows() if len(cells) > 2 and not section.startswith("Depr")
             for o in re.findall(r"`(-{1,2}[a-z][a-z-]*)", cells[1])]
    assert len(named) > 20
    assert [(c, o) for c, o in named if o not in offered] == []


def test_the_glossary_checks_bite():
    assert not _resolves("textdp.mechanisms.no_such_function") and not _resolves("NoSuchRecord")
    assert _resolves("textdp.progress.StageProgress") and _resolves("Guarantee.unit")


def _choice_options():
    """(command, option, names offered, default) for every choice option: what shell completion offers."""
    from typer._click import Context

    for name, cmd in _commands().items():
        ctx = Context(cmd)
        for p in cmd.params:
            offered = tuple(c.value for c in p.shell_complete(ctx, "") if c.type == "plain")
            if offered:
                yield name, p.opts[0], offered, p.default


def test_cli_choices_are_the_library_tuples():
    """Every choice option offers exactly a tuple the library validates with (plus the CLI's own ``auto``)."""
    from textdp.accounting.emd import METRICS
    from textdp.embeddings import OUTPUT_VOCABULARIES
    from textdp.generation.bounds import MODEL_DATA_CASES
    from textdp.generation.model import OUTPUT_LAYERS
    from textdp.generation.rewriter import UNITS, VARIANTS
    from textdp.generation.training import OBJECTIVES, VOCAB_SOURCES
    from textdp.guarantees import EMPTY_POLICIES
    from textdp.io import INPUT_FORMATS
    from textdp.mechanisms import names
    from textdp.mechanisms.mbr import POSTPROCESSORS
    from textdp.pipeline import OUTPUT_FORMATS
    from textdp.topics.names import KEYWORD_SOURCES, NEIGHBOURS

    library = {INPUT_FORMATS, OUTPUT_FORMATS, EMPTY_POLICIES, BAG_MODES, METRICS, DECODERS, DECODER_PRECISIONS, MECHANISM_NAMES,
               OUTPUT_VOCABULARIES, POSTPROCESSORS, ENGINES, ("auto", "single", *ENGINES), names("sentence"), UNITS,
               VARIANTS, ("auto", *MODEL_DATA_CASES), OBJECTIVES, VOCAB_SOURCES, OUTPUT_LAYERS, TOPIC_MECHANISMS,
               TOPIC_MODELS, NEIGHBOURS, KEYWORD_SOURCES}
    found = list(_choice_options())
    assert {(c, o) for c, o, _, _ in found} >= {("obfuscate", "--mechanism"), ("rewrite", "--mechanism"),
                                                ("topics", "--mechanism"), ("obfuscate", "--input-format")}
    for command, option, offered, default in found:
        assert tuple(offered) in library, (command, option, offered)
        assert default is None or default in offered, (command, option, default)


def test_cli_choices_are_declared_once():
    """No CLI enum or literal list of names: a choice option reads the library's tuple (``choice(NAMES, ...)``)."""
    import ast

    import textdp.cli as cli_pkg

    calls = 0
    for path in Path(cli_pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        enums = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and any(ast.unparse(b).split(".")[-1] in ("Enum", "StrEnum") for b in n.bases)]
        assert not enums, f"{path.name} declares choices {enums} again; pass the library's tuple to choice()"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "choice" and node.args:
                calls += 1
                first = node.args[0]
                own = isinstance(first, ast.Tuple) and all(isinstance(e, ast.Constant) for e in first.elts)
                assert not own, f"{path.name}:{node.lineno} lists its own names; pass the library's tuple"
    assert calls >= 20


def test_a_name_outside_the_choices_is_a_one_line_usage_error():
    from typer.testing import CliRunner

    runner = CliRunner()
    for command, option, offered, _ in _choice_options():
        res = runner.invoke(app, [command, option, "no-such-name"])
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.exit_code == 2, (command, option, res.output)
        assert len(lines) == 1 and option in lines[0] and all(repr(n) in lines[0] for n in offered), lines
