"""Every folder textdp makes in its cache is 0700 and owned by the user (``_cache.cache_dir(sub, create=True)``).

Before, the embeddings entries (``atomic_writer`` made their folders), the ANN index folder and the
topics sensitivity folder took the umask's default mode (0755 under umask 022): other users could
list which embeddings, vocabularies and corpora a user had worked with.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from textdp._rng import make_rng
from textdp.embeddings import load_embeddings
from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus, default_cache_dir


@pytest.fixture()
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache that does not exist yet, under a permissive umask (022: folders would be 0755)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(root))
    old = os.umask(0o022)
    try:
        yield root
    finally:
        os.umask(old)


def _folders(root: Path) -> list[Path]:
    return [root] + [p for p in root.rglob("*") if p.is_dir()]


def _assert_private(root: Path, expected: set[str]) -> None:
    folders = _folders(root)
    assert expected <= {p.relative_to(root).parts[0] for p in folders if p != root}
    for p in folders:
        st = p.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700, f"{p.relative_to(root.parent)} is {oct(stat.S_IMODE(st.st_mode))}"
        assert st.st_uid == os.geteuid()


def test_embeddings_entry_folders_are_private(fresh_cache: Path, tmp_path: Path) -> None:
    src = tmp_path / "toy.txt"
    src.write_text("cat 0.5 1.0 -2.0\ndog 0.25 1.5 0.0\ncar 9.0 9.0 9.0\n")
    emb = load_embeddings(src)
    assert emb.words == ("cat", "dog", "car")
    (entry,) = (fresh_cache / "embeddings").iterdir()
    assert (entry / "meta.json").is_file()  # the entry was written (and is read back verified)
    assert load_embeddings(src).words == emb.words
    _assert_private(fresh_cache, {"embeddings"})


def test_ann_index_folder_is_private(fresh_cache: Path) -> None:
    pytest.importorskip("faiss")
    from textdp.embeddings.ann import ApproximateDecoder

    vec = make_rng(0).standard_normal((200, 8)).astype(np.float32)
    dec = ApproximateDecoder(vec, method="hnsw")
    assert bool((dec.decode(vec[:20] + 0.01) == np.arange(20)).all())
    assert sorted(p.suffix for p in (fresh_cache / "ann").iterdir()) == [".faiss", ".hmac"]  # the index, its MAC
    _assert_private(fresh_cache, {"ann"})


def test_topics_sensitivity_folder_is_private(fresh_cache: Path) -> None:
    c = UserCorpus.from_texts(["gas price power", "game team win", "gas power deal", "team coach win"],
                              ["a", "b", "c", "d"], min_df=1, max_df=1.0)
    s = SensitivitySampler(corpus=c, model=SklearnLDA(n_topics=2, max_iter=2), sizes=[(2, 2)],
                           cache_dir=default_cache_dir())
    assert s.draw(3, seed=1)[0].shape == (3, 1)
    path = s.cache_path
    assert path is not None and path.is_file() and path.parent == fresh_cache / "topics"
    _assert_private(fresh_cache, {"topics"})


def test_unwritable_cache_still_works_without_caching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache that cannot be made (here: below a file, which fails even for root) is skipped, not fatal."""
    pytest.importorskip("faiss")
    from textdp.embeddings.ann import ApproximateDecoder

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(blocker / "cache"))
    src = tmp_path / "toy.txt"
    src.write_text("cat 0.5 1.0 -2.0\ndog 0.25 1.5 0.0\ncar 9.0 9.0 9.0\n")
    assert load_embeddings(src).words == ("cat", "dog", "car")
    assert default_cache_dir() == blocker / "cache" / "topics"
    vec = make_rng(1).standard_normal((100, 8)).astype(np.float32)
    assert ApproximateDecoder(vec, method="hnsw").decode(vec[:5]).tolist() == [0, 1, 2, 3, 4]
    c = UserCorpus.from_texts(["gas price power", "game team win", "gas power deal", "team coach win"],
                              ["a", "b", "c", "d"], min_df=1, max_df=1.0)
    s = SensitivitySampler(corpus=c, model=SklearnLDA(n_topics=2, max_iter=2), sizes=[(2, 2)],
                           cache_dir=default_cache_dir())
    assert s.draw(2, seed=1)[0].shape == (2, 1) and s.cached_samples() == 0  # drawn, not stored
    assert blocker.read_text() == ""
