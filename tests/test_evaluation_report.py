"""Evaluation: corpus construction, statistics, frontier, config, and `textdp evaluate` end to end."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from textdp.errors import ParameterError, ParameterTypeError
from textdp.evaluation import (
    bootstrap_ci,
    build_evaluation_set,
    chance_accuracy,
    config_from_dict,
    frontier,
    strip_quoted,
)

DATA_DIR = Path(os.environ.get("TEXTDP_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")


def _write_corpus(path: Path, n_topics: int = 2, per_topic: int = 3, words_per_doc: int = 120) -> None:
    """A synthetic user+topic corpus of real English words (GloVe's frequent words)."""
    from textdp.embeddings import load_embeddings
    from textdp.text import ENGLISH_STOP_WORDS

    emb = load_embeddings(vocab_size=4000)
    pool = [w for w in emb.words[200:4000] if w.isalpha() and len(w) > 2 and w not in ENGLISH_STOP_WORDS]
    rs = np.random.default_rng(0)
    rows = []
    for t in range(n_topics):
        topic_words = pool[t * 100 : (t + 1) * 100]
        for a in range(per_topic):
            own = pool[1000 + (t * per_topic + a) * 30 : 1000 + (t * per_topic + a + 1) * 30]
            for d in range(6):
                words = [str(rs.choice(topic_words)) if rs.random() < 0.5 else str(rs.choice(own)) for _ in range(words_per_doc)]
                rows.append({"id": f"{t}-{a}-{d}", "author": f"user{t}{a}", "group": f"topic{t}", "text": " ".join(words)})
        for d in range(20):  # other posters: topic training data
            words = [str(rs.choice(topic_words)) for _ in range(60)]
            rows.append({"id": f"o{t}-{d}", "author": f"other{t}{d}", "group": f"topic{t}", "text": " ".join(words)})
    rows.append({"id": "noauthor", "author": None, "group": "topic0", "text": "nothing"})
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def test_bootstrap_and_chance() -> None:
    lo, hi = bootstrap_ci(np.array([1] * 30 + [0] * 20), np.random.default_rng(0), n_boot=500)
    assert lo < 0.6 < hi
    assert bootstrap_ci([1, 1, 1], np.random.default_rng(0)) == (1.0, 1.0)
    assert chance_accuracy(["a", "b", "a"]) == 0.5


def test_strip_quoted() -> None:
    text = "In article <x@y> joe@z.com writes:\n> quoted\n|also quoted\nmy own words"
    assert strip_quoted(text) == "my own words"


def test_config_validation() -> None:
    base = {"corpus": {"name": "x.jsonl"}, "mechanism": {"epsilons": [5]}}
    cfg = config_from_dict(base)
    assert cfg.attackers and cfg.utility == []
    with pytest.raises(ParameterError, match="epsilon"):
        config_from_dict({**base, "mechanism": {"epsilons": [0]}})
    with pytest.raises(ParameterError, match="attacker"):
        config_from_dict({**base, "attackers": {"models": ["nope"]}})
    with pytest.raises(ParameterError, match="unknown key"):
        config_from_dict({**base, "run": {"sed": 1}})
    with pytest.raises(ParameterTypeError):
        config_from_dict({**base, "run": {"seed": "1"}})
    with pytest.raises(ParameterError, match="held out"):
        build_evaluation_set("pan19_fanfiction", data_dir=DATA_DIR)


def test_frontier_reports_where_target_fails() -> None:
    rows = [
        {"epsilon": None, "model": "a", "kind": "attack", "accuracy": 0.6, "chance": 0.1},
        {"epsilon": None, "model": "u", "kind": "utility", "accuracy": 0.9, "chance": 0.5},
        {"epsilon": 10.0, "model": "a", "kind": "attack", "accuracy": 0.4, "chance": 0.1},
        {"epsilon": 10.0, "model": "u", "kind": "utility", "accuracy": 0.88, "chance": 0.5},
        {"epsilon": 2.0, "model": "a", "kind": "attack", "accuracy": 0.1, "chance": 0.1},
        {"epsilon": 2.0, "model": "u", "kind": "utility", "accuracy": 0.6, "chance": 0.5},
    ]
    fr = frontier(rows)
    assert fr["met"] == []
    assert fr["largest_private_epsilon"] == 2.0 and fr["smallest_useful_epsilon"] == 10.0


def test_construction_is_deterministic(tmp_path: Path) -> None:
    path = tmp_path / "toy.jsonl.gz"
    _write_corpus(path)
    kw = {"topic_field": "group", "known_words": 200, "unknown_words": 100, "n_topics": 2, "authors_per_topic": 2}
    a = build_evaluation_set(str(path), **kw)
    b = build_evaluation_set(str(path), **kw)
    assert a.authors == b.authors and a.known == b.known and a.unknown == b.unknown
    assert len(a.authors) == 4 and sorted(set(a.topics or [])) == ["topic0", "topic1"]
    assert len(a.known[0]) == 200 and len(a.unknown[0]) == 100
    assert not set(a.authors) & {"other00"}  # evaluated authors only
    assert len(a.topic_train_texts) == 40 + 2 * 6  # every non-selected poster in the kept topics


def test_evaluate_cli_end_to_end(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from textdp.cli import app

    corpus = tmp_path / "toy.jsonl.gz"
    _write_corpus(corpus)
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        f"""
[corpus]
name = "{corpus}"
topic_field = "group"
known_words = 200
unknown_words = 100
authors_per_topic = 3
[mechanism]
epsilons = [30, 3]
vocab_size = 5000
[attackers]
models = ["koppel-pan", "koppel-2011", "nn-author", "char-ngram"]
koppel_trials = 10
koppel_features = 2000
[utility]
models = ["tfidf-topic", "knn-topic"]
[run]
seed = 3
bootstrap = 50
""",
        encoding="utf-8",
    )
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["evaluate", str(cfg), "--output", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    rows = json.loads((out / "results.json").read_text())
    keys = {"epsilon", "model", "kind", "correct", "total", "accuracy", "chance"}
    assert all(keys <= set(r) for r in rows)
    main = [r for r in rows if r["text"] == "bag"]
    assert {r["epsilon"] for r in main} == {None, 30.0, 3.0}
    assert {r["kind"] for r in main} == {"attack", "utility"}
    assert all(r["total"] == 6 for r in main)
    none_koppel = next(r for r in main if r["epsilon"] is None and r["model"] == "koppel-2011")
    assert none_koppel["accuracy"] >= 0.5  # planted author words are easy
    for name in ("report.md", "settings.json", "attacks.png", "utility.png", "privacy_utility.png"):
        assert (out / name).is_file()
    report = (out / "report.md").read_text()
    assert "Table 1" in report and "2x chance" in report
    settings = json.loads((out / "settings.json").read_text())
    assert settings["config"]["seed"] == 3
    # same seed, same rows
    out2 = tmp_path / "report2"
    assert CliRunner().invoke(app, ["evaluate", str(cfg), "-o", str(out2), "-q", "--no-plots"]).exit_code == 0
    rows2 = json.loads((out2 / "results.json").read_text())
    assert [r["correct"] for r in rows] == [r["correct"] for r in rows2]


def test_evaluate_cli_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from textdp.cli import app

    bad = tmp_path / "bad.toml"
    bad.write_text('[corpus]\nname = "x"\n[mechanism]\nepsilons = [-1]\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate", str(bad)])
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2


@pytest.mark.data
@pytest.mark.skipif(not (DATA_DIR / "20newsgroups").is_dir(), reason="corpora not available")
def test_evaluate_on_20newsgroups_tiny(tmp_path: Path, ng20_tiny_set) -> None:
    from textdp.evaluation import config_from_dict, run_experiment

    cfg = config_from_dict({
        "corpus": {"name": "20newsgroups", "data_dir": str(DATA_DIR), "n_topics": 2, "authors_per_topic": 3,
                   "known_words": 300, "unknown_words": 150, "max_topic_train": 300},
        "mechanism": {"epsilons": [10], "vocab_size": 20000},
        "attackers": {"models": ["koppel-pan", "nn-author"], "koppel_trials": 10, "koppel_features": 2000},
        "utility": {"models": ["tfidf-topic"]},
        "run": {"bootstrap": 50},
    })
    res = run_experiment(cfg, eval_set=ng20_tiny_set)  # the same corpus keys (conftest.NG20_TINY)
    assert res.n_authors == 6 and res.n_topics == 2
    assert {r["model"] for r in res.rows} == {"koppel-pan", "nn-author", "tfidf-topic"}


@pytest.mark.skipif(__import__("importlib").util.find_spec("fasttext") is None, reason="extra fasttext not installed")
def test_fasttext_topic_classifier() -> None:
    from textdp.evaluation import FastTextTopicClassifier

    clf = FastTextTopicClassifier().fit(["space rocket orbit", "hockey puck goal"] * 20, ["sci", "sport"] * 20)
    assert clf.predict(["orbit rocket", "goal puck"]).tolist() == ["sci", "sport"]


def test_mechanism_options_domain_vocab_bag_size_decoder(tmp_path: Path) -> None:
    from textdp.evaluation import run_experiment
    from textdp.evaluation.experiment import domain_vocabulary

    corpus = tmp_path / "toy.jsonl.gz"
    _write_corpus(corpus)
    words = tmp_path / "words.txt"
    base = {
        "corpus": {"name": str(corpus), "topic_field": "group", "known_words": 200, "unknown_words": 100,
                   "authors_per_topic": 3},
        "attackers": {"models": ["nn-author"]},
        "utility": {"models": ["tfidf-topic"]},
        "run": {"bootstrap": 20, "seed": 1},
    }
    mech = {"epsilons": [30], "vocab_size": 5000, "domain_vocab": "topic-train", "domain_min_count": 2,
            "bag": "sample", "size": 40, "decoder": "faiss-exact"}
    cfg = config_from_dict({**base, "mechanism": mech})
    assert (cfg.domain_vocab, cfg.domain_min_count, cfg.bag, cfg.size, cfg.decoder) == (
        "topic-train", 2, "sample", 40, "faiss-exact")
    res = run_experiment(cfg)
    assert res.bag_size == 40
    # the domain vocabulary comes from the other posters' texts, never the evaluated snippets
    from textdp.evaluation import build_evaluation_set

    es = build_evaluation_set(str(corpus), topic_field="group", known_words=200, unknown_words=100, authors_per_topic=3)
    vocab = set(domain_vocabulary(cfg, es))
    own = {w for u in es.unknown for w in u} - {w for t in es.topic_train_texts for w in t}
    assert vocab and not vocab & own
    # a word-list file works too; truncate with size above the shortest snippet is refused
    words.write_text("\n".join(sorted(vocab)[:50]), encoding="utf-8")
    assert len(domain_vocabulary(config_from_dict({**base, "mechanism": {**mech, "domain_vocab": str(words),
                                                                          "domain_min_count": 1}}), es)) == 50
    with pytest.raises(ParameterError, match="size"):
        run_experiment(config_from_dict({**base, "mechanism": {"epsilons": [30], "vocab_size": 5000, "size": 10_000}}))
    for bad in ({"bag": "shuffle"}, {"decoder": "magic"}, {"size": 0}, {"domain_min_count": 0}):
        with pytest.raises((ParameterError, ParameterTypeError)):
            config_from_dict({**base, "mechanism": {"epsilons": [30], **bad}})
    with pytest.raises(ParameterError, match="topic-training"):
        domain_vocabulary(cfg, build_evaluation_set(str(corpus), known_words=200, unknown_words=100))
