"""A newcomer's topics mechanism is one module, its test and one registry line (issue 40).

docs/new-mechanism.md's first step, done here as a newcomer does it, on a copy of this source tree: a module with a
Laplace-per-cell mechanism and an own parameter, its statistical test (the law and a rejected wrong law), one line
of ``LOCATIONS`` and ``python -m textdp.mechanisms.registry --write-index``. Then, with no other edit:
``textdp topics --help`` lists it, ``--param`` sets its parameter (a bad key lists it), the release states the
parameter and the private report's sensitivity sentence is the class's, and every test that reads the topics
family from the registry runs on it and passes. The test beside it checks that no test or doc lists the topics
family by hand (what made the first newcomer edit two tests).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from textdp.mechanisms import names
from textdp.mechanisms.registry import DOC_FILES

ROOT = Path(__file__).resolve().parents[1]
NAME = "newcomer-laplace"

MODULE = '''
"""Laplace per cell on rows projected to L1 mass ``row_l1`` (a newcomer's mechanism, tests/test_topics_newcomer.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import check_epsilon
from ..accounting.gaussian import check_sensitivity
from ..errors import ParameterError
from ..guarantees.events import DiscreteLaplaceEvent
from ..samplers import DEFAULT_GRID, check_grid, discrete_laplace
from .family import TopicsMechanism
from .noise import GridNoise
from .release import MODEL_NOT_COVERED, ROUNDING_L1, TopicGuarantee, grid_text


class RowLaplaceNoise(GridNoise):
    """Discrete Laplace per cell after projecting every row onto ``{x >= 0, sum(x) <= row_l1}``."""

    def __init__(self, *, epsilon: float, row_l1: float, grid: float = DEFAULT_GRID) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.row_l1 = check_sensitivity(row_l1, "row_l1")
        self.grid = check_grid(grid)

    def l1(self, shape):
        m, n = shape
        return Fraction(2 * m) * Fraction(self.row_l1) / Fraction(self.grid) + m * n

    def grid_scale(self, shape):
        return Fraction(math.ceil(self.l1(shape) / Fraction(self.epsilon) * 1024), 1024)

    def randomize(self, matrix, seed=None):
        a = np.maximum(np.asarray(matrix, dtype=float), 0.0)
        mass = a.sum(axis=-1, keepdims=True)
        return super().randomize(a * np.minimum(1.0, self.row_l1 / np.maximum(mass, 1e-300)), seed)

    def _integer_noise(self, shape, count, gen):
        m, n = shape
        return discrete_laplace(self.grid_scale(shape), count * m * n, gen).reshape(count, m, n)


class NewcomerLaplace(TopicsMechanism):
    """Laplace per cell on rows projected to L1 mass ``row_l1``: global L1 sensitivity ``2 row_l1 m`` (pure DP).

    Ghosh, Roughgarden & Sundararajan, STOC 2009 (the geometric mechanism); CKS20 Alg. 2.
    """

    name = "newcomer-laplace"
    reference = "Ghosh, Roughgarden & Sundararajan, STOC 2009"
    takes_sensitivity = False
    sensitivity_note = "global L1 bound 2*row_l1*m of the projected rows (public)"
    row_l1: float = 1.0

    def _check_delta(self) -> None:
        if self.sensitivity is not None or self.gamma is not None:
            raise ParameterError(f"{self.name} has a global L1 sensitivity: it takes no sensitivity or gamma")

    def noise(self, shape):
        return RowLaplaceNoise(epsilon=self.epsilon_, row_l1=self.row_l1, grid=self.grid)

    def _stated(self, core, shape):
        m, n = shape
        scale = float(core.grid_scale(shape)) * core.grid
        noise = (f"rows projected to L1 mass <= {core.row_l1:g}, then exact discrete Laplace per cell on the grid "
                 f"g={grid_text(core.grid)}, scale {scale:.6g}; {ROUNDING_L1}")
        statement = (f"{core.epsilon:g}-differential privacy for user-level neighbours (one user's documents added "
                     f"or removed). Noise: {noise}. {MODEL_NOT_COVERED}")
        event = DiscreteLaplaceEvent(parameter=1.0 / float(core.grid_scale(shape)), sensitivity=float(core.l1(shape)))
        return TopicGuarantee(mechanism=self.name, epsilon=core.epsilon, delta=0.0, gamma=None, shape=(m, n),
                              grid=core.grid, noise=noise, statement=statement, event=event)
'''

TEST = '''
import numpy as np
from scipy import stats

from textdp._rng import make_rng
from textdp.mechanisms import get


def test_newcomer_laplace_law_and_a_wrong_law():
    mech = get("newcomer-laplace", epsilon=2.0, row_l1=0.5, grid=2.0**-10).fit()
    core = mech.noise_for((4, 50))
    scale = float(core.grid_scale((4, 50))) * mech.grid
    base = np.full((4, 50), 0.002)  # rows of mass 0.1: the projection leaves them as they are
    gen = make_rng(3)
    noise = np.stack([core.randomize(base, seed=gen) - base for _ in range(100)]).ravel()
    assert stats.kstest(noise / scale, "laplace").pvalue > 1e-4
    assert stats.kstest(noise / (1.1 * scale), "laplace").pvalue < 1e-6
'''

#: the newcomer's own files, and what ``--write-index`` regenerates: nothing else may differ from this tree
OWN = {"src/textdp/topics/newcomer_laplace.py", "tests/test_topics_newcomer_laplace.py",
       "src/textdp/mechanisms/registry.py"}
GENERATED = {"src/textdp/mechanisms/_index.py", *DOC_FILES}
SKIP = shutil.ignore_patterns(".git", ".venv", ".ci-venv", "__pycache__", ".pytest_cache", "*.egg-info", "build",
                              "dist", "out", "reports", ".mypy_cache", ".ruff_cache")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts and not p.name.endswith(".pyc")}


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """A copy of the source tree after the newcomer's first step; ``(root, env, files changed)``."""
    base = tmp_path_factory.mktemp("newcomer")
    root = base / "tree"
    shutil.copytree(ROOT, root, ignore=SKIP)
    before = _files(root)
    (root / "src/textdp/topics/newcomer_laplace.py").write_text(MODULE.lstrip(), encoding="utf-8")
    (root / "tests/test_topics_newcomer_laplace.py").write_text(TEST.lstrip(), encoding="utf-8")
    reg = root / "src/textdp/mechanisms/registry.py"
    text = reg.read_text(encoding="utf-8")
    last = re.search(r"LOCATIONS: .*?\n\)\n", text, re.DOTALL)
    assert last is not None
    line = '    ("textdp.topics.newcomer_laplace:NewcomerLaplace", None),\n'
    reg.write_text(text[:last.end() - 2] + line + text[last.end() - 2:], encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "COLUMNS": "400", "OMP_NUM_THREADS": "1"}
    res = _run([sys.executable, "-m", "textdp.mechanisms.registry", "--write-index"], root, env)
    assert res.returncode == 0, res.stderr
    after = _files(root)
    changed = {p for p in after if before.get(p) != after[p]}
    return root, env, changed


def test_the_newcomer_touches_its_module_its_test_and_the_registry_line_only(newcomer):
    changed = newcomer[2]
    assert OWN <= changed and changed <= OWN | GENERATED, sorted(changed - OWN - GENERATED)


def test_the_topics_command_takes_it_with_its_parameter_and_the_report_says_what_the_class_says(newcomer, tmp_path):
    root, env, _ = newcomer
    cmd = [sys.executable, "-m", "textdp", "topics"]
    page = " ".join(_run([*cmd, "--help"], root, env).stdout.split())
    assert NAME in page[page.index("--mechanism"):], page
    res = _run([*cmd, str(tmp_path / "none.jsonl"), "--mechanism", NAME, "--param", "bogus=1"], root, env)
    assert res.returncode == 2 and "row_l1" in res.stderr + res.stdout, res.stderr
    words = ["harbour", "boats", "gulls", "pier", "nets", "farmer", "apples", "pears", "market", "river"]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"author": f"u{i % 6}", "text": " ".join(words[(i + k) % 10] for k in
                                                                                    range(6))}) + "\n"
                              for i in range(48)), encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    (tmp_path / "pub").mkdir()
    out, private = tmp_path / "pub" / "rel.json", tmp_path / "private.json"
    res = _run([*cmd, str(corpus), "--mechanism", NAME, "--param", "row_l1=0.5", "-e", "1", "--topics", "2",
                "--keywords", "3", "--model-topics", "2", "--max-iter", "1", "--vocabulary", str(tmp_path / "vocab.txt"),
                "-o", str(out), "--private-report", str(private), "--seed", "1", "-q"], root, env)
    assert res.returncode == 0, res.stderr
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["mechanism"] == NAME and record["guarantee"]["parameters"]["row_l1"] == 0.5
    assert "Ledger charge" not in record["guarantee"]["not_covered"]
    report = json.loads(private.read_text(encoding="utf-8"))
    assert report["sensitivity_source"] == "global L1 bound 2*row_l1*m of the projected rows (public)"


def _reads_the_registry(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return "textdp.mechanisms" in text and bool(re.search(r"\bnames\(|\bREGISTRY\b|\bINDEX\b|\bALL\b", text))


def test_every_test_that_reads_the_registry_takes_it(newcomer):
    """The family's tests parametrised from the registry run on the newcomer (and the docs' name lists are current)."""
    root, env, _ = newcomer
    files = sorted(str(p.relative_to(root)) for p in (root / "tests").glob("test_*.py")
                   if p.name != Path(__file__).name and _reads_the_registry(p))
    files.append("tests/test_topics_newcomer_laplace.py")
    state = root.parent / "state"
    state.mkdir(mode=0o700)
    env = {**env, "TEXTDP_CACHE_DIR": str(state / "cache"), "TEXTDP_STATE_DIR": str(state / "anchors")}
    selected = (f"{NAME} or newcomer_laplace or reads_the_registry or name_blocks or registered_name_is or "
                "audited_or_listed or every_parameter_of_every_registered_class")
    res = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-m", "not slow",
                "-k", selected, "--no-header", *files], root, env, timeout=900)
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))  # type: ignore[union-attr]
    assert passed >= 16, summary  # the family's parametrised tests (calibration, params, record, grid, ...)


def hand_lists(family: set[str], python: dict[str, str], docs: dict[str, str]) -> list[str]:
    """Where a hand-written list holds every name of ``family``: Python literals (lists, tuples, sets) and doc
    sentences (up to a full stop or a semicolon) outside the generated ``<!-- names:... -->`` blocks. Prose that
    names the mechanisms one by one, each in its own clause (docs/audit.md on what each audit case checks), is
    not a list of the family."""
    found = []
    for where, text in python.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.List | ast.Tuple | ast.Set):
                items = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if family <= items:
                    found.append(f"{where}:{node.lineno}")
    block = re.compile(r"<!-- names:[a-z,]+ -->.*?<!-- /names -->", re.DOTALL)
    for where, text in docs.items():
        for sentence in re.split(r"(?<=[.;])\s+|\n\n", block.sub("", text)):
            if family <= set(re.findall(r"`([a-z][a-z0-9+-]*)`", sentence)):
                found.append(f"{where}: {' '.join(sentence.split())[:80]}")
    return found


def test_no_test_or_doc_lists_the_topics_family_by_hand():
    """A hand-written list holding every topics name is a list a newcomer must edit: read names('topics')."""
    python = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
              for p in [*(ROOT / "tests").glob("*.py"), *(ROOT / "src" / "textdp").rglob("*.py")]
              if p.name != "_index.py"}
    docs = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for p in [*(ROOT / "docs").glob("*.md"), *ROOT.glob("*.md")]}
    found = hand_lists(set(names("topics")), python, docs)
    assert found == [], f"hand-written lists of the whole topics family (read names('topics') instead): {found}"


def test_the_hand_list_check_bites():
    family = set(names("topics"))
    listed = ", ".join(f"`{n}`" for n in names("topics"))
    python = {"a.py": f"NAMES = {tuple(names('topics'))!r}\nSOME = {tuple(names('topics'))[:2]!r}\n"}
    clauses = "; ".join(f"`{n}` is audited" for n in names("topics"))
    docs = {"a.md": f"intro\n\nThe family: {listed}. Then\n\n<!-- names:topics -->{listed}<!-- /names -->\n\n"
                    f"{clauses}.\n"}
    assert hand_lists(family, python, docs) == ["a.py:1", f"a.md: The family: {listed}."[:80 + 6]]
