"""Issue 12, phase 2: every mechanism in ``textdp evaluate``, noise-aware attackers, a report that never overclaims.

Real corpora (``pan11_enron`` has no topic labels; ``20newsgroups`` has topics),
real GloVe, real attackers. The runs are tiny (few authors, short texts, a 20k
vocabulary) so the default suite stays fast; the sweeps themselves are documented
commands (docs/mechanism-comparison.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from textdp.errors import ParameterError, ParameterTypeError
from textdp.evaluation import (
    build_evaluation_set,
    config_from_dict,
    frontier,
    run_experiment,
    write_report,
)
from textdp.evaluation.report import frontiers, render_markdown
from textdp.text import normalize

DATA = Path(os.environ.get("TEXTDP_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")
needs_data = pytest.mark.skipif(not (DATA / "pan11_enron").is_dir(), reason="shared corpora not available")
FAST_ATTACK = {"models": ["koppel-pan", "nn-author", "noise-aware-nn-author"], "koppel_trials": 5,
               "koppel_features": 2000}


@pytest.fixture(scope="module")
def glove20k(glove):
    return glove.restrict(top_k=20000)


NG_CORPUS = {"name": "20newsgroups", "data_dir": str(DATA), "n_topics": 2, "authors_per_topic": 3,
             "known_words": 300, "unknown_words": 150, "max_topic_train": 300}


@pytest.fixture(scope="module")
def ng_set(ng20_tiny_set):
    return ng20_tiny_set  # conftest: the same corpus keys as NG_CORPUS


@pytest.fixture(scope="module")
def enron_run(glove20k):
    """A run on pan11_enron (no topic labels) with utility models asked for, as a new user would."""
    cfg = config_from_dict({
        "corpus": {"name": "pan11_enron", "data_dir": str(DATA), "known_words": 300, "unknown_words": 150,
                   "max_authors": 6},
        "mechanism": {"mechanisms": ["earth-movers", "cmp"], "epsilons": [30, 3]},
        "attackers": {**FAST_ATTACK, "reference_rows": False},
        "utility": {"models": ["tfidf-topic"]},
        "run": {"bootstrap": 20, "seed": 4},
    })
    return run_experiment(cfg, embeddings=glove20k)


@needs_data
def test_no_topic_labels_never_claims_the_target(enron_run, tmp_path: Path) -> None:
    res = enron_run
    assert res.n_topics is None and not [r for r in res.rows if r["kind"] == "utility"]
    for fr in frontiers(res.rows).values():
        assert fr["met"] == [] and fr["status"] == "not judged"
        assert all(p["useful"] is None and not p["meets"] for p in fr["per_epsilon"])
    # at eps 30 nearly nothing changes: the privacy side fails; at eps 3 it may hold, and still nothing is "met"
    md = render_markdown(res)
    assert "Target met" not in md and "| yes |" not in md and "meets: yes" not in md
    assert "utility was not measured" in md and "not judged" in md
    # no drop columns are announced when there are none
    assert "drop" not in md.split("## Comparison")[1].split("\n\n")[2]  # the comparison table's header
    assert "Drops are" not in md and "drop (points)" not in md
    write_report(res, tmp_path, plots=False)
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert all(f["status"] == "not judged" for f in settings["frontier"].values())
    from textdp.evaluation.report import load_result

    again = load_result(tmp_path)  # a report folder renders again without the run
    assert render_markdown(again) == (tmp_path / "report.md").read_text()


@needs_data
def test_chance_is_a_fraction(enron_run) -> None:
    md = render_markdown(enron_run)
    chance_rows = [ln for ln in md.splitlines() if ln.startswith("| chance")]
    assert chance_rows
    for ln in chance_rows:
        cells = [c.strip() for c in ln.strip("|").split("|")[1:] if c.strip()]
        assert cells and all(float(c) == pytest.approx(1 / 6, abs=1e-3) for c in cells), ln


@needs_data
def test_excluded_authors_are_listed() -> None:
    es = build_evaluation_set("pan11_enron", data_dir=DATA)  # the preset: 2,000 known + 1,000 unknown words
    c = es.construction
    assert c["corpus_authors"] == 72  # the candidate authors (filter in_candidate_set)
    assert len(c["excluded"]) == c["corpus_authors"] - c["eligible_authors"] > 0
    assert all(x["words"] < 3000 for x in c["excluded"])
    from textdp.evaluation.report import _construction_lines

    lines = "\n".join(_construction_lines(c, len(es.authors)))
    assert f"{c['authors']} authors evaluated, of {c['eligible_authors']} eligible and 72 in the corpus" in lines
    assert f"excluded: {len(c['excluded'])} author(s) with too few words" in lines


def _author_docs(author: str, field_values: tuple[str, ...]) -> list[str]:
    from textdp.evaluation.datasets import read_jsonl

    return [r["text"] for r in read_jsonl(DATA / "pan11_enron" / "pan11_enron.jsonl.gz")
            if r.get("author") == author and r.get("split") in field_values and r.get("in_candidate_set")
            and isinstance(r.get("text"), str) and r["text"].strip()]


@needs_data
def test_split_field_is_never_crossed_and_crossing_is_reported() -> None:
    es = build_evaluation_set("pan11_enron", data_dir=DATA, known_words=1000, unknown_words=500,
                              split_field="split", known_split=["train"], unknown_split=["test"])
    c = es.construction
    assert c["split_field"] == "split" and c["crossed_split"] == {}
    for author, known, unknown in list(zip(es.authors, es.known, es.unknown))[:3]:
        train = normalize(" ".join(_author_docs(author, ("train",))))
        test = normalize(" ".join(_author_docs(author, ("test",))))
        assert known == train[:1000] and unknown == test[:500]
    excluded = {x["author"] for x in c["excluded"]}
    assert excluded and not excluded & set(es.authors)
    # the default cut ignores the field: the construction says for whom it crossed it
    default = build_evaluation_set("pan11_enron", data_dir=DATA, known_words=1000, unknown_words=500)
    crossed = default.construction["crossed_split"]
    assert default.construction["detected_split_field"] == "split" and crossed
    author, sides = next(iter(crossed.items()))
    assert set(sides["known"]) & set(sides["unknown"]) or len(sides["known"]) > 1
    from textdp.evaluation.report import _construction_lines

    text = "\n".join(_construction_lines(default.construction, len(default.authors)))
    assert "split crossed" in text and f"for {len(crossed)} of" in text
    text = "\n".join(_construction_lines(c, len(es.authors)))
    assert "never cross" in text
    with pytest.raises(ParameterError, match="share"):
        build_evaluation_set("pan11_enron", data_dir=DATA, split_field="split", known_split=["train"],
                             unknown_split=["train"])


def test_a_target_is_met_only_when_both_sides_are_measured() -> None:
    rows = [
        {"mechanism": None, "epsilon": None, "model": "a", "kind": "attack", "accuracy": 0.6, "chance": 0.1, "text": "bag"},
        {"mechanism": None, "epsilon": None, "model": "u", "kind": "utility", "accuracy": 0.9, "chance": 0.2,
         "text": "bag"},
        {"mechanism": "m", "epsilon": 5.0, "model": "a", "kind": "attack", "accuracy": 0.1, "chance": 0.1, "text": "bag"},
        {"mechanism": "m", "epsilon": 5.0, "model": "u", "kind": "utility", "accuracy": 0.88, "chance": 0.2,
         "text": "bag"},
        {"mechanism": "m", "epsilon": 3.0, "model": "a", "kind": "attack", "accuracy": 0.1, "chance": 0.1, "text": "bag"},
    ]
    fr = frontier(rows, mechanism="m")
    assert fr["met"] == [5.0]  # eps 3 has no utility row: not met, whatever the attackers do
    p3 = next(p for p in fr["per_epsilon"] if p["epsilon"] == 3.0)
    assert p3["private"] is True and p3["useful"] is None and not p3["meets"]
    # a text mechanism is judged against the unmodified row of its own release form
    text_rows = [{**r, "text": "text"} for r in rows]
    assert frontier(rows + [{**r, "mechanism": "t"} for r in text_rows if r["mechanism"]] +
                    [r for r in text_rows if r["mechanism"] is None], mechanism="t")["met"] == [5.0]
    assert frontier([r for r in rows if r["kind"] == "attack"], mechanism="m")["status"] == "not judged"
    with pytest.raises(ValueError, match="mechanism="):
        frontier(rows + [{**rows[2], "mechanism": "other"}])


def test_mechanism_configs_are_validated() -> None:
    base = {"corpus": {"name": "x.jsonl"}, "mechanism": {"epsilons": [5]}}
    cfg = config_from_dict(base)
    assert [m.name for m in cfg.mechanisms] == ["earth-movers"]
    assert "noise-aware-nn-author" in cfg.attackers and "noise-aware-char-ngram" in cfg.attackers  # standard
    cfg = config_from_dict({"corpus": {"name": "x.jsonl"}, "mechanism": {"mechanism": "tem", "epsilons": [2]}})
    assert cfg.mechanisms[0].name == "tem" and cfg.mechanisms[0].release == "text"
    cfg = config_from_dict({"corpus": {"name": "x.jsonl"},
                            "mechanism": {"mechanisms": ["cmp", "syntf"], "epsilons": [5],
                                          "syntf": {"epsilons": [400, 800], "size": 20}}})
    spec = cfg.mechanisms[1]
    assert (spec.name, spec.release, spec.epsilons, spec.size) == ("syntf", "bag", [400.0, 800.0], 20)
    bad = [
        ({"mechanisms": ["syntf"], "epsilons": [1], "syntf": {"bag": "sample"}}, "draws its bag"),
        ({"mechanisms": ["syntf"], "epsilons": [1], "syntf": {"decoder": "hnsw"}}, "decoder applies"),
        ({"mechanisms": ["cmp"], "epsilons": [1], "santext": {"epsilons": [1]}}, "not listed"),
        ({"mechanisms": ["nope"], "epsilons": [1]}, "unknown mechanism"),
        ({"mechanisms": ["tem"], "epsilons": [1], "tem": {"gamma": 1}}, "no parameter 'gamma'"),
        ({"mechanisms": ["tem"], "epsilons": [1], "tem": {"postprocess": "mbr"}}, "postprocess applies"),
        ({"mechanisms": ["santext"], "epsilons": [1], "santext": {"bag": "sample"}}, "releases text"),
        ({"mechanisms": ["cmp"], "epsilons": [1], "cmp": {"output_vocab": "tiny"}}, "output_vocab"),
        ({"mechanisms": ["cmp", "cmp"], "epsilons": [1]}, "repeated"),
        ({"mechanisms": ["x"], "x": {"mechanism": "cmp"}}, "needs epsilons"),
        ({"mechanism": "cmp", "mechanisms": ["cmp"], "epsilons": [1]}, "not both"),
    ]
    for mech, message in bad:
        with pytest.raises((ParameterError, ParameterTypeError), match=message):
            config_from_dict({"corpus": {"name": "x.jsonl"}, "mechanism": mech})
    with pytest.raises(ParameterError, match="attacker"):
        config_from_dict({**base, "attackers": {"models": ["noise-aware-nope"]}})


def test_every_mechanism_in_one_run_on_20newsgroups(glove20k, ng_set, tmp_path: Path) -> None:
    from textdp.mechanisms import MECHANISM_NAMES, entry

    names = list(MECHANISM_NAMES)
    eps = {"random": [9.0], "tem": [3.0], "santext": [3.0], "santext+": [3.0], "custext": [1.0], "custext+": [1.0],
           "syntf": [2000.0]}
    mech: dict = {"mechanisms": [*names, "cmp+mbr", "cmp+words", "earth-movers+features"], "epsilons": [5],
                  "noise_aware_known_words": 150,
                  "cmp+mbr": {"mechanism": "cmp", "postprocess": "mbr", "candidates": 16},
                  "cmp+words": {"mechanism": "cmp", "output_vocab": "words"},
                  "earth-movers+features": {"mechanism": "earth-movers", "topic_features": 300}}
    for n, e in eps.items():
        if n in names:
            mech[n] = {"epsilons": e}
    cfg = config_from_dict({
        "corpus": NG_CORPUS,
        "mechanism": mech,
        "attackers": {"models": ["nn-author", "noise-aware-nn-author", "noise-aware-char-ngram"],
                      "reference_rows": False},
        "utility": {"models": ["tfidf-topic"]},
        "run": {"bootstrap": 20},
    })
    res = run_experiment(cfg, eval_set=ng_set, embeddings=glove20k)
    labels = {r["mechanism"] for r in res.rows}
    assert labels == {None, *names, "cmp+mbr", "cmp+words", "earth-movers+features"}
    # one unmodified row per release form, the rows of each mechanism in its own form
    nones = {(r["text"], r["model"]) for r in res.rows if r["mechanism"] is None}
    assert {t for t, _ in nones} == {"bag", "text"}
    for r in res.rows:
        if r["mechanism"] is not None:
            name = next(m.name for m in cfg.mechanisms if m.label == r["mechanism"])
            assert r["text"] == entry(name).releases
    # every condition has its noise-aware attackers, and words/s was measured
    for label in labels - {None}:
        models = {r["model"] for r in res.rows if r["mechanism"] == label}
        assert {"noise-aware-nn-author", "noise-aware-char-ngram", "nn-author", "tfidf-topic"} <= models
        assert res.mechanisms[label]["words_per_second"] > 0
    # topic-feature selection: chosen on the public topic-training texts; the selection alone is a row
    info = res.mechanisms["earth-movers+features"]
    assert info["selected_features"] == 300 and info["bag_size"] < res.bag_size
    assert any(r["mechanism"] == "earth-movers+features" and r["epsilon"] is None for r in res.rows)
    # the words-only output vocabulary has no stop words / punctuation / numbers
    assert res.mechanisms["cmp+words"]["vocab_size"] < glove20k.vocab_size
    md = render_markdown(res)
    assert "## Every mechanism and epsilon" in md and "`custext+`" in md
    written = write_report(res, tmp_path)
    assert {p.name for p in written} >= {"report.md", "results.json", "privacy_utility.png"}
    rows = json.loads((tmp_path / "results.json").read_text())
    assert all("mechanism" in r for r in rows)
    assert re.search(r"\| `cmp` \| 5 \| [0-9.]+ \|", md)


def test_topic_features_come_from_the_public_training_texts_only(glove20k, ng_set) -> None:
    """The selected vocabulary is the selector fitted on the topic-training texts (other posters), not the snippets."""
    from textdp.text.feature_selection import TopicFeatureSelector

    es = ng_set
    sel = TopicFeatureSelector(n_features=150).fit_public([" ".join(t) for t in es.topic_train_texts],
                                                          es.topic_train_labels).vocabulary_
    cfg = config_from_dict({"corpus": NG_CORPUS,
                            "mechanism": {"mechanisms": ["f"], "epsilons": [1000.0],
                                          "f": {"mechanism": "earth-movers", "topic_features": 150}},
                            "attackers": {"models": ["nn-author"], "reference_rows": False},
                            "utility": {"models": ["tfidf-topic"]}, "run": {"bootstrap": 10}})
    res = run_experiment(cfg, eval_set=es, embeddings=glove20k)
    index = glove20k.index
    expected_n = min(len([w for w in u if w in index and w in sel]) for u in es.unknown)
    assert res.mechanisms["f"]["bag_size"] == expected_n


def test_noise_aware_cap_below_the_bag_size_is_a_clear_error(glove20k, ng_set) -> None:
    """A bag mechanism's noise-aware known texts are bags of N words: a smaller cap fails before any noise."""
    cfg = config_from_dict({"corpus": NG_CORPUS,
                            "mechanism": {"mechanisms": ["earth-movers"], "epsilons": [5], "size": 40,
                                          "noise_aware_known_words": 20},
                            "attackers": {"models": ["noise-aware-nn-author"], "reference_rows": False},
                            "run": {"bootstrap": 10}})
    with pytest.raises(ParameterError, match="noise_aware_known_words = 20 is smaller than its bag size N = 40"):
        run_experiment(cfg, eval_set=ng_set, embeddings=glove20k)
