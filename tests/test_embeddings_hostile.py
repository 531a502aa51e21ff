"""Hostile embedding files never win (issue 10): a correct result or a one-line EmbeddingsError.

Property-based (hypothesis): valid GloVe/word2vec text, word2vec binary, ``.npy`` + words
files and in-memory matrices, then mutated (truncated, bytes flipped or inserted, non-UTF-8
words, wrong or huge headers, wrong shapes and dtypes, duplicate words, empty files). Any
other exception, a hang or a large allocation fails the test. Valid inputs must load to
exactly the values written, from the file and again from the verified cache.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from textdp.embeddings import Embeddings, load_embeddings
from textdp.errors import EmbeddingsError

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# words: no separators (space, newline, carriage return), no surrogates
WORD = st.text(st.characters(codec="utf-8", exclude_characters=" \n\r"), min_size=1, max_size=6)
F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
F32_ANY = st.one_of(F32, F32, F32, F32, st.sampled_from([float("nan"), float("inf"), -float("inf")]))
_HEADER_LIKE = re.compile(r"[0-9]{1,13}")


@st.composite
def tables(draw: st.DrawFn, values: st.SearchStrategy[float] = F32_ANY) -> tuple[list[str], np.ndarray]:
    n = draw(st.integers(1, 6))
    d = draw(st.integers(1, 4))
    words = draw(st.lists(WORD, min_size=n, max_size=n))
    mat = np.array(draw(st.lists(st.lists(values, min_size=d, max_size=d), min_size=n, max_size=n)), dtype=np.float32)
    return words, mat


_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEXTDP_CACHE_DIR", str(root / "cache"))
        yield root


def _fresh(root: Path, suffix: str) -> Path:
    return root / f"f{next(_counter)}{suffix}"


def _load_or_error(*args: object, **kwargs: object) -> Embeddings | None:
    """Load; ``None`` for a clean one-line EmbeddingsError; anything else propagates and fails."""
    try:
        return load_embeddings(*args, **kwargs)  # type: ignore[arg-type]
    except EmbeddingsError as exc:
        assert "\n" not in str(exc) and str(exc)
        return None


def _expect(words: list[str], mat: np.ndarray, emb: Embeddings | None) -> None:
    """A valid table must load to exactly these words and values; a non-finite one must be refused."""
    if not np.isfinite(mat).all():
        assert emb is None
        return
    assert emb is not None
    assert emb.words == tuple(words)
    np.testing.assert_array_equal(emb.vectors, mat)
    for w in words:  # duplicates: the first row wins
        assert emb.index[w] == words.index(w)


def _mutate(data: bytes, hyp: st.DataObject) -> bytes:
    draw = hyp.draw
    how = draw(st.sampled_from(["truncate", "flip", "insert", "delete_byte", "non_utf8", "empty"]))
    if how == "empty":
        return b""
    pos = draw(st.integers(0, max(len(data) - 1, 0)))
    if how == "truncate":
        return data[:pos]
    if how == "flip":
        return data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :] if data else data
    if how == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=8)) + data[pos:]
    if how == "delete_byte":
        return data[:pos] + data[pos + 1 :]
    return data[:pos] + b"\xff\xfe" + data[pos:]


# -- GloVe / word2vec text ---------------------------------------------------------------------


@SETTINGS
@given(table=tables(), header=st.sampled_from(["none", "right", "wrong_rows", "wrong_dim", "huge"]),
       mutate=st.booleans(), data=st.data())
def test_text_format(workdir: Path, table: tuple[list[str], np.ndarray], header: str, mutate: bool,
                     data: st.DataObject) -> None:
    words, mat = table
    n, d = mat.shape
    head = {"none": "", "right": f"{n} {d}\n", "wrong_rows": f"{n + 1} {d}\n", "wrong_dim": f"{n} {d + 1}\n",
            "huge": "9999999999999 9999999999999\n"}[header]
    body = "".join(w + " " + " ".join(repr(float(x)) for x in row) + "\n" for w, row in zip(words, mat))
    raw = (head + body).encode("utf-8")
    if mutate:
        raw = _mutate(raw, data)
    path = _fresh(workdir, ".txt")
    path.write_bytes(raw)
    emb = _load_or_error(path, fmt="text")
    first_line = (words[0] + " " + " ".join(repr(float(x)) for x in mat[0])).split(" ")
    ambiguous = header == "none" and len(first_line) == 2 and all(_HEADER_LIKE.fullmatch(x) for x in first_line)
    if not mutate and header in ("none", "right") and not ambiguous:
        _expect(words, mat, emb)
        if emb is not None:
            _expect(words, mat, load_embeddings(path, fmt="text"))  # again, from the verified cache
    elif header in ("wrong_rows", "wrong_dim", "huge") and not mutate:
        assert emb is None


# -- word2vec binary ---------------------------------------------------------------------------


def _w2v_binary(words: list[str], mat: np.ndarray, header: bytes | None = None) -> bytes:
    n, d = mat.shape
    head = header if header is not None else f"{n} {d}\n".encode()
    return head + b"".join(w.encode() + b" " + row.astype("<f4").tobytes() + b"\n" for w, row in zip(words, mat))


@SETTINGS
@given(table=tables(), header=st.sampled_from(["right", "wrong_rows", "wrong_dim", "huge", "junk", "none"]),
       mutate=st.booleans(), data=st.data())
def test_word2vec_binary(workdir: Path, table: tuple[list[str], np.ndarray], header: str, mutate: bool,
                         data: st.DataObject) -> None:
    words, mat = table
    n, d = mat.shape
    head = {"right": f"{n} {d}\n".encode(), "wrong_rows": f"{n + 1} {d}\n".encode(),
            "wrong_dim": f"{n} {d + 1}\n".encode(), "huge": b"9999999999999 4000000000\n",
            "junk": data.draw(st.binary(max_size=12)) + b"\n", "none": b""}[header]
    raw = _w2v_binary(words, mat, head)
    if mutate:
        raw = _mutate(raw, data)
    path = _fresh(workdir, ".bin")
    path.write_bytes(raw)
    emb = _load_or_error(path)
    if not mutate and header == "right":
        _expect(words, mat, emb)
        if emb is not None:
            _expect(words, mat, load_embeddings(path))
    elif not mutate and header in ("wrong_rows", "huge", "none"):
        assert emb is None


@pytest.mark.parametrize("header", [b"9999999999999 9999999999999\n", b"1000000000 1000000\n", b"3 2000000000\n"])
def test_huge_binary_header_allocates_nothing(workdir: Path, header: bytes) -> None:
    path = _fresh(workdir, ".bin")
    path.write_bytes(header + b"a " + struct.pack("<2f", 1, 2) + b"\n")
    tracemalloc.start()
    try:
        with pytest.raises(EmbeddingsError, match="more than its .* bytes hold"):
            load_embeddings(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_huge_text_header_is_refused(workdir: Path) -> None:
    path = _fresh(workdir, ".txt")
    path.write_text("9999999999999 2\ncat 1 2\n")
    with pytest.raises(EmbeddingsError, match="header announces 9999999999999 vectors"):
        load_embeddings(path)


# -- .npy + words ------------------------------------------------------------------------------

DTYPES = st.sampled_from(["<f4", ">f4", "<f8", "<f2", "<i8", "|u1", "|b1", "<c8", "<U3", "<M8[D]"])


@SETTINGS
@given(arr=hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
       fortran=st.booleans(), words=st.lists(WORD, max_size=6), words_match=st.booleans(),
       mutate=st.sampled_from(["none", "none", "npy", "words", "npz", "object"]), data=st.data())
def test_npy_and_words(workdir: Path, arr: np.ndarray, fortran: bool, words: list[str], words_match: bool,
                       mutate: str, data: st.DataObject) -> None:
    if words_match and arr.ndim >= 1:
        words = [f"w{i}" for i in range(arr.shape[0])] if arr.shape[0] > len(words) else words[: arr.shape[0]]
    npy, wfile = _fresh(workdir, ".npy"), _fresh(workdir, ".words")
    save = np.asfortranarray(arr) if fortran else arr
    if mutate == "npz":
        with open(npy, "wb") as fh:
            np.savez(fh, a=save)
    elif mutate == "object":
        np.save(npy, np.array([[1.0, "x"]], dtype=object), allow_pickle=True)
    else:
        np.save(npy, save)
    raw_words = "".join(w + "\n" for w in words).encode()
    if mutate == "npy":
        npy.write_bytes(_mutate(npy.read_bytes(), data))
    if mutate == "words":
        raw_words = _mutate(raw_words, data)
    wfile.write_bytes(raw_words)
    emb = _load_or_error(npy, words_path=wfile)
    valid = (
        mutate == "none" and arr.ndim == 2 and arr.shape[0] == len(words) and min(arr.shape) > 0
        and arr.dtype.kind in "biuf"
    )
    if valid:
        with np.errstate(over="ignore"):
            _expect(words, arr.astype(np.float32), emb)
    elif mutate in ("none", "npz", "object") or arr.ndim != 2:
        assert emb is None


# -- in memory ---------------------------------------------------------------------------------


@SETTINGS
@given(arr=hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
       words=st.one_of(st.lists(WORD, max_size=5), WORD))
def test_in_memory(arr: np.ndarray, words: list[str] | str) -> None:
    try:
        emb = Embeddings(words, arr, name="toy")
    except EmbeddingsError as exc:
        assert "\n" not in str(exc)
        return
    assert arr.dtype.kind in "biuf" and arr.ndim == 2 and not isinstance(words, str)
    with np.errstate(over="ignore"):
        _expect(list(words), arr.astype(np.float32), emb)


@pytest.mark.parametrize(
    "vectors",
    [[[1.0, 2.0], [3.0]], [[1.0, "a"], [2.0, 3.0]], None, "abc", [[1 + 2j, 0], [0, 0]], [[object(), 1], [2, 3]]],
)
def test_in_memory_garbage(vectors: object) -> None:
    with pytest.raises(EmbeddingsError):
        Embeddings(["a", "b"], vectors)  # type: ignore[arg-type]


# -- random bytes and lines through load_embeddings (moved from the CLI fuzz file) -----------------------------
def _load(name: str, data: bytes, words: bytes | None = None) -> object:
    from textdp.embeddings import load_embeddings

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        kw = {}
        if words is not None:
            (Path(d) / "words.txt").write_bytes(words)
            kw["words_path"] = Path(d) / "words.txt"
        os.environ["TEXTDP_CACHE_DIR"] = str(Path(d) / "cache")
        try:
            emb = load_embeddings(p, **kw)
        except EmbeddingsError as exc:
            assert "\n" not in str(exc)
            return exc
        finally:
            os.environ.pop("TEXTDP_CACHE_DIR", None)
        assert emb.vectors.ndim == 2 and emb.vectors.shape[0] == len(emb.words)
        return emb


TEXT_LINES = st.lists(
    st.tuples(st.text(st.characters(exclude_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=6),
              st.lists(st.sampled_from(["0.5", "-1", "1e3", "x", "", "-0"]), min_size=0, max_size=4)),
    max_size=5,
).map(lambda rows: "\n".join(" ".join([w, *v]) for w, v in rows).encode("utf-8"))


@settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), TEXT_LINES), st.sampled_from(["e.txt", "e.vec", "e.bin"]))
def test_embeddings_files(data, name):
    _load(name, data)


@settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=200), st.binary(max_size=50))
def test_embeddings_npy_random_bytes(data, words):
    _load("e.npy", data, words)


def test_embeddings_nan_rejected():
    out = _load("e.txt", b"cat 0.5 nan\ndog 1 2\n")
    assert isinstance(out, EmbeddingsError)


def test_embeddings_float32_overflow_rejected():
    out = _load("e.txt", b"cat 0.5 1e40\ndog 1 2\n")
    assert isinstance(out, EmbeddingsError)


def test_empty_npy_rejected():
    assert isinstance(_load("e.npy", b"", b"cat\n"), EmbeddingsError)


def test_word2vec_header_too_large():
    _load("e.bin", b"1000000000000 50\ncat " + np.zeros(50, "<f4").tobytes())
