"""Earth Mover's distance: assignment (Lemma A1) against the transport LP, metric axioms."""

from __future__ import annotations

import numpy as np
import pytest

from textdp.accounting import (
    bag_distance,
    earth_movers_distance,
    ground_distances,
    optimal_matching,
)
from textdp.errors import ParameterError


@pytest.mark.parametrize("size", [1, 2, 5, 9])
@pytest.mark.parametrize("metric", ["euclidean", "manhattan"])
def test_assignment_equals_lp_optimum(rng, size, metric):
    for _ in range(5):
        x = rng.normal(size=(size, 4))
        y = rng.normal(size=(size, 4))
        a = earth_movers_distance(x, y, metric=metric, method="assignment")
        lp = earth_movers_distance(x, y, metric=metric, method="linprog")
        pot = earth_movers_distance(x, y, metric=metric, method="pot")
        assert a == pytest.approx(lp, rel=1e-7, abs=1e-9)
        assert a == pytest.approx(pot, rel=1e-7, abs=1e-9)


def test_matching_total_is_n_times_emd(rng):
    x, y = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    _, _, cost = optimal_matching(x, y)
    assert cost.sum() == pytest.approx(7 * earth_movers_distance(x, y))


def test_metric_axioms(rng):
    for _ in range(30):
        n = int(rng.integers(1, 7))
        a, b, c = (rng.normal(size=(n, 5)) for _ in range(3))
        ab, ba = earth_movers_distance(a, b), earth_movers_distance(b, a)
        assert ab == pytest.approx(ba, abs=1e-12)
        assert earth_movers_distance(a, a) == 0.0
        assert earth_movers_distance(a, a[::-1]) == pytest.approx(0.0, abs=1e-12)
        assert ab <= earth_movers_distance(a, c) + earth_movers_distance(c, b) + 1e-12
        # Lemma 2: Manhattan >= Euclidean point-wise, so E_manhattan >= E_euclidean
        assert earth_movers_distance(a, b, metric="manhattan") >= ab - 1e-12


def test_unequal_sizes_lp_and_pot_agree(rng):
    x, y = rng.normal(size=(3, 2)), rng.normal(size=(5, 2))
    assert earth_movers_distance(x, y, method="pot") == pytest.approx(earth_movers_distance(x, y, method="linprog"))
    # a bag against itself with repeated rows = the same distribution
    assert earth_movers_distance(x, np.repeat(x, 2, axis=0), method="linprog") == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ParameterError, match="equal-size"):
        earth_movers_distance(x, y, method="assignment")


def test_weights_equal_repetition(rng):
    x, y = rng.normal(size=(2, 3)), rng.normal(size=(3, 3))
    rep = earth_movers_distance(np.vstack([x[0], x[0], x[1]]), y)
    w = earth_movers_distance(x, y, x_weights=[2, 1])
    assert rep == pytest.approx(w)


def test_paper_example_shape():
    # Fig. 1: four words each moved to one word; E_d is the mean of the four distances
    vec = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.5], [1.0, 1.0], [0.5, 2.0], [3.0, 4.0]])
    assert bag_distance(np.arange(4), np.arange(4, 8), vec) == pytest.approx((0.5 + 1.0 + 0.5 + 1.0) / 4)


def test_errors():
    with pytest.raises(ParameterError, match="metric"):
        ground_distances([[0.0]], [[1.0]], "cosine")
    with pytest.raises(ParameterError, match="dimensions"):
        earth_movers_distance([[0.0, 1.0]], [[1.0]])
    with pytest.raises(ParameterError, match="NaN"):
        earth_movers_distance([[np.nan]], [[1.0]])


def _bottleneck_brute(d: np.ndarray) -> float:
    """Min over permutations of the max matched distance (equal sizes, uniform masses)."""
    from itertools import permutations

    n = d.shape[0]
    return min(max(d[i, p[i]] for i in range(n)) for p in permutations(range(n)))


def _winf_scan(d: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Smallest threshold with a feasible transport (linear scan, LP feasibility)."""
    from scipy.optimize import linprog

    for t in np.unique(d):
        ii, jj = np.nonzero(d <= t)
        a_eq = np.zeros((len(a) + len(b), ii.size))
        a_eq[ii, np.arange(ii.size)] = 1
        a_eq[len(a) + jj, np.arange(ii.size)] = 1
        res = linprog(np.zeros(ii.size), A_eq=a_eq, b_eq=np.concatenate([a / a.sum(), b / b.sum()]), method="highs")
        if res.status == 0:
            return float(t)
    raise AssertionError("unreachable")


def test_wasserstein_infinity_is_exact(rng):
    from textdp.accounting.emd import ground_distances, wasserstein_infinity

    above_lower_bound = 0
    for _ in range(30):  # equal-size uniform bags: the bottleneck assignment
        x, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
        d = ground_distances(x, y)
        w = wasserstein_infinity(x, y)
        assert w == _bottleneck_brute(d)
        # the naive answer (the largest nearest-neighbour distance) is only a lower bound
        above_lower_bound += w > max(d.min(axis=1).max(), d.min(axis=0).max())
    assert above_lower_bound > 0
    for _ in range(30):  # weighted (word counts, and real masses through the LP path)
        k, m = rng.integers(1, 7, size=2)
        x, y = rng.normal(size=(k, 2)), rng.normal(size=(m, 2))
        a, b = rng.integers(1, 6, size=k), rng.integers(1, 6, size=m)
        want = _winf_scan(ground_distances(x, y), a.astype(float), b.astype(float))
        assert wasserstein_infinity(x, y, x_weights=a, y_weights=b) == want
        assert wasserstein_infinity(x, y, x_weights=a + 0.5, y_weights=b) == _winf_scan(
            ground_distances(x, y), a + 0.5, b.astype(float))
        # W_inf bounds the Earth Mover's distance (W_1) from above
        w1 = earth_movers_distance(x, y, x_weights=a, y_weights=b)
        assert w1 <= wasserstein_infinity(x, y, x_weights=a, y_weights=b) + 1e-12
