r"""Audit cases of the language-model rewriters on their own release path, and their conformance tests.

Each case (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``, ``dp-bart``) builds the mechanism with
:func:`textdp.mechanisms.get`, fits it on a **tiny random model** of its kind that this module writes
to a temporary folder (:func:`tiny_model`: random weights drawn from :func:`textdp._rng.make_rng`, a
word-level tokenizer over :data:`WORDS`; nothing is downloaded) and samples
:meth:`~textdp.mechanisms.base.Mechanism.privatize_batch` on two neighbouring texts that differ in
one unit (:attr:`LMAuditSpec.texts`). The released texts are read back as token sequences (re-tokenised) and
indexed over every sequence the public vocabulary allows (:class:`SequenceSupport`).

Nothing here calls the rewriters' calibration or decoding code. The reference law of the released
sequences is computed **again** from the model (:class:`ReferenceLM`: the model run here, clipped
to the public bounds, the exponential mechanism ``P(w | x) ∝ exp(ε clip(s_w(x)) / (2Δ))`` over the
public output vocabulary; McSherry & Talwar 2007, as DP-Prompt (Utpala et al. 2023, §3), DP-Paraphrase
(Mattern et al. 2022) and DP-MLM (Meisenbacher et al. 2024) use it), token by token:

* ``dp-prompt``, ``dp-paraphrase``: ``n = max_new_tokens`` adaptive steps (each conditioned on the
  tokens released before it), the end token one of the candidates; the released sequence's
  probability is the product of the step probabilities up to the end token or ``n`` tokens;
* ``dp-mlm`` (``copy_stopwords=False``: every token replaced): one independent draw per position,
  each at its mask with the original sentence as context (DP-MLM's input: the sentence, then its
  copy with one token masked); with ``copy_stopwords`` the stop words and punctuation are released as
  they are (a point mass), the pair :data:`COPY_TEXTS` has the same skeleton and the claim counts the
  replaced tokens only;
* ``dp-bart`` (Igamberdiev & Habernal 2023): the encoder output of the sentence padded to
  ``max_tokens``, clipped per coordinate, plus ``N(0, σ²)`` per coordinate and token with σ from
  the analytic Gaussian mechanism (Balle & Wang 2018; :func:`~textdp.audit.accountant.analytic_gaussian_sigma`,
  the audit's own bisection) at L2 sensitivity ``(c_max − c_min) sqrt(d · max_tokens)``, then
  greedy decoding. A random model's greedy decode says little about the noise, so DP-BART is fitted on a
  **probe model** instead (:class:`GaussianProbe`: a BART whose weights are set by hand): the two
  sentences' clipped encoder outputs differ by the whole sensitivity (and by 5× more unclipped), and
  the decoder reads the noisy rows through one direction only, cut into one interval per public word,
  so the released law is the Gaussian mass of each interval, exact (:meth:`ReferenceLM.probe_tables`).

The claims come from public parameters only: ``n ε`` per unit for the token-level rewriters
(sequential composition of ``n`` ε-DP steps, every two units neighbours), ``(ε, δ)`` per sentence for
DP-BART. Every token-level case carries

* the **event test** (:mod:`textdp.audit.core`) on the released sequences against ``n ε``;
* the **privacy curve** (:mod:`textdp.audit.curve`) with the exact loss ``ln p_a(o)/p_b(o)`` of the
  reference law at the claimed ε (:func:`~textdp.audit.curve.exact_profile`): a loop that samples a
  sharper law than it claims (ε×3 inside the temperature, clipping removed) moves the curve above
  the claim's although ``n ε`` may still hold for this pair;
* the **conformance test** (:mod:`textdp.audit.conformance`, ``kind="table"``): χ² of the released
  sequences against the reference table, run by ``textdp audit NAME --conformance``.

DP-BART's case has the event test against ``(ε, δ)`` and, like the token-level cases, the curve with the
exact loss of the probe's law and the χ² table conformance test. Its ``spread`` probe (the known-bad
``dp-bart-shared-noise``'s, :mod:`textdp.audit.lm`) has no closed-form law: the curve selects events on the
released tokens against the Gaussian mechanism's profile at ``σ`` (the released tokens are post-processing
of the noisy encoder output, so their profile lies below it), and a two-sample χ² test compares them
with the reference sampler (:meth:`ReferenceLM.bart_sample`).

The tiny models make the audit fast (seconds on 2 cores) and exercise the whole loop (prompt frame,
KV cache, end token, batching, decoding, re-tokenisation); they say nothing about a large model's
logits, which the claims do not depend on.

References
----------
F. McSherry, K. Talwar. Mechanism design via differential privacy. FOCS 2007. S. Utpala, S. Hooker,
P.-Y. Chen. Locally differentially private document generation using zero shot prompting. Findings of
EMNLP 2023. J. Mattern, B. Weggenmann, F. Kerschbaum. The limits of word level differential privacy.
Findings of NAACL 2022. S. Meisenbacher, M. Chevli, J. Vladika, F. Matthes. DP-MLM: differentially
private text rewriting using masked language models. Findings of ACL 2024. T. Igamberdiev, I. Habernal.
DP-BART for privatized text rewriting under local differential privacy. Findings of ACL 2023. B. Balle,
Y.-X. Wang. Improving the Gaussian mechanism for differential privacy. ICML 2018.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import make_rng
from ..errors import ParameterError, require
from .accountant import analytic_gaussian_delta, analytic_gaussian_sigma
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, exact_profile
from .public_lists import AUDIT_ENGLISH_STOP_WORDS

__all__ = [
    "COPY_TEXTS",
    "LAWS",
    "LM_RELEASE_DEFAULTS",
    "MAX_AUDITED_NEW_TOKENS",
    "PROBE_DESIGNS",
    "SPREAD_TEXTS",
    "WORDS",
    "GaussianProbe",
    "LMAuditSpec",
    "ReferenceLM",
    "SequenceSupport",
    "bart_probe",
    "lm_release_case",
    "probe_edges",
    "probe_model",
    "register_lm_release_cases",
    "tiny_model",
]

#: Public words of the tiny models' tokenizer (written here; no corpus text).
WORDS = ("the", "a", "cat", "dog", "bird", "sat", "ran", "slept", "on", "in", "mat", "park", "tree", "today",
         "document", "paraphrase", ".", ",", ":")
#: Special tokens of the tiny tokenizer (excluded from every output but the end token ``</s>``).
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>")
#: dp-prompt's public template in the audit (plain format: no chat template on the tiny model).
PROMPT = "document : {document} paraphrase :"
#: How a rewriter's released tokens are drawn: ``steps`` (up to ``max_new_tokens`` adaptive draws, the end
#: token among the candidates), ``positions`` (one independent draw per token of the sentence, DP-MLM) or
#: ``gaussian`` (noisy encoder output, greedy decoding: DP-BART).
LAWS = ("steps", "positions", "gaussian")


@dataclass(frozen=True)
class LMAuditSpec:
    """The public settings of one rewriter's audit (frozen).

    Attributes
    ----------
    paper : str
        The paper's short name.
    kind : str
        The model kind (``causal``, ``seq2seq``, ``masked``).
    law : str
        One of :data:`LAWS`.
    texts : tuple of str
        Candidate texts of the neighbouring pair (one unit each: a one-sentence document for dp-prompt, a
        sentence otherwise; every two are neighbours; for ``positions`` of the same length). With a table
        (``steps``, ``positions``) the pair whose reference laws differ most (symmetrised Kullback-Leibler
        divergence, from the public model alone) is taken; with ``gaussian`` the first two.
    epsilon, delta : float
        Per-token ε (``gaussian``: the sentence's (ε, δ)).
    clip : tuple of float
        The public clipping bounds (logits; ``gaussian``: encoder outputs).
    max_new_tokens : int
        Generated tokens (``steps``, ``gaussian``).
    samples : int
        Default samples per input.
    params : tuple of (str, object)
        The mechanism's own parameters beside epsilon, model, clip and max_tokens.
    """

    paper: str
    kind: str
    law: str
    texts: tuple[str, ...]
    epsilon: float
    delta: float
    clip: tuple[float, float]
    max_new_tokens: int
    samples: int
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.law not in LAWS:
            raise ParameterError(f"an LM audit's law must be one of {LAWS}, got {self.law!r}")


_SENTENCES = ("the cat sat", "a dog ran", "the bird slept on the mat", "today , a tree")
#: The four rewriters' audits.
LM_RELEASE_DEFAULTS = {
    "dp-prompt": LMAuditSpec("DP-Prompt", "causal", "steps", _SENTENCES, 2.0, 0.0, (-1.0, 1.0), 2, 10_000,
                             (("prompt", PROMPT), ("prompt_format", "plain"), ("max_input_tokens", 8),
                              ("max_new_tokens", 2), ("batch_tokens", 1 << 24),
                              # the drawn tokens as released (no stop string, repetition rule or post-processing)
                              ("stop", None), ("repeat_ngram", None), ("tidy", False))),
    "dp-paraphrase": LMAuditSpec("DP-Paraphrase", "seq2seq", "steps", _SENTENCES, 2.0, 0.0, (-1.0, 1.0), 2, 10_000,
                                 (("max_new_tokens", 2),)),
    "dp-mlm": LMAuditSpec("DP-MLM", "masked", "positions", ("cat sat", "dog ran", "bird slept", "tree today",
                                                            "mat park"), 2.0, 0.0, (-1.0, 1.0), 0, 10_000,
                          (("copy_stopwords", False),)),
    "dp-bart": LMAuditSpec("DP-BART", "seq2seq", "gaussian", ("the cat sat", "a dog ran"),
                           2.0, 1e-3, (-1.0, 1.0), 2, 10_000, (("max_new_tokens", 2),)),
}
#: Hidden size and layers of the tiny models; the standard deviation of their random weights.
TINY_HIDDEN, TINY_LAYERS, TINY_INIT = 16, 2, 0.3

_BUILT: dict[tuple[str, int], tuple[Path, Any]] = {}
_TMP: list[str] = []


@atexit.register
def _remove_tiny_models() -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate((*SPECIALS, *WORDS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", bos_token="<s>", eos_token="</s>")


def tiny_model(kind: str, *, seed: int = 0) -> tuple[Path, Any]:
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

    tok = _tokenizer()
    v, ids = len(tok), tok.convert_tokens_to_ids
    h, n_layers = TINY_HIDDEN, TINY_LAYERS
    with torch.random.fork_rng(devices=[]):
        if kind == "causal":
            model: Any = GPT2LMHeadModel(GPT2Config(
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
    computed again by :meth:`ReferenceLM.probe_table` from the model alone.

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


_PROBES: dict[GaussianProbe, tuple[Path, Any]] = {}


def _probe_weights(probe: GaussianProbe, v: int, ids: Any) -> dict[str, np.ndarray]:
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


def probe_model(probe: GaussianProbe) -> tuple[Path, Any]:
    """``(folder, model)``: DP-BART's probe model (:class:`GaussianProbe`) saved as safetensors.

    Built once per process and design in a private temporary folder (removed at exit); no randomness.
    """
    if probe in _PROBES:
        return _PROBES[probe]
    torch = require("torch", "generation")
    require("transformers", "generation")
    from transformers import BartConfig, BartForConditionalGeneration

    tok = _tokenizer()
    v, ids = len(tok), tok.convert_tokens_to_ids
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


def _save(model: Any, tok: Any, name: str) -> tuple[Path, Any]:
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


def _specials(tok: Any) -> frozenset[int]:
    return frozenset(int(tok.convert_tokens_to_ids(t)) for t in SPECIALS)


@dataclass(frozen=True)
class SequenceSupport:
    """Every token sequence a rewriter can release on the public vocabulary, indexed ``0 .. size - 1``.

    ``generated``: sequences of up to ``length`` tokens (fewer: the end token was drawn; the end token
    itself is not released). Otherwise exactly ``length`` tokens (dp-mlm: every position replaced).
    Index ``size`` stands for any text that is none of them (probability 0 under the reference law).

    >>> s = SequenceSupport(tokens=(7, 8), length=2, generated=True)
    >>> s.size, s.index[()], s.index[(8, 7)]
    (7, 0, 5)
    """

    tokens: tuple[int, ...]
    length: int
    generated: bool
    index: dict[tuple[int, ...], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lengths = range(self.length + 1) if self.generated else (self.length,)
        seqs = [s for k in lengths for s in itertools.product(self.tokens, repeat=k)]
        object.__setattr__(self, "index", {s: i for i, s in enumerate(seqs)})

    @property
    def size(self) -> int:
        """Number of sequences (the extra index ``size`` is "outside")."""
        return len(self.index)

    def ids_of(self, texts: Sequence[str], tokenizer: Any) -> np.ndarray:
        """Index of each released text, read back with the tokenizer (``size``: not a sequence of the support)."""
        out = np.empty(len(texts), dtype=np.int64)
        cache: dict[str, int] = {}
        for i, t in enumerate(texts):
            if t not in cache:
                ids = tuple(int(x) for x in tokenizer(t, add_special_tokens=False)["input_ids"])
                cache[t] = self.index.get(ids, self.size)
            out[i] = cache[t]
        return out


def _log_law(logits: np.ndarray, epsilon: float, low: float, high: float, allowed: np.ndarray) -> np.ndarray:
    """Log-probabilities of the clipped exponential mechanism over ``allowed`` (float64; -inf elsewhere).

    ``log P(w) = ε clip(s_w, low, high) / (2Δ) − log Σ_v exp(ε clip(s_v) / (2Δ))``, ``Δ = high − low``
    (written here again, in numpy; the rewriters draw with torch).

    >>> _log_law(np.array([[9.0, -9.0, 0.0]]), 2.0, -1.0, 1.0, np.array([True, True, False])).round(4).tolist()
    [[-0.3133, -1.3133, -inf]]
    """
    s = np.nan_to_num(np.asarray(logits, dtype=np.float64), nan=low)
    w = float(epsilon) * np.clip(s, low, high) / (2.0 * (high - low))
    w = np.where(allowed, w, -np.inf)
    top = w.max(axis=-1, keepdims=True)
    return np.asarray(w - top - np.log(np.exp(w - top).sum(axis=-1, keepdims=True)))


def _prior_log_law(scores: np.ndarray, prior: np.ndarray, epsilon: float, low: float, high: float,
                   allowed: np.ndarray, public_top_k: int | None = None) -> np.ndarray:
    """Log-probabilities of DP-Prompt's public-prior law (InvisibleInk's clipping), written again in numpy.

    ``u = p' + clip(s − p', low, high)`` with ``p'`` the public logits floored at ``max p − R``,
    ``R = max(1400Δ/ε − Δ, 0)`` (``Δ = high − low``); ``P(w) ∝ exp(ε u_w/(2Δ))`` over ``allowed`` and, with
    ``public_top_k = k``, only the tokens whose public logit is within Δ of the k-th largest allowed one
    (chosen from the public logits alone).

    >>> _prior_log_law(np.array([[9.0, 0.0]]), np.array([[1.0, 0.0]]), 4.0, -1.0, 1.0,
    ...                np.array([True, True])).round(4).tolist()
    [[-0.1269, -2.1269]]
    """
    width = float(high) - float(low)
    p = np.nan_to_num(np.asarray(prior, dtype=np.float64), nan=0.0, posinf=0.0, neginf=-np.inf)
    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=low, posinf=high, neginf=low)
    mask = np.broadcast_to(np.asarray(allowed, dtype=bool), p.shape).copy()
    if public_top_k is not None:
        pm = np.where(mask, p, -np.inf)
        k = min(int(public_top_k), p.shape[1])
        kth = np.sort(pm, axis=1)[:, -k][:, None]
        mask &= pm >= kth - width
    top = np.where(mask, p, -np.inf).max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    floored = np.maximum(p, top - max(1400.0 * width / float(epsilon) - width, 0.0))
    u = floored + np.clip(s - floored, low, high)
    w = np.where(mask, float(epsilon) * u / (2.0 * width), -np.inf)
    best = w.max(axis=1, keepdims=True)
    return np.asarray(w - best - np.log(np.exp(w - best).sum(axis=1, keepdims=True)))


class ReferenceLM:
    """The reference laws of the four rewriters, computed from the tiny model run here (module docstring).

    Parameters
    ----------
    spec : LMAuditSpec
        The rewriter's audit settings (its model kind and law).
    model : transformers model
        The model the mechanism was fitted on (:func:`tiny_model`).
    epsilon, clip, length, max_tokens, delta
        The public parameters of the release: per-token ε (dp-bart: per sentence), the clipping bounds,
        the released tokens (``max_new_tokens``; dp-mlm: the sentence's tokens), the encoder shape and δ.
    """

    def __init__(self, spec: LMAuditSpec, model: Any, *, epsilon: float, clip: tuple[float, float], length: int,
                 max_tokens: int, delta: float = 0.0, prior: bool = False, public_top_k: int | None = None,
                 copied: frozenset[str] | None = None) -> None:
        self.kind, self.law, self.model = spec.kind, spec.law, model
        self.prior, self.public_top_k, self.copied = bool(prior), public_top_k, copied
        self.tok = _tokenizer()
        self.epsilon, self.clip, self.length, self.max_tokens, self.delta = (
            float(epsilon), (float(clip[0]), float(clip[1])), int(length), int(max_tokens), float(delta))
        special = _specials(self.tok)
        self.eos = int(self.tok.convert_tokens_to_ids("</s>"))
        v = len(self.tok)
        self.words = tuple(i for i in range(v) if i not in special)
        allowed = np.zeros(v, dtype=bool)
        allowed[list(self.words)] = True
        if self.law != "positions":
            allowed[self.eos] = True
        self.allowed = allowed
        self.support = SequenceSupport(self.words, self.length, generated=self.law != "positions")

    def _ids(self, text: str) -> list[int]:
        return [int(x) for x in self.tok(text, add_special_tokens=False)["input_ids"]]

    def _step_logits(self, text: str | None, prefixes: list[tuple[int, ...]]) -> np.ndarray:
        """The model's next-token logits after each released ``prefix`` (dp-prompt, dp-paraphrase).

        ``text=None``: the public prompt (the template without the document: DP-Prompt's public prior).
        """
        torch = require("torch", "generation")
        k = len(prefixes[0])
        with torch.inference_mode():
            if self.kind == "causal":
                head, tail = PROMPT.split("{document}")
                prompt = (self._ids(head) + self._ids(tail) if text is None
                          else self._ids(PROMPT.replace("{document}", text)))
                x = torch.tensor([prompt + list(p) for p in prefixes], dtype=torch.long)
                return np.asarray(self.model(input_ids=x).logits[:, -1].double().numpy())
            enc = self._ids(text or "")[: self.max_tokens]
            start = int(self.model.config.decoder_start_token_id)
            x = torch.tensor([enc] * len(prefixes), dtype=torch.long)
            dec = torch.tensor([[start, *p] for p in prefixes], dtype=torch.long).reshape(len(prefixes), k + 1)
            return np.asarray(self.model(input_ids=x, decoder_input_ids=dec).logits[:, -1].double().numpy())

    def log_table(self, text: str) -> np.ndarray:
        """``log P(sequence | text)`` for every sequence of the support (token-level rewriters)."""
        lo, hi = self.clip
        out = np.full(self.support.size, -np.inf)
        if self.law == "positions":
            torch = require("torch", "generation")
            ids = self._ids(text)
            cls, sep, mask = (int(self.tok.convert_tokens_to_ids(t)) for t in ("[CLS]", "[SEP]", "[MASK]"))
            rows = [[cls, *ids, sep, *ids[:i], mask, *ids[i + 1:], sep] for i in range(len(ids))]
            with torch.inference_mode():
                logits = self.model(input_ids=torch.tensor(rows, dtype=torch.long)).logits
            at = np.stack([logits[i, len(ids) + 2 + i].double().numpy() for i in range(len(ids))])
            laws = _log_law(at, self.epsilon, lo, hi, self.allowed)
            for i in self.copied_positions(text):  # copied (copy_stopwords): a point mass at the token itself
                laws[i] = -np.inf
                laws[i, ids[i]] = 0.0
            for seq, j in self.support.index.items():
                out[j] = sum(laws[i, w] for i, w in enumerate(seq))
            return out
        prefix_logp: dict[tuple[int, ...], float] = {(): 0.0}
        for k in range(self.length):
            prefixes = [p for p in prefix_logp if len(p) == k]
            if self.prior:
                laws = _prior_log_law(self._step_logits(text, prefixes), self._step_logits(None, prefixes),
                                      self.epsilon, lo, hi, self.allowed, self.public_top_k)
            else:
                laws = _log_law(self._step_logits(text, prefixes), self.epsilon, lo, hi, self.allowed)
            for p, law in zip(prefixes, laws, strict=True):
                base = prefix_logp.pop(p)
                out[self.support.index[p]] = base + law[self.eos]  # the end token drawn: p is released
                for w in self.words:
                    if k + 1 < self.length:
                        prefix_logp[(*p, w)] = base + law[w]
                    else:
                        out[self.support.index[(*p, w)]] = base + law[w]
        return out

    def copied_positions(self, text: str) -> list[int]:
        """dp-mlm with ``copy_stopwords``: the positions of ``text`` released as they are (stop words and
        punctuation: written here again from the public list); none without ``copied``."""
        if self.copied is None:
            return []
        tokens = self.tok.convert_ids_to_tokens(self._ids(text))
        return [i for i, t in enumerate(tokens)
                if t.lower() in self.copied or not any(c.isalnum() for c in t)]

    @property
    def sensitivity(self) -> float:
        """DP-BART's L2 sensitivity ``(c_max − c_min) sqrt(d · max_tokens)`` of the clipped encoder output."""
        d = int(self.model.config.d_model)
        return (self.clip[1] - self.clip[0]) * math.sqrt(d * self.max_tokens)

    @property
    def sigma(self) -> float:
        """DP-BART's σ: the audit's own analytic-Gaussian calibration at (ε, δ) and :attr:`sensitivity`."""
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    def clipped(self, text: str) -> np.ndarray:
        """DP-BART's clipped encoder output of ``text`` padded to ``max_tokens``: ``(max_tokens, d)`` float64."""
        torch = require("torch", "generation")
        pad = int(self.tok.convert_tokens_to_ids("[PAD]"))
        enc = self._ids(text)[: self.max_tokens]
        x = torch.tensor([enc + [pad] * (self.max_tokens - len(enc))], dtype=torch.long)
        with torch.inference_mode():
            h = self.model.get_encoder()(input_ids=x, attention_mask=(x != pad).long()).last_hidden_state
        return np.asarray(np.clip(h[0].double().numpy(), *self.clip))

    def greedy(self, states: np.ndarray) -> np.ndarray:
        """Support indices of the greedy decodes of ``states`` (``(n, max_tokens, d)`` noisy encoder outputs).

        The decoder sees the states only (an all-ones mask); ``length`` steps over the public words and the
        end token (written here again: the model called step by step, no cache).
        """
        torch = require("torch", "generation")
        from transformers.modeling_outputs import BaseModelOutput

        n = len(states)
        dtype = next(self.model.parameters()).dtype
        with torch.inference_mode():
            enc = BaseModelOutput(last_hidden_state=torch.from_numpy(np.asarray(states, dtype=np.float64)).to(dtype))
            ones = torch.ones((n, self.max_tokens), dtype=torch.long)
            dec = torch.full((n, 1), int(self.model.config.decoder_start_token_id), dtype=torch.long)
            done = np.zeros(n, dtype=bool)
            seqs: list[list[int]] = [[] for _ in range(n)]
            keep = torch.from_numpy(self.allowed)
            for _ in range(self.length):
                logits = self.model(encoder_outputs=enc, attention_mask=ones, decoder_input_ids=dec).logits[:, -1]
                nxt = torch.where(keep, logits.double(), torch.full((), -math.inf, dtype=torch.float64)).argmax(1)
                for i, w in enumerate(nxt.tolist()):
                    if not done[i]:
                        if w == self.eos:
                            done[i] = True
                        else:
                            seqs[i].append(int(w))
                dec = torch.cat([dec, nxt[:, None]], 1)
        return np.array([self.support.index.get(tuple(s), self.support.size) for s in seqs], dtype=np.int64)

    def bart_sample(self, text: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` support indices drawn from DP-BART's law: clip, Gaussian noise, greedy decoding (reference)."""
        base = self.clipped(text)
        return self.greedy(base + self.sigma * rng.standard_normal((n, *base.shape)))

    def probe_tables(self, texts: Sequence[str], probe: GaussianProbe) -> list[np.ndarray]:
        """``log P(sequence | text)`` of DP-BART's release on the ``mean`` probe model for each of ``texts``.

        The probe's decoder reads the noisy rows only through ``z = α mean_j u·h̃_j`` (:class:`GaussianProbe`),
        which is ``N(α mean_j u·clip(h_j), σ² α² |u|² / n)`` under DP-BART's law (σ: :attr:`sigma`). The
        decoded sequence as a function of ``z`` is found with :meth:`greedy` on rows ``z u / (α |u|²)`` (a grid
        over 12 standard deviations beyond the means, each change bisected to 10⁻⁹ of one); each sequence gets
        the Gaussian mass of its intervals.
        """
        from scipy.special import ndtr

        u, a = probe.direction, probe.alpha
        sd = self.sigma * a * float(np.linalg.norm(u)) / math.sqrt(self.max_tokens)
        means = [a * float((self.clipped(t) @ u).mean()) for t in texts]

        def decode(z: np.ndarray) -> np.ndarray:
            rows = z[:, None] * (u / (a * float(u @ u)))[None, :]
            return self.greedy(np.repeat(rows[:, None, :], self.max_tokens, axis=1))

        z = np.linspace(min(means) - 12.0 * sd, max(means) + 12.0 * sd, 2001)
        seq = decode(z)
        change = np.nonzero(seq[1:] != seq[:-1])[0]
        left, right = z[change], z[change + 1]
        while len(change) and float((right - left).max()) > 1e-9 * sd:
            mid = (left + right) / 2.0
            same = decode(mid) == seq[change]
            left, right = np.where(same, mid, left), np.where(same, right, mid)
        cuts = np.concatenate([[-np.inf], (left + right) / 2.0, [np.inf]])
        at = np.concatenate([seq[:1], seq[change + 1]])
        out = []
        for m in means:
            p = np.zeros(self.support.size + 1)
            np.add.at(p, at, np.diff(ndtr((cuts - m) / sd)))
            with np.errstate(divide="ignore"):
                out.append(np.log(p[: self.support.size]))
        return out


#: The options of a rewriter that change its released law and that ``textdp audit NAME --param KEY=VALUE`` takes.
LM_LAW_OPTIONS: dict[str, tuple[str, ...]] = {"dp-prompt": ("prior", "public_top_k", "clip", "sampler",
                                                            "max_new_tokens", "stop", "repeat_ngram", "tidy"),
                                              "dp-paraphrase": ("clip", "sampler", "max_new_tokens"),
                                              "dp-mlm": ("clip", "sampler", "copy_stopwords"),
                                              "dp-bart": ("clip", "max_new_tokens")}
#: The non-default laws ``textdp audit --all`` audits: ``{case: (rewriter, ((option, value), ...))}``.
LM_VARIANT_CASES: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {
    "dp-prompt-prior": ("dp-prompt", (("prior", True),)),
    "dp-prompt-public-top-k": ("dp-prompt", (("prior", True), ("public_top_k", 5))),
    "dp-prompt-3-tokens": ("dp-prompt", (("max_new_tokens", 3),)),
    "dp-paraphrase-1-token": ("dp-paraphrase", (("max_new_tokens", 1),)),
    "dp-mlm-copy-stopwords": ("dp-mlm", (("copy_stopwords", True),)),
    "dp-bart-3-tokens": ("dp-bart", (("max_new_tokens", 3),)),
    "dp-prompt-stopping": ("dp-prompt", (("max_new_tokens", 3), ("stop", "."), ("repeat_ngram", 1), ("tidy", True))),
}

#: The most generated tokens the audit takes (``--param max_new_tokens``): its reference law lists every sequence
#: of up to ``n`` public words (``19^n``; 7,240 sequences at 3).
MAX_AUDITED_NEW_TOKENS = 3
#: dp-mlm's pair with ``copy_stopwords``: the same skeleton (``the`` copied in place), two tokens replaced.
COPY_TEXTS = ("the cat sat", "the dog ran", "the bird slept", "the tree today", "the mat park")

#: The encoder / sentence shape of every case (``max_tokens``; dp-bart's public padded length).
MAX_TOKENS = 8


def _mechanism(name: str, spec: LMAuditSpec, folder: Path, epsilon: float, delta: float,
               clip: tuple[float, float] | None = None, **extra: Any) -> Any:
    """The rewriter built and fitted through the public API (:func:`textdp.mechanisms.get`)."""
    from ..mechanisms import get

    params: dict[str, Any] = {"epsilon": epsilon, "model": str(folder), "clip": clip or spec.clip,
                              "max_tokens": MAX_TOKENS,
                              "batch_size": 4096, **dict(spec.params), **extra}
    if spec.law == "gaussian":
        params["delta"] = delta
    return get(name, **params).fit()


def _checked_options(name: str, spec: LMAuditSpec, *, prior: bool, public_top_k: int | None, max_new_tokens: int | None,
                     copy_stopwords: bool | None, stop: str | None, repeat_ngram: int | str | None,
                     tidy: bool | str | None) -> tuple[int | None, int, bool, tuple[str, ...], dict[str, object]]:
    """:func:`lm_release_case`'s option checks, in order: public_top_k, steps, copy, the texts, the stopping rules."""
    if public_top_k is not None:
        public_top_k = int(public_top_k)
        if public_top_k < 1:
            raise ParameterError(f"{name}: public_top_k must be a positive whole number, got {public_top_k}")
        if not prior:
            raise ParameterError(f"{name}: public_top_k needs prior=true (the candidate set comes from the public "
                                 "prior); pass --param prior=true")
    if prior and spec.kind != "causal":
        raise ParameterError(f"{name} has no public-prior path: prior and public_top_k are dp-prompt's options")
    steps = spec.max_new_tokens
    if max_new_tokens is not None:
        if spec.law == "positions":
            raise ParameterError(f"the audit case {name!r} does not take max_new_tokens (dp-prompt, dp-paraphrase "
                                 "and dp-bart do)")
        steps = _whole(max_new_tokens, "max_new_tokens")
        if not 1 <= steps <= MAX_AUDITED_NEW_TOKENS:
            raise ParameterError(f"{name}: the audit takes max_new_tokens from 1 to {MAX_AUDITED_NEW_TOKENS} (its "
                                 f"reference law lists {len(WORDS)}^n sequences), got {max_new_tokens}")
    copy = _flag(copy_stopwords, "copy_stopwords") if copy_stopwords is not None else False
    if copy and spec.law != "positions":
        raise ParameterError(f"the audit case {name!r} does not take copy_stopwords (dp-mlm does)")
    texts = COPY_TEXTS if copy else spec.texts
    stopping: dict[str, object] = {}
    if stop is not None or repeat_ngram is not None or tidy is not None:
        if spec.kind != "causal":
            raise ParameterError(f"the audit case {name!r} does not take stop, repeat_ngram or tidy (dp-prompt does)")
        if stop is not None:
            stopping["stop"] = None if str(stop).strip().lower() == "none" else str(stop)
        if repeat_ngram is not None:
            none = str(repeat_ngram).strip().lower() == "none"
            stopping["repeat_ngram"] = None if none else _whole(repeat_ngram, "repeat_ngram")
        if tidy is not None:
            stopping["tidy"] = _flag(tidy, "tidy")
    return public_top_k, steps, copy, texts, stopping


def _mechanism_options(prior: bool, public_top_k: int | None, sampler: str | None, max_new_tokens: int | None,
                       steps: int, copy_stopwords: bool | None, copy: bool,
                       stopping: dict[str, object]) -> dict[str, object]:
    """The audited mechanism's options beyond the spec's (only those the caller set)."""
    extra: dict[str, object] = {"prior": True, "public_top_k": public_top_k} if prior else {}
    if sampler is not None:  # how each draw is made (inverse CDF or Gumbel): the same law
        extra["sampler"] = sampler
    if max_new_tokens is not None:
        extra["max_new_tokens"] = steps
    if copy_stopwords is not None:
        extra["copy_stopwords"] = copy
    extra.update(stopping)
    return extra


def _most_divergent(texts: tuple[str, ...], tables: dict[str, np.ndarray]) -> tuple[str, str]:
    """The pair of texts whose reference laws are furthest apart (symmetrised KL over the common support)."""
    def divergence(pair: tuple[str, str]) -> float:
        x, y = tables[pair[0]], tables[pair[1]]
        live = np.isfinite(x) & np.isfinite(y)
        return float(((np.exp(x[live]) - np.exp(y[live])) * (x[live] - y[live])).sum())

    return max(itertools.combinations(texts, 2), key=divergence)


def lm_release_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                    seed: int = 0, clip: tuple[float, float] | None = None, design: str = "mean",
                    prior: bool = False, public_top_k: int | None = None, sampler: str | None = None,
                    max_new_tokens: int | None = None, copy_stopwords: bool | None = None,
                    stop: str | None = None, repeat_ngram: int | str | None = None,
                    tidy: bool | str | None = None) -> AuditCase:
    """The audit case of rewriter ``name`` on its release path (module docstring).

    ``epsilon``: per token (dp-bart: per sentence, with ``delta``); ``None``: :data:`LM_RELEASE_DEFAULTS`.
    ``seed``: the tiny model's weights (public). dp-bart only: ``clip`` (default the spec's) and the probe's
    ``design`` (:data:`PROBE_DESIGNS`; ``spread`` audits :data:`SPREAD_TEXTS`). dp-prompt only: ``prior``
    (the public-prior path, ``--prior``) and ``public_top_k`` (its public top-k+ candidate set,
    ``--public-top-k``): the mechanism is built with them and the reference law is the prior law
    (:func:`_prior_log_law`, the public prompt's logits computed from the model here). dp-prompt and
    dp-paraphrase: ``max_new_tokens`` (1 to :data:`MAX_AUDITED_NEW_TOKENS`; the reference law enumerates every
    sequence of up to ``n`` public words, and the claim is ``n ε``; dp-bart takes it too: its probe decodes ``n``
    tokens from the same noisy encoder output, the claim ``(ε, δ)`` unchanged). dp-mlm: ``copy_stopwords`` (true: the pair
    is :data:`COPY_TEXTS`, whose stop words are released as they are; the claim counts the replaced tokens).
    dp-prompt's ``stop`` (a string; ``none``), ``repeat_ngram`` (a whole number; ``none``) and ``tidy``: a row
    stopped on its released tokens is a prefix of the ``n`` draws, and tidying is a function of the released text,
    so the release is post-processing of the ``n``-token law: the claim ``n ε`` and the exact profile of that law
    still bound it (event test and curve), and the conformance test, whose table is the undone law, is left out.
    """
    spec = LM_RELEASE_DEFAULTS.get(name)
    if spec is None:
        raise ParameterError(f"no release-path LM audit for {name!r}; choose one of {', '.join(LM_RELEASE_DEFAULTS)}")
    prior = _flag(prior, "prior")
    clip = _clip(clip)
    public_top_k, steps, copy, texts, stopping = _checked_options(
        name, spec, prior=prior, public_top_k=public_top_k, max_new_tokens=max_new_tokens,
        copy_stopwords=copy_stopwords, stop=stop, repeat_ngram=repeat_ngram, tidy=tidy)
    eps = spec.epsilon if epsilon is None else float(epsilon)
    dlt = spec.delta if delta is None else float(delta)
    if spec.law == "gaussian":
        return _dp_bart_case(name, spec, eps, dlt, clip or spec.clip, design, steps)
    dlt = 0.0  # pure epsilon-DP per token
    folder, model = tiny_model(spec.kind, seed=seed)
    extra = _mechanism_options(prior, public_top_k, sampler, max_new_tokens, steps, copy_stopwords, copy, stopping)
    bounds = clip or spec.clip
    mech = _mechanism(name, spec, folder, eps, dlt, clip=bounds, **extra)
    text_a, text_b = texts[:2]
    length = (len(_tokenizer()(text_a, add_special_tokens=False)["input_ids"]) if spec.law == "positions"
              else steps)
    ref = ReferenceLM(spec, model, epsilon=eps, clip=bounds, length=length, max_tokens=MAX_TOKENS, delta=dlt,
                      prior=prior, public_top_k=public_top_k, copied=AUDIT_ENGLISH_STOP_WORDS if copy else None)
    support, tok = ref.support, ref.tok
    tables = {t: ref.log_table(t) for t in texts}

    text_a, text_b = _most_divergent(texts, tables)

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        released = mech.privatize_batch([str(which)] * n, seed=rng, chunk=n)
        return support.ids_of([str(r.content) for r in released], tok)

    pair = (f"{name} on a tiny random {spec.kind} model ({TINY_HIDDEN} hidden, {TINY_LAYERS} layer, "
            f"{len(ref.words)} words), released through privatize_batch: {text_a!r} vs {text_b!r}, "
            f"clip [{bounds[0]:g}, {bounds[1]:g}]")
    la, lb = tables[text_a], tables[text_b]
    law = (f"{name}: clipped exponential mechanism, T = 2*Delta/epsilon over the public vocabulary, recomputed "
           f"from the model, {length} token(s) per release")
    if prior:
        law += (", scores clipped around the public prompt's logits (InvisibleInk)"
                + (f", over the public top-k+ set (k={public_top_k})" if public_top_k is not None else ""))
        pair += "; public prior" + (f", public_top_k={public_top_k}" if public_top_k is not None else "")
    # n epsilon-DP steps compose to n epsilon (every two units neighbours); copied tokens cost nothing
    drawn = length - len(ref.copied_positions(text_a))
    if copy:
        law += f", stop words and punctuation copied ({length - drawn} of {length} tokens)"
        pair += "; copy_stopwords=true (the same stop words in place)"
    case = _table_case(name, pair, text_a, text_b, sample, la, lb, support.size, law, drawn * eps, 0.0, spec.samples)
    if not stopping:
        return case
    import dataclasses

    said = ", ".join(f"{k}={v!r}" for k, v in stopping.items())
    return dataclasses.replace(case, pair=f"{pair}; {said} (post-processing of the {length}-token law)",
                               conformance=None)


def _clip(value: object) -> tuple[float, float] | None:
    """Clipping bounds given in Python or as ``--param clip=LOW,HIGH`` (a string)."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        low, high = (float(x) for x in parts)
    except (TypeError, ValueError):
        raise ParameterError(f"clip must be two numbers LOW,HIGH (e.g. -1,1), got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"clip must be two finite numbers LOW < HIGH, got {value!r}")
    return (low, high)


def _whole(value: object, key: str) -> int:
    """A whole number given in Python or as ``--param KEY=N`` (a string)."""
    try:
        out = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ParameterError(f"{key} must be a whole number, got {value!r}") from None
    return out


def _flag(value: object, key: str) -> bool:
    """A boolean option given in Python or as ``--param KEY=true|false`` (a string)."""
    if isinstance(value, str):
        low = value.strip().lower()
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise ParameterError(f"{key} must be true or false, got {value!r}")
        return low in ("true", "1", "yes")
    return bool(value)


def _table_case(name: str, pair: str, text_a: str, text_b: str, sample: Any, la: np.ndarray, lb: np.ndarray,
                size: int, law: str, claimed: float, delta: float, samples: int) -> AuditCase:
    """The case of a release whose exact law over ``size`` sequences is the table ``la`` / ``lb`` (log)."""
    with np.errstate(invalid="ignore"):
        diff = np.where(np.isfinite(la) & np.isfinite(lb), la - lb, 0.0)
    loss_of = np.append(diff, 0.0)  # the index "outside the support": loss 0 (the conformance test rejects it)
    top = float(np.abs(diff).max())
    curve = PrivacyCurve(sample=sample, loss=lambda ids: loss_of[np.asarray(ids, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, top, CURVE_POINTS, endpoint=False)),
                         description=f"the exact loss of the reference law over {size} sequences", chunk=4096,
                         reuse_outputs=True)
    probs = {text_a: np.append(np.exp(la), 0.0), text_b: np.append(np.exp(lb), 0.0)}
    conf = Conformance(description=law, kind="table", keep=lambda which, out: out,
                       table=lambda which: probs[str(which)])
    return AuditCase(mechanism=name, pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=claimed, claimed_delta=delta, events="discrete", chunk=4096, curve=curve,
                     conformance=conf, default_samples=samples)


#: The pair of dp-bart's ``spread`` probe: the second sentence's first row differs, every other row (and the
#: padding) is the same.
SPREAD_TEXTS = ("cat sat", "dog sat")


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


def _dp_bart_case(name: str, spec: LMAuditSpec, eps: float, dlt: float, clip: tuple[float, float],
                  design: str, steps: int) -> AuditCase:
    """DP-BART through ``privatize_batch`` on its probe model (:class:`GaussianProbe`; module docstring)."""
    text_a, text_b = spec.texts[:2] if design == "mean" else SPREAD_TEXTS
    probe = bart_probe(eps, dlt, clip, design, (text_a, text_b))
    lo, hi = probe.clip
    sigma = probe.sigma
    sens = (hi - lo) * math.sqrt(TINY_HIDDEN * MAX_TOKENS)
    folder, model = probe_model(probe)
    mech = _mechanism(name, spec, folder, eps, dlt, (lo, hi), max_new_tokens=steps)
    ref = ReferenceLM(spec, model, epsilon=eps, clip=(lo, hi), length=steps, max_tokens=MAX_TOKENS, delta=dlt)
    support, tok = ref.support, ref.tok

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        released = mech.privatize_batch([str(which)] * n, seed=rng, chunk=n)
        return support.ids_of([str(r.content) for r in released], tok)

    pair = (f"{name} on a probe BART model built here ({TINY_HIDDEN} hidden, 1 layer, designed weights: "
            f"{design} read-out of the noisy encoder rows), released through privatize_batch: {text_a!r} vs "
            f"{text_b!r}, clip [{lo:g}, {hi:g}]" + (f", {steps} tokens" if steps != spec.max_new_tokens else ""))
    if design == "mean":
        law = (f"DP-BART on the probe: encoder rows clipped to [{lo:g}, {hi:g}], N(0, {sigma:.4g}^2) per coordinate "
               f"and token (Igamberdiev & Habernal 2023), the probe's read-out z normal, cut at its edges")
        la, lb = ref.probe_tables((text_a, text_b), probe)
        return _table_case(name, pair, text_a, text_b, sample, la, lb, support.size, law, eps, dlt, spec.samples)

    def gaussian(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        pt = np.array([max(analytic_gaussian_delta(sigma, float(e), sens), 0.0) for e in grid])
        return pt, pt + 1e-12

    curve = PrivacyCurve(sample=sample, loss=None, claimed=gaussian, grid=tuple(np.linspace(0.0, eps, CURVE_POINTS)),
                         description=f"released tokens against the Gaussian mechanism's profile (sigma {sigma:.4g}, "
                                     f"L2 sensitivity {sens:.4g}; post-processing)", chunk=4096, reuse_outputs=True)
    conf = Conformance(description=f"DP-BART reference sampler: encoder output clipped to [{lo:g}, {hi:g}], "
                                   f"N(0, {sigma:.4g}^2) per coordinate and token, greedy decoding of "
                                   f"{steps} tokens (Igamberdiev & Habernal 2023)",
                       kind="reference", keep=lambda which, out: out,
                       reference=lambda which, n, rng: ref.bart_sample(str(which), n, rng))
    return AuditCase(mechanism=name, pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=eps, claimed_delta=dlt, events="discrete", chunk=4096, curve=curve,
                     conformance=conf, default_samples=spec.samples)


def register_lm_release_cases() -> None:
    """Register the four rewriters' release-path cases (idempotent; replaces the toy-step cases)."""
    from .registry import register_audit_case

    for name, d in LM_RELEASE_DEFAULTS.items():
        claim = (f"(epsilon, delta) per sentence; default ({d.epsilon:g}, {d.delta:g})" if d.law == "gaussian" else
                 f"n*epsilon per unit; default epsilon {d.epsilon:g} per token")
        model = ("a probe BART model built here (weights set so the exact law is known)" if d.law == "gaussian"
                 else "a tiny random model built here")
        opts = LM_LAW_OPTIONS.get(name, ())

        def factory(epsilon: float | None = None, delta: float | None = None, name: str = name,
                    opts: tuple[str, ...] = opts, **params: Any) -> AuditCase:
            bad = sorted(set(params) - set(opts))
            if bad:
                raise ParameterError(f"the audit case {name!r} takes {', '.join(opts) or 'no mechanism parameters'} "
                                     f"as --param, not {', '.join(bad)}")
            return lm_release_case(name, epsilon, delta, **params)

        register_audit_case(name, factory, description=f"{d.paper} through privatize_batch on {model}, "
                            f"neighbouring texts (claim {claim}; needs [generation])", replace=True,
                            takes_params=bool(opts))
    for variant, (base, params) in LM_VARIANT_CASES.items():
        register_audit_case(variant, functools.partial(_variant, base, params), replace=True,
                            description=(f"{LM_RELEASE_DEFAULTS[base].paper} with "
                                         f"{', '.join(f'{k}={v}' for k, v in params)} (a law users select: "
                                         f"textdp audit {base} " + " ".join(f"--param {k}={v}" for k, v in params)
                                         + "; needs [generation])"))


def _variant(base: str, params: tuple[tuple[str, Any], ...], epsilon: float | None = None,
             delta: float | None = None) -> AuditCase:
    """The case of ``base`` with the law-changing options ``params`` (registered for ``--all``)."""
    import dataclasses

    case = lm_release_case(base, epsilon, delta, **dict(params))
    name = next(k for k, v in LM_VARIANT_CASES.items() if v == (base, params))
    return dataclasses.replace(case, mechanism=name)
