"""The covered topic release (issue 30): keywords read off the noisy values over a public vocabulary.

The default of ``textdp topics`` adds the noise to each released topic's whole row over a public
vocabulary and names each topic's keywords by its largest *noisy* values, so every part of the release is
covered; the thesis's release (keywords chosen by the non-private model) is the opt-in
``--keywords-from model`` and says that its identities are not covered. Also issue 27 §3 item 8: the
sampler says how long it will take before it starts, and prints plain progress lines off a terminal.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.cli.topics import MODEL_KEYWORDS_LINE, SamplerProgress
from textdp.errors import ParameterError
from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus, extract_topic_matrix
from textdp.topics.family import TopicDP, TopicDPLaplace
from textdp.topics.models import fit_database, topic_rows, topic_rows_distance
from textdp.topics.release import KEYWORD_NOTE
from textdp.topics.vocabulary import PublicVocabulary

runner = CliRunner()

WORDS = ["gas", "power", "price", "market", "energy", "deal", "trade", "contract", "game", "team", "coach",
         "season", "player", "score", "win", "league"]


def _rows(seed: int = 0, m: int = 3, v: int = 12) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    tw = rng.dirichlet(np.ones(v) * 0.3, size=5)
    return tw, rng.dirichlet(np.ones(5)), WORDS[:v]


def test_keywords_are_the_largest_noisy_values_not_the_models():
    tw, prev, vocab = _rows()
    rows = topic_rows(tw, prev, vocab, 3)
    mech = TopicDP(epsilon=0.5, delta=1e-5, sensitivity="worst-case", keywords=4)
    rel = mech.privatize_batch([rows], seed=7)[0]
    noisy = mech.noise(rows.shape).randomize(rows.matrix, seed=7)  # the same draw: seed 7 gives the same noise
    order = np.argsort(-noisy, axis=1, kind="stable")[:, :4]
    assert rel.keywords == tuple(tuple(vocab[c] for c in row) for row in order)
    assert np.array_equal(np.array(rel.raw_matrix), np.take_along_axis(noisy, order, axis=1))
    model = extract_topic_matrix(tw, prev, vocab, 3, 4)
    assert rel.keywords != model.keywords  # at this noise the noisy top 4 are not the model's top 4
    # with almost no noise the noisy values name the model's own keywords (the topics' order is the model's)
    quiet = TopicDP(epsilon=1e5, delta=1e-5, sensitivity=1e-6, keywords=4, seed=1).privatize(rows)
    assert quiet.keywords == model.keywords


def test_covered_guarantee_says_so_and_the_model_release_says_it_is_not():
    tw, prev, vocab = _rows()
    rel = TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", keywords=5, seed=3).privatize(
        topic_rows(tw, prev, vocab, 3))
    g = rel.guarantee
    assert g.params["keywords_from"] == "noisy" and g.params["keywords_per_topic"] == 5
    assert g.params["noised_columns"] == len(vocab) and g.shape == (3, len(vocab))
    assert "Covered too" in g.statement and "chosen by the non-private model" not in g.statement
    assert "NOT covered" not in rel.keyword_note and "NOT covered" not in json.dumps(rel.to_record())
    model = TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", seed=3).privatize(
        extract_topic_matrix(tw, prev, vocab, 3, 5))
    assert model.keyword_note == KEYWORD_NOTE and "chosen by the non-private model" in model.guarantee.statement
    lap = TopicDPLaplace(epsilon=1.0, keywords=2, seed=1).privatize(topic_rows(tw, prev, vocab, 2))
    assert "Covered too" in lap.guarantee.statement and lap.guarantee.not_covered
    assert [len(k) for k in lap.keywords] == [2, 2]


def test_mismatched_units_are_refused():
    tw, prev, vocab = _rows()
    with pytest.raises(ParameterError, match="keywords_from='model'"):
        TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", keywords_from="noisy").privatize(
            extract_topic_matrix(tw, prev, vocab, 3, 4))
    with pytest.raises(ParameterError, match="whole rows"):
        TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", keywords_from="model").privatize(
            topic_rows(tw, prev, vocab, 3))
    with pytest.raises(ParameterError, match="vocabulary of 12"):
        TopicDP(epsilon=1.0, delta=1e-5, sensitivity="worst-case", keywords=20).privatize(
            topic_rows(tw, prev, vocab, 3))


def _toy_corpus() -> UserCorpus:
    rng = np.random.default_rng(5)
    texts, users = [], []
    for u in range(12):
        words = WORDS[:8] if u % 2 else WORDS[8:]
        for _ in range(4):
            texts.append(" ".join(rng.choice(words, size=12)))
            users.append(f"u{u}")
    return UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0)


def test_sampler_measures_the_whole_rows_over_the_public_vocabulary(tmp_path):
    corpus = _toy_corpus()
    pub = corpus.with_public_vocabulary(PublicVocabulary(tuple(WORDS), "toy list"))
    model = SklearnLDA(n_topics=3, max_iter=3)
    sampler = SensitivitySampler(corpus=pub, model=model, sizes=[(2, len(WORDS))], rows=True)
    got = sampler.draw(3, seed=2)[0][:, 0]
    from textdp.topics.sensitivity import _streams, draw_neighbours

    for i, gen in enumerate(_streams(2, 3)):  # the same pairs, measured by hand
        a, b = draw_neighbours(pub.n_users, pub.n_users, "add-remove", gen)
        tw_a, prev_a, _ = fit_database(pub, model, a)
        tw_b, prev_b, _ = fit_database(pub, model, b)
        assert got[i] == pytest.approx(float(topic_rows_distance(tw_a, prev_a, tw_b, prev_b, [2])[0]))
    assert sampler.cache_key() != SensitivitySampler(corpus=pub, model=model, sizes=[(2, len(WORDS))]).cache_key()
    with pytest.raises(ParameterError, match="public vocabulary"):
        SensitivitySampler(corpus=corpus, model=model, sizes=[(2, 5)], rows=True)


def _write_corpus(tmp_path, corpus_rows: int = 48):
    rng = np.random.default_rng(6)
    path = tmp_path / "c.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(corpus_rows):
            words = WORDS[:8] if i % 2 else WORDS[8:]
            fh.write(json.dumps({"author": f"u{i % 12}", "text": " ".join(rng.choice(words, size=12))}) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS + ["river", "stone"]) + "\n", encoding="utf-8")
    return path, vocab


def test_cli_default_release_is_covered(tmp_path):
    path, vocab = _write_corpus(tmp_path)
    out = tmp_path / "rel.json"
    res = runner.invoke(app, ["topics", str(path), "-o", str(out), "--mechanism", "topicdp", "--vocabulary", str(vocab),
                              "--topics", "2",
                              "--keywords", "3", "--model-topics", "3", "--sensitivity", "worst-case",
                              "--seed", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    params = rec["guarantee"]["parameters"]
    assert params["keywords_from"] == "noisy" and "NOT covered" not in json.dumps(rec)
    assert all(len(k) == 3 and set(k) <= set(WORDS + ["river", "stone"]) for k in rec["keywords"])
    assert MODEL_KEYWORDS_LINE not in res.output
    settings = json.loads((tmp_path / "rel.json.settings.json").read_text())
    assert settings["keywords_from"] == "noisy"


def test_cli_model_keywords_say_they_are_not_covered(tmp_path):
    path, _ = _write_corpus(tmp_path)
    out = tmp_path / "rel.json"
    res = runner.invoke(app, ["topics", str(path), "-o", str(out), "--mechanism", "topicdp", "--vocabulary", "corpus",
                              "--keywords-from",
                              "model", "--min-user-docs", "1", "--topics", "2", "--keywords", "3", "--model-topics",
                              "3", "--sensitivity", "worst-case", "--seed", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert MODEL_KEYWORDS_LINE in " ".join(res.output.split())  # one line on stderr, even with --quiet
    rec = json.loads(out.read_text())
    assert rec["guarantee"]["parameters"]["keywords_from"] == "model"
    assert "NOT covered" in rec["guarantee"]["parameters"]["keyword_note"]


def test_cli_refuses_a_private_vocabulary_for_covered_keywords(tmp_path):
    path, _ = _write_corpus(tmp_path)
    res = runner.invoke(app, ["topics", str(path), "--vocabulary", "corpus", "--sensitivity", "worst-case"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "public --vocabulary" in res.output and len(res.output.strip().splitlines()) == 1


def test_keywords_from_model_help_quotes_the_attack():
    res = runner.invoke(app, ["topics", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert "--keywords-from" in text and "11-13% TPR at 0.1% FPR" in text and "33-38%" in text


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_sampler_progress_estimates_before_and_after_the_first_pairs():
    lines: list[str] = []
    clock = _Clock()
    p = SamplerProgress(285, lines.append, plain=True, fit_seconds=2.0, clock=clock)
    p.announce(0)
    assert "285 of 285 pairs" in lines[0] and "570 model fits" in lines[0] and "about 19 min" in lines[0]
    assert "--sensitivity worst-case" in lines[0]
    p(0, 285)  # the sampler reports its start
    for k in (1, 2, 3):
        clock.t = 5.0 * k
        p(k, 285)
    assert "the first 3 pairs took 15 s" in lines[1] and "about 24 min left" in lines[1]
    clock.t = 20.0
    p(4, 285)
    assert len(lines) == 2  # plain lines at most every 30 s
    clock.t = 50.0
    p(10, 285)
    assert lines[2].startswith("sampling the sensitivity: 10/285 pairs (4%), 50 s elapsed, about")
    clock.t = 60.0
    p(285, 285)
    assert lines[3] == "sampling the sensitivity: 285/285 pairs (100%), 60 s elapsed"
    on_terminal: list[str] = []
    q = SamplerProgress(285, on_terminal.append, plain=False, clock=clock)
    q.announce(100)
    q(100, 285)
    clock.t = 200.0
    q(150, 285)
    q(151, 285)
    assert len(on_terminal) == 2 and "185 of 285 pairs" in on_terminal[0] and "100 pairs from the cache" in \
        on_terminal[0]


def test_cli_sampled_run_off_a_terminal_prints_the_estimate_and_progress_lines(tmp_path):
    path, vocab = _write_corpus(tmp_path)
    res = runner.invoke(app, ["topics", str(path), "--mechanism", "topicdp", "--vocabulary", str(vocab), "--topics", "2",
                              "--keywords", "3",
                              "--model-topics", "3", "--gamma", "0.45", "--max-iter", "2", "--no-cache",
                              "--seed", "1", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "sampling the sensitivity: 10 of 10 pairs of databases to fit (20 model fits)" in text
    assert "one fit of the corpus took" in text and "sampling the sensitivity: 10/10 pairs (100%)" in text
