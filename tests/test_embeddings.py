"""Loaders, caching, restriction and error messages of textdp.embeddings."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from textdp.embeddings import Embeddings, load_embeddings
from textdp.errors import EmbeddingsError


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))


WORDS = ["the", "cat", "sat", "mat"]
VEC = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


def write_text(path, header=True):
    lines = [f"{len(WORDS)} 3"] if header else []
    lines += [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(WORDS, VEC)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("header", [True, False])
def test_text_format(tmp_path, header):
    p = tmp_path / "vec.txt"
    write_text(p, header)
    emb = load_embeddings(p)
    assert emb.words == tuple(WORDS) and emb.dim == 3
    np.testing.assert_allclose(emb.vectors, VEC, rtol=1e-6)
    again = load_embeddings(p)  # served from the cache, memory-mapped
    assert isinstance(again.vectors, np.memmap) or again.vectors.base is not None
    np.testing.assert_array_equal(again.vectors, emb.vectors)


def test_word2vec_binary(tmp_path):
    p = tmp_path / "vec.bin"
    body = b"".join(w.encode() + b" " + struct.pack("<3f", *row) + b"\n" for w, row in zip(WORDS, VEC))
    p.write_bytes(b"4 3\n" + body)
    emb = load_embeddings(p)
    assert emb.words == tuple(WORDS)
    np.testing.assert_array_equal(emb.vectors, VEC)
    p.write_bytes(b"4 3\n" + body[:-10])
    with pytest.raises(EmbeddingsError, match="truncated|inconsistent"):
        load_embeddings(p, name="x")


def test_npy_with_words(tmp_path):
    np.save(tmp_path / "m.npy", np.asfortranarray(VEC.astype(np.float64)))
    (tmp_path / "m.words.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    emb = load_embeddings(tmp_path / "m.npy")
    assert emb.vectors.dtype == np.float32 and emb.vectors.flags.c_contiguous
    np.testing.assert_allclose(emb.vectors, VEC)
    (tmp_path / "m.words.txt").write_text("\n".join(WORDS[:3]) + "\n", encoding="utf-8")
    with pytest.raises(EmbeddingsError, match="4 vectors but"):
        load_embeddings(tmp_path / "m.npy")


def test_inconsistent_dimensions(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("a 1 2 3\nb 1 2\n", encoding="utf-8")
    with pytest.raises(EmbeddingsError, match=r"bad.txt:2: vector has 2 values, expected 3"):
        load_embeddings(p)


def test_missing_and_non_utf8(tmp_path):
    with pytest.raises(EmbeddingsError, match="not found"):
        load_embeddings(tmp_path / "nope.txt")
    p = tmp_path / "latin.txt"
    p.write_bytes(b"caf\xe9 1 2\n")
    with pytest.raises(EmbeddingsError, match="UTF-8"):
        load_embeddings(p)


def test_immutable_and_restrict():
    emb = Embeddings(WORDS, VEC, name="toy")
    with pytest.raises(ValueError):
        emb.vectors[0, 0] = 1.0
    with pytest.raises(AttributeError):
        emb.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        emb.index["dog"] = 1  # type: ignore[index]
    small = emb.restrict(top_k=3, words=["mat", "cat", "the"])
    assert small.words == ("the", "cat") and small.vocab_size == 2
    with pytest.raises(EmbeddingsError):
        Embeddings(WORDS, VEC[:3])


def test_default_glove(glove):
    assert glove.vocab_size == 400000 and glove.dim == 50
    assert glove.words[:3] == ("the", ",", ".")
    assert glove.vectors.flags.c_contiguous and glove.vectors.dtype == np.float32
    top = load_embeddings(vocab_size=30000)
    assert top.vocab_size == 30000
    np.testing.assert_array_equal(top.vectors[123], glove.vectors[123])
