"""Issue 19 item 5 (leftover): a model card's ``run_key`` confirms no guessed training corpus.

On the old code (b4f2b11 and up to the merge of the newcomer work) the card's ``run_key`` was
``sha256(json(settings, data fingerprint, vocabulary size))[:32]``: anyone holding the card and a
guessed training corpus could recompute it. Now it is an HMAC under the owner's secret key
(``textdp._cache.user_secret``, 0600 in the 0700 cache): the owner's rerun still recognises its
model, while the same data and settings under another user's cache do not reproduce it.
"""

from __future__ import annotations

import hashlib
import json
import stat

import pytest

torch = pytest.importorskip("torch")

from textdp import _cache
from textdp.errors import ParameterError
from textdp.generation.training import TrainingSettings, _data_fingerprint, _settings_key, train_rewriter
from textdp.generation.vocab import build_vocabulary, segment_text

TOY = " ".join(f"The {a} ran to the {p} and slept there." for a in ("cat", "dog", "fox", "cow")
               for p in ("garden", "river", "house", "field"))
TINY = {"vocab_size": 40, "encoder_hidden": 8, "latent": 8, "decoder_hidden": 16, "max_length": 12,
        "batch_size": 16, "epochs": 1}


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _unkeyed_run_key(segments, glove, settings):
    """What the card held before: a plain hash anyone with the data and settings can compute."""
    vocab = build_vocabulary(segments, glove.words, settings.vocab_size, source=settings.vocab_source)
    key = {"settings": _settings_key(settings), "data": _data_fingerprint([vocab.encode(x) for x in segments]),
           "vocabulary": len(vocab.tokens)}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def test_card_run_key_is_keyed_by_the_owner_secret(tmp_path, monkeypatch, glove):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "owner-cache"))
    segments = segment_text(TOY, 12)
    settings = TrainingSettings(seed=5, **TINY)
    out = tmp_path / "model"
    train_rewriter(segments, out, glove, settings, data_description="toy")
    card = json.loads((out / "card.json").read_text())
    # the data and the settings alone do not reproduce it (the old, unkeyed digest would)
    assert card["run_key"] != _unkeyed_run_key(segments, glove, settings)
    secret = tmp_path / "owner-cache" / "runs" / ".salt"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    # the owner's rerun recognises its model
    assert train_rewriter(segments, out, glove, settings, data_description="toy").already_trained
    # another user (another secret) with the same data and settings cannot confirm it
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "other-cache"))
    with pytest.raises(ParameterError, match="other settings or data"):
        train_rewriter(segments, out, glove, settings, data_description="toy")


def test_user_secret_is_made_once_and_a_damaged_one_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "c"))
    first = _cache.user_secret()
    assert _cache.user_secret() == first and len(first) == 32
    path = tmp_path / "c" / "runs" / ".salt"
    path.write_bytes(b"short")
    fresh = _cache.user_secret()
    assert len(fresh) == 32 and fresh != first and path.read_bytes() == fresh
    assert sorted(p.name for p in path.parent.iterdir()) == [".salt"]  # no temporary file left
    assert _cache.keyed_digest("a", b"x") != _cache.keyed_digest("b", b"x")


def test_cache_subfolders_are_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "c"))
    sub = _cache.cache_dir("embeddings/some-key", create=True)
    for p in (sub, sub.parent):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    (tmp_path / "c" / "open").mkdir(mode=0o777)
    (tmp_path / "c" / "open").chmod(0o777)
    with pytest.raises(ParameterError, match="writable by others"):
        _cache.cache_dir("open", create=True)
