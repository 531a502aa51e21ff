"""Power where the audit had none (issue 29, failure 4): each planted error below is flagged, the real code passes.

Every error is planted from the test side in the code a release runs (SynTF's ``sample_bags``, the
exponential mechanisms' ``sample_by_distance``, CusText+'s ``core``, Earth Mover's ``privatize_ids``,
the topic releases' ``GridNoise.randomize``) or is the registered mechanism built at 1.5 ε while the
audit's claim stays at ε (the topic matrices),
and each audit runs at a fixed seed. On a779fc6 SynTF bags of N > 1 terms had no curve, the audit had
no conformance test (MVG passed ε×1.5 with lower bound 0; topicdp-thesis caught it by a margin of
0.0006–0.004), ``tem`` was audited only where it equals ``santext`` and ``custext+`` only where it
equals ``custext``, on one 5,000-word vocabulary with bags of one word.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import textdp.mechanisms.earth_movers as em_module
import textdp.mechanisms.exponential as ex_module
import textdp.mechanisms.syntf as syntf_module
from textdp.audit import audit, bag_cases, claimed_curves, run_audit, topic_cases
from textdp.embeddings import load_embeddings
from textdp.mechanisms import get


# -- SynTF bags of N > 1 terms: the curve of the exact bag law --------------------------------------------------
@pytest.mark.parametrize("size", [2, 3])
def test_syntf_bags_of_several_terms_have_a_curve_that_flags_epsilon_x1_5(monkeypatch, size):
    ok = run_audit(bag_cases.syntf_case(size=size), samples=5_000, seed=11, conformance=True)
    assert ok.passed and ok.curve is not None and ok.curve.passed, ok
    sample_bags = syntf_module.sample_bags
    monkeypatch.setattr(syntf_module, "sample_bags",
                        lambda rows, w, v, eps, n, rng: sample_bags(rows, w, v, 1.5 * eps, n, rng))
    bad = run_audit(bag_cases.syntf_case(size=size), samples=5_000, seed=11, conformance=True)
    assert not bad.curve.passed and not bad.privacy_passed, bad  # the privacy test itself sees it
    assert bad.curve.excess > 0.05


def test_bag_curve_profile_is_the_exact_law_of_the_summed_loss():
    # brute force over all ordered bags of 3 terms of a 4-term law
    import itertools

    la = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    lb = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    curve = claimed_curves.bag_curve(lambda x, n, rng: np.zeros((n, 3), dtype=np.int64), la, lb, 3)
    grid = np.asarray(curve.grid)
    pa = np.array([np.exp(la[list(t)].sum()) for t in itertools.product(range(4), repeat=3)])
    pb = np.array([np.exp(lb[list(t)].sum()) for t in itertools.product(range(4), repeat=3)])
    brute = [float(np.maximum(pa - np.exp(e) * pb, 0.0).sum()) for e in grid]
    point, upper = curve.claimed(grid, 0.05, np.random.Generator(np.random.PCG64(0)))
    assert np.allclose(point, brute, atol=1e-12) and np.all(upper >= point)
    two = claimed_curves.bag_curve(curve.sample, la, lb, 2)  # the wrong bag size: another profile
    assert not np.allclose(two.claimed(grid, 0.05, np.random.Generator(np.random.PCG64(0)))[0], brute, atol=1e-3)


# -- TEM where its truncation branch decides (gamma below most distances) -------------------------------------------
TEM_PARAMS = {"beta": 0.1}  # public; at epsilon 10, gamma = 2.14: 4,994 of 5,000 words lie beyond it


def test_tem_at_these_parameters_is_not_santext_and_passes():
    ok = audit("tem", epsilon=10.0, params=TEM_PARAMS, samples=2_000, seed=4, conformance=True)
    assert ok.passed and ok.curve.passed and ok.conformance.passed, ok
    assert "cap 2.14" in ok.curve.description
    emb = load_embeddings(vocab_size=5_000)
    tem = get("tem", epsilon=10.0, embeddings=emb, stop_words=None, **TEM_PARAMS).fit()
    santext = get("santext", epsilon=10.0, embeddings=emb, stop_words=None).fit()
    x = emb.index["monday"]
    far = np.linalg.norm(emb.vectors.astype(np.float64) - emb.vectors[x], axis=1) > tem.gamma_
    assert far.sum() > 4_900
    assert tem.probabilities(x)[far].sum() > 100 * santext.probabilities(x)[far].sum()  # the branch matters


def test_the_default_tem_case_is_not_santexts_law():
    # at the old default epsilon 2, gamma = 15.4 exceeded every distance: the case audited SanText's law again
    from textdp.audit import audit_case
    from textdp.audit.claims import TEM_BETA, tem_threshold

    case = audit_case("tem")
    emb = load_embeddings(vocab_size=5_000)
    v = emb.vectors.astype(np.float64)
    x = int(case.input_a)
    d = np.linalg.norm(v - v[x], axis=1)
    eps = case.claimed_epsilon / float(np.linalg.norm(v[x] - v[int(case.input_b)]))
    far = d > tem_threshold(eps, TEM_BETA, emb.vocab_size)
    untruncated = np.exp(-0.5 * eps * (d - d.min()))
    untruncated /= untruncated.sum()
    law = case.conformance.table(case.input_a)
    assert far.sum() > 4_900 and law[far].sum() > 100 * untruncated[far].sum()


@pytest.mark.parametrize("bug", ["no truncation (SanText's law)", "half the threshold"])
def test_a_bug_in_tems_truncation_branch_is_flagged(monkeypatch, bug):
    draw = ex_module.sample_by_distance  # the unpatched audit passes (the test above)

    def broken(v, x, scale, rng, **kw):
        cap = kw.get("cap", np.inf)
        return draw(v, x, scale, rng, **{**kw, "cap": np.inf if bug.startswith("no") else 0.5 * cap})

    monkeypatch.setattr(ex_module, "sample_by_distance", broken)
    bad = audit("tem", epsilon=10.0, params=TEM_PARAMS, samples=2_000, seed=4, conformance=True)
    assert not bad.passed and not bad.conformance.passed and bad.conformance.p_value < 1e-4, bad


def test_tem_epsilon_x1_5_with_truncation_is_flagged_by_the_curve(monkeypatch):
    draw = ex_module.sample_by_distance
    monkeypatch.setattr(ex_module, "sample_by_distance", lambda v, x, scale, rng, **kw: draw(v, x, 1.5 * scale, rng,
                                                                                             **kw))
    bad = audit("tem", epsilon=10.0, params=TEM_PARAMS, samples=2_000, seed=4, conformance=True)
    assert not bad.privacy_passed and not bad.curve.passed, bad


# -- CusText+'s own branch: a stop word in the document --------------------------------------------------------------
@pytest.fixture(scope="module")
def custext_plus():
    from textdp.audit import audit_case

    def case():  # the registered case: two-word documents [the, x] vs [the, y]
        return audit_case("custext+")

    assert "stop word 'the'" in case().pair and case().conformance.kind == "table"
    return case


def _shifted(self, ids, rng):  # the sanitised words written from position 0: the stop word's slot
    ids = np.asarray(ids, dtype=np.int64)
    out = ids.copy()
    sel = np.flatnonzero(~self._is_stop[ids])
    out[: sel.size] = ex_module.CusText.core(self, ids[sel], rng)
    return out


@pytest.mark.parametrize(("bug", "core"), [
    ("sanitised words written to the wrong positions (the word itself stays in place)", _shifted),
    ("stop words sanitised too (CusText's law)", lambda self, ids, rng: ex_module.CusText.core(self, ids, rng)),
])
def test_a_bug_in_custext_plus_stop_word_branch_is_flagged(monkeypatch, custext_plus, bug, core):
    ok = run_audit(custext_plus(), samples=5_000, seed=4, conformance=True)
    assert ok.passed, ok
    monkeypatch.setattr(ex_module.CusTextPlus, "core", core)
    bad = run_audit(custext_plus(), samples=5_000, seed=4, conformance=True)
    assert not bad.passed, (bug, bad)
    if core is _shifted:  # a word released verbatim: a privacy violation the curve sees
        assert not bad.privacy_passed and not bad.curve.passed
    else:  # more noise, a change of law only
        assert bad.privacy_passed and not bad.conformance.passed


# -- topic matrices: epsilon x1.5 in MVG and the thesis calibration ----------------------------------------------------
def _topic_case(name, mech=None):
    if name == "topicdp-thesis":
        return topic_cases.topicdp_case(calibration="thesis", mechanism=mech)
    return topic_cases.mvg_case(covariance="directional" if name == "mvg-directional" else "isotropic",
                                mechanism=mech)


@pytest.mark.parametrize("name", ["mvg", "mvg-directional", "topicdp-thesis"])
def test_epsilon_x1_5_in_a_loose_topic_mechanism_is_flagged_with_a_wide_margin(name):
    # MVG adds ~30 times the noise (1, 1e-4) needs and the thesis ~5 times: 1.5 epsilon keeps them private, so
    # the privacy test rightly passes and the conformance test sees the change of law (p ~ 1e-30 at 10^3)
    from textdp.topics.family import topics_mechanism

    ok = run_audit(_topic_case(name), samples=1_000, seed=12, conformance=True)
    assert ok.passed, ok
    mech = topics_mechanism(name, epsilon=1.5, delta=1e-4, sensitivity=topic_cases.TOPIC_SENSITIVITY)
    bad = run_audit(_topic_case(name, mech), samples=1_000, seed=12, conformance=True)
    assert bad.claimed_epsilon == ok.claimed_epsilon == 1.0
    assert not bad.passed and bad.conformance.p_value < 1e-10, bad


# -- other vocabulary sizes and bag sizes ----------------------------------------------------------------------------
@pytest.mark.parametrize(("vocab_size", "size"), [(1_000, 1), (2_000, 3), (20_000, 2)])
def test_earth_movers_at_other_vocabularies_and_bag_sizes(monkeypatch, vocab_size, size):
    case = bag_cases.earth_movers_case(vocab_size=vocab_size, size=size)
    assert f"top {vocab_size}" in case.pair and f"N={size}" in case.pair
    ok = run_audit(case, samples=2_000, seed=13, conformance=True)
    assert ok.passed, ok
    release = em_module.privatize_ids
    monkeypatch.setattr(em_module, "privatize_ids", lambda ids, v, eps, rng, *a, **k: release(ids, v, 1.5 * eps, rng,
                                                                                              *a, **k))
    bad = run_audit(bag_cases.earth_movers_case(vocab_size=vocab_size, size=size), samples=2_000, seed=13,
                    conformance=True)
    assert not bad.passed and not bad.conformance.passed, bad


@pytest.mark.parametrize("vocab_size", [1_000, 20_000])
def test_santext_at_other_vocabularies(monkeypatch, vocab_size):
    from textdp.audit.word_level import word_mechanism_case

    ok = run_audit(word_mechanism_case("santext", vocab_size=vocab_size), samples=2_000, seed=14, conformance=True)
    assert ok.passed, ok
    draw = ex_module.sample_by_distance
    monkeypatch.setattr(ex_module, "sample_by_distance", lambda v, x, scale, rng, **kw: draw(v, x, 1.5 * scale, rng,
                                                                                             **kw))
    bad = run_audit(word_mechanism_case("santext", vocab_size=vocab_size), samples=2_000, seed=14, conformance=True)
    assert not bad.privacy_passed and not bad.conformance.passed, bad


# -- textdp audit --all: minutes on 2 cores ---------------------------------------------------------------------------
def test_all_caps_each_case_at_ten_thousand_outputs_and_reports_its_time(monkeypatch):
    import json
    import math

    from typer.testing import CliRunner

    from textdp.audit import AuditCase
    from textdp.audit import registry as audit_registry
    from textdp.cli import app
    from textdp.cli.audit import ALL_SAMPLES

    p = math.exp(1.0) / (1 + math.exp(1.0))
    rr = AuditCase("rr", "bit 0 vs 1", 0, 1, lambda bit, n, rng: np.where(rng.random(n) < p, bit, 1 - bit),
                   claimed_epsilon=1.0)
    small = AuditCase("rr-small", "bit 0 vs 1", 0, 1, rr.sample, claimed_epsilon=1.0, default_samples=2_000)
    assert rr.default_samples == 100_000 > ALL_SAMPLES == 10_000
    monkeypatch.setattr(audit_registry, "_CASES", {
        "rr": audit_registry._Entry(lambda epsilon=None, delta=None: rr, "rr"),
        "rr-small": audit_registry._Entry(lambda epsilon=None, delta=None: small, "rr, a case with fewer samples")})
    res = CliRunner().invoke(app, ["audit", "--all", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [c["samples"] for c in out["cases"]] == [10_000, 2_000]
    assert all(c["seconds"] >= 0 for c in out["cases"]) and "s in all" in out["note"]
    assert "at least one with probability up to 10%" in out["note"]  # 1 - 0.95^2: the family-wise rate


def test_all_names_a_case_it_cannot_build_and_runs_the_others(monkeypatch):
    """A case whose factory raises a TextDPError (e.g. a missing extra) is reported as not run; the rest still run."""
    import json
    import math

    from typer.testing import CliRunner

    from textdp.audit import AuditCase
    from textdp.audit import registry as audit_registry
    from textdp.cli import app
    from textdp.errors import MissingDependencyError

    p = math.exp(1.0) / (1 + math.exp(1.0))
    rr = AuditCase("rr", "bit 0 vs 1", 0, 1, lambda bit, n, rng: np.where(rng.random(n) < p, bit, 1 - bit),
                   claimed_epsilon=1.0, default_samples=2_000)

    def needs_extra(epsilon=None, delta=None):
        raise MissingDependencyError("the 'lm' case needs the [generation] extra: pip install 'textdp[generation]'")

    monkeypatch.setattr(audit_registry, "_CASES", {
        "lm": audit_registry._Entry(needs_extra, "a case that needs an extra"),
        "rr": audit_registry._Entry(lambda epsilon=None, delta=None: rr, "rr")})
    res = CliRunner().invoke(app, ["audit", "--all", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [c["mechanism"] for c in out["cases"]] == ["rr"]
    assert "[generation]" in out["not_run"]["lm"] and "NOT RUN, so not checked: lm" in out["note"]
    res = CliRunner().invoke(app, ["audit", "--all", "--seed", "3"])
    assert res.exit_code == 0 and "lm: NOT RUN" in res.output, res.output


@pytest.mark.parametrize("name", ["laplace", "topicdp", "topicdp-thesis", "mvg", "mvg-directional"])
def test_noise_x0_9_in_the_topic_release_primitive_is_flagged(monkeypatch, name):
    # randomize (the release's noise draw, a matrix or a stack of them) keeps rint(0.9 Z) of its integer noise Z
    import textdp.topics.noise as noise

    randomize = noise.GridNoise.randomize

    def scaled(self, matrix, seed=None):
        out = randomize(self, matrix, seed)
        k = np.rint(np.asarray(matrix, dtype=np.float64) / self.grid)
        return (k + np.rint(0.9 * (np.rint(out / self.grid) - k))) * self.grid

    assert audit(name, samples=10_000, seed=15, conformance=True).passed
    monkeypatch.setattr(noise.GridNoise, "randomize", scaled)
    bad = audit(name, samples=10_000, seed=15, conformance=True)
    assert not bad.passed and not bad.conformance.passed, bad


# -- tools/audit_power.py: the power table's repetitions and bounds (issue 29 item 4) --------------------------------
def _power_tool():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "audit_power.py"
    spec = importlib.util.spec_from_file_location("audit_power_tool", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same(a, b) -> bool:
    import json

    strip = lambda d: json.dumps({k: v for k, v in d.items() if k != "seconds"}, sort_keys=True)  # noqa: E731
    return strip(a) == strip(b)


@pytest.mark.parametrize("cell", [("laplace", "none", 1.0), ("topicdp", "scale", 0.9), ("laplace", "epsilon", 1.1)])
def test_power_tool_reuses_the_built_case_with_a_fresh_builds_verdicts(cell):
    # the speed-up of the power run: one case built per cell, only the seed changes; the results are the ones a
    # fresh `audit(...)` per repetition gives (the case does not depend on the seed), the planted error in force
    from textdp.topics.noise import GridNoise

    tool = _power_tool()
    randomize = GridNoise.randomize
    with tool.planted(*cell) as built:
        reused = [run_audit(built, samples=600, seed=s, conformance=True).to_dict() for s in (1, 2)]
    assert GridNoise.randomize is randomize  # the patch is undone when the cell ends
    fresh = []
    for s in (1, 2):
        if cell[1] == "epsilon":
            fresh.append(run_audit(tool.epsilon_error_case(cell[0], cell[2]), samples=600, seed=s,
                                   conformance=True).to_dict())
        else:
            with tool.scale_error(cell[0], cell[2]):
                fresh.append(audit(cell[0], samples=600, seed=s, conformance=True).to_dict())
    assert all(_same(a, b) for a, b in zip(reused, fresh, strict=True))
    with tool.planted(cell[0], "none", 1.0) as unplanted:
        clean = run_audit(unplanted, samples=600, seed=1, conformance=True)
    assert (cell[1] == "none") == _same(clean.to_dict(), reused[0])  # a planted cell is not the clean audit


def test_power_table_claims_95_percent_power_only_from_the_clopper_pearson_bound():
    tool = _power_tool()
    lo, hi = tool.clopper_pearson(20, 20)
    assert lo == pytest.approx(0.05 ** (1 / 20)) and hi == 1.0  # k = n: the bound is alpha^(1/n)
    assert tool.clopper_pearson(59, 59)[0] >= 0.95 > tool.clopper_pearson(58, 58)[0]
    assert tool.clopper_pearson(1, 20)[1] == pytest.approx(0.2161, abs=1e-4)

    def rows(case, kind, error, k, n):
        return [{"case": case, "kind": kind, "error": error, "seed": i, "reps": 1, "flagged": int(i < k),
                 "privacy": 0, "conformance": int(i < k), "samples": 10_000, "seconds": 1.0} for i in range(n)]

    table = tool.power_table(rows("x", "none", 1.0, 1, 20) * 2 + rows("x", "scale", 0.95, 59, 59)
                             + rows("x", "scale", 0.98, 20, 20) + rows("x", "epsilon", 1.05, 15, 20))
    line = {row.split("|")[2].strip(): row for row in table.splitlines()[2:]}
    # a (cell, seed) listed twice (overlapping runs) is one audit, not two repetitions
    assert "1/20" in line["nothing (c = 1)"] and "false-alarm rate <= 0.216" in line["nothing (c = 1)"]
    assert "59/59" in line["scale x0.95"] and "shown (lower bound)" in line["scale x0.95"]
    assert "20/20" in line["scale x0.98"] and "point estimate only" in line["scale x0.98"]
    assert "power >= 0.861" in line["scale x0.98"] and line["eps x1.05"].rstrip(" |").split("|")[-2].strip() == "no"
    # the wrong law: a normal (Wald) interval has zero width at 20 of 20 and would call it 95% power shown
    wald_lower = 1.0 - 1.645 * math.sqrt(1.0 * 0.0 / 20)
    assert wald_lower >= 0.95 and "shown" not in line["scale x0.98"]
