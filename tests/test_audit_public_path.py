"""The audit samples the public release and nothing else (issue 41, finding 1).

On e24cd34 the word-level, earth-movers and SynTF cases sampled ``privatize_ids``/``core``, a
neighbour of the release: with a bug only in ``_privatize`` (the method ``privatize_batch``, and so
``textdp obfuscate``, ``topics`` and ``rewrite``, run) every audit passed with numbers identical to the
real run. Here:

* the modules that build cases import no mechanism internal (an AST scan of their imports and
  attribute reads: no ``privatize_ids``, ``core``, ``noisy_vectors``, sampler or calibration helper);
* for every registered mechanism, the samples of its audit case pass through the registered class's
  ``_privatize`` (a counting wrapper planted on the class), the function every release runs.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np
import pytest

from textdp.audit import audit_case
from textdp.mechanisms.registry import REGISTRY, mechanism_class

AUDIT = Path(__file__).resolve().parents[1] / "src" / "textdp" / "audit"

#: Modules of textdp.audit that do not build registered cases, and why they may read internals.
EXEMPT = {
    "power.py": "power studies only: draws the declared law or the internal step; never registered",
    "lm.py": "the KNOWN-BAD variants plant their fault in the loop's internals (they must be flagged)",
    "lira.py": "the membership-inference attack (--attack lira), not an audit case",
    "replay.py": "replays the sensitivity sampler's own functions on purpose (--replay)",
}
#: Modules whose import by a case module would let the audit sample (or calibrate with) the mechanism's insides.
BANNED_MODULES = (
    "textdp.samplers", "textdp.accounting", "textdp.topics.noise", "textdp.topics.sensitivity",
    "textdp.topics.release", "textdp.generation.decoding", "textdp.generation.lm_decode", "textdp.generation.audit",
    "textdp.generation.bounds", "textdp.mechanisms.earth_movers", "textdp.mechanisms.syntf",
    "textdp.mechanisms.exponential", "textdp.mechanisms.perturbation", "textdp.mechanisms.kernels",
    "textdp.text",
)
#: Names (imported or read as attributes) that are a mechanism's internal sampler, core or calibration helper.
BANNED_NAMES = frozenset({
    "privatize_ids", "core", "noisy_vectors", "snap_to_grid", "discrete_gaussian", "discrete_laplace",
    "sample_bags", "sample_by_distance", "custext_groups", "cached_custext_groups", "resolve_stop_words",
    "noisy_keywords", "zcdp_rho", "zcdp_delta", "rounded_sensitivity", "thesis_gaussian_sigma",
    "mvg_precision_budget", "grid_scale", "grid_variance", "grid_variances", "two_set_step", "two_set_bound",
    "exact_law_releases", "two_set_toy_case",
})


def _absolute(module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = ["textdp", "audit"][: 2 - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _violations(path: Path) -> list[str]:
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(node.module, node.level)
            if mod == "textdp.audit.power" or any(mod == b or mod.startswith(b + ".") for b in BANNED_MODULES):
                out.append(f"{path.name}:{node.lineno} imports from {mod}")
            for alias in node.names:
                if alias.name in BANNED_NAMES:
                    out.append(f"{path.name}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(alias.name == b or alias.name.startswith(b + ".") for b in BANNED_MODULES):
                    out.append(f"{path.name}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in BANNED_NAMES:
            out.append(f"{path.name}:{node.lineno} reads .{node.attr}")
    return out


def test_the_case_modules_import_no_mechanism_internals():
    modules = sorted(p for p in AUDIT.glob("*.py") if p.name not in EXEMPT)
    assert {"word_cases.py", "bag_cases.py", "topic_cases.py", "covered_topics.py", "release_batch.py", "claimed_curves.py",
            "word_level.py", "claims.py", "grid_curves.py", "lm_release.py"} <= {p.name for p in modules}
    found = [v for p in modules for v in _violations(p)]
    assert not found, "\n".join(found)


def test_the_scan_sees_what_e24cd34_did(tmp_path):
    # the scan itself: the imports and reads of e24cd34's cases.py / word_level.py / claims.py are found
    bad = tmp_path / "bad.py"
    bad.write_text("from ..samplers import snap_to_grid\nfrom ..text import resolve_stop_words\n"
                   "def f(mech, ids, rng):\n    from ..mechanisms.exponential import custext_groups\n"
                   "    return mech.privatize_ids(ids, rng), mech.core(ids, rng)\n")
    found = _violations(bad)
    assert len(found) == 8, found  # 2 modules + 2 names at the top, 1 module + 1 name inside, 2 reads


# -- the spy: every registered name's audit samples pass through the class's _privatize ----------------------------
SENTENCE = {n for n, e in REGISTRY.items() if mechanism_class(n).family == "sentence"}


def _params(name: str) -> list[object]:
    slow = name in SENTENCE
    return [pytest.param(name, marks=pytest.mark.slow) if slow else name]


AUDITED = [n for n, e in REGISTRY.items() if e.audit is not None]


def test_a_registered_name_without_a_case_is_named_not_audited():
    from textdp.audit.registry import not_audited

    assert {n for n, e in REGISTRY.items() if e.audit is None} == set(not_audited())


@pytest.mark.parametrize("name", [p for n in AUDITED for p in _params(n)])
def test_the_audit_samples_pass_through_the_release_method(monkeypatch, name):
    entry = REGISTRY[name]
    cls = mechanism_class(name)
    if name in SENTENCE:
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
    seen: list[type] = []
    owner = next(c for c in cls.__mro__ if "_privatize" in vars(c))
    real = vars(owner)["_privatize"]

    @functools.wraps(real)
    def counting(self, prepared, context, rng):
        seen.append(type(self))
        return real(self, prepared, context, rng)

    monkeypatch.setattr(owner, "_privatize", counting)
    case = audit_case(entry.audit)
    rng = np.random.default_rng(0)
    for x in (case.input_a, case.input_b):
        out = case.sample(x, 4, rng)
        assert len(out) == 4
    assert cls in seen, (name, seen)  # the registered class's own release method ran for the audit's samples
