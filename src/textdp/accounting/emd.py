"""Earth Mover's distance between bags of word vectors (Fernandes, Dras & McIver 2019, Def. 3).

For bags ``X`` (sizes ``|X|``) and ``Y`` each element carries mass ``1/|X|``
(resp. ``1/|Y|``) and ``E_d(X, Y)`` is the cheapest transport of one mass onto the
other under the ground metric ``d``. Hence ``E_d`` is *normalised*: it is a mean
distance per word, and for two bags of ``N`` words ``N * E_d`` is the total
distance of the best one-to-one matching.

Equal sizes. By Birkhoff-von Neumann (Lemma A1) an optimal flow is a
permutation matrix, so ``E_d`` is a linear assignment problem, solved exactly by
:func:`scipy.optimize.linear_sum_assignment` on the ``N x N`` matrix of pairwise
distances (Jonker-Volgenant, ``O(N^3)``).

Unequal sizes (or weighted bags). The general transport linear programme of
Def. 3, solved by POT's network simplex (``ot.emd2``, optional extra ``[ot]``)
when installed, otherwise by :func:`scipy.optimize.linprog` (HiGHS).

Ground metrics (Section 3.2): ``euclidean`` (the metric of Theorem 5.1) and
``manhattan``. Manhattan dominates Euclidean point-wise, so by Lemma 2 /
Corollary 1 an ``epsilon * N * E_euclidean`` guarantee also bounds the loss by
``epsilon * N * E_manhattan`` (a looser number).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment, linprog
from scipy.spatial.distance import cdist

from .._validation import check_choice
from ..errors import ParameterError, TextDPError

__all__ = [
    "METRICS",
    "EMD_METHODS",
    "ground_distances",
    "optimal_matching",
    "earth_movers_distance",
    "bag_distance",
]

METRICS = ("euclidean", "manhattan")
EMD_METHODS = ("auto", "assignment", "pot", "linprog")
_CDIST = {"euclidean": "euclidean", "manhattan": "cityblock"}


def _as_points(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ParameterError(f"{name} must be a non-empty (size, dim) array of vectors, got shape {np.shape(x)}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name} contains NaN or infinite values")
    return arr


def ground_distances(x: np.ndarray, y: np.ndarray, metric: str = "euclidean") -> np.ndarray:
    """Pairwise ground distances ``d(x_i, y_j)`` as a float64 ``(|X|, |Y|)`` matrix.

    >>> ground_distances([[0, 0], [1, 1]], [[3, 4]], "euclidean").tolist()
    [[5.0], [3.605551275463989]]
    >>> ground_distances([[0, 0]], [[3, 4]], "manhattan").tolist()
    [[7.0]]
    """
    check_choice(metric, "metric", METRICS)
    a = _as_points(x, "x")
    b = _as_points(y, "y")
    if a.shape[1] != b.shape[1]:
        raise ParameterError(f"bags have different vector dimensions ({a.shape[1]} and {b.shape[1]})")
    return cdist(a, b, metric=_CDIST[metric])


def optimal_matching(
    x: np.ndarray, y: np.ndarray, metric: str = "euclidean"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best one-to-one matching of two equal-size bags (Lemma A1).

    Returns ``(rows, cols, costs)``: ``x[rows[k]]`` is matched to ``y[cols[k]]`` at
    ground distance ``costs[k]``; ``costs.sum() / N`` is ``E_d(x, y)``.

    >>> r, c, cost = optimal_matching([[0.0], [10.0]], [[9.0], [1.0]])
    >>> c.tolist(), cost.tolist()
    ([1, 0], [1.0, 1.0])
    """
    dist = ground_distances(x, y, metric)
    if dist.shape[0] != dist.shape[1]:
        raise ParameterError(
            f"a one-to-one matching needs bags of equal size, got {dist.shape[0]} and {dist.shape[1]}"
        )
    rows, cols = linear_sum_assignment(dist)
    return rows, cols, dist[rows, cols]


def _weights(w: object, n: int, name: str) -> np.ndarray:
    if w is None:
        return np.full(n, 1.0 / n)
    arr = np.asarray(w, dtype=np.float64)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.sum() <= 0:
        raise ParameterError(f"{name} must be {n} non-negative finite numbers with a positive sum")
    return arr / arr.sum()


def _emd_linprog(dist: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    k, m = dist.shape
    # flow F (k*m, row-major); row sums = a, column sums = b (Def. 3, eq. (2))
    rows = np.kron(np.eye(k), np.ones((1, m)))
    cols = np.kron(np.ones((1, k)), np.eye(m))
    a_eq = np.vstack([rows, cols])
    b_eq = np.concatenate([a, b])
    res = linprog(dist.ravel(), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status != 0:  # pragma: no cover - a transport LP with equal masses is always feasible
        raise TextDPError(f"the transport linear programme failed: {res.message}")
    return float(res.fun)


def _emd_pot(dist: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    from ..errors import require

    ot = require("ot", "ot")
    return float(ot.emd2(a, b, dist))  # type: ignore[attr-defined]


def earth_movers_distance(
    x: np.ndarray,
    y: np.ndarray,
    *,
    metric: str = "euclidean",
    x_weights: np.ndarray | None = None,
    y_weights: np.ndarray | None = None,
    method: str = "auto",
) -> float:
    """Earth Mover's distance ``E_d(X, Y)`` between two bags of vectors (Def. 3).

    Parameters
    ----------
    x, y : array_like
        ``(|X|, n)`` and ``(|Y|, n)`` vectors; a repeated word is a repeated row
        (or give its count in the weights).
    metric : {"euclidean", "manhattan"}
        Ground metric between vectors (Section 3.2).
    x_weights, y_weights : array_like, optional
        Masses of the rows (normalised to sum 1). Default: uniform, ``1/|X|``.
    method : {"auto", "assignment", "pot", "linprog"}
        ``auto``: the assignment problem (Lemma A1) for equal-size uniform bags,
        otherwise POT's exact solver if installed, else scipy's HiGHS LP.

    Returns
    -------
    float
        The mean transport distance per unit of mass; for equal sizes ``N``,
        ``N * E_d`` is the total distance of the best word-to-word matching.

    Examples
    --------
    >>> earth_movers_distance([[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 3.0]])
    1.5
    >>> round(earth_movers_distance([[0.0], [2.0]], [[1.0]], method="linprog"), 6)
    1.0
    """
    check_choice(method, "EMD method", EMD_METHODS)
    dist = ground_distances(x, y, metric)
    k, m = dist.shape
    uniform = x_weights is None and y_weights is None
    if method == "auto":
        if k == m and uniform:
            method = "assignment"
        else:
            try:
                import ot  # noqa: F401
            except ImportError:
                method = "linprog"
            else:
                method = "pot"
    if method == "assignment":
        if k != m or not uniform:
            raise ParameterError(
                f"method 'assignment' needs equal-size bags with uniform mass, got sizes {k} and {m}; "
                "use method 'auto'"
            )
        rows, cols = linear_sum_assignment(dist)
        return float(dist[rows, cols].sum() / k)
    a = _weights(x_weights, k, "x_weights")
    b = _weights(y_weights, m, "y_weights")
    if method == "pot":
        return max(_emd_pot(dist, a, b), 0.0)
    return max(_emd_linprog(dist, a, b), 0.0)


def bag_distance(
    ids_a: np.ndarray,
    ids_b: np.ndarray,
    vectors: np.ndarray,
    *,
    metric: str = "euclidean",
    method: str = "auto",
) -> float:
    """``E_d`` between two bags given as vocabulary rows of ``vectors``.

    >>> vec = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    >>> bag_distance(np.array([0, 1]), np.array([2, 1]), vec)
    0.5
    """
    a = np.asarray(ids_a, dtype=np.int64)
    b = np.asarray(ids_b, dtype=np.int64)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ParameterError("bags must be non-empty 1-D arrays of vocabulary rows")
    return earth_movers_distance(
        np.asarray(vectors[a], dtype=np.float64), np.asarray(vectors[b], dtype=np.float64), metric=metric, method=method
    )
