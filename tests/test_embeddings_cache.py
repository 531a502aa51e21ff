"""The embeddings cache is verified (issue 9 item 6) and non-finite vectors are refused (issue 10)."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from textdp.embeddings import Embeddings, load_embeddings
from textdp.embeddings.loaders import _DEFAULT_DIGESTS, _array_digest
from textdp.errors import CacheWarning, EmbeddingsError
from textdp.mechanisms import EarthMoversPrivacy


def _one_line(exc: pytest.ExceptionInfo[EmbeddingsError]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.fixture(scope="module")
def default_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private cache holding a fresh conversion of the default GloVe 6B 50d."""
    root = tmp_path_factory.mktemp("cache-default")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEXTDP_CACHE_DIR", str(root))
        load_embeddings()
    yield root


def _copy_cache(src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(src, dst)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(dst))
    (entry,) = (dst / "embeddings").iterdir()
    return entry


def _scale_vectors(entry: Path, factor: float = 1000.0) -> np.ndarray:
    arr = np.load(entry / "vectors.npy") * np.float32(factor)
    (entry / "vectors.npy").unlink()  # a new file: memory maps of the old one stay valid
    np.save(entry / "vectors.npy", arr)
    return arr


def test_default_entry_records_the_known_checksums(default_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(default_cache))
    (entry,) = (default_cache / "embeddings").iterdir()
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["vectors_sha256"] == _DEFAULT_DIGESTS["vectors_sha256"]
    assert meta["words_sha256"] == _DEFAULT_DIGESTS["words_sha256"]
    assert meta["finite"] is True and meta["shape"] == [400000, 50]
    assert set(meta["sources"]) == {"glove_6B_50d_emb.npy", "glove_6B_index.parquet"}
    emb = load_embeddings()  # the verified second load
    assert emb.name == "glove-6B-50d" and emb.words[:3] == ("the", ",", ".")
    np.testing.assert_allclose(emb.vector("the")[:4], [0.418, 0.24968, -0.41242, 0.1217], rtol=1e-6)


def test_scaled_cached_default_is_refused(default_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack of issue 9: vectors.npy scaled by 1000 made eps=5 release the input verbatim."""
    entry = _copy_cache(default_cache, tmp_path / "c", monkeypatch)
    _scale_vectors(entry)
    with pytest.raises(EmbeddingsError, match="do not match the checksums") as exc:
        load_embeddings()
    msg = _one_line(exc)
    assert str(entry) in msg and "delete that directory" in msg and "rebuild_cache=True" in msg
    with pytest.raises(EmbeddingsError):
        EarthMoversPrivacy(epsilon=5, size=3).fit()
    # rebuilding from the source gives the real vectors back
    emb = load_embeddings(rebuild_cache=True)
    np.testing.assert_allclose(emb.vector("the")[:2], [0.418, 0.24968], rtol=1e-6)
    assert _array_digest(np.asarray(emb.vectors)) == _DEFAULT_DIGESTS["vectors_sha256"]


def test_scaled_default_with_rewritten_meta_is_still_refused(
    default_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _copy_cache(default_cache, tmp_path / "c", monkeypatch)
    arr = _scale_vectors(entry)
    meta = json.loads((entry / "meta.json").read_text())
    meta["vectors_sha256"] = _array_digest(arr)  # a careful attacker updates the record too
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(EmbeddingsError, match="known GloVe 6B 50d checksums"):
        load_embeddings()


def test_swapped_words_are_refused(default_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _copy_cache(default_cache, tmp_path / "c", monkeypatch)
    words = (entry / "words.txt").read_text().split("\n")
    words[1], words[2] = words[2], words[1]
    (entry / "words.txt").write_text("\n".join(words))
    with pytest.raises(EmbeddingsError, match="words.txt differs"):
        load_embeddings()


def test_damaged_meta_is_refused_and_missing_meta_rebuilds(
    default_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _copy_cache(default_cache, tmp_path / "c", monkeypatch)
    (entry / "meta.json").write_text("{not json")
    with pytest.raises(EmbeddingsError, match="meta.json unreadable"):
        load_embeddings()
    (entry / "meta.json").unlink()  # an interrupted conversion: rebuilt from the source, never trusted
    _scale_vectors(entry)
    emb = load_embeddings()
    np.testing.assert_allclose(emb.vector("the")[:2], [0.418, 0.24968], rtol=1e-6)


def _write_glove(path: Path, rows: dict[str, list[float]]) -> None:
    path.write_text("".join(w + " " + " ".join(repr(float(x)) for x in v) + "\n" for w, v in rows.items()))


TOY = {"cat": [0.5, 1.0, -2.0], "dog": [0.25, 1.5, 0.0], "car": [9.0, 9.0, 9.0]}


def test_text_cache_tamper_refused_then_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "toy.txt"
    _write_glove(src, TOY)
    first = load_embeddings(src)
    again = load_embeddings(src)  # from the verified cache
    assert again.words == first.words and np.array_equal(again.vectors, first.vectors)
    (entry,) = (tmp_path / "cache" / "embeddings").iterdir()
    _scale_vectors(entry)
    with pytest.raises(EmbeddingsError, match="vectors.npy differs"):
        load_embeddings(src)
    fixed = load_embeddings(src, rebuild_cache=True)
    np.testing.assert_array_equal(fixed.vectors, np.array(list(TOY.values()), dtype=np.float32))


def test_replaced_source_gets_a_new_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "toy.txt"
    _write_glove(src, TOY)
    load_embeddings(src)
    tmp = tmp_path / "new.txt"
    _write_glove(tmp, {"cat": [0.5, 1.0, -3.0], "dog": [0.25, 1.5, 0.0], "car": [9.0, 9.0, 8.0]})  # same size
    tmp.replace(src)
    assert load_embeddings(src).vector("cat")[2] == -3.0


def test_npy_conversion_is_keyed_by_the_words_file_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    np.save(tmp_path / "m.npy", np.asfortranarray(np.arange(6, dtype=np.float64).reshape(3, 2)))
    (tmp_path / "w1.txt").write_text("a\nb\nc\n")
    (tmp_path / "w2.txt").write_text("x\ny\nz\n")
    assert load_embeddings(tmp_path / "m.npy", words_path=tmp_path / "w1.txt").words == ("a", "b", "c")
    assert load_embeddings(tmp_path / "m.npy", words_path=tmp_path / "w2.txt").words == ("x", "y", "z")


# -- non-finite vectors (issue 10) -------------------------------------------------------------


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1e39"])
def test_text_with_non_finite_vector_is_refused(bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "toy.txt"
    src.write_text(f"cat 0.5 1\ndog 1 0\nzebra {bad} 0\n")
    with pytest.raises(EmbeddingsError) as exc:
        load_embeddings(src)
    msg = _one_line(exc)
    assert "'zebra' (row 2)" in msg and "NaN or infinity" in msg and "remove that word" in msg
    assert not (tmp_path / "cache" / "embeddings").exists() or not any((tmp_path / "cache" / "embeddings").iterdir())


def test_word2vec_binary_with_nan_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "toy.bin"
    body = b"".join(w + b" " + struct.pack("<2f", *v) + b"\n" for w, v in [(b"cat", (1, 2)), (b"gnu", (np.nan, 0))])
    src.write_bytes(b"2 2\n" + body)
    with pytest.raises(EmbeddingsError, match=r"'gnu' \(row 1\)"):
        load_embeddings(src)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_npy_with_inf_is_refused(dtype: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    m: np.ndarray = np.ones((3, 2), dtype=dtype)
    m[1, 1] = np.inf
    np.save(tmp_path / "m.npy", m)
    (tmp_path / "m.words.txt").write_text("a\nb\nc\n")
    with pytest.raises(EmbeddingsError, match=r"'b' \(row 1\)"):
        load_embeddings(tmp_path / "m.npy")


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e300])
def test_in_memory_embeddings_refuse_non_finite(value: float) -> None:
    vec = np.zeros((4, 3))
    vec[3, 0] = value
    with pytest.raises(EmbeddingsError, match=r"'d' \(row 3\)"):
        Embeddings(list("abcd"), vec, name="toy")


def test_issue_scenario_nan_word_outside_the_input(glove: Embeddings) -> None:
    """A NaN row for a word nobody uses used to make every word decode to row 0, silently."""
    vec = np.array(glove.vectors[:1000])
    vec[999] = np.nan
    with pytest.raises(EmbeddingsError, match=r"row 999"):
        Embeddings(glove.words[:1000], vec, name="glove-top-1000")


# -- the approximate decoders' index cache -------------------------------------------------------


def test_ann_index_uses_the_one_cache_dir_and_atomic_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("faiss")
    from textdp._rng import make_rng
    from textdp.embeddings import ApproximateDecoder

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path))
    vec = make_rng(0).standard_normal((300, 8)).astype(np.float32)
    q = vec[:40] + 0.01
    first = ApproximateDecoder(vec, method="hnsw").decode(q)
    files = sorted((tmp_path / "ann").iterdir())
    assert [p.suffix for p in files] == [".faiss", ".hmac"]  # the index and its keyed MAC, no temporary files
    again = ApproximateDecoder(vec, method="hnsw").decode(q)  # read back
    np.testing.assert_array_equal(first, again)
    files[0].write_bytes(b"garbage")  # a damaged (or planted) index is ignored, with one line, and rebuilt
    with pytest.warns(CacheWarning, match="keyed MAC is wrong"):
        np.testing.assert_array_equal(ApproximateDecoder(vec, method="hnsw").decode(q), first)
