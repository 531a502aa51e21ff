"""Exact nearest-word decoding (the paper's Vec^{-1}, Algorithm 2).

A noisy vector ``z`` decodes to the vocabulary row ``w`` that minimises the
Euclidean distance ``||z - e_w||``. Since ``||z - e_w||^2 = ||z||^2 - 2 (e_w . z
- ||e_w||^2 / 2)``, the nearest word maximises the score ``e_w . z - ||e_w||^2 / 2``.
The norm term is folded into one augmented matrix ``A = [E, -||E||^2/2]``
(``V x (d+1)``, float32, built once) so that the scores of a block of queries are
one matrix product ``[Z, 1] @ A.T``: BLAS does all the work on every core, and
there is no Python loop over the vocabulary. Queries and vocabulary are
processed in blocks so the score matrix stays small (a few MB) whatever V is.

Exactness. Float32 products can mis-order two words whose scores differ by
less than the rounding error. Every query whose best float32 score has a rival
within a rigorous rounding bound is re-decoded in float64 against the whole
vocabulary (this is rare: well under 1% of queries on GloVe). The result is the
argmin of the float64 squared distance, and ties (equal vectors) go to the
lowest row, i.e. the most frequent word: deterministic.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmbeddingsError

_F32_EPS = float(np.finfo(np.float32).eps)


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

    Examples
    --------
    >>> dec = ExactDecoder(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> dec.decode(np.array([[0.9, 0.2], [0.1, 0.1], [-1.0, 2.0]])).tolist()
    [1, 0, 2]
    """

    def __init__(self, vectors: np.ndarray, *, query_block: int = 512, vocab_block: int = 8192) -> None:
        vec = np.asarray(vectors)
        if vec.ndim != 2 or vec.shape[0] == 0:
            raise EmbeddingsError(f"decoder needs a non-empty (V, d) matrix, got shape {vec.shape}")
        self._vectors = vec
        v, d = vec.shape
        self.vocab_size = int(v)
        self.dim = int(d)
        self.query_block = int(query_block)
        self.vocab_block = int(vocab_block)
        aug = np.empty((v, d + 1), dtype=np.float32)
        aug[:, :d] = vec
        sq = np.einsum("ij,ij->i", vec.astype(np.float64), vec.astype(np.float64))
        aug[:, d] = (-0.5 * sq).astype(np.float32)
        self._aug = aug
        self._max_norm = float(np.sqrt(sq.max()))
        self._max_half_sq = float(0.5 * sq.max())

    def _tolerance(self, qnorm: np.ndarray) -> np.ndarray:
        # |fl(s) - s| <= gamma_{d+1} * sum |a_i z_i| with gamma_k ~ k u; add the float32
        # rounding of the stored vectors/queries themselves. A factor 4 keeps it rigorous.
        k = self.dim + 2
        return 4.0 * k * _F32_EPS * (qnorm * self._max_norm + self._max_half_sq + qnorm + 1.0)

    def decode(self, queries: np.ndarray) -> np.ndarray:
        """Row index of the nearest vocabulary vector for each query (``(B, d)`` -> ``(B,)``)."""
        q = np.asarray(queries, dtype=np.float64)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise EmbeddingsError(
                f"queries have shape {np.shape(queries)}, expected (B, {self.dim}) to match the embeddings"
            )
        if not np.all(np.isfinite(q)):
            raise EmbeddingsError("queries contain NaN or infinite values")
        out = np.empty(q.shape[0], dtype=np.int64)
        for start in range(0, q.shape[0], self.query_block):
            out[start : start + self.query_block] = self._decode_block(q[start : start + self.query_block])
        return out

    def _decode_block(self, q64: np.ndarray) -> np.ndarray:
        b = q64.shape[0]
        qa = np.ones((b, self.dim + 1), dtype=np.float32)
        qa[:, : self.dim] = q64
        best = np.full(b, -np.inf, dtype=np.float32)
        best_idx = np.zeros(b, dtype=np.int64)
        tol = self._tolerance(np.sqrt(np.einsum("ij,ij->i", q64, q64))).astype(np.float32)
        ambiguous = np.zeros(b, dtype=bool)
        rows = np.arange(b)
        for vs in range(0, self.vocab_size, self.vocab_block):
            scores = qa @ self._aug[vs : vs + self.vocab_block].T
            arg = np.argmax(scores, axis=1)
            top = scores[rows, arg]
            # rivals within tolerance inside this block (count > 1 means a near-tie)
            near = (scores >= (top - tol)[:, None]).sum(axis=1) > 1
            better = top > best
            # a near-tie across blocks: the new top is within tol of the old best or vice versa
            cross = np.abs(top - best) <= tol
            ambiguous = np.where(better, near | cross, ambiguous | cross)
            best = np.where(better, top, best)
            best_idx = np.where(better, vs + arg, best_idx)
        if ambiguous.any():
            best_idx[ambiguous] = self._exact64(q64[ambiguous])
        return best_idx

    def _exact64(self, q64: np.ndarray) -> np.ndarray:
        """Float64 argmin of squared distance; ties to the lowest row."""
        out = np.empty(q64.shape[0], dtype=np.int64)
        for i in range(q64.shape[0]):  # only the rare near-tie queries reach here
            best_val = np.inf
            best_row = 0
            for vs in range(0, self.vocab_size, 65536):
                block = self._vectors[vs : vs + 65536].astype(np.float64)
                diff = block - q64[i]
                dist = np.einsum("ij,ij->i", diff, diff)
                j = int(np.argmin(dist))
                if dist[j] < best_val:
                    best_val, best_row = float(dist[j]), vs + j
            out[i] = best_row
        return out


def nearest_words(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """One-shot exact decoding of ``queries`` against ``vectors`` (see :class:`ExactDecoder`).

    >>> nearest_words(np.eye(3), np.array([[0.1, 0.9, 0.0]])).tolist()
    [1]
    """
    return ExactDecoder(vectors).decode(queries)
