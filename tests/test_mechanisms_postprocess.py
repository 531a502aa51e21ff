"""Post-processing of the Laplace-based mechanisms (MBR decoding after Asghar et al.).

Post-processing keeps the guarantee only if the released word depends on the noisy
vector (and public data) alone. These tests prove it for the implementation: with
the noisy vector fixed, different source words give the same released word.
"""

from __future__ import annotations

import numpy as np
import pytest

from textdp._rng import make_rng
from textdp.mechanisms import CMP, MBRDecoder, Vickrey, get
from textdp.mechanisms.kernels import nearest_k


class FixedNoise:
    """Replace the noise step by a fixed noisy vector, whatever the source word."""

    def __init__(self, z: np.ndarray) -> None:
        self.z = z

    def __call__(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.repeat(self.z[None, :], np.asarray(ids).size, axis=0)


@pytest.fixture(scope="module")
def vocab(glove):
    return glove.restrict(top_k=30000)


@pytest.mark.parametrize("make", [
    lambda v: CMP(epsilon=4.0, embeddings=v, postprocess="mbr"),
    lambda v: CMP(epsilon=4.0, embeddings=v),
    lambda v: Vickrey(epsilon=4.0, t=0.6, embeddings=v),
])
def test_release_depends_only_on_the_noisy_vector(make, vocab):
    mech = make(vocab).fit()
    src_a, src_b = vocab.index["river"], vocab.index["banana"]
    rng = make_rng(9)
    zs = mech.noisy_vectors(np.array([src_a, src_b] * 4), rng)
    for z in zs:
        mech.noisy_vectors = FixedNoise(z)  # type: ignore[method-assign]
        out_a = mech.privatize_ids(np.array([src_a] * 3), rng=make_rng(1))
        out_b = mech.privatize_ids(np.array([src_b] * 3), rng=make_rng(1))
        np.testing.assert_array_equal(out_a, out_b)
    # the decoder ignores any source it is offered (so it can be plugged where sources are passed)
    dec = MBRDecoder(vocab.vectors, epsilon=4.0, candidates=32)
    z = zs[:6]
    np.testing.assert_array_equal(dec.decode(z, sources=np.full(6, src_a)), dec.decode(z, sources=np.full(6, src_b)))
    np.testing.assert_array_equal(dec.decode(z), dec.decode(z, sources=np.arange(6)))


def test_mbr_is_the_posterior_medoid(vocab):
    dec = MBRDecoder(vocab.vectors, epsilon=3.0, candidates=16)
    z = np.asarray(vocab.vectors[[500, 2000, 7000]], dtype=np.float64) + make_rng(3).normal(0, 1.0, (3, 50))
    rows, dist = nearest_k(z, vocab.vectors, 16)
    for i in range(3):
        w = np.exp(-3.0 * (dist[i] - dist[i].min()))
        w /= w.sum()
        e = np.asarray(vocab.vectors, dtype=np.float64)[rows[i]]
        risk = [(np.linalg.norm(e - e[j], axis=1) * w).sum() for j in range(16)]
        assert dec.decode(z[i : i + 1])[0] == rows[i][int(np.argmin(risk))]


def test_mbr_concentrated_posterior_is_nearest_neighbour(vocab):
    dec = MBRDecoder(vocab.vectors, epsilon=1e4, candidates=32)
    z = np.asarray(vocab.vectors[100:140], dtype=np.float64) + 1e-3
    np.testing.assert_array_equal(dec.decode(z), np.arange(100, 140))


def test_mbr_gives_semantic_neighbours(glove):
    """At epsilon 6 (GloVe 50d, 400k words) replacements are nearer neighbours of the input with MBR."""
    src = make_rng(5).integers(1000, 6000, 300)
    plain = get("cmp", epsilon=6.0, embeddings=glove, seed=21).fit()
    mbr = get("cmp", epsilon=6.0, embeddings=glove, seed=21, postprocess="mbr").fit()
    a, b = plain.privatize_ids(src), mbr.privatize_ids(src)  # same seed: the same noisy vectors
    top, _ = nearest_k(np.asarray(glove.vectors, dtype=np.float64)[src], glove.vectors, 101)

    def near(out: np.ndarray) -> float:
        changed = out != src
        return float(np.mean([o in t for o, t in zip(out[changed], top[changed])]))

    assert near(b) > near(a) + 0.03
    assert "post-processing" in mbr.guarantee().statement
    assert mbr.guarantee().to_dict()["parameters"]["postprocess"] == "mbr"
