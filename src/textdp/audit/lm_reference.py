"""The reference laws of the LM rewriters' releases, computed again from the model (numpy, not the rewriters' code).

:class:`SequenceSupport` indexes every token sequence a rewriter can release on the public vocabulary;
:class:`ReferenceLM` runs the model and writes the clipped exponential mechanism (McSherry & Talwar 2007), its
public-prior variant and DP-BART's clipped Gaussian law again, token by token (:mod:`textdp.audit.lm_release`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import require
from .accountant import analytic_gaussian_sigma
from .lm_models import GaussianProbe, tiny_tokenizer, token_id
from .lm_options import PROMPT, SPECIALS, LMAuditSpec

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

__all__ = ["ReferenceLM", "SequenceSupport"]


def _specials(tok: PreTrainedTokenizerFast) -> frozenset[int]:
    return frozenset(token_id(tok, t) for t in SPECIALS)


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

    def ids_of(self, texts: Sequence[str], tokenizer: PreTrainedTokenizerFast) -> np.ndarray:
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
        The model the mechanism was fitted on (:func:`~textdp.audit.lm_models.tiny_model`).
    epsilon, clip, length, max_tokens, delta
        The public parameters of the release: per-token ε (dp-bart: per sentence), the clipping bounds,
        the released tokens (``max_new_tokens``; dp-mlm: the sentence's tokens), the encoder shape and δ.
    """

    def __init__(self, spec: LMAuditSpec, model: PreTrainedModel, *, epsilon: float, clip: tuple[float, float], length: int,
                 max_tokens: int, delta: float = 0.0, prior: bool = False, public_top_k: int | None = None,
                 copied: frozenset[str] | None = None) -> None:
        self.kind, self.law, self.model = spec.kind, spec.law, model
        self.prior, self.public_top_k, self.copied = bool(prior), public_top_k, copied
        self.tok = tiny_tokenizer()
        self.epsilon, self.clip, self.length, self.max_tokens, self.delta = (
            float(epsilon), (float(clip[0]), float(clip[1])), int(length), int(max_tokens), float(delta))
        special = _specials(self.tok)
        self.eos = token_id(self.tok, "</s>")
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
            cls, sep, mask = (token_id(self.tok, t) for t in ("[CLS]", "[SEP]", "[MASK]"))
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
        pad = token_id(self.tok, "[PAD]")
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

        The probe's decoder reads the noisy rows only through ``z = α mean_j u·h̃_j`` (:class:`~textdp.audit.lm_models.GaussianProbe`),
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
