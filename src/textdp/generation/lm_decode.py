"""The decoding loops of the language-model rewriters (:mod:`textdp.generation.lm`), batched.

Every token-level draw is :func:`~textdp.generation.decoding.exponential_step` over the
public output mask of the model (real tokens and the end token; special tokens never
emitted), with the rewriter's ε and public bounds: each loop takes the fitted rewriter
(:mod:`textdp.generation.lm_family`) itself, so ε goes from its field to the draw without a copy. No ``generate()`` of ``transformers`` is
used: its default logits processors (repetition penalties over the private prompt,
n-gram bans, forced tokens) would put input-dependent ``-inf`` entries in the logits, a
truncation computed from private data. The loops here do nothing but the forward passes.

Randomness is the numpy generator passed in (uniforms, and DP-BART's Gaussian noise);
torch's global generator is never used.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import ParameterError, require
from ..guarantees.calibration import Calibration
from .decoding import ClipBounds, exponential_step, prior_log_weights, public_top_k_plus, sample_log_weights
from .hf import EncoderOutput, LanguageModel, Network, Tokenizer, release_free_memory

if TYPE_CHECKING:
    from torch import Tensor

#: one decoding step: the previous tokens ``(B,)`` -> the next logits ``(B, V)``
Step = Callable[["Tensor"], "Tensor"]


class SelectableCache(Protocol):
    """A ``transformers`` KV cache (``DynamicCache``): rows are kept (or repeated) in place."""

    def batch_select_indices(self, indices: Tensor) -> None:
        """Keep the batch rows ``indices`` (in that order; an index may repeat)."""
        ...


#: a KV cache: a ``transformers`` Cache, or the legacy tuples (per layer: key and value, batch first)
KVCache = SelectableCache | tuple[tuple["Tensor", ...], ...]

__all__ = ["EDGE_TOKENS", "Decoding", "DrawnText", "GaussianDecoding", "MaskedDecoding", "PromptDecoding", "PromptFrame", "chat_template",
           "clip_and_noise", "context_length", "cut_document", "dp_bart", "dp_mlm", "dp_prompt", "prompt_frame",
           "prompt_ids", "render_prompt", "repeated_at", "seq2seq", "stop_ids", "tidy_output"]


class Decoding(Protocol):
    """What a decoding loop reads from a fitted rewriter (:class:`~textdp.generation.lm_family.LMRewriter`):
    the rewriter itself is passed, so its ε goes from its one calibration to :func:`exponential_step` without a copy."""

    @property
    def epsilon_(self) -> float:
        """The fitted ε (the calibration's)."""
        ...

    bounds_: ClipBounds
    sampler: str
    max_new_tokens: int
    max_tokens: int
    batch_size: int


class PromptDecoding(Decoding, Protocol):
    """What dp-prompt's loop reads besides (:class:`~textdp.generation.lm_family.DPPrompt`, fitted)."""

    prior: bool
    public_top_k: int | None
    batch_tokens: int
    max_input_tokens: int
    template_: str
    prompt_format_: str
    response_prefix_: str
    stop: str | None
    repeat_ngram: int | None
    tidy: bool


class MaskedDecoding(Decoding, Protocol):
    """What dp-mlm's loop reads besides (:class:`~textdp.generation.lm_family.DPMLM`)."""

    copy_stopwords: bool


class GaussianDecoding(Decoding, Protocol):
    """What dp-bart's loop reads besides (:class:`~textdp.generation.lm_family.DPBART`): its fitted σ."""

    @property
    def calibration_(self) -> Calibration:
        """The fitted calibration: ``noise_params["sigma"]`` is the σ the guarantee states."""
        ...


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


def _cleans_up(tokenizer: Tokenizer) -> bool:
    """Whether to glue punctuation back (``clean_up_tokenization_spaces``): WordPiece/word-level tokenizers only.

    A BPE tokenizer keeps its own spaces; transformers 5.24 warns and ignores the clean-up for it.
    """
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    return type(model).__name__ != "BPE"


class DrawnText(str):
    """A rewritten unit (a ``str``) that also says how many ε-DP token draws made it (``drawn``).

    ``drawn`` counts every draw, the end token included when it was drawn: a public function of the released
    tokens (their number, plus one unless the cap was reached), so stating it releases nothing more. The record's
    ex-post figure is ``ε/token × drawn`` (:class:`~textdp.generation.rewriter.RewrittenText`).
    """

    drawn: int

    def __new__(cls, text: str, drawn: int) -> DrawnText:
        out = super().__new__(cls, text)
        out.drawn = int(drawn)
        return out


def _decode(lm: LanguageModel, rows: Iterable[Sequence[int]], drawn: Sequence[int] | None = None) -> list[str]:
    clean = _cleans_up(lm.tokenizer)
    texts = [lm.tokenizer.decode(list(r), skip_special_tokens=True, clean_up_tokenization_spaces=clean).strip()
             for r in rows]
    return texts if drawn is None else [DrawnText(t, n) for t, n in zip(texts, drawn, strict=True)]


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


def _sample_steps(step: Step, first: Tensor, s: Decoding, rng: np.random.Generator | None, allowed: Tensor,
                  eos: int) -> tuple[list[list[int]], list[int]]:
    """Up to ``s.max_new_tokens`` tokens per row: ``step(prev_ids) -> logits`` after the ``first`` logits.

    Each token is an ε-DP draw (:func:`~textdp.generation.decoding.exponential_step`) when ``rng``
    is given, else the argmax over ``allowed`` (DP-BART: post-processing of the noisy encoder output).
    Returns the tokens of each row and its number of draws (the end token included when drawn).
    """
    torch = _torch()
    logits = first
    B = logits.shape[0]
    out: list[list[int]] = [[] for _ in range(B)]
    drawn = [0] * B
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(s.max_new_tokens):
        if rng is not None:
            ids = exponential_step(logits, rng, epsilon=s.epsilon_, bounds=s.bounds_, allowed=allowed,
                                   method=s.sampler)
        else:
            ids = torch.where(allowed, logits.double(), torch.full((), -np.inf, dtype=torch.float64)).argmax(1)
        for i in torch.nonzero(~done).squeeze(1).tolist():
            drawn[i] += 1
            if int(ids[i]) == eos:
                done[i] = True
            else:
                out[i].append(int(ids[i]))
        if bool(done.all()) or t == s.max_new_tokens - 1:
            break
        logits = step(ids)
    return out, drawn


#: model types whose learned positions start after the padding index (``pad_token_id + 1`` rows unusable)
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert"})


def context_length(config: object) -> int | None:
    """The most positions the model can embed (``None``: no fixed limit, e.g. T5's relative positions)."""
    for key in ("n_positions", "max_position_embeddings", "n_ctx"):
        n = getattr(config, key, None)
        if isinstance(n, int) and n > 0:
            if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
                n -= int(getattr(config, "pad_token_id", 0) or 0) + 1
            return n
    return None


def _batches(n: int, size: int) -> Iterable[range]:
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


#: end-of-turn tokens of common chat templates (public: a property of the model, stopped on when present)
_END_OF_TURN = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "<|endoftext|>")


@dataclass(frozen=True)
class PromptFrame:
    """dp-prompt's public frame: the prompt without the document (the public prior's row), and the stop tokens.

    ``public`` is the model's own prompt (its chat template, or the plain template text) with an empty document:
    the same frame as every private prompt (:func:`prompt_ids`), the document left out. ``stops`` are the
    end-of-sequence and end-of-turn ids (a drawn stop token ends the row, and is never part of the output).
    """

    public: tuple[int, ...]
    stops: tuple[int, ...]
    format: str


def stop_ids(lm: LanguageModel) -> tuple[int, ...]:
    """The tokens that end generation: EOS (tokenizer, config, generation config) and known end-of-turn tokens."""
    found: list[int] = []

    def add(x: object) -> None:
        for v in x if isinstance(x, (list, tuple)) else (x,):
            if isinstance(v, int) and v >= 0 and v not in found:
                found.append(v)

    add(lm.tokenizer.eos_token_id)
    add(getattr(lm.model.config, "eos_token_id", None))
    add(getattr(getattr(lm.model, "generation_config", None), "eos_token_id", None))
    vocab = lm.tokenizer.get_vocab()
    for t in _END_OF_TURN:
        if t in vocab:
            add(int(vocab[t]))
    if not found:
        raise ParameterError("the model has no end-of-sequence token: generation could not stop")
    return tuple(found)


def chat_template(lm: LanguageModel) -> str | None:
    """The tokenizer's chat template (None when it has none)."""
    t = getattr(lm.tokenizer, "chat_template", None)
    return t if isinstance(t, str) and t.strip() else None


def cut_document(tokenizer: Tokenizer, document: str, max_input_tokens: int) -> str:
    """``document`` cut to its first ``max_input_tokens`` tokens (tokenised alone, no special tokens), as text.

    The cut is public (``max_input_tokens`` is in the guarantee's adjacency); a document within it is returned as
    it is, so its prompt is exactly the model's template around it.
    """
    ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    if len(ids) <= max_input_tokens:
        return document
    return str(tokenizer.decode(ids[:max_input_tokens], skip_special_tokens=False, clean_up_tokenization_spaces=False))


def _ids(out: object) -> list[int]:
    """Token ids from ``apply_chat_template(tokenize=True)``: a list, or (transformers 5) a ``BatchEncoding``."""
    if isinstance(out, Mapping):
        out = out["input_ids"]
    if not isinstance(out, Iterable):
        raise ParameterError(f"the tokenizer's chat template gave {type(out).__name__}, not token ids")
    return [int(t) for t in out]


def render_prompt(lm: LanguageModel, m: PromptDecoding, document: str) -> list[int]:
    """The token ids of dp-prompt's prompt around ``document`` (already cut), token for token the model's own.

    ``chat``: ``tokenizer.apply_chat_template([user message], add_generation_prompt=True, tokenize=True)``, the
    user message being the template with ``document`` in place; with a public response prefix (``m.response_prefix_``)
    the assistant turn is opened with it (``continue_final_message=True``), so the model continues after it.
    ``plain``: the whole text (template with the document, then the response prefix) tokenised at once, after the
    model's BOS token when its tokenizer adds one (Gemma: without ``<bos>`` it degenerates). The text is tokenised
    whole, never in pieces, so the tokens at the document's edges are the ones the model saw in training (a
    ``"\n\n"`` before a word is two ``"\n"`` tokens, not one).
    """
    tok = lm.tokenizer
    body = m.template_.replace("{document}", document)
    prefix = getattr(m, "response_prefix_", "") or ""
    if m.prompt_format_ == "chat":
        messages = [{"role": "user", "content": body}]
        if prefix:
            messages.append({"role": "assistant", "content": prefix})
            return _ids(tok.apply_chat_template(messages, tokenize=True, continue_final_message=True))
        return _ids(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
    text = body + prefix
    ids = [int(t) for t in tok(text, add_special_tokens=False)["input_ids"]] if text else []
    bos = tok.bos_token_id
    if bos is not None and ids[:1] != [bos]:
        probe = tok("a", add_special_tokens=True)["input_ids"]
        if probe[:1] == [bos]:  # the tokenizer adds BOS: the model expects it first
            ids = [int(bos), *ids]
    return ids


#: tokens a prompt may have beyond its frame and the document's own (merges at the document's two edges)
EDGE_TOKENS = 2


def prompt_ids(lm: LanguageModel, m: PromptDecoding, documents: Sequence[str]) -> list[list[int]]:
    """The prompt ids of every document: each cut to ``m.max_input_tokens`` document tokens, then rendered whole
    (:func:`render_prompt`).

    A prompt never exceeds ``len(frame) + max_input_tokens + EDGE_TOKENS`` tokens (the public length
    :meth:`~textdp.generation.lm_family.DPPrompt.context_need` checks): a document whose edges merge into more
    tokens than that is cut one token shorter until it fits, a public rule, so no error depends on a document.
    """
    limit = len(render_prompt(lm, m, "")) + m.max_input_tokens + EDGE_TOKENS
    out = []
    for d in documents:
        n = m.max_input_tokens
        ids = render_prompt(lm, m, cut_document(lm.tokenizer, d, n))
        while len(ids) > limit and n > 0:
            n -= 1
            ids = render_prompt(lm, m, cut_document(lm.tokenizer, d, n))
        out.append(ids)
    return out


def prompt_frame(lm: LanguageModel, m: PromptDecoding) -> PromptFrame:
    """dp-prompt's public frame (``m`` fitted: its prompt format and template resolved): the prompt with an empty
    document, and the stop tokens."""
    return PromptFrame(tuple(render_prompt(lm, m, "")), stop_ids(lm), m.prompt_format_)


def _select(cache: KVCache, rows: list[int]) -> KVCache:
    """Keep ``rows`` of a KV cache (a ``transformers`` Cache, or the legacy tuples); a row may be repeated."""
    if isinstance(cache, tuple):
        return tuple(tuple(t[rows] for t in layer) for layer in cache)
    cache.batch_select_indices(_torch().tensor(rows, dtype=_torch().long))
    return cache


def _keeps_last_logits(model: Network) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


#: most bytes of KV cache one dp-prompt batch may build (with the model's weights, the route's peak memory)
KV_CACHE_BYTES = 256 * 2**20


def kv_bytes_per_token(model: Network) -> int | None:
    """Bytes of KV cache per token of one row: layers x 2 (keys, values) x key-value heads x head size x the
    weights' element size, from the model's config (None when the config does not say)."""
    cfg = model.config

    def field(*names: str) -> int | None:
        for name in names:
            v = getattr(cfg, name, None)
            if isinstance(v, int) and v > 0:
                return v
        return None

    layers, heads, hidden = field("num_hidden_layers", "n_layer"), field("num_attention_heads", "n_head"), \
        field("hidden_size", "n_embd")
    kv_heads = field("num_key_value_heads") or heads
    head_dim = field("head_dim") or (hidden // heads if hidden and heads else None)
    if not (layers and kv_heads and head_dim):
        return None
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    size = int(first.element_size()) if first is not None else 4
    return layers * 2 * kv_heads * head_dim * size


def batch_token_budget(model: Network, batch_tokens: int) -> int:
    """``batch_tokens``, lowered so that a batch's KV cache stays under :data:`KV_CACHE_BYTES` (at least one row:
    a batch always holds one). Batching never changes the law of a draw; it changes which uniform each row gets.

    On SmolLM2-135M (30 layers, 3 key-value heads of 64, float32: 46,080 bytes a token) 5,825 tokens (about 40
    rows of a sentence and 64 new tokens), where the default 16,384 would let the cache reach 720 MiB.
    """
    per = kv_bytes_per_token(model)
    return batch_tokens if per is None else max(1, min(batch_tokens, KV_CACHE_BYTES // per))


def _length_batches(lengths: Sequence[int], s: PromptDecoding, copies: int,
                    budget: int | None = None) -> list[list[int]]:
    """Rows sorted by length (longest first), cut into batches of at most ``batch_size`` rows and
    ``budget`` tokens (default ``batch_tokens``; ``copies`` rows per document: 2 with the public prior)."""
    budget = s.batch_tokens if budget is None else budget
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    out: list[list[int]] = []
    for i in order:
        if out:
            width = lengths[out[-1][0]] + s.max_new_tokens
            if len(out[-1]) < s.batch_size and (len(out[-1]) + 1) * copies * width <= budget:
                out[-1].append(i)
                continue
        out.append([i])
    return out


def _common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """The length of the longest common prefix of ``rows``, less than the shortest row (each keeps a last token).

    >>> _common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    """
    n = min(len(r) for r in rows) - 1
    first = rows[0]
    for r in rows[1:]:
        k = 0
        while k < n and r[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def _prefill(model: Network, rows: Sequence[Sequence[int]], pad: int, kv: str,
             keep1: dict[str, int]) -> tuple[KVCache, Tensor, Tensor, Tensor]:
    """The forward pass over every prompt of a batch: its KV cache, last logits, attention mask and last positions.

    The same numbers as one left-padded pass over ``rows`` (each row at positions ``0 .. len - 1``, its logits at
    its last token), computed with less work: the prefix common to every row (the chat template's system turn and
    instruction, public) is run once and its cache copied to every row; each distinct row (the public prior's
    rows are one prompt repeated) is run once, after the prefix, and its cache rows copied to its repeats. The
    cache holds ``[prefix | padding | rest of the row]``; the mask is 0 on the padding and the positions are
    explicit, so attention sees exactly each row's own tokens. Only floating-point rounding may differ from the
    plain pass (other matrix shapes): the law of every draw is the same function of the logits.
    """
    torch = _torch()
    distinct: dict[tuple[int, ...], int] = {}
    where = [distinct.setdefault(tuple(r), len(distinct)) for r in rows]
    unique = [list(r) for r in distinct]
    n = len(unique)
    shared = _common_prefix(unique)
    past: dict[str, KVCache] = {}
    if shared:
        head = model(input_ids=torch.tensor([unique[0][:shared]], dtype=torch.long), use_cache=True, **keep1)
        past = {kv: _select(getattr(head, kv), [0] * n)}
    ids, tail = _pad([r[shared:] for r in unique], pad, left=True)
    mask = torch.cat([torch.ones((n, shared), dtype=torch.long), tail], 1)
    pos = (tail.cumsum(1) - 1).clamp_(min=0).add_(shared)
    res = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **past, **keep1)
    cache, logits, pos = getattr(res, kv), res.logits[:, -1, :], pos[:, -1:]
    if where != list(range(n)):
        cache, logits, mask, pos = _select(cache, where), logits[where], mask[where], pos[where]
    return cache, logits, mask, pos


def _draw(logits: Tensor, n: int, s: PromptDecoding, rng: np.random.Generator, allowed: Tensor) -> Tensor:
    """One ε-DP token per row: rows ``[:n]`` are private; with the prior, rows ``[n:]`` are the public ones."""
    if not s.prior:
        return exponential_step(logits, rng, epsilon=s.epsilon_, bounds=s.bounds_, allowed=allowed, method=s.sampler)
    priv, pub = logits[:n], logits[n:]
    mask = allowed if s.public_top_k is None else public_top_k_plus(pub, s.public_top_k, s.bounds_.width, allowed)
    lw = prior_log_weights(priv, pub, epsilon=s.epsilon_, bounds=s.bounds_, allowed=mask)
    return sample_log_weights(lw, rng, method=s.sampler)


def repeated_at(row: Sequence[int], n: int | None) -> int | None:
    """Where the first repeated ``n``-gram of ``row`` starts (its second occurrence), or None.

    dp-prompt's repetition rule (public conditioning): whether to draw another token depends only on the tokens
    already drawn, which are released, so stopping a row when its last ``n`` tokens repeat an earlier ``n``-gram is
    the adaptive composition the bound already covers (fewer draws, never more); cutting the released row at the
    repeat is post-processing.

    >>> repeated_at([1, 2, 3, 9, 1, 2, 3], 3), repeated_at([1, 2, 3, 4], 2), repeated_at([5, 5, 5], None)
    (4, None, None)
    """
    if not n or len(row) < n + 1:
        return None
    seen: set[tuple[int, ...]] = set()
    for j in range(len(row) - n + 1):
        gram = tuple(row[j : j + n])
        if gram in seen:
            return j
        seen.add(gram)
    return None


def _last_repeats(row: Sequence[int], n: int | None) -> bool:
    """Whether the last ``n`` tokens of ``row`` repeat an earlier ``n``-gram (checked after every draw)."""
    if not n or len(row) < n + 1:
        return False
    tail = tuple(row[-n:])
    return any(tuple(row[j : j + n]) == tail for j in range(len(row) - n))


def _halts(lm: LanguageModel, row: Sequence[int], s: PromptDecoding) -> bool:
    """Whether a row stops before its next draw: its last ``n``-gram repeats, or its text (leading white space
    dropped) holds the stop string. Both read only the released tokens (public conditioning, see
    :func:`repeated_at`)."""
    if _last_repeats(row, s.repeat_ngram):
        return True
    if s.stop:
        text = lm.tokenizer.decode(list(row), skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return s.stop in text.lstrip()
    return False


#: known preambles of chat models (public text, removed from the start of an output: post-processing)
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok)\b[!,.]?\s*)?"
    r"(?:(?:here(?:'s| is| are)|this is|below is)\b[^:\n]{0,80}?(?:paraphrase|rewrit|version|text)[^:\n]{0,40}:"
    r"|(?:paraphrase|paraphrased(?: text| version)?|rewritten(?: text| version)?)\s*:)\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|$)")


def tidy_output(text: str, *, stop: str | None, capped: bool) -> str:
    r"""dp-prompt's post-processing of one released text (a function of the released tokens alone, so it costs no ε).

    In order: the text is cut at the stop string (the row stopped there, :func:`_halts`); a known preamble ("Here is
    a paraphrase of the text:", "Paraphrase:", ...) is removed from its start; quotes around the whole text are
    removed; and when the token cap stopped the row (``capped``, public: the row has ``max_new_tokens`` tokens and
    drew no end token), the text is cut after its last complete sentence, if it has one, so that no output ends in
    the middle of a sentence.

    >>> tidy_output('Here is the paraphrase: "The cat sat down."\n\nI hope', stop="\n\n", capped=False)
    'The cat sat down.'
    >>> tidy_output("The cat sat. It slept on the", stop=None, capped=True)
    'The cat sat.'
    """
    text = text.strip()
    if stop and stop in text:
        text = text[: text.index(stop)]
    text = _PREAMBLE.sub("", text, count=1).strip()
    if len(text) > 1 and text[0] in "\"“" and text[-1] in "\"”" and text.count('"') <= 2:
        text = text[1:-1].strip()
    if capped:
        ends = list(_SENTENCE_END.finditer(text))
        if ends:
            text = text[: ends[-1].end()]
    return text.strip()


def dp_prompt(lm: LanguageModel, documents: Sequence[str], s: PromptDecoding, rng: np.random.Generator) -> list[str]:
    """DP-Prompt: the causal LM continues the public prompt around each (cut) document.

    Speed without changing the law: the KV cache; logits only at the last position (``logits_to_keep``);
    a row that draws a stop token leaves the batch (its cache rows are dropped); rows sorted by length
    and batched under ``batch_tokens`` and a KV-cache budget (:func:`batch_token_budget`); the prompts' common
    prefix and each distinct prompt prefilled once (:func:`_prefill`). With ``s.prior`` each batch also runs the public prompt (the
    frame without the document) on the same released tokens: its logits are the public prior.
    """
    torch = _torch()
    tok, model = lm.tokenizer, lm.model
    frame = prompt_frame(lm, s)
    pad = tok.pad_token_id if tok.pad_token_id is not None else frame.stops[0]
    allowed = lm.output_mask(keep=frame.stops)
    stops = set(frame.stops)
    kv = _cache_name()
    keep1 = {"logits_to_keep": 1} if _keeps_last_logits(model) else {}
    prompts = prompt_ids(lm, s, documents)
    public = list(frame.public)
    copies = 2 if s.prior else 1
    out: list[list[int]] = [[] for _ in documents]
    drawn_n = [0] * len(documents)
    capped = [False] * len(documents)
    budget = batch_token_budget(model, s.batch_tokens)
    for batch in _length_batches([len(p) for p in prompts], s, copies, budget):
        rows = [prompts[i] for i in batch] + ([public] * len(batch) if s.prior else [])
        alive = list(batch)
        with torch.inference_mode():
            cache, logits, mask, pos = _prefill(model, rows, pad, kv, keep1)
            for t in range(s.max_new_tokens):
                drawn = _draw(logits, len(alive), s, rng, allowed).tolist()
                keep = []
                for j, (i, w) in enumerate(zip(alive, drawn, strict=True)):
                    drawn_n[i] += 1
                    if w not in stops:
                        out[i].append(int(w))
                        if not _halts(lm, out[i], s):
                            keep.append(j)
                if t == s.max_new_tokens - 1:
                    for j in keep:
                        capped[alive[j]] = True
                    break
                if not keep:
                    break
                prev = torch.tensor([drawn[j] for j in keep], dtype=torch.long)
                if len(keep) < len(alive):
                    sel = keep + [len(alive) + j for j in keep] if s.prior else keep
                    cache, mask, pos = _select(cache, sel), mask[sel], pos[sel]
                alive = [alive[j] for j in keep]
                if s.prior:
                    prev = torch.cat([prev, prev])
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
                pos = pos + 1
                r = model(input_ids=prev[:, None], attention_mask=mask, position_ids=pos, use_cache=True,
                          **{kv: cache}, **keep1)
                cache, logits = getattr(r, kv), r.logits[:, -1, :]
        del cache, logits
        release_free_memory()  # the batch's cache back to the system before the next one (hf.release_free_memory)
    if not s.tidy:
        return _decode(lm, out, drawn_n)
    cut = [row[: repeated_at(row, s.repeat_ngram)] for row in out]  # [:None] keeps the whole row
    texts = [tidy_output(t, stop=s.stop, capped=c) for t, c in zip(_decode(lm, cut), capped, strict=True)]
    return [DrawnText(t, n) for t, n in zip(texts, drawn_n, strict=True)]


def _encode(lm: LanguageModel, texts: Sequence[str], s: Decoding, *, fixed: bool) -> tuple[Tensor, Tensor]:
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else _eos(lm)
    rows = [lm.tokenizer(t, add_special_tokens=True, truncation=True, max_length=s.max_tokens)["input_ids"]
            for t in texts]
    if fixed:  # dp-bart: every sentence has the public shape max_tokens
        rows = [r + [pad] * (s.max_tokens - len(r)) for r in rows]
    ids, mask = _pad(rows, pad, left=False)
    return ids, (mask if not fixed else (ids != pad).long())


def _decoder_loop(lm: LanguageModel, enc_out: EncoderOutput, enc_mask: Tensor, s: Decoding, rng: np.random.Generator | None,
                  allowed: Tensor) -> tuple[list[list[int]], list[int]]:
    """Decode from encoder states: ε-DP draws (``rng`` given) or greedy over ``allowed`` (``rng`` None, DP-BART)."""
    torch = _torch()
    model = lm.model
    eos = _eos(lm)
    start = model.config.decoder_start_token_id
    if start is None:
        start = lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else eos
    B = enc_out.last_hidden_state.shape[0]
    state: dict[str, KVCache] = {}
    kv = _cache_name()

    def step(prev: Tensor) -> Tensor:
        r = model(encoder_outputs=enc_out, attention_mask=enc_mask, decoder_input_ids=prev[:, None],
                  use_cache=True, **{kv: state.get("past")})
        state["past"] = getattr(r, kv)
        return r.logits[:, -1, :]

    with torch.inference_mode():
        first = step(torch.full((B,), int(start), dtype=torch.long))
        return _sample_steps(step, first, s, rng, allowed, eos)


def seq2seq(lm: LanguageModel, sentences: Sequence[str], s: Decoding, rng: np.random.Generator,
            noise: Callable[[Tensor], Tensor] | None = None) -> list[str]:
    """Encode each batch, optionally ``noise(encoder_states) -> states`` (DP-BART), and decode.

    Without ``noise`` this is DP-Paraphrase: the seq2seq paraphraser decodes every sentence with ε-DP draws.

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
        rows_out, drawn = _decoder_loop(lm, enc, mask, s, rng if noise is None else None, allowed)
        out += _decode(lm, rows_out, drawn if noise is None else None)  # dp-bart draws no token: no count
    return out


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


def dp_bart(lm: LanguageModel, sentences: Sequence[str], s: GaussianDecoding, rng: np.random.Generator) -> list[str]:
    """DP-BART: clipped encoder output + Gaussian noise per coordinate and token, then greedy decoding."""
    sigma = float(s.calibration_.noise_params["sigma"])  # type: ignore[arg-type]  # the stated σ, built in fit
    return seq2seq(lm, sentences, s, rng,
                   noise=lambda hidden: clip_and_noise(hidden, s.bounds_, sigma, rng).to(hidden.dtype))


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


def dp_mlm(lm: LanguageModel, sentences: Sequence[str], s: MaskedDecoding, rng: np.random.Generator, *,
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
    replaced = [0] * len(encoded)
    for j, _ in jobs:
        replaced[j] += 1
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
        drawn = exponential_step(at, rng, epsilon=s.epsilon_, bounds=s.bounds_, allowed=allowed, method=s.sampler)
        for r, w in zip(rows, drawn.tolist(), strict=True):
            j, i = jobs[r]
            result[j][i] = int(w)
    return _decode(lm, result, replaced)
