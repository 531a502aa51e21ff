"""Claims computed from public parameters only, never from the mechanism object under audit.

An auditor that reads its claim from ``mech.log_ratio_bound`` shares the attribute
(``epsilon_``) the sampler reads: a bug that inflates ε in both moves the claim with the noise and
is never caught. The functions here recompute each word-level mechanism's per-word claim from what
the case was *given*: ε, the public vocabulary (GloVe vectors) and the mechanism's public
parameters (TEM's β, Mahalanobis' λ), with their own arithmetic:

* metric DP (``cmp``, ``vickrey``, ``santext``, ``santext+``): ``ε·||e_a − e_b||₂``;
* ``tem``: ``ε·min(||e_a − e_b||₂, γ)`` with ``γ = (2/ε) ln((1 − β)(|V| − 1)/β)``
  (Carvalho et al., Algorithm 1 and Thm. 3);
* ``mahalanobis``: ``ε·||Σ_λ^{-1/2}(e_a − e_b)||₂`` with ``Σ_λ = λ Σ + (1 − λ) I`` and Σ the sample
  covariance of the vocabulary scaled to trace n (Xu et al. 2020, Def. 3);
* ``vickrey``: ``ε·||e_a − e_b||₂``, or ``ε·d_RM`` when it was given ``lambd`` (its noise is then
  the Mahalanobis noise; the threshold rule is post-processing);
* ε-DP per word (``custext``, ``custext+``, ``random``): ``ε``.

The exact claimed laws of the discrete ε-DP mechanisms, for the curve audit
(:mod:`textdp.audit.curve`), are recomputed here too: :func:`randomized_response_logp` (``random``,
from ε and |V|) and :func:`custext_logp` (``custext``/``custext+``, from ε, ``top_k`` and the public
grouping :func:`textdp.mechanisms.exponential.custext_groups` of the vocabulary).

>>> import numpy as np
>>> vec = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
>>> word_claim("cmp", 2.0, vec, 0, 1), word_claim("random", 2.0, vec, 0, 1)
(10.0, 2.0)
>>> round(word_claim("tem", 2.0, vec, 0, 1, beta=0.25), 4)  # gamma = ln(6) < d = 5
3.5835
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ParameterError

__all__ = [
    "METRIC_CLAIMS",
    "PURE_CLAIMS",
    "custext_logp",
    "log_normalize",
    "mahalanobis_inverse_root",
    "randomized_response_logp",
    "tem_threshold",
    "word_claim",
]

#: Mechanisms whose per-word claim is ``ε`` times a distance of the pair.
METRIC_CLAIMS = ("cmp", "vickrey", "santext", "santext+", "tem", "mahalanobis")
#: Mechanisms whose per-word claim is ``ε`` (pure ε-DP between the audited words).
PURE_CLAIMS = ("custext", "custext+", "random")

#: TEM's public default β (probability of leaving ``L_x``), as in the mechanism's signature.
TEM_BETA = 0.001
#: SanText+'s public default share of sensitive (least frequent) words, as in the mechanism's declaration.
SANTEXT_SENSITIVE_FRACTION = 0.9


def first_sensitive_row(vocab_size: int, sensitive_fraction: float = SANTEXT_SENSITIVE_FRACTION) -> int:
    """SanText+'s first sensitive row: the ``round(w V)`` least frequent rows (at least one) are sensitive.

    Recomputed from the public ``V`` and ``w`` (Yue et al. 2021, Section 4.3), never read from the mechanism.

    >>> first_sensitive_row(5000), first_sensitive_row(10, 0.25)
    (500, 8)
    """
    v = int(vocab_size)
    return v - max(1, round(float(sensitive_fraction) * v))
#: Mahalanobis' public default λ.
MAHALANOBIS_LAMBDA = 0.2
#: CusText's public default output-set size ``top_k``.
CUSTEXT_TOP_K = 20


def tem_threshold(epsilon: float, beta: float, vocab_size: int) -> float:
    """``γ = (2/ε) ln((1 − β)(|V| − 1)/β)`` (at least 0), recomputed here on purpose.

    >>> round(tem_threshold(2.0, 0.25, 4), 4)
    2.1972
    """
    if not (0.0 < beta < 1.0) or vocab_size < 2:
        raise ParameterError(f"TEM needs beta in (0, 1) and at least 2 words, got {beta!r}, {vocab_size!r}")
    return max(0.0, 2.0 / float(epsilon) * math.log((1.0 - beta) * (vocab_size - 1) / beta))


def mahalanobis_inverse_root(vectors: np.ndarray, lambd: float) -> np.ndarray:
    """``Σ_λ^{-1/2}`` of the public vocabulary (covariance scaled to trace n, mixed with I)."""
    v = np.asarray(vectors, dtype=np.float64)
    n = v.shape[1]
    cov = np.atleast_2d(np.cov(v, rowvar=False))
    tr = float(np.trace(cov))
    cov = cov * (n / tr) if tr > 0 else np.eye(n)
    w, q = np.linalg.eigh(lambd * cov + (1.0 - lambd) * np.eye(n))
    return np.asarray((q / np.sqrt(w)) @ q.T)


def word_claim(name: str, epsilon: float, vectors: np.ndarray, a: int, b: int, **params: Any) -> float:
    """The per-word privacy-loss claim of mechanism ``name`` for words ``a`` and ``b`` (rows of ``vectors``).

    ``params``: the public parameters the mechanism was built with (``beta`` for TEM, ``lambd`` for
    Mahalanobis and Vickrey; defaults as the mechanisms'). Nothing here reads a mechanism object.
    """
    eps = float(epsilon)
    if name in PURE_CLAIMS:
        return eps
    if name not in METRIC_CLAIMS:
        raise ParameterError(f"no independent claim for mechanism {name!r}")
    diff = np.asarray(vectors[a], dtype=np.float64) - np.asarray(vectors[b], dtype=np.float64)
    lambd = params.get("lambd", MAHALANOBIS_LAMBDA if name == "mahalanobis" else None)
    if name in ("mahalanobis", "vickrey") and lambd is not None:
        return eps * float(np.linalg.norm(diff @ mahalanobis_inverse_root(vectors, float(lambd))))
    d = float(np.linalg.norm(diff))
    if name == "tem":
        gamma = tem_threshold(eps, float(params.get("beta", TEM_BETA)), int(np.asarray(vectors).shape[0]))
        return eps * min(d, gamma)
    return eps * d


def syntf_logp(epsilon: float, vocab_size: int, doc_rows: np.ndarray, size: int = 1) -> np.ndarray:
    """``ln P(t | x)`` of one SynTF term (``variant="weights"``), from ε, |V|, the document's rows and N only.

    Unit weights on the document's distinct rows give ``x̃ = 1`` there, ``0`` elsewhere, and each of
    the N terms is drawn with ``P(t) ∝ exp(ε x̃_t / (2N))`` (Weggenmann & Kerschbaum 2018; the
    multinomial factorisation in :mod:`textdp.mechanisms.syntf`).

    >>> np.exp(syntf_logp(2 * math.log(3.0), 3, np.array([0]))).round(4).tolist()
    [0.6, 0.2, 0.2]
    """
    x = np.zeros(int(vocab_size))
    x[np.asarray(doc_rows, dtype=np.int64)] = 1.0
    return log_normalize(float(epsilon) * x / (2.0 * int(size)))


def randomized_response_logp(epsilon: float, vocab_size: int, x: int) -> np.ndarray:
    """``ln P(· | x)`` of |V|-ary randomised response at ε (``random``), from ε and |V| only.

    With ``r = |V|/(|V| + e^ε − 1)``: ``P(x | x) = 1 − r + r/|V| = e^ε/(|V| + e^ε − 1)`` and
    ``P(y | x) = r/|V| = 1/(|V| + e^ε − 1)`` for ``y ≠ x``.

    >>> np.exp(randomized_response_logp(math.log(3.0), 3, 0)).round(4).tolist()
    [0.6, 0.2, 0.2]
    """
    v = int(vocab_size)
    if v < 2 or not 0 <= int(x) < v:
        raise ParameterError(f"randomised response needs at least 2 words and a row in range, got {v}, {x}")
    out = np.full(v, -math.log(v + math.expm1(float(epsilon))))
    out[int(x)] += float(epsilon)
    return out


def custext_logp(vectors: np.ndarray, epsilon: float, top_k: int, rows: tuple[int, ...]) -> np.ndarray:
    """``ln P(· | x)`` of CusText for each ``x`` of ``rows``: ``(len(rows), |V|)``, ``-inf`` outside x's output set.

    The output sets are the public partition :func:`~textdp.mechanisms.exponential.custext_groups`
    of the vocabulary (a function of the vectors and ``top_k`` only); inside the set ``G`` of ``x``
    the weights are ``exp((ε/2) u(x, y))`` with ``u = −(d − min_G d(x, ·))/(max_G d(x, ·) − min_G d(x, ·))``
    (Chen et al. 2023, Euclidean ``d``), normalised here in log space.

    >>> lp = custext_logp(np.array([[0.0], [1.0], [10.0], [10.5]]), 2.0, 2, (0, 1))
    >>> np.exp(lp).round(4).tolist()
    [[0.7311, 0.2689, 0.0, 0.0], [0.2689, 0.7311, 0.0, 0.0]]
    """
    from ..mechanisms.exponential import custext_groups

    v = np.asarray(vectors, dtype=np.float64)
    groups = custext_groups(v, int(top_k))
    out = np.full((len(rows), v.shape[0]), -np.inf)
    for i, x in enumerate(rows):
        members = np.flatnonzero(groups == groups[x])
        d = np.linalg.norm(v[members] - v[x], axis=1)
        span = float(d.max() - d.min())
        out[i, members] = log_normalize(-0.5 * float(epsilon) * (d - d.min()) / (span if span > 0 else 1.0))
    return out


def log_normalize(scores: np.ndarray) -> np.ndarray:
    """``scores − ln Σ exp(scores)``: log-probabilities of the law ``∝ exp(scores)`` (stable in log space).

    >>> np.exp(log_normalize(np.log(np.array([1.0, 3.0])))).round(12).tolist()
    [0.25, 0.75]
    """
    s = np.asarray(scores, dtype=np.float64)
    m = float(s.max())
    return np.asarray(s - (m + math.log(float(np.exp(s - m).sum()))))
