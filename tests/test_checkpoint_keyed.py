"""An early-stopped ER-AE model's ``checkpoint.pt`` names neither the seed nor a plain hash of the data (issue 28 §3).

The checkpoint stays beside a usable model; before, it held the training seed in plain text and an
unkeyed SHA-256 of the tokenised training data (anyone holding the folder could confirm a guessed
corpus). Now the seed is sealed and the fingerprint keyed with the per-user secret: resuming works
for the owner and is refused under another secret.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from textdp.errors import ParameterError
from textdp.generation.training import TrainingSettings, _training_data, train_rewriter
from textdp.generation.vocab import segment_text

# our own toy sentences (no corpus text in the repository)
TEXT = " ".join(f"The {a} {v} the {o} near the river." for a in ("cat", "dog", "fox", "owl") for v in
                ("saw", "chased", "found") for o in ("ball", "stick", "boat"))
TINY = {"vocab_size": 40, "encoder_hidden": 8, "latent": 8, "decoder_hidden": 8, "max_length": 12, "batch_size": 8,
        "epochs": 2}
SEED = 918273645


def _values(obj):
    """Every non-tensor leaf of a checkpoint state."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _values(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _values(v)
    elif not isinstance(obj, torch.Tensor):
        yield obj


def test_early_stopped_checkpoint_holds_no_plain_seed_or_data_hash_and_resumes_for_its_owner(
        tmp_path, glove, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "owner"))
    torch.set_num_threads(1)
    segments = segment_text(TEXT, 12)
    settings = TrainingSettings(seed=SEED, **TINY)
    out = tmp_path / "m"
    res = train_rewriter(segments, out, glove, settings, data_description="toy", max_steps=2)
    assert res.stopped_early and (out / "checkpoint.pt").exists() and (out / "model.pt").exists()
    plain_data_hash = _training_data(segments, glove, settings)[2]["data"]
    raw = (out / "checkpoint.pt").read_bytes()
    leaves = [str(v) for v in _values(torch.load(out / "checkpoint.pt", weights_only=True))]
    assert str(SEED) not in raw.decode("latin-1") and not any(str(SEED) in v for v in leaves)
    assert plain_data_hash not in raw.decode("latin-1") and plain_data_hash not in leaves
    assert "seed" not in leaves and "entropy" not in leaves  # the plain fields are gone
    # another user's secret cannot resume it (the keyed fingerprint does not match)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "someone-else"))
    with pytest.raises(ParameterError, match="with other settings or data"):
        train_rewriter(segments, out, glove, settings, data_description="toy")
    # the owner resumes to the same model as an uninterrupted run
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "owner"))
    done = train_rewriter(segments, out, glove, settings, data_description="toy")
    assert done.resumed_from_step == 2 and not (out / "checkpoint.pt").exists()
    whole = tmp_path / "whole"
    train_rewriter(segments, whole, glove, settings, data_description="toy")
    a = torch.load(out / "model.pt", weights_only=True)
    b = torch.load(whole / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
