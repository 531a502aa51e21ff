"""Exact nearest-word decoding (the paper's Vec^{-1}, Algorithm 2).

A noisy vector ``z`` decodes to the vocabulary row ``w`` that minimises the
Euclidean distance ``||z - e_w||``. Since ``||z - e_w||^2 = ||z||^2 - 2 (e_w . z
- ||e_w||^2 / 2)``, the nearest word maximises the score ``e_w . z - ||e_w||^2 / 2``.
The norm term is folded into one augmented matrix ``A = [E, -||E||^2/2]``
(``V x (d+1)``, float32, built once) so that the scores of a block of queries are one matrix product
``[Z, 1] @ A.T``. Queries and vocabulary are processed in blocks so the
score matrix stays in cache; the vocabulary is split between worker threads
(one BLAS thread each), so every core runs GEMM *and* the reductions.

Per block only a fast row maximum is taken; the (slower) argmax and the near-tie
count run only for the rows whose maximum improved, which after the first few
blocks is a few per cent of them. The best and second-best block maxima are kept.

Exactness. Float32 products can mis-order two words whose scores differ by
less than the rounding error. A query is *ambiguous* when a rival of its best
float32 score lies within a rigorous rounding bound ``tol`` (inside the winning
block, or as another block's maximum). Ambiguous queries are re-decided in
float64 among every word whose float32 score is within ``2 tol`` of the best
(a superset of the possible winners). The result is the argmin of the float64
squared distance, and ties (equal vectors) go to the lowest row, i.e. the most
frequent word: deterministic, and identical whatever the block sizes or threads.

Known source. Earth Mover's privacy decodes ``z = e_s + noise`` whose source
row ``s`` is known. ``decode(Z, sources=s)`` uses a lazily built table of the k
nearest neighbours of each source: every word outside the list is at least
``b_s`` from ``e_s`` (a rigorous float32-rounding lower bound), hence at least
``b_s - r`` from ``z`` with ``r = ||z - e_s||``. When the best list member is
closer than ``b_s - r`` it is the exact answer and the full scan is skipped. (A
vector closer to its source than half the nearest-neighbour distance always
decodes to the source; the list answers larger balls.) Still exact, but its work
depends on the source words (which ones have lists, how many queries they answer)
and the lists persist in the decoder: in a release the source words are private, so
textdp's release path never passes ``sources`` and its decoding time is a function
of the noisy vectors only. The shortcut is opt-in for experiments
(``EarthMoversPrivacy(known_source=True)``, ``--known-source``; BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import EmbeddingsError, ParameterError

_F32_EPS = float(np.finfo(np.float32).eps)


def _check_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    q = np.asarray(queries, dtype=np.float64)
    if q.ndim == 1:
        q = q[None, :]
    if q.ndim != 2 or q.shape[1] != dim:
        raise EmbeddingsError(
            f"queries have shape {np.shape(queries)}, expected (B, {dim}) to match the embeddings"
        )
    if not np.all(np.isfinite(q)):
        raise EmbeddingsError("queries contain NaN or infinite values")
    return q


def _check_sources(sources: np.ndarray | None, n: int, vocab_size: int) -> np.ndarray | None:
    if sources is None:
        return None
    s = np.asarray(sources).reshape(-1)
    if s.shape[0] != n:
        raise ParameterError(f"got {s.shape[0]} sources for {n} queries")
    if not np.issubdtype(s.dtype, np.integer) or (s.size and (s.min() < 0 or s.max() >= vocab_size)):
        raise ParameterError(f"sources must be vocabulary rows in [0, {vocab_size})")
    return s.astype(np.int64)


def _argmin_lowest(dist: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per query (axis 0) the row of the smallest distance; ties to the lowest row."""
    m = dist.min(axis=1, keepdims=True)
    big = np.iinfo(np.int64).max
    return np.where(dist == m, rows, big).min(axis=1)


@contextlib.contextmanager
def _blas_single_thread(enabled: bool) -> Iterator[None]:
    """Limit BLAS to one thread while our own threads split the work (if threadpoolctl exists)."""
    if not enabled:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class ExactDecoder:
    """Exact nearest-vocabulary-row search by blocked float32 GEMM.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(V, d)`` vocabulary vectors.
    query_block : int
        Queries scored per matrix product.
    vocab_block : int
        Vocabulary rows scored per matrix product.
    threads : int or None
        Worker threads splitting the vocabulary (``None``: one per CPU core).
    neighbours : int
        List length k of the known-source table (0 disables the shortcut).

    Examples
    --------
    >>> dec = ExactDecoder(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> dec.decode(np.array([[0.9, 0.2], [0.1, 0.1], [-1.0, 2.0]])).tolist()
    [1, 0, 2]
    >>> dec.decode(np.array([[0.9, 0.2]]), sources=[1]).tolist()
    [1]
    """

    name = "exact"
    exact = True

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        query_block: int = 1024,
        vocab_block: int = 4096,
        threads: int | None = None,
        neighbours: int = 128,
    ) -> None:
        vec = np.asarray(vectors)
        if vec.ndim != 2 or vec.shape[0] == 0:
            raise EmbeddingsError(f"decoder needs a non-empty (V, d) matrix, got shape {vec.shape}")
        self._vectors = vec
        v, d = vec.shape
        self.vocab_size = int(v)
        self.dim = int(d)
        self.query_block = max(1, int(query_block))
        self.vocab_block = max(1, int(vocab_block))
        self.threads = max(1, int(threads if threads is not None else (os.cpu_count() or 1)))
        self.neighbours = max(0, min(int(neighbours), v))
        kpad = d + 1  # measured: padding K to 56 or 64 makes OpenBLAS slower, not faster
        self._k = kpad
        aug = np.zeros((v, kpad), dtype=np.float32)
        aug[:, :d] = vec
        v64 = vec.astype(np.float64)
        sq = np.einsum("ij,ij->i", v64, v64)
        aug[:, d] = (-0.5 * sq).astype(np.float32)
        self._aug = aug
        self._sq = sq
        self._max_norm = float(np.sqrt(sq.max()))
        self._max_half_sq = float(0.5 * sq.max())
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        # known-source table, filled lazily: rows, float64 distances, lower bound outside the list
        self._nb_rows: np.ndarray | None = None
        self._nb_bound: np.ndarray | None = None
        self._nb_have: np.ndarray | None = None
        self._nb_upper: dict[int, float] = {}
        self.stats = {"queries": 0, "known_source": 0, "ambiguous": 0}

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # -- tolerances ------------------------------------------------------------------
    def _tolerance(self, qnorm: np.ndarray) -> np.ndarray:
        # |fl(s) - s| <= gamma_{d+1} * sum |a_i z_i| with gamma_k ~ k u; add the float32
        # rounding of the stored vectors/queries themselves. A factor 4 keeps it rigorous.
        k = self.dim + 2
        return 4.0 * k * _F32_EPS * (qnorm * self._max_norm + self._max_half_sq + qnorm + 1.0)

    # -- public API ------------------------------------------------------------------
    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """Row index of the nearest vocabulary vector for each query (``(B, d)`` -> ``(B,)``).

        ``sources`` (optional, ``(B,)`` rows) are the words the noisy vectors were
        made from; they only speed the search up, the answer is the same, but the
        running time then depends on them (a timing side channel: see the module notes).
        """
        q = _check_queries(queries, self.dim)
        src = _check_sources(sources, q.shape[0], self.vocab_size)
        with self._lock:
            return self._decode(q, src)

    def _decode(self, q: np.ndarray, src: np.ndarray | None) -> np.ndarray:
        out = np.empty(q.shape[0], dtype=np.int64)
        todo = np.arange(q.shape[0])
        if src is not None and self.neighbours > 0 and q.shape[0]:
            done, rows = self._known_source(q, src)
            out[done] = rows
            todo = np.flatnonzero(~np.isin(np.arange(q.shape[0]), done))
            self.stats["known_source"] += int(done.size)
        self.stats["queries"] += int(q.shape[0])
        if todo.size:
            out[todo] = self._decode_full(q[todo])
        return out

    def close(self) -> None:
        """Stop the worker threads (they are restarted on demand)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- full scan ---------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="textdp-decode")
        return self._pool

    def _ranges(self, nq: int) -> list[tuple[int, int]]:
        """Contiguous vocabulary ranges, one per thread (one range for small jobs)."""
        t = self.threads
        if t == 1 or nq * self.vocab_size < 4_000_000:
            return [(0, self.vocab_size)]
        nblocks = -(-self.vocab_size // self.vocab_block)
        t = min(t, nblocks)
        per = -(-nblocks // t)
        return [
            (i * per * self.vocab_block, min(self.vocab_size, (i + 1) * per * self.vocab_block))
            for i in range(t)
            if i * per * self.vocab_block < self.vocab_size
        ]

    def _augment(self, q64: np.ndarray) -> np.ndarray:
        qa = np.zeros((q64.shape[0], self._k), dtype=np.float32)
        qa[:, : self.dim] = q64
        qa[:, self.dim] = 1.0
        return qa

    def _scan(
        self, qa: np.ndarray, tol: np.ndarray, lo: int, hi: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Best float32 score, its row, the best rival block maximum, near-tie flag; rows [lo, hi)."""
        b = qa.shape[0]
        best = np.full(b, -np.inf, dtype=np.float32)
        second = np.full(b, -np.inf, dtype=np.float32)
        idx = np.zeros(b, dtype=np.int64)
        near = np.zeros(b, dtype=bool)
        buf = np.empty((b, min(self.vocab_block, hi - lo)), dtype=np.float32)
        for vs in range(lo, hi, self.vocab_block):
            ve = min(vs + self.vocab_block, hi)
            scores = buf[:, : ve - vs]
            np.matmul(qa, self._aug[vs:ve].T, out=scores)
            m = scores.max(axis=1)
            improve = m > best
            np.maximum(second, np.where(improve, best, m), out=second)
            r = np.flatnonzero(improve)
            if r.size:
                sub = scores[r]
                top = m[r]
                idx[r] = vs + sub.argmax(axis=1)
                near[r] = np.count_nonzero(sub >= (top - tol[r])[:, None], axis=1) > 1
                best[r] = top
        return best, idx, second, near

    def _decode_full(self, q64: np.ndarray) -> np.ndarray:
        out = np.empty(q64.shape[0], dtype=np.int64)
        ranges = self._ranges(min(q64.shape[0], self.query_block))
        with self._lock, _blas_single_thread(len(ranges) > 1):
            for start in range(0, q64.shape[0], self.query_block):
                out[start : start + self.query_block] = self._decode_block(
                    q64[start : start + self.query_block], ranges
                )
        return out

    def _decode_block(self, q64: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
        qa = self._augment(q64)
        tol64 = self._tolerance(np.sqrt(np.einsum("ij,ij->i", q64, q64)))
        tol = (tol64 * 1.01).astype(np.float32)  # rounded up: float32 tests stay conservative
        if len(ranges) == 1:
            parts = [self._scan(qa, tol, *ranges[0])]
        else:
            pool = self._executor()
            parts = list(pool.map(lambda r: self._scan(qa, tol, *r), ranges))
        best, idx, second, near = parts[0]
        for pb, pi, ps, pn in parts[1:]:  # merge in vocabulary order, exactly like blocks
            improve = pb > best
            second = np.maximum(np.maximum(second, ps), np.where(improve, best, pb))
            best = np.where(improve, pb, best)
            idx = np.where(improve, pi, idx)
            near = np.where(improve, pn, near)
        ambiguous = near | (second >= best - tol)
        if ambiguous.any():
            a = np.flatnonzero(ambiguous)
            self.stats["ambiguous"] += int(a.size)
            idx[a] = self._resolve(q64[a], qa[a], best[a].astype(np.float64) - 2.02 * tol64[a])
        return idx

    def _resolve(self, q64: np.ndarray, qa: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """Float64 argmin among the words whose float32 score reaches ``threshold``."""
        qi_all, rows_all = [], []
        for vs in range(0, self.vocab_size, self.vocab_block):
            scores = qa @ self._aug[vs : vs + self.vocab_block].T
            qi, col = np.nonzero(scores >= threshold[:, None])
            qi_all.append(qi)
            rows_all.append(col + vs)
        qi = np.concatenate(qi_all)
        rows = np.concatenate(rows_all)
        diff = self._vectors[rows].astype(np.float64) - q64[qi]
        dist = (diff**2).sum(axis=1)
        order = np.lexsort((rows, dist, qi))  # by query, then distance, then row
        first = np.ones(order.size, dtype=bool)
        first[1:] = qi[order][1:] != qi[order][:-1]
        out = np.empty(q64.shape[0], dtype=np.int64)
        out[qi[order][first]] = rows[order][first]
        return out

    # -- known source ----------------------------------------------------------------
    def _upper_bounds(self, rows: np.ndarray) -> np.ndarray:
        """An upper bound of each row's k-th neighbour distance (from a vocabulary sample)."""
        missing = np.array([r for r in rows.tolist() if r not in self._nb_upper], dtype=np.int64)
        if missing.size:
            n = min(self.vocab_size, max(16 * self.neighbours, 16384))
            sample = self._vectors[:n].astype(np.float64)
            k = min(self.neighbours, n - 1)
            for start in range(0, missing.size, 512):
                m = missing[start : start + 512]
                e = self._vectors[m].astype(np.float64)
                d2 = self._sq[m][:, None] + self._sq[:n][None, :] - 2 * e @ sample.T
                kth = np.partition(d2, k, axis=1)[:, k]
                # the bound test only decides which rows get a table entry: slack is harmless
                for r, val in zip(m.tolist(), np.sqrt(np.maximum(kth, 0.0)) * 1.01 + 1e-6):
                    self._nb_upper[r] = float(val)
        return np.array([self._nb_upper[r] for r in rows.tolist()])

    def _ensure_table(self, rows: np.ndarray) -> None:
        if self._nb_have is None:
            k = self.neighbours
            self._nb_have = np.zeros(self.vocab_size, dtype=bool)
            self._nb_rows = np.zeros((0, k), dtype=np.int32)
            self._nb_bound = np.zeros(0, dtype=np.float64)
            self._nb_slot = np.full(self.vocab_size, -1, dtype=np.int64)
        need = np.unique(rows[~self._nb_have[rows]])
        if need.size == 0:
            return
        nb_rows, _, bound = self.neighbour_lists(need, self.neighbours)
        assert self._nb_rows is not None and self._nb_bound is not None  # filled above
        self._nb_slot[need] = np.arange(need.size) + self._nb_rows.shape[0]
        self._nb_rows = np.concatenate([self._nb_rows, nb_rows.astype(np.int32)])
        self._nb_bound = np.concatenate([self._nb_bound, bound])
        self._nb_have[need] = True

    def neighbour_lists(self, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The k nearest vocabulary rows of each of ``rows`` (float32 ranking).

        Returns ``(neighbours (n, k), float64 distances (n, k), bound (n,))`` where
        every word *not* listed is at least ``bound`` away (a rigorous bound).
        """
        rows = np.asarray(rows, dtype=np.int64)
        k = int(min(k, self.vocab_size))
        chunks = [rows[i : i + 256] for i in range(0, rows.size, 256)]
        with self._lock, _blas_single_thread(self.threads > 1 and len(chunks) > 1):
            if self.threads > 1 and len(chunks) > 1:
                parts = list(self._executor().map(lambda c: self._top_k(c, k), chunks))
            else:
                parts = [self._top_k(c, k) for c in chunks]
        if not parts:
            return np.zeros((0, k), np.int64), np.zeros((0, k)), np.zeros(0)
        return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]

    def _top_k(self, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q64 = self._vectors[rows].astype(np.float64)
        qa = self._augment(q64)
        tol = self._tolerance(np.sqrt(self._sq[rows]))
        top_val = np.full((rows.size, k), -np.inf, dtype=np.float32)
        top_idx = np.zeros((rows.size, k), dtype=np.int64)
        sub = 64
        for vs in range(0, self.vocab_size, self.vocab_block):
            ve = min(vs + self.vocab_block, self.vocab_size)
            scores = qa @ self._aug[vs:ve].T
            n = ve - vs
            cand_val, cand_idx = scores, np.broadcast_to(np.arange(n), scores.shape)
            if n > sub * k:  # the k best lie in the k sub-blocks with the largest maxima
                nsub = n // sub
                smax = scores[:, : nsub * sub].reshape(rows.size, nsub, sub).max(axis=2)
                pick = np.argpartition(smax, nsub - k, axis=1)[:, nsub - k :]
                cols = (pick[:, :, None] * sub + np.arange(sub)).reshape(rows.size, -1)
                tail = np.arange(nsub * sub, n)
                cand_idx = np.concatenate([cols, np.broadcast_to(tail, (rows.size, tail.size))], axis=1)
                cand_val = np.take_along_axis(scores, cand_idx, axis=1)
            allv = np.concatenate([top_val, cand_val], axis=1)
            alli = np.concatenate([top_idx, cand_idx + vs], axis=1)
            keep = np.argpartition(allv, allv.shape[1] - k, axis=1)[:, allv.shape[1] - k :]
            top_val = np.take_along_axis(allv, keep, axis=1)
            top_idx = np.take_along_axis(alli, keep, axis=1)
        kth = top_val.min(axis=1).astype(np.float64)
        # words not listed score <= kth in float32, so their true score is <= kth + tol
        bound = np.sqrt(np.maximum(self._sq[rows] - 2.0 * (kth + 1.01 * tol), 0.0))
        if k == self.vocab_size:
            bound[:] = np.inf
        diff = self._vectors[top_idx].astype(np.float64) - q64[:, None, :]
        dist = np.sqrt((diff**2).sum(axis=2))
        return top_idx, dist, bound

    def _known_source(self, q64: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Queries answered exactly from the source's neighbour list: (query positions, rows)."""
        e = self._vectors[src].astype(np.float64)
        r = np.sqrt(((q64 - e) ** 2).sum(axis=1))
        # a table entry costs one full scan: build it only for sources with a query that can
        # plausibly be answered (2r below an upper bound of the k-th neighbour distance);
        # this only decides where to look, never the answer
        have = self._nb_have[src] if self._nb_have is not None else np.zeros(src.size, dtype=bool)
        uniq = np.unique(src[~have])
        if uniq.size:
            ub_of = dict(zip(uniq.tolist(), self._upper_bounds(uniq).tolist()))
            ub = np.array([ub_of.get(x, np.inf) for x in src.tolist()])
            have = have | (2.0 * r < ub)
        hopeful = np.flatnonzero(have)
        if hopeful.size == 0:
            return hopeful, hopeful
        self._ensure_table(src[hopeful])
        assert self._nb_rows is not None and self._nb_bound is not None  # filled by _ensure_table
        slot = self._nb_slot[src[hopeful]]
        bound = self._nb_bound[slot]
        cand = self._nb_rows[slot].astype(np.int64)
        diff = self._vectors[cand].astype(np.float64) - q64[hopeful][:, None, :]
        d2 = (diff**2).sum(axis=2)
        best = np.sqrt(d2.min(axis=1))
        rh = r[hopeful]
        slack = 1e-9 * (bound + rh + best) + 1e-12
        ok = best + rh + slack < bound
        return hopeful[ok], _argmin_lowest(d2[ok], cand[ok])


def nearest_words(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """One-shot exact decoding of ``queries`` against ``vectors`` (see :class:`ExactDecoder`).

    >>> nearest_words(np.eye(3), np.array([[0.1, 0.9, 0.0]])).tolist()
    [1]
    """
    return ExactDecoder(vectors).decode(queries)
