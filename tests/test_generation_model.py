"""A tiny ER-AE model trains for a few steps, resumes exactly after an interruption, and rewrites honestly."""

from __future__ import annotations

import json
import sys

import pytest
from record_schema import validate_record

torch = pytest.importorskip("torch")

from textdp.errors import MissingDependencyError, ParameterError
from textdp.generation.rewriter import Rewriter, rewrite_documents
from textdp.generation.training import TrainingSettings, train_rewriter
from textdp.generation.vocab import segment_text
from textdp.guarantees import GUARANTEE_KEYS, Guarantee
from textdp.mechanisms import get, mechanism_class

# our own toy sentences (no corpus text in the repository)
SUBJECTS = ["the company", "the bank", "our team", "the minister", "a farmer", "the market", "my sister"]
VERBS = ["said", "reported", "expects", "announced", "denied", "wrote"]
OBJECTS = ["higher profits this year", "a new plan on monday", "that prices will rise", "the deal with china",
           "strong sales in march", "a small loss", "the report was wrong"]
TOY_TEXT = " ".join(f"{s.capitalize()} {v} {o}." for s in SUBJECTS for v in VERBS for o in OBJECTS[:3])

TINY = {"vocab_size": 60, "encoder_hidden": 8, "latent": 8, "decoder_hidden": 16, "max_length": 12, "batch_size": 16, "epochs": 2}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # one thread: identical float results for a run and its resumption, no contention on small ops
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def segments():
    return segment_text(TOY_TEXT, 12)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, segments, glove):
    out = tmp_path_factory.mktemp("model") / "erae"
    res = train_rewriter(segments, out, glove, TrainingSettings(seed=3, **TINY), data_description="toy sentences")
    assert res.steps == 2 * -(-len(segments) // 16) and not res.already_trained
    return out


def _params(model_dir):
    return torch.load(model_dir / "model.pt", weights_only=True)


def test_training_writes_an_honest_card(tiny_model, segments):
    card = json.loads((tiny_model / "card.json").read_text())
    assert card["complete"] and card["data"]["declared_public"] is False
    assert card["data"]["description"] == "toy sentences" and card["data"]["segments"] == len(segments)
    assert "WITHOUT differential privacy" in card["privacy"] and card["vocabulary"]["depends_on_training_data"]
    assert "said" not in json.dumps(card)  # no training text in the card
    assert not (tiny_model / "checkpoint.pt").exists()


def test_interrupted_training_resumes_to_the_same_model(tmp_path, segments, glove, tiny_model):
    out = tmp_path / "resumed"
    settings = TrainingSettings(seed=3, **TINY)

    def interrupt(step: int) -> None:
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_rewriter(segments, out, glove, settings, data_description="toy sentences", checkpoint_every=2,
                       on_step=interrupt)
    assert (out / "checkpoint.pt").exists() and not (out / "model.pt").exists()
    res = train_rewriter(segments, out, glove, settings, data_description="toy sentences")
    assert res.resumed_from_step == 4  # the last checkpoint before the interruption
    a, b = _params(out), _params(tiny_model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    again = train_rewriter(segments, out, glove, settings, data_description="toy sentences")
    assert again.already_trained
    with pytest.raises(ParameterError, match="other settings"):
        train_rewriter(segments, out, glove, TrainingSettings(seed=4, **TINY), data_description="toy sentences")


@pytest.mark.parametrize("mechanism,epsilon", [("er-ae", 8.0), ("ae-dp", 40.0), ("syntf-sentence", 200.0),
                                               ("random-sentence", 6.0)])
@pytest.mark.parametrize("variant", ["autoregressive", "teacher-forced"])
def test_rewrite_outputs_only_vocabulary_words(tiny_model, mechanism, epsilon, variant):
    rw = Rewriter(tiny_model)
    docs = [("d1", "The company said zyzzyvaqx profits. The bank denied it."), ("d2", "Our team wrote a plan.")]
    own = {"variant": variant} if "variant" in mechanism_class(mechanism).param_names() else {}
    mech = get(mechanism, epsilon=epsilon, model=rw, **own)
    records, diag = rewrite_documents(mech, docs, 7, record_unit="sentence", seeded=True)
    assert [r["id"] for r in records] == ["d1:0", "d1:1", "d2:0"]
    words = set(rw.vocab.words)
    for r in records:
        validate_record(r)
        assert set(r) == {"id", "release", "text", "epsilon", "delta", "mechanism", "unit", "guarantee", "seeded",
                          "units", "total"}
        assert r["seeded"] is True and r["mechanism"] == mechanism and r["unit"] == "sentence" and r["units"] == 1
        assert r["guarantee"]["parameters"]["epsilon_parameter"] == epsilon  # the top level is the bound
        assert r["epsilon"] == r["total"]["epsilon"]
        toks = r["text"].replace(".", " . ").split()
        assert "zyzzyvaqx" not in r["text"] and "<unk>" not in r["text"]  # OOV never copied, unk never emitted
        assert all(t in words for t in toks)
        assert len(toks) <= rw.max_length
        assert set(GUARANTEE_KEYS) - {"statement", "reference", "event"} <= set(r["guarantee"])
    assert diag[0]["oov_tokens"] >= 1 and diag[0]["segments"] == 2  # private diagnostics, not in the records
    again, _ = rewrite_documents(mech, docs, 7, record_unit="sentence", seeded=True)
    assert again == records  # a seed reproduces the output


def test_guarantee_states_the_model_case(tiny_model):
    rw = Rewriter(tiny_model)
    g = get("er-ae", epsilon=5.0, model=rw).guarantee()
    assert isinstance(g, Guarantee) and g.unit == "sentence" and g.model_data == "unknown" and not g.covered
    assert "NOT covered" in g.statement and "dominates" in g.statement
    assert g.epsilon == pytest.approx(g.max_length * g.per_token)
    g2 = get("er-ae", epsilon=5.0, model=rw, model_data="disjoint").guarantee()
    assert g2.covered and "covers the rewriting" in g2.statement


def test_missing_torch_names_the_extra(monkeypatch, tiny_model):
    from textdp.generation import sampling

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependencyError, match=r"'\.\[generation\]'"):
        sampling.torch_module()
    with pytest.raises(MissingDependencyError, match=r"'\.\[generation\]'"):
        Rewriter(tiny_model)


def test_reconstruction_run_can_share_the_er_ae_warmup(tmp_path, segments, glove):
    er_settings = TrainingSettings(seed=3, warmup_fraction=0.5, **TINY)
    ae_settings = TrainingSettings(seed=3, objective="reconstruction", **TINY)
    src = tmp_path / "er"

    def stop(step: int) -> None:
        if step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_rewriter(segments, src, glove, er_settings, data_description="toy", checkpoint_every=3, on_step=stop)
    shared = train_rewriter(segments, tmp_path / "ae-shared", glove, ae_settings, data_description="toy",
                            init_from=src)
    alone = train_rewriter(segments, tmp_path / "ae-alone", glove, ae_settings, data_description="toy")
    a, b = _params(tmp_path / "ae-shared"), _params(tmp_path / "ae-alone")
    assert shared.steps == alone.steps and all(torch.equal(a[k], b[k]) for k in a)
    card = json.loads((tmp_path / "ae-shared" / "card.json").read_text())
    assert card["training"]["shared_steps"]["steps"] == 6
    with pytest.raises(ParameterError, match="other settings"):
        train_rewriter(segments, tmp_path / "x", glove, TrainingSettings(seed=4, objective="reconstruction", **TINY),
                       data_description="toy", init_from=src)
