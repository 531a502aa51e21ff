"""``textdp audit NAME --replay`` (issue 29): TopicDP's sampled sensitivity against the real release, from the CLI.

The command fits a real scikit-learn LDA on the public synthetic corpus of ``textdp.audit.replay``, samples the
sensitivity with the real sampler, and replays the release (``privatize_batch``, noise frozen) on fresh
neighbouring databases. Each database is fitted once for the whole module (the fits are deterministic; the
cache only saves time). A sampler that measures half of what the release moves is flagged (exit 1); bad use is
a one-line error with exit 2.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import textdp.topics.sensitivity as sensitivity_module
from textdp.cli import app
from textdp.topics.models import fit_database

runner = CliRunner()
_FITS: dict[tuple[str, tuple[int, ...]], object] = {}


def _fit(corpus, model, users=None):
    key = (corpus.fingerprint, tuple(users) if users is not None else ())
    if key not in _FITS:
        _FITS[key] = fit_database(corpus, model, users)
    return _FITS[key]


@pytest.fixture(autouse=True)
def _shared_fits(monkeypatch):
    monkeypatch.setattr(sensitivity_module, "fit_database", _fit)
    monkeypatch.setattr("textdp.audit.replay.fit_database", _fit)


def test_replay_of_the_real_release_passes_with_a_json_verdict():
    res = runner.invoke(app, ["audit", "topicdp", "--replay", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rep = out["replay"]
    assert out["passed"] and rep["passed"] and rep["pairs"] == 24 and rep["consistent"], rep
    assert rep["gamma"] == pytest.approx(0.3) and rep["norm"] == "l2" and rep["exceedances"] <= 2
    assert 0 < rep["max_distance"] and rep["declared"] > 0 and out["settings"]["seeded"] is True
    assert "synthetic" in out["settings"]["corpus"]
    # the same audit as a table (the report style of `textdp audit`): the same numbers, a verdict line
    table = runner.invoke(app, ["audit", "topicdp", "--replay", "--seed", "1"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    assert "sensitivity replay: topicdp" in table.output and "PASSED" in table.output
    assert f"{rep['declared']:.6g}" in table.output


def test_replay_flags_a_sampler_that_measures_half_the_change(monkeypatch):
    # the model-keyword release, selected by its flag (--keywords-from model), as textdp topics selects it
    real = sensitivity_module.released_matrix_distance
    monkeypatch.setattr(sensitivity_module, "released_matrix_distance", lambda *a, **k: real(*a, **k) / 2)
    args = ["audit", "topicdp", "--replay", "--seed", "1", "--keywords-from", "model"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.output)
    rep = out["replay"]
    assert out["settings"]["keywords_from"] == "model" and rep["keywords"] is None
    assert not rep["passed"] and rep["consistent"] and min(rep["p_value"], rep["shift_p_value"]) < 0.05 / 3, rep
    table = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert table.exit_code == 1 and "VIOLATION" in table.output


# -- issue 41, finding 4: --replay replays what textdp topics releases by default ----------------------------------
def test_the_default_replay_is_the_covered_release_of_textdp_topics():
    res = runner.invoke(app, ["audit", "topicdp", "--replay", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rep = out["replay"]
    assert out["settings"]["keywords_from"] == "noisy" and rep["keywords"] == 4 and rep["keyword_mismatches"] == 0
    assert rep["shape"][1] == 32  # whole rows over the public vocabulary of the synthetic corpus


def test_the_default_replay_flags_a_rows_sampler_that_measures_half_the_change(monkeypatch):
    # the sampler of the default release (whole rows): understated by half; e24cd34 replayed the model keywords
    real = sensitivity_module.topic_rows_distance
    monkeypatch.setattr(sensitivity_module, "topic_rows_distance", lambda *a, **k: real(*a, **k) / 2)
    res = runner.invoke(app, ["audit", "topicdp", "--replay", "--seed", "1", "--json"])
    assert res.exit_code == 1, res.output
    rep = json.loads(res.output)["replay"]
    assert not rep["passed"] and min(rep["p_value"], rep["shift_p_value"]) < 0.05 / 3, rep


def test_the_default_replay_flags_keywords_ranked_by_the_private_rows(monkeypatch):
    import dataclasses

    import numpy as np

    import textdp.topics.family as family

    real = family.make_release

    def planted(uid, topics, raw, guarantee, seeded, *, keywords=None):
        rel = real(uid, topics, raw, guarantee, seeded, keywords=keywords)
        if topics.columns != "public" or keywords is None:
            return rel
        cols = np.argsort(-np.asarray(topics.matrix), axis=1, kind="stable")[:, :keywords]
        return dataclasses.replace(rel, keywords=tuple(tuple(topics.keywords[i][c] for c in row)
                                                       for i, row in enumerate(cols)))

    monkeypatch.setattr(family, "make_release", planted)
    res = runner.invoke(app, ["audit", "topicdp", "--replay", "--seed", "1", "--json"])
    assert res.exit_code == 1, res.output
    rep = json.loads(res.output)["replay"]
    assert rep["keyword_mismatches"] > 0 and not rep["passed"], rep


def test_replay_of_the_laplace_baseline_checks_its_global_bound():
    res = runner.invoke(app, ["audit", "topicdp-laplace", "--replay", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)["replay"]
    assert rep["norm"] == "l1" and rep["gamma"] is None and rep["exceedances"] == 0 and rep["declared"] == 4.0


@pytest.mark.parametrize(("args", "says"), [
    (["cmp", "--replay"], "not one"),
    (["topicdp", "--replay", "--conformance"], "drop --conformance"),
    (["topicdp", "--replay", "--samples", "1000"], "drop --conformance"),
    (["topicdp", "--replay", "--attack", "lira"], "drop --conformance"),
    (["topicdp", "--replay", "--pairs", "0"], "--pairs"),
    (["topicdp", "--replay", "--gamma", "1.5"], "--gamma"),
    (["topicdp", "--replay", "--epsilon", "1e9"], "--epsilon"),
    (["topicdp-laplace", "--replay", "--delta", "1e-5"], "drop --delta"),
    (["topicdp", "--replay", "--keywords-from", "fixed"], "--keywords-from"),
    (["--all", "--replay"], "--replay"),
])
def test_replay_bad_use_is_a_one_line_error(args, says):
    res = runner.invoke(app, ["audit", *args])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], res.output
