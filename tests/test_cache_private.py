"""Issue 39, item 2: every cache is private state, and what it holds is used only under the user's own MAC.

On e24cd34 ``textdp topics --cache-dir DIR`` never checked DIR, and the sensitivity cache file was
read with ``read_text()``: an attacker-owned 1777 folder with 285 planted samples of 1e-12 took the
sampled sensitivity from 0.124 to 1e-12 and sigma from 0.436 to 0.0005. Each cache (topics
sensitivity samples, approximate-decoder indexes, converted embeddings; CusText's groups already
were) is checked like the library's private state and authenticated with an HMAC under the per-user
key: a planted or edited entry is ignored and computed again, never used.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.errors import CacheWarning, ParameterError

pytest.importorskip("sklearn")

from textdp.topics import SklearnLDA, UserCorpus
from textdp.topics.sensitivity import CACHE_VERSION, SensitivitySampler

runner = CliRunner()
TEXTS = ["gas price power", "game team win", "gas power deal", "team coach win", "gas deal price", "coach game team"]
THEMES = ["gas price power deal oil", "game team win coach season", "court judge ruling law case",
          "bank rate loan credit market"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))  # never the real ~/.cache/textdp


def _sampler(cache: Path) -> SensitivitySampler:
    corpus = UserCorpus.from_texts(TEXTS, ["a", "b", "c", "d", "e", "f"], min_df=1, max_df=1.0)
    return SensitivitySampler(corpus=corpus, model=SklearnLDA(n_topics=2, max_iter=2), sizes=[(2, 2)],
                              cache_dir=cache)


def _corpus(tmp: Path) -> Path:
    path = tmp / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": f"{THEMES[i % 4]} {THEMES[i // 4 % 4].split()[0]}",
                                        "author": f"u{i % 6}"}) + "\n" for i in range(48)))
    return path


TOPICS_FAST = ["--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2", "--topics", "2",
               "--keywords", "2",
               "-q", "--seed", "1", "-e", "1"]


# -- the folder ---------------------------------------------------------------------------------
def test_a_shared_cache_dir_is_refused_in_one_line_before_any_work(tmp_path):
    shared = tmp_path / "senscache"
    shared.mkdir()
    shared.chmod(0o777)  # like the issue's folder, without the sticky bit of /tmp
    res = runner.invoke(app, ["topics", str(_corpus(tmp_path)), *TOPICS_FAST, "--cache-dir", str(shared),
                              "-o", str(tmp_path / "out.json")])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and line.startswith("error: --cache-dir") and "writable by others" in line
    assert not (tmp_path / "out.json").exists() and list(shared.iterdir()) == []


def test_a_cache_dir_below_a_folder_others_can_write_is_refused(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(ParameterError, match="on its path is writable by others") as exc:
        _sampler(tmp_path / "open" / "mine")
    assert "\n" not in str(exc.value)
    res = runner.invoke(app, ["topics-report", str(_corpus(tmp_path)), "--cache-dir",
                              str(tmp_path / "open" / "mine"), "-o", str(tmp_path / "rep")])
    assert res.exit_code == 2 and "on its path is writable by others" in res.output


def test_a_new_cache_dir_is_made_private(tmp_path):
    s = _sampler(tmp_path / "new" / "cache")
    s.draw(2, seed=1)
    assert (tmp_path / "new" / "cache").stat().st_mode & 0o777 == 0o700
    assert s.cache_path is not None and s.cache_path.stat().st_mode & 0o777 == 0o600
    assert Path(str(s.cache_path) + ".hmac").is_file()


# -- the contents ---------------------------------------------------------------------------------
def _plant(path: Path, mac: bytes | None) -> None:
    """The attack: 285 samples of 1e-12 (the sampled sensitivity would become 1e-12)."""
    path.write_text(json.dumps({"version": CACHE_VERSION, "sizes": [[2, 2]], "samples": [[1e-12]] * 285}))
    if mac is not None:
        Path(str(path) + ".hmac").write_bytes(mac)


@pytest.mark.parametrize("mac", [b"0" * 64, None], ids=["wrong-mac", "no-mac"])
def test_planted_sensitivity_samples_are_never_used(tmp_path, mac):
    cache = tmp_path / "cache"
    s = _sampler(cache)
    assert s.cache_path is not None
    _plant(s.cache_path, mac)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert s.cached_samples() == 0  # the plant is not counted as the user's samples
        value = s.sample(0.3, seed=2)[(2, 2)].value
    assert value > 1e-6  # drawn again: a real sensitivity, not the plant's 1e-12
    said = [str(w.message) for w in seen if issubclass(w.category, CacheWarning)]
    if mac is None:
        assert said == []  # a file without a MAC (an older textdp's, or a plant) is redone silently
    else:
        assert said and "\n" not in said[0] and "ignored and computed again" in said[0]
    again = _sampler(cache)
    assert again.cached_samples() == s.sample(0.3, seed=2)[(2, 2)].n_samples  # replaced by the user's own


def test_an_edited_sample_breaks_the_mac(tmp_path):
    s = _sampler(tmp_path / "cache")
    s.draw(3, seed=1)
    assert s.cache_path is not None and s.cached_samples() == 3
    data = json.loads(s.cache_path.read_text())
    data["samples"][0] = [1e-12]
    s.cache_path.write_text(json.dumps(data))
    with pytest.warns(CacheWarning, match="was not written by your textdp"):
        assert s.cached_samples() == 0


def test_the_cli_says_so_in_one_line_and_releases_a_real_sensitivity(tmp_path):
    cache = tmp_path / "cache"
    corpus = _corpus(tmp_path)
    args = ["topics", str(corpus), *TOPICS_FAST, "--cache-dir", str(cache), "--gamma", "0.3"]
    first = runner.invoke(app, [*args, "-o", str(tmp_path / "a.json"), "--private-report", str(tmp_path / "a.rep")])
    assert first.exit_code == 0, first.output
    real = json.loads((tmp_path / "a.rep").read_text())
    (planted,) = [p for p in cache.iterdir() if p.suffix == ".json"]
    _plant(planted, b"f" * 64)
    second = runner.invoke(app, [*args, "-o", str(tmp_path / "b.json"), "--private-report", str(tmp_path / "b.rep")])
    assert second.exit_code == 0, second.output
    warned = [line for line in second.output.splitlines() if line.startswith("warning:") and "cache" in line]
    assert len(warned) == 1 and "ignored and computed again" in warned[0]
    again = json.loads((tmp_path / "b.rep").read_text())

    def sensitivity(report: dict) -> float:
        found = [v for k, v in _walk(report) if k == "value" and isinstance(v, float)]
        return found[0]

    assert sensitivity(again) == sensitivity(real) > 1e-6  # the same seed, drawn again: not the plant's 1e-12


def _walk(obj: object):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v)


# -- the approximate-decoder index and the converted embeddings ----------------------------------------------
def test_an_ann_index_folder_others_can_write_is_refused(tmp_path):
    pytest.importorskip("faiss")
    from textdp.embeddings import ApproximateDecoder

    (tmp_path / "idx").mkdir()
    (tmp_path / "idx").chmod(0o777)
    vec = np.random.default_rng(0).standard_normal((100, 4)).astype(np.float32)
    with pytest.raises(ParameterError, match="approximate-decoder index cache"):
        ApproximateDecoder(vec, method="hnsw", cache=tmp_path / "idx")


def test_converted_embeddings_with_a_rewritten_record_are_converted_again(tmp_path):
    """A careful attacker scales vectors.npy and rewrites meta.json's checksums: the record's MAC fails."""
    from textdp.embeddings import load_embeddings
    from textdp.embeddings.loaders import _array_digest

    src = tmp_path / "toy.txt"
    rows = {"cat": [0.5, 1.0, -2.0], "dog": [0.25, 1.5, 0.0], "car": [9.0, 9.0, 9.0]}
    src.write_text("".join(w + " " + " ".join(repr(x) for x in v) + "\n" for w, v in rows.items()))
    load_embeddings(src)
    (entry,) = (tmp_path / "state" / "embeddings").iterdir()
    arr = np.load(entry / "vectors.npy") * np.float32(1000)
    (entry / "vectors.npy").unlink()
    np.save(entry / "vectors.npy", arr)
    meta = json.loads((entry / "meta.json").read_text())
    meta["vectors_sha256"] = _array_digest(arr)
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(CacheWarning, match="keyed MAC is wrong"):
        emb = load_embeddings(src)
    np.testing.assert_array_equal(emb.vectors, np.array(list(rows.values()), dtype=np.float32))


def test_security_md_states_the_cache_rules():
    """The sentences of SECURITY.md's "The cache" section that the tests above check."""
    import re

    text = re.sub(r"\s+", " ", (Path(__file__).resolve().parents[1] / "SECURITY.md").read_text(encoding="utf-8"))
    cache = text[text.index("## The cache"):text.index("## Partitioned runs")]
    for claim in ("**Every cache folder is private state.**", "`textdp topics --cache-dir`",
                  "one that others can write to (a 0777 folder without the sticky bit), or below a folder they could "
                  "rename, is refused with a one-line error naming the folder (exit 2), before any data is read",
                  "**What a cache holds is used only if you wrote it.**",
                  "A file whose HMAC is wrong (planted, edited, or copied from another cache) is ignored with a "
                  "one-line warning and computed again",
                  "so an index planted by anyone else never reaches faiss's deserializer"):
        assert claim in cache, claim
    assert "are not checksummed: the approximate decoders" not in cache  # no longer true


def test_the_issues_attacker_owned_sticky_cache_dir_is_refused(tmp_path):
    """The issue's folder: another user's 1777 folder (like /tmp/senscache made first by them), samples planted."""
    import os
    import shutil
    import tempfile

    from helpers import run_as, second_user

    with second_user("tdpc") as attacker:
        base = Path(tempfile.mkdtemp(prefix="textdp-cache-"))
        try:
            base.chmod(0o755)
            shared = base / "senscache"
            shared.mkdir()
            os.chown(shared, *attacker)
            res = run_as(attacker, "import os, sys; os.chmod(sys.argv[1], 0o1777)", str(shared), check=False)
            assert res.returncode == 0, res.stderr
            out = runner.invoke(app, ["topics", str(_corpus(tmp_path)), *TOPICS_FAST, "--cache-dir", str(shared),
                                      "-o", str(tmp_path / "out.json")])
            assert out.exit_code == 2 and out.output.count("\n") == 1, out.output
            assert "--cache-dir" in out.output and "owned by another user" in out.output
            assert list(shared.iterdir()) == [] and not (tmp_path / "out.json").exists()
            assert os.stat(shared).st_uid == attacker[0]
        finally:
            shutil.rmtree(base, ignore_errors=True)
