"""Exact decoding on a GPU through PyTorch (optional extra ``[gpu]``; torch is not a core dependency).

The same algorithm as :class:`~textdp.embeddings.ExactDecoder`: float32 scores
``[Z, 1] @ [E, -||E||^2/2]^T`` in vocabulary chunks on the device, the best two
scores per query kept with ``torch.topk``; a query whose runner-up is within the
rigorous float32 rounding bound is re-decided on the CPU in float64. Results are
identical to the numpy decoder. ``best_decoder`` picks this one when a CUDA
device is present and torch is installed, else the numpy one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import require
from .decode import ExactDecoder, _check_queries, _check_sources


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class TorchDecoder:
    """Exact nearest-word decoding with PyTorch on ``device`` (default ``cuda``)."""

    name = "torch"
    exact = True

    def __init__(
        self, vectors: np.ndarray, *, device: str | None = None, query_block: int = 8192, vocab_block: int = 131072
    ) -> None:
        torch: Any = require("torch", "gpu")
        self._torch = torch
        self._cpu = ExactDecoder(vectors)
        self.vocab_size, self.dim = self._cpu.vocab_size, self._cpu.dim
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self._aug = torch.from_numpy(self._cpu._aug).to(self.device)
        self.query_block, self.vocab_block = int(query_block), int(vocab_block)

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """Exact nearest rows, identical to :meth:`ExactDecoder.decode`."""
        torch = self._torch
        q = _check_queries(queries, self.dim)
        _check_sources(sources, q.shape[0], self.vocab_size)
        out = np.empty(q.shape[0], dtype=np.int64)
        for start in range(0, q.shape[0], self.query_block):
            q64 = q[start : start + self.query_block]
            qa = torch.from_numpy(self._cpu._augment(q64)).to(self.device)
            b = qa.shape[0]
            best2 = torch.full((b, 2), -float("inf"), device=self.device)
            idx2 = torch.zeros((b, 2), dtype=torch.int64, device=self.device)
            with torch.no_grad():
                for vs in range(0, self.vocab_size, self.vocab_block):
                    scores = qa @ self._aug[vs : vs + self.vocab_block].T
                    k = min(2, scores.shape[1])
                    v, i = torch.topk(scores, k, dim=1)
                    allv = torch.cat([best2, v], dim=1)
                    alli = torch.cat([idx2, i + vs], dim=1)
                    # stable: earlier (lower) rows first among equal scores
                    order = torch.sort(allv, dim=1, descending=True, stable=True).indices[:, :2]
                    best2 = torch.gather(allv, 1, order)
                    idx2 = torch.gather(alli, 1, order)
            best = best2[:, 0].cpu().numpy()
            second = best2[:, 1].cpu().numpy()
            idx = idx2[:, 0].cpu().numpy().astype(np.int64)
            tol64 = self._cpu._tolerance(np.sqrt(np.einsum("ij,ij->i", q64, q64)))
            amb = np.flatnonzero(second.astype(np.float64) >= best.astype(np.float64) - 1.01 * tol64)
            if amb.size:
                idx[amb] = self._cpu.decode(q64[amb])
            out[start : start + b] = idx
        return out


def best_decoder(vectors: np.ndarray) -> TorchDecoder | ExactDecoder:
    """The fastest exact decoder available here: torch on CUDA if present, else numpy."""
    if cuda_available():
        return TorchDecoder(vectors)
    return ExactDecoder(vectors)
