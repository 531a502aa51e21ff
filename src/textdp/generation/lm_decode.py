"""The decoding loops of the language-model rewriters (:mod:`textdp.generation.lm`), batched.

Every token-level draw is :func:`~textdp.generation.decoding.exponential_step` over the
public output mask of the model (real tokens and the end token; special tokens never
emitted), with the settings' ε and public bounds. No ``generate()`` of ``transformers`` is
used: its default logits processors (repetition penalties over the private prompt,
n-gram bans, forced tokens) would put input-dependent ``-inf`` entries in the logits, a
truncation computed from private data. The loops here do nothing but the forward passes.

Randomness is the numpy generator passed in (uniforms, and DP-BART's Gaussian noise);
torch's global generator is never used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ParameterError, require
from .decoding import ClipBounds, exponential_step
from .hf import LanguageModel
from .lm_settings import LMSettings, dp_bart_sigma

if TYPE_CHECKING:
    from torch import Tensor

#: one decoding step: the previous tokens ``(B,)`` -> the next logits ``(B, V)``
Step = Callable[["Tensor"], "Tensor"]

__all__ = ["check_context", "clip_and_noise", "context_length", "dp_bart", "dp_mlm", "dp_paraphrase", "dp_prompt"]


def _torch() -> ModuleType:
    return require("torch", "generation")


def _cache_name() -> str:
    """The keyword (and output field) of the KV cache in ``forward``: ``cache`` from transformers 5.24 on.

    5.24 renamed ``past_key_values`` to ``cache`` (the old name warns and goes in 5.40); every version the
    ``[generation]`` extra allows before 5.24 knows only ``past_key_values``. One name per process, chosen by
    the installed version rather than by probing the model, so a model can never receive the wrong keyword.
    """
    import transformers
    from packaging.version import Version

    return "cache" if Version(transformers.__version__).release >= (5, 24) else "past_key_values"


def _eos(lm: LanguageModel) -> int:
    eos = lm.tokenizer.eos_token_id
    if eos is None:
        eos = getattr(lm.model.config, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    if eos is None:
        raise ParameterError("the model has no end-of-sequence token: generation could not stop")
    return int(eos)


def _decode(lm: LanguageModel, rows: Iterable[Sequence[int]]) -> list[str]:
    return [lm.tokenizer.decode(list(r), skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()
            for r in rows]


def _pad(rows: Sequence[Sequence[int]], pad: int, *, left: bool) -> tuple[Tensor, Tensor]:
    torch = _torch()
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            sl = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, sl] = torch.tensor(list(r), dtype=torch.long)
            mask[i, sl] = 1
    return ids, mask


def _sample_steps(step: Step, first: Tensor, s: LMSettings, rng: np.random.Generator | None, allowed: Tensor,
                  eos: int) -> list[list[int]]:
    """Up to ``s.max_new_tokens`` tokens per row: ``step(prev_ids) -> logits`` after the ``first`` logits.

    Each token is an ε-DP draw (:func:`~textdp.generation.decoding.exponential_step`) when ``rng``
    is given, else the argmax over ``allowed`` (DP-BART: post-processing of the noisy encoder output).
    """
    torch = _torch()
    logits = first
    B = logits.shape[0]
    out: list[list[int]] = [[] for _ in range(B)]
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(s.max_new_tokens):
        if rng is not None:
            ids = exponential_step(logits, rng, epsilon=s.epsilon, bounds=s.bounds, allowed=allowed,
                                   method=s.sampler)
        else:
            ids = torch.where(allowed, logits.double(), torch.full((), -np.inf, dtype=torch.float64)).argmax(1)
        for i in torch.nonzero(~done).squeeze(1).tolist():
            if int(ids[i]) == eos:
                done[i] = True
            else:
                out[i].append(int(ids[i]))
        if bool(done.all()) or t == s.max_new_tokens - 1:
            break
        logits = step(ids)
    return out


#: model types whose learned positions start after the padding index (``pad_token_id + 1`` rows unusable)
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert"})


def context_length(config: Any) -> int | None:
    """The most positions the model can embed (``None``: no fixed limit, e.g. T5's relative positions)."""
    for key in ("n_positions", "max_position_embeddings", "n_ctx"):
        n = getattr(config, key, None)
        if isinstance(n, int) and n > 0:
            if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
                n -= int(getattr(config, "pad_token_id", 0) or 0) + 1
            return n
    return None


def check_context(lm: LanguageModel, s: LMSettings) -> None:
    """Refuse settings whose longest public input does not fit the model's positions (before any text is seen).

    The cuts are public (``max_input_tokens``, ``max_tokens``, ``max_new_tokens``), so the longest
    input a mechanism can build is known in advance: dp-prompt's prompt around a document cut to
    ``max_input_tokens`` plus the generated tokens; dp-mlm's sentence and its masked copy; the
    seq2seq encoder's ``max_tokens`` and decoder's ``max_new_tokens + 1``. Checking this here, and not
    per document, means no error ever depends on a private text's length.
    """
    limit = context_length(lm.model.config)
    if limit is None:
        return
    if s.mechanism == "dp-prompt":
        tok = lm.tokenizer
        head, _, tail = s.prompt.partition("{document}")
        frame = sum(len(tok(part, add_special_tokens=False)["input_ids"]) for part in (head, tail) if part)
        need, what = frame + s.max_input_tokens + s.max_new_tokens, (
            f"the prompt ({frame} tokens) around a document cut to max_input_tokens={s.max_input_tokens}, plus "
            f"max_new_tokens={s.max_new_tokens}")
        fix = "lower --max-input-tokens (the cut is public and stated in the guarantee) or --max-new-tokens"
    elif s.mechanism == "dp-mlm":
        need, what = 2 * s.max_tokens + 3, f"a sentence of max_tokens={s.max_tokens} and its masked copy"
        fix = "lower --max-tokens"
    else:
        need, what = max(s.max_tokens, s.max_new_tokens + 1), (
            f"max_tokens={s.max_tokens} input tokens and max_new_tokens={s.max_new_tokens} output tokens")
        fix = "lower --max-tokens or --max-new-tokens"
    if need > limit:
        raise ParameterError(f"{s.mechanism}: {what} need {need} positions, but the model has {limit}; {fix}")


def _batches(n: int, size: int) -> Iterable[range]:
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def dp_prompt(lm: LanguageModel, documents: Sequence[str], s: LMSettings, rng: np.random.Generator) -> list[str]:
    """DP-Prompt: the causal LM continues the public prompt around each (cut) document."""
    torch = _torch()
    tok, model = lm.tokenizer, lm.model
    eos = _eos(lm)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    head, _, tail = s.prompt.partition("{document}")
    head_ids = tok(head, add_special_tokens=False)["input_ids"] if head else []
    tail_ids = tok(tail, add_special_tokens=False)["input_ids"] if tail else []
    allowed = lm.output_mask(keep=(eos,))
    kv = _cache_name()
    out: list[str] = []
    for rows in _batches(len(documents), s.batch_size):
        prompts = [head_ids + tok(documents[i], add_special_tokens=False)["input_ids"][: s.max_input_tokens]
                   + tail_ids for i in rows]
        ids, mask = _pad(prompts, pad, left=True)
        pos = (mask.cumsum(1) - 1).clamp_(min=0)
        state: dict[str, Any] = {"mask": mask, "pos": pos[:, -1:]}
        with torch.inference_mode():
            res = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
            state["past"] = getattr(res, kv)

            def step(prev: Tensor, state: dict[str, Any] = state) -> Tensor:
                state["mask"] = torch.cat([state["mask"], torch.ones_like(state["mask"][:, :1])], 1)
                state["pos"] = state["pos"] + 1
                r = model(input_ids=prev[:, None], attention_mask=state["mask"], position_ids=state["pos"],
                          use_cache=True, **{kv: state["past"]})
                state["past"] = getattr(r, kv)
                return r.logits[:, -1, :]

            out += _decode(lm, _sample_steps(step, res.logits[:, -1, :], s, rng, allowed, eos))
    return out


def _encode(lm: LanguageModel, texts: Sequence[str], s: LMSettings, *, fixed: bool) -> tuple[Tensor, Tensor]:
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else _eos(lm)
    rows = [lm.tokenizer(t, add_special_tokens=True, truncation=True, max_length=s.max_tokens)["input_ids"]
            for t in texts]
    if fixed:  # dp-bart: every sentence has the public shape max_tokens
        rows = [r + [pad] * (s.max_tokens - len(r)) for r in rows]
    ids, mask = _pad(rows, pad, left=False)
    return ids, (mask if not fixed else (ids != pad).long())


def _decoder_loop(lm: LanguageModel, enc_out: Any, enc_mask: Tensor, s: LMSettings, rng: np.random.Generator | None,
                  allowed: Tensor) -> list[list[int]]:
    """Decode from encoder states: ε-DP draws (``rng`` given) or greedy over ``allowed`` (``rng`` None, DP-BART)."""
    torch = _torch()
    model = lm.model
    eos = _eos(lm)
    start = model.config.decoder_start_token_id
    if start is None:
        start = lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else eos
    B = enc_out.last_hidden_state.shape[0]
    state: dict[str, Any] = {}
    kv = _cache_name()

    def step(prev: Tensor) -> Tensor:
        r = model(encoder_outputs=enc_out, attention_mask=enc_mask, decoder_input_ids=prev[:, None],
                  use_cache=True, **{kv: state.get("past")})
        state["past"] = getattr(r, kv)
        return r.logits[:, -1, :]

    with torch.inference_mode():
        first = step(torch.full((B,), int(start), dtype=torch.long))
        return _sample_steps(step, first, s, rng, allowed, eos)


def _seq2seq(lm: LanguageModel, sentences: Sequence[str], s: LMSettings, rng: np.random.Generator,
             noise: Callable[[Tensor], Tensor] | None = None) -> list[str]:
    """Encode each batch, optionally ``noise(encoder_states) -> states`` (DP-BART), and decode.

    Without ``noise`` every token is an ε-DP draw and the decoder gets the encoder's mask; with
    ``noise`` the sentences have the fixed public length, the decoder sees the noisy states only
    (an all-ones mask, not the input's length) and decodes greedily (post-processing).
    """
    torch = _torch()
    allowed = lm.output_mask(keep=(_eos(lm),))
    out: list[str] = []
    for rows in _batches(len(sentences), s.batch_size):
        ids, mask = _encode(lm, [sentences[i] for i in rows], s, fixed=noise is not None)
        with torch.inference_mode():
            enc = lm.model.get_encoder()(input_ids=ids, attention_mask=mask)
        if noise is not None:
            enc.last_hidden_state = noise(enc.last_hidden_state)
            mask = torch.ones_like(mask)
        out += _decode(lm, _decoder_loop(lm, enc, mask, s, rng if noise is None else None, allowed))
    return out


def dp_paraphrase(lm: LanguageModel, sentences: Sequence[str], s: LMSettings, rng: np.random.Generator) -> list[str]:
    """DP-Paraphrase: the seq2seq paraphraser decodes every sentence with ε-DP draws."""
    return _seq2seq(lm, sentences, s, rng)


def clip_and_noise(hidden: Tensor | np.ndarray, bounds: ClipBounds, sigma: float,
                   rng: np.random.Generator) -> Tensor:
    """DP-BART's core: clip every coordinate to ``bounds``, add independent ``N(0, σ²)`` to each.

    ``hidden`` is ``(B, n, d)``; the noise has the same shape (one draw per coordinate *and*
    per token), from ``rng``. The result is for decoding only, never for release.

    >>> import torch
    >>> from textdp._rng import make_rng
    >>> out = clip_and_noise(torch.zeros(1, 3, 2), ClipBounds(-0.1, 0.1), 1.0, make_rng(0))
    >>> tuple(out.shape), bool((out[0, 0] != out[0, 1]).all())
    ((1, 3, 2), True)
    """
    torch = _torch()
    h = torch.as_tensor(hidden).to(torch.float64)
    h = torch.nan_to_num(h, nan=bounds.low).clamp_(bounds.low, bounds.high)
    noise = torch.from_numpy(rng.standard_normal(tuple(h.shape)))
    return h + float(sigma) * noise


def dp_bart(lm: LanguageModel, sentences: Sequence[str], s: LMSettings, rng: np.random.Generator) -> list[str]:
    """DP-BART: clipped encoder output + Gaussian noise per coordinate and token, then greedy decoding."""
    d = int(lm.model.config.d_model if hasattr(lm.model.config, "d_model") else lm.model.config.hidden_size)
    _, sigma = dp_bart_sigma(s, d)
    return _seq2seq(lm, sentences, s, rng,
                    noise=lambda hidden: clip_and_noise(hidden, s.bounds, sigma, rng).to(hidden.dtype))


def _skeleton(lm: LanguageModel, ids: Sequence[int], stop_words: frozenset[str] | None) -> list[int]:
    """Positions dp-mlm replaces: every non-special token, less stop words and punctuation when copied."""
    special = lm.special_ids
    tokens = lm.tokenizer.convert_ids_to_tokens(list(ids))
    keep = []
    for i, (t, tid) in enumerate(zip(tokens, ids, strict=True)):
        if tid in special:
            continue
        word = t.lstrip("Ġ▁").removeprefix("##").lower()
        if stop_words is not None and (word in stop_words or not any(c.isalnum() for c in word)):
            continue
        keep.append(i)
    return keep


def dp_mlm(lm: LanguageModel, sentences: Sequence[str], s: LMSettings, rng: np.random.Generator, *,
           stop_words: frozenset[str]) -> list[str]:
    """DP-MLM: each replaced token is an ε-DP draw at its mask, the original sentence given as context."""
    torch = _torch()
    tok = lm.tokenizer
    if tok.mask_token_id is None:
        raise ParameterError("the masked language model's tokenizer has no mask token")
    encoded = [tok(t, add_special_tokens=False, truncation=True, max_length=s.max_tokens)["input_ids"]
               for t in sentences]
    jobs = [(j, i) for j, ids in enumerate(encoded)
            for i in _skeleton(lm, ids, stop_words if s.copy_stopwords else None)]
    cls = [tok.cls_token_id] if tok.cls_token_id is not None else []
    sep = [tok.sep_token_id] if tok.sep_token_id is not None else []
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    allowed = lm.output_mask()
    result = [list(ids) for ids in encoded]
    for rows in _batches(len(jobs), s.batch_size):
        inputs, where = [], []
        for r in rows:
            j, i = jobs[r]
            masked = list(encoded[j])
            masked[i] = tok.mask_token_id
            inputs.append(cls + list(encoded[j]) + sep + masked + sep)
            where.append(len(cls) + len(encoded[j]) + len(sep) + i)
        ids, mask = _pad(inputs, pad, left=False)
        with torch.inference_mode():
            logits = lm.model(input_ids=ids, attention_mask=mask).logits
        at = logits[torch.arange(len(rows)), torch.tensor(where)]
        drawn = exponential_step(at, rng, epsilon=s.epsilon, bounds=s.bounds, allowed=allowed, method=s.sampler)
        for r, w in zip(rows, drawn.tolist(), strict=True):
            j, i = jobs[r]
            result[j][i] = int(w)
    return _decode(lm, result)
