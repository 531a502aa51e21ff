"""Earth Mover's distance: assignment (Lemma A1) against the transport LP, metric axioms."""

from __future__ import annotations

import numpy as np
import pytest

from textdp.accounting import bag_distance, earth_movers_distance, ground_distances, optimal_matching
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
