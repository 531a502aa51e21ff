"""The bfloat16 candidate path of the exact decoder (issue 44): bfloat16 score tiles, proven margins, float64 re-rank.

On a CPU with bfloat16 arithmetic (``avx512_bf16``: ``VDPBF16PS``; ``amx_bf16``: AMX tiles) a bfloat16
matrix product with float32 accumulation runs 3-5x faster than the float32 one. :class:`Bf16Scorer`
scores the vocabulary in bfloat16, keeps every word whose score could still be the best within a
rigorous bound on the score's error, and :func:`~textdp.embeddings.decode.rerank_exact` picks the
answer among them in float64, so the word is ``F(z)`` of :mod:`textdp.embeddings.decode` (the lowest
row among the float64 minimisers of the squared distance), identical to the float32 path's.

The computed score. The vocabulary is sorted by norm (a permutation kept beside it: the answer is
mapped back to the original rows before the re-rank, so ties still go to the lowest original row)
and cut into tiles of ``vocab_tile`` rows; ``N_t`` is the largest norm in tile ``t``. A word's row is
``[e~, h1, h2, h3]`` and a query's ``[z~, 1, 1, 1]`` (``k = d + 3`` columns), where

* ``z~ = bf16(fl32(z))`` and ``e~ = bf16(fl32(e))``, rounded to nearest even by :func:`round_bf16`
  (our own rounding, not the library's): ``|z~_i - z_i| <= u |z_i|`` with ``u = 2^-8 + 2^-23``
  (bfloat16's 8-bit significand after float32's, a double rounding);
* ``h1 + h2 + h3`` is ``n_w = -||e_w||^2 / 2`` (float64) split into three bfloat16 numbers
  (``h1 = bf16(n)``, ``h2 = bf16(n - h1)``, ``h3 = bf16(n - h1 - h2)``, each difference exact in
  float64), so ``|h1 + h2 + h3 - n_w| <= u^3 |n_w| < 2^-23 |n_w|``.

The kernel multiplies bfloat16 pairs exactly (8 + 8 significand bits fit in float32's 24) and
accumulates the ``k`` products in float32, in any order, then rounds the sum to bfloat16 (torch's CPU
bfloat16 GEMM returns bfloat16). With ``gamma_k = k 2^-24 / (1 - k 2^-24)`` (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2002, eq. (3.5)) and Cauchy-Schwarz ``sum |z_i e_i| <= ||z|| N_t``,
the computed score ``s~_w`` of a word ``w`` in tile ``t`` and its true score
``s_w = z . e_w - ||e_w||^2 / 2`` satisfy

    ``|s~_w - s_w| <= B_t(z) + u_o |s~_w|``,
    ``B_t(z) = (2u + u^2) ||z|| N_t + 2^-23 N_t^2 / 2 + gamma_k ((1 + u)^2 ||z|| N_t + 1.01 N_t^2 / 2) + a``

where ``u_o = 2^-8`` is the output rounding (round to nearest: ``|fl(x) - x| <= u_o |fl(x)|``) and
``a = 2^-100 k (1 + ||z||)(1 + N_t)`` covers what the relative bounds miss below float32's normal range
(``2^-126``): subnormal inputs (rounded with an absolute error under ``2^-133``, or read as zero) and
products, sums and results flushed to zero (the bfloat16 instructions flush subnormals).
:meth:`Bf16Scorer.bounds` doubles ``B_t`` and adds ``2^-16`` to ``u_o`` as slack for the float64
evaluation of the bounds.

Why the candidate set holds the answer. Define per word the interval ``L_w <= s_w <= U_w`` with
``U_w = s~_w + u_o |s~_w| + B_t``, ``L_w = s~_w - u_o |s~_w| - B_t``, and let ``delta`` be the float64
re-ranking error term of the module notes of :mod:`textdp.embeddings.decode` (a float64 minimiser
``w`` of ``D`` has ``s_w >= s_u - delta`` for every ``u``). Then for every minimiser ``w``,
``U_w >= s_w >= max_u s_u - delta >= Lbest - delta`` with ``Lbest = max_u L_u``. ``U`` and ``L`` are
increasing in ``s~``, so a tile's largest ``L`` is ``L`` of its row maximum. The search runs in two
passes (:meth:`Bf16Scorer.search`): pass 1 computes every tile and keeps only its row maxima, which
give ``Lbest``; pass 2 scores again only the (query, tile) pairs whose row maximum ``m`` has
``U(m) >= Lbest - delta`` (a minimiser's tile is among them, since ``m >= s~_w``) and keeps every word
with ``U_w >= Lbest - delta``, i.e. ``s~_w >= U_t^{-1}(Lbest - delta)`` (computed in float64 and
lowered to a float32 before the comparison). Pass 2's scores need not repeat pass 1's bits: any
computed score obeys the bound, so the minimisers pass the test either way. The float64 re-rank of
the kept words (:func:`~textdp.embeddings.decode.rerank_exact`) returns ``F(z)``.

The assumptions (exact bfloat16 products, float32 accumulation, bfloat16 output rounded to nearest)
are what oneDNN's ``avx512_bf16``/AMX kernels and torch's reference GEMM do; :func:`probe_decoder`
checks them on every shape the decoder multiplies (full tiles, and the few-row products of pass 2)
when the path is set up (cancellations that a bfloat16 accumulation would lose, and random products
against the bound), and the path is refused if they fail.

Timing. Like the float32 path's, the work of a search (how many tile rows pass 2 scores again, how
many words are re-ranked) is a function of the noisy vectors alone: the decoder is never given the
input words. The ``auto`` choice times random vectors, never the data.

Choosing it. ``precision="auto"`` (the default) takes this path when torch is importable, the CPU
lists ``avx512_bf16`` or ``amx_bf16`` in ``/proc/cpuinfo``, the vocabulary has at least
:data:`AUTO_MIN_ROWS` rows, the probe passes, and a one-off timing of one tile
(:func:`faster_than_float32`) shows it faster; ``"bfloat16"`` forces it (emulated by torch, slowly,
on a CPU without bfloat16 arithmetic: still the same words), ``"float32"`` never takes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from .._options import DECODER_PRECISIONS
from .._rng import make_rng
from ..errors import EmbeddingsError, ParameterError

if TYPE_CHECKING:
    import torch

_Item = TypeVar("_Item")
_Out = TypeVar("_Out")


class RangeMap(Protocol):
    """``run(fn, items)``: ``[fn(x) for x in items]``, on threads or not (:meth:`Bf16Scorer.search`)."""

    def __call__(self, fn: Callable[[_Item], _Out], items: Sequence[_Item], /) -> list[_Out]: ...

#: the CPU flags that mean bfloat16 arithmetic (``/proc/cpuinfo``)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: ``auto`` below this many rows stays float32 (the timing and the bfloat16 copy do not pay)
AUTO_MIN_ROWS = 65_536

_U = 2.0**-8 + 2.0**-23  # bf16(fl32(x)): double rounding
_UO = 2.0**-8 + 2.0**-16  # the output's rounding, with slack for the float64 evaluation
_U32 = 2.0**-24
_U64 = 2.0**-53


def check_precision(precision: object) -> str:
    """``precision`` if it is one of :data:`DECODER_PRECISIONS`, else a one-line error."""
    if precision not in DECODER_PRECISIONS:
        raise ParameterError(f"decoder precision must be one of {', '.join(DECODER_PRECISIONS)}, got {precision!r}")
    return str(precision)


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_bf16_arithmetic() -> bool:
    """True when the CPU lists bfloat16 instructions (``avx512_bf16`` or ``amx_bf16``)."""
    return any(f in cpu_flags() for f in BF16_FLAGS)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (``uint16``) of finite float32 values, rounded to nearest, ties to even.

    >>> round_bf16(np.array([1.0, 1.00390625, 1.01171875, -3.0], dtype=np.float32)).tolist()
    [16256, 16256, 16258, 49216]
    """
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return r.astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def split3(n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` (float64) as three bfloat16 patterns whose sum is within ``2^-23 |n|`` of it.

    >>> h = split3(np.array([-12.345678]))
    >>> bool(abs(sum(bf16_values(x).astype(np.float64) for x in h)[0] + 12.345678) < 2e-6)
    True
    """
    parts = []
    r = np.asarray(n, dtype=np.float64)
    for _ in range(3):
        h = round_bf16(r.astype(np.float32))
        parts.append(h)
        r = r - bf16_values(h).astype(np.float64)  # exact: h is within 2^-7 |r| of r
    return parts[0], parts[1], parts[2]


def _torch() -> ModuleType:
    from ..errors import require

    return require("torch", "gpu")


def _as_bf16(torch: ModuleType, bits: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(torch.bfloat16)


def probe(torch: ModuleType, rows: int, cols: int, k: int, seed: int = 0,
          matmul: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> bool:
    """Whether torch's bfloat16 GEMM of this shape meets the proof's assumptions (see the module notes).

    Rows of the query tile hold ``+256`` and ``-256`` at random positions and ``1`` elsewhere against
    a tile of ones: the exact sum ``k - 2`` is lost by any bfloat16 accumulation (``256 + 1`` rounds to
    ``256``) and kept by a float32 one. The other rows are random products, checked against the float32
    accumulation bound and the output's rounding. ``matmul(q_bits, e_bits)`` replaces torch's product
    (tests: a planted bfloat16 accumulation must fail).
    """
    gen = make_rng(seed)  # a fixed public self-check: the same verdict at every load (the one factory)
    rows, cols = max(rows, 1), max(cols, 2)
    q = round_bf16(gen.standard_normal((rows, k)).astype(np.float32) * 4)
    e = round_bf16(gen.standard_normal((cols, k)).astype(np.float32) * 4)
    half = max(1, rows // 2)
    qv = np.ones((half, k), dtype=np.float32)
    for r in range(half):
        i, j = gen.choice(k, 2, replace=False)
        qv[r, i], qv[r, j] = 256.0, -256.0
    q[:half] = round_bf16(qv)
    e[: cols // 2] = round_bf16(np.ones((cols // 2, k), dtype=np.float32))
    if matmul is None:
        with torch.no_grad():
            s = (_as_bf16(torch, q) @ _as_bf16(torch, e).T).float().numpy().astype(np.float64)
    else:
        s = np.asarray(matmul(q, e), dtype=np.float64)
    if s.shape != (rows, cols) or not np.all(s[:half, : cols // 2] == k - 2):
        return False
    q64, e64 = bf16_values(q).astype(np.float64), bf16_values(e).astype(np.float64)
    exact = q64 @ e64.T
    gamma = k * _U32 / (1 - k * _U32)
    bound = gamma * (np.abs(q64) @ np.abs(e64).T) + 2.0**-8 * np.abs(s) + 1e-30
    return bool(np.all(np.abs(s - exact) <= bound))


def probe_decoder(torch: ModuleType, query_tile: int, vocab_tile: int, k: int) -> bool:
    """:func:`probe` on every shape the decoder multiplies: full tiles (pass 1) and 1, 2, 3, 17 rows (pass 2)."""
    shapes = {(query_tile, vocab_tile), (1, vocab_tile), (2, vocab_tile), (3, vocab_tile), (17, vocab_tile),
              (query_tile, 7)}
    return all(probe(torch, r, c, k, seed=i) for i, (r, c) in enumerate(sorted(shapes)))


class Bf16Scorer:
    """The bfloat16 tiles of one vocabulary: rows sorted by norm, split norms, per-tile norm bounds.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(V, d)`` vocabulary vectors (as the decoder re-ranks them).
    sq : numpy.ndarray
        ``||e_w||^2`` in float64.
    vocab_tile : int
        Rows per score tile (the norm bound ``N_t`` is per tile).
    """

    def __init__(self, vectors: np.ndarray, sq: np.ndarray, vocab_tile: int) -> None:
        torch = _torch()
        self._t = torch
        v, d = vectors.shape
        self.dim, self.k, self.vocab_tile = int(d), int(d) + 3, max(1, int(vocab_tile))
        norms = np.sqrt(sq)
        self.perm = np.argsort(norms, kind="stable").astype(np.int64)
        bits = np.empty((v, self.k), dtype=np.uint16)
        for s in range(0, v, 65536):  # chunks: no float32 copy of the whole matrix at once
            p = self.perm[s : s + 65536]
            bits[s : s + p.size, :d] = round_bf16(np.asarray(vectors[p], dtype=np.float32))
            h = split3(-0.5 * sq[p])
            for c in range(3):
                bits[s : s + p.size, d + c] = h[c]
        self.e = _as_bf16(torch, bits)
        ns = norms[self.perm]
        ntiles = -(-v // self.vocab_tile)
        tmax = np.array([ns[i * self.vocab_tile : (i + 1) * self.vocab_tile].max() for i in range(ntiles)])
        self.tile_norm = tmax * (1.0 + 1e-12) + 1e-300
        self.max_norm = float(ns.max())
        self.vocab_size = int(v)

    def queries(self, q64: np.ndarray) -> torch.Tensor:
        """The ``[z~, 1, 1, 1]`` rows of the queries (bfloat16 tensor)."""
        bits = np.empty((q64.shape[0], self.k), dtype=np.uint16)
        bits[:, : self.dim] = round_bf16(q64.astype(np.float32))
        bits[:, self.dim :] = round_bf16(np.ones(3, dtype=np.float32))
        return _as_bf16(self._t, bits)

    def bounds(self, q64: np.ndarray, delta: np.ndarray) -> dict[str, np.ndarray]:
        """Per query the coefficients of ``B_t(z) = c1 N_t + c2 N_t^2 + c0 (1 + N_t)`` (doubled) and ``delta``."""
        qn = np.sqrt(np.einsum("ij,ij->i", q64, q64))
        k = self.k
        gamma = k * _U32 / (1.0 - k * _U32)
        c1 = ((2 * _U + _U * _U) + gamma * (1 + _U) ** 2) * qn
        c2 = np.full_like(qn, (2.0**-23 + 1.01 * gamma) / 2.0)
        c0 = 2.0**-100 * k * (1.0 + qn)
        return {"c1": 2.0 * c1, "c2": 2.0 * c2, "c0": 2.0 * c0, "delta": np.asarray(delta, dtype=np.float64)}

    def tile_bounds(self, coef: dict[str, np.ndarray], lo: int, hi: int) -> np.ndarray:
        """``B_t(z)`` of the tiles of sorted rows ``[lo, hi)``: ``(queries, tiles)``."""
        nt = self.tile_norm[lo // self.vocab_tile : -(-hi // self.vocab_tile)][None, :]
        return coef["c1"][:, None] * nt + coef["c2"][:, None] * nt * nt + coef["c0"][:, None] * (1.0 + nt)

    def row_maxima(self, qb: torch.Tensor, lo: int, hi: int, query_tile: int) -> np.ndarray:
        """Pass 1 of one worker: the computed row maximum of every (query, tile) of sorted rows ``[lo, hi)``."""
        torch = self._t
        n, vt = int(qb.shape[0]), self.vocab_tile
        out = np.empty((n, -(-(hi - lo) // vt)))
        for c, vs in enumerate(range(lo, hi, vt)):
            et = self.e[vs : min(vs + vt, hi)].T
            for qs in range(0, n, query_tile):
                out[qs : qs + query_tile, c] = _row_max(torch, torch.mm(qb[qs : qs + query_tile], et))
        return out

    def collect(self, qb: torch.Tensor, coef: dict[str, np.ndarray], lbest: np.ndarray, m: np.ndarray, lo: int, hi: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """Pass 2 of one worker: ``(query, sorted row)`` of every word with ``U_w >= Lbest - delta``.

        Only the (query, tile) pairs whose row maximum passes the test are scored again.
        """
        torch = self._t
        b = self.tile_bounds(coef, lo, hi)
        target = (lbest - coef["delta"])[:, None]
        thr = _u_inverse(target - b)  # U_t(s~) >= target  <=>  s~ >= thr
        ok = m >= thr
        qi_l, rows_l = [], []
        vt = self.vocab_tile
        for c in np.flatnonzero(ok.any(axis=0)):
            vs = lo + int(c) * vt
            hit = np.flatnonzero(ok[:, c])
            s = torch.mm(qb[torch.from_numpy(hit)], self.e[vs : min(vs + vt, hi)].T).float()
            i, j = (s >= torch.from_numpy(_lower32(thr[hit, c]))[:, None]).nonzero(as_tuple=True)
            qi_l.append(hit[i.numpy()])
            rows_l.append(j.numpy() + vs)
        if not qi_l:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(qi_l), np.concatenate(rows_l)

    def lower(self, m: np.ndarray, coef: dict[str, np.ndarray], lo: int, hi: int) -> np.ndarray:
        """``max_t L`` over the tiles of ``[lo, hi)`` from their row maxima (``L`` increases with ``s~``)."""
        return (m - _UO * np.abs(m) - self.tile_bounds(coef, lo, hi)).max(axis=1)

    def search(self, qb: torch.Tensor, coef: dict[str, np.ndarray], ranges: Sequence[tuple[int, int]], query_tile: int,
               run: RangeMap | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Both passes over ``ranges`` (``run(fn, ranges)`` maps them, on threads or not).

        Returns ``(query, original row)`` candidates: every float64 minimiser is among them.
        """
        run = run or (lambda fn, rs: [fn(r) for r in rs])
        maxima = run(lambda r: self.row_maxima(qb, r[0], r[1], query_tile), ranges)
        lbest = np.max([self.lower(m, coef, *r) for m, r in zip(maxima, ranges)], axis=0)
        parts = run(lambda x: self.collect(qb, coef, lbest, x[1], *x[0]), list(zip(ranges, maxima)))
        qi = np.concatenate([p[0] for p in parts]).astype(np.int64)
        rows = np.concatenate([p[1] for p in parts]).astype(np.int64)
        if np.unique(qi).size != qb.shape[0]:
            raise EmbeddingsError("the bfloat16 search kept no candidate for a query (a bug: its best row passes)")
        return qi, self.perm[rows]


def _row_max(torch: ModuleType, s: torch.Tensor) -> np.ndarray:
    """Row maxima (float64) of a bfloat16 tile, from one integer min-max pass over its bit patterns.

    As int16, the bit patterns of non-negative bfloat16 numbers order like the numbers and lie above
    every negative one's; those of negative numbers order in reverse. So a row's largest pattern is its
    maximum when it is not negative, and otherwise (all negative) its smallest pattern is.
    """
    ints = s.view(torch.int16)
    hi_np = ints.amax(dim=1).numpy()
    neg = np.flatnonzero(hi_np < 0)
    if neg.size:  # rows with only negative scores: their least pattern
        hi_np[neg] = ints[torch.from_numpy(neg)].amin(dim=1).numpy()
    bits = hi_np.view(np.uint16)
    return bf16_values(bits).astype(np.float64)


def _u_inverse(y: np.ndarray) -> np.ndarray:
    """The least ``s`` with ``s + u_o |s| >= y`` (float64; the caller lowers it before comparing)."""
    return np.where(y >= 0, y / (1.0 + _UO), y / (1.0 - _UO))


def _lower32(x: np.ndarray) -> np.ndarray:
    """float32 values not above ``x`` (float64): a comparison with them keeps everything ``>= x``."""
    x32 = x.astype(np.float32)
    return np.where(x32.astype(np.float64) > x, np.nextafter(x32, np.float32(-np.inf)), x32).astype(np.float32)


def faster_than_float32(scorer: Bf16Scorer, aug32: np.ndarray, query_tile: int, vocab_tile: int,
                        repeats: int = 5) -> bool:
    """A one-off timing at load: one bfloat16 score tile (with its row maxima) against the float32 one."""
    torch = scorer._t
    rows = min(vocab_tile, aug32.shape[0], scorer.vocab_size)
    # timing inputs only (their values change no choice's correctness): the one factory, fresh entropy
    q64 = make_rng().standard_normal((query_tile, scorer.dim))
    qb, eb = scorer.queries(q64), scorer.e[:rows].T
    qa = np.ones((query_tile, aug32.shape[1]), dtype=np.float32)
    qa[:, : scorer.dim] = q64
    e32 = aug32[:rows].T
    out = np.empty((query_tile, rows), dtype=np.float32)
    best16 = best32 = math.inf
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(4):
                torch.mm(qb, eb).amax(dim=1)
            best16 = min(best16, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for _ in range(4):
                np.matmul(qa, e32, out=out).max(axis=1)
            best32 = min(best32, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return best16 * 1.2 < best32


__all__ = ["AUTO_MIN_ROWS", "BF16_FLAGS", "DECODER_PRECISIONS", "Bf16Scorer", "check_precision", "cpu_flags",
           "faster_than_float32", "has_bf16_arithmetic", "probe", "probe_decoder", "round_bf16", "split3"]
