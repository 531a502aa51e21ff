r"""The one decoding core: the exponential mechanism over a full output vocabulary, in log space.

Every token-level mechanism of textdp draws its tokens here: the language-model rewriters
(``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``: :mod:`textdp.generation.lm`) over clipped
logits, and ER-AE's two-set step and AE-DP's step (:mod:`textdp.generation.sampling`) over
token probabilities, which are scores already bounded in ``[0, 1]``.

The mechanism
-------------
Given scores ``s_w(x)`` for every token ``w`` of the output vocabulary ``V`` (the logits
a model computes from the private input ``x`` and the tokens released so far), and
**public** bounds ``a < b`` chosen without looking at ``x`` (:class:`ClipBounds`):

1. clip: ``u_w(x) = min(max(s_w(x), a), b)`` (a NaN score becomes ``a``: any value in
   ``[a, b]`` is safe);
2. draw ``w`` with probability ``P(w | x) ∝ exp(ε u_w(x) / (2Δ))``, ``Δ = b − a``: a
   softmax at temperature ``T = 2Δ/ε``.

**Theorem** (McSherry & Talwar 2007, Thm. 6, with utility range ``Δ``). For *any* two
inputs ``x, x'`` and every token ``w``, ``P(w | x) <= e^ε P(w | x')``.

*Proof.* ``|u_w(x) − u_w(x')| <= Δ`` for every ``w`` because both lie in ``[a, b]``. So
the numerator ``exp(ε u_w / (2Δ))`` changes by at most ``e^{ε/2}`` and so does the
normaliser ``Z(x) = Σ_v exp(ε u_v(x) / (2Δ))`` (term by term); the ratio of
probabilities is at most ``e^{ε/2} · e^{ε/2} = e^ε``. ∎

Since the bound holds for every pair of inputs, one step is ε-DP with *every* two inputs
as neighbours (local DP for the whole input text). A sequence of ``n`` steps, each
conditioned on the input and on the tokens released before it, is ``nε``-DP by adaptive
sequential composition; the end-of-sequence token is one of the candidates, so the
output length is released by the mechanism too and is covered when ``n`` is the public
maximum number of steps.

**Why the factor 2 stays.** A softmax over a *fixed* candidate set can use ``ε u/Δ``
only when every utility moves in the same direction between neighbours (monotone
utilities, McSherry & Talwar's remark; the normaliser then moves with the numerator).
Logits are not monotone: a different input can raise one token's logit to ``b`` and lower
all the others to ``a``. With ``u(x) = (b, a, …, a)`` and ``u(x') = (a, b, …, b)`` over
``|V|`` tokens, ``P(w_0 | x) / P(w_0 | x') = e^{ε/2} · (e^{ε/2}(|V|−1) + 1) / (e^{ε/2} + |V| − 1)``
which tends to ``e^ε`` as ``|V|`` grows: with ``T = Δ/ε`` the loss is nearly ``2ε`` on a
real vocabulary. The audit case ``lm-factor-one`` shows it (:mod:`textdp.audit.lm`).
DP-Prompt (Utpala et al. 2023, §3) and DP-MLM (Meisenbacher et al. 2024) state the same
``ε = 2Δ/T``.

No truncation
-------------
Top-k and top-p (nucleus) sampling keep the tokens with the largest *private* logits; a
token outside the kept set has probability 0 from one input and a positive probability
from another, so no finite ε holds (DP-GTR's ``top_k=50`` next to clipping, the released
DP-Prompt scripts). :func:`refuse_truncation` refuses them with a one-line error. A
restriction of the vocabulary that is *public* (special tokens never emitted, the same
for every input) is allowed: ``allowed`` below.

Public bounds
-------------
Bounds are public parameters: either given by the user (``procedure="fixed"``), or
quantiles of the logits the same model computes on **public** text
(:func:`quantile_bounds`, ``procedure="public-quantiles"``), or (``procedure="public-step-max"``)
the upper bound from the distribution of each position's *largest* logit on public text and the
lower one from all logits (:class:`StreamingQuantiles`, bounded memory). Every record states them
(:meth:`ClipBounds.to_dict`). A narrow range costs little privacy per token but
flattens the distribution (tokens whose logits sit above ``b`` tie); a wide one keeps
the model's preferences and raises ``T = 2Δ/ε``. Quantiles of *all* logits put ``b`` below
the top logit at most steps of a real model (SmolLM2-135M: 57–60% of steps had two or more tokens
tied at ``b``), which erases the model's choice; the step-max rule puts ``b`` at or above the top
logit at a chosen share of public steps (``high_quantile``), so the ranking among the best tokens
survives the clipping.

Clipping relative to a public prior
-----------------------------------
InvisibleInk (Vinod, Pillutla & Thakurta, NeurIPS 2025) clips the *difference* between the logits
with the private text and the logits of a **public** context (the same prompt and the same released
tokens, without the private text), :func:`prior_log_weights`::

    u_w(x) = p_w + clip(s_w(x) − p_w, a, b)

**Theorem.** With ``p`` public, drawing ``w`` with ``P(w | x) ∝ exp(ε u_w(x) / (2Δ))``,
``Δ = b − a``, is ε-DP for any two inputs.
*Proof.* ``u_w(x) − u_w(x') = clip(s_w(x) − p_w) − clip(s_w(x') − p_w) ∈ [−Δ, Δ]`` because ``p_w``
is the same for both inputs; the rest is the proof above (numerator and normaliser each move by
at most ``e^{ε/2}``). ∎ The prior's fluent preferences cost nothing: ``p`` can span tens of logits
while ``Δ`` covers only what the private text changes. InvisibleInk's own accounting is for a batch
of private references (replace-one, sensitivity of an average); here one document is the unit and
every two documents are neighbours (local DP), so the range is ``Δ`` and the factor 2 stays (the
scores are not monotone). The prior is floored at ``max(p) − R`` with ``R = 1400Δ/ε − Δ``
(public), so that every log-weight stays above −700 and no allowed token underflows to
probability 0 from one input only.

**Public top-k⁺** (InvisibleInk's candidate set, :func:`public_top_k_plus`):
``K = {w : p_w >= p_(k) − Δ}``, ``p_(k)`` the k-th largest prior logit. It is computed from ``p``
alone, so restricting the draw to ``K`` is the exponential mechanism over a public range (ε-DP,
free). And it loses none of the private top k: for ``w ∉ K``,
``u_w <= p_w + b < p_(k) − Δ + b = p_(k) + a <= u_v`` for each of the ``k`` tokens ``v`` with the
largest prior, so ``k`` tokens beat ``w`` from every input. ∎ The known-bad variant, the top k of the
*private* scores (DP-GTR's ``top_k=50`` next to clipping), is refused (:func:`refuse_truncation`):
a token outside that set has probability 0 from one input and not from another.

Sampling and floating point
---------------------------
The log-weights ``ε (u_w − b) / (2Δ)`` lie in ``[−ε/2, 0]``: no score is exponentiated
raw, and for ``ε < 1400`` no weight underflows, so every allowed token keeps a positive
probability from every input. Two samplers, both fed only by uniforms from a
:class:`numpy.random.Generator` (:mod:`textdp._rng`; torch's global generator is never
used): ``inverse-cdf`` (one uniform per row, cumulative sums in float64) and ``gumbel``
(Gumbel-max, ``argmax(log w − log(−log U))``, one uniform per token). Both realise the law
up to float64 rounding (relative error of the order of ``|V| · 2^-53`` per probability);
the released value is a token id, not a real number, so no low-order bit is published.

References
----------
F. McSherry, K. Talwar. Mechanism design via differential privacy. FOCS 2007.
S. Utpala, S. Hooker, P.-Y. Chen. Locally differentially private document generation using
zero shot prompting. Findings of EMNLP 2023. S. Meisenbacher, M. Chevli, J. Vladika,
F. Matthes. DP-MLM: differentially private text rewriting using masked language models.
Findings of ACL 2024.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .._options import MAX_NEW_TOKENS
from .._validation import check_choice, check_epsilon, check_probability
from ..errors import ParameterError, require

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "BOUND_PROCEDURES",
    "MAX_NEW_TOKENS",
    "SAMPLERS",
    "UNIT_BOUNDS",
    "ClipBounds",
    "StreamingQuantiles",
    "clipped_log_weights",
    "exponential_law",
    "exponential_step",
    "per_token_epsilon",
    "prior_floor",
    "prior_law",
    "prior_log_weights",
    "public_top_k_plus",
    "quantile_bounds",
    "refuse_truncation",
    "sample_log_weights",
]

#: How the public clipping bounds were chosen.
BOUND_PROCEDURES = ("fixed", "public-quantiles", "public-step-max", "probability")
#: The two samplers of :func:`sample_log_weights`.
SAMPLERS = ("inverse-cdf", "gumbel")


def _torch() -> ModuleType:
    return require("torch", "generation")


@dataclass(frozen=True)
class ClipBounds:
    """Public clipping bounds ``[low, high]`` of the scores, and how they were chosen.

    Attributes
    ----------
    low, high : float
        ``a < b``; every score is clipped into ``[a, b]`` and ``Δ = b − a``.
    procedure : str
        ``fixed`` (given by the user), ``public-quantiles`` (:func:`quantile_bounds` on
        public text), ``public-step-max`` (upper bound from each public position's largest logit)
        or ``probability`` (scores are probabilities, ``[0, 1]``: ER-AE, AE-DP).
    source : str
        Public description of the procedure (e.g. the quantiles and the public text's name).

    >>> b = ClipBounds(-2.0, 6.0)
    >>> b.width, b.temperature(4.0), b.to_dict()["procedure"]
    (8.0, 4.0, 'fixed')
    """

    low: float
    high: float
    procedure: str = "fixed"
    source: str = "given by the user"

    def __post_init__(self) -> None:
        lo, hi = float(self.low), float(self.high)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ParameterError(f"clipping bounds must be finite numbers with low < high, got [{self.low}, {self.high}]")
        check_choice(self.procedure, "bound procedure", BOUND_PROCEDURES)
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    @property
    def width(self) -> float:
        """``Δ = high − low``, the sensitivity of a clipped score."""
        return self.high - self.low

    def temperature(self, epsilon: float) -> float:
        """The sampling temperature ``T = 2Δ/ε`` of an ε-DP step."""
        return 2.0 * self.width / check_epsilon(epsilon)

    def to_dict(self) -> dict[str, object]:
        """Public JSON form (written in every record)."""
        return {"low": self.low, "high": self.high, "width": self.width, "procedure": self.procedure,
                "source": self.source}


#: Scores that are probabilities (ER-AE, AE-DP): ``[0, 1]``, ``Δ = 1``.
UNIT_BOUNDS = ClipBounds(0.0, 1.0, "probability", "scores are token probabilities in [0, 1]")


def per_token_epsilon(temperature: float, bounds: ClipBounds) -> float:
    """The ε of one step at temperature ``T``: ``2Δ/T``.

    >>> per_token_epsilon(4.0, ClipBounds(-2.0, 6.0))
    4.0
    """
    t = float(temperature)
    if not (t > 0 and math.isfinite(t)):
        raise ParameterError(f"temperature must be a finite number > 0, got {temperature!r}")
    return 2.0 * bounds.width / t


def quantile_bounds(public_logits: npt.ArrayLike, *, low_quantile: float = 0.01, high_quantile: float = 0.99,
                    source: str = "") -> ClipBounds:
    """Bounds from quantiles of logits computed by the same model on **public** text.

    ``public_logits`` is any array of logits (all positions, all tokens) of public text;
    never pass logits of the private input (the bounds would then depend on it).

    >>> quantile_bounds(np.linspace(-10, 10, 2001), low_quantile=0.05, high_quantile=0.95).to_dict()["low"]
    -9.0
    """
    lo_q = check_probability(low_quantile, "low_quantile")
    hi_q = check_probability(high_quantile, "high_quantile")
    if lo_q >= hi_q:
        raise ParameterError("low_quantile must be below high_quantile")
    x = np.asarray(public_logits, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        raise ParameterError("need at least 2 finite public logits to choose bounds")
    lo, hi = np.quantile(x, [lo_q, hi_q])
    text = f"quantiles {lo_q:g} and {hi_q:g} of the model's logits on public text"
    return ClipBounds(float(lo), float(hi), "public-quantiles", f"{text} ({source})" if source else text)


def refuse_truncation(top_k: int | None = None, top_p: float | None = None) -> None:
    """Refuse top-k / top-p: the kept set would be computed from private logits.

    >>> refuse_truncation(top_k=50)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: top-k/top-p sampling is refused: the kept tokens are chosen from the private input's logits, so a token outside them has probability 0 from one input and not from another (no finite epsilon); textdp samples from the full vocabulary with clipped logits
    """
    if top_k is not None or top_p is not None:
        raise ParameterError(
            "top-k/top-p sampling is refused: the kept tokens are chosen from the private input's logits, so a token "
            "outside them has probability 0 from one input and not from another (no finite epsilon); textdp samples "
            "from the full vocabulary with clipped logits")


def clipped_log_weights(scores: Tensor, *, epsilon: float, bounds: ClipBounds,
                        allowed: Tensor | None = None) -> Tensor:
    """``ε (clip(s, a, b) − b) / (2Δ)`` in float64 (``-inf`` outside ``allowed``), a ``(B, V)`` tensor.

    ``allowed`` is a public ``(V,)`` or ``(B, V)`` bool mask (default: every token).

    >>> import torch
    >>> clipped_log_weights(torch.tensor([[9.0, -9.0, float("nan")]]), epsilon=2.0, bounds=ClipBounds(0.0, 1.0))
    tensor([[ 0., -1., -1.]], dtype=torch.float64)
    """
    torch = _torch()
    e = check_epsilon(epsilon)
    # one float64 copy, then in place (a fresh (B, V) float64 tensor per step costs more than the arithmetic)
    logw = torch.as_tensor(scores).to(torch.float64, copy=True)
    logw.nan_to_num_(nan=bounds.low, posinf=bounds.high, neginf=bounds.low)
    logw.clamp_(bounds.low, bounds.high).sub_(bounds.high).mul_(e / (2.0 * bounds.width))
    if allowed is not None:
        mask = torch.as_tensor(allowed, dtype=torch.bool).expand_as(logw)
        logw.masked_fill_(~mask, -math.inf)
    return logw


def sample_log_weights(log_weights: Tensor, rng: np.random.Generator | None = None, *, method: str = "inverse-cdf",
                       uniforms: Tensor | None = None) -> Tensor:
    """One draw per row with ``P(j) ∝ exp(log_weights[j])`` (``-inf``: never drawn); ``(B,)`` int64.

    Randomness: ``uniforms`` if given (``(B, 1)`` for inverse-CDF, ``(B, V)`` for Gumbel),
    else drawn from ``rng`` (:meth:`numpy.random.Generator.random`). A row with no finite
    weight gives index 0 (callers avoid it).

    >>> import torch
    >>> from textdp._rng import make_rng
    >>> lw = torch.tensor([[-math.inf, 0.0, -math.inf]])
    >>> sample_log_weights(lw, make_rng(0)).tolist(), sample_log_weights(lw, make_rng(0), method="gumbel").tolist()
    ([1], [1])
    """
    torch = _torch()
    check_choice(method, "sampler", SAMPLERS)
    lw = torch.as_tensor(log_weights).to(torch.float64)
    B, V = lw.shape
    if uniforms is None:
        if rng is None:
            raise ParameterError("sample_log_weights needs a generator or uniforms")
        uniforms = torch.from_numpy(rng.random((B, 1 if method == "inverse-cdf" else V)))
    u = torch.as_tensor(uniforms).to(torch.float64)
    if method == "gumbel":
        # argmax(log w + G) with G = -log(-log U) standard Gumbel; U = 0 gives -inf (never chosen)
        return torch.argmax(lw - torch.log(-torch.log(u)), dim=1)
    top = lw.amax(1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    cdf = lw.sub(top).exp_().cumsum_(1)  # weights in (0, 1] (0 exactly where log w = -inf), summed in place
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=V - 1)
    # a draw never lands on a zero weight (cdf flat there): when rounding at the top end would do so
    # (probability of the order of the float epsilon), the last index with a positive weight is taken
    below = torch.where(idx > 0, cdf.gather(1, (idx - 1).clamp_(min=0)), torch.zeros((), dtype=cdf.dtype))
    bad = cdf.gather(1, idx) <= below
    if bool(bad.any()):
        last = torch.searchsorted(cdf, cdf[:, -1:], right=False).clamp_(max=V - 1)
        idx = torch.where(bad, last, idx)
    return idx.squeeze(1)


def exponential_step(scores: Tensor, rng: np.random.Generator, *, epsilon: float, bounds: ClipBounds,
                     allowed: Tensor | None = None, method: str = "inverse-cdf") -> Tensor:
    """One ε-DP step for every row of ``scores`` ``(B, V)``: ``P(w) ∝ exp(ε clip(s_w) / (2Δ))``.

    See the module docstring for the theorem. ``allowed`` is a **public** mask.

    >>> import torch
    >>> from textdp._rng import make_rng
    >>> exponential_step(torch.tensor([[0.0, 50.0, 0.0]]), make_rng(0), epsilon=500.0,
    ...                  bounds=ClipBounds(0.0, 10.0)).tolist()
    [1]
    """
    return sample_log_weights(clipped_log_weights(scores, epsilon=epsilon, bounds=bounds, allowed=allowed), rng,
                              method=method)


def exponential_law(scores: np.ndarray, *, epsilon: float, bounds: ClipBounds,
                    allowed: np.ndarray | None = None) -> np.ndarray:
    """The exact law of :func:`exponential_step` for one row of scores (numpy; tests and audits).

    >>> exponential_law(np.array([5.0, -5.0]), epsilon=2.0, bounds=ClipBounds(0.0, 1.0)).round(4).tolist()
    [0.7311, 0.2689]
    """
    e = check_epsilon(epsilon)
    s = np.clip(np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=bounds.low), bounds.low, bounds.high)
    lw = e * (s - bounds.high) / (2.0 * bounds.width)
    if allowed is not None:
        lw = np.where(np.asarray(allowed, dtype=bool), lw, -np.inf)
    w = np.exp(lw - lw.max())
    return w / w.sum()


class StreamingQuantiles:
    """Quantiles of a stream of numbers in bounded memory: a fixed histogram, rounded outwards.

    Bins of width ``resolution`` over ``[lowest, highest]`` (two more for values outside it, with the
    exact minimum and maximum kept); memory is the histogram (``(highest − lowest) / resolution + 2``
    counts), whatever the number of values. :meth:`quantile` returns a bin edge: the lower edge of the
    bin holding the quantile (``side="down"``) or its upper edge (``side="up"``), so a lower bound is never
    above, and an upper bound never below, the exact quantile of the values seen.

    >>> q = StreamingQuantiles(resolution=0.5)
    >>> q.add(np.arange(100.0))
    >>> q.count, q.quantile(0.5, "down"), q.quantile(0.99, "up")
    (100, 49.0, 98.5)
    """

    def __init__(self, lowest: float = -512.0, highest: float = 512.0, resolution: float = 1 / 64) -> None:
        if not (math.isfinite(lowest) and math.isfinite(highest) and lowest < highest and resolution > 0):
            raise ParameterError("StreamingQuantiles needs finite lowest < highest and a resolution > 0")
        self.lowest, self.resolution = float(lowest), float(resolution)
        self.bins = math.ceil((highest - lowest) / resolution)
        self.counts = np.zeros(self.bins + 2, dtype=np.int64)
        self.minimum, self.maximum = math.inf, -math.inf

    @property
    def count(self) -> int:
        """How many finite values were added."""
        return int(self.counts.sum())

    #: values converted to float64 at a time (8 MiB): a text's full-vocabulary logits are never copied whole
    CHUNK = 1 << 20

    def add(self, values: npt.ArrayLike | Tensor) -> None:
        """Add every finite value of ``values`` (an array or a tensor of any shape; NaN and ±inf skipped).

        The values are binned :attr:`CHUNK` at a time (the counts, minimum and maximum are the same as at once).
        """
        torch = _torch()
        flat = torch.as_tensor(values).detach().reshape(-1)
        for start in range(0, flat.numel(), self.CHUNK):
            v = flat[start : start + self.CHUNK].to(torch.float64)
            v = v[torch.isfinite(v)]
            if v.numel() == 0:
                continue
            self.minimum = min(self.minimum, float(v.min()))
            self.maximum = max(self.maximum, float(v.max()))
            idx = v.sub_(self.lowest).div_(self.resolution).floor_().clamp_(-1, self.bins).to(torch.int64).add_(1)
            self.counts += torch.bincount(idx, minlength=self.bins + 2).numpy()

    def quantile(self, q: float, side: str) -> float:
        """The ``q`` quantile, rounded ``down`` (a bin's lower edge) or ``up`` (its upper edge)."""
        q = check_probability(q, "quantile", open_low=False, open_high=False)
        check_choice(side, "side", ("down", "up"))
        n = self.count
        if n == 0:
            raise ParameterError("no finite values to take a quantile of")
        rank = min(max(math.ceil(q * n), 1), n)  # the rank-th smallest value (1-based)
        b = int(np.searchsorted(np.cumsum(self.counts), rank))
        if b == 0:
            return self.minimum
        if b == self.bins + 1:
            return self.maximum
        edge = self.lowest + (b - 1 + (side == "up")) * self.resolution
        return min(max(edge, self.minimum), self.maximum) if side == "down" else max(min(edge, self.maximum),
                                                                                   self.minimum)


def prior_floor(epsilon: float, bounds: ClipBounds) -> float:
    """``R = max(1400Δ/ε − Δ, 0)``: how far below its maximum the public prior is floored.

    With the prior in ``[max − R, max]`` every log-weight of :func:`prior_log_weights` is at least
    ``−ε(R + Δ)/(2Δ) = −700``: no allowed token's weight underflows (module docstring).

    >>> prior_floor(2.0, ClipBounds(-2.0, 2.0))
    2796.0
    """
    return max(1400.0 * bounds.width / check_epsilon(epsilon) - bounds.width, 0.0)


def public_top_k_plus(prior: Tensor, k: int, width: float, allowed: Tensor | None = None) -> Tensor:
    """InvisibleInk's public candidate set: ``p_w >= p_(k) − width`` (``p_(k)``: the k-th largest allowed prior).

    ``prior`` is ``(B, V)`` **public** logits; returns a ``(B, V)`` bool mask (within ``allowed``).
    With ``width = Δ`` the set holds the ``k`` best tokens of the clipped private scores for every
    input (module docstring), and depends on public data only.

    >>> import torch
    >>> public_top_k_plus(torch.tensor([[5.0, 4.0, 1.5, 0.0]]), 1, 3.0).tolist()
    [[True, True, False, False]]
    """
    torch = _torch()
    p = torch.as_tensor(prior).to(torch.float64)
    if allowed is not None:
        p = p.masked_fill(~torch.as_tensor(allowed, dtype=torch.bool).expand_as(p), -math.inf)
    k = min(int(k), p.shape[1])
    kth = p.topk(k, dim=1).values[:, -1:]
    return p >= kth - float(width)


def prior_log_weights(scores: Tensor, prior: Tensor, *, epsilon: float, bounds: ClipBounds,
                      allowed: Tensor | None = None) -> Tensor:
    """``ε (u − max u) / (2Δ)`` with ``u = p' + clip(s − p', a, b)``, ``p'`` the prior floored at ``max − R``.

    ``scores`` are the logits with the private text, ``prior`` the **public** ones (same shape ``(B, V)``);
    ``allowed`` a public mask (``(V,)`` or ``(B, V)``, e.g. :func:`public_top_k_plus`). Theorem and floor:
    module docstring. float64, ``-inf`` outside ``allowed``.

    >>> import torch
    >>> prior_log_weights(torch.tensor([[9.0, 0.0]]), torch.tensor([[1.0, 0.0]]), epsilon=4.0,
    ...                   bounds=ClipBounds(-1.0, 1.0)).tolist()
    [[0.0, -2.0]]
    """
    torch = _torch()
    e = check_epsilon(epsilon)
    p = torch.as_tensor(prior).to(torch.float64, copy=True)
    p.nan_to_num_(nan=0.0, posinf=0.0, neginf=-math.inf)
    if allowed is not None:
        mask = torch.as_tensor(allowed, dtype=torch.bool).expand_as(p)
        top = p.masked_fill(~mask, -math.inf).amax(1, keepdim=True)
    else:
        mask, top = None, p.amax(1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    p = torch.maximum(p, top - prior_floor(e, bounds))
    d = torch.as_tensor(scores).to(torch.float64, copy=True)
    d.nan_to_num_(nan=bounds.low, posinf=bounds.high, neginf=bounds.low)
    u = d.sub_(p).clamp_(bounds.low, bounds.high).add_(p)
    if mask is not None:
        u.masked_fill_(~mask, -math.inf)
    best = u.amax(1, keepdim=True)
    best = torch.where(torch.isfinite(best), best, torch.zeros_like(best))
    return u.sub_(best).mul_(e / (2.0 * bounds.width))


def prior_law(scores: np.ndarray, prior: np.ndarray, *, epsilon: float, bounds: ClipBounds,
              allowed: np.ndarray | None = None) -> np.ndarray:
    """The exact law of a draw from :func:`prior_log_weights` for one row (numpy; tests and audits).

    >>> prior_law(np.array([9.0, 0.0]), np.array([1.0, 0.0]), epsilon=4.0, bounds=ClipBounds(-1.0, 1.0)).round(4)
    array([0.8808, 0.1192])
    """
    e = check_epsilon(epsilon)
    p = np.asarray(prior, dtype=np.float64)
    ok = np.ones(p.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    p = np.maximum(p, p[ok].max() - prior_floor(e, bounds))
    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=bounds.low)
    u = p + np.clip(s - p, bounds.low, bounds.high)
    lw = np.where(ok, e * u / (2.0 * bounds.width), -np.inf)
    w = np.exp(lw - lw.max())
    return w / w.sum()
