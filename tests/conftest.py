"""Shared fixtures: the real GloVe embeddings and the shared corpora (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest


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
