"""Sensitivity sampler and CLI on a tiny synthetic user corpus (fast; no shared data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from record_schema import validate_record
from typer.testing import CliRunner

from textdp._rng import make_rng, spawn
from textdp.topics import (
    SensitivitySampler,
    SklearnLDA,
    UserCorpus,
    draw_neighbours,
    extract_topic_matrix,
    sampler_parameters,
    topic_matrix_distance,
)

THEMES = [
    "market price energy power contract trading gas deal",
    "meeting friday schedule week monday office call agenda",
    "game team season player score coach league win",
]


def _synthetic(n_users: int = 8, docs: int = 6, seed: int = 0) -> tuple[list[str], list[str]]:
    gen = make_rng(seed)
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
    return SklearnLDA(n_topics=3, max_iter=5, seed=0)


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
    res = s.sample(0.3, seed=1)
    p = sampler_parameters(0.3)
    r = res[(3, 4)]
    assert r.n_samples == p.n_samples == len(r.samples)
    assert r.value == sorted(r.samples)[p.order_statistic - 1]
    assert r.value > 0 and not r.cache_hit
    assert res[(2, 2)].value <= np.sqrt(2 * 2)  # two sub-probability rows differ by at most sqrt(2) in L2
    assert "probability >= 0.7" in r.statement and "not privatised" in r.statement
    # cache hit: same values whatever the seed
    again = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, cache_dir=tmp_path).sample(0.3, seed=99)
    assert again[(3, 4)].cache_hit and again[(3, 4)].samples == r.samples
    # smaller gamma extends the cached i.i.d. samples instead of recomputing them
    more = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, cache_dir=tmp_path).draw(30)[0]
    assert np.array_equal(more[: p.n_samples, 1], np.array(r.samples))


def test_sampler_is_reproducible(corpus: UserCorpus, model: SklearnLDA) -> None:
    a = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)]).draw(6, seed=5)[0]
    b = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)], chunk_size=4).draw(6, seed=5)[0]
    assert np.array_equal(a, b)  # the same whatever the chunking
    c = SensitivitySampler(corpus=corpus, model=model, sizes=[(3, 3)], neighbours="replace").draw(6, seed=5)[0]
    assert c.shape == (6, 1)


def test_local_and_dask_engines_give_the_same_samples(corpus: UserCorpus, model: SklearnLDA) -> None:
    distributed = pytest.importorskip("distributed")
    from textdp.engines.dask import DaskBackend

    local = SensitivitySampler(corpus=corpus, model=model, sizes=[(2, 2), (3, 3)]).draw(8, seed=5)[0]
    # a 2-worker LocalCluster of processes (HTTP server on a free port: other clusters may hold 8787)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        backend = DaskBackend(client=client)
        sampler = SensitivitySampler(corpus=corpus, model=model, sizes=[(2, 2), (3, 3)], backend=backend)
        assert sampler._chunk(8) == 1  # 8 pairs / (4 jobs x 2 workers)
        dask = sampler.draw(8, seed=5)[0]
    # LDA fits are deterministic up to BLAS summation order (threads differ between processes)
    assert np.allclose(local, dask, rtol=0, atol=1e-9)


def test_sampled_distance_is_that_of_the_released_function(corpus: UserCorpus, model: SklearnLDA) -> None:
    sizes = [(2, 2), (3, 4)]
    n = 10
    samples = SensitivitySampler(corpus=corpus, model=model, sizes=sizes).draw(n, seed=3)[0]
    gens = spawn(3, n)  # sample i is drawn with the i-th generator spawned from the seed
    aligned_differs = 0
    for i in range(n):
        users_a, users_b = draw_neighbours(corpus.n_users, corpus.n_users, "add-remove", gens[i])
        fit_a = model.fit(corpus.rows_for(users_a))
        fit_b = model.fit(corpus.rows_for(users_b))
        for s, (m, k) in enumerate(sizes):
            released_a = extract_topic_matrix(*fit_a, corpus.vocabulary, m, k).matrix
            released_b = extract_topic_matrix(*fit_b, corpus.vocabulary, m, k).matrix
            direct = float(np.linalg.norm(released_a - released_b))
            assert samples[i, s] == pytest.approx(direct, rel=1e-9, abs=1e-12)
            aligned = max(topic_matrix_distance(fit_a[0], fit_a[1], fit_b[0], [(m, k)])[0],
                          topic_matrix_distance(fit_b[0], fit_b[1], fit_a[0], [(m, k)])[0])
            aligned_differs += abs(aligned - direct) > 1e-6
    assert aligned_differs > 0  # the old (aligned) distance is a different function


def test_cache_holds_only_samples_and_no_generator_output(corpus: UserCorpus, model: SklearnLDA,
                                                          tmp_path: Path) -> None:
    s = SensitivitySampler(corpus=corpus, model=model, sizes=[(2, 2)], cache_dir=tmp_path)
    s.draw(4, seed=5)
    s.draw(6, seed=make_rng(5))
    (path,) = tmp_path.glob("sens-*.json")
    data = json.loads(path.read_text())
    assert set(data) == {"version", "sizes", "samples"} and len(data["samples"]) == 6
    text = path.read_text()
    # what versions before 0.2 stored: the first output of the (release-noise) generator
    for leaked in (make_rng(5).integers(0, 2**63 - 1), *make_rng(5).integers(0, 2**32, size=8, dtype=np.uint64)):
        assert str(int(leaked)) not in text
    # the sampler never touches a generator it is not given (its stream is separate from the noise)
    gen = make_rng(8)
    state = json.dumps(gen.bit_generator.state, sort_keys=True, default=lambda a: np.asarray(a).tolist())
    SensitivitySampler(corpus=corpus, model=model, sizes=[(2, 2)]).draw(2, seed=7)
    assert json.dumps(gen.bit_generator.state, sort_keys=True, default=lambda a: np.asarray(a).tolist()) == state


def _write_jsonl(path: Path) -> Path:
    texts, users = _synthetic()
    with path.open("w") as fh:
        for t, u in zip(texts, users):
            fh.write(json.dumps({"author": u, "text": t}) + "\n")
    return path


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("topics-cache")


@pytest.mark.parametrize("mechanism", ["topicdp", "topicdp-laplace", "mvg", "topicdp-thesis"])
def test_cli_topics(tmp_path: Path, mechanism: str, shared_cache: Path) -> None:
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    out = tmp_path / "out" / "release.json"
    out.parent.mkdir()  # -o never makes folders
    result = CliRunner().invoke(app, [
        "topics", str(src), "--user-field", "author", "--topics", "3", "--keywords", "4",
        "--model-topics", "3", "--epsilon", "3", "--delta", "1e-4", "--gamma", "0.3", "--mechanism", mechanism,
        "--max-iter", "3", "--cache-dir", str(shared_cache), "--seed", "4",
        "-o", str(out), "--private-report", str(tmp_path / "private.json"), "--quiet"])
    assert result.exit_code == 0, result.output
    rec = validate_record(json.loads(out.read_text()))  # the one record layout
    for key in ("keywords", "matrix", "raw_matrix", "mechanism", "epsilon", "delta", "unit", "guarantee", "seeded"):
        assert key in rec
    params = rec["guarantee"]["parameters"]
    assert {"gamma", "grid", "keyword_note", "noise"} <= set(params) and rec["release"] == "matrix"
    assert rec["unit"] == "user" and rec["seeded"] is True and rec["mechanism"] == mechanism
    assert len(rec["matrix"]) == 3 and len(rec["matrix"][0]) == 4 and len(rec["keywords"][0]) == 4
    raw = np.array(rec["raw_matrix"]) / params["grid"]
    assert np.all(raw == np.rint(raw))  # on the public grid, as read back from the JSON
    settings = json.loads((tmp_path / "out" / "release.json.settings.json").read_text())
    assert settings["mechanism"] == mechanism and settings["seeded"] is True and "seed" not in settings
    assert not list((tmp_path / "out").glob("*.tmp"))
    _assert_nothing_private(tmp_path, out, json.loads((tmp_path / "private.json").read_text()))


PRIVATE_KEYS = {"sensitivity_sampling", "corpus_users", "per_db_users", "n_users", "n_docs", "seconds",
                "fit_seconds", "sampling_seconds", "cache_hit", "cache_dir", "corpus", "noise_sigma", "samples"}


def _assert_nothing_private(tmp_path: Path, out: Path, private: dict) -> None:
    rec = json.loads(out.read_text())
    settings = json.loads(out.with_name(out.name + ".settings.json").read_text())
    assert not PRIVATE_KEYS & set(rec)
    assert not {"corpus", "seconds", "n_users", "n_docs"} & set(settings)
    assert not {"n_docs", "n_users"} & set(settings["corpus_settings"])
    public = out.read_text() + json.dumps(settings)
    assert str(tmp_path) not in public  # no paths
    # the private report has what was removed, and none of it appears in the release
    assert private["n_users"] == 8 and private["n_docs"] == 48 and "seconds" in private
    if private["sensitivity_source"] == "sampled":
        value = private["sensitivity_sampling"]["value"]
        assert private["sensitivity"] == value
        assert repr(value) not in public and f"{value:.6g}" not in public
        sigma = private.get("noise_sigma")
        if sigma is not None:
            assert repr(sigma) not in public and f"{sigma:.6g}" not in public


def test_cli_private_report_must_not_be_the_release(tmp_path: Path) -> None:
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    out = tmp_path / "release.json"
    runner = CliRunner()
    base = ["topics", str(src), "--mechanism", "topicdp-laplace", "--topics", "2", "--model-topics", "3", "-q"]
    r = runner.invoke(app, [*base, "-o", str(out), "--private-report", str(out)])
    assert r.exit_code == 2 and "private report" in r.output and not out.exists()
    r = runner.invoke(app, [*base, "-o", str(out), "--private-report", str(tmp_path / "release.json.settings.json")])
    assert r.exit_code == 2 and not out.exists()
    r = runner.invoke(app, [*base, "-o", str(out), "--private-report", str(src)])
    assert r.exit_code == 2 and "is the input file" in r.output  # the message of every command (io.check_output_paths)


def test_cli_release_noise_does_not_depend_on_the_sampler_cache(tmp_path: Path) -> None:
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    args = ["topics", str(src), "--mechanism", "topicdp", "--topics", "2", "--keywords", "3", "--model-topics", "3",
            "--gamma", "0.4",
            "--max-iter", "2", "--cache-dir", str(tmp_path / "cache"), "--seed", "9", "-q"]
    runner = CliRunner()
    cold = runner.invoke(app, [*args, "-o", str(tmp_path / "a.json")])
    warm = runner.invoke(app, [*args, "-o", str(tmp_path / "b.json")])  # samples come from the cache now
    assert cold.exit_code == 0 and warm.exit_code == 0, cold.output + warm.output
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert a["raw_matrix"] == b["raw_matrix"]  # the noise stream never shifts with the sampler's work


def test_cli_removed_aliases_are_refused(tmp_path: Path) -> None:
    """The pre-release aliases (``-n`` for keywords, ``--jobs``/``-j``, ``--backend``) are gone (exit 2)."""
    from textdp.cli import app

    src = _write_jsonl(tmp_path / "c.jsonl")
    base = ["topics", str(src), "--mechanism", "topicdp-laplace", "--topics", "2", "--model-topics", "3", "-q"]
    for i, old in enumerate((["-n", "3"], ["--jobs", "1"], ["-j", "1"], ["--backend", "sklearn"])):
        r = CliRunner().invoke(app, [*base, *old, "-o", str(tmp_path / f"r{i}.json")])
        assert r.exit_code == 2, (old, r.output)
        assert not (tmp_path / f"r{i}.json").exists()
    r = CliRunner().invoke(app, [*base, "--keywords", "3", "--topic-model", "sklearn", "-o", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert len(json.loads((tmp_path / "r.json").read_text())["keywords"][0]) == 3


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
