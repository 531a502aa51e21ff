"""Every list of mechanism names in help text and docs holds the registered names (issue 31).

The registry (:mod:`textdp.mechanisms.registry`) and the audit's claim declarations
(:data:`textdp.audit.claims.WORD_CLAIMS`) are the sources. The help texts build their lists from the
registry's index; the lists in README.md, docs/glossary.md and docs/audit.md are ``<!-- names:... -->``
blocks that ``python -m textdp.mechanisms.registry --write-index`` rewrites, checked current here. README's
curated table (guarantee, paper, measured speed) may lag a new class: it is checked for stale rows only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.errors import ParameterError
from textdp.mechanisms import MECHANISM_NAMES, REGISTRY, names
from textdp.mechanisms.registry import DOC_FILES, INDEX, name_blocks

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
#: a mechanism-name-like token: lower-case words joined by '-', optionally ending in '+'
TOKEN = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*\+?")


def tokens(text: str) -> set[str]:
    """The name-like tokens of ``text`` (``santext+`` and ``santext`` are different tokens)."""
    return set(TOKEN.findall(text))


def missing(expected, text: str) -> list[str]:
    found = tokens(text)
    return [n for n in expected if n not in found]


def help_text(*command: str) -> str:
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())


def test_the_checks_bite():
    assert missing(("santext+", "cmp"), "cmp and santext only") == ["santext+"]
    assert missing(("earth-movers",), "earth movers") == ["earth-movers"]
    assert glossary_names("| mechanism | x | y | document: `syntf`, `earth-movers`; word: `cmp` |") == [
        "syntf", "earth-movers", "cmp"]
    assert readme_rows("| `--mechanism` | releases |\n|---|---|\n| `cmp` | text |\n\nafter\n| `tem` | x |") == ["cmp"]


def test_obfuscate_help_names_every_mechanism_it_takes():
    text = help_text("obfuscate")
    option = text[text.index("--mechanism NAME"):]
    option = option[:option.index("[default:")]
    assert missing(MECHANISM_NAMES, option) == [], option
    bags = [n for n in MECHANISM_NAMES if REGISTRY[n].releases == "bag"]
    assert "Bags of --size words: " + " and ".join(bags) in option, option


def test_audit_help_and_list_name_registered_cases():
    from textdp.audit import audit_case_names
    from textdp.cli.audit import AUDIT_HELP

    cases = set(audit_case_names())
    # the help names kinds of case (no hand-kept list of topic cases); --list is generated from the cases
    assert "the topic matrices:" not in AUDIT_HELP and "every topic-matrix case" in AUDIT_HELP
    res = runner.invoke(app, ["audit", "--list"])
    assert res.exit_code == 0, res.output
    assert missing(sorted(cases), res.output) == []


NEW_ROW = ("example-new", "word", "text", "example-new", "textdp.mechanisms.example:ExampleNew")


def test_name_blocks_are_written_from_the_rows():
    text = "a <!-- names:word -->`cmp`<!-- /names --> b <!-- names:all -->x<!-- /names -->"
    rows = (*INDEX, NEW_ROW)
    out = name_blocks(text, rows)
    assert out.startswith("a <!-- names:word -->`cmp`, `mahalanobis`,") and "`example-new`<!-- /names --> b" in out
    last_topics = [row[0] for row in INDEX if row[1] == "topics"][-1]  # read from the index, not listed by hand
    assert "sentence: `er-ae`" in out and "; topics: `topicdp`," in out and out.endswith(f"`{last_topics}`<!-- /names -->")
    assert name_blocks(out, rows) == out  # idempotent
    assert name_blocks(out) != out  # the registry's own rows lack the new one: a stale block is seen
    with pytest.raises(ParameterError, match="unknown family 'words'"):
        name_blocks("<!-- names:words --><!-- /names -->")


@pytest.mark.parametrize("doc", DOC_FILES)
def test_the_docs_name_blocks_are_current(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert "<!-- names:" in text
    assert name_blocks(text) == text, f"{doc} is stale: run python -m textdp.mechanisms.registry --write-index"


def readme_rows(text: str) -> list[str]:
    """The first column of README's ``--mechanism`` table, in order."""
    lines = text[text.index("| `--mechanism` |"):].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("| `"):
            break
        rows.append(line.split("`")[1])
    return rows


def test_readme_table_rows_are_obfuscate_names_and_every_name_is_in_the_readme():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = readme_rows(text)
    assert set(rows) <= set(MECHANISM_NAMES) and len(set(rows)) == len(rows), rows  # no stale or repeated row
    assert missing(REGISTRY, text) == []  # the generated block names every family's names


def glossary_names(text: str) -> list[str]:
    """The registered names, in order, of the glossary's ``mechanism`` row."""
    row = next(line for line in text.splitlines() if line.startswith("| mechanism |"))
    return [n for n in re.findall(r"`([^`]+)`", row.split("|")[4]) if TOKEN.fullmatch(n)]


def test_glossary_lists_every_family_in_registry_order():
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    expected = [n for family in ("document", "word", "sentence", "topics") for n in names(family)]
    assert [n for n in glossary_names(text) if n in REGISTRY] == expected


def test_audit_doc_names_every_word_level_case_in_its_curve_list():
    from textdp.audit.claims import WORD_CLAIMS

    text = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    curves = text[text.index("2. **the privacy curve**"):text.index("3. **conformance**")]
    assert missing([n for n, c in WORD_CLAIMS.items() if c.tables or c.noise], curves) == []
    # every audited word-level mechanism is audited by its own declaration (a newcomer's line may say None: NOT
    # AUDITED, listed by --all), and the doc names every case of the document, word and topics families
    assert set(WORD_CLAIMS) == {n for n in names("word") if REGISTRY[n].audit is not None}
    assert missing([a for n in names("document", "word", "topics") if (a := REGISTRY[n].audit)], text) == []


MY_FILES = ("mechanisms/registry.py", "mechanisms/__init__.py", "audit/registry.py", "audit/claims.py",
            "audit/word_level.py")


def name_comparisons(source: str) -> list[str]:
    """``x == "cmp"`` / ``x in ("custext", ...)``: comparisons with a registered mechanism name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                if any(isinstance(v, ast.Constant) and v.value in REGISTRY for v in items):
                    found.append(ast.unparse(node))
                    break
    return found


@pytest.mark.parametrize("path", MY_FILES)
def test_registry_and_word_audit_choose_nothing_by_a_mechanism_name(path):
    assert name_comparisons('if kind in ("santext", "tem"):\n    pass\nok = spec.pair == "sensitive"') == [
        "kind in ('santext', 'tem')"]
    assert name_comparisons((ROOT / "src" / "textdp" / path).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(("command", "family"), [("rewrite", "sentence"), ("topics", "topics")])
def test_rewrite_and_topics_help_name_their_family(command, family):
    assert missing(names(family), help_text(command)) == []
