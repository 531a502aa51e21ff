"""LiRA membership inference on topic-model releases (issue 21 item 4): the attack and its statistics.

The full table on PAN-11 Enron and 20 Newsgroups is docs/topics-membership.md (minutes); these tests
use a small synthetic user corpus where each user owns a word of their own, so that membership
leaks through the non-private release, and check that the numbers the table reports are right.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from textdp.audit.lira import KEYWORD_MODES, lira_scores, membership_matrix, run_lira, tpr_at_fpr
from textdp.cli import app
from textdp.topics import UserCorpus

WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "olive", "peach", "plum", "berry",
         "kiwi", "lime", "date", "fig", "guava"]


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    texts, users = [], []
    for u, own in enumerate(WORDS):
        for _ in range(6):  # each user writes mostly their own word, plus common words
            common = rng.choice(["river", "stone", "cloud", "field", "light"], size=6)
            texts.append(" ".join([own] * 8 + list(common)))
            users.append(f"user{u}")
    return UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0, max_features=100)


def test_membership_matrix_has_both_sides_for_every_user():
    m = membership_matrix(8, 50, np.random.default_rng(1))
    assert m.shape == (8, 50) and m.any(axis=0).all() and (~m).any(axis=0).all()
    assert 0.4 < m.mean() < 0.6


def test_lira_scores_separate_a_shifted_statistic_and_not_a_null_one():
    rng = np.random.default_rng(2)
    member = membership_matrix(64, 200, rng)
    shifted = lira_scores(rng.normal(size=member.shape) + 3.0 * member, member)
    null = lira_scores(rng.normal(size=member.shape), member)
    assert tpr_at_fpr(shifted, member, 0.01)[0] > 0.5  # optimal test: Phi(3 - 2.33) = 0.75
    tpr, lo, _ = tpr_at_fpr(null, member, 0.01)
    assert lo <= 0.02 and tpr < 0.05  # chance level when nothing leaks


def test_tpr_interval_is_clopper_pearson_and_fpr_is_respected():
    rng = np.random.default_rng(3)
    member = rng.random(5_000) < 0.5
    scores = rng.normal(size=5_000) + member
    tpr, lo, hi = tpr_at_fpr(scores, member, 0.01)
    k, n_pos = round(tpr * member.sum()), int(member.sum())
    ci = binomtest(k, n_pos).proportion_ci(confidence_level=0.95, method="exact")
    assert lo == pytest.approx(ci.low) and hi == pytest.approx(ci.high)
    # the threshold is the k-th largest member score's neighbourhood: count negatives above it
    thr = np.sort(scores[member])[::-1][k - 1]
    assert (scores[~member] >= thr).sum() <= 0.01 * (~member).sum() + 1
    assert tpr_at_fpr(np.arange(4.0), np.array([False, False, True, True]), 0.0)[0] == 1.0


def test_non_private_release_leaks_membership_and_heavy_noise_hides_the_values(corpus):
    rows, settings = run_lira(corpus, models=24, n_topics=4, m=4, n=6, max_iter=5,
                              mechanisms=[("none", None), ("topicdp-laplace", 0.01)], keywords=KEYWORD_MODES, seed=4)
    by = {(r.keywords, r.mechanism): r for r in rows}
    assert by[("model", "none")].auc > 0.7  # users' own words enter the released keywords
    assert abs(by[("fixed", "topicdp-laplace")].auc - 0.5) < 0.12  # values only, eps = 0.01: no better than chance
    assert settings["models"] == 24 and "corpus" not in json.dumps(settings)
    for r in rows:
        assert r.trials_in + r.trials_out == 24 * corpus.n_users
        assert all(lo <= t <= hi for t, lo, hi in zip(r.tpr, r.tpr_low, r.tpr_high, strict=True))
    assert by[("fixed", "topicdp-laplace")].dp_bound[1] == pytest.approx(np.exp(0.01) * 0.01)


runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [["audit", "topicdp", "--attack", "lira"], ["audit", "laplace", "--attack", "lira", "--corpus", "x.jsonl"],
     ["audit", "topicdp", "--attack", "nope"], ["audit", "topicdp", "--attack", "lira", "--corpus", "missing.jsonl"],
     ["audit", "topicdp", "--attack", "lira", "--corpus", __file__, "--epsilons", "a,b"]],
)
def test_cli_lira_bad_input_exits_2(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "Traceback" not in res.output and "error" in res.output
