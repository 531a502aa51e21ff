"""The generation sweep's calibration, metrics and config (no corpus or model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from textdp.errors import ParameterError
from textdp.evaluation.generation_config import generation_config_from_dict
from textdp.evaluation.generation_metrics import stylometric_distance, stylometric_features
from textdp.evaluation.generation_sweep import sweep_conditions
from textdp.generation.bounds import (
    em_bound,
    random_r_epsilon,
    random_r_rate,
    two_set_bound,
)

BASE = {"corpus": {"name": "reuter_50_50"}, "models": {"er_ae": "a", "ae": "b"}, "sweep": {"epsilons": [1, 5]}}


def test_conditions_share_the_per_sentence_bound():
    cfg = generation_config_from_dict(BASE)
    conds = sweep_conditions(cfg, vocab_output_size=10_001, vocab_words=10_000, max_length=32)
    for e in (1.0, 5.0):
        b = two_set_bound(e, 10_001, 32).per_sentence
        rows = [c for c in conds if c.table == "equal-bound" and c.er_ae_epsilon == e]
        assert {c.mechanism for c in rows} == {"er-ae", "ae-dp", "syntf-sentence", "random-sentence"}
        for c in rows:
            assert c.bound == pytest.approx(b, rel=1e-9)
            if c.mechanism == "ae-dp":
                assert em_bound(c.epsilon, 32) == pytest.approx(b)
            if c.mechanism == "random-sentence":
                assert 32 * random_r_epsilon(random_r_rate(c.epsilon, 10_000), 10_000) == pytest.approx(b)
            if c.mechanism == "syntf-sentence":
                assert c.epsilon == pytest.approx(b)
    nominal = [c for c in conds if c.table == "nominal"]
    assert {(c.mechanism, c.bound) for c in nominal if c.er_ae_epsilon == 5.0} == {
        ("ae-dp", 160.0), ("syntf-sentence", 160.0), ("random-sentence", 160.0)}
    # ER-AE's floor: even at epsilon -> 0 the bound is L_max * ln(|V| - 1)
    assert two_set_bound(1e-6, 10_001, 32).per_sentence == pytest.approx(32 * math.log(10_000), rel=1e-6)


def test_stylometric_features_and_distance():
    f = stylometric_features("Hello, World! The cat sat on the mat.")
    assert f.shape == (64,) and np.all(np.isfinite(f))
    assert stylometric_features("")[0] == 0.0  # no crash on empty text
    d = stylometric_distance(["The cat sat.", "A long, winding sentence; with punctuation!"],
                             ["The cat sat.", "a long winding sentence with punctuation"])
    assert d[0] == 0.0 and d[1] > 0


@pytest.mark.parametrize("patch,message", [
    ({"corpus": {"name": "ebg"}}, "unknown corpus"),
    ({"sweep": {"epsilons": []}}, "epsilons"),
    ({"sweep": {"epsilons": [0]}}, "epsilon"),
    ({"models": {"er_ae": "a"}}, "needs ae"),
    ({"extra": {}}, "unknown config section"),
    ({"sweep": {"epsilons": [1], "variants": ["beam"]}}, "variant"),
])
def test_config_errors(patch, message):
    with pytest.raises(ParameterError, match=message):
        generation_config_from_dict({**BASE, **patch})


def test_plot_privacy_utility_writes_a_png_into_a_new_folder(tmp_path):
    """The sweep's plot (through evaluation.plots.save_figure): the folder is made and a PNG written."""
    pytest.importorskip("matplotlib")
    from textdp.evaluation import generation_report as report

    table = sorted(report._PLOTTED_TABLES)[0]
    rows = [{"table": table, "mechanism": "er-ae", "variant": "-", "document_similarity": 0.5 + i / 10,
                 "authorship": 0.3 + i / 10, "epsilon": float(i + 1), "chance": 0.1} for i in range(3)]
    out = report.plot_privacy_utility({"rows": rows}, tmp_path / "new" / "plot.png", "title")
    assert out == tmp_path / "new" / "plot.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
