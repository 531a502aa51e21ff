"""The topics sensitivity cache is named by a keyed hash of the private corpus, not a plain one (issue 28 §3).

The file name ``sens-<key>.json`` sits in the cache folder; with a plain SHA-256 of the corpus
fingerprint and settings, anyone who sees the name and guesses the corpus can confirm the guess.
"""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("sklearn")

from textdp.topics import SklearnLDA, UserCorpus
from textdp.topics.sensitivity import CACHE_VERSION, SensitivitySampler

TEXTS = ["gas price power", "game team win", "gas power deal", "team coach win"]


def _sampler(cache):
    corpus = UserCorpus.from_texts(TEXTS, ["a", "b", "c", "d"], min_df=1, max_df=1.0)
    return SensitivitySampler(corpus=corpus, model=SklearnLDA(n_topics=2, max_iter=2), sizes=[(2, 2)],
                              cache_dir=cache)


def test_cache_name_is_keyed_by_the_user_secret_and_reused_by_its_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "owner"))
    s = _sampler(tmp_path / "sens")
    guess = json.dumps({"corpus": s.corpus.fingerprint, "model": s.model.settings(), "neighbours": s.neighbours,
                        "n_users": s.n_users, "sizes": s.sizes, "version": CACHE_VERSION}, sort_keys=True, default=str)
    assert s.cache_key() != hashlib.sha256(guess.encode()).hexdigest()[:32]  # what anyone could recompute
    s.draw(2, seed=1)
    assert s.cache_path is not None and s.cache_path.is_file()
    again = _sampler(tmp_path / "sens")
    owners = s.cache_key()
    assert again.cache_key() == owners and again.cached_samples() == 2  # the owner resumes from it
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "someone-else"))
    assert _sampler(tmp_path / "sens").cache_key() != owners
