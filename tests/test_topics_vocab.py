"""TopicDP's vocabulary is covered by the guarantee, and the worst-case sensitivity sqrt(2m) holds (issue 19, item 3).

The released function builds its vocabulary from its input database. The sensitivity sampler must
measure that function: on a neighbouring database it must compute, byte for byte, what the CLI
would release had that neighbour been the corpus. On b4f2b11 the sampler held the full corpus's
vocabulary fixed, so these tests fail there. Small real corpus: 14 Enron users, few LDA passes.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp._rng import make_rng, spawn
from textdp.cli import app
from textdp.topics import (
    SklearnLDA,
    UserCorpus,
    make_topic_model,
    released_matrix_distance,
)
from textdp.topics import models as topic_models
from textdp.topics import sensitivity as sens_mod
from textdp.topics.family import TopicDP

runner = CliRunner()
M, N, K, ITER, SEED = 3, 4, 4, 3, 7
#: the CLI invocation whose released function the tests rebuild (supplied sensitivity: no sampling); the
#: thesis's release over the corpus vocabulary (keywords chosen by the model), whose function these tests rebuild
ARGS = ["--mechanism", "topicdp", "--topics", str(M), "--keywords", str(N), "--model-topics", str(K), "--max-iter", str(ITER),
        "--max-docs-per-user", "8", "--sensitivity", "0.5", "--no-cache", "-q", "--seed", str(SEED),
        "--keywords-from", "model", "--vocabulary", "corpus"]


def _enron_rows(shared_data: Path, users: int = 14, docs: int = 8) -> list[dict]:
    out: list[dict] = []
    per: dict[str, int] = {}
    with gzip.open(shared_data / "pan11_enron" / "pan11_enron.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            a = str(r["author"])
            if a not in per and len(per) == users:
                continue
            if per.get(a, 0) < docs:
                per[a] = per.get(a, 0) + 1
                out.append({"author": a, "text": r["text"]})
    return out


@pytest.fixture(scope="module")
def enron(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    rows = _enron_rows(shared_data)
    path = tmp_path_factory.mktemp("enron") / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows


def _cli_raw(corpus: Path, tmp: Path, *extra: str) -> dict:
    out = tmp / f"rel-{len(list(tmp.iterdir()))}.json"
    res = runner.invoke(app, ["topics", str(corpus), "-o", str(out), *ARGS, *extra])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def _sampler_release(corpus: UserCorpus, users: list[int]) -> np.ndarray:
    """What the sampler's job fits on the database ``users``, noised as the CLI noises the release."""
    model = make_topic_model("sklearn", n_topics=K, max_iter=ITER, seed=0)
    tw, prev = model.fit(corpus.rows_for(users))
    values = topic_models._released_values(tw, prev, M, N)
    mech = TopicDP(epsilon=3.0, delta=1e-4, sensitivity=0.5).fit()
    return mech.noise(values.shape).randomize(values, seed=spawn(SEED, 2)[1])


def test_release_is_the_sampled_function_on_the_whole_corpus(enron, tmp_path):
    path, _rows = enron
    corpus = UserCorpus.from_jsonl(path, max_docs_per_user=8)
    rec = _cli_raw(path, tmp_path)
    expected = _sampler_release(corpus, list(range(corpus.n_users)))
    assert np.array_equal(np.array(rec["raw_matrix"]), expected)  # byte for byte: same values, same noise


def test_sampler_rebuilds_the_neighbours_vocabulary(enron, tmp_path):
    """Drop one user: the sampler's database equals the CLI's release on that neighbour as a corpus."""
    path, rows = enron
    corpus = UserCorpus.from_jsonl(path, max_docs_per_user=8)
    changed = 0
    for dropped in (0, 5):
        keep = [u for u in range(corpus.n_users) if u != dropped]
        sub = tmp_path / f"without-{dropped}.jsonl"
        sub.write_text("".join(json.dumps(r) + "\n" for r in rows if r["author"] != corpus.users[dropped]),
                       encoding="utf-8")
        alone = UserCorpus.from_jsonl(sub, max_docs_per_user=8)
        changed += alone.vocabulary != corpus.vocabulary
        rec = _cli_raw(sub, tmp_path)
        assert np.array_equal(np.array(rec["raw_matrix"]), _sampler_release(corpus, keep)), dropped
    assert changed, "removing a user should change the corpus vocabulary (else this test checks nothing)"


def test_database_is_byte_for_byte_the_corpus_of_those_users(enron):
    """``database(S)`` == ``from_texts`` of S's documents, including max_features ties (random S)."""
    _, rows = enron
    kw = {"max_docs_per_user": 8, "max_features": 40, "min_df": 2, "max_df": 0.5}
    corpus = UserCorpus.from_texts([r["text"] for r in rows], [r["author"] for r in rows], **kw)
    gen = make_rng(3)
    for _ in range(6):
        users = sorted(gen.choice(corpus.n_users, size=int(gen.integers(3, corpus.n_users)), replace=False))
        names = {corpus.users[u] for u in users}
        sub = [r for r in rows if r["author"] in names]
        alone = UserCorpus.from_texts([r["text"] for r in sub], [r["author"] for r in sub], **kw)
        X, vocab = corpus.database(users)
        assert vocab == alone.vocabulary
        assert (X != alone.X).nnz == 0 and X.shape == alone.X.shape


def test_the_sampler_job_measures_the_released_matrices(enron, tmp_path, monkeypatch):
    """The distance the sampler's job records for (all users, all but one) is the distance of the two CLI releases.

    Both CLI runs use the same seed and sensitivity, so their noise is identical and the difference
    of the raw releases is the difference of the grid-rounded true matrices.
    """
    path, rows = enron
    corpus = UserCorpus.from_jsonl(path, max_docs_per_user=8)
    dropped = 5
    keep = [u for u in range(corpus.n_users) if u != dropped]
    monkeypatch.setattr(sens_mod, "draw_neighbours", lambda *a: (list(range(corpus.n_users)), keep))
    ctx = sens_mod._Context(corpus=corpus, model=make_topic_model("sklearn", n_topics=K, max_iter=ITER, seed=0),
                            sizes=((M, N),), n_users=corpus.n_users, neighbours="add-remove")
    sampled = sens_mod._sample_one(ctx, make_rng(0))[0]
    sub = tmp_path / "without.jsonl"
    sub.write_text("".join(json.dumps(r) + "\n" for r in rows if r["author"] != corpus.users[dropped]),
                   encoding="utf-8")
    a = np.array(_cli_raw(path, tmp_path)["raw_matrix"])
    b = np.array(_cli_raw(sub, tmp_path)["raw_matrix"])
    grid = 2.0 ** -20
    assert abs(float(np.linalg.norm(a - b)) - sampled) <= grid * math.sqrt(M * N)


# --- public vocabularies -------------------------------------------------------------------


def test_public_word_list_fixes_the_columns_for_every_database(enron, tmp_path):
    path, _rows = enron
    words = ["meeting", "gas", "power", "price", "contract", "deal", "market", "energy", "california", "zzzunused"]
    vocab_file = tmp_path / "words.txt"
    vocab_file.write_text("\n".join(words + ["the", "Gas"]) + "\n", encoding="utf-8")  # stop word, duplicate
    from textdp.topics.vocabulary import read_vocabulary

    pub = read_vocabulary(vocab_file)
    assert pub.words == tuple(words)
    corpus = UserCorpus.from_jsonl(path, max_docs_per_user=8, vocabulary=pub)
    assert corpus.vocabulary == tuple(words)
    for users in ([0, 1], [2, 3, 4], list(range(corpus.n_users))):
        assert corpus.database(users)[1] == tuple(words)  # never data-dependent, unused words kept
    rec = _cli_raw(path, tmp_path, "--vocabulary", str(vocab_file))
    assert "public (word list (10 words" in rec["guarantee"]["parameters"]["vocabulary_note"]
    assert all(k in words for row in rec["keywords"] for k in row)
    settings = json.loads(next(tmp_path.glob("rel-*.settings.json")).read_text())
    assert settings["corpus_settings"]["vocabulary"].startswith("public: word list (10 words, file sha256 ")
    assert str(vocab_file) not in json.dumps(settings)


def test_glove_vocabulary_is_the_top_of_glove():
    from textdp.embeddings import load_default_embeddings
    from textdp.text import normalize
    from textdp.topics.vocabulary import glove_vocabulary

    v = glove_vocabulary(300)
    words = load_default_embeddings().words
    assert len(v.words) == 300 and v.name == "glove-6B-50d top 300"
    assert all(normalize(w) == [w] for w in v.words)
    assert v.words[0] == next(w for w in words if normalize(w) == [w])
    last = words.index(v.words[-1])  # every GloVe word before the last one kept is either kept or dropped by normalize
    assert [w for w in words[: last + 1] if normalize(w) == [w]] == list(v.words)


def test_vocabulary_option_refuses_the_private_input_and_bad_values(enron, tmp_path):
    path, _ = enron
    for bad, needle in ((str(path), "private input"), ("glove:abc", "glove:K"), (str(tmp_path / "nope.txt"),
                                                                                  "neither")):
        res = runner.invoke(app, ["topics", str(path), "-o", str(tmp_path / "x.json"), *ARGS, "--vocabulary", bad])
        assert res.exit_code == 2, res.output
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and needle in errors[0], res.stderr
        assert not (tmp_path / "x.json").exists()


def test_default_record_says_the_vocabulary_is_covered(enron, tmp_path):
    path, _ = enron
    rec = _cli_raw(path, tmp_path, "--sensitivity", "worst-case")
    assert "built from the private corpus by a public rule" in rec["guarantee"]["parameters"]["vocabulary_note"]
    assert "sqrt(2m) holds whatever the vocabulary" in rec["guarantee"]["parameters"]["vocabulary_note"]


# --- worst-case sensitivity sqrt(2m) ---------------------------------------------------------


def _sub_probability_rows(gen: np.random.Generator, m: int, v: int) -> np.ndarray:
    """Random topic-word rows: Dirichlet with random concentration, some with mass on one word."""
    alpha = gen.choice([0.01, 0.1, 1.0, 10.0])
    rows = gen.dirichlet(np.full(v, alpha), size=m)
    spike = gen.random(m) < 0.3
    rows[spike] = np.eye(v)[gen.integers(0, v, spike.sum())]
    return rows


def test_random_neighbours_never_exceed_the_worst_case_bound(enron):
    gen = make_rng(11)
    for _ in range(300):  # adversarial random released functions: any two topic-word matrices
        m, n, v = int(gen.integers(1, 6)), int(gen.integers(1, 8)), int(gen.integers(8, 40))
        k = m + int(gen.integers(0, 3))
        tw_a, tw_b = _sub_probability_rows(gen, k, v), _sub_probability_rows(gen, k, v)
        d = released_matrix_distance(tw_a, gen.random(k), tw_b, gen.random(k), [(m, n)])[0]
        assert d <= sens_mod.worst_case_sensitivity(m) + 1e-12
    _, rows = enron  # and real LDA fits of real neighbouring databases (the rebuilt vocabulary included)
    corpus = UserCorpus.from_texts([r["text"] for r in rows], [r["author"] for r in rows], max_docs_per_user=8)
    model = SklearnLDA(n_topics=K, max_iter=ITER)
    for i in range(4):
        a, b = sens_mod.draw_neighbours(corpus.n_users, corpus.n_users, "add-remove", make_rng(i))
        tw_a, pa, _ = topic_models.fit_database(corpus, model, a)
        tw_b, pb, _ = topic_models.fit_database(corpus, model, b)
        assert released_matrix_distance(tw_a, pa, tw_b, pb, [(M, N)])[0] <= sens_mod.worst_case_sensitivity(M)


def test_a_smaller_bound_is_violated():
    """The row lemma is tight (e_1 vs e_2 moves a sub-probability row by exactly sqrt 2), and the released
    function itself (rows sorted) reaches almost sqrt(m): a one-word topic against a flat one."""
    for m in (1, 3, 10):
        p, q = np.zeros((m, 5)), np.zeros((m, 5))
        p[:, 0], q[:, 1] = 1.0, 1.0
        assert np.linalg.norm(p - q) == pytest.approx(sens_mod.worst_case_sensitivity(m))
        v, n = 10_000, 5
        one_word = np.zeros((m, v))
        one_word[:, 0] = 1.0
        flat = np.full((m, v), 1.0 / v)
        d = released_matrix_distance(one_word, np.ones(m), flat, np.ones(m), [(m, n)])[0]
        assert d > 0.999 * math.sqrt(m)  # so sqrt(m) - 0.1% (e.g. the Laplace-style "1 per row") is wrong
        assert d <= sens_mod.worst_case_sensitivity(m)


def test_worst_case_cli_is_plain_dp_with_sqrt_2m(enron, tmp_path):
    path, _ = enron
    report = tmp_path / "private.json"
    out = tmp_path / "wc.json"
    res = runner.invoke(app, ["topics", str(path), "-o", str(out), "--private-report", str(report),
                              *ARGS, "--sensitivity", "worst-case"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    params = rec["guarantee"]["parameters"]
    assert params["gamma"] is None and params["definition"] == "differential privacy"
    statement = json.loads(out.with_name(out.name + ".settings.json").read_text())["guarantee"]["statement"]
    assert "sqrt(2m)" in statement and "every pair of neighbours" in statement
    assert "vouches" not in statement
    priv = json.loads(report.read_text())
    assert priv["sensitivity"] == pytest.approx(math.sqrt(2 * M))
    mech = TopicDP(epsilon=3.0, delta=1e-4, sensitivity="worst-case").fit()
    assert priv["noise_sigma"] == pytest.approx(mech.noise((M, N)).sigma((M, N)))
    settings = json.loads((tmp_path / "wc.json.settings.json").read_text())
    assert settings["sensitivity"] == "worst-case" and settings["gamma"] is None


def test_sensitivity_option_refuses_nonsense(enron, tmp_path):
    path, _ = enron
    for bad in ("abc", "-1", "nan", "inf", "0"):
        args = ARGS[:ARGS.index("--sensitivity")] + ARGS[ARGS.index("--sensitivity") + 2:]
        res = runner.invoke(app, ["topics", str(path), *args, f"--sensitivity={bad}"])
        assert res.exit_code == 2, (bad, res.output)
        assert [line for line in res.stderr.splitlines() if line.startswith("error:")], res.stderr


# --- issue 23 item 6: too many topics ----------------------------------------------------------


def test_too_many_topics_is_one_line_and_fast(enron, tmp_path):
    import time

    path, _ = enron
    t = time.perf_counter()
    res = runner.invoke(app, ["topics", str(path), "--topics", "5000", "-o", str(tmp_path / "t.json")])
    assert time.perf_counter() - t < 5
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().count("\n") == 0 and res.stderr.startswith("error:"), res.stderr
    assert "at most 500" in res.stderr and "Warning" not in res.stderr
    res = runner.invoke(app, ["topics", str(path), "--topics", "3", "--model-topics", "2"])
    assert res.exit_code == 2 and "more than --model-topics" in res.stderr
    with pytest.raises(Exception, match="limit of 500"):
        SklearnLDA(n_topics=501)
