"""TopicDP on the shared corpora (skipped when ../shared/data is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from textdp.topics import (
    SensitivitySampler,
    SklearnLDA,
    UserCorpus,
    extract_topic_matrix,
)
from textdp.topics.family import TopicDP


def _data_dir() -> Path:
    env = os.environ.get("TEXTDP_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def _corpus_path(name: str) -> Path:
    p = _data_dir() / name / f"{name}.jsonl.gz"
    if not p.is_file():
        pytest.skip(f"shared corpus {name} not found at {p}")
    return p


@pytest.mark.data
def test_enron_users_and_small_release() -> None:
    c = UserCorpus.from_jsonl(_corpus_path("pan11_enron"), user_field="author", max_docs_per_user=3)
    assert c.n_users == 92 and all(len(r) <= 3 for r in c.user_rows)
    model = SklearnLDA(n_topics=5, max_iter=3)
    tw, prev = model.fit(c.X)
    tm = extract_topic_matrix(tw, prev, c.vocabulary, 5, 5)
    sens = SensitivitySampler(corpus=c, model=model, sizes=[(5, 5)]).draw(2, seed=0)[0]
    assert sens.shape == (2, 1) and np.all(sens >= 0) and np.all(sens <= np.sqrt(10))
    rel = TopicDP(epsilon=3, delta=1e-4, sensitivity=float(sens.max()) or 1e-3, seed=0).privatize(tm)
    assert len(rel.keywords) == 5 and all(len(k) == 5 for k in rel.keywords)


@pytest.mark.data
def test_20newsgroups_poster_field() -> None:
    c = UserCorpus.from_jsonl(_corpus_path("20newsgroups"), user_field="author", min_user_docs=10,
                              max_docs_per_user=2, strip_quoted=True)
    assert c.n_users == 266  # posters with >= 10 posts (README)
    assert c.X.shape[0] == 2 * 266
