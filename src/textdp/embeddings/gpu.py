"""Exact decoding through PyTorch on a GPU (or CPU), same tiles, same proof (optional extra ``[gpu]``).

:class:`TorchDecoder` runs the numpy decoder's fused search (:func:`~textdp.embeddings.decode.plan_tiles`,
:func:`~textdp.embeddings.decode.scan_tiles`) with torch tensors on ``device``: float32 scores
``[Z, 1] @ [E, -||E||^2/2]^T`` per tile, reduced to a running maximum on the device, candidates within
the rigorous margin ``2B`` collected and re-ranked in float64 on the CPU. Its rows are therefore
identical to :class:`~textdp.embeddings.ExactDecoder`'s (the module notes of
:mod:`textdp.embeddings.decode` prove it for any bound ``B`` that holds).

``precision="float16"`` is the lower-precision candidate path: ``z . e_w`` is computed from float16
inputs (tensor cores on a GPU), its float16 result is widened and ``-||e_w||^2/2`` added in float32;
``B`` (:func:`~textdp.embeddings.decode.rounding_bound`) counts float16's unit roundoff ``2^-11`` for
the inputs and the output and float32's for the accumulation, which is what torch does: on CUDA with
``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction`` off (the decoder turns it off
during a decode and restores it; cuBLAS then computes in float32) unless float16 accumulation was
allowed (``allow_fp16_accumulation``), on a CPU unless reduced-precision reduction was allowed there
(torch's CPU GEMMs otherwise accumulate in float32, the ``opmath`` type). When torch allows float16
accumulation, or cannot say, the bound takes float16's unit roundoff for it (wider margins, same rows). The wider candidate sets are re-ranked exactly:
same rows, fewer bits moved and multiplied. A batch whose values could overflow float16 is scored in
float32 instead. float32 matmuls that torch is allowed to run in TF32 or bfloat16
(``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision``) get the bound
of that precision. ``best_decoder`` picks this decoder when a CUDA device is present.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError, require
from .decode import (
    ExactDecoder,
    TilePlan,
    _check_queries,
    _check_sources,
    _check_threads,
    plan_tiles,
    rerank_exact,
    scan_tiles,
    select_candidates,
)

if TYPE_CHECKING:
    import torch

PRECISIONS = ("float32", "float16")
_U16 = 2.0**-11
_F16_SAFE = 30000.0  # |score terms| below this: no float16 overflow anywhere in a tile


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class TorchOps:
    """:func:`~textdp.embeddings.decode.scan_tiles`' array operations on torch tensors (one device)."""

    def __init__(self, torch: ModuleType, device: torch.device) -> None:
        self.torch, self.device = torch, device

    def full(self, n: int, value: float) -> torch.Tensor:
        return self.torch.full((n,), value, dtype=self.torch.float32, device=self.device)

    @staticmethod
    def rowmax(s: torch.Tensor) -> torch.Tensor:
        return s.amax(dim=1)

    def maximum(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.torch.maximum(a, b)

    @staticmethod
    def nonzero(mask: torch.Tensor) -> torch.Tensor:
        return mask.nonzero(as_tuple=True)[0]

    @staticmethod
    def nonzero2(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, j = mask.nonzero(as_tuple=True)
        return i, j

    @staticmethod
    def size(x: torch.Tensor) -> int:
        return int(x.shape[0])

    @staticmethod
    def to_numpy(x: torch.Tensor) -> np.ndarray:
        return np.asarray(x.detach().cpu().numpy())


class TorchDecoder:
    """Exact nearest-word decoding with PyTorch on ``device``: identical rows to :class:`ExactDecoder`.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(V, d)`` vocabulary vectors.
    device : str or None
        ``"cuda"`` when available, else ``"cpu"``.
    precision : {"float32", "float16"}
        Score precision of the tiles (float16: the lower-precision candidate path; same rows).
    query_block, query_tile, vocab_block : int or None
        Queries per re-ranked block, queries and vocabulary rows per score tile (defaults sized
        for a GPU's memory, or for a CPU cache on ``cpu``).
    threads : int or None
        torch's CPU threads during a decode (restored after); ``None`` leaves torch's setting.

    Examples
    --------
    >>> import numpy as np
    >>> vec = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> TorchDecoder(vec, device="cpu", precision="float16").decode(np.array([[0.9, 0.2]])).tolist()
    [1]
    """

    name = "torch"
    exact = True

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        device: str | None = None,
        precision: str = "float32",
        query_block: int | None = None,
        query_tile: int | None = None,
        vocab_block: int | None = None,
        threads: int | None = None,
    ) -> None:
        require("torch", "gpu")  # the install hint when it is missing
        import torch

        if precision not in PRECISIONS:
            raise ParameterError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self._torch = torch
        self._cpu = ExactDecoder(vectors, threads=1)
        self.vocab_size, self.dim = self._cpu.vocab_size, self._cpu.dim
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        on_cpu = self.device.type == "cpu"
        self.precision = precision
        self.threads = None if threads is None else _check_threads(threads)
        self.query_block = int(query_block or (1024 if on_cpu else 16384))
        self.query_tile = int(query_tile or (512 if on_cpu else 4096))
        self.vocab_block = int(vocab_block or (4096 if on_cpu else 32768))
        self._aug32 = torch.from_numpy(self._cpu._aug).to(self.device)
        big = float(np.abs(self._cpu._aug[:, : self.dim]).max())
        self._e16 = (self._aug32[:, : self.dim].to(torch.float16).contiguous()
                     if precision == "float16" and big < _F16_SAFE else None)
        self._norm32 = self._aug32[:, self.dim].contiguous()  # -||e||^2/2 in float32
        self._ops = TorchOps(torch, self.device)
        self.stats = {"queries": 0, "ambiguous": 0, "float32_batches": 0}

    def _u32_in(self) -> float:
        """Input unit roundoff of a float32 matmul as torch may run it (TF32 / bfloat16 allowed?)."""
        torch = self._torch
        prec = torch.get_float32_matmul_precision()
        u = {"highest": 2.0**-24, "high": 2.0**-11}.get(prec, 2.0**-8)
        if self.device.type == "cuda" and bool(torch.backends.cuda.matmul.allow_tf32):
            u = max(u, 2.0**-11)
        return u

    def _u16_acc(self) -> float:
        """Unit roundoff of a float16 GEMM's accumulation as torch is configured (float16 when unknown)."""
        c = self._torch._C
        if self.device.type == "cuda":  # reduced-precision reduction is off during a decode
            getter = getattr(c, "_get_cublas_allow_fp16_accumulation", None)
        else:
            getter = getattr(c, "_get_cpu_allow_fp16_reduced_precision_reduction", None)
        return _U16 if getter is None or bool(getter()) else 2.0**-24

    def plan(self, n_queries: int) -> TilePlan:
        """The tiles of a search (one range: the device parallelises inside a tile)."""
        return plan_tiles(n_queries, self.vocab_size, threads=1, batch=self.query_block,
                          query_tile=self.query_tile, vocab_tile=self.vocab_block)

    @contextlib.contextmanager
    def _torch_settings(self) -> Iterator[None]:
        """torch's CPU threads (``threads``) and float32 accumulation of float16 GEMMs on CUDA, restored after."""
        torch = self._torch
        threads_before = torch.get_num_threads()
        cuda16 = self.device.type == "cuda" and self.precision == "float16"
        reduced_before = bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction) if cuda16 else False
        try:
            if self.threads is not None and self.device.type == "cpu":
                torch.set_num_threads(self.threads)
            if cuda16:
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            yield
        finally:
            if self.threads is not None and self.device.type == "cpu":
                torch.set_num_threads(threads_before)
            if cuda16:
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = reduced_before

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """Exact nearest rows, identical to :meth:`ExactDecoder.decode` (``sources`` is only validated)."""
        q = _check_queries(queries, self.dim)
        _check_sources(sources, q.shape[0], self.vocab_size)
        out = np.empty(q.shape[0], dtype=np.int64)
        plan = self.plan(q.shape[0])
        with self._torch_settings(), self._torch.no_grad():
            for start in range(0, q.shape[0], plan.batch):
                q64 = q[start : start + plan.batch]
                out[start : start + q64.shape[0]] = self._decode_batch(q64, plan)
        self.stats["queries"] += int(q.shape[0])
        return out

    def _decode_batch(self, q64: np.ndarray, plan: TilePlan) -> np.ndarray:
        import torch  # imported by __init__ already
        qa_np = self._cpu._augment(q64)
        qnorm = np.sqrt((q64**2).sum(axis=1))
        use16 = (self._e16 is not None and float(np.abs(q64).max()) < _F16_SAFE
                 and bool(np.all(qnorm * self._cpu._max_norm < _F16_SAFE)))
        score: Callable[[int, int, int, int], torch.Tensor]
        if use16:
            # float64 -> float32 -> float16: the inputs' rounding is u16 + u32 at most
            margin_np = self._cpu.margins(q64, u_in=_U16 + 2.0**-23, u_acc=self._u16_acc(), u_out=_U16,
                                          norm_in_product=False)
            q16 = torch.from_numpy(qa_np[:, : self.dim]).to(self.device).to(torch.float16)
            e16, norm32 = self._e16, self._norm32
            assert e16 is not None  # use16 checked it

            def score(qs: int, qe: int, vs: int, ve: int) -> torch.Tensor:
                return (q16[qs:qe] @ e16[vs:ve].T).float() + norm32[vs:ve]
        else:
            self.stats["float32_batches"] += int(self.precision == "float16")
            margin_np = self._cpu.margins(q64, u_in=self._u32_in())
            qa, aug = torch.from_numpy(qa_np).to(self.device), self._aug32

            def score(qs: int, qe: int, vs: int, ve: int) -> torch.Tensor:
                return qa[qs:qe] @ aug[vs:ve].T

        margin = torch.from_numpy(margin_np).to(self.device)
        parts = [scan_tiles(score, q64.shape[0], *plan.ranges[0], plan, margin, self._ops)]
        qi, rows = select_candidates(parts, margin_np, q64.shape[0], self._ops)
        idx, reranked = rerank_exact(self._cpu._vectors, q64, qi, rows)
        self.stats["ambiguous"] += reranked
        return idx


def best_decoder(vectors: np.ndarray) -> TorchDecoder | ExactDecoder:
    """The fastest exact decoder available here: torch on CUDA if present, else numpy."""
    if cuda_available():
        return TorchDecoder(vectors)
    return ExactDecoder(vectors)


__all__ = ["PRECISIONS", "TorchDecoder", "TorchOps", "best_decoder", "cuda_available"]
