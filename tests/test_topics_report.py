"""topics-report end to end on a tiny synthetic corpus (figures, results.json, report.md)."""

from __future__ import annotations

import json
from pathlib import Path

from textdp._rng import make_rng
from textdp.topics import SklearnLDA, UserCorpus
from textdp.topics.report import ReportConfig, run_report

THEMES = ["market price energy power contract trading gas deal",
          "meeting friday schedule week monday office call agenda",
          "game team season player score coach league win"]


def _synthetic(n_users: int, docs: int) -> tuple[list[str], list[str]]:
    gen = make_rng(0)
    texts, users = [], []
    for u in range(n_users):
        for _ in range(docs):
            theme = THEMES[u % 3].split() if gen.random() < 0.7 else THEMES[int(gen.integers(3))].split()
            texts.append(" ".join(str(gen.choice(theme)) for _ in range(12)))
            users.append(f"user{u}")
    return texts, users


def test_report_small(tmp_path: Path) -> None:
    texts, users = _synthetic(n_users=6, docs=4)
    corpus = UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0)
    cfg = ReportConfig(epsilons=(1.0, 5.0), gammas=(0.3, 0.02), sizes=(2, 3), size_epsilons=(3.0,),
                       gamma=0.3, repeats=2, max_samples=30, bar_topics=(1, 2))
    res = run_report(corpus, SklearnLDA(n_topics=3, max_iter=3), tmp_path, name="synthetic", config=cfg, seed=0)
    assert res["skipped_gammas"] == {"0.02": 9498}
    for f in ("results.json", "report.md", "fig_vs_epsilon.png", "fig_vs_gamma.png", "fig_vs_size_eps3.png",
              "fig_keywords.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    data = json.loads((tmp_path / "results.json").read_text())
    row = data["vs_epsilon"][0]
    assert set(row) >= {"epsilon", "topicdp", "topicdp-thesis", "mvg", "topicdp-laplace"}
    assert set(row["topicdp"]) >= {"l1", "row_euclidean", "rmse", "kendall_tau", "post_l1", "post_kendall_tau"}
    assert "gamma=0.02 needs 9498 samples" in (tmp_path / "report.md").read_text()
    assert "never publish" in data["not_a_release"]  # an experiment on the corpus, not a release
