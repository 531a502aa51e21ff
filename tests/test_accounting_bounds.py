"""Privacy loss, multiplier formatting and the utility bound of Theorem 4.2."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from textdp.accounting import (
    document_guarantee,
    format_multiplier,
    log10_multiplier,
    multiplier,
    privacy_loss,
    sum_of_norms_probability,
    theorem_4_2,
    theorem_a2,
    utility_bound,
    utility_radius,
)
from textdp.embeddings import Embeddings
from textdp.errors import DocumentError, ParameterError
from textdp.mechanisms import noisy_vectors


def series_value(n: int, x: float) -> float:
    """1 - exp(-x) e_{n-1}(x) by the direct series (stable only for moderate x)."""
    term, total = 1.0, 1.0
    for k in range(1, n):
        term *= x / k
        total += term
    return 1.0 - math.exp(-x) * total


@pytest.mark.parametrize("n", [1, 2, 5, 30, 50])
def test_bound_matches_series_where_stable(n):
    for x in [0.01, 0.5, 1.0, 3.0, 10.0, 25.0, 60.0]:
        ref = series_value(n, x)
        if abs(ref) < 1e-6:  # 1 - (...) cancels; use the complementary series e^-x sum_{k>=n} x^k/k!
            tail = sum(math.exp(-x + k * math.log(x) - math.lgamma(k + 1)) for k in range(n, n + 400))
            assert theorem_4_2(x, 1, n, 1.0) == pytest.approx(tail, rel=1e-9)
        else:
            assert theorem_4_2(x, 1, n, 1.0) == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_bound_stable_where_series_overflows():
    with pytest.raises(OverflowError):
        math.exp(1000.0)
    for x in [1.0, 100.0, 299.0, 300.0, 1000.0, 1e6]:
        v = theorem_4_2(x, 1, 300, 1.0)
        assert 0.0 <= v <= 1.0 and math.isfinite(v)
    assert theorem_4_2(1000.0, 1, 300, 1.0) == 1.0
    assert theorem_4_2(300.0, 1, 300, 1.0) == pytest.approx(0.5, abs=0.02)
    # monotone in Delta
    vals = [theorem_4_2(1.0, 10, 300, d) for d in np.linspace(0, 100, 50)]
    assert all(a <= b for a, b in itertools.pairwise(vals))


def test_validity_condition_and_its_consequences():
    u = utility_bound(epsilon=10.0, size=20, dim=300, delta=300 / (math.e * 200))
    assert u.valid and "<=" in u.condition
    assert u.theorem_4_2 < 1e-40  # inside the condition the statement is nearly empty
    assert u.theorem_a2 == 0.0  # Theorem A2 is vacuous there
    assert not utility_bound(epsilon=10.0, size=20, dim=300, delta=1.0).valid
    # N = 1: Theorem 4.2 is exact; N >= 2: the exact sum-of-norms probability is smaller
    assert theorem_4_2(2.0, 1, 50, 20.0) == sum_of_norms_probability(2.0, 1, 50, 20.0)
    assert sum_of_norms_probability(2.0, 5, 50, 4.0) < theorem_4_2(2.0, 5, 50, 4.0)
    json.dumps(u.to_dict(), allow_nan=False)


def _mc_emd(bag: np.ndarray, eps: float, draws: int, rng: np.random.Generator) -> np.ndarray:
    """E_d(b, Z) for Algorithm 1's noisy bags Z, exact (all permutations), vectorised."""
    n_words = bag.shape[0]
    z = noisy_vectors(np.tile(np.arange(n_words), (draws, 1)), bag, eps, rng)  # (draws, N, d)
    dist = np.linalg.norm(bag[None, :, None, :] - z[:, None, :, :], axis=-1)  # (draws, N, N)
    best = np.full(draws, np.inf)
    for perm in itertools.permutations(range(n_words)):
        best = np.minimum(best, dist[:, np.arange(n_words), list(perm)].sum(axis=1))
    return best / n_words


@pytest.mark.parametrize("n_words,dim", [(1, 3), (3, 3), (3, 8)])
def test_monte_carlo_respects_the_bound(rng, n_words, dim):
    eps, draws = 2.0, 20000
    bag = rng.normal(size=(n_words, dim)) * 3
    emd = _mc_emd(bag, eps, draws, rng)
    for p in [0.05, 0.3, 0.6, 0.9]:
        delta = utility_radius(eps, n_words, dim, p)
        observed = float(np.mean(emd <= delta))
        se = math.sqrt(p * (1 - p) / draws)
        assert observed >= sum_of_norms_probability(eps, n_words, dim, delta) - 4 * se
        if n_words == 1:  # Theorem 4.2 is then exact
            assert observed == pytest.approx(theorem_4_2(eps, 1, dim, delta), abs=4 * se)


def test_theorem_4_2_is_not_a_lower_bound_for_repeated_words(rng):
    # A bag repeating one word: E_d(b, Z) is the mean noise length exactly, Gamma(N n)/(eps N).
    eps, dim, n_words, draws = 1.0, 3, 3, 20000
    bag = np.zeros((n_words, dim))
    emd = _mc_emd(bag, eps, draws, rng)
    delta = 2.0 / n_words * dim / eps  # x = 2n, well outside the validity condition
    observed = float(np.mean(emd <= delta))
    assert observed == pytest.approx(sum_of_norms_probability(eps, n_words, dim, delta), abs=0.015)
    assert observed < theorem_4_2(eps, n_words, dim, delta) - 0.2


def test_loss_and_multiplier():
    assert privacy_loss(10.0, 20, 0.01) == pytest.approx(2.0)
    assert multiplier(2.0) == pytest.approx(math.exp(2.0))
    assert multiplier(5000.0) is None
    assert log10_multiplier(5000.0) == pytest.approx(5000 / math.log(10))
    assert format_multiplier(5000.0) == "10^2171.5"
    assert theorem_a2(1.0, 2, 3, 100.0) > 0.99
    with pytest.raises(ParameterError):
        privacy_loss(0.0, 20, 0.1)
    with pytest.raises(ParameterError):
        privacy_loss(1.0, 20, -0.1)


def test_document_guarantee_uses_mechanism_preprocessing():
    emb = Embeddings(["cat", "dog", "car", "sun"], np.array([[0, 0], [0, 1], [3, 4], [9, 9]]), name="toy")
    g = document_guarantee("The dog, a zebra and the car!", "cat car sun", epsilon=1.0, size=2, embeddings=emb)
    assert (g.n_tokens_a, g.dropped_oov_a, g.words_a, g.size) == (3, 1, 2, 2)  # 'zebra' is OOV
    assert g.earth_movers_distance == pytest.approx(0.5)  # dog->cat 1, car->car 0
    assert g.privacy_loss == pytest.approx(1.0) and g.multiplier == pytest.approx(math.e)
    assert g.epsilon_for_unit_loss == pytest.approx(1.0)
    with pytest.raises(DocumentError, match="fewer than the bag size"):
        document_guarantee("dog", "cat", epsilon=1.0, size=2, embeddings=emb)
    # sample mode: the bound is between the word distributions, deterministic, any N
    s = document_guarantee("dog", "cat sun", epsilon=1.0, size=3, embeddings=emb, bag="sample")
    assert s.size == 3 and s.distance_name == "W_inf" and s.earth_movers_distance is None
    assert s.wasserstein_infinity == pytest.approx(np.hypot(9, 8))  # sun's mass must come from dog (9,9)-(0,1)
    assert s.privacy_loss == pytest.approx(3 * np.hypot(9, 8))
