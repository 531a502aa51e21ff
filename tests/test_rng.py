"""The one generator factory: AES-CTR (a CSPRNG) by default, seeds for experiments only."""

from __future__ import annotations

import pickle
import shutil
import subprocess

import numpy as np
import pytest
from scipy import stats

from textdp._rng import TextDPGenerator, describe_rng, is_seeded, make_rng, spawn
from textdp.errors import ParameterError, ParameterTypeError

# AES-128 of the counter blocks 0..4 (16-byte little-endian) under the key 0x000102...0f
# (bytes 0f 0e ... 00), computed independently with OpenSSL:
#   printf '%032x' $c | ... | openssl enc -aes-128-ecb -K 0f0e0d0c0b0a09080706050403020100 -nopad
_KEY = 0x000102030405060708090A0B0C0D0E0F
_AES_BLOCKS = [
    "e5311321918c386e63e98dff0afa770d",
    "b6771866b8d61bc9a848ddcbdabce7a7",
    "90e1f012e9696110dcfae175d5541996",
    "b7fa26a4e55f968f8ca99c8b0556835d",
    "b3343be738de81d2966cdb2bd86b803c",
]


def _aes_words(blocks: list[str]) -> list[int]:
    """The 64-bit outputs a counter-mode generator gives for these cipher blocks (little-endian)."""
    out = []
    for b in blocks:
        raw = bytes.fromhex(b)
        out += [int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")]
    return out


def _key_of(gen: np.random.Generator) -> int:
    seed = gen.bit_generator.state["s"]["seed"]
    return int(seed[0]) | (int(seed[1]) << 64)


@pytest.mark.parametrize("aesni", [True, False])
def test_bit_generator_is_aes128_counter_mode(aesni: bool) -> None:
    from randomgen import AESCounter

    bg = AESCounter(key=_KEY)
    if not aesni:
        bg.use_aesni = False  # the portable software AES gives the same stream
    assert [int(x) for x in bg.random_raw(10)] == _aes_words(_AES_BLOCKS)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_default_generator_is_aes_ctr_under_a_fresh_key() -> None:
    gen = make_rng()
    key = _key_of(gen)
    blocks = b"".join(i.to_bytes(16, "little") for i in range(4))
    ct = subprocess.run(
        ["openssl", "enc", "-aes-128-ecb", "-nopad", "-K", key.to_bytes(16, "little").hex()],
        input=blocks, capture_output=True, check=True,
    ).stdout
    assert [int(x) for x in gen.bit_generator.random_raw(8)] == _aes_words([ct[i : i + 16].hex() for i in range(0, 64, 16)])


def test_default_is_the_csprng_and_unseeded() -> None:
    gen = make_rng()
    assert isinstance(gen, TextDPGenerator)
    assert type(gen.bit_generator).__name__ == "AESCounter"
    assert describe_rng(gen) == {"seeded": False, "bit_generator": "AESCounter", "csprng": True}
    assert describe_rng(None) == describe_rng(gen)
    assert not is_seeded(gen) and not is_seeded(None)


def test_two_default_generators_differ() -> None:
    a, b = make_rng(), make_rng()
    assert _key_of(a) != _key_of(b)
    assert not np.array_equal(a.random(8), b.random(8))
    c, d = spawn(None, 2)
    assert not np.array_equal(c.random(8), d.random(8))
    assert not any(is_seeded(g) for g in (a, b, c, d))


def test_seeded_generators_reproduce_and_are_aes_keyed_from_the_seed() -> None:
    from randomgen import AESCounter

    a, b = make_rng(42), make_rng(np.random.SeedSequence(42))
    assert np.array_equal(a.standard_normal(50), b.standard_normal(50))
    assert not np.array_equal(make_rng(42).random(5), make_rng(43).random(5))
    lo, hi = np.random.SeedSequence(42).generate_state(2, np.uint64)
    ref = np.random.Generator(AESCounter(key=int(lo) | (int(hi) << 64)))
    assert np.array_equal(make_rng(42).gamma(3.0, size=20), ref.gamma(3.0, size=20))
    assert is_seeded(42) and is_seeded(make_rng(42))
    assert describe_rng(42) == {"seeded": True, "bit_generator": "AESCounter", "csprng": True}


def test_describe_never_holds_the_seed_or_state() -> None:
    d = describe_rng(make_rng(987654321))
    assert set(d) == {"seeded", "bit_generator", "csprng"}
    assert "987654321" not in repr(d)


def test_foreign_generator_is_used_as_given_and_not_vouched_for() -> None:
    g = np.random.Generator(np.random.PCG64(1))
    assert make_rng(g) is g
    assert describe_rng(g) == {"seeded": True, "bit_generator": "PCG64", "csprng": False}


def test_spawn_children_depend_only_on_seed_and_index() -> None:
    few, many = spawn(7, 3), spawn(7, 9)
    # scheduling: draw from the children in a different order, the per-child streams are the same
    first = {i: few[i].random(16) for i in (0, 1, 2)}
    second = {i: many[i].random(16) for i in (2, 0, 1)}
    for i in range(3):
        assert np.array_equal(first[i], second[i])
    # same as the documented SeedSequence(seed).spawn(n)[i], and a SeedSequence seed is not consumed
    seq = np.random.SeedSequence(7)
    assert np.array_equal(make_rng(seq.spawn(3)[1]).random(4), spawn(7, 3)[1].random(4))
    assert np.array_equal(spawn(seq, 2)[0].random(4), spawn(seq, 2)[0].random(4))
    assert all(is_seeded(g) for g in many)


def test_spawn_children_are_independent() -> None:
    kids = spawn(11, 6)
    u = np.stack([k.random(20000) for k in kids])
    assert len({_key_of(k) for k in kids}) == 6
    corr = np.asarray(np.corrcoef(u))[np.triu_indices(6, 1)]
    # |r| of independent uniforms has sd 1/sqrt(20000) = 0.007; 0.035 is 5 sd
    assert np.abs(corr).max() < 0.035
    assert not np.array_equal(spawn(11, 1)[0].random(4), spawn(12, 1)[0].random(4))


def test_spawn_from_a_generator() -> None:
    a = spawn(make_rng(5), 3)
    b = spawn(make_rng(5), 3)
    assert np.array_equal(a[2].random(4), b[2].random(4))
    assert all(is_seeded(g) for g in a)
    assert not any(is_seeded(g) for g in spawn(make_rng(), 2))
    assert spawn(3, 0) == []


def test_numpy_generator_spawn_keeps_the_flag() -> None:
    a, b = make_rng(8).spawn(2), make_rng(8).spawn(2)
    assert all(isinstance(g, TextDPGenerator) and g.seeded for g in a)
    assert np.array_equal(a[1].random(4), b[1].random(4))
    c = make_rng().spawn(2)
    assert not any(is_seeded(g) for g in c) and _key_of(c[0]) != _key_of(c[1])


def test_pickle_keeps_stream_and_flag() -> None:
    g = make_rng()
    g.random(3)
    h = pickle.loads(pickle.dumps(g))
    assert isinstance(h, TextDPGenerator) and h.seeded is False
    assert np.array_equal(g.random(5), h.random(5))


@pytest.mark.parametrize("bad", [-1, True, 1.5, "7", [1]])
def test_bad_seeds_are_refused(bad: object) -> None:
    with pytest.raises((ParameterError, ParameterTypeError)):
        make_rng(bad)  # type: ignore[arg-type]
    with pytest.raises((ParameterError, ParameterTypeError)):
        spawn(bad, 2)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        spawn(1, -1)


def test_csprng_stream_has_the_right_laws() -> None:
    """KS tests of the default generator's uniforms, normals and gammas, and a wrong law rejected.

    Unseeded on purpose (it tests the default stream): each correct law fails by chance with
    probability 1e-5, the wrong laws pass with probability far below 1e-9.
    """
    gen = make_rng()
    n = 200_000
    u = gen.random(n)
    assert stats.kstest(u, "uniform").pvalue > 1e-5
    # a deliberately wrong law: the same stream read as U(0, 1.02) must be rejected
    assert stats.kstest(u, stats.uniform(0, 1.02).cdf).pvalue < 1e-9
    z = gen.standard_normal(n)
    assert stats.kstest(z, "norm").pvalue > 1e-5
    assert stats.kstest(z, stats.norm(0, 1.05).cdf).pvalue < 1e-9
    r = gen.gamma(50.0, 0.1, size=n // 4)  # the Laplace mechanism's radius law at n=50, eps=10
    assert stats.kstest(r, stats.gamma(50.0, scale=0.1).cdf).pvalue > 1e-5
    assert stats.kstest(r, stats.gamma(49.0, scale=0.1).cdf).pvalue < 1e-9
    # bytes: chi-square of the 256 byte values of the raw stream
    raw = gen.bit_generator.random_raw(n // 8).view(np.uint8)
    counts = np.bincount(raw, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-5
