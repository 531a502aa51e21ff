"""Shared fixtures: the real GloVe embeddings and the shared corpora (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def _textdp_state_is_private() -> None:
    """The repository's root conftest.py points TEXTDP_CACHE_DIR and TEXTDP_STATE_DIR at a private temporary
    folder per run (one per test worker) before any test runs, and fails the run if the real ~/.cache/textdp
    changed; without it a test would write into the user's real state."""
    home = Path.home() / ".cache" / "textdp"
    cache = os.environ.get("TEXTDP_CACHE_DIR")
    if not cache or not os.environ.get("TEXTDP_STATE_DIR") or Path(cache).resolve() == home.resolve():
        pytest.exit("TEXTDP_CACHE_DIR/TEXTDP_STATE_DIR must name a temporary folder: run pytest from the "
                    "repository, whose root conftest.py sets them", returncode=4)


def data_dir() -> Path:
    """``$TEXTDP_DATA_DIR`` or the repository's sibling ``../shared/data``."""
    env = os.environ.get("TEXTDP_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = data_dir()
    if not d.is_dir():
        pytest.skip(f"shared corpora not found at {d}")
    return d


@pytest.fixture(scope="session")
def glove():
    from textdp.embeddings import load_embeddings

    return load_embeddings()


@pytest.fixture()
def rng() -> np.random.Generator:
    # tests are reproducible; the library default (OS entropy) is tested separately
    return np.random.default_rng(20261122)


#: the tiny 20 Newsgroups evaluation set shared by the evaluation tests (built once per session)
NG20_TINY = {"n_topics": 2, "authors_per_topic": 3, "known_words": 300, "unknown_words": 150, "max_topic_train": 300}


@pytest.fixture(scope="session")
def ng20_tiny_set():
    d = data_dir()
    if not (d / "20newsgroups").is_dir():
        pytest.skip(f"20newsgroups not found under {d}")
    from textdp.evaluation import build_evaluation_set

    return build_evaluation_set("20newsgroups", data_dir=d, **NG20_TINY)
