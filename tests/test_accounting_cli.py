"""``textdp guarantee`` and ``textdp calibrate`` on real documents with the default GloVe embeddings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_guarantee_json_multiplier_matches_bags():
    a, b = EXAMPLES / "doc_a.txt", EXAMPLES / "doc_b.txt"
    res = runner.invoke(app, ["guarantee", str(a), str(b), "--epsilon", "0.01", "--size", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["size"] == 20 and out["words_a"] >= 20 and out["words_b"] >= 20
    assert out["privacy_loss"] == pytest.approx(0.01 * 20 * out["earth_movers_distance"])
    assert out["multiplier"] == pytest.approx(math.exp(0.01 * 20 * out["earth_movers_distance"]))
    assert out["log10_multiplier"] == pytest.approx(out["privacy_loss"] / math.log(10))
    # the same documents, a realistic epsilon: the multiplier overflows -> null, log10 stays finite
    res = runner.invoke(app, ["guarantee", str(a), str(b), "-e", "10", "-n", "40", "--json"])
    big = json.loads(res.stdout)
    assert big["multiplier"] is None and math.isfinite(big["log10_multiplier"])
    assert big["multiplier_text"].startswith("10^")
    assert "Infinity" not in res.stdout and "NaN" not in res.stdout


def test_guarantee_table_and_identical_documents():
    a = EXAMPLES / "doc_a.txt"
    res = runner.invoke(app, ["guarantee", str(a), str(a), "-e", "10", "-n", "30"])
    assert res.exit_code == 0, res.output
    assert "bag of 30" in res.stdout and "multiplier" in res.stdout
    js = json.loads(runner.invoke(app, ["guarantee", str(a), str(a), "-e", "10", "-n", "30", "--json"]).stdout)
    assert js["earth_movers_distance"] == 0.0 and js["multiplier"] == 1.0 and js["epsilon_for_unit_loss"] is None


def test_guarantee_errors(tmp_path):
    a = EXAMPLES / "doc_a.txt"
    res = runner.invoke(app, ["guarantee", str(a), str(tmp_path / "missing.txt"), "-e", "10"])
    assert res.exit_code == 2 and "error:" in res.stderr and "Traceback" not in res.output
    res = runner.invoke(app, ["guarantee", str(a), str(a), "-e", "10", "-n", "5000"])
    assert res.exit_code == 2 and "bag size" in res.stderr
    res = runner.invoke(app, ["guarantee", str(a), str(a), "-e", "-1"])
    assert res.exit_code == 2 and "epsilon" in res.stderr


def test_help_explains_epsilon():
    for cmd in ("guarantee", "calibrate"):
        res = runner.invoke(app, [cmd, "--help"])
        assert res.exit_code == 0 and "privacy dial" in res.stdout


def test_calibrate_json(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("\n".join(["river", "mountain", "bread", "election", "guitar", "doctor", "window", "coffee"]))
    res = runner.invoke(
        app,
        ["calibrate", "--target-unchanged", "0.5", "--calibration-words", str(words), "--repeats", "20",
         "--epsilons", "10", "--seed", "3", "--vocab-size", "50000", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["epsilon_low"] <= out["epsilon"] <= out["epsilon_high"] and out["n_words"] == 8
    rows = {r["epsilon"]: r for r in out["diagnostics"]}
    assert rows[out["epsilon"]]["unchanged_fraction"] == pytest.approx(0.5, abs=0.04)
    assert all(r["threshold_agreement"] == 1.0 for r in rows.values())
    res = runner.invoke(app, ["calibrate", "--target-unchanged", "1.5", "--json"])
    assert res.exit_code == 2 and "error:" in res.stderr
