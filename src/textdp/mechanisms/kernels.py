"""Vectorised kernels shared by the word-level mechanisms (no text, no state).

* :func:`gumbel_argmax` - exact categorical sampling from log-weights (Gumbel-max).
* :func:`sample_by_distance` - for every query row, one vocabulary row drawn with
  probability proportional to ``exp(f(distance))`` over the whole vocabulary,
  without materialising a ``B x V`` (let alone ``V x V``) probability matrix.
* :func:`nearest_k` - the ``k`` nearest vocabulary rows of arbitrary query vectors,
  ranked in float64.

Sampling is exact and in log space throughout: ``exp`` is only ever taken of
``log-weight - max`` (the log-sum-exp normalisation), never of raw scores, so no
epsilon and no dtype can overflow or produce probabilities that "do not sum to 1".

Two-level exact sampler (:func:`sample_by_distance`). The vocabulary is cut into
blocks of ``block`` rows. Pass 1 computes, per query and block, the block's
log-mass ``logsumexp_{w in block} f(d(q, w))`` (one float64 GEMM per block). A block
is drawn by Gumbel-max over the block log-masses; pass 2 recomputes the scores of
the chosen block only and draws a row inside it by Gumbel-max. Then
``P(w) = P(block(w)) P(w | block) = exp(f(d_w)) / sum_u exp(f(d_u))`` exactly.

>>> from textdp._rng import make_rng
>>> gumbel_argmax(np.array([[-np.inf, 0.0, -np.inf]]), make_rng(0)).tolist()
[1]
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["augment", "augment32", "gumbel_argmax", "nearest_k", "pairwise_distances", "sample_by_distance"]

def gumbel_argmax(log_weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index drawn from each row of ``log_weights`` with probability ``softmax(row)``.

    ``-inf`` entries are never drawn; a row must have at least one finite entry.

    >>> from textdp._rng import make_rng
    >>> lw = np.array([[np.log(0.2), np.log(0.8)], [0.0, -np.inf]])
    >>> draws = np.stack([gumbel_argmax(lw, make_rng(s)) for s in range(2000)])
    >>> bool(abs(draws[:, 0].mean() - 0.8) < 0.04), set(draws[:, 1].tolist())
    (True, {0})
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    g = rng.gumbel(size=lw.shape)
    return np.asarray(np.argmax(lw + g, axis=-1), dtype=np.int64)


def pairwise_distances(queries: np.ndarray, vectors: np.ndarray, vec_sq: np.ndarray | None = None) -> np.ndarray:
    """Float64 Euclidean distances ``(B, n)`` between query rows and vocabulary rows.

    >>> pairwise_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[5.0, 0.0]]
    """
    q = np.asarray(queries, dtype=np.float64)
    v = np.asarray(vectors, dtype=np.float64)
    vs = np.einsum("ij,ij->i", v, v) if vec_sq is None else vec_sq
    d2 = np.einsum("ij,ij->i", q, q)[:, None] + vs[None, :] - 2.0 * (q @ v.T)
    return np.sqrt(np.maximum(d2, 0.0))


def augment(vectors: np.ndarray) -> np.ndarray:
    """``[-2 E, 1, ||E||^2]`` (float64, ``(V, d + 2)``): ``[q, ||q||^2, 1] @ augment(E).T`` is ``||q - e||^2``.

    >>> a = augment(np.array([[3.0, 4.0]]))
    >>> float((np.array([0.0, 0.0, 0.0, 1.0]) @ a.T)[0])
    25.0
    """
    v = np.asarray(vectors, dtype=np.float64)
    out = np.empty((v.shape[0], v.shape[1] + 2), dtype=np.float64)
    out[:, : v.shape[1]] = -2.0 * v
    out[:, v.shape[1]] = 1.0
    out[:, v.shape[1] + 1] = np.einsum("ij,ij->i", v, v)
    return out


def sample_by_distance(
    queries: np.ndarray,
    vectors: np.ndarray | None,
    rate: float,
    rng: np.random.Generator,
    *,
    cap: float = np.inf,
    block: int = 2048,
    query_block: int = 256,
    augmented: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """One row of ``vectors`` per query, drawn with ``P(w)`` proportional to ``exp(-rate * min(d(q, w), cap))``.

    ``d`` is the Euclidean distance (float64). This covers the exponential mechanism
    of SanText (``rate = epsilon/2``) and TEM (``cap = gamma``).

    Parameters
    ----------
    queries : numpy.ndarray
        ``(B, d)`` query vectors (the input words' embeddings).
    vectors : numpy.ndarray or None
        ``(V, d)`` candidate output vectors (may be ``None`` when ``augmented`` is given).
    rate : float
        Log-weight per unit of distance (>= 0).
    rng : numpy.random.Generator
        Source of randomness.
    cap : float
        Distances are truncated at ``cap`` (``inf``: no truncation).
    block, query_block : int
        Vocabulary rows per block and queries per pass (memory ``query_block x block`` floats).
    augmented : numpy.ndarray, optional
        :func:`augment` ``(vectors)``, precomputed.
    threads : int, optional
        Worker threads splitting the vocabulary blocks (one BLAS thread each); default one per core.

    Returns
    -------
    numpy.ndarray
        ``(B,)`` int64 rows of ``vectors``.

    Examples
    --------
    >>> from textdp._rng import make_rng
    >>> vec = np.array([[0.0], [1.0], [50.0]])
    >>> sample_by_distance(np.array([[0.0], [50.0]]), vec, 5.0, make_rng(3), block=2).tolist()
    [0, 2]
    """
    q_all = np.asarray(queries, dtype=np.float64)
    if augmented is None:
        if vectors is None:
            raise ValueError("sample_by_distance needs vectors or augmented")
        aug = augment(vectors)
    else:
        aug = augmented
    n_vocab, dim = aug.shape[0], aug.shape[1] - 2
    starts = np.arange(0, n_vocab, block)
    out = np.empty(q_all.shape[0], dtype=np.int64)
    n_threads = max(1, min(int(threads if threads is not None else (os.cpu_count() or 1)), starts.size))
    chunks = [c for c in np.array_split(np.arange(starts.size), n_threads) if c.size]
    kernel = _LogWeights(aug, float(rate), float(cap))
    with blas_threads(1), ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for qs in range(0, q_all.shape[0], query_block):
            q = q_all[qs : qs + query_block]
            qa = np.empty((q.shape[0], dim + 2), dtype=np.float64)
            qa[:, :dim] = q
            qa[:, dim] = np.einsum("ij,ij->i", q, q)
            qa[:, dim + 1] = 1.0
            masses = np.empty((q.shape[0], starts.size), dtype=np.float64)
            list(pool.map(kernel.masses, [qa] * len(chunks), [masses] * len(chunks), [starts] * len(chunks),
                          [block] * len(chunks), chunks))
            chosen = gumbel_argmax(masses, rng)
            for b in np.unique(chosen):
                sel = np.flatnonzero(chosen == b)
                vs = int(starts[b])
                lw = kernel(qa[sel], vs, min(vs + block, n_vocab), np.empty((sel.size, block)))
                out[qs + sel] = vs + gumbel_argmax(lw, rng)
    return out


class _LogWeights:
    """``-rate * min(d, cap)`` for a block of vocabulary rows, computed in place in a buffer."""

    def __init__(self, aug: np.ndarray, rate: float, cap: float) -> None:
        self.aug = aug
        self.rate = rate
        self.cap2 = cap**2 if np.isfinite(cap) else np.inf

    def __call__(self, qa: np.ndarray, vs: int, ve: int, into: np.ndarray) -> np.ndarray:
        g = into[: qa.shape[0], : ve - vs]
        np.matmul(qa, self.aug[vs:ve].T, out=g)  # squared distances
        np.maximum(g, 0.0, out=g)
        if self.cap2 < np.inf:
            np.minimum(g, self.cap2, out=g)
        np.sqrt(g, out=g)
        g *= -self.rate
        return g

    def masses(self, qa: np.ndarray, masses: np.ndarray, starts: np.ndarray, block: int, which: np.ndarray) -> None:
        """Log-mass of each block in ``which`` (columns of ``masses``), for every query."""
        n_vocab = self.aug.shape[0]
        buf = np.empty((qa.shape[0], min(block, n_vocab)), dtype=np.float64)
        for b in which.tolist():
            vs = int(starts[b])
            g = self(qa, vs, min(vs + block, n_vocab), buf)
            m = g.max(axis=1)
            g -= m[:, None]
            np.exp(g, out=g)
            masses[:, b] = np.log(g.sum(axis=1)) + m


def nearest_k(
    queries: np.ndarray,
    vectors: np.ndarray,
    k: int,
    *,
    slack: int = 6,
    block: int = 4096,
    query_block: int = 1024,
    vec_sq: np.ndarray | None = None,
    threads: int | None = None,
    augmented32: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest vocabulary rows of each query and their float64 distances (nearest first).

    Candidates are found with float32 scores ``e.q - ||e||^2 / 2`` (one GEMM per block, the
    vocabulary split between ``threads`` worker threads with one BLAS thread each, as in
    :class:`textdp.embeddings.ExactDecoder`); a block is only searched for the queries whose
    block maximum beats their current ``k + slack``-th best score. The ``k + slack``
    candidates are then re-ranked in float64. Ties go to the lowest row. ``augmented32``
    (:func:`augment32` of ``vectors``) saves rebuilding the score matrix on every call.

    >>> vec = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [5.0, 5.0]])
    >>> rows, dist = nearest_k(np.array([[0.9, 0.1]]), vec, 2)
    >>> rows.tolist(), np.round(dist, 3).tolist()
    ([[1, 0]], [[0.141, 0.906]])
    """
    q64 = np.asarray(queries, dtype=np.float64)
    vec = np.asarray(vectors)
    n_vocab, dim = vec.shape
    k = int(min(k, n_vocab))
    kk = int(min(k + slack, n_vocab))
    aug = augment32(vec, vec_sq) if augmented32 is None else augmented32
    n_threads = max(1, int(threads if threads is not None else (os.cpu_count() or 1)))
    n_blocks = -(-n_vocab // block)
    per = -(-n_blocks // min(n_threads, n_blocks))
    ranges = [(i * per * block, min(n_vocab, (i + 1) * per * block)) for i in range(n_threads) if i * per * block < n_vocab]
    if q64.shape[0] * n_vocab < 4_000_000:
        ranges = [(0, n_vocab)]
    rows_out = np.empty((q64.shape[0], k), dtype=np.int64)
    dist_out = np.empty((q64.shape[0], k), dtype=np.float64)
    with blas_threads(1 if len(ranges) > 1 else None), ThreadPoolExecutor(max_workers=len(ranges)) as pool:
        for qs in range(0, q64.shape[0], query_block):
            q = q64[qs : qs + query_block]
            qa = np.ones((q.shape[0], dim + 1), dtype=np.float32)
            qa[:, :dim] = q
            parts = list(pool.map(_top_range, [qa] * len(ranges), [aug] * len(ranges), [kk] * len(ranges),
                                  [block] * len(ranges), [r[0] for r in ranges], [r[1] for r in ranges]))
            top_val = np.concatenate([p[0] for p in parts], axis=1)
            top_idx = np.concatenate([p[1] for p in parts], axis=1)
            if len(parts) > 1:
                keep = np.argpartition(top_val, top_val.shape[1] - kk, axis=1)[:, top_val.shape[1] - kk :]
                top_val = np.take_along_axis(top_val, keep, axis=1)
                top_idx = np.take_along_axis(top_idx, keep, axis=1)
            cand = np.where(np.isfinite(top_val), top_idx, top_idx[:, :1])
            diff = vec[cand].astype(np.float64) - q[:, None, :]
            d2 = np.einsum("ijk,ijk->ij", diff, diff)
            order = np.lexsort((cand, d2), axis=1)[:, :k]
            rows_out[qs : qs + q.shape[0]] = np.take_along_axis(cand, order, axis=1)
            dist_out[qs : qs + q.shape[0]] = np.sqrt(np.take_along_axis(d2, order, axis=1))
    return rows_out, dist_out


def augment32(vectors: np.ndarray, vec_sq: np.ndarray | None = None) -> np.ndarray:
    """``[E, -||E||^2 / 2]`` in float32: ``[q, 1] @ augment32(E).T`` ranks words by distance to ``q``."""
    vec = np.asarray(vectors)
    if vec_sq is None:
        v64 = vec.astype(np.float64)
        vec_sq = np.einsum("ij,ij->i", v64, v64)
    aug = np.empty((vec.shape[0], vec.shape[1] + 1), dtype=np.float32)
    aug[:, : vec.shape[1]] = vec
    aug[:, vec.shape[1]] = -0.5 * vec_sq
    return aug


def _top_range(
    qa: np.ndarray, aug: np.ndarray, kk: int, block: int, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``kk`` float32 scores (unordered) and their rows among vocabulary rows ``[lo, hi)``."""
    nq = qa.shape[0]
    kk = min(kk, hi - lo)
    top_val = np.full((nq, kk), -np.inf, dtype=np.float32)
    top_idx = np.full((nq, kk), lo, dtype=np.int64)
    kth = np.full(nq, -np.inf, dtype=np.float32)
    buf = np.empty((nq, min(block, hi - lo)), dtype=np.float32)
    for vs in range(lo, hi, block):
        ve = min(vs + block, hi)
        scores = buf[:, : ve - vs]
        np.matmul(qa, aug[vs:ve].T, out=scores)
        need = np.flatnonzero(scores.max(axis=1) > kth)  # rows this block can improve
        if need.size == 0:
            continue
        sub = scores[need]
        hit = sub > kth[need, None]
        cnt = np.count_nonzero(hit, axis=1)
        width = int(cnt.max())
        if width > 4 * kk:  # many hits (first blocks): partial sort of the whole rows
            take = min(kk, ve - vs)
            cols = np.argpartition(sub, sub.shape[1] - take, axis=1)[:, sub.shape[1] - take :]
            vals = np.take_along_axis(sub, cols, axis=1)
        else:  # few hits: gather them into a padded (rows, width) candidate list
            r, c = np.nonzero(hit)
            pos = np.arange(r.size) - np.concatenate([[0], np.cumsum(cnt)[:-1]])[r]
            cols = np.zeros((need.size, width), dtype=np.int64)
            vals = np.full((need.size, width), -np.inf, dtype=np.float32)
            cols[r, pos] = c
            vals[r, pos] = sub[r, c]
        cand_val = np.concatenate([top_val[need], vals], axis=1)
        cand_idx = np.concatenate([top_idx[need], cols + vs], axis=1)
        keep = np.argpartition(cand_val, cand_val.shape[1] - kk, axis=1)[:, cand_val.shape[1] - kk :]
        top_val[need] = np.take_along_axis(cand_val, keep, axis=1)
        top_idx[need] = np.take_along_axis(cand_idx, keep, axis=1)
        kth[need] = top_val[need].min(axis=1)
    return top_val, top_idx


@contextlib.contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Limit BLAS threads while worker threads split the vocabulary (if threadpoolctl is available)."""
    if limit is None:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        yield
        return
    with threadpool_limits(limits=limit, user_api="blas"):
        yield
