"""Decoders besides the numpy :class:`~textdp.embeddings.ExactDecoder`, and the factory.

Every decoder has ``decode(Z, sources=None) -> int64 rows``, a ``name`` and an
``exact`` flag.

* ``exact`` — :class:`~textdp.embeddings.ExactDecoder` (numpy/BLAS, no extra).
* ``faiss-exact`` — faiss ``IndexFlatL2`` (extra ``[faiss]``) returns the k best
  candidates in float32; they are re-ranked in float64, and the answer is
  certified exact when the k-th float32 distance minus a rigorous rounding bound
  exceeds the best float64 distance. Uncertified queries (rare) go to the numpy
  decoder, so the result is *identical* to ``exact``.
* ``torch`` — the numpy decoder's fused tiles on a GPU through PyTorch (extra ``[gpu]``), same
  proof, same results; ``make_decoder("torch", E, precision="float16")`` is the lower-precision
  candidate path (float16 tiles, exact float64 re-ranking: still the same rows); see
  :mod:`textdp.embeddings.gpu`.
* ``approximate`` (``hnsw``) and ``ivf`` — faiss HNSW or IVF-Flat (extra ``[faiss]``),
  built once per vocabulary and cached on disk; the k candidates are re-ranked in
  float64. The source word is never added as a candidate (``sources`` is ignored):
  the released word is then a function of the noisy vector alone, i.e.
  post-processing against a public vocabulary, so approximation does not weaken
  the privacy guarantee; it changes utility (measured top-1 agreement with exact
  decoding is in BENCHMARKS.md). Statistical tests of the mechanism use exact
  decoding. For the same reason a damaged or altered cached index cannot leak the
  input words; it can only hurt utility. It is still private state (issue 39): the index
  folder passes the ancestor rule (:func:`textdp._cache.open_private_dir`), an index is read
  once through that descriptor and used only if its HMAC under the per-user key verifies;
  one planted or edited by anyone else is ignored (a one-line
  :class:`~textdp.errors.CacheWarning`) and built again, so a hostile file never reaches
  faiss's deserializer.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from .._cache import PrivateDir, cache_dir, load_keyed, open_private_dir, write_keyed
from .._options import DECODERS
from ..errors import ParameterError, require
from .decode import (
    _F32_EPS,
    ExactDecoder,
    _argmin_lowest,
    _check_queries,
    _check_sources,
)


class Decoder(Protocol):
    """What the mechanism needs from a decoder."""

    name: str
    exact: bool

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray: ...


def vocabulary_fingerprint(vectors: np.ndarray) -> str:
    """A short content hash of a ``(V, d)`` float32 matrix (keys the on-disk index cache)."""
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    h = hashlib.blake2b(digest_size=10)
    h.update(str(arr.shape).encode())
    h.update(arr.data.cast("B"))
    return h.hexdigest()


def _faiss() -> ModuleType:
    return require("faiss", "faiss")


#: the keyed MAC's purpose: an index is used only if this user's textdp wrote it
_INDEX_PURPOSE = "textdp approximate-decoder index"


def _read_index(faiss: ModuleType, folder: PrivateDir, name: str) -> Any:
    """A cached faiss index keyed by this user, or ``None`` if absent, not keyed by us or damaged (then rebuilt)."""
    try:
        data = load_keyed(folder, name, _INDEX_PURPOSE, what="the approximate-decoder index")
    except OSError:
        return None
    if data is None:
        return None
    try:
        return faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except (RuntimeError, ValueError, TypeError):
        return None


def _ann_folder(cache: str | os.PathLike[str] | None) -> PrivateDir | None:
    """The index folder (``cache``, else ``<cache>/ann``), opened once and checked private (made ``0700``).

    ``None`` when it cannot be made (a read-only cache: the index is built in memory);
    a folder others could write to, or below one they could rename, is refused.
    """
    root = Path(cache) if cache is not None else cache_dir() / "ann"
    try:
        return open_private_dir(root, what="the approximate-decoder index cache", create=True)
    except OSError:  # e.g. a read-only cache
        return None


def _write_index(faiss: ModuleType, index: object, folder: PrivateDir, name: str) -> None:
    """Write ``index`` with its keyed MAC, atomically, through the folder's descriptor; a read-only cache skips it."""
    try:
        data = np.asarray(faiss.serialize_index(index), dtype=np.uint8).tobytes()
        write_keyed(folder, name, data, _INDEX_PURPOSE)
    except (OSError, RuntimeError):
        pass


def _rerank(vectors: np.ndarray, q64: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 squared distances to the candidates and the best candidate (ties to the lowest row)."""
    cand = np.where(cand < 0, cand.max(axis=1, keepdims=True), cand)  # faiss pads with -1
    diff = vectors[cand].astype(np.float64) - q64[:, None, :]
    d2 = (diff**2).sum(axis=2)
    return d2, _argmin_lowest(d2, cand)


class FaissExactDecoder:
    """Exact decoding with faiss ``IndexFlatL2`` candidates, certified; identical to ``exact``.

    >>> vec = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> FaissExactDecoder(vec).decode(np.array([[0.9, 0.2], [0.1, 0.1]])).tolist()
    [1, 0]
    """

    name = "faiss-exact"
    exact = True

    def __init__(self, vectors: np.ndarray, *, k: int = 8, fallback: ExactDecoder | None = None) -> None:
        faiss = _faiss()
        self._fallback = fallback if fallback is not None else ExactDecoder(vectors)
        self._vectors = self._fallback._vectors
        self.vocab_size, self.dim = self._fallback.vocab_size, self._fallback.dim
        self.k = int(min(max(k, 2), self.vocab_size))
        self._index = faiss.IndexFlatL2(self.dim)
        self._index.add(np.ascontiguousarray(self._vectors, dtype=np.float32))
        self._max_norm = self._fallback._max_norm
        self.stats = {"queries": 0, "fallback": 0}

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """Exact nearest rows, like :meth:`ExactDecoder.decode`."""
        q = _check_queries(queries, self.dim)
        src = _check_sources(sources, q.shape[0], self.vocab_size)
        out = np.empty(q.shape[0], dtype=np.int64)
        if q.shape[0] == 0:
            return out
        dist32, cand = self._index.search(np.ascontiguousarray(q, dtype=np.float32), self.k)
        d2, best = _rerank(self._vectors, q, cand)
        qn = np.sqrt((q**2).sum(axis=1))
        # faiss: ||q||^2 + ||e||^2 - 2 q.e in float32 (plus the rounding of q to float32)
        err = 4.0 * (self.dim + 3) * _F32_EPS * (qn + self._max_norm) ** 2 + 1e-30
        if self.k < self.vocab_size:
            ok = dist32[:, -1].astype(np.float64) - err > d2.min(axis=1) * (1 + 1e-12)
        else:
            ok = np.ones(q.shape[0], dtype=bool)
        out[ok] = best[ok]
        bad = np.flatnonzero(~ok)
        if bad.size:
            out[bad] = self._fallback.decode(q[bad], None if src is None else src[bad])
        self.stats["queries"] += int(q.shape[0])
        self.stats["fallback"] += int(bad.size)
        return out


class ApproximateDecoder:
    """Approximate nearest-word decoding with a faiss HNSW or IVF index (opt-in).

    The index is built once per vocabulary and parameters and cached under
    ``<cache>/ann/`` of :func:`textdp._cache.cache_dir` (``cache=False`` keeps it in
    memory; a path puts it there). ``ef_search`` (HNSW)
    or ``nprobe`` (IVF) trade speed for agreement with exact decoding.

    >>> from textdp._rng import make_rng
    >>> rng = make_rng(0)
    >>> vec = rng.standard_normal((500, 8)).astype(np.float32)
    >>> dec = ApproximateDecoder(vec, method="hnsw", cache=False)
    >>> bool((dec.decode(vec[:50] + 0.01) == np.arange(50)).all())
    True
    """

    exact = False

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        method: str = "hnsw",
        k: int = 4,
        m: int = 32,
        ef_construction: int = 80,
        ef_search: int = 64,
        nlist: int | None = None,
        nprobe: int = 32,
        cache: bool | str | os.PathLike[str] = True,
    ) -> None:
        faiss = _faiss()
        if method not in ("hnsw", "ivf"):
            raise ParameterError(f"approximate method must be 'hnsw' or 'ivf', got {method!r}")
        vec = np.ascontiguousarray(vectors, dtype=np.float32)
        if vec.ndim != 2 or vec.shape[0] == 0:
            raise ParameterError(f"decoder needs a non-empty (V, d) matrix, got shape {vec.shape}")
        self._vectors = np.asarray(vectors)
        self.vocab_size, self.dim = vec.shape
        self.method = method
        self.name = "approximate-hnsw" if method == "hnsw" else "approximate-ivf"
        self.k = int(min(k, self.vocab_size))
        if method == "hnsw":
            params = f"hnsw-m{m}-efc{ef_construction}"
        else:
            # ~6.5 sqrt(V) lists (4,110 at V = 400k): measured on GloVe 50d, nprobe = 16 gives 99.35%
            # top-1 agreement at 25k words/s where 13% of words change (BENCHMARKS.md)
            nlist = int(nlist or max(1, min(int(6.5 * np.sqrt(self.vocab_size)), self.vocab_size // 39 or 1)))
            params = f"ivf-{nlist}"
        self.params = params
        folder = None
        if cache is not False:
            folder = _ann_folder(cache if isinstance(cache, (str, os.PathLike)) else None)
        name = f"{vocabulary_fingerprint(vec)}-{params}.faiss"
        try:
            self._build(faiss, vec, folder, name, m=m, ef_construction=ef_construction, nlist=nlist)
        finally:
            if folder is not None:
                folder.close()
        self.set_search(ef_search=ef_search, nprobe=nprobe)

    def _build(self, faiss: ModuleType, vec: np.ndarray, folder: PrivateDir | None, name: str, *, m: int,
               ef_construction: int, nlist: int | None) -> None:
        """The index: read from the checked cache folder if keyed by this user, else built (and cached)."""
        method = self.method
        index = _read_index(faiss, folder, name) if folder is not None else None
        if index is None:
            if method == "hnsw":
                index = faiss.IndexHNSWFlat(self.dim, int(m))
                index.hnsw.efConstruction = int(ef_construction)
                index.add(vec)
            else:
                quant = faiss.IndexFlatL2(self.dim)
                index = faiss.IndexIVFFlat(quant, self.dim, nlist)
                index.train(vec)
                index.add(vec)
            if folder is not None:
                _write_index(faiss, index, folder, name)
        self._index = index

    def set_search(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        """Change the search effort (speed / agreement trade-off)."""
        if self.method == "hnsw" and ef_search is not None:
            self.ef_search = int(ef_search)
            self._index.hnsw.efSearch = self.ef_search
        if self.method == "ivf" and nprobe is not None:
            self.nprobe = int(nprobe)
            self._index.nprobe = self.nprobe

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """Approximately nearest rows: the best (float64 re-ranked) of the index's k candidates.

        ``sources`` is validated and then deliberately **ignored**. The privacy
        guarantee needs the released word to be a function of the noisy vector
        alone (post-processing). An exact decoder may use the source to skip work
        because its answer is the same either way; an approximate one may not: adding
        the source word as a candidate would release the private input word in
        cases where the noisy vector alone would not (measured: 1.5-2.5% of words at
        eps 5-7).
        """
        q = _check_queries(queries, self.dim)
        _check_sources(sources, q.shape[0], self.vocab_size)
        if q.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        _, cand = self._index.search(np.ascontiguousarray(q, dtype=np.float32), self.k)
        return _rerank(self._vectors, q, cand)[1]


def make_decoder(name: str, vectors: np.ndarray, **options: Any) -> Decoder:
    """A decoder by name: ``exact``, ``faiss-exact``, ``torch``, ``approximate``/``hnsw`` or ``ivf``.

    >>> make_decoder("exact", np.eye(2)).name
    'exact'
    """
    if name == "exact":
        return ExactDecoder(vectors, **options)
    if name == "faiss-exact":
        return FaissExactDecoder(vectors, **options)
    if name == "torch":
        from .gpu import TorchDecoder

        return TorchDecoder(vectors, **options)
    if name in ("approximate", "hnsw"):
        return ApproximateDecoder(vectors, method="hnsw", **options)
    if name == "ivf":
        return ApproximateDecoder(vectors, method="ivf", **options)
    raise ParameterError(f"unknown decoder {name!r}; choose one of {', '.join(DECODERS)}")
