"""Mechanism parameters are declared once, as dataclass fields (issue 20): one declaration, one constructor.

Every registered mechanism's constructor, ``param_names()``, ``get_params()`` and
``set_params()`` come from the same fields; a family's shared parameters are declared on the
family base only; a subclass that writes ``__init__`` by hand is refused at class creation.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.base import clone

from textdp.embeddings import Embeddings
from textdp.errors import ParameterError
from textdp.mechanisms import get, mechanism_class, names
from textdp.mechanisms.base import Mechanism
from textdp.mechanisms.word_level import WordLevelMechanism

ALL = names()


def _minimal(name: str) -> dict[str, object]:
    cls = mechanism_class(name)
    kw: dict[str, object] = {"rate": 0.5} if name == "random" else {"epsilon": 1.0}
    if "model" in cls.param_names():
        kw["model"] = "some/model/dir"
    return kw


def test_every_family_is_represented():
    assert {mechanism_class(n).family for n in ALL} == {"document", "word", "sentence", "topics"}


@pytest.mark.parametrize("name", ALL)
def test_constructor_parameters_are_the_fields(name):
    cls = mechanism_class(name)
    fields = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    assert cls.param_names() == fields
    # the generated constructor takes exactly these, keyword-only
    params = list(inspect.signature(cls).parameters.values())
    assert tuple(p.name for p in params) == fields
    assert all(p.kind is p.KEYWORD_ONLY for p in params)
    assert "epsilon" in fields and "seed" in fields
    assert not any(f.endswith("_") for f in fields), "fitted attributes are never parameters"


@pytest.mark.parametrize("name", ALL)
def test_params_round_trip_and_sklearn_clone(name):
    mech = get(name, **_minimal(name))
    params = mech.get_params()
    assert tuple(params) == type(mech).param_names()
    again = type(mech)(**params)
    assert again.get_params() == params
    cloned = clone(mech)
    assert cloned is not mech and cloned.get_params() == params
    with pytest.raises(Exception, match="unknown parameter|no parameter"):
        mech.set_params(not_a_parameter=1)


@pytest.mark.parametrize("name", ALL)
def test_shared_parameters_are_declared_once(name):
    """Each parameter is annotated by one class of the MRO (``epsilon`` may be re-typed once)."""
    cls = mechanism_class(name)
    for param in cls.param_names():
        owners = [k.__name__ for k in cls.__mro__ if param in vars(k).get("__annotations__", {})
                  and issubclass(k, Mechanism) and k is not Mechanism]
        limit = 2 if param == "epsilon" else 1
        assert 1 <= len(owners) <= limit, f"{name}.{param} declared by {owners}"


def test_word_family_shares_one_declaration():
    owners = {mechanism_class(n).__mro__[i].__name__
              for n in names("word") for i, k in enumerate(mechanism_class(n).__mro__)
              if "embeddings" in vars(k).get("__annotations__", {})}
    assert owners == {"TextMechanism"}


def test_a_hand_written_init_is_refused():
    with pytest.raises(TypeError, match="annotated class attributes"):

        class HandWritten(WordLevelMechanism):  # refused at class creation
            name = "hand-written"

            def __init__(self, *, epsilon: float) -> None:
                self.epsilon = epsilon


def test_positional_arguments_are_refused():
    with pytest.raises(TypeError):
        mechanism_class("cmp")(1.0)  # type: ignore[misc]


def test_mahalanobis_takes_no_postprocess_and_vickrey_no_decoder():
    """The noisy-vector mechanisms declare what they use: MBR post-processing is CMP's alone."""
    emb = Embeddings(["cat", "dog", "car"], np.array([[0.0, 0.0], [1.0, 0.5], [4.0, 1.0]]), name="toy")
    assert "postprocess" in mechanism_class("cmp").param_names()
    assert "postprocess" not in mechanism_class("mahalanobis").param_names()
    assert "decoder" not in mechanism_class("vickrey").param_names()
    with pytest.raises(ParameterError, match="no parameter 'postprocess'"):
        get("mahalanobis", epsilon=1.0, embeddings=emb, postprocess="mbr")
    rec = get("mahalanobis", epsilon=1e6, embeddings=emb, stop_words=None, seed=0).privatize("cat dog car")
    assert rec.words == ("cat", "dog", "car")
    assert dict(rec.guarantee.parameters)["decoder"] == "exact"


def test_each_sentence_mechanism_declares_its_own_parameters_once():
    """A sentence mechanism is one class: its parameters are its dataclass fields (no parallel settings class),
    the options only one rewriter reads are declared on that rewriter, and the behaviour that differs is a class
    attribute or method, not a comparison of its name."""
    import textdp.generation.lm_family as lm_family
    import textdp.generation.rewriter as rewriter
    from textdp.generation.lm_family import LMRewriter

    assert not hasattr(lm_family, "LMSettings") and not hasattr(rewriter, "RewriteSettings")
    own = {n: set(mechanism_class(n).param_names()) for n in ("dp-prompt", "dp-paraphrase", "dp-mlm", "dp-bart")}
    shared = {f.name for f in dataclasses.fields(LMRewriter)}
    assert shared >= {"epsilon", "model", "clip", "max_new_tokens", "max_tokens", "batch_size", "sampler", "seed"}
    assert own["dp-prompt"] - shared == {"max_input_tokens", "prompt", "prompt_format", "prior", "public_top_k",
                                         "batch_tokens", "response_prefix", "stop", "repeat_ngram", "tidy", "instruction"}
    assert own["dp-mlm"] - shared == {"copy_stopwords"} and own["dp-bart"] - shared == {"delta"}
    assert own["dp-paraphrase"] == shared
    kinds = {n: mechanism_class(n).kind for n in own}  # type: ignore[attr-defined]
    assert kinds == {"dp-prompt": "causal", "dp-paraphrase": "seq2seq", "dp-mlm": "masked", "dp-bart": "seq2seq"}
    units = {n: mechanism_class(n).privacy_unit for n in names("sentence")}  # type: ignore[attr-defined]
    assert units.pop("dp-prompt") == "document" and set(units.values()) == {"sentence"}
    objectives = {n: mechanism_class(n).objective for n in ("er-ae", "ae-dp", "syntf-sentence")}  # type: ignore
    assert objectives == {"er-ae": "er-ae", "ae-dp": "reconstruction", "syntf-sentence": None}


def test_clone_and_pickle_with_real_embeddings(glove):
    """scikit-learn's ``clone`` (GridSearchCV, Pipelines) and process pools work with an ``Embeddings`` parameter."""
    import pickle

    from sklearn.model_selection import ParameterGrid

    emb = glove.restrict(2000)
    mech = get("cmp", epsilon=10.0, embeddings=emb, seed=3)
    for params in ParameterGrid({"epsilon": [5.0, 20.0]}):
        cloned = clone(mech).set_params(**params)
        assert cloned.embeddings is emb and cloned.epsilon == params["epsilon"]
    back = pickle.loads(pickle.dumps(emb))
    assert back.words == emb.words and np.array_equal(back.vectors, emb.vectors) and back.name == emb.name
    assert not back.vectors.flags.writeable and back.index["the"] == emb.index["the"]
    again = pickle.loads(pickle.dumps(mech.fit()))
    assert again.privatize("the market rose sharply today", seed=1).text == mech.privatize("the market rose sharply today", seed=1).text
