"""The models the LM audits fit their rewriters on: tiny random models and DP-BART's hand-set probe model.

Both are written to a private temporary folder (removed at exit) with a word-level tokenizer over
:data:`~textdp.audit.lm_options.WORDS`; nothing is downloaded. :func:`tiny_model` draws every weight matrix
from :func:`textdp._rng.make_rng`; :func:`probe_model` sets DP-BART's probe weights by hand (:class:`GaussianProbe`).
"""

from __future__ import annotations

import atexit
import functools
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._rng import make_rng
from ..errors import ParameterError, require
from .accountant import analytic_gaussian_sigma
from .lm_options import MAX_TOKENS, SPECIALS, WORDS

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

__all__ = [
    "PROBE_DESIGNS",
    "TINY_HIDDEN",
    "TINY_INIT",
    "TINY_LAYERS",
    "GaussianProbe",
    "bart_probe",
    "probe_edges",
    "probe_model",
    "tiny_model",
    "tiny_tokenizer",
    "token_id",
]


#: Hidden size and layers of the tiny models; the standard deviation of their random weights.
TINY_HIDDEN, TINY_LAYERS, TINY_INIT = 16, 2, 0.3
_BUILT: dict[tuple[str, int], tuple[Path, PreTrainedModel]] = {}
_TMP: list[str] = []


@atexit.register
def _remove_tiny_models() -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate((*SPECIALS, *WORDS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", bos_token="<s>", eos_token="</s>")


def token_id(tok: PreTrainedTokenizerFast, token: str) -> int:
    """The id of one ``token`` of the tiny tokenizer."""
    out = tok.convert_tokens_to_ids(token)
    if not isinstance(out, int):
        raise ParameterError(f"the tiny tokenizer has no single id for {token!r}")
    return out


def tiny_model(kind: str, *, seed: int = 0) -> tuple[Path, PreTrainedModel]:
    """``(folder, model)``: a tiny random model of ``kind`` (causal, seq2seq, masked) saved as safetensors.

    Built once per process in a private temporary folder (removed at exit). Every weight matrix is
    drawn from ``make_rng(seed)`` (normal, standard deviation :data:`TINY_INIT`); biases and layer
    norms keep their constant initial values; torch's global generator is left as it was.
    """
    key = (kind, seed)
    if key in _BUILT:
        return _BUILT[key]
    torch = require("torch", "generation")
    require("transformers", "generation")
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        BertConfig,
        BertForMaskedLM,
        GPT2Config,
        GPT2LMHeadModel,
    )

    tok = tiny_tokenizer()
    v, ids = len(tok), functools.partial(token_id, tok)
    h, n_layers = TINY_HIDDEN, TINY_LAYERS
    with torch.random.fork_rng(devices=[]):
        if kind == "causal":
            model: PreTrainedModel = GPT2LMHeadModel(GPT2Config(
                vocab_size=v, n_positions=64, n_embd=h, n_layer=n_layers, n_head=2, bos_token_id=ids("<s>"),
                eos_token_id=ids("</s>"), pad_token_id=ids("[PAD]")))
        elif kind == "seq2seq":
            model = BartForConditionalGeneration(BartConfig(
                vocab_size=v, d_model=h, encoder_layers=n_layers, decoder_layers=n_layers, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=2 * h, decoder_ffn_dim=2 * h, max_position_embeddings=64,
                pad_token_id=ids("[PAD]"), bos_token_id=ids("<s>"), eos_token_id=ids("</s>"),
                decoder_start_token_id=ids("</s>"), forced_eos_token_id=None))
        elif kind == "masked":
            model = BertForMaskedLM(BertConfig(
                vocab_size=v, hidden_size=h, num_hidden_layers=n_layers, num_attention_heads=2, intermediate_size=2 * h,
                max_position_embeddings=64, pad_token_id=ids("[PAD]")))
        else:
            raise ParameterError(f"tiny model kind must be causal, seq2seq or masked, got {kind!r}")
    gen = make_rng(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.ndim >= 2:
                p.copy_(torch.from_numpy(gen.normal(0.0, TINY_INIT, tuple(p.shape))).to(p.dtype))
    model.eval()
    _BUILT[key] = _save(model, tok, kind)
    return _BUILT[key]


def _save(model: PreTrainedModel, tok: PreTrainedTokenizerFast, name: str) -> tuple[Path, PreTrainedModel]:
    """Save ``model`` and ``tok`` in a fresh private temporary folder (mode 0700, removed at exit)."""
    from transformers.utils import logging as hf_logging

    tmp = tempfile.mkdtemp(prefix="textdp-audit-lm-")
    _TMP.append(tmp)
    out = Path(tmp) / name
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(out, safe_serialization=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    tok.save_pretrained(out)
    return out, model


#: How DP-BART's probe model reads its noisy encoder output (:class:`GaussianProbe`).
PROBE_DESIGNS = ("mean", "spread")


@dataclass(frozen=True)
class GaussianProbe:
    """The public design of DP-BART's **probe model**: a BART whose weights are set by hand, not drawn.

    A random tiny model decodes the noisy encoder output into a few tokens that say little about the noise
    (DP-BART's σ/2 was caught in 1 of 2 audits that way). The probe is built so that its greedy decode *is*
    a fine reading of the one direction that separates the two audited sentences:

    * **encoder** (one layer): every word has a polarity (+1: a word of the first sentence, −1: of the
      second, 0: neither; ``[PAD]``: :attr:`pad`); with ``mean`` the self-attention spreads the sentence's
      mean polarity ``m`` to every row, with ``spread`` each row keeps its own token's; a final layer norm of
      gain ``γ = 5 max(|c_min|, |c_max|, 1)`` makes each row ``±γ u``, ``u = (1, …, 1, −1, …, −1)``, so the
      **clipped** rows are ``c_max`` where ``±u`` is positive and ``c_min`` elsewhere: the two sentences'
      clipped outputs differ in every coordinate by ``c_max − c_min`` (the whole L2 sensitivity), and without
      clipping by ``2γ``, far more;
    * **decoder** (one layer): its state is a constant (no token or position information), so each step
      reads the same statistic of the noisy rows ``h̃_j`` through cross-attention: ``mean`` reads
      ``z = α mean_j u·h̃_j`` (uniform attention; ``α = 1/(√2 σ)`` makes the noise of ``z`` standard normal,
      the two sentences' means ``±μ/2`` with ``μ = Δ/σ``); ``spread`` reads
      ``z = Σ_j (w_j − 1/n) y_j``, ``y_j = α u·h̃_j`` with ``α = 1/(4σ)``, ``w = softmax(β y)`` (two heads:
      the softmax-weighted mean minus the uniform one); a noise row *shared* by all rows cancels from it
      exactly, so ``z = 0`` exactly for rows that are all equal;
    * **output**: token ``k`` of the public words has the logit ``t_k z − t_k²/2`` (tangents of ``z²/2``),
      so greedy decoding releases the word of the interval of :attr:`edges` that holds ``z``, once per
      step; the end token and the special tokens never win.

    For ``mean`` the released law is therefore the Gaussian law of ``z`` cut at the edges: exact, and
    computed again by :meth:`~textdp.audit.lm_reference.ReferenceLM.probe_tables` from the model alone.

    Attributes
    ----------
    clip : tuple of float
        The public clipping bounds.
    sigma : float
        σ of the correct release (the audit's own calibration); sets the read-out scale ``α``.
    positive, negative : tuple of str
        Words of polarity +1 and −1.
    pad : float
        Polarity of ``[PAD]``.
    design : str
        One of :data:`PROBE_DESIGNS`.
    edges : tuple of float
        Increasing, evenly spaced cut points of ``z`` (one fewer than the public words).
    beta : float
        Softmax sharpness of ``spread``.
    """

    clip: tuple[float, float]
    sigma: float
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    pad: float
    design: str
    edges: tuple[float, ...]
    beta: float = 1.0

    def __post_init__(self) -> None:
        if self.design not in PROBE_DESIGNS:
            raise ParameterError(f"a DP-BART probe's design must be one of {PROBE_DESIGNS}, got {self.design!r}")
        e = np.asarray(self.edges, dtype=np.float64)
        if e.size != len(WORDS) - 1 or not np.all(np.diff(e) > 0):
            raise ParameterError(f"a DP-BART probe needs {len(WORDS) - 1} increasing edges")

    @property
    def direction(self) -> np.ndarray:
        """``u``: +1 on the first half of the hidden coordinates, −1 on the second."""
        return np.repeat([1.0, -1.0], TINY_HIDDEN // 2)

    @property
    def alpha(self) -> float:
        """The read-out scale: the noise of ``z`` (``mean``) or of each ``y_j`` (``spread``) has variance 1."""
        return 1.0 / ((math.sqrt(2.0) if self.design == "mean" else 4.0) * self.sigma)


def probe_edges(mu: float, design: str) -> tuple[float, ...]:
    """The probe's cut points: ``mean`` evenly over ``±(μ/2 + 3)``; ``spread``: one at ``10⁻³`` (a shared noise
    row gives exactly 0 for equal rows), the rest evenly over ``[0.25, 4.5]``.

    >>> len(probe_edges(0.69, "mean")), probe_edges(0.69, "spread")[0]
    (18, 0.001)
    """
    k = len(WORDS) - 1
    if design == "mean":
        b = mu / 2.0 + 3.0
        return tuple(float(x) for x in np.linspace(-b, b, k))
    return (1e-3, *(float(x) for x in np.linspace(0.25, 4.5, k - 1)))


def bart_probe(epsilon: float, delta: float, clip: tuple[float, float], design: str,
               texts: tuple[str, str]) -> GaussianProbe:
    """The probe (:class:`GaussianProbe`) of DP-BART's audit at ``(ε, δ)`` and ``clip`` on the pair ``texts``.

    σ is the audit's own analytic-Gaussian calibration at the L2 sensitivity ``(c_max − c_min) sqrt(d n)``;
    polarity +1 for the words of the first text (``mean``: those not in the second), −1 for the second's
    other words; ``[PAD]`` 0 (``mean``) or +1 (``spread``: padding rows equal to the first text's).

    >>> p = bart_probe(2.0, 1e-3, (-1.0, 1.0), "mean", ("the cat sat", "a dog ran"))
    >>> p.positive, p.negative, round(p.sigma, 3)
    (('the', 'cat', 'sat'), ('a', 'dog', 'ran'), 32.702)
    """
    lo, hi = float(clip[0]), float(clip[1])
    if not lo < hi:
        raise ParameterError(f"clip must be (low, high) with low < high, got {clip!r}")
    sens = (hi - lo) * math.sqrt(TINY_HIDDEN * MAX_TOKENS)
    sigma = analytic_gaussian_sigma(float(epsilon), float(delta), sens)
    wa, wb = texts[0].split(), texts[1].split()
    return GaussianProbe(clip=(lo, hi), sigma=sigma,
                         positive=tuple(w for w in wa if design == "spread" or w not in wb),
                         negative=tuple(w for w in wb if w not in wa), pad=0.0 if design == "mean" else 1.0,
                         design=design, edges=probe_edges(sens / sigma, design))


_PROBES: dict[GaussianProbe, tuple[Path, PreTrainedModel]] = {}


def _probe_weights(probe: GaussianProbe, v: int, ids: Callable[[str], int]) -> dict[str, np.ndarray]:
    """The probe's non-zero weights by parameter name (:class:`GaussianProbe`); every other weight is 0."""
    d = TINY_HIDDEN
    u = probe.direction
    pol = np.zeros(v)
    for w in probe.positive:
        pol[ids(w)] = 1.0
    for w in probe.negative:
        pol[ids(w)] = -1.0
    pol[ids("[PAD]")] = probe.pad
    enc, dec = "model.encoder.layers.0.", "model.decoder.layers.0."
    out: dict[str, np.ndarray] = {"model.encoder.embed_tokens.weight": pol[:, None] * u[None, :]}
    for ln in ("model.encoder.layernorm_embedding", enc + "self_attn_layer_norm", "model.decoder.layernorm_embedding",
               dec + "self_attn_layer_norm", dec + "encoder_attn_layer_norm", dec + "final_layer_norm"):
        out[ln + ".weight"] = np.ones(d)
    out[enc + "final_layer_norm.weight"] = np.full(d, 5.0 * max(abs(probe.clip[0]), abs(probe.clip[1]), 1.0))
    if probe.design == "mean":  # uniform self-attention over the sentence, 100x the row's own value
        out[enc + "self_attn.v_proj.weight"] = 100.0 * np.eye(d)
        out[enc + "self_attn.out_proj.weight"] = np.eye(d)
    q = np.zeros(d)
    q[0], q[1] = 1.0, -1.0  # the decoder's constant state (every position, no token embedding)
    g = np.zeros(d)
    g[2], g[3] = 1.0, -1.0  # where cross-attention writes z
    out["model.decoder.embed_positions.weight"] = np.tile(q, (64 + 2, 1))
    qhat = q / q.std()  # the state after the decoder's layer norm
    vp, op = np.zeros((d, d)), np.zeros((d, d))
    vp[0], op[:, 0] = probe.alpha * u, g
    if probe.design == "spread":  # head 1: softmax(beta y) weights; head 2 (uniform) subtracted
        half = d // 2
        vp[half], op[:, half] = probe.alpha * u, -g
        kp = np.zeros((d, d))
        kp[0] = probe.alpha * u
        qb = np.zeros(d)
        qb[0] = probe.beta * math.sqrt(half)  # BART scales the query by head_dim ** -0.5
        out[dec + "encoder_attn.k_proj.weight"], out[dec + "encoder_attn.q_proj.bias"] = kp, qb
    out[dec + "encoder_attn.v_proj.weight"], out[dec + "encoder_attn.out_proj.weight"] = vp, op
    e = np.asarray(probe.edges, dtype=np.float64)
    t = np.empty(e.size + 1)  # tangent points whose lines t z - t^2/2 cross at the edges
    t[0] = e[0] - (e[1] - e[0]) / 2.0
    for k in range(e.size):
        t[k + 1] = 2.0 * e[k] - t[k]
    head = np.tile(-1000.0 * qhat / (qhat @ qhat), (v, 1))  # the end token and the specials never win
    for k, w in enumerate(WORDS):
        head[ids(w)] = -t[k] ** 2 / 2.0 * qhat / (qhat @ qhat) + t[k] * g / (g @ g)
    out["lm_head.weight"] = head
    return out


def probe_model(probe: GaussianProbe) -> tuple[Path, PreTrainedModel]:
    """``(folder, model)``: DP-BART's probe model (:class:`GaussianProbe`) saved as safetensors.

    Built once per process and design in a private temporary folder (removed at exit); no randomness.
    """
    if probe in _PROBES:
        return _PROBES[probe]
    torch = require("torch", "generation")
    require("transformers", "generation")
    from transformers import BartConfig, BartForConditionalGeneration

    tok = tiny_tokenizer()
    v, ids = len(tok), functools.partial(token_id, tok)
    h = TINY_HIDDEN
    with torch.random.fork_rng(devices=[]):
        model = BartForConditionalGeneration(BartConfig(
            vocab_size=v, d_model=h, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=2 * h, decoder_ffn_dim=2 * h, max_position_embeddings=64,
            pad_token_id=ids("[PAD]"), bos_token_id=ids("<s>"), eos_token_id=ids("</s>"),
            decoder_start_token_id=ids("</s>"), forced_eos_token_id=None, tie_word_embeddings=False,
            scale_embedding=False))
    weights = _probe_weights(probe, v, ids)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.zero_()
            if name in weights:
                p.copy_(torch.from_numpy(weights[name]).to(p.dtype).reshape(p.shape))
    model.eval()
    _PROBES[probe] = _save(model, tok, f"probe-{probe.design}")
    return _PROBES[probe]
