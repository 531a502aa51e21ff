"""Exact nearest-word decoding (the paper's Vec^{-1}, Algorithm 2): a fused, cache-tiled search.

A noisy vector ``z`` decodes to the vocabulary row ``w`` that minimises the
Euclidean distance ``||z - e_w||``. Since ``||z - e_w||^2 = ||z||^2 - 2 (e_w . z
- ||e_w||^2 / 2)``, the nearest word maximises the score ``s_w = e_w . z - ||e_w||^2 / 2``.
The norm term is folded into one augmented matrix ``A = [E, -||E||^2/2]``
(``V x (d+1)``, float32, built once, the norms precomputed) so that the scores of a tile of queries
are one matrix product ``[Z, 1] @ A.T``.

Fused tiles (:func:`plan_tiles`, :func:`scan_tiles`). The batch x V score matrix is never
materialised: a tile of ``query_tile x vocab_tile`` scores (sized to stay in a core's cache) is
computed and at once reduced to a running row maximum ``best``; only the rows whose tile maximum
comes within the margin ``2B`` of ``best`` are looked at again, to collect their *candidates*
(every column of the tile within ``2B`` of the new best). The vocabulary is split into contiguous
ranges, one per worker thread (one BLAS thread each), so every core runs GEMM *and* the reductions;
the torch decoder (:mod:`textdp.embeddings.gpu`) runs the same :func:`scan_tiles` on its device.

Exactness (one proof for every precision). Let ``s~_w`` be the computed score and ``B(z)`` a
rigorous bound ``|s~_w - s_w| <= B(z)`` for every word (:func:`rounding_bound`: float32 GEMM,
or a lower precision such as float16 with ``B`` derived from its unit roundoff). Let
``D_w = fl64(sum_i (e_wi - z_i)^2)`` be the float64 squared distance and define the answer

    ``F(z) = min { w : D_w = min_u D_u }``  (the lowest row among the float64 minimisers).

Claim: every float64 minimiser ``w`` is a candidate, i.e. ``s~_w >= max_u s~_u - margin``.
Proof: let ``u`` maximise ``s~``. Float64 evaluation errs by at most
``delta = (d + 2) 2^-53 (||z|| + max ||e||)^2``, so ``D_w <= D_u`` gives ``s_w >= s_u - delta``
and ``s~_w >= s_w - B >= s_u - B - delta >= s~_u - 2B - delta``. The margin used
(:func:`margin_of`) is ``2B`` plus 1 %, plus ``delta`` (Higham eq. (3.5) for the float64 sum), plus
the float32 rounding of ``best - margin``, rounded up to a float32. A tile's candidates are taken
against the running best, which never exceeds the final best, so the collected set is a superset of
the final one; filtering it by the final best keeps every minimiser. Hence
``F(z) = min { w in C : D_w = min_{u in C} D_u }`` over the candidate set ``C``: when ``C`` has one
word it is the answer; otherwise ``D`` is computed for the candidates only (the same expression,
so the same float64 values) and the lowest row among the minimisers is returned.
The answer is ``F(z)`` whatever the precision, tile sizes or thread count: the float32 and the
lower-precision (float16, bfloat16) paths return identical rows, word for word with a fixed seed, only
the number of candidates re-ranked differs. The bfloat16 path (``ExactDecoder(precision=...)``, for
CPUs with bfloat16 arithmetic) bounds the error per norm-sorted tile and searches in two passes; its
proof is in :mod:`textdp.embeddings.bf16`. Ties (equal vectors) go to the lowest row, i.e. the most
frequent word.

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
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import numpy as np

from ..errors import EmbeddingsError, ParameterError

if TYPE_CHECKING:
    import torch

    from .bf16 import Bf16Scorer

_F32_EPS = float(np.finfo(np.float32).eps)
_U32 = 2.0**-24  # unit roundoff of float32
_U64 = 2.0**-53


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


def _check_threads(threads: int | None) -> int:
    """``None``: one per CPU core; otherwise a positive integer (one-line error otherwise)."""
    if threads is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ParameterError(f"threads must be a positive integer (or None for one per core), got {threads!r}")
    return int(threads)


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


# -- the shared tiling ---------------------------------------------------------------------


@dataclass(frozen=True)
class TilePlan:
    """How one search is cut (shared by the numpy and the torch decoders).

    Attributes
    ----------
    batch : int
        Queries searched together: their candidates are merged over the worker ranges and
        re-ranked before the next batch (bounds the candidate memory).
    query_tile, vocab_tile : int
        One score tile is ``query_tile x vocab_tile`` (4 bytes each): computed, reduced and
        dropped while it is in cache.
    ranges : tuple of (int, int)
        Contiguous vocabulary ranges ``[lo, hi)``, one per worker thread.
    """

    batch: int
    query_tile: int
    vocab_tile: int
    ranges: tuple[tuple[int, int], ...]


def plan_tiles(
    n_queries: int,
    vocab_size: int,
    *,
    threads: int,
    batch: int,
    query_tile: int,
    vocab_tile: int,
    min_work: int = 4_000_000,
) -> TilePlan:
    """Split a search of ``n_queries`` against ``vocab_size`` rows into tiles and worker ranges.

    The vocabulary goes to ``threads`` contiguous ranges (whole tiles each) unless the batch is
    too small to pay for the threads (``min(n_queries, batch) * vocab_size < min_work``).

    >>> plan_tiles(5000, 10_000, threads=2, batch=1024, query_tile=256, vocab_tile=1024)
    TilePlan(batch=1024, query_tile=256, vocab_tile=1024, ranges=((0, 5120), (5120, 10000)))
    >>> plan_tiles(10, 10_000, threads=2, batch=1024, query_tile=256, vocab_tile=1024).ranges
    ((0, 10000),)
    """
    batch, qt, vt = max(1, int(batch)), max(1, int(query_tile)), max(1, int(vocab_tile))
    t = max(1, int(threads))
    if t == 1 or min(max(n_queries, 1), batch) * vocab_size < min_work:
        return TilePlan(batch, min(qt, batch), vt, ((0, vocab_size),))
    ntiles = -(-vocab_size // vt)
    t = min(t, ntiles)
    per = -(-ntiles // t)
    ranges = tuple(
        (i * per * vt, min(vocab_size, (i + 1) * per * vt)) for i in range(t) if i * per * vt < vocab_size
    )
    return TilePlan(batch, min(qt, batch), vt, ranges)


#: the arrays a score tile is made of: numpy arrays (:class:`NumpyOps`) or torch tensors (``TorchOps``)
TileArray = TypeVar("TileArray", np.ndarray, "torch.Tensor")


class TileOps(Protocol, Generic[TileArray]):
    """The array operations :func:`scan_tiles` needs, on one kind of array (:class:`NumpyOps`, ``TorchOps``)."""

    def full(self, n: int, value: float) -> TileArray: ...

    def rowmax(self, s: TileArray) -> TileArray: ...

    def maximum(self, a: TileArray, b: TileArray) -> TileArray: ...

    def nonzero(self, mask: TileArray) -> TileArray: ...

    def nonzero2(self, mask: TileArray) -> tuple[TileArray, TileArray]: ...

    def size(self, x: TileArray) -> int: ...

    def to_numpy(self, x: TileArray) -> np.ndarray: ...


class NumpyOps:
    """The array operations :func:`scan_tiles` needs, on numpy arrays (the torch decoder has its own)."""

    @staticmethod
    def full(n: int, value: float) -> np.ndarray:
        return np.full(n, value, dtype=np.float32)

    @staticmethod
    def rowmax(s: np.ndarray) -> np.ndarray:
        return s.max(axis=1)

    @staticmethod
    def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum(a, b)

    @staticmethod
    def nonzero(mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask)

    @staticmethod
    def nonzero2(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.nonzero(mask)  # type: ignore[return-value]

    @staticmethod
    def size(x: np.ndarray) -> int:
        return int(x.shape[0])

    @staticmethod
    def to_numpy(x: np.ndarray) -> np.ndarray:
        return np.asarray(x)


#: ``score(qs, qe, vs, ve)``: the computed scores of queries ``[qs, qe)`` against rows ``[vs, ve)``
ScoreTile = Callable[[int, int, int, int], TileArray]
#: one worker's result: running best per query and the candidates ``(query, row, score)`` found
ScanResult = tuple[TileArray, list[tuple[TileArray, TileArray, TileArray]]]


def scan_tiles(score: ScoreTile[TileArray], n: int, lo: int, hi: int, plan: TilePlan, margin: TileArray,
               ops: TileOps[TileArray]) -> ScanResult[TileArray]:
    """The fused search of one worker over vocabulary rows ``[lo, hi)`` (the module notes' proof).

    Each score tile is reduced to its row maximum; a row is looked at again only when that maximum
    reaches ``best - margin`` (``margin`` = ``2B`` per query, slack included), and then every column
    within ``margin`` of the new best is kept as a candidate. Returns the running best (per query)
    and the candidates; :func:`select_candidates` filters them by the best over all workers.
    Vocabulary tiles are the outer loop, so a tile of ``A`` stays in cache for all query tiles.

    >>> a = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5]], dtype=np.float32)
    >>> qa = np.array([[2.0, 0.0, 1.0]], dtype=np.float32)
    >>> plan = plan_tiles(1, 2, threads=1, batch=8, query_tile=8, vocab_tile=1)
    >>> best, found = scan_tiles(lambda qs, qe, vs, ve: qa[qs:qe] @ a[vs:ve].T, 1, 0, 2, plan,
    ...                          np.array([0.1], dtype=np.float32), NumpyOps)
    >>> best.tolist(), [(q.tolist(), r.tolist()) for q, r, _ in found]
    ([1.5], [([0], [0])])
    """
    best = ops.full(n, -math.inf)
    thr = ops.full(n, -math.inf)  # best - margin, kept per query: a row below it cannot change best either
    found: list[tuple[TileArray, TileArray, TileArray]] = []
    qt, vt = plan.query_tile, plan.vocab_tile
    for vs in range(lo, hi, vt):
        ve = min(vs + vt, hi)
        for qs in range(0, n, qt):
            qe = min(qs + qt, n)
            s = score(qs, qe, vs, ve)
            m = ops.rowmax(s)
            hit = ops.nonzero(m >= thr[qs:qe])
            if ops.size(hit):
                rows = hit + qs
                nb = ops.maximum(best[rows], m[hit])
                best[rows] = nb
                t = nb - margin[rows]
                thr[rows] = t
                sub = s[hit]
                i, j = ops.nonzero2(sub >= t[:, None])
                found.append((rows[i], j + vs, sub[i, j]))
    return best, found


def select_candidates(
    parts: Sequence[ScanResult[TileArray]], margin: np.ndarray, n: int, ops: TileOps[TileArray]
) -> tuple[np.ndarray, np.ndarray]:
    """Merge the workers' results: candidates ``(query, row)`` within ``margin`` of the overall best.

    Every query keeps at least its best row; no (query, row) pair appears twice.
    """
    best = ops.to_numpy(parts[0][0]).astype(np.float32)
    for p in parts[1:]:
        best = np.maximum(best, ops.to_numpy(p[0]))
    qi_l, rows_l, sc_l = [], [], []
    for _, found in parts:
        for part_qi, part_rows, part_sc in found:
            qi_l.append(ops.to_numpy(part_qi))
            rows_l.append(ops.to_numpy(part_rows))
            sc_l.append(ops.to_numpy(part_sc))
    if not qi_l:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    qi = np.concatenate(qi_l).astype(np.int64)
    rows = np.concatenate(rows_l).astype(np.int64)
    sc = np.concatenate(sc_l).astype(np.float32)
    keep = sc >= best[qi] - margin[qi]
    return qi[keep], rows[keep]


def rerank_exact(vectors: np.ndarray, q64: np.ndarray, qi: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """``F(z)`` of the module notes from the candidates: the lowest row among the float64 minimisers.

    Returns the rows and how many queries had more than one candidate (they were re-ranked).

    >>> vec = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    >>> rerank_exact(vec, np.array([[0.9, 0.0]]), np.array([0, 0, 0]), np.array([2, 0, 1]))[0].tolist()
    [1]
    """
    n = q64.shape[0]
    out = np.empty(n, dtype=np.int64)
    counts = np.bincount(qi, minlength=n)
    if np.any(counts == 0):  # cannot happen (each query keeps its best row): a bug, never a wrong word
        raise AssertionError("a query has no candidate")
    single = counts[qi] == 1
    out[qi[single]] = rows[single]
    multi = ~single
    if multi.any():
        mq, mr = qi[multi], rows[multi]
        diff = vectors[mr].astype(np.float64) - q64[mq]
        dist = (diff**2).sum(axis=1)
        order = np.lexsort((mr, dist, mq))  # by query, then distance, then row
        first = np.ones(order.size, dtype=bool)
        first[1:] = mq[order][1:] != mq[order][:-1]
        out[mq[order][first]] = mr[order][first]
    return out, int(np.count_nonzero(counts > 1))


def rounding_bound(
    qnorm: np.ndarray,
    q_l1: np.ndarray,
    *,
    max_norm: float,
    max_half_sq: float,
    max_l1: float,
    k: int,
    u_in: float,
    u_acc: float,
    u_out: float = 0.0,
    norm_in_product: bool = True,
) -> np.ndarray:
    """A rigorous bound ``B`` on ``|s~_w - s_w|`` for every word, per query (float64).

    The computed score is a dot product of ``k`` terms with the inputs rounded to unit roundoff
    ``u_in``, accumulated (in any order) with unit roundoff ``u_acc`` and the result rounded to
    ``u_out`` (0: kept in the accumulator's type). With ``norm_in_product`` the product is
    ``[z, 1] . [e_w, -||e_w||^2/2]`` (the float32 path); otherwise it is ``z . e_w`` and
    ``-||e_w||^2/2`` is added in float32 afterwards (the float16 path). Higham, *Accuracy and
    Stability of Numerical Algorithms* (2002), eq. (3.5): ``|fl(x.y) - x.y| <= gamma_k sum |x_i y_i|``,
    ``gamma_k = k u / (1 - k u)``, applied to the rounded inputs, plus ``(2 u_in + u_in^2) sum |x_i y_i|``
    for rounding them; by Cauchy-Schwarz ``sum |x_i y_i| <= ||z|| max||e|| (+ max ||e||^2/2)``. An
    absolute term covers subnormal inputs and products (``2^-24`` per term: float16's spacing, far above
    float32's). The float32 addition of the norm term costs ``2 u32 (|z.e| + ||e||^2/2)`` at most. A
    factor 2 is kept as safety.

    >>> b = rounding_bound(np.array([5.0]), np.array([30.0]), max_norm=10.0, max_half_sq=50.0,
    ...                    max_l1=60.0, k=51, u_in=2.0**-24, u_acc=2.0**-24)
    >>> bool(0 < b[0] < 1e-3)
    True
    """
    gamma = k * u_acc / (1.0 - k * u_acc)
    rel = (2.0 * u_in + u_in * u_in) + gamma * (1.0 + u_in) ** 2
    rel = rel + u_out * (1.0 + rel)
    dot = qnorm * max_norm
    absolute = 2.0**-24 * (q_l1 + max_l1 + k) * (1.0 + gamma)
    if norm_in_product:
        err = rel * (dot + max_half_sq) + absolute
    else:
        err = rel * dot + absolute + 2.0 * _U32 * (dot * (1.0 + rel) + max_half_sq)
    return 2.0 * err


def margin_of(bound: np.ndarray, mag: np.ndarray, reach: np.ndarray, k: int) -> np.ndarray:
    """The candidate margin per query, as float32 rounded up (the module notes' proof).

    ``2B`` with 1 % slack, plus the float32 rounding of ``best - margin`` (``mag``: a bound on
    ``|s_w|``, ``||z|| max||e|| + max||e||^2/2``) and the float64 error of the re-ranking
    distances (``reach = ||z|| + max||e||``, Higham eq. (3.5) for ``k`` terms).

    >>> m = margin_of(np.array([1e-4]), np.array([60.0]), np.array([15.0]), 51)
    >>> bool(m.dtype == np.float32 and m[0] > 2e-4)
    True
    """
    m64 = 2.02 * bound + 4.0 * _U32 * (mag + 3.0 * bound) + 4.0 * (k + 2) * _U64 * reach**2
    m = m64.astype(np.float32)
    return np.nextafter(m, np.float32(np.inf))


class ExactDecoder:
    """Exact nearest-vocabulary-row search: fused, cache-tiled float32 GEMM, candidates re-ranked in float64.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(V, d)`` vocabulary vectors.
    query_block : int
        Queries searched together (their candidates are merged and re-ranked per block).
    vocab_block : int
        Vocabulary rows per score tile.
    threads : int or None
        Worker threads splitting the vocabulary, one BLAS thread each (``None``: one per CPU core).
    neighbours : int
        List length k of the known-source table (0 disables the shortcut).
    query_tile : int
        Queries per score tile (``query_tile x vocab_block`` float32 scores stay in cache).
    precision : {"auto", "float32", "bfloat16"}
        Precision of the score tiles (the words are the same): ``bfloat16`` scores in bfloat16 with
        float32 accumulation and re-ranks within its proven margin (:mod:`textdp.embeddings.bf16`, needs
        torch); ``auto`` takes it when the CPU has bfloat16 arithmetic, the vocabulary has at least
        65,536 rows and a one-off timing (before its first full scan) shows it faster, else float32. ``score_precision`` says
        which one runs.

    Notes
    -----
    The answer is ``F(z)`` of the module notes (lowest row among the float64 minimisers of the
    squared distance), whatever the tile sizes or threads; ``stats["ambiguous"]`` counts the
    queries that had more than one candidate and were re-ranked in float64.

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
        vocab_block: int = 2048,
        threads: int | None = None,
        neighbours: int = 128,
        query_tile: int = 128,
        precision: str = "auto",
    ) -> None:
        from .bf16 import check_precision

        self.precision = check_precision(precision)
        vec = np.asarray(vectors)
        if vec.ndim != 2 or vec.shape[0] == 0:
            raise EmbeddingsError(f"decoder needs a non-empty (V, d) matrix, got shape {vec.shape}")
        self._vectors = vec
        v, d = vec.shape
        self.vocab_size = int(v)
        self.dim = int(d)
        self.query_block = max(1, int(query_block))
        self.vocab_block = max(1, int(vocab_block))
        self.query_tile = max(1, int(query_tile))
        self.threads = _check_threads(threads)
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
        self._max_l1 = float(np.abs(v64).sum(axis=1).max())
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        # known-source table, filled lazily: rows, float64 distances, lower bound outside the list
        self._nb_rows: np.ndarray | None = None
        self._nb_bound: np.ndarray | None = None
        self._nb_have: np.ndarray | None = None
        self._nb_upper: dict[int, float] = {}
        self.stats = {"queries": 0, "known_source": 0, "ambiguous": 0}
        self.bf16_query_tile, self.bf16_vocab_tile = 256, 4096
        self._bf16: Bf16Scorer | None = None
        self._score_precision: str | None = None  # chosen at the first full scan (see score_precision)

    @property
    def score_precision(self) -> str:
        """The precision the score tiles run in: ``float32`` or ``bfloat16`` (``auto`` decided once, here)."""
        if self._score_precision is None:
            with self._lock:
                if self._score_precision is None:
                    self._score_precision = self._choose_precision()
        return self._score_precision

    def set_precision(self, precision: str) -> None:
        """Change :attr:`precision` (``auto``, ``float32``, ``bfloat16``): the words stay the same."""
        from .bf16 import check_precision

        with self._lock:
            self.precision = check_precision(precision)
            self._score_precision, self._bf16 = None, None

    def _choose_precision(self) -> str:
        """``float32`` or ``bfloat16`` for :attr:`precision` here (the bfloat16 tiles built if chosen)."""
        from . import bf16

        if self.precision == "float32":
            return "float32"
        if self.precision == "auto":
            if self.vocab_size < bf16.AUTO_MIN_ROWS or not bf16.has_bf16_arithmetic():
                return "float32"
            try:
                import torch  # noqa: F401
            except ImportError:
                return "float32"
        scorer = bf16.Bf16Scorer(self._vectors, self._sq, self.bf16_vocab_tile)
        if not bf16.probe_decoder(scorer._t, self.bf16_query_tile, scorer.vocab_tile, scorer.k):
            if self.precision == "auto":
                return "float32"
            raise EmbeddingsError("torch's bfloat16 matrix product here does not accumulate in float32, so the "
                                  "bfloat16 decoder's margin does not hold; use precision float32")
        if self.precision == "auto" and not bf16.faster_than_float32(scorer, self._aug, self.bf16_query_tile,
                                                                     scorer.vocab_tile):
            return "float32"
        self._bf16 = scorer
        return "bfloat16"

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_lock"] = None
        state["_bf16"] = None  # rebuilt on first use (torch tensors stay in this process)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # -- tolerances ------------------------------------------------------------------
    def _tolerance(self, qnorm: np.ndarray) -> np.ndarray:
        # |fl(s) - s| <= gamma_{d+1} * sum |a_i z_i| with gamma_k ~ k u; add the float32
        # rounding of the stored vectors/queries themselves. A factor 4 keeps it rigorous.
        # (Used by the known-source table; the full scan uses :func:`rounding_bound`.)
        k = self.dim + 2
        return 4.0 * k * _F32_EPS * (qnorm * self._max_norm + self._max_half_sq + qnorm + 1.0)

    def margins(self, q64: np.ndarray, *, u_in: float = _U32, u_acc: float = _U32, u_out: float = 0.0,
                norm_in_product: bool = True) -> np.ndarray:
        """The float32 candidate margin of each query for scores computed as :func:`rounding_bound` says."""
        qnorm = np.sqrt(np.einsum("ij,ij->i", q64, q64))
        bound = rounding_bound(qnorm, np.abs(q64).sum(axis=1), max_norm=self._max_norm,
                               max_half_sq=self._max_half_sq, max_l1=self._max_l1,
                               k=self._k if norm_in_product else self.dim, u_in=u_in, u_acc=u_acc,
                               u_out=u_out, norm_in_product=norm_in_product)
        return margin_of(bound, qnorm * self._max_norm + self._max_half_sq, qnorm + self._max_norm, self._k)

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

    def plan(self, n_queries: int) -> TilePlan:
        """The tiles and worker ranges of a search of ``n_queries`` (see :func:`plan_tiles`)."""
        return plan_tiles(n_queries, self.vocab_size, threads=self.threads, batch=self.query_block,
                          query_tile=self.query_tile, vocab_tile=self.vocab_block)

    def _augment(self, q64: np.ndarray) -> np.ndarray:
        qa = np.zeros((q64.shape[0], self._k), dtype=np.float32)
        qa[:, : self.dim] = q64
        qa[:, self.dim] = 1.0
        return qa

    def _scan_range(self, qa: np.ndarray, margin: np.ndarray, plan: TilePlan, lo: int, hi: int
                    ) -> ScanResult[np.ndarray]:
        """One worker: float32 score tiles of ``qa`` against rows ``[lo, hi)`` into a private buffer."""
        buf = np.empty(plan.query_tile * min(plan.vocab_tile, hi - lo), dtype=np.float32)
        aug = self._aug

        def score(qs: int, qe: int, vs: int, ve: int) -> np.ndarray:
            out = buf[: (qe - qs) * (ve - vs)].reshape(qe - qs, ve - vs)  # C-contiguous: BLAS writes it
            np.matmul(qa[qs:qe], aug[vs:ve].T, out=out)
            return out

        return scan_tiles(score, qa.shape[0], lo, hi, plan, margin, NumpyOps)

    def _decode_full(self, q64: np.ndarray) -> np.ndarray:
        if self.score_precision == "bfloat16":
            return self._decode_full_bf16(q64)
        out = np.empty(q64.shape[0], dtype=np.int64)
        plan = self.plan(q64.shape[0])
        with self._lock, _blas_single_thread(True):
            for start in range(0, q64.shape[0], plan.batch):
                out[start : start + plan.batch] = self._decode_batch(q64[start : start + plan.batch], plan)
        return out

    def _decode_batch(self, q64: np.ndarray, plan: TilePlan) -> np.ndarray:
        qa = self._augment(q64)
        margin = self.margins(q64)
        if len(plan.ranges) == 1:
            parts = [self._scan_range(qa, margin, plan, *plan.ranges[0])]
        else:
            parts = list(self._executor().map(lambda r: self._scan_range(qa, margin, plan, *r), plan.ranges))
        qi, rows = select_candidates(parts, margin, q64.shape[0], NumpyOps)
        idx, reranked = rerank_exact(self._vectors, q64, qi, rows)
        self.stats["ambiguous"] += reranked
        return idx

    # -- bfloat16 candidates (textdp.embeddings.bf16) --------------------------------------
    def _decode_full_bf16(self, q64: np.ndarray) -> np.ndarray:
        if self._bf16 is None:  # unpickled: rebuild the tiles (the probe passed where it was chosen)
            from .bf16 import Bf16Scorer

            self._bf16 = Bf16Scorer(self._vectors, self._sq, self.bf16_vocab_tile)
        scorer = self._bf16
        torch = scorer._t
        out = np.empty(q64.shape[0], dtype=np.int64)
        plan = plan_tiles(q64.shape[0], self.vocab_size, threads=self.threads, batch=self.query_block,
                          query_tile=self.bf16_query_tile, vocab_tile=scorer.vocab_tile)
        before = torch.get_num_threads()
        try:
            torch.set_num_threads(1)  # our threads split the vocabulary, one torch thread each
            with self._lock, torch.no_grad():
                for start in range(0, q64.shape[0], plan.batch):
                    out[start : start + plan.batch] = self._decode_batch_bf16(scorer, q64[start : start + plan.batch],
                                                                              plan)
        finally:
            torch.set_num_threads(before)
        return out

    def _decode_batch_bf16(self, scorer: Bf16Scorer, q64: np.ndarray, plan: TilePlan) -> np.ndarray:
        qn = np.sqrt(np.einsum("ij,ij->i", q64, q64))
        delta = 4.0 * (self._k + 2) * _U64 * (qn + self._max_norm) ** 2  # margin_of's float64 term
        coef = scorer.bounds(q64, delta)
        qb = scorer.queries(q64)
        qt = min(plan.query_tile, q64.shape[0])
        run = None if len(plan.ranges) == 1 else (lambda fn, rs: list(self._executor().map(fn, rs)))
        qi, rows = scorer.search(qb, coef, plan.ranges, qt, run)
        idx, reranked = rerank_exact(self._vectors, q64, qi, rows)
        self.stats["ambiguous"] += reranked
        return idx

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
