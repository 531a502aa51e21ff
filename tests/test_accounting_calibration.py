"""Calibration: survival thresholds, the epsilon for a target unchanged fraction, neighbour ranks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from textdp.accounting import (
    calibrate_epsilon,
    calibration_words,
    diagnose,
    neighbour_ranks,
    report_fields,
    survival_curve,
    survival_thresholds,
    wilson_interval,
)
from textdp.embeddings import Embeddings, ExactDecoder
from textdp.errors import ParameterError
from textdp.mechanisms import EarthMoversPrivacy, laplace_noise, privatize_ids

# Independent reference (shared/reference/README.md): GloVe 6B 50d, full vocabulary, exact decoding,
# 300 distinct non-stop-words of frequency rank 1,000-6,000.
REFERENCE_KEPT = {4: 0.05, 7: 0.35, 10: 0.74, 20: 0.997, 40: 1.00}


@pytest.fixture(scope="module")
def toy():
    g = np.random.default_rng(5)
    names = ["w" + "".join(chr(97 + int(c)) for c in str(i)) for i in range(3000)]  # letters only
    return Embeddings(names, g.normal(size=(3000, 8)), name="toy8")


def test_thresholds_agree_with_decoding(toy, rng):
    rows = rng.integers(0, toy.vocab_size, size=400)
    base = laplace_noise(rows.size, toy.dim, 1.0, rng)
    thr = survival_thresholds(rows, toy.vectors, base)
    dec = ExactDecoder(toy.vectors)
    for eps in [0.5, 1.0, 2.0, 5.0, 20.0]:
        kept = dec.decode(toy.vectors[rows] + base / eps) == rows
        assert np.array_equal(kept, thr < eps)


def test_duplicate_vector_never_kept():
    vec = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [5.0, 0.0]])
    base = np.array([[0.1, 0.0], [0.1, 0.0], [0.1, 0.0]])
    thr = survival_thresholds(np.array([1, 2, 3]), vec, base)
    assert thr[1] == np.inf and thr[0] < 1 and thr[2] == 0.0


def test_curve_is_monotone_and_inverse_consistent(toy):
    curve = survival_curve(toy, words=np.arange(100, 300), repeats=5, seed=3)
    grid = np.geomspace(0.1, 100, 60)
    f = [curve.unchanged_fraction(e) for e in grid]
    assert all(a <= b for a, b in itertools.pairwise(f))
    for target in [0.2, 0.5, 0.9]:
        eps = curve.epsilon_for(target)
        assert curve.unchanged_fraction(eps) == pytest.approx(target, abs=0.01)
        lo, hi = curve.epsilon_interval(target, seed=0)
        assert lo <= eps <= hi


def test_calibrated_epsilon_reproduces_target_with_mechanism(glove, rng):
    emb = glove.restrict(top_k=50000)
    target = 0.5
    cal, curve = calibrate_epsilon(target, emb, n_words=150, repeats=4, seed=rng)
    assert cal.epsilon_low <= cal.epsilon <= cal.epsilon_high
    lo, hi = curve.interval(cal.epsilon, seed=rng)
    # run the mechanism itself (Algorithms 1 + 2), fresh noise, on bags of the same words; the
    # unchanged fraction is the multiset overlap of output and input bag (as in the reference)
    bags = np.tile(curve.words, (4, 1))
    out = privatize_ids(bags, emb.vectors, cal.epsilon, rng)
    kept = np.mean([np.isin(np.unique(o), b).sum() / b.size for o, b in zip(out, bags)])
    se_run = math.sqrt(target * (1 - target) / bags.size)
    assert lo - 2 * se_run <= kept <= hi + 2 * se_run


@pytest.mark.parametrize("eps", [7, 10])
def test_reference_kept_fraction_quick(glove, eps):
    curve = survival_curve(glove, n_words=150, repeats=1, seed=eps)
    lo, hi = curve.interval(eps, seed=0)
    assert lo - 0.03 <= REFERENCE_KEPT[eps] <= hi + 0.03


@pytest.mark.slow
def test_reference_kept_fractions_full(glove):
    curve = survival_curve(glove, n_words=300, repeats=5, seed=11)
    for eps, ref in REFERENCE_KEPT.items():
        lo, hi = curve.interval(eps, seed=0)
        assert lo - 0.02 <= ref <= hi + 0.02, (eps, ref, lo, hi)
    rows = diagnose(curve, [10.0], glove)
    assert rows[0].threshold_agreement == 1.0


def test_diagnose_table(toy):
    curve = survival_curve(toy, words=np.arange(50), repeats=4, seed=1)
    rows = diagnose(curve, [1.0, 3.0, 30.0], toy, seed=0)
    assert [r.epsilon for r in rows] == [1.0, 3.0, 30.0]
    for r in rows:
        assert r.threshold_agreement == 1.0
        assert r.unchanged_fraction == pytest.approx(curve.unchanged_fraction(r.epsilon))
        assert r.unchanged_low <= r.unchanged_fraction <= r.unchanged_high
    assert rows[0].mean_neighbour_rank > rows[1].mean_neighbour_rank > rows[2].mean_neighbour_rank
    with pytest.raises(ParameterError, match="computed on"):
        diagnose(curve, [1.0], toy.restrict(top_k=10))


def test_neighbour_ranks_exact(toy, rng):
    inputs = rng.integers(0, toy.vocab_size, size=40)
    outputs = rng.integers(0, toy.vocab_size, size=40)
    outputs[:5] = inputs[:5]
    got = neighbour_ranks(inputs, outputs, toy.vectors, block=7)
    vec = toy.vectors.astype(np.float64)
    for i, o, r in zip(inputs, outputs, got):
        d = np.linalg.norm(vec - vec[i], axis=1)
        order = np.lexsort((np.arange(d.size), d))  # by distance, ties by row
        assert r == int(np.flatnonzero(order == o)[0])
    assert np.all(got[:5] == 0)


def test_calibration_words_default_rule(glove):
    rows = calibration_words(glove, 300, seed=0)
    words = [glove.words[r] for r in rows]
    assert len(set(words)) == 300 and rows.min() >= 999 and rows.max() <= 5999
    assert all(w.isalpha() and len(w) > 1 for w in words)
    with pytest.raises(ParameterError, match="eligible"):
        calibration_words(glove, 10, ranks=(1, 5))


def test_unreachable_targets(toy):
    curve = survival_curve(toy, words=np.arange(20), repeats=2, seed=0)
    with pytest.raises(ParameterError):
        curve.epsilon_for(1.0)
    with pytest.raises(ParameterError):
        calibrate_epsilon(0.0, toy, curve=curve)


def test_wilson():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and 0.2 < hi < 0.35


def test_report_fields(toy):
    mech = EarthMoversPrivacy(epsilon=3.0, size=30, embeddings=toy, stop_words=None, seed=0)
    text = " ".join(toy.words[i] for i in range(5, 35))
    diags: list = []
    doc = mech.privatize(text, private_report=diags)
    rep = report_fields(diags[0], toy)
    assert set(rep) == {"n_tokens", "dropped_oov", "n_in_vocabulary", "unchanged_fraction", "mean_neighbour_rank"}
    kept = sum(min(doc.words.count(w), [toy.words[i] for i in diags[0].input_rows].count(w)) for w in set(doc.words))
    assert rep["unchanged_fraction"] == diags[0].unchanged_fraction() == kept / 30
    assert rep["mean_neighbour_rank"] >= 0 and rep["n_tokens"] == 30 and rep["dropped_oov"] == 0
    high: list = []
    EarthMoversPrivacy(epsilon=1e6, size=30, embeddings=toy, stop_words=None, seed=0).privatize(text, private_report=high)
    rep = report_fields(high[0], toy)
    assert (rep["unchanged_fraction"], rep["mean_neighbour_rank"]) == (1.0, 0.0)
