"""Earth Mover's privacy end to end on the real GloVe 6B 50d embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from record_schema import validate_record

from textdp import EarthMoversPrivacy
from textdp.embeddings import Embeddings
from textdp.errors import (
    DocumentError,
    ParameterError,
    ParameterTypeError,
    PrivacyWarning,
    UnrecordedSpendWarning,
)
from textdp.mechanisms import privatize_ids
from textdp.text import normalize

TEXT = (
    "The old fisherman repaired his nets on the harbour wall while gulls circled above the boats. "
    "Children carried baskets of bread and apples to the market, and the baker sang loudly."
)


def test_huge_epsilon_is_identity(glove):
    n = len(normalize(TEXT))
    mech = EarthMoversPrivacy(epsilon=1e6, size=n, embeddings=glove, seed=1)
    diags: list = []
    doc = mech.privatize(TEXT, private_report=diags)
    assert sorted(doc.words) == sorted(normalize(TEXT))
    assert diags[0].unchanged_fraction() == 1.0
    assert doc.guarantee.size == n


def test_tiny_epsilon_destroys_words(glove):
    mech = EarthMoversPrivacy(epsilon=0.1, size=18, embeddings=glove, seed=2)
    diags: list = []
    mech.privatize([TEXT] * 5, private_report=diags)
    kept = np.mean([d.unchanged_fraction() for d in diags])
    assert kept < 0.05


def test_seed_reproduces_and_default_is_random(glove):
    a = EarthMoversPrivacy(epsilon=8, size=18, embeddings=glove, seed=123).privatize(TEXT)
    b = EarthMoversPrivacy(epsilon=8, size=18, embeddings=glove, seed=123).privatize(TEXT)
    assert a.words == b.words and a.guarantee.seeded
    outs = {EarthMoversPrivacy(epsilon=8, size=18, embeddings=glove).privatize(TEXT) for _ in range(4)}
    assert not any(d.guarantee.seeded for d in outs)
    outs = {d.words for d in outs}
    assert len(outs) > 1  # OS entropy, not a constant seed


def test_oov_never_released(glove):
    name = "zorbulax"
    assert name not in glove
    text = f"{name} met {name} and {name.capitalize()} at the harbour; {name} smiled"
    mech = EarthMoversPrivacy(epsilon=1e6, embeddings=glove, bag="sample", size=200, seed=3)
    diags: list = []
    for doc in mech.privatize([text] * 10, private_report=diags):
        assert name not in doc.words
        assert "dropped_oov" not in doc.to_record()  # an input statistic: private report only
    assert all(d.dropped_oov == 4 for d in diags)
    # and at any epsilon, nothing outside the vocabulary can come out
    for eps in (1.0, 10.0, 50.0):
        doc = EarthMoversPrivacy(epsilon=eps, size=3, embeddings=glove, seed=4).privatize(text)
        assert all(w in glove for w in doc.words)


def test_record_fields(glove):
    doc = EarthMoversPrivacy(epsilon=10, size=5, embeddings=glove, seed=5).privatize(TEXT)
    rec = validate_record(doc.to_record())
    params = rec["guarantee"]["parameters"]
    assert rec["id"] == "0" and rec["seeded"] is True and rec["delta"] == 0.0 and rec["unit"] == "document"
    assert rec["release"] == "bag" and len(rec["words"]) == 5
    assert params["size"] == 5 and params["dim"] == 50 and params["vocab_size"] == 400000
    assert params["decoder"] == "exact" and rec["guarantee"]["seeded"] is True
    assert "exp(10*5*E_d(b,b'))" in doc.guarantee.statement and "statement" not in rec["guarantee"]
    assert "input_words" not in rec and "n_tokens" not in rec and "dropped_oov" not in rec
    assert rec["guarantee"]["not_covered"].startswith("the bag size N")
    assert "Not covered: the bag size N" in doc.guarantee.statement and "Seeded run" in doc.guarantee.statement


def test_output_is_a_bag_not_a_sequence():
    emb = Embeddings(["a", "b", "c"], np.array([[0.0, 0], [5, 0], [0, 5]]), name="toy")
    out = privatize_ids(np.array([[2, 1, 0, 2]]), emb.vectors, 1e6, np.random.default_rng(0))
    assert out.tolist() == [[0, 1, 2, 2]]


def test_size_none_uses_shortest_only_when_asked(glove):
    with pytest.raises(ParameterError, match="size must be public|bag size N must be public"):
        EarthMoversPrivacy(epsilon=1e6, embeddings=glove, seed=0).privatize([TEXT, "harbour boats gulls"])
    mech = EarthMoversPrivacy(epsilon=1e6, embeddings=glove, seed=0, size_from_data=True)
    with pytest.warns(PrivacyWarning, match="reveals that length"):
        docs = mech.privatize([TEXT, "harbour boats gulls"])
    assert [len(d.words) for d in docs] == [3, 3]
    assert docs[0].guarantee.size_from_data and "it reveals that length" in docs[0].guarantee.statement


@pytest.mark.parametrize("eps", [0, -3, float("nan"), float("inf")])
def test_bad_epsilon(eps, glove):
    with pytest.raises(ParameterError, match="epsilon"):
        EarthMoversPrivacy(epsilon=eps, size=3, embeddings=glove).privatize(TEXT)


def test_bad_inputs(glove):
    with pytest.raises(ParameterError, match="size"):
        EarthMoversPrivacy(epsilon=1, size=0, embeddings=glove).fit()
    with pytest.raises(ParameterError, match="bag mode"):
        EarthMoversPrivacy(epsilon=1, bag="pad", embeddings=glove).fit()
    with pytest.raises(ParameterTypeError):
        EarthMoversPrivacy(epsilon=1, embeddings=42).fit()  # type: ignore[arg-type]
    mech = EarthMoversPrivacy(epsilon=1, size=1, embeddings=glove, seed=0)
    with pytest.raises(DocumentError, match="empty"):
        mech.privatize("   ,,, the and of 123 ")
    with pytest.raises(DocumentError, match="none of its"):
        mech.privatize("zorbulax quuxifrob")
    with pytest.raises(DocumentError, match="fewer than the bag size"):
        EarthMoversPrivacy(epsilon=1, size=50, embeddings=glove).privatize("harbour boats")


def test_sklearn_pipeline(glove):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(EarthMoversPrivacy(epsilon=1e6, size=3, embeddings=glove, seed=0), CountVectorizer())
    with pytest.warns(UnrecordedSpendWarning, match="spent their epsilon again"):  # no ledger: said at every call
        x = pipe.fit_transform([TEXT, "gulls boats harbour market"])
    assert x.shape[0] == 2 and x.sum() == 6


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_output_probability_ratio_respects_the_guarantee(epsilon):
    """Empirical check of Thm 5.1 for N=1: P(w|a) / P(w|b) <= exp(epsilon * ||a - b||) for every output w."""
    vec = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.5], [2.0, 2.0]])
    a, b = 0, 1
    dist = float(np.linalg.norm(vec[a] - vec[b]))
    n = 200_000
    g = np.random.default_rng(99)
    out_a = privatize_ids(np.full((n, 1), a), vec, epsilon, g).ravel()
    out_b = privatize_ids(np.full((n, 1), b), vec, epsilon, g).ravel()
    pa = np.bincount(out_a, minlength=4) / n
    pb = np.bincount(out_b, minlength=4) / n
    bound = np.exp(epsilon * dist)
    # 4-sigma slack on each estimated probability
    se_a, se_b = np.sqrt(pa * (1 - pa) / n), np.sqrt(pb * (1 - pb) / n)
    assert np.all(pa - 4 * se_a <= bound * (pb + 4 * se_b))
    assert np.all(pb - 4 * se_b <= bound * (pa + 4 * se_a))
    # the mechanism is not trivially uniform: the bound is nearly tight for the source words
    assert pa[a] / pb[a] > 1.2


def test_seed_is_the_only_name_of_the_generator_parameter(glove):
    with pytest.raises(TypeError):
        EarthMoversPrivacy(epsilon=8, size=18, embeddings=glove, rng=123)  # no pre-release alias
    new = EarthMoversPrivacy(epsilon=8, size=18, embeddings=glove, seed=123)
    assert new.get_params()["seed"] == 123 and "rng" not in new.get_params()
