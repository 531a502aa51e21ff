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
grouping of the vocabulary, recomputed by the audit's own :func:`custext_output_sets`; stop words come from
the audit's own copy of the public list, :mod:`textdp.audit.public_lists`).

Each word-level mechanism's audit case is declared here, by decorator, on its claim function
(:func:`word_claim_case`): the case's default ε, its description, its exact law where known
(``tables``), its noise transform for the noise-then-decode mechanisms (``noise``) and how the
default pair is chosen. :mod:`textdp.audit.word_level` builds the cases from :data:`WORD_CLAIMS`
alone: no code there or here chooses behaviour by comparing a mechanism's name.

>>> import numpy as np
>>> vec = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
>>> word_claim("cmp", 2.0, vec, 0, 1), word_claim("random", 2.0, vec, 0, 1)
(10.0, 2.0)
>>> round(word_claim("tem", 2.0, vec, 0, 1, beta=0.25), 4)  # gamma = ln(6) < d = 5
3.5835
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import SupportsFloat, SupportsInt

import numpy as np

from ..errors import ParameterError
from .public_lists import audit_stop_words

__all__ = [
    "WORD_CLAIMS",
    "WordClaim",
    "as_float",
    "as_int",
    "custext_logp",
    "custext_output_sets",
    "log_normalize",
    "mahalanobis_inverse_root",
    "randomized_response_logp",
    "tem_threshold",
    "word_claim",
    "word_claim_case",
]

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
#: Vickrey's public default threshold ``t``.
VICKREY_T = 0.5


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


#: ``(epsilon, vectors, a, b, **params) -> (ln P(·|a), ln P(·|b), law)``: a claimed law's two tables and its name
LawTables = Callable[..., tuple[np.ndarray, np.ndarray, str]]
#: ``(vectors, **params) -> T`` (``None``: the identity): the claimed noise is ``∝ exp(−ε ||T z||)``
NoiseTransform = Callable[..., np.ndarray | None]


@dataclass(frozen=True)
class WordClaim:
    """The audit declaration of one word-level mechanism, from public parameters only.

    Attributes
    ----------
    name : str
        The audit case's name (the mechanism's registered name).
    default_epsilon : float
        The case's ε when none is given: it puts the claim near
        :data:`textdp.audit.word_cases.TARGET_LOSS` for the chosen pair.
    description : str
        One line for ``textdp audit --help``.
    loss : callable
        ``loss(epsilon, vectors, a, b, **params) -> float``: the per-word claim for rows ``a``, ``b``.
    tables : callable, optional
        The claimed discrete law of the released word (:data:`LawTables`), where it is known exactly.
    noise : callable, optional
        For the noise-then-decode mechanisms: the claimed noise's transform (:data:`NoiseTransform`).
    threshold : bool
        The noisy vector is decoded by Vickrey's threshold rule (public ``t``), not the nearest word.
    pair : str
        How the default pair is chosen: ``closest`` (claim nearest the target), ``output-set`` (two
        words of one CusText output set) or ``sensitive`` (two SanText+ sensitive words).
    stop_words : bool
        The mechanism releases stop words unchanged, so the case keeps its ``stop_words``.
    refuses : tuple of (str, str)
        Mechanism parameters the case refuses, with the one-line reason.
    """

    name: str
    default_epsilon: float
    description: str
    loss: Callable[..., float]
    tables: LawTables | None = None
    noise: NoiseTransform | None = None
    threshold: bool = False
    pair: str = "closest"
    stop_words: bool = False
    refuses: tuple[tuple[str, str], ...] = ()


_WORD_CLAIMS: dict[str, WordClaim] = {}
#: every word-level audit case's declaration, by name (filled by :func:`word_claim_case`)
WORD_CLAIMS: Mapping[str, WordClaim] = MappingProxyType(_WORD_CLAIMS)


def word_claim_case(name: str, *, default_epsilon: float, description: str, tables: LawTables | None = None,
                    noise: NoiseTransform | None = None, threshold: bool = False, pair: str = "closest",
                    stop_words: bool = False,
                    refuses: tuple[tuple[str, str], ...] = ()) -> Callable[[Callable[..., float]], Callable[..., float]]:
    """Decorator: declare the claim function below as the audit case ``name`` (see :class:`WordClaim`).

    Decorators stack: one claim function serves every mechanism whose claim it is.

    >>> @word_claim_case("doc-example", default_epsilon=1.0, description="an example")
    ... def half(epsilon, vectors, a, b, **params):
    ...     return epsilon / 2
    >>> word_claim("doc-example", 3.0, np.zeros((2, 1)), 0, 1)
    1.5
    >>> del _WORD_CLAIMS["doc-example"]
    """
    if pair not in ("closest", "output-set", "sensitive"):
        raise ParameterError(f"{name}: pair must be closest, output-set or sensitive, got {pair!r}")

    def register(loss: Callable[..., float]) -> Callable[..., float]:
        if name in _WORD_CLAIMS:
            raise ParameterError(f"a word-level claim named {name!r} is already declared")
        _WORD_CLAIMS[name] = WordClaim(name, float(default_epsilon), description, loss, tables, noise, threshold,
                                       pair, stop_words, refuses)
        return loss

    return register


def word_claim_of(name: str) -> WordClaim:
    """The :class:`WordClaim` of ``name`` (one-line :class:`ParameterError` otherwise)."""
    spec = _WORD_CLAIMS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ParameterError(f"no independent claim for mechanism {name!r}; choose one of: {', '.join(_WORD_CLAIMS)}")
    return spec


def word_claim(name: str, epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """The per-word privacy-loss claim of mechanism ``name`` for words ``a`` and ``b`` (rows of ``vectors``).

    ``params``: the public parameters the mechanism was built with (``beta`` for TEM, ``lambd`` for
    Mahalanobis and Vickrey; defaults as the mechanisms'). Nothing here reads a mechanism object.
    """
    return float(word_claim_of(name).loss(float(epsilon), vectors, a, b, **params))


def as_float(value: object, key: str) -> float:
    """A public parameter's value as a float (one-line error if it is not a number).

    >>> as_float("0.5", "beta"), as_float(2, "beta")
    (0.5, 2.0)
    """
    if not isinstance(value, str | SupportsFloat):
        raise ParameterError(f"{key} must be a number, got {value!r}")
    return float(value)


def as_int(value: object, key: str) -> int:
    """A public parameter's value as an int (one-line error if it is not a number)."""
    if not isinstance(value, str | SupportsInt):
        raise ParameterError(f"{key} must be a whole number, got {value!r}")
    return int(value)


def _diff(vectors: np.ndarray, a: int, b: int) -> np.ndarray:
    return np.asarray(vectors[a], dtype=np.float64) - np.asarray(vectors[b], dtype=np.float64)


# -- the claimed laws (exact tables over the vocabulary, or the noise transform) --------------------------------

def exponential_tables(epsilon: float, vectors: np.ndarray, a: int, b: int, *, cap: float = math.inf,
                       first: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """The exponential mechanism ``P(y | x) ∝ exp(−(ε/2) min(||e_x − e_y||, cap))`` over rows ``first, ...``.

    >>> la, lb, law = exponential_tables(2.0, np.array([[0.0], [1.0]]), 0, 1)
    >>> np.exp(la).round(4).tolist(), law
    ([0.7311, 0.2689], 'the claimed score table (epsilon=2)')
    """
    eps = float(epsilon)
    v = np.asarray(vectors, dtype=np.float64)

    def logp(x: int) -> np.ndarray:
        scores = -0.5 * eps * np.minimum(np.linalg.norm(v - v[x], axis=1), cap)
        scores[:first] = -np.inf
        return log_normalize(scores)

    law = f"the claimed score table (epsilon={eps:g}" + (f", cap {cap:.4g})" if math.isfinite(cap) else ")")
    return logp(a), logp(b), law


def _santext_tables(epsilon: float, vectors: np.ndarray, a: int, b: int,
                    **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    return exponential_tables(epsilon, vectors, a, b)


def _tem_tables(epsilon: float, vectors: np.ndarray, a: int, b: int,
                **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    cap = tem_threshold(epsilon, as_float(params.get("beta", TEM_BETA), "beta"), np.asarray(vectors).shape[0])
    return exponential_tables(epsilon, vectors, a, b, cap=cap)


def _santext_plus_tables(epsilon: float, vectors: np.ndarray, a: int, b: int,
                         **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    fraction = as_float(params.get("sensitive_fraction", SANTEXT_SENSITIVE_FRACTION), "sensitive_fraction")
    first = first_sensitive_row(np.asarray(vectors).shape[0], fraction)
    if min(a, b) < first:
        raise ParameterError("santext+: the curve audit takes two sensitive words (the least frequent rows); "
                             "a non-sensitive word is released verbatim with probability 1 - p")
    return exponential_tables(epsilon, vectors, a, b, first=first)


def _randomized_response_tables(epsilon: float, vectors: np.ndarray, a: int, b: int,
                                **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    v = np.asarray(vectors).shape[0]
    return (randomized_response_logp(epsilon, v, a), randomized_response_logp(epsilon, v, b),
            f"|V|-ary randomised response (epsilon={float(epsilon):g}, |V|={v})")


def _custext_tables(epsilon: float, vectors: np.ndarray, a: int, b: int,
                    **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    top_k = as_int(params.get("top_k", CUSTEXT_TOP_K), "top_k")
    la, lb = custext_logp(vectors, epsilon, top_k, (a, b))
    return la, lb, f"CusText's law (epsilon={float(epsilon):g}, top_k={top_k}, output sets from the vocabulary)"


def _custext_plus_tables(epsilon: float, vectors: np.ndarray, a: int, b: int, *, words: tuple[str, str] = ("", ""),
                         **params: object) -> tuple[np.ndarray, np.ndarray, str]:
    stops = audit_stop_words(params.get("stop_words", "english"))
    if words[0] in stops or words[1] in stops:  # CusText+ releases stop words unchanged
        raise ParameterError("custext+: stop words are released unchanged (not protected); audit two other words")
    return _custext_tables(epsilon, vectors, a, b, **params)


def _identity(vectors: np.ndarray, **params: object) -> np.ndarray | None:
    return None


def _mahalanobis_transform(vectors: np.ndarray, **params: object) -> np.ndarray | None:
    return mahalanobis_inverse_root(vectors, as_float(params.get("lambd", MAHALANOBIS_LAMBDA), "lambd"))


def _vickrey_transform(vectors: np.ndarray, **params: object) -> np.ndarray | None:
    lambd = params.get("lambd")  # Vickrey's noise is CMP's, or Mahalanobis' when it was given lambd
    return None if lambd is None else mahalanobis_inverse_root(vectors, as_float(lambd, "lambd"))


# -- the claims, each with the cases it serves ------------------------------------------------------------------

@word_claim_case("santext+", default_epsilon=2.0, tables=_santext_plus_tables, pair="sensitive",
                 description="SanText+, two sensitive words (claim epsilon*d; default epsilon 2)")
@word_claim_case("santext", default_epsilon=2.0, tables=_santext_tables,
                 description="SanText exponential mechanism (claim epsilon*d; default epsilon 2)")
@word_claim_case("cmp", default_epsilon=10.0, noise=_identity,
                 description="CMP (Laplace noise + nearest word), two GloVe words (claim epsilon*d; default epsilon 10)")
def euclidean_claim(epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """Metric DP in the Euclidean distance: ``ε·||e_a − e_b||₂``."""
    return float(epsilon) * float(np.linalg.norm(_diff(vectors, a, b)))


@word_claim_case("mahalanobis", default_epsilon=10.0, noise=_mahalanobis_transform,
                 description="Mahalanobis noise + nearest word (claim epsilon*d_RM; default epsilon 10)")
def mahalanobis_claim(epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """``ε·||Σ_λ^{-1/2}(e_a − e_b)||₂`` (λ: ``lambd``, default :data:`MAHALANOBIS_LAMBDA`)."""
    root = _mahalanobis_transform(vectors, **params)
    return float(epsilon) * float(np.linalg.norm(_diff(vectors, a, b) @ root))


@word_claim_case("vickrey", default_epsilon=10.0, noise=_vickrey_transform, threshold=True,
                 description="Vickrey (first/second nearest word of CMP's noisy vector; claim epsilon*d; "
                             "default epsilon 10)")
def vickrey_claim(epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """``ε·d``, or ``ε·d_RM`` when given ``lambd`` (its noise is then Mahalanobis'; the threshold rule is post-processing)."""
    if params.get("lambd") is None:
        return euclidean_claim(epsilon, vectors, a, b)
    return mahalanobis_claim(epsilon, vectors, a, b, **params)


@word_claim_case("tem", default_epsilon=10.0, tables=_tem_tables,  # gamma 3.1 < most distances: truncation decides
                 description="truncated exponential mechanism (claim epsilon*min(d, gamma); default epsilon 10, "
                             "where gamma = 3.1 lies below most distances)")
def tem_claim(epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """``ε·min(d, γ)`` with ``γ`` from ``beta`` (default :data:`TEM_BETA`) and |V| (Carvalho et al., Thm. 3)."""
    gamma = tem_threshold(float(epsilon), as_float(params.get("beta", TEM_BETA), "beta"), int(np.asarray(vectors).shape[0]))
    return float(epsilon) * min(float(np.linalg.norm(_diff(vectors, a, b))), gamma)


@word_claim_case("random", default_epsilon=3.0, tables=_randomized_response_tables,
                 refuses=(("rate", "audit it at an epsilon (--epsilon; its rate follows, "
                                   "r = |V|/(|V| + e^epsilon - 1)), not at a rate"),),
                 description="uniform random replacement, |V|-ary randomised response (claim epsilon; default 3)")
@word_claim_case("custext+", default_epsilon=3.0, tables=_custext_plus_tables, pair="output-set", stop_words=True,
                 description="CusText+, two non-stop words of one output set (claim epsilon; default 3)")
@word_claim_case("custext", default_epsilon=3.0, tables=_custext_tables, pair="output-set",
                 description="CusText, two words of one output set (claim epsilon; default 3)")
def pure_claim(epsilon: float, vectors: np.ndarray, a: int, b: int, **params: object) -> float:
    """Pure ε-DP between the audited words: ``ε``."""
    return float(epsilon)


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


def custext_output_sets(vectors: np.ndarray, top_k: int) -> np.ndarray:
    """CusText's output sets, recomputed by the audit from the public vectors and ``top_k`` (Chen et al. 2023).

    The paper's mapping function, written again in plain float64 (no blocking, no float32 screen):
    rows are visited in order; the first row not yet assigned takes itself and its ``top_k − 1``
    nearest unassigned rows (Euclidean distance, ties to the lower row); a remainder of fewer than
    ``top_k`` rows joins the last set. Returns the set id of every row, in creation order. It shares
    no code with the mechanism's grouping (``tests/test_audit_independent.py`` compares the two and
    plants an error in the library's).

    >>> custext_output_sets(np.array([[0.0], [10.0], [0.1], [10.2], [0.3]]), 2).tolist()
    [0, 1, 0, 1, 1]
    """
    v = np.asarray(vectors, dtype=np.float64)
    n, k = v.shape[0], int(top_k)
    if k < 1 or n < k:
        raise ParameterError(f"CusText needs 1 <= top_k <= |V| (top_k={k}, |V|={n})")
    group = np.full(n, -1, dtype=np.int64)
    made = 0
    for x in range(n):
        if group[x] >= 0:
            continue
        free = np.flatnonzero(group < 0)
        if free.size < k:
            group[free] = made - 1
            break
        d = np.sqrt(((v[free] - v[x]) ** 2).sum(axis=1))
        group[free[np.lexsort((free, d))[:k]]] = made
        made += 1
    return group


def custext_logp(vectors: np.ndarray, epsilon: float, top_k: int, rows: tuple[int, ...]) -> np.ndarray:
    """``ln P(· | x)`` of CusText for each ``x`` of ``rows``: ``(len(rows), |V|)``, ``-inf`` outside x's output set.

    The output sets are the public partition of the vocabulary (:func:`custext_output_sets`, the
    audit's own code: a function of the vectors and ``top_k`` only); inside the set ``G`` of ``x``
    the weights are ``exp((ε/2) u(x, y))`` with ``u = −(d − min_G d(x, ·))/(max_G d(x, ·) − min_G d(x, ·))``
    (Chen et al. 2023, Euclidean ``d``), normalised here in log space.

    >>> lp = custext_logp(np.array([[0.0], [1.0], [10.0], [10.5]]), 2.0, 2, (0, 1))
    >>> np.exp(lp).round(4).tolist()
    [[0.7311, 0.2689, 0.0, 0.0], [0.2689, 0.7311, 0.0, 0.0]]
    """
    v = np.asarray(vectors, dtype=np.float64)
    groups = custext_output_sets(v, int(top_k))
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
