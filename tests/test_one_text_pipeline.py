"""One tokenizer, one quote-stripper, one JSONL reader: the TopicDP corpora and the evaluation sets agree."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from textdp import text as text_module
from textdp.errors import DocumentError
from textdp.evaluation import datasets
from textdp.evaluation.datasets import build_evaluation_set
from textdp.io import iter_jsonl_records
from textdp.text import normalize, strip_quoted
from textdp.topics import UserCorpus

POST = ("Alice said:\n"
        "| quoted zebra words from another poster\n"
        "> older quoted yak words\n"
        "In article <1@x>, bob@y WRITES :\n"
        "my own words about gardening tomatoes")


def test_topics_tokenize_unicode_like_textdp_text() -> None:
    # the old topics tokenizer was ASCII-only: "Über café naïve" gave 0 tokens
    c = UserCorpus.from_texts(["Über café naïve", "Über café naïve again"], ["a", "b"], min_df=1, max_df=1.0)
    assert set(normalize("Über café naïve")) == {"über", "café", "naïve"} <= set(c.vocabulary)


def test_one_quote_stripper_for_topics_and_evaluation(tmp_path: Path) -> None:
    assert datasets.strip_quoted is text_module.strip_quoted  # one implementation, re-exported
    assert strip_quoted(POST) == "my own words about gardening tomatoes"
    # TopicDP corpora strip the same lines ('|' quotes and 'said:' / 'WRITES :' attributions included)
    c = UserCorpus.from_texts([POST, "gardening tomatoes words"], ["u1", "u2"], min_df=1, max_df=1.0,
                              strip_quoted=True)
    assert set(c.vocabulary) == set(normalize(strip_quoted(POST))) | {"gardening", "tomatoes", "words"}
    assert not {"zebra", "yak", "alice", "article", "bob"} & set(c.vocabulary)
    # and so do the evaluation sets, on the same post
    path = tmp_path / "posts.jsonl"
    rows = [{"author": a, "text": POST + (" filler" * 30)} for a in ("p", "q")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ev = build_evaluation_set(str(path), strip_quotes=True, known_words=10, unknown_words=5)
    words = set(ev.known[0]) | set(ev.unknown[0])
    assert not {"zebra", "yak", "alice", "article"} & words and "tomatoes" in words


def test_one_jsonl_reader_same_errors_for_both_callers(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    for load in (lambda: UserCorpus.from_jsonl(missing), lambda: build_evaluation_set(str(missing))):
        with pytest.raises(DocumentError, match="no such file"):
            load()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"author": "a", "text": "x"}\n{not json}\n')
    for load in (lambda: UserCorpus.from_jsonl(bad), lambda: build_evaluation_set(str(bad))):
        with pytest.raises(DocumentError, match=r"bad.jsonl:2: not valid JSON"):
            load()
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"author": "a", "text": "caf\xe9"}\n')
    with pytest.raises(DocumentError, match="not valid UTF-8"):
        UserCorpus.from_jsonl(latin)
    gz = tmp_path / "c.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write('{"author": "a", "text": "x\u2028y\x85z"}\n\n{"author": null, "text": "y"}\n')
    rows = list(iter_jsonl_records(gz))
    assert [r["author"] for r in rows] == ["a", None]
    assert rows[0]["text"] == "x\u2028y\x85z"  # raw line separators inside a JSON string are not line breaks


def test_one_earth_movers_distance_for_attacks_and_accounting(glove) -> None:
    """The attack's EMD matrix, the diagnostics' matching and accounting.emd are one computation.

    The attack used to need POT for bags of different sizes and matched equal bags by hand;
    now every caller goes through :mod:`textdp.accounting.emd`.
    """
    import numpy as np

    from textdp.accounting.emd import earth_movers_distance, optimal_matching
    from textdp.attacks.neighbours import emd_distance_matrix

    bags = [["king", "queen", "castle"], ["dog", "cat"], ["king", "dog", "paris", "london"]]
    got = emd_distance_matrix(bags, bags, glove)
    vec = np.asarray(glove.vectors, dtype=np.float64)
    rows = [vec[[glove.index[w] for w in b]] for b in bags]
    want = np.array([[earth_movers_distance(x, y, method="linprog") for y in rows] for x in rows])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.all(np.diag(got) == 0.0)
    r, c, cost = optimal_matching(rows[0], rows[0])
    assert (c[r] == r).all() and not cost.any()  # a kept word pairs with itself at exactly zero
