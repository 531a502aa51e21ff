"""Clipping relative to a public prior (InvisibleInk), the public top-k⁺ set, the step-max bounds and their
streamed quantiles, dp-prompt's prompt (chat template, BOS, stop tokens), rows that stop at EOS, GGUF refusals.

Laws: the prior mechanism's sampler against :func:`prior_law` (χ²) with wrong laws rejected (the prior ignored;
the factor 2 dropped); the first token of dp-prompt with ``prior=True`` on a tiny model against the law computed
from that model's logits with and without the document. Known-bad variant: a candidate set chosen from the
*private* logits gives a token probability 0 from one input and not from a neighbour (no finite ε), while the
public top-k⁺ set is the same for both and keeps the ratio within e^ε."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chisquare

from textdp._rng import make_rng
from textdp.errors import ParameterError

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from textdp.generation import lm_decode
from textdp.generation.decoding import (
    ClipBounds,
    StreamingQuantiles,
    exponential_law,
    prior_law,
    prior_log_weights,
    public_top_k_plus,
    sample_log_weights,
)
from textdp.generation.hf import gguf_file, load_language_model
from textdp.generation.lm import public_bounds
from textdp.generation.lm_family import DPPrompt
from textdp.mechanisms import get

ROOT = Path(__file__).resolve().parents[1]


def _prompt(epsilon, bounds, **kw):
    """dp-prompt (unfitted) at ``epsilon`` with the clipping ``bounds``."""
    return get("dp-prompt", epsilon=epsilon, clip=bounds, **kw)


def rewrite_texts(model, texts, m, rng):
    """Every document of ``texts`` rewritten by ``m`` on ``model`` (fitted there)."""
    return m.set_params(model=model).fit().rewrite_units(texts, rng)


def _resolved(lm, m):
    """``m`` with what depends on the (public) model made explicit, without loading it from a folder."""
    m.resolve(lm)
    return m
BOUNDS = ClipBounds(-1.5, 1.5)
PRIOR = np.array([8.0, 7.5, 3.0, 0.0, -4.0, 6.0, -20.0, 1.0])
PRIVATE = np.array([2.0, 9.5, 3.5, 5.0, -9.0, 6.2, 30.0, 0.0])


def _tiny() -> object:
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def causal(tmp_path_factory):
    return str(_tiny().build(tmp_path_factory.mktemp("prior") / "causal", "causal"))


def _draws(n=60_000, seed=2, epsilon=3.0, allowed=None):
    s = torch.from_numpy(np.tile(PRIVATE, (n, 1)))
    p = torch.from_numpy(np.tile(PRIOR, (n, 1)))
    lw = prior_log_weights(s, p, epsilon=epsilon, bounds=BOUNDS, allowed=allowed)
    return np.bincount(sample_log_weights(lw, make_rng(seed)).numpy(), minlength=PRIOR.size)


def test_prior_sampler_matches_its_law_and_wrong_laws_are_rejected():
    counts = _draws()
    law = prior_law(PRIVATE, PRIOR, epsilon=3.0, bounds=BOUNDS)
    expected = np.exp(3.0 * (PRIOR + np.clip(PRIVATE - PRIOR, -1.5, 1.5)) / 6.0)
    np.testing.assert_allclose(law, expected / expected.sum(), rtol=1e-12)
    assert chisquare(counts, law * counts.sum()).pvalue > 1e-3
    ignored = exponential_law(PRIVATE, epsilon=3.0, bounds=BOUNDS)  # paper clipping: the prior ignored
    no_two = prior_law(PRIVATE, PRIOR, epsilon=6.0, bounds=BOUNDS)  # the factor 2 dropped
    for wrong in (ignored, no_two):
        assert chisquare(counts, wrong * counts.sum()).pvalue < 1e-6


def test_prior_mechanism_is_epsilon_dp_for_every_pair_and_the_factor_two_is_needed():
    eps, prior = 2.0, np.linspace(-30.0, 10.0, 5000)
    # the worst pair moves one token's difference to b and every other to a
    a = prior + BOUNDS.high * (np.arange(prior.size) == 0) + BOUNDS.low * (np.arange(prior.size) != 0)
    b = prior + BOUNDS.low * (np.arange(prior.size) == 0) + BOUNDS.high * (np.arange(prior.size) != 0)
    ratios = prior_law(a, prior, epsilon=eps, bounds=BOUNDS) / prior_law(b, prior, epsilon=eps, bounds=BOUNDS)
    assert np.log(ratios).max() <= eps + 1e-9
    rng = np.random.default_rng(0)  # random pairs: never above ε
    for _ in range(50):
        x, y = prior + rng.normal(0, 5, prior.size), prior + rng.normal(0, 5, prior.size)
        r = np.log(prior_law(x, prior, epsilon=eps, bounds=BOUNDS) / prior_law(y, prior, epsilon=eps, bounds=BOUNDS))
        assert np.abs(r).max() <= eps + 1e-9
    wide = np.zeros(100_000)
    a2, b2 = wide + np.where(np.arange(wide.size) == 0, 1.5, -1.5), wide + np.where(np.arange(wide.size) == 0, -1.5, 1.5)
    half = prior_law(a2, wide, epsilon=2 * eps, bounds=BOUNDS)[0] / prior_law(b2, wide, epsilon=2 * eps,
                                                                              bounds=BOUNDS)[0]
    assert math.log(half) > 1.9 * eps  # temperature Δ/ε (factor 1) would lose nearly 2ε


def test_public_top_k_plus_holds_the_private_top_k_and_a_private_candidate_set_is_not_dp():
    k, eps = 2, 2.0
    mask = public_top_k_plus(torch.from_numpy(PRIOR[None]), k, BOUNDS.width)[0].numpy()
    rng = np.random.default_rng(1)
    for _ in range(200):  # any private logits: their clipped top k lie in the public set
        priv = PRIOR + rng.normal(0, 10, PRIOR.size)
        u = PRIOR + np.clip(priv - PRIOR, BOUNDS.low, BOUNDS.high)
        assert mask[np.argsort(-u)[:k]].all()
    # the set is public: the same for two inputs, and the law restricted to it stays within e^eps
    x, y = PRIOR + 1.5, PRIOR - 1.5
    x[0], y[0] = PRIOR[0] - 1.5, PRIOR[0] + 1.5
    px = prior_law(x, PRIOR, epsilon=eps, bounds=BOUNDS, allowed=mask)
    py = prior_law(y, PRIOR, epsilon=eps, bounds=BOUNDS, allowed=mask)
    assert np.all(np.abs(np.log(px[mask] / py[mask])) <= eps + 1e-9) and np.all(px[~mask] == 0)
    # known-bad: the top k of the *private* scores (DP-GTR's top_k next to clipping)
    def private_top(s):
        u = PRIOR + np.clip(s - PRIOR, BOUNDS.low, BOUNDS.high)
        return np.isin(np.arange(s.size), np.argsort(-u)[:k])
    bx = prior_law(x, PRIOR, epsilon=eps, bounds=BOUNDS, allowed=private_top(x))
    by = prior_law(y, PRIOR, epsilon=eps, bounds=BOUNDS, allowed=private_top(y))
    assert np.any((bx > 0) & (by == 0))  # probability 0 from one input, positive from the other: no finite ε
    counts = _draws(allowed=torch.from_numpy(mask))
    assert counts[~mask].sum() == 0
    law = prior_law(PRIVATE, PRIOR, epsilon=3.0, bounds=BOUNDS, allowed=mask)
    assert chisquare(counts[mask], law[mask] * counts.sum()).pvalue > 1e-3


def test_prior_floor_keeps_every_allowed_token_positive_at_large_epsilon():
    prior = torch.tensor([[0.0, -5000.0, 3.0]])
    lw = prior_log_weights(torch.tensor([[0.0, -9000.0, 3.0]]), prior, epsilon=500.0, bounds=BOUNDS)
    assert torch.isfinite(lw).all() and float(lw.min()) >= -700.0 - 1e-9


def test_streaming_quantiles_bracket_numpy_and_use_bounded_memory():
    rng = np.random.default_rng(0)
    q = StreamingQuantiles()
    chunks = [rng.normal(3, 7, 100_000) for _ in range(5)]
    for c in chunks:
        q.add(torch.from_numpy(c))
    allv = np.concatenate(chunks)
    for p in (0.01, 0.5, 0.99):
        exact = np.quantile(allv, p, method="inverted_cdf")
        assert q.quantile(p, "down") <= exact <= q.quantile(p, "up")
        assert q.quantile(p, "up") - q.quantile(p, "down") <= q.resolution + 1e-12
    before = q.counts.nbytes
    q.add(rng.normal(0, 1, 1_000_000))
    assert q.counts.nbytes == before and q.count == 1_500_000
    q.add(np.array([1e6, -1e6, np.nan, np.inf]))
    assert q.quantile(1.0, "up") == 1e6 and q.quantile(0.0, "down") == -1e6


def test_streaming_quantiles_binned_in_chunks_count_as_at_once(monkeypatch):
    """The chunked add (bounded float64 copies, issue 43's memory) gives the counts, minimum and maximum of one pass."""
    values = np.random.default_rng(1).normal(0, 30, (64, 1000)).astype(np.float32)
    values[3, 7], values[9, 1] = np.nan, -np.inf
    whole = StreamingQuantiles()
    whole.add(torch.from_numpy(values))
    monkeypatch.setattr(StreamingQuantiles, "CHUNK", 999)
    chunked = StreamingQuantiles()
    chunked.add(torch.from_numpy(values))
    assert np.array_equal(whole.counts, chunked.counts) and whole.count == 64_000 - 2
    assert (whole.minimum, whole.maximum) == (chunked.minimum, chunked.maximum)


def test_step_max_bounds_sit_above_the_top_logits_and_all_value_quantiles_do_not(causal):
    lm = load_language_model(causal, "causal")
    public = ["the weather was cold and the sky was grey .", "please send the report before friday .",
              "a dog ran in the park today .", "my brother plays the piano every evening ."]
    step = public_bounds(causal, DPPrompt, public)
    every = public_bounds(causal, DPPrompt, public, rule="all-values")
    assert step.procedure == "public-step-max" and every.procedure == "public-quantiles"
    allowed = lm.output_mask(keep=lm_decode.stop_ids(lm))
    tops = []
    with torch.inference_mode():
        for t in public:
            logits = lm.model(input_ids=torch.tensor([lm.tokenizer(t)["input_ids"]])).logits[0][:, allowed]
            tops.append(logits.amax(1))
    tops = torch.cat(tops).double()
    assert float((tops <= step.high).double().mean()) >= 0.99  # the top logit is kept at 99% of public steps
    assert float((tops > every.high).double().mean()) > 0.2  # all-value quantiles clip the top often
    assert every.low == pytest.approx(step.low)


def test_dp_prompt_first_token_follows_the_prior_law(causal):
    n, doc = 3000, "the cat sat on the mat ."
    s = _prompt(3.0, ClipBounds(-1.0, 1.0), max_new_tokens=1, batch_size=n, prior=True)
    lm = load_language_model(causal, "causal")
    tok = lm.tokenizer
    out = rewrite_texts(causal, [doc] * n, s, make_rng(11))
    ids = [tok.convert_tokens_to_ids(t) if t else tok.eos_token_id for t in out]
    head, tail = tok("Document :")["input_ids"], tok("\nParaphrase of the document :")["input_ids"]
    with torch.inference_mode():
        priv = lm.model(input_ids=torch.tensor([head + tok(" " + doc)["input_ids"] + tail])).logits[0, -1]
        pub = lm.model(input_ids=torch.tensor([head + tail])).logits[0, -1]
    allowed = lm.output_mask(keep=lm_decode.stop_ids(lm)).numpy()
    law = prior_law(priv.double().numpy(), pub.double().numpy(), epsilon=3.0, bounds=s.bounds_, allowed=allowed)
    counts = np.bincount(ids, minlength=law.size)
    assert counts[~allowed].sum() == 0
    assert chisquare(counts[allowed], law[allowed] * n).pvalue > 1e-3
    plain = exponential_law(priv.double().numpy(), epsilon=3.0, bounds=s.bounds_, allowed=allowed)
    assert chisquare(counts[allowed], plain[allowed] * n).pvalue < 1e-4
    g = s.bound()
    assert g.params["prior"] is True and "InvisibleInk" in g.statement and g.epsilon == 3.0


def test_chat_template_bos_and_stop_tokens(causal, tmp_path):
    import shutil

    folder = tmp_path / "chat"
    shutil.copytree(causal, folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "<s>{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} </s>{% endfor %}" \
                           "{% if add_generation_prompt %}[assistant]{% endif %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    lm = load_language_model(str(folder), "causal")
    s = _resolved(lm, _prompt(1.0, BOUNDS))
    assert s.prompt_format_ == "chat" and "{document}" in s.template_ and s.prompt_format == "auto"
    frame = lm_decode.prompt_frame(lm, s)
    assert frame.public[0] == lm.tokenizer.bos_token_id and lm.tokenizer.eos_token_id in frame.stops
    plain = _resolved(lm, _prompt(1.0, BOUNDS, prompt_format="plain"))
    assert plain.template_ == "Document : {document}\nParaphrase of the document :"
    base = load_language_model(causal, "causal")
    with pytest.raises(ParameterError, match="no chat template"):
        _resolved(base, _prompt(1.0, BOUNDS, prompt_format="chat"))
    assert _resolved(base, _prompt(1.0, BOUNDS)).prompt_format_ == "plain"


def test_rows_stop_at_eos_and_drop_out_of_the_batch(causal, monkeypatch):
    lm = load_language_model(causal, "causal")
    eos = lm.tokenizer.eos_token_id
    widths = []
    real = lm.model.forward

    def spy(*args, **kwargs):
        widths.append(int(kwargs["input_ids"].shape[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(lm.model, "forward", spy)
    # a wide clip range and a large epsilon: the model's own choice, and its end token is likely early
    s = _prompt(0.5, ClipBounds(-3.0, 3.0), max_new_tokens=40, batch_size=8)
    docs = ["the cat sat on the mat .", "a dog ran in the park today .", "please send the report ."] * 4
    out = rewrite_texts(causal, docs, s, make_rng(4))
    assert len(out) == 12 and all(lm.tokenizer.eos_token not in o for o in out)
    # the prompts' common prefix once, then the batch's distinct prompts once each (the longest two documents,
    # four times each), then the 8 rows, fewer as rows leave the batch when they draw the end token
    assert widths[:3] == [1, 2, 8] and len(set(widths)) > 3
    first = widths[2:widths.index(1, 1)] if 1 in widths[1:] else widths[2:]
    assert first == sorted(first, reverse=True) and first[-1] < 8
    assert eos in lm_decode.stop_ids(lm)


def test_shared_prefill_gives_the_plain_passes_logits_cache_and_positions(causal):
    """The prompts' common prefix run once and repeated rows run once give the left-padded pass's numbers."""
    torch = pytest.importorskip("torch")
    lm = load_language_model(causal, "causal")
    s = _resolved(lm, _prompt(1.0, BOUNDS))
    frame = lm_decode.prompt_frame(lm, s)
    docs = ["the cat sat on the mat .", "a dog ran in the park today and yesterday .", "the cat sat on the mat ."]
    rows = lm_decode.prompt_ids(lm, s, docs) + [list(frame.public)] * 3
    assert lm_decode._common_prefix(rows) > 0
    kv, keep1 = lm_decode._cache_name(), {"logits_to_keep": 1}
    with torch.inference_mode():
        ids, mask = lm_decode._pad(rows, 0, left=True)
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        plain = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep1)
        cache, logits, mask2, last = lm_decode._prefill(lm.model, rows, 0, kv, keep1)
        assert torch.allclose(logits, plain.logits[:, -1], atol=1e-4)
        assert last[:, 0].tolist() == [len(r) - 1 for r in rows] and mask2.sum(1).tolist() == [len(r) for r in rows]
        nxt = logits.argmax(1)[:, None]
        a = lm.model(input_ids=nxt, attention_mask=torch.cat([mask, torch.ones_like(mask[:, :1])], 1),
                     position_ids=pos[:, -1:] + 1, use_cache=True, **{kv: getattr(plain, kv)}, **keep1)
        b = lm.model(input_ids=nxt, attention_mask=torch.cat([mask2, torch.ones_like(mask2[:, :1])], 1),
                     position_ids=last + 1, use_cache=True, **{kv: cache}, **keep1)
        assert torch.allclose(a.logits[:, -1], b.logits[:, -1], atol=1e-4)


def test_the_kv_cache_budget_lowers_batch_tokens(causal, monkeypatch):
    lm = load_language_model(causal, "causal")
    cfg = lm.model.config
    per = lm_decode.kv_bytes_per_token(lm.model)
    assert per == cfg.n_layer * 2 * cfg.n_head * (cfg.n_embd // cfg.n_head) * 4
    assert lm_decode.batch_token_budget(lm.model, 16384) == min(16384, lm_decode.KV_CACHE_BYTES // per)
    monkeypatch.setattr(lm_decode, "KV_CACHE_BYTES", per * 100)
    assert lm_decode.batch_token_budget(lm.model, 16384) == 100 and lm_decode.batch_token_budget(lm.model, 50) == 50
    s = _prompt(1.0, BOUNDS, max_new_tokens=10, batch_size=8)
    assert lm_decode._length_batches([40, 40, 40], s, 1, 100) == [[0, 1], [2]]


def test_length_sorted_batches_respect_the_token_budget():
    s = _prompt(1.0, BOUNDS, max_new_tokens=10, batch_size=4, batch_tokens=100)
    lengths = [5, 40, 7, 30, 6, 5, 90]
    batches = lm_decode._length_batches(lengths, s, 1)
    assert sorted(i for b in batches for i in b) == list(range(7))
    for b in batches:
        assert len(b) <= 4 and (len(b) == 1 or len(b) * (lengths[b[0]] + 10) <= 100)
        assert [lengths[i] for i in b] == sorted((lengths[i] for i in b), reverse=True)


def test_gguf_files_are_found_and_non_decoders_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    assert gguf_file(tmp_path) is None
    for arch in ("bert", "t5"):
        path = tmp_path / arch / f"{arch}.gguf"
        path.parent.mkdir()
        w = gguf.GGUFWriter(str(path), arch)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        assert gguf_file(path.parent) == path
        with pytest.raises(ParameterError, match="this mechanism needs a causal language model") as exc:
            load_language_model(str(path.parent), "causal")
        assert "\n" not in str(exc.value)
    (tmp_path / "t5" / "other.gguf").write_bytes(b"")
    with pytest.raises(ParameterError, match="2 .gguf files"):
        gguf_file(tmp_path / "t5")
    with pytest.raises(ParameterError, match="not a readable GGUF"):
        load_language_model(str(tmp_path / "t5" / "other.gguf"), "causal")


def test_lm_not_covered_text_fits_the_lm_family():
    g = _prompt(1.0, BOUNDS).bound().evolve(empty="empty")
    assert "blank" in g.not_covered and "in-vocabulary" not in g.not_covered + g.statement
    assert "blank" in g.evolve(seeded=True).not_covered


def test_bos_is_put_first_when_the_tokenizer_adds_it(causal):
    """Gemma's tokenizer adds <bos> and the model degenerates without it; the earlier prompt dropped it."""
    import copy

    from tokenizers import processors

    from textdp.generation.hf import LanguageModel

    lm = load_language_model(causal, "causal")
    s = _resolved(lm, _prompt(1.0, BOUNDS, prompt_format="plain"))
    bos = lm.tokenizer.bos_token_id
    assert lm_decode.prompt_frame(lm, s).public[0] != bos  # this tokenizer adds nothing: no BOS
    tok = copy.deepcopy(lm.tokenizer)
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    assert tok("a")["input_ids"][0] == bos
    frame = lm_decode.prompt_frame(LanguageModel(lm.model, tok, "causal", lm.identity), s)
    assert frame.public[0] == bos and frame.public[1] != bos
    (doc,) = lm_decode.prompt_ids(LanguageModel(lm.model, tok, "causal", lm.identity), s, ["the cat ."])
    assert doc[0] == bos and doc[1] != bos


def test_free_heap_memory_is_given_back_on_linux():
    """Issue 43's memory: after the bounds and each dp-prompt batch, glibc's free heap goes back to the system."""
    import sys

    from textdp.generation import hf

    assert hf.release_free_memory() is sys.platform.startswith("linux")
