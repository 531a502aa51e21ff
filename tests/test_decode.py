"""Exact nearest-word decoding equals brute force; ties are deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from textdp.embeddings import ExactDecoder, nearest_words
from textdp.errors import EmbeddingsError


def brute(vectors, queries):
    """The naive reference: one float64 distance pass over the vocabulary per query."""
    v64 = np.asarray(vectors, dtype=np.float64)
    return np.array([np.argmin(((v64 - q) ** 2).sum(axis=1)) for q in np.asarray(queries, dtype=np.float64)])


@pytest.mark.parametrize("v,d", [(1, 3), (50, 5), (3000, 50), (20000, 16)])
def test_matches_brute_force(v, d, rng):
    vec = rng.standard_normal((v, d)).astype(np.float32) * 3
    q = rng.standard_normal((300, d)) * 3
    dec = ExactDecoder(vec, query_block=64, vocab_block=1024)
    np.testing.assert_array_equal(dec.decode(q), brute(vec, q))


def test_noisy_copies_of_vocab(rng):
    vec = rng.standard_normal((5000, 50)).astype(np.float32)
    src = rng.integers(0, 5000, 1000)
    q = vec[src] + 0.2 * rng.standard_normal((1000, 50))
    np.testing.assert_array_equal(ExactDecoder(vec, vocab_block=777).decode(q), brute(vec, q))


def test_ties_go_to_lowest_row(rng):
    base = rng.standard_normal((100, 8)).astype(np.float32)
    vec = np.concatenate([base, base, base])  # rows i, i+100, i+200 are identical
    q = base[[5, 42, 99]].astype(np.float64) + 1e-3
    for vb in (7, 100, 1000):
        assert ExactDecoder(vec, vocab_block=vb).decode(q).tolist() == [5, 42, 99]
    # equidistant query between two distinct points -> the lower row
    two = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    assert nearest_words(two, np.array([[0.0, 5.0]])).tolist() == [0]


def test_near_ties_resolved_exactly(rng):
    # points on a circle, queries at the centre perturbed by less than float32 resolution
    angles = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    vec = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32) * 100
    q = rng.standard_normal((200, 2)) * 1e-5
    np.testing.assert_array_equal(ExactDecoder(vec).decode(q), brute(vec, q))


def test_dimension_mismatch():
    dec = ExactDecoder(np.eye(3))
    with pytest.raises(EmbeddingsError, match="expected"):
        dec.decode(np.zeros((2, 4)))
    with pytest.raises(EmbeddingsError, match="NaN"):
        dec.decode(np.full((1, 3), np.nan))


def test_real_glove_sample(glove, rng):
    sub = glove.vectors[:30000]
    q = sub[rng.integers(0, 30000, 200)] + 0.5 * rng.standard_normal((200, 50))
    np.testing.assert_array_equal(ExactDecoder(sub).decode(q), brute(sub, q))
