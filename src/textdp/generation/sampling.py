r"""One generation step of each mechanism, vectorised over a batch (torch), and their exact laws.

Every step function takes ``logp``, a ``(B, V)`` float tensor of log-probabilities over
the output alphabet (``-inf`` for tokens that may never be emitted: pad, start, unk) and a
:class:`numpy.random.Generator` (the only source of randomness: a few uniforms per row,
drawn with :func:`numpy.random.Generator.random`), and returns ``(B,)`` int64 token ids.
Both steps run on the one decoding core (:mod:`textdp.generation.decoding`): their scores
are token probabilities ``p ∈ [0, 1]``, public bounds ``[0, 1]`` (``Δ = 1``,
:data:`~textdp.generation.decoding.UNIT_BOUNDS`), so every exponential-mechanism draw is
:func:`~textdp.generation.decoding.sample_log_weights` over log-weights ``ε p / 2`` (inverse
CDF in float64, the row's largest log-weight subtracted, no raw score exponentiated).

* :func:`two_set_step` — textdp's two-set exponential mechanism (see
  :mod:`textdp.generation.bounds` for the law and its bound);
* :func:`em_step` — AE-DP's exponential mechanism over the whole alphabet;
* :func:`two_set_distribution` / :func:`em_distribution` — the exact output law of one
  step for a given ``p``, by enumeration (numpy; for tests and audits on toy alphabets).
"""

from __future__ import annotations

import itertools
import math
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError, require
from .decoding import UNIT_BOUNDS, clipped_log_weights, sample_log_weights

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["em_distribution", "em_step", "torch_module", "two_set_distribution", "two_set_step"]


def torch_module() -> ModuleType:
    """The ``torch`` module, or :class:`~textdp.errors.MissingDependencyError` naming the ``[generation]`` extra."""
    return require("torch", "generation")


def _uniforms(rng: np.random.Generator, rows: int, cols: int) -> Tensor:
    torch = torch_module()
    return torch.from_numpy(rng.random((rows, cols)))


def _inverse_cdf(weights: Tensor, u: Tensor) -> Tensor:
    """Row-wise draw from unnormalised non-negative ``weights`` with uniforms ``u`` ``(B, m)``.

    A draw never lands on a zero weight: when rounding at the top end of the cumulative sum
    would do so (probability of the order of the float epsilon), the last index with a
    positive weight is taken instead.
    """
    torch = torch_module()
    cdf = torch.cumsum(weights, dim=1)
    idx = torch.searchsorted(cdf, u.to(cdf.dtype) * cdf[:, -1:], right=True).clamp_(max=weights.shape[1] - 1)
    bad = weights.gather(1, idx) <= 0
    if bool(bad.any()):
        positions = torch.arange(weights.shape[1]).expand_as(weights)
        last = torch.where(weights > 0, positions, torch.zeros_like(positions)).amax(1, keepdim=True)
        idx = torch.where(bad, last.expand_as(idx), idx)
    return idx


def two_set_step(
    logp: Tensor, rng: np.random.Generator, *, epsilon_set: float, epsilon_word: float, k: int = 5,
    allowed: Tensor | None = None,
) -> Tensor:
    """One step of the two-set exponential mechanism for every row of ``logp``.

    1. ``L``: ``k`` i.i.d. draws from ``p = exp(logp)`` (a multiset, the authors' variant);
    2. ``S = V \\ distinct(L)`` (tokens with ``p = 0`` because ``logp = -inf`` are never in ``S``);
    3. ``u_L = mass(L) / (mass(L) + mass(S))`` (duplicates counted), ``u_S = 1 − u_L``;
       choose ``L`` with probability ``exp(ε_set u_L / 2) / (exp(ε_set u_L / 2) + exp(ε_set u_S / 2))``
       ``= sigmoid(ε_set (u_L − 1/2))``;
    4. inside ``L``: entry ``j`` with probability ``∝ exp(ε_word p_{L_j} / 2)``; inside ``S``:
       word ``w`` with probability ``∝ exp(ε_word p_w / 2)``.

    Parameters
    ----------
    logp : torch.Tensor
        ``(B, V)`` log-probabilities; ``-inf`` marks tokens never emitted.
    rng : numpy.random.Generator
        Randomness (``k + 2`` uniforms per row).
    epsilon_set, epsilon_word : float
        The two counted budgets (``epsilon_word`` may be 0: uniform inside the set).
    k : int
        Lexical-set draws.
    allowed : torch.Tensor, optional
        ``(V,)`` or ``(B, V)`` bool: the output alphabet (default: the tokens with finite
        ``logp``). Allowed tokens with ``p = 0`` can still be drawn from ``S``.

    Returns
    -------
    torch.Tensor
        ``(B,)`` int64 token ids. If ``S`` holds no allowed token (an alphabet of at most
        ``k`` tokens) the lexical set is used.

    Examples
    --------
    >>> import torch
    >>> from textdp._rng import make_rng
    >>> logp = torch.log(torch.tensor([[0.7, 0.2, 0.1, 0.0]]).repeat(4, 1))
    >>> two_set_step(logp, make_rng(0), epsilon_set=9.0, epsilon_word=1.0).shape
    torch.Size([4])
    """
    torch = torch_module()
    k = check_positive_int(k, "k")
    e_set = check_epsilon(epsilon_set, "epsilon_set")
    e_word = float(epsilon_word)
    if not (e_word >= 0 and math.isfinite(e_word)):
        raise ParameterError(f"epsilon_word must be a finite number >= 0, got {epsilon_word!r}")
    B = logp.shape[0]
    u = _uniforms(rng, B, k + 2)
    allowed = torch.isfinite(logp) if allowed is None else torch.as_tensor(allowed, dtype=torch.bool).expand(B, -1)
    # 1. lexical multiset: k draws from p (inverse CDF). Its numerical precision does not matter for
    #    privacy: the per-step bound holds however L is formed. float32 is enough here.
    p32 = torch.exp(logp.float())  # stable: logp <= 0
    L = _inverse_cdf(p32, u[:, :k].contiguous())
    pL = p32.gather(1, L).double()
    # 2.-3. utilities: duplicate-counted mass of L against the mass of S (any value in [0, 1] is safe)
    Ls, _ = torch.sort(L, dim=1)
    first = torch.ones_like(Ls, dtype=torch.bool)
    first[:, 1:] = Ls[:, 1:] != Ls[:, :-1]
    mass_distinct = (p32.gather(1, Ls).double() * first).sum(1)
    mass_multi = pL.sum(1)
    mass_s = (p32.sum(1, dtype=torch.float64) - mass_distinct).clamp_(min=0.0)
    u_l = mass_multi / (mass_multi + mass_s)
    choose_l = u[:, k] < torch.sigmoid(e_set * (u_l - 0.5))
    # 4. the word inside the chosen set: the core's exponential mechanism with scores p in [0, 1] (Δ = 1),
    #    log-weights b p = ε_word p / 2, inside L (its k entries, duplicates kept) or inside S
    b = e_word / 2.0
    out = torch.empty(B, dtype=torch.int64)
    j = sample_log_weights(b * pL, uniforms=u[:, k + 1 :])
    out[:] = L.gather(1, j[:, None]).squeeze(1)
    rows = torch.nonzero(~choose_l).squeeze(1)
    if rows.numel():
        in_s = allowed[rows].clone()
        in_s.scatter_(1, L[rows], False)
        lw_s = torch.where(in_s, b * torch.exp(logp[rows].double()), torch.full((), -math.inf, dtype=torch.float64))
        drawn = sample_log_weights(lw_s, uniforms=u[rows, k + 1 :])
        nonempty = in_s.any(1)
        out[rows[nonempty]] = drawn[nonempty]
    return out


def em_step(logp: Tensor, rng: np.random.Generator, *, epsilon: float) -> Tensor:
    """AE-DP: one exponential mechanism over the whole alphabet, ``P(w) ∝ exp(ε p_w / 2)`` (``p_w ∈ [0, 1]``).

    >>> import torch
    >>> from textdp._rng import make_rng
    >>> logp = torch.log(torch.tensor([[0.0, 1.0, 0.0]]))
    >>> em_step(logp, make_rng(0), epsilon=200.0).tolist()
    [1]
    """
    torch = torch_module()
    e = check_epsilon(epsilon)
    p = torch.exp(logp.double())  # 0 where logp = -inf
    # the core subtracts the row's largest log-weight (not the bound): with exp(b (p - 1)) every weight
    # underflows once b (1 - max p) > ~745 (e.g. epsilon = 1e6, "greedy")
    return sample_log_weights(clipped_log_weights(p, epsilon=e, bounds=UNIT_BOUNDS, allowed=torch.isfinite(logp)),
                              rng)


def _check_p(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size < 2 or np.any(p < 0) or not math.isclose(float(p.sum()), 1.0, rel_tol=1e-9):
        raise ParameterError("p must be a 1-d probability vector of at least 2 entries")
    return p


def two_set_distribution(
    p: np.ndarray, *, epsilon_set: float, epsilon_word: float, k: int = 5, allowed: np.ndarray | None = None
) -> np.ndarray:
    """Exact output law of :func:`two_set_step` for one row with probabilities ``p``, by enumeration.

    Enumerates all ``|V|^k`` ordered draws of the lexical multiset (use a toy alphabet).
    ``allowed`` marks the emittable tokens (default: all).

    >>> q = two_set_distribution(np.array([0.5, 0.3, 0.2]), epsilon_set=2.0, epsilon_word=0.5, k=2)
    >>> round(float(q.sum()), 12)
    1.0
    """
    p = _check_p(p)
    V = p.size
    ok = np.ones(V, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if np.any(p[~ok] > 0):
        raise ParameterError("tokens that are not allowed must have probability 0")
    if V**k > 5_000_000:
        raise ParameterError(f"|V|^k = {V ** k} draws is too many to enumerate; use a toy alphabet")
    b = float(epsilon_word) / 2.0
    out = np.zeros(V)
    support = np.flatnonzero(p > 0)
    for seq in itertools.product(support.tolist(), repeat=k):
        idx = np.asarray(seq)
        prob = float(np.prod(p[idx]))
        distinct = np.unique(idx)
        mass_l = float(p[idx].sum())
        mass_s = max(float(p.sum() - p[distinct].sum()), 0.0)
        u_l = mass_l / (mass_l + mass_s)
        p_l = 1.0 / (1.0 + math.exp(-float(epsilon_set) * (u_l - 0.5)))
        wl = np.exp(b * (p[idx] - 1.0))
        np.add.at(out, idx, prob * p_l * wl / wl.sum())
        in_s = ok.copy()
        in_s[distinct] = False
        if in_s.any():
            ws = np.where(in_s, np.exp(b * (p - 1.0)), 0.0)
            out += prob * (1.0 - p_l) * ws / ws.sum()
    return out


def em_distribution(p: np.ndarray, *, epsilon: float, allowed: np.ndarray | None = None) -> np.ndarray:
    """Exact law of :func:`em_step`: ``softmax(ε p / 2)`` over the allowed tokens.

    >>> em_distribution(np.array([1.0, 0.0]), epsilon=2.0).round(4).tolist()
    [0.7311, 0.2689]
    """
    p = _check_p(p)
    ok = np.ones(p.size, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    s = np.where(ok, check_epsilon(epsilon) * p / 2.0, -np.inf)
    w = np.exp(s - s.max())
    return w / w.sum()
