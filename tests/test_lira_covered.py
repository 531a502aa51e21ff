"""LiRA against the covered topic release (issue 30): keywords read off the noisy values.

On a synthetic corpus where each user owns a word, the model's keywords leak membership at any noise (the
thesis's release, ``--keywords-from model``), while the covered default (whole rows over a public
vocabulary, keywords from the noisy values) falls to chance under the same noise. The Enron check of the
issue's "done when" (ε = 1, 500 keywords per topic, the sampled sensitivity) is the slow test at the end.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.audit.lira import LiraRow, run_lira
from textdp.cli import app
from textdp.topics import UserCorpus

WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "olive", "peach", "plum", "berry",
         "kiwi", "lime", "date", "fig", "guava"]
runner = CliRunner()


@pytest.fixture(scope="module")
def corpus() -> UserCorpus:
    rng = np.random.default_rng(0)
    texts, users = [], []
    for u, own in enumerate(WORDS):
        for _ in range(6):  # each user writes mostly their own word, plus common words
            common = rng.choice(["river", "stone", "cloud", "field", "light"], size=6)
            texts.append(" ".join([own] * 8 + list(common)))
            users.append(f"user{u}")
    return UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0, max_features=100)


def test_model_keywords_leak_at_any_noise_and_the_covered_release_does_not(corpus):
    rows, settings = run_lira(corpus, models=32, n_topics=4, m=4, n=[3, 6], max_iter=5, keywords=("noisy", "model"),
                              mechanisms=[("none", None), ("topicdp", 0.05)], seed=5)
    by = {(r.keywords, r.n, r.mechanism): r for r in rows}
    assert settings["n"] == "3,6" and len(rows) == 8
    for n in (3, 6):
        assert by[("noisy", n, "none")].auc > 0.7 and by[("model", n, "none")].auc > 0.7  # the values leak
        assert by[("model", n, "topicdp")].auc > 0.65  # the identities still leak at epsilon 0.05
        assert abs(by[("noisy", n, "topicdp")].auc - 0.5) < 0.1  # keywords from noisy values: chance
    assert by[("noisy", 6, "topicdp")].sensitivity == "worst-case sqrt(2m)"
    assert by[("noisy", 6, "none")].consistent is None


def test_sampled_sensitivity_calibrates_each_release_with_its_own_sampler(corpus, tmp_path):
    rows, settings = run_lira(corpus, models=8, n_topics=3, m=3, n=4, max_iter=2, keywords=("noisy", "model"),
                              mechanisms=[("topicdp", 1.0), ("topicdp-laplace", 1.0)], sensitivity="sampled",
                              gamma=0.45, cache_dir=tmp_path, seed=3)
    by = {(r.keywords, r.mechanism): r for r in rows}
    assert by[("noisy", "topicdp")].sensitivity == "sampled, gamma 0.45"
    assert by[("model", "topicdp")].sensitivity == "sampled, gamma 0.45"
    assert by[("noisy", "topicdp-laplace")].sensitivity == "global L1 2m"
    assert "sampled once on the whole corpus" in str(settings["sensitivity"])
    assert len(list(tmp_path.glob("sens-*.json"))) == 2  # one sampler per release kind (whole rows; the model's m x n)


def test_consistency_is_the_interval_against_the_bound():
    row = LiraRow(mechanism="topicdp", keywords="noisy", epsilon=1.0, delta=1e-5, trials_in=100, trials_out=100,
                  auc=0.5, tpr=(0.01, 0.02), tpr_low=(0.0028, 0.001), tpr_high=(0.02, 0.05),
                  dp_bound=(math.e * 0.001 + 1e-5, math.e * 0.01 + 1e-5))
    assert row.consistent == (False, True) and row.to_dict()["consistent_with_dp_bound"] == [False, True]


@pytest.mark.parametrize("args", [["--keywords", "20,x"], ["--keywords-from", "noisy,bogus"],
                                  ["--sensitivity", "global"]])
def test_cli_lira_options_are_checked_in_one_line(args):
    res = runner.invoke(app, ["audit", "topicdp", "--attack", "lira", "--corpus", __file__, *args])
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


ENRON = Path(os.environ.get("TEXTDP_SHARED_DATA", "/work/shared/data")) / "pan11_enron" / "pan11_enron.jsonl.gz"


@pytest.mark.slow
@pytest.mark.skipif(not ENRON.is_file(), reason="needs /work/shared/data/pan11_enron")
def test_enron_covered_default_is_within_the_dp_bound_and_model_keywords_are_not():
    """Issue 30's "done when": Enron, epsilon 1, 500 keywords of 500 words, 64 shadows, the sampled sensitivity.

    The covered default's TPR interval at 0.1% FPR includes or lies below the (1, 1e-5)-DP bound; the thesis's
    release (keywords chosen by the model) at the same size is far above it (about 13%) -- the wrong law fails.
    Minutes: 128 LDA fits and the sampler's 285 pairs (cached in the default cache directory: the run's
    private one, or TEXTDP_TEST_STATE_DIR, conftest.py).
    """
    from textdp.topics import default_cache_dir

    users = UserCorpus.from_jsonl(ENRON, max_docs_per_user=30, max_features=500, min_df=3)
    rows, _ = run_lira(users, models=64, n_topics=5, m=5, n=500, mechanisms=[("topicdp", 1.0)],
                       keywords=("noisy",), sensitivity="sampled", cache_dir=default_cache_dir(), seed=1)
    (covered,) = rows
    assert covered.consistent is not None and covered.consistent[0], json.dumps(covered.to_dict())
    model, _ = run_lira(users, models=64, n_topics=5, m=5, n=500, mechanisms=[("topicdp", 1.0)],
                        keywords=("model",), seed=1)
    assert model[0].consistent is not None and not model[0].consistent[0], json.dumps(model[0].to_dict())


def test_cli_lira_reports_consistency_with_the_bound(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "users.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for u, own in enumerate(WORDS):
            for _ in range(4):
                words = [own] * 6 + list(rng.choice(["river", "stone", "cloud", "field", "light"], size=6))
                fh.write(json.dumps({"author": f"user{u}", "text": " ".join(words)}) + "\n")
    args = ["audit", "topicdp", "--attack", "lira", "--corpus", str(path), "--models", "8", "--topics", "3",
            "--keywords", "3,5", "--epsilons", "1", "--keywords-from", "noisy,model", "--seed", "2"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {(r["keywords"], r["n"]) for r in out["rows"]} == {(k, n) for k in ("noisy", "model") for n in (3, 5)}
    private = [r for r in out["rows"] if r["epsilon"] is not None]
    assert private and all(len(r["consistent_with_dp_bound"]) == 2 for r in private)
    table = runner.invoke(app, args, env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "within DP bound" in table.output
