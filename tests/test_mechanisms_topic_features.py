"""Topic-feature selection (workshop paper §2.1) on public labelled data (20 Newsgroups)."""

from __future__ import annotations

import gzip
import json

import pytest

from textdp.errors import ParameterError
from textdp.text import ENGLISH_STOP_WORDS, normalize
from textdp.text.feature_selection import TopicFeatureSelector

TOPICS = ("rec.sport.hockey", "sci.space", "sci.crypt", "soc.religion.christian")


@pytest.fixture(scope="module")
def ng20(shared_data):
    path = shared_data / "20newsgroups" / "20newsgroups.jsonl.gz"
    if not path.exists():
        pytest.skip("20newsgroups not available")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    rows = [r for r in rows if r["topic"] in TOPICS]
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    return train, test


@pytest.mark.parametrize("method", ["chi2", "logistic"])
def test_selected_words_are_topical_and_keep_topic_accuracy(ng20, method):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB

    train, test = ng20
    sel = TopicFeatureSelector(n_features=300, method=method).fit_public(
        [r["text"] for r in train], [r["topic"] for r in train]
    )
    vocab = sel.vocabulary_
    assert len(vocab) == 300
    assert not vocab & ENGLISH_STOP_WORDS
    assert {"hockey", "space", "encryption", "god"} <= vocab
    # the test split reduced to the selected words still carries the topic
    def accuracy(transform):
        vec = CountVectorizer(analyzer=str.split)
        xtr = vec.fit_transform(transform([r["text"] for r in train]))
        clf = MultinomialNB().fit(xtr, [r["topic"] for r in train])
        pred = clf.predict(vec.transform(transform([r["text"] for r in test])))
        return (pred == [r["topic"] for r in test]).mean()

    full = accuracy(lambda ts: [" ".join(normalize(t)) for t in ts])
    reduced = accuracy(sel.transform)
    assert reduced > 0.85 and reduced > full - 0.08
    # and most of each text is gone: the mechanism only sees the topical words
    kept = sum(len(s.split()) for s in sel.transform(r["text"] for r in test[:200]))
    total = sum(len(normalize(r["text"])) for r in test[:200])
    assert kept < 0.5 * total


def test_fit_learns_nothing_and_errors():
    sel = TopicFeatureSelector(n_features=2, min_df=1)
    with pytest.raises(ParameterError, match="fit_public"):
        sel.transform(["anything"])
    sel.fit_public(["apple pear", "apple plum", "car bus", "car train"], ["fruit", "fruit", "road", "road"])
    before = sel.vocabulary_
    sel.fit(["secret private words everywhere"] * 5, ["x"] * 5)  # a Pipeline.fit on private texts
    assert sel.vocabulary_ == before == {"apple", "car"}
    with pytest.raises(ParameterError, match="at least 2 topic labels"):
        TopicFeatureSelector().fit_public(["a b"], ["one"])
    with pytest.raises(ParameterError, match="selection method"):
        TopicFeatureSelector(method="pca").fit_public(["a b", "c d"], [0, 1])
