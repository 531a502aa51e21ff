"""Issue 28, sections 1 and 3: cached artefacts that change a release verify like the embeddings.

* The CusText groups cache (``custext/groups-*.npy``) was neither checksummed nor keyed:
  planted singleton groups made CusText at epsilon = 0.1 copy its input. Now a cached file is
  used only if this user's secret keyed it, and only if it is still a partition into groups of
  at least k.
* The worker's vocabulary is read into private memory: a file rewritten in place after the
  load (a shared mapping would pick it up) changes nothing.
* An in-place ``.npy`` source that others can write is read into private memory, not mapped.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from textdp._cache import cache_dir
from textdp.embeddings import Embeddings, load_embeddings
from textdp.mechanisms import CusText
from textdp.mechanisms.exponential import cached_custext_groups, custext_groups


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _vectors(v: int = 400, d: int = 6) -> np.ndarray:
    return np.random.default_rng(11).standard_normal((v, d)).astype(np.float32)


def test_planted_custext_groups_are_never_used(cache):
    vec, k = _vectors(), 4
    real = cached_custext_groups(vec, k, min_cached=10)
    assert np.array_equal(real, custext_groups(vec, k))
    (path,) = (cache / "custext").glob("groups-*.npy")
    assert (cache / "custext" / (path.name + ".hmac")).is_file()
    singletons = np.arange(vec.shape[0], dtype=np.int64)  # every word alone: CusText copies its input
    np.save(path, singletons)  # planted without this user's key
    from textdp.errors import CacheWarning

    with pytest.warns(CacheWarning, match="was not written by your textdp"):  # said, then computed again
        assert np.array_equal(cached_custext_groups(vec, k, min_cached=10), real)
    # even a file keyed by this user (a key that leaked, a bug) must still be groups of at least k
    from textdp._cache import open_private_dir, write_keyed

    with open_private_dir(cache_dir() / "custext") as d:
        import io

        buf = io.BytesIO()
        np.save(buf, singletons)
        write_keyed(d, path.name, buf.getvalue(), "custext-groups")
    assert np.array_equal(cached_custext_groups(vec, k, min_cached=10), real)


def test_custext_with_planted_groups_releases_what_clean_custext_releases(cache, monkeypatch):
    """The attack end to end: CusText at epsilon = 0.1 over a cached vocabulary copies its input with singletons."""
    import textdp.mechanisms.exponential as ex

    vec = _vectors(300)
    words = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]
    emb = Embeddings(words, vec, name="toy")
    real_cached = ex.cached_custext_groups
    monkeypatch.setattr(ex, "cached_custext_groups", lambda v, k, **kw: real_cached(v, k, min_cached=10))
    text = " ".join(words[i] for i in range(0, 300, 37))
    clean = CusText(epsilon=0.1, top_k=5, embeddings=emb, seed=3).privatize(text)
    (path,) = (cache / "custext").glob("groups-*.npy")
    np.save(path, np.arange(300, dtype=np.int64))
    from textdp.errors import CacheWarning

    with pytest.warns(CacheWarning, match="was not written by your textdp"):
        again = CusText(epsilon=0.1, top_k=5, embeddings=emb, seed=3).privatize(text)
    assert again.text == clean.text
    assert sum(a == b for a, b in zip(again.text.split(), text.split())) < len(text.split())


def test_the_workers_vocabulary_is_a_private_copy(tmp_path):
    from textdp.engines.workdir import load_verified_vocabulary, save_vocabulary, vocabulary_digests

    emb = Embeddings([f"w{i}" for i in range(50)], _vectors(50), name="toy")
    d = save_vocabulary(emb, tmp_path / "wd", "fp")
    got = load_verified_vocabulary(str(d), "toy", *vocabulary_digests(emb))
    before = np.array(got.vectors)
    with open(d / "vectors.npy", "r+b") as fh:  # an in-place write after the load (same inode)
        fh.seek(-4 * 50 * 6, os.SEEK_END)
        fh.write((np.asarray(emb.vectors) * 1000).astype(np.float32).tobytes())
    assert not isinstance(got.vectors, np.memmap)
    assert np.array_equal(np.asarray(got.vectors), before)


def test_an_npy_source_others_can_write_is_read_into_private_memory(tmp_path):
    vec = _vectors(30)
    np.save(tmp_path / "v.npy", vec)
    (tmp_path / "v.words.txt").write_text("".join(f"w{i}\n" for i in range(30)))
    mine = load_embeddings(tmp_path / "v.npy")
    assert isinstance(mine.vectors, np.memmap) or isinstance(np.asarray(mine.vectors).base, np.memmap)
    os.chmod(tmp_path / "v.npy", 0o666)  # anyone could write into a mapping of it
    from textdp._cache import allow_shared_files
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match="writable by others .*--allow-shared-files"):
        load_embeddings(tmp_path / "v.npy")  # issue 39 §3: refused unless the user trusts them
    with allow_shared_files():
        theirs = load_embeddings(tmp_path / "v.npy")
    assert not isinstance(theirs.vectors, np.memmap) and not isinstance(np.asarray(theirs.vectors).base, np.memmap)
    with open(tmp_path / "v.npy", "r+b") as fh:
        fh.seek(-4 * 30 * 6, os.SEEK_END)
        fh.write((vec * 1000).tobytes())
    assert np.array_equal(np.asarray(theirs.vectors), vec)
