"""``evaluate-generation`` with the language-model rewriters ([lm]): config checks and rows on tiny models."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from textdp._rng import spawn
from textdp.errors import ParameterError
from textdp.evaluation.generation_config import generation_config_from_dict
from textdp.evaluation.generation_metrics import stylometric_distance
from textdp.evaluation.generation_report import render_generation_markdown
from textdp.evaluation.generation_sweep import Measures, lm_rows

ROOT = Path(__file__).resolve().parents[1]
BASE = {"corpus": {"name": "reuter_50_50"}, "models": {"er_ae": "a", "ae": "b"}, "sweep": {"epsilons": [1, 50]}}
DOCS = [("d1", "The cat sat on the mat. He said that the meeting will start at noon."),
        ("d2", "we met at the station in the morning ."),
        ("d3", "She wrote a long letter to her friend. The train to the city was late again.")]


@pytest.mark.parametrize("lm,message", [
    ({"models": {"dp-foo": "x"}, "clip": [-2, 2]}, "unknown language-model rewriter 'dp-foo'"),
    ({"models": {"er-ae": "x"}, "clip": [-2, 2]}, "unknown language-model rewriter"),
    ({"models": {"dp-mlm": "x"}}, "public clipping bounds"),
    ({"models": {"dp-mlm": "x"}, "clip": [-2, 2], "clip_public": "p.txt"}, "public clipping bounds"),
    ({"models": {"dp-mlm": "x"}, "clip": [2, -2]}, "low < high"),
    ({"models": {}, "clip": [-2, 2]}, "needs models"),
    ({"models": {"dp-mlm": "x"}, "clip": [-2, 2], "top_k": 5}, "unknown key"),
])
def test_lm_config_errors(lm, message):
    with pytest.raises(ParameterError, match=message):
        generation_config_from_dict({**BASE, "lm": lm})


def test_lm_config_resolves_model_paths(tmp_path):
    cfg = generation_config_from_dict({**BASE, "lm": {"models": {"dp-mlm": "m"}, "clip": [-2, 2]}}, base_dir=tmp_path)
    assert cfg.lm_models == {"dp-mlm": str((tmp_path / "m").resolve())} and cfg.lm_clip == [-2.0, 2.0]
    assert generation_config_from_dict(BASE).lm_models == {}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    root = tmp_path_factory.mktemp("lm")
    for kind in ("causal", "masked"):
        tiny.build(root / kind, kind)
    return root


def _measure(outs: list[str], sents: list[str] | None, boot: np.random.Generator) -> Measures:
    style = stylometric_distance([t for _, t in DOCS], outs)
    return Measures(authorship=0.0, chance=0.5, semantic_similarity=None, document_similarity=0.0,
                    stylometric=float(style.mean()))


def test_lm_rows_run_each_rewriter_over_the_grid(models):
    cfg = generation_config_from_dict({**BASE, "lm": {
        "models": {"dp-prompt": str(models / "causal"), "dp-mlm": str(models / "masked")}, "clip": [-2, 2],
        "max_new_tokens": 4}})
    rows = lm_rows(cfg, DOCS, _measure, spawn(0, 4), spawn(1, 4))
    assert [(r["mechanism"], r["epsilon"]) for r in rows] == [
        ("dp-prompt", 1.0), ("dp-prompt", 50.0), ("dp-mlm", 1.0), ("dp-mlm", 50.0)]
    for r in rows:
        assert r["table"] == "lm" and r["bound"] > 0 and np.isfinite(r["stylometric"])
    # the grid's epsilon is the token-level rewriters' epsilon per token; the row's bound composes the tokens
    assert [r["per_token"] for r in rows] == [1.0, 50.0, 1.0, 50.0]
    assert rows[2]["bound"] == pytest.approx(32 * 1.0) and rows[0]["bound"] == pytest.approx(4 * 1.0)
    md = render_generation_markdown({"rows": [{"table": "reference", "mechanism": "original", "variant": "-",
                                               "epsilon": None, "authorship": 0.0, "chance": 0.5,
                                               "stylometric": 0.0, "document_similarity": 1.0}, *rows]})  # type: ignore[typeddict-item]
    assert "Language-model rewriters" in md and "| dp-mlm |" in md


def test_lm_rows_wrong_model_kind_is_the_loaders_error(models):
    cfg = generation_config_from_dict({**BASE, "lm": {"models": {"dp-mlm": str(models / "causal")},
                                                      "clip": [-2, 2]}})
    with pytest.raises(ParameterError) as err:
        lm_rows(cfg, DOCS, _measure, spawn(0, 2), spawn(1, 2))
    assert "\n" not in str(err.value)
    missing = generation_config_from_dict({**BASE, "lm": {"models": {"dp-mlm": str(models / "nope")},
                                                          "clip": [-2, 2]}})
    with pytest.raises(ParameterError, match="nope"):
        lm_rows(missing, DOCS, _measure, spawn(0, 2), spawn(1, 2))


def test_sweep_checks_the_model_folders_before_anything_else(models, tmp_path):
    from textdp.evaluation.generation_sweep import run_generation_sweep

    cfg = generation_config_from_dict({**BASE, "corpus": {"name": "reuter_50_50", "data_dir": str(tmp_path / "none")},
                                       "lm": {"models": {"dp-prompt": str(models / "masked")}, "clip": [-2, 2]}})
    with pytest.raises(ParameterError) as err:  # the model's kind, not the missing corpus or ER-AE folders
        run_generation_sweep(cfg)
    assert "\n" not in str(err.value) and "masked" in str(err.value)
