"""Fast decoders agree with brute force: threads, known-source shortcut, faiss-exact, approximate."""

from __future__ import annotations

import numpy as np
import pytest

from textdp.embeddings import (
    ApproximateDecoder,
    ExactDecoder,
    FaissExactDecoder,
    make_decoder,
)
from textdp.errors import ParameterError


def brute(vectors, queries):
    v64 = np.asarray(vectors, dtype=np.float64)
    out = []
    for q in np.asarray(queries, dtype=np.float64):
        d = ((v64 - q) ** 2).sum(axis=1)
        out.append(int(np.flatnonzero(d == d.min())[0]))
    return np.array(out)


@pytest.fixture()
def vocab(rng):
    return rng.standard_normal((6000, 12)).astype(np.float32)


def test_threads_and_blocks_do_not_change_results(vocab, rng):
    q = rng.standard_normal((700, 12)) * 1.3
    ref = brute(vocab, q)
    for kw in ({"threads": 1}, {"threads": 2, "vocab_block": 500}, {"threads": 3, "vocab_block": 997, "query_block": 97}):
        np.testing.assert_array_equal(ExactDecoder(vocab, **kw).decode(q), ref)


@pytest.mark.parametrize("noise", [0.02, 0.3, 1.0, 3.0])
def test_known_source_is_exact(vocab, rng, noise):
    src = rng.integers(0, 6000, 600)
    q = vocab[src] + noise * rng.standard_normal((600, 12))
    dec = ExactDecoder(vocab, neighbours=32, vocab_block=1024)
    np.testing.assert_array_equal(dec.decode(q, sources=src), brute(vocab, q))
    if noise <= 0.3:
        assert dec.stats["known_source"] > 300  # the shortcut did the work
    # the same decoder again: the table is reused, results identical
    np.testing.assert_array_equal(dec.decode(q, sources=src), brute(vocab, q))


def test_known_source_with_duplicates_and_ties(rng):
    base = rng.standard_normal((200, 6)).astype(np.float32)
    vec = np.concatenate([base, base])  # row i and i + 200 are equal
    src = np.concatenate([np.arange(200), np.arange(200, 400)])
    q = vec[src] + 1e-4 * rng.standard_normal((400, 6))
    got = ExactDecoder(vec, neighbours=4).decode(q, sources=src)
    np.testing.assert_array_equal(got, brute(vec, q))
    assert got.max() < 200  # ties to the lowest row


def test_neighbour_lists_bound_is_rigorous(vocab):
    dec = ExactDecoder(vocab, vocab_block=700)
    rows = np.array([0, 5, 123, 5999])
    nb, _dist, bound = dec.neighbour_lists(rows, 16)
    v64 = vocab.astype(np.float64)
    for r, n, b in zip(rows, nb, bound):
        d = np.sqrt(((v64 - v64[r]) ** 2).sum(axis=1))
        outside = np.setdiff1d(np.arange(6000), n)
        assert d[outside].min() >= b
        assert set(np.argsort(d, kind="stable")[:10]) <= set(n.tolist())


def test_sources_validated(vocab):
    dec = ExactDecoder(vocab)
    with pytest.raises(ParameterError):
        dec.decode(vocab[:3], sources=[0, 1])
    with pytest.raises(ParameterError):
        dec.decode(vocab[:2], sources=[0, 6000])


def test_faiss_exact_identical(vocab, rng):
    q = np.concatenate([rng.standard_normal((400, 12)) * 1.3, vocab[:50] + 1e-6])
    dec = FaissExactDecoder(vocab)
    np.testing.assert_array_equal(dec.decode(q), brute(vocab, q))
    # near ties everywhere: the certificate fails and the numpy fallback decides
    angles = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32) * 100
    qc = rng.standard_normal((50, 2)) * 1e-5
    fc = FaissExactDecoder(circle)
    np.testing.assert_array_equal(fc.decode(qc), brute(circle, qc))
    assert fc.stats["fallback"] > 0


@pytest.mark.parametrize("method", ["hnsw", "ivf"])
def test_approximate_agrees_on_small_vocab(vocab, rng, method, tmp_path):
    src = rng.integers(0, 6000, 500)
    q = vocab[src] + 0.4 * rng.standard_normal((500, 12))
    dec = ApproximateDecoder(vocab, method=method, cache=tmp_path, ef_search=128, nprobe=32)
    got = dec.decode(q, sources=src)
    assert np.mean(got == brute(vocab, q)) > 0.97
    assert dec.exact is False and dec.name.startswith("approximate")
    # cached on disk: a second decoder loads the same index
    assert len(list(tmp_path.glob("*.faiss"))) == 1
    again = ApproximateDecoder(vocab, method=method, cache=tmp_path, ef_search=128, nprobe=32)
    np.testing.assert_array_equal(again.decode(q, sources=src), got)


def test_make_decoder_names(vocab):
    assert make_decoder("exact", vocab).name == "exact"
    assert make_decoder("faiss-exact", vocab).exact
    with pytest.raises(ParameterError, match="unknown decoder"):
        make_decoder("fast", vocab)


def test_mechanism_records_decoder(glove):
    from textdp.mechanisms import EarthMoversPrivacy

    text = "the stock market fell sharply as investors sold shares of technology companies"
    a = EarthMoversPrivacy(epsilon=10, size=5, embeddings=glove, vocab_size=30000, seed=1).privatize(text)
    b = EarthMoversPrivacy(epsilon=10, size=5, embeddings=glove, vocab_size=30000, seed=1,
                           decoder="faiss-exact").privatize(text)
    assert a.words == b.words  # exact decoders: identical releases
    decoders = [d.to_record()["guarantee"]["parameters"]["decoder"] for d in (a, b)]
    assert decoders == ["exact", "faiss-exact"]


@pytest.mark.parametrize("method", ["hnsw", "ivf"])
def test_approximate_output_is_a_function_of_the_noisy_vector_only(method):
    """Post-processing: the released row must not depend on the (private) source word."""
    from textdp.embeddings import ApproximateDecoder

    g = np.random.default_rng(5)
    vec = g.standard_normal((3000, 16)).astype(np.float32)
    src = g.integers(0, 3000, 400)
    q = vec[src] + 1.5 * g.standard_normal((400, 16))
    dec = ApproximateDecoder(vec, method=method, cache=False, ef_search=8, nprobe=1)
    plain = dec.decode(q)
    np.testing.assert_array_equal(dec.decode(q, sources=src), plain)
    np.testing.assert_array_equal(dec.decode(q, sources=(src + 1) % 3000), plain)
