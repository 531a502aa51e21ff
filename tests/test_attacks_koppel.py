"""Koppel et al. (2011) attacker: planted signal, and both variants against a slow reference."""

from __future__ import annotations

from collections import Counter
from math import sqrt

import numpy as np

from textdp._rng import make_rng


def _vector(s: str, n: int) -> dict[str, int]:
    vec: dict[str, int] = {}
    for word in s.split():
        if len(word) <= n:
            vec[word] = vec.get(word, 0) + 1
        else:
            for i in range(len(word) - n + 1):
                vec[word[i : i + n]] = vec.get(word[i : i + n], 0) + 1
    return vec


def _minmax(v1: dict[str, int], v2: dict[str, int]) -> float:
    minsum = maxsum = 0
    for g in v1:
        if g in v2:
            minsum += min(v1[g], v2[g])
            maxsum += max(v1[g], v2[g])
        else:
            maxsum += v1[g]
    for g in v2:
        if g not in v1:
            maxsum += v2[g]
    return 0.0 if maxsum == 0 else float(minsum) / maxsum


def _cos(v1: dict[str, int], v2: dict[str, int]) -> float:
    l1 = sqrt(sum(x * x for x in v1.values()))
    l2 = sqrt(sum(x * x for x in v2.values()))
    sp = float(sum(v1[g] * v2[g] for g in v1 if g in v2))
    return 0.0 if l1 * l2 == 0 else sp / (l1 * l2)


def reference_koppel(known, unknown, *, variant="pan", n=4, n_features=20000, trials=100, rng=0):
    """Return (predicted candidate indices, wins) the slow way."""
    joined = variant == "pan"
    frac = 0.5 if joined else 0.4
    sim = _minmax if joined else _cos
    gen = make_rng(rng)  # the library's generator for this seed (AES-CTR keyed from it)
    counts: Counter[str] = Counter()
    for t in known:
        for g, c in _vector(" ".join(t), n).items():
            counts[g] += c
    # first-occurrence order for ties: rebuild in text order
    order: dict[str, int] = {}
    for t in known:
        for w in t:
            for g in ([w] if len(w) <= n else [w[i : i + n] for i in range(len(w) - n + 1)]):
                order.setdefault(g, len(order))
    fl = sorted(order, key=lambda g: counts[g], reverse=True)[:n_features]
    F = len(fl)
    k = max(1, int(F * frac))
    minwords = min(len(t) for t in known)
    join = "".join if joined else " ".join
    lengths = [min(len(u), minwords) for u in unknown]
    wins = np.zeros((len(unknown), len(known)), dtype=np.int64)
    for L in sorted(set(lengths)):
        keys = gen.random((trials, F))
        highs = np.array([len(t) - L for t in known])
        starts = gen.integers(0, highs + 1, size=(trials, len(known)))
        for ui, u in enumerate(unknown):
            if lengths[ui] != L:
                continue
            ustring = join(u[:L])
            for t in range(trials):
                rfl = {fl[i] for i in np.argsort(keys[t], kind="stable")[:k]}
                fu = {g: c for g, c in _vector(ustring, n).items() if g in rfl}
                sims = []
                for c, kt in enumerate(known):
                    s = int(starts[t, c])
                    fk = {g: x for g, x in _vector(join(kt[s : s + L]), n).items() if g in rfl}
                    sims.append(sim(fk, fu))
                wins[ui, sims.index(max(sims))] += 1
    return wins.argmax(axis=1), wins


import pytest

from textdp.attacks import KoppelAttacker, token_grams
from textdp.errors import ParameterError


def _random_tokens(rs: np.random.Generator, n: int, alphabet: str = "abcdef") -> list[str]:
    return ["".join(rs.choice(list(alphabet), size=int(rs.integers(1, 8)))) for _ in range(n)]


@pytest.mark.parametrize("variant", ["pan", "koppel2011"])
def test_matches_slow_reference(variant: str) -> None:
    rs = np.random.default_rng(5)
    known = [_random_tokens(rs, int(rs.integers(30, 50))) for _ in range(5)]
    unknown = [_random_tokens(rs, n) for n in (25, 60, 3, 25, 40)]
    _, ref_wins = reference_koppel(known, unknown, variant=variant, n_features=90, trials=30, rng=11)
    att = KoppelAttacker(variant, n_features=90, trials=30, seed=11).fit(known, list("ABCDE"))
    res = att.attribute(unknown, chunk=7, block=2)
    np.testing.assert_array_equal(res.wins, ref_wins)
    assert res.wins.sum(axis=1).tolist() == [30] * 5
    np.testing.assert_allclose(res.scores, ref_wins.max(axis=1) / 30)


def _planted_corpus(rs: np.random.Generator, n_authors: int, n_words: int) -> list[list[str]]:
    common = ["market", "report", "people", "government", "today", "business", "company", "official"]
    texts = []
    for a in range(n_authors):
        marker = [f"zq{chr(97 + a)}{chr(97 + a)}x", f"vv{chr(97 + a)}wk"]  # author-specific grams
        words = [marker[int(rs.integers(2))] if rs.random() < 0.25 else common[int(rs.integers(len(common)))]
                 for _ in range(n_words)]
        texts.append(words)
    return texts


@pytest.mark.parametrize("variant", ["pan", "koppel2011"])
def test_finds_planted_authors(variant: str) -> None:
    rs = np.random.default_rng(0)
    known = _planted_corpus(rs, 8, 400)
    unknown = _planted_corpus(rs, 8, 120)
    labels = [f"author{i}" for i in range(8)]
    res = KoppelAttacker(variant, trials=50, seed=1).fit(known, labels).attribute(unknown)
    assert res.labels.tolist() == labels
    assert (res.scores > 0.5).all()


def test_seeded_and_reproducible() -> None:
    rs = np.random.default_rng(2)
    known = _planted_corpus(rs, 4, 200)
    unknown = [_random_tokens(rs, 50, "abcdefghij") for _ in range(3)]
    a = KoppelAttacker(trials=20, seed=3).fit(known, list("ABCD")).attribute(unknown).wins
    b = KoppelAttacker(trials=20, seed=3).fit(known, list("ABCD")).attribute(unknown).wins
    c = KoppelAttacker(trials=20, seed=0).fit(known, list("ABCD")).attribute(unknown, seed=3).wins
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_feature_list_and_strings() -> None:
    att = KoppelAttacker(n_features=3, trials=5, seed=0).fit(["aaaa bbbbb", "aaaa cc"], ["x", "y"])
    assert att.features_ == ("aaaa", "bbbb", "cc")
    assert token_grams("abcde", 3) == ["abc", "bcd", "cde"]
    assert att.predict(["aaaa"]).tolist()[0] in ("x", "y")


def test_errors() -> None:
    with pytest.raises(ParameterError, match="Koppel variant"):
        KoppelAttacker("nope")
    with pytest.raises(ParameterError, match="fit"):
        KoppelAttacker().attribute(["a b"])
    with pytest.raises(ParameterError, match="distinct"):
        KoppelAttacker().fit(["a b", "c d"], ["x", "x"])


def test_the_seed_has_one_name():
    """Nothing was released, so ``rng=`` is not kept as an old name of ``seed=``."""
    known = ["aaaa bbbbb cccc dddd", "aaaa cc ee ff gg"]
    with pytest.raises(TypeError, match="rng"):
        KoppelAttacker(n_features=3, trials=5, rng=0)  # type: ignore[call-arg]
    a = KoppelAttacker(n_features=3, trials=5, seed=0).fit(known, ["x", "y"]).attribute(["aaaa cc"]).wins
    b = KoppelAttacker(n_features=3, trials=5, seed=0).fit(known, ["x", "y"]).attribute(["aaaa cc"]).wins
    assert np.array_equal(a, b)
