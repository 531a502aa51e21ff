"""The language-model rewriters on tiny random models of each kind (built here, saved as safetensors).

Each token-level rewriter's first token is checked against the clipped exponential law of the real model's
logits (χ², with a wrong law rejected); DP-BART's noise is checked per coordinate and per token; the loading
refusals, dp-mlm's skeleton, the guarantees and the records are checked too."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chisquare, kstest

from textdp._rng import make_rng
from textdp.errors import ParameterError

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from textdp.generation.decoding import ClipBounds, exponential_law
from textdp.generation.hf import load_language_model
from textdp.generation.lm_decode import clip_and_noise
from textdp.generation.rewriter import rewrite_documents
from textdp.mechanisms import get

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ["the cat sat on the mat .", "he said that the meeting will start at noon ."]


def _tiny() -> object:
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tiny = _tiny()
    root = tmp_path_factory.mktemp("lm")
    return {kind: str(tiny.build(root / kind, kind)) for kind in ("causal", "seq2seq", "masked")}


def _settings(mech, **kw):
    """The rewriter ``mech`` (unfitted) with the tests' bounds: ε 3 and (dp-bart) δ 1e-5 unless given."""
    bounds = ClipBounds(-0.2, 0.1) if mech == "dp-bart" else ClipBounds(-1.0, 1.0)
    if mech == "dp-bart":
        kw.setdefault("delta", 1e-5)
    return get(mech, epsilon=kw.pop("epsilon", 3.0), clip=bounds, **kw)


def rewrite_texts(model, texts, m, rng):
    """Every unit of ``texts`` rewritten by ``m`` on ``model`` (fitted there): the rewriter's own batch function."""
    return m.set_params(model=model).fit().rewrite_units(texts, rng)


@pytest.mark.parametrize("mech,kind", [("dp-prompt", "causal"), ("dp-paraphrase", "seq2seq"), ("dp-mlm", "masked"),
                                       ("dp-bart", "seq2seq")])
def test_each_rewriter_runs_and_is_reproducible_with_a_seed(models, mech, kind):
    s = _settings(mech, max_new_tokens=6)
    a = rewrite_texts(models[kind], SENTENCES, s, make_rng(3))
    b = rewrite_texts(models[kind], SENTENCES, s, make_rng(3))
    assert a == b and len(a) == 2 and all(isinstance(t, str) for t in a)


def _first_token_counts(models, mech, n=4000):
    """Empirical law of the first generated token for one input, and the exact clipped law from the model."""
    s = _settings(mech, max_new_tokens=1, batch_size=n, epsilon=4.0)
    kind = "causal" if mech == "dp-prompt" else "seq2seq"
    lm = load_language_model(models[kind], kind)
    tok, model = lm.tokenizer, lm.model
    out = rewrite_texts(models[kind], [SENTENCES[0]] * n, s, make_rng(7))
    ids = [tok.convert_tokens_to_ids(t) if t else tok.eos_token_id for t in out]
    with torch.inference_mode():
        if mech == "dp-prompt":
            head, _, tail = s.template_.partition("{document}")
            prompt = (tok(head, add_special_tokens=False)["input_ids"]
                      + tok(SENTENCES[0], add_special_tokens=False)["input_ids"]
                      + tok(tail, add_special_tokens=False)["input_ids"])
            logits = model(input_ids=torch.tensor([prompt])).logits[0, -1]
        else:
            enc = torch.tensor([tok(SENTENCES[0])["input_ids"]])
            start = torch.tensor([[model.config.decoder_start_token_id]])
            logits = model(input_ids=enc, decoder_input_ids=start).logits[0, -1]
    allowed = lm.output_mask(keep=(tok.eos_token_id,)).numpy()
    law = exponential_law(logits.double().numpy(), epsilon=4.0, bounds=s.bounds_, allowed=allowed)
    counts = np.bincount(ids, minlength=law.size)
    return counts, law, logits.double().numpy(), allowed


@pytest.mark.parametrize("mech", ["dp-prompt", "dp-paraphrase"])
def test_generated_token_follows_the_clipped_law_and_not_the_unclipped_one(models, mech):
    counts, law, logits, allowed = _first_token_counts(models, mech)
    assert counts[~allowed].sum() == 0
    keep = allowed
    assert chisquare(counts[keep], law[keep] * counts.sum()).pvalue > 1e-3
    raw = np.where(allowed, np.exp(logits * 4.0 / (2 * 2.0)), 0.0)  # temperature sampling without clipping
    raw /= raw.sum()
    flat = np.where(allowed, 1.0, 0.0) / allowed.sum()  # a law that ignores the model
    for wrong in (raw, flat):
        assert chisquare(counts[keep], wrong[keep] * counts.sum()).pvalue < 1e-4


def test_dp_mlm_replacement_law_and_skeleton(models):
    lm = load_language_model(models["masked"], "masked")
    tok = lm.tokenizer
    s = _settings("dp-mlm", epsilon=4.0, batch_size=3000)
    out = rewrite_texts(models["masked"], ["cat"] * 3000, s, make_rng(2))
    ids = np.array([tok.convert_tokens_to_ids(t) for t in out])
    c = tok.convert_tokens_to_ids("cat")
    x = [tok.cls_token_id, c, tok.sep_token_id, tok.mask_token_id, tok.sep_token_id]
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([x])).logits[0, 3].double().numpy()
    allowed = lm.output_mask().numpy()
    law = exponential_law(logits, epsilon=4.0, bounds=s.bounds_, allowed=allowed)
    counts = np.bincount(ids, minlength=law.size)
    assert chisquare(counts[allowed], law[allowed] * counts.sum()).pvalue > 1e-3
    wrong = exponential_law(logits, epsilon=40.0, bounds=ClipBounds(-10.0, 10.0), allowed=allowed)
    assert chisquare(counts[allowed], wrong[allowed] * counts.sum()).pvalue < 1e-4
    # skeleton: stop words and punctuation copied in place, the length kept
    sent = "she wrote a long letter to her friend ."
    for text in rewrite_texts(models["masked"], [sent] * 20, s, make_rng(4)):
        words = re.findall(r"\w+|[^\w\s]", text)  # the tokenizer's clean-up glues "." and "," to the word before
        assert len(words) == 9 and [words[i] for i in (0, 2, 5, 6, 8)] == ["she", "a", "to", "her", "."]
    changed = rewrite_texts(models["masked"], [sent] * 20, _settings("dp-mlm", copy_stopwords=False, epsilon=0.5),
                            make_rng(4))
    assert any(t.split()[0] != "she" for t in changed)


def test_dp_bart_noise_is_independent_per_coordinate_and_token_with_the_analytic_sigma():
    s = _settings("dp-bart", epsilon=2.0, max_tokens=8)
    sens, sigma = s.sigma(16)
    assert sens == pytest.approx(0.3 * math.sqrt(16 * 8))
    from textdp.accounting.gaussian import gaussian_delta

    assert gaussian_delta(sigma, 2.0, sens) <= 1e-5 < gaussian_delta(sigma * 0.99, 2.0, sens)
    h = torch.full((400, 8, 16), 5.0)  # clipped to 0.1
    z = ((clip_and_noise(h, s.clip, sigma, make_rng(1)) - 0.1) / sigma).numpy()
    assert kstest(z.ravel(), "norm").pvalue > 1e-3
    diff = (z[:, 0, :] - z[:, 1, :]).ravel() / math.sqrt(2)  # rows independent: the difference is N(0, 1) too
    assert kstest(diff, "norm").pvalue > 1e-3
    shared = np.repeat(z[:, :1, :], 8, axis=1)  # the copied bug: one noise row for all tokens
    assert kstest((shared[:, 0, :] - shared[:, 1, :]).ravel() / math.sqrt(2), "norm").pvalue < 1e-6


def test_dp_bart_decoder_never_sees_the_input_length(models, monkeypatch):
    import textdp.generation.lm_decode as dec

    seen = []
    real = dec._decoder_loop

    def spy(lm, enc, mask, s, rng, allowed):
        seen.append(mask.clone())
        return real(lm, enc, mask, s, rng, allowed)

    monkeypatch.setattr(dec, "_decoder_loop", spy)
    rewrite_texts(models["seq2seq"], ["the cat .", "the weather was cold and the sky was grey ."],
                  _settings("dp-bart", max_new_tokens=3, max_tokens=12), make_rng(0))
    assert seen and bool((seen[0] == 1).all()) and seen[0].shape[1] == 12


@pytest.mark.parametrize("mech,kind,wrong", [("dp-mlm", "masked", "causal"), ("dp-prompt", "causal", "masked"),
                                             ("dp-bart", "seq2seq", "causal")])
def test_wrong_kind_missing_and_pickle_only_directories_are_refused(models, tmp_path, mech, kind, wrong):
    s = _settings(mech)
    with pytest.raises(ParameterError, match="this mechanism needs") as exc:
        rewrite_texts(models[wrong], SENTENCES, s, make_rng(0))
    assert "\n" not in str(exc.value)
    with pytest.raises(ParameterError, match="no such model directory"):
        rewrite_texts(str(tmp_path / "absent"), SENTENCES, s, make_rng(0))
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((Path(models[kind]) / "config.json").read_text())
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ParameterError, match="no \\*.safetensors"):
        rewrite_texts(str(pickled), SENTENCES, s, make_rng(0))


def test_guarantees_state_token_sentence_document_and_adjacency():
    g = _settings("dp-mlm", max_tokens=20).bound()
    p = g.to_dict()["parameters"]
    assert (p["per_token"], p["per_sentence"], g.unit) == (3.0, 60.0, "sentence")
    assert "same stop words" in p["adjacency"] and "the sentence length (kept)" in g.not_covered
    assert p["bounds"]["procedure"] == "fixed" and "Neighbours:" in g.statement
    g2 = _settings("dp-mlm", copy_stopwords=False).bound()
    assert "every token is replaced" in g2.params["adjacency"]
    pr = _settings("dp-prompt", max_new_tokens=10).bound()
    assert (pr.unit, pr.epsilon, pr.document_epsilon(7)) == ("document", 30.0, (30.0, 0.0))
    assert (pr.params["per_document"], pr.params["per_sentence"]) == (30.0, None)  # a number; no sentence level
    assert p["per_document"] is None and "record's total" in g.to_dict()["composition"]
    b = _settings("dp-bart").bound(32)
    assert b.per_token is None and b.document_epsilon(3) == (9.0, pytest.approx(3e-5))
    assert "sigma" in b.params and "never released" in b.statement
    with pytest.raises(ParameterError, match="top-k/top-p"):
        _settings("dp-paraphrase", top_k=50).bound()
    with pytest.raises(ParameterError, match="no parameter 'delta'"):  # pure epsilon-DP: delta is dp-bart's alone
        get("dp-mlm", epsilon=1.0, clip=(0.0, 1.0), delta=1e-5)
    with pytest.raises(ParameterError, match="no parameter 'prior'"):  # the prompt options are dp-prompt's
        get("dp-paraphrase", epsilon=1.0, clip=(0.0, 1.0), prior=True)
    with pytest.raises(ParameterError, match="needs delta"):
        get("dp-bart", epsilon=1.0, clip=(0.0, 1.0)).bound(32)


def test_rewriters_are_mechanisms_of_the_one_base_with_one_record_layout(models):
    from record_schema import validate_record

    from textdp.mechanisms import Mechanism, entry

    docs = [("d1", "The cat sat on the mat. He said that the meeting will start at noon."), ("d2", "we met .")]
    mech = get("dp-mlm", epsilon=3.0, model=models["masked"], clip=(-1.0, 1.0))
    assert isinstance(mech, Mechanism) and entry("dp-mlm").audit == "dp-mlm"
    recs, diag = rewrite_documents(mech, docs, 1, record_unit="sentence", seeded=True)
    assert [r["id"] for r in recs] == ["d1:0", "d1:1", "d2:0"]
    docs_recs, _ = rewrite_documents(mech, docs, 1, seeded=True)
    assert docs_recs[0]["units"] == 2 and docs_recs[0]["total"]["epsilon"] == 2 * docs_recs[0]["epsilon"]
    for r in recs + docs_recs:
        validate_record(r)
        assert {"per_token", "per_sentence", "per_document", "adjacency", "bounds"} <= set(r["guarantee"]["parameters"])
        assert "meeting will start" not in json.dumps(r["guarantee"])
    assert (diag[0]["id"], diag[0]["units"]) == ("d1", 2)
    with pytest.raises(ParameterError, match="needs public clipping bounds"):
        get("dp-mlm", epsilon=3.0, model=models["masked"]).fit()


def test_long_sentences_are_rewritten_in_pieces_not_cut(models):
    long = " ".join(["the cat sat on the mat"] * 8) + " ."  # 49 words, one sentence
    mech = get("dp-mlm", epsilon=3.0, model=models["masked"], clip=(-1.0, 1.0), max_tokens=12).fit()
    pieces = mech.units(long)
    assert len(pieces) == 5 and " ".join(pieces) == long and all(len(p.split()) <= 10 for p in pieces)
    rec = rewrite_documents(mech, [("x", long)], 1)[0][0]
    assert rec["units"] == 5 and len(re.findall(r"\w+|[^\w\s]", rec["text"])) == 49  # nothing dropped


def test_settings_that_overflow_the_model_context_are_refused_before_any_text(tmp_path):
    """dp-prompt on a GPT-2 with 128 positions: the default cut (256 document tokens) cannot fit, so ``fit``
    refuses it in one line, whatever the documents; a smaller public cut works and long documents are cut."""
    small = str(_tiny().build(tmp_path / "causal128", "causal", positions=128))
    mech = get("dp-prompt", epsilon=2.0, model=small, clip=(-3.0, 3.0), max_new_tokens=8)
    with pytest.raises(ParameterError, match=r"need \d+ positions, but the model has 128; lower --max-input-tokens"):
        mech.fit()
    mech.set_params(max_input_tokens=100)
    long_doc = " ".join(SENTENCES * 60)  # ~500 tokens: cut to 100
    (rec,) = mech.privatize_batch([long_doc], seed=1)
    assert rec.units == 1 and isinstance(rec.content, str)
    assert rec.to_record()["guarantee"]["parameters"]["adjacency"].startswith("any two documents (cut to 100 tokens)")
    masked = str(_tiny().build(tmp_path / "masked40", "masked", positions=40))
    with pytest.raises(ParameterError, match="dp-mlm: a sentence of max_tokens=32 and its masked copy need 67"):
        get("dp-mlm", epsilon=2.0, model=masked, clip=(-1.0, 1.0)).fit()
    get("dp-mlm", epsilon=2.0, model=masked, clip=(-1.0, 1.0), max_tokens=16).fit()


def test_a_python_caller_releases_a_rewrite_through_the_driver_with_the_ledger(models, tmp_path, monkeypatch):
    """``textdp.release.release`` (the one driver) runs a language-model rewriter: each document is charged its
    sentences' per-sentence bound before any token is drawn, and a release past the budget writes nothing."""
    from textdp.errors import ParameterError as PE
    from textdp.release import release

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))
    (tmp_path / "private").mkdir()
    led = tmp_path / "private" / "ledger.jsonl"
    mech = get("dp-mlm", epsilon=1.0, model=models["masked"], clip=(-1.0, 1.0), max_tokens=12)
    docs = ["The cat sat on the mat. He said that the meeting will start at noon.", "we met ."]
    s = release(mech, docs, tmp_path / "out.jsonl", ids=["a", "b"], ledger=led, budget=30.0, seed=1, empty="empty")
    recs = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert s.records == 2 and s.charged == 2 and s.guarantee.unit == "sentence" and s.guarantee.epsilon == 12.0
    assert recs[0]["units"] == 2 and recs[0]["total"]["epsilon"] == 24.0  # a's two sentences, 12 each
    with pytest.raises(PE, match="budget 30 would be exceeded"):  # a would reach 48: refused whole
        release(mech, docs[:1], tmp_path / "again.jsonl", ids=["a"], ledger=led, budget=30.0)
    assert not (tmp_path / "again.jsonl").exists()


@pytest.mark.parametrize("mech,kind", [("dp-prompt", "causal"), ("dp-paraphrase", "seq2seq"), ("dp-mlm", "masked"),
                                       ("dp-bart", "seq2seq")])
def test_records_say_their_unit_and_carry_the_ex_post_loss_beside_the_worst_case(models, mech, kind):
    """dp-prompt's record is a ``document`` release of unit ``document`` with a numeric ``per_document``; every
    token-drawing rewriter's record has ``ex_post``: ε/token × the tokens drawn, a public function of the output (its
    token count, plus the end token unless the cap stopped it), never above the worst-case bound."""
    from record_schema import validate_record

    raw = {"tidy": False, "repeat_ngram": None, "stop": None} if mech == "dp-prompt" else {}  # the text as drawn
    m = _settings(mech, max_new_tokens=6, **raw).set_params(model=models[kind])
    docs = [("a", "the cat sat on the mat ."), ("b", "the cat sat on the mat . he said that the meeting will start .")]
    recs, _ = rewrite_documents(m, docs, 1, seeded=True)
    lm = load_language_model(models[kind], kind)
    for r in recs:
        validate_record(r)
        p = r["guarantee"]["parameters"]
        if mech == "dp-prompt":
            assert (r["release"], r["unit"], p["per_document"], p["per_sentence"]) == ("document", "document",
                                                                                      18.0, None)
            n = len(lm.tokenizer(r["text"], add_special_tokens=False)["input_ids"])
            assert r["ex_post"]["tokens_drawn"] == (6 if n == 6 else n + 1)  # the end token counts when drawn
        else:
            assert (r["release"], r["unit"], p["per_document"]) == ("sentence", "sentence", None)
        if mech == "dp-bart":  # no token is an epsilon draw: no ex-post figure
            assert "ex_post" not in r
        else:
            e = r["ex_post"]
            assert e["epsilon"] == pytest.approx(p["per_token"] * e["tokens_drawn"]) and e["tokens_drawn"] >= 1
