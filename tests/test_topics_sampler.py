"""Sensitivity sampler and CLI on a tiny synthetic user corpus (fast; no shared data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus, extract_topic_matrix, sampler_parameters

THEMES = [
    "market price energy power contract trading gas deal",
    "meeting friday schedule week monday office call agenda",
    "game team season player score coach league win",
]


def _synthetic(n_users: int = 8, docs: int = 6, seed: int = 0) -> tuple[list[str], list[str]]:
    gen = np.random.default_rng(seed)
    texts, users = [], []
    for u in range(n_users):
        fav = u % len(THEMES)
        for _ in range(docs):
            words = []
            for _ in range(12):
                theme = fav if gen.random() < 0.7 else int(gen.integers(len(THEMES)))
                words.append(str(gen.choice(THEMES[theme].split())))
            texts.append(" ".join(words))
            users.append(f"user{u}")
    return texts, users


@pytest.fixture(scope="module")
def corpus() -> UserCorpus:
    texts, users = _synthetic()
    return UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0, max_docs_per_user=5)


@pytest.fixture(scope="module")
def model() -> SklearnLDA:
    return SklearnLDA(n_topics=3, max_iter=5, random_state=0)


def test_corpus_contribution_bound(corpus: UserCorpus) -> None:
    assert corpus.n_users == 8
    assert all(len(r) == 5 for r in corpus.user_rows)
    assert corpus.X.shape[0] == 40
    assert corpus.rows_for([0, 0]).shape[0] == 10  # users drawn with replacement repeat their rows


def test_model_is_deterministic(corpus: UserCorpus, model: SklearnLDA) -> None:
    a, pa = model.fit(corpus.X)
    b, pb = model.fit(corpus.X)
    # deterministic up to floating-point summation order (BLAS threads)
    assert np.allclose(a, b, rtol=0, atol=1e-12) and np.allclose(pa, pb, rtol=0, atol=1e-12)
    assert np.allclose(a.sum(axis=1), 1) and pa.sum() == pytest.approx(1)
    tm = extract_topic_matrix(a, pa, corpus.vocabulary, 3, 4)
    assert np.all(tm.matrix.sum(axis=1) <= 1)


def test_sampler_order_statistic_cache_and_extension(corpus: UserCorpus, model: SklearnLDA,
                                                     tmp_path: Path) -> None:
    sizes = [(2, 2), (3, 4)]
    s = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, cache_dir=tmp_path)
    res = s.sample(0.3, rng=1)
    p = sampler_parameters(0.3)
    r = res[(3, 4)]
    assert r.n_samples == p.n_samples == len(r.samples)
    assert r.value == sorted(r.samples)[p.order_statistic - 1]
    assert r.value > 0 and not r.cache_hit
    assert res[(2, 2)].value <= np.sqrt(2 * 2 * 2)  # each truncated row pair differs by at most sqrt(2)
    assert "probability >= 0.7" in r.statement and "not privatised" in r.statement
    # cache hit: same values whatever the seed
    again = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, cache_dir=tmp_path).sample(0.3, rng=99)
    assert again[(3, 4)].cache_hit and again[(3, 4)].samples == r.samples
    # smaller gamma extends the cached i.i.d. samples instead of recomputing them
    more = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, cache_dir=tmp_path).draw(30)[0]
    assert np.array_equal(more[: p.n_samples, 1], np.array(r.samples))


def test_sampler_is_reproducible_and_parallel_equals_serial(corpus: UserCorpus, model: SklearnLDA) -> None:
    a = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)]).draw(6, rng=5)[0]
    b = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)], n_jobs=2).draw(6, rng=5)[0]
    assert np.allclose(a, b, rtol=0, atol=1e-9)
    c = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)], neighbours="replace").draw(6, rng=5)[0]
    assert c.shape == (6, 1)


def _write_jsonl(path: Path) -> Path:
    texts, users = _synthetic()
    with path.open("w") as fh:
        for t, u in zip(texts, users):
            fh.write(json.dumps({"author": u, "text": t}) + "\n")
    return path


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("topics-cache")


@pytest.mark.parametrize("mechanism", ["topicdp", "laplace", "mvg", "topicdp-thesis"])
def test_cli_topics(tmp_path: Path, mechanism: str, shared_cache: Path) -> None:
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    out = tmp_path / "out" / "release.json"
    result = CliRunner().invoke(app, [
        "topics", str(src), "--user-field", "author", "--topics", "3", "--keywords", "4",
        "--model-topics", "3", "--epsilon", "3", "--delta", "1e-4", "--gamma", "0.3", "--mechanism", mechanism,
        "--max-iter", "3", "--jobs", "1", "--cache-dir", str(shared_cache), "--seed", "4",
        "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    rec = json.loads(out.read_text())
    for key in ("keywords", "matrix", "mechanism", "epsilon", "delta", "gamma", "sensitivity", "guarantee"):
        assert key in rec
    assert len(rec["matrix"]) == 3 and len(rec["matrix"][0]) == 4 and len(rec["keywords"][0]) == 4
    settings = json.loads((tmp_path / "out" / "release.json.settings.json").read_text())
    assert settings["mechanism"] == mechanism and settings["seed"] == 4
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_cli_topics_errors(tmp_path: Path) -> None:
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    runner = CliRunner()
    r = runner.invoke(app, ["topics", str(src), "--epsilon", "-1", "-q"])
    assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["topics", str(src), "--user-field", "poster", "-q"])
    assert r.exit_code == 2 and "poster" in r.output
    r = runner.invoke(app, ["topics", str(tmp_path / "missing.jsonl"), "-q"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["topics", "--help"])
    assert r.exit_code == 0 and "gamma" in r.output.lower()


def test_tomotopy_backend(corpus: UserCorpus) -> None:
    pytest.importorskip("tomotopy")
    from textdp.topics import TomotopyLDA, make_topic_model

    model = make_topic_model("tomotopy", n_topics=3, max_iter=2, seed=1)
    assert isinstance(model, TomotopyLDA)
    a, pa = model.fit(corpus.X)
    b, _ = model.fit(corpus.X)
    assert a.shape == (3, corpus.X.shape[1]) and np.allclose(a.sum(axis=1), 1)
    assert np.allclose(a, b)  # single-threaded Gibbs with a fixed seed is deterministic
    assert pa.sum() == pytest.approx(1)
