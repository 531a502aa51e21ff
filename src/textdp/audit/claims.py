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
* ε-DP per word (``custext``, ``custext+``, ``random``): ``ε``.

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

__all__ = ["METRIC_CLAIMS", "PURE_CLAIMS", "mahalanobis_inverse_root", "tem_threshold", "word_claim"]

#: Mechanisms whose per-word claim is ``ε`` times a distance of the pair.
METRIC_CLAIMS = ("cmp", "vickrey", "santext", "santext+", "tem", "mahalanobis")
#: Mechanisms whose per-word claim is ``ε`` (pure ε-DP between the audited words).
PURE_CLAIMS = ("custext", "custext+", "random")

#: TEM's public default β (probability of leaving ``L_x``), as in the mechanism's signature.
TEM_BETA = 0.001
#: Mahalanobis' public default λ.
MAHALANOBIS_LAMBDA = 0.2


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
    Mahalanobis; defaults as the mechanisms'). Nothing here reads a mechanism object.
    """
    eps = float(epsilon)
    if name in PURE_CLAIMS:
        return eps
    if name not in METRIC_CLAIMS:
        raise ParameterError(f"no independent claim for mechanism {name!r}")
    diff = np.asarray(vectors[a], dtype=np.float64) - np.asarray(vectors[b], dtype=np.float64)
    if name == "mahalanobis":
        lam = float(params.get("lambd", MAHALANOBIS_LAMBDA))
        return eps * float(np.linalg.norm(diff @ mahalanobis_inverse_root(vectors, lam)))
    d = float(np.linalg.norm(diff))
    if name == "tem":
        gamma = tem_threshold(eps, float(params.get("beta", TEM_BETA)), int(np.asarray(vectors).shape[0]))
        return eps * min(d, gamma)
    return eps * d
