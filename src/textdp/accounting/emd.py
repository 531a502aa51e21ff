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

Bottleneck distance. :func:`wasserstein_infinity` computes ``W_inf(p, q)``, the
smallest ``t`` such that some transport plan of ``p`` onto ``q`` moves mass only
between points at distance ``<= t``. It is exact: the answer is one of the
pairwise distances, found by binary search over the sorted distinct distances,
each threshold checked by a maximum flow (integer masses, e.g. word counts) or a
feasibility linear programme (real masses). It is the distance of the
``--bag sample`` guarantee (:class:`textdp.guarantees.EarthMoversGuarantee`).

Ground metrics (Section 3.2): ``euclidean`` (the metric of Theorem 5.1) and
``manhattan``. Manhattan dominates Euclidean point-wise, so by Lemma 2 /
Corollary 1 an ``epsilon * N * E_euclidean`` guarantee also bounds the loss by
``epsilon * N * E_manhattan`` (a looser number).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linear_sum_assignment, linprog
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import maximum_flow
from scipy.spatial.distance import cdist

from .._validation import check_choice
from ..errors import ParameterError, TextDPError, require

__all__ = [
    "EMD_METHODS",
    "METRICS",
    "bag_distance",
    "distribution_distance",
    "earth_movers_distance",
    "ground_distances",
    "optimal_matching",
    "wasserstein_infinity",
    "word_distribution",
]

METRICS = ("euclidean", "manhattan")
EMD_METHODS = ("auto", "assignment", "pot", "linprog")
_CDIST = {"euclidean": "euclidean", "manhattan": "cityblock"}


def _as_points(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    shape = arr.shape
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ParameterError(f"{name} must be a non-empty (size, dim) array of vectors, got shape {shape}")
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


def _masses(w: object, n: int, name: str) -> np.ndarray:
    """Validated masses, not normalised (so integer counts stay integers)."""
    _weights(w, n, name)
    return np.asarray(w, dtype=np.float64)


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
    ot = require("ot", "ot")
    return float(ot.emd2(a, b, dist))


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


# -- infinity-Wasserstein (bottleneck) distance ---------------------------------------------
_INT32_SAFE = 2**30  # scipy's maximum_flow works in int32


def _integer_masses(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Equal-total integer capacities proportional to integer masses ``a``, ``b`` (None if too large)."""
    if not (np.all(a == np.round(a)) and np.all(b == np.round(b))):
        return None
    ai = a.astype(np.int64)
    bi = b.astype(np.int64)
    ga = math.gcd(*ai.tolist()) if ai.size > 1 else int(ai[0])
    gb = math.gcd(*bi.tolist()) if bi.size > 1 else int(bi[0])
    ai, bi = ai // max(ga, 1), bi // max(gb, 1)
    sa, sb = int(ai.sum()), int(bi.sum())
    total = sa * sb // math.gcd(sa, sb)
    if total >= _INT32_SAFE:
        return None
    return ai * (total // sa), bi * (total // sb)


def _feasible_flow(allowed: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether integer masses ``a`` can be moved onto ``b`` (equal totals) along ``allowed`` pairs."""
    k, m = allowed.shape
    total = int(a.sum())
    ii, jj = np.nonzero(allowed)
    src, sink = 0, k + m + 1
    rows = np.concatenate([np.zeros(k, np.int64), 1 + ii, 1 + k + np.arange(m)])
    cols = np.concatenate([1 + np.arange(k), 1 + k + jj, np.full(m, sink)])
    caps = np.concatenate([a, np.full(ii.size, total, np.int64), b]).astype(np.int32)
    graph = coo_matrix((caps, (rows, cols)), shape=(k + m + 2, k + m + 2)).tocsr()
    return int(maximum_flow(graph, src, sink).flow_value) == total


def _feasible_lp(allowed: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Real-mass version of :func:`_feasible_flow` (HiGHS; masses normalised to sum 1)."""
    ii, jj = np.nonzero(allowed)
    k, m = allowed.shape
    a_eq = np.zeros((k + m, ii.size))
    a_eq[ii, np.arange(ii.size)] = 1.0
    a_eq[k + jj, np.arange(ii.size)] = 1.0
    res = linprog(np.zeros(ii.size), A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs")
    return bool(res.status == 0)


def wasserstein_infinity(
    x: np.ndarray,
    y: np.ndarray,
    *,
    metric: str = "euclidean",
    x_weights: np.ndarray | None = None,
    y_weights: np.ndarray | None = None,
) -> float:
    """Exact infinity-Wasserstein (bottleneck) distance ``W_inf(p, q)`` of two weighted point sets.

    ``W_inf(p, q) = min over couplings pi of p and q of max{d(x, y) : pi(x, y) > 0}``:
    the smallest ``t`` such that all of ``p``'s mass can be moved onto ``q`` without
    moving any unit of mass farther than ``t``. It is one of the pairwise
    distances; the smallest feasible one is found by binary search (a threshold is
    feasible iff a maximum flow through the pairs within it carries all the mass).
    Integer weights (word counts; the default is 1 per row) are handled exactly
    by integer maximum flow; other weights by a feasibility LP.

    Parameters
    ----------
    x, y : array_like
        ``(k, n)`` and ``(m, n)`` points (the distinct words' vectors).
    metric : {"euclidean", "manhattan"}
        Ground metric.
    x_weights, y_weights : array_like, optional
        Masses of the points (normalised to sum 1); default 1 each.

    Examples
    --------
    >>> wasserstein_infinity([[0.0], [0.5]], [[0.0]])      # "aa bb" vs "aa aa"
    0.5
    >>> wasserstein_infinity([[0.0], [1.0], [5.0]], [[0.2], [1.1], [4.0]])
    1.0
    >>> wasserstein_infinity([[0.0], [3.0]], [[0.0], [3.0]], x_weights=[3, 1], y_weights=[1, 1])
    3.0
    """
    dist = ground_distances(x, y, metric)
    k, m = dist.shape
    wa = np.ones(k) if x_weights is None else _masses(x_weights, k, "x_weights")
    wb = np.ones(m) if y_weights is None else _masses(y_weights, m, "y_weights")
    keep_a, keep_b = wa > 0, wb > 0
    dist, wa, wb = dist[keep_a][:, keep_b], wa[keep_a], wb[keep_b]
    # every point must reach some point of the other side: a lower bound on the answer
    lower = max(float(dist.min(axis=1).max()), float(dist.min(axis=0).max()))
    cand = np.unique(dist)
    cand = cand[cand >= lower]
    ints = _integer_masses(wa, wb)
    if ints is not None:
        ia, ib = ints

        def feasible(t: float) -> bool:
            return _feasible_flow(dist <= t, ia, ib)
    else:
        pa, pb = wa / wa.sum(), wb / wb.sum()

        def feasible(t: float) -> bool:
            return _feasible_lp(dist <= t, pa, pb)

    lo, hi = 0, cand.size - 1  # cand[hi] (the largest distance) is always feasible
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(float(cand[mid])):
            hi = mid
        else:
            lo = mid + 1
    return float(cand[lo])


def word_distribution(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct vocabulary rows of a document and their counts (its empirical word distribution).

    >>> [a.tolist() for a in word_distribution(np.array([4, 2, 4, 4]))]
    [[2, 4], [1, 3]]
    """
    r = np.asarray(rows, dtype=np.int64).reshape(-1)
    if r.size == 0:
        raise ParameterError("a document needs at least one in-vocabulary word")
    uniq, counts = np.unique(r, return_counts=True)
    return uniq, counts


def distribution_distance(
    rows_a: np.ndarray, rows_b: np.ndarray, vectors: np.ndarray, *, metric: str = "euclidean"
) -> float:
    """``W_inf(p_A, p_B)`` between the empirical word distributions of two documents (rows of ``vectors``).

    This is the distance of the ``--bag sample`` guarantee: any output is at most
    ``exp(epsilon * N * W_inf)`` times more likely from one document than from the other.

    >>> vec = np.array([[0.0, 0.0], [0.5, 0.0]])
    >>> distribution_distance(np.array([0, 1]), np.array([0, 0]), vec)
    0.5
    >>> distribution_distance(np.array([0, 1, 0, 1]), np.array([1, 0]), vec)
    0.0
    """
    ua, ca = word_distribution(rows_a)
    ub, cb = word_distribution(rows_b)
    return wasserstein_infinity(
        np.asarray(vectors[ua], dtype=np.float64), np.asarray(vectors[ub], dtype=np.float64),
        metric=metric, x_weights=ca, y_weights=cb,
    )
