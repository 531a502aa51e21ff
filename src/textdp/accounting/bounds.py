"""Numbers behind the guarantee: privacy loss between two documents and utility bounds.

Privacy (Theorem 5.1). For input bags ``b, b'`` of ``N`` words each, every output
bag ``c`` satisfies ``pr(b, c) <= exp(epsilon * N * E_d(b, b')) * pr(b', c)``. The
*privacy loss* ``epsilon * N * E_d`` (in nats) is what a user should look at:
below 1 the two documents are hard to tell apart, at 20 one is half a billion
times more likely. For realistic documents the *multiplier* ``exp(loss)`` does
not fit in a float, so it is always reported as ``log10`` as well
(``"10^123.4"``) and as ``None`` (JSON ``null``) when it would overflow.

The loss is computed on exactly the bags the mechanism would see: the same
normalisation, stop words, out-of-vocabulary removal and bag size N
(:func:`document_guarantee` reuses :meth:`EarthMoversPrivacy.prepare` and
:func:`textdp.text.make_bag`).

Sample mode. With ``bag="sample"`` the bag is N words drawn with replacement
from the document, and that bag is never released, so Theorem 5.1 (about bags)
says nothing about *documents*. The bound that holds is
``exp(epsilon * N * W_inf(p_D, p_D'))`` with ``p_D`` the document's empirical
distribution of in-vocabulary words and ``W_inf`` the infinity-Wasserstein
(bottleneck) distance (proof by coupling in
:class:`textdp.guarantees.EarthMoversGuarantee`; computed by
:func:`sample_privacy_loss`). When each document repeats one word it is
Theorem 5.1's bound (which the Laplace noise approaches for outputs far along
the line through the two words); it can be loose for mixtures: for
``p_D = (delta_a + delta_b)/2`` and ``p_D' = delta_a`` one draw outputs ``o`` with
ratio ``1/2 + K(b,o)/(2 K(a,o)) <= (1 + e^{epsilon d(a,b)})/2 < e^{epsilon d(a,b)}``.
The exact supremum of one draw's ratio over all epsilon*d-private word
mechanisms K is ``max sum_x p_D(x) g(x) / sum_y p_D'(y) g(y)`` over ``g > 0`` with
``g(x) <= e^{epsilon d(x,y)} g(y)`` (every ``g = K(., o)`` satisfies these linear
constraints, and any such ``g``, scaled small, is ``K(., o1)`` of a two-output
epsilon*d-private mechanism), a linear-fractional programme; the coupling argument
applied to any feasible ``g`` shows it is at most ``e^{epsilon W_inf}``. textdp
states the coupling bound, which is proven for every pair of documents and needs
no solver.

Utility (Theorem 4.2). Algorithm 1 moves a bag ``b`` of ``N`` vectors of
dimension ``n`` to a noisy bag within Earth Mover's distance ``Delta`` with
probability at least ``1 - exp(-x) e_{n-1}(x)``, ``x = epsilon*N*Delta``, stated
for ``epsilon * e * N * Delta <= n`` (the condition after eq. (36), used to drop
the factor of Theorem A2). That expression is the regularised lower incomplete
gamma function ``P(n, x)`` (the CDF of a Gamma(n, 1) variable), computed here
with :func:`scipy.special.gammainc`, stable for ``n = 300`` and any ``x``.

Two facts worth knowing, both checked in the tests:

* inside its validity region the value is tiny (``P(n, n/e)`` is ``9e-10`` at
  ``n = 50`` and ``~1e-49`` at ``n = 300``), so the theorem says little there;
* the *exact* probability that the noise norms sum to at most ``N*Delta`` is
  ``P(N*n, x)`` (a sum of ``N`` independent Gamma(n, 1/epsilon) radii is
  Gamma(N*n, 1/epsilon)). It is a rigorous lower bound on ``Pr[E_d(b, Z) <= Delta]``
  for every ``Delta`` (no validity condition), and it is attained when the bag
  repeats one word. For ``N >= 2`` it is smaller than Theorem 4.2's value, so
  Theorem 4.2's simplified formula is *not* a lower bound for ``N >= 2`` (it is
  exact for ``N = 1``); Theorem A2's unsimplified bound is, but it is <= 0
  (vacuous) throughout the validity region. :func:`utility_bound` reports all three.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import gammainc, gammaincinv, gammaln, logsumexp

from .._validation import (
    check_choice,
    check_epsilon,
    check_positive_int,
    check_probability,
)
from ..embeddings import Embeddings, EmbeddingsSource
from ..errors import ParameterError, ParameterTypeError
from ..mechanisms import EarthMoversPrivacy
from ..text import BAG_MODES, make_bag
from .emd import METRICS, bag_distance, distribution_distance

__all__ = [
    "DocumentGuarantee",
    "UtilityBound",
    "document_guarantee",
    "format_multiplier",
    "log10_multiplier",
    "multiplier",
    "privacy_loss",
    "sample_privacy_loss",
    "sum_of_norms_probability",
    "theorem_4_2",
    "theorem_a2",
    "utility_bound",
    "utility_radius",
]

_LN10 = math.log(10.0)
_MAX_EXP = 700.0  # exp(700) ~ 1e304 still fits in a float64


def _check_distance(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ParameterTypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ParameterError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def privacy_loss(epsilon: float, size: int, earth_movers_distance: float) -> float:
    """``epsilon * N * E_d(b, b')`` in nats: the log of the worst output-probability ratio (Thm 5.1).

    >>> privacy_loss(10.0, 20, 0.01)
    2.0
    """
    eps = check_epsilon(epsilon)
    n = check_positive_int(size, "size")
    return float(eps * n * _check_distance(earth_movers_distance, "earth_movers_distance"))


def sample_privacy_loss(
    epsilon: float, size: int, rows_a: np.ndarray, rows_b: np.ndarray, vectors: np.ndarray, *, metric: str = "euclidean"
) -> float:
    """``epsilon * N * W_inf(p_A, p_B)``: the privacy loss of ``--bag sample`` between two documents.

    ``rows_a``/``rows_b`` are all in-vocabulary rows of each document (their
    empirical distributions are what the bag is drawn from); see the module notes.

    >>> vec = np.array([[0.0, 0.0], [0.5, 0.0]])   # "aa" and "bb", 0.5 apart
    >>> round(sample_privacy_loss(3.0, 2, np.array([0, 1]), np.array([0, 0]), vec), 6)  # "aa bb" vs "aa aa"
    3.0
    """
    eps = check_epsilon(epsilon)
    n = check_positive_int(size, "size")
    return float(eps * n * distribution_distance(rows_a, rows_b, vectors, metric=metric))


def log10_multiplier(loss: float) -> float:
    """``log10(exp(loss))``: the multiplier's order of magnitude, finite for any finite loss.

    >>> round(log10_multiplier(1000.0), 2)
    434.29
    """
    return float(_check_distance(loss, "privacy loss") / _LN10)


def multiplier(loss: float) -> float | None:
    """``exp(loss)``, or ``None`` when it would overflow a float (use :func:`log10_multiplier`).

    >>> multiplier(2.0) == math.exp(2.0), multiplier(1000.0)
    (True, None)
    """
    loss = _check_distance(loss, "privacy loss")
    return math.exp(loss) if loss <= _MAX_EXP else None


def format_multiplier(loss: float) -> str:
    """The multiplier as text: plain below a million, otherwise ``10^x`` (``x`` to 4 digits beyond 10^6).

    >>> format_multiplier(2.0), format_multiplier(283.3), format_multiplier(1e12)
    ('7.389', '10^123.0', '10^4.343e+11')
    """
    lg = log10_multiplier(loss)
    if lg < 6:
        return f"{math.exp(loss):.4g}"
    if lg < 1e6:
        return f"10^{lg:.1f}"
    return f"10^{lg:.4g}"


# -- utility ---------------------------------------------------------------------


def _x(epsilon: float, size: int, delta: float) -> float:
    return check_epsilon(epsilon) * check_positive_int(size, "size") * _check_distance(delta, "delta")


def theorem_4_2(epsilon: float, size: int, dim: int, delta: float) -> float:
    """Theorem 4.2's value ``1 - exp(-x) e_{n-1}(x)``, ``x = epsilon*N*Delta``, as ``P(n, x)``.

    Computed as the regularised lower incomplete gamma function, so it stays in
    [0, 1] where the partial exponential series overflows (n = 300, x = 1000).
    Only claimed by the paper when ``epsilon*e*N*Delta <= n``; see the module notes.

    >>> round(theorem_4_2(1.0, 1, 2, 1.0), 6)  # 1 - e^-1 (1 + 1)
    0.264241
    >>> theorem_4_2(10.0, 300, 300, 5.0)
    1.0
    """
    n = check_positive_int(dim, "dim")
    return float(gammainc(n, _x(epsilon, size, delta)))


def sum_of_norms_probability(epsilon: float, size: int, dim: int, delta: float) -> float:
    """``Pr[sum_i ||noise_i|| <= N*Delta] = P(N*n, epsilon*N*Delta)``, exact.

    A rigorous lower bound on ``Pr[E_d(b, Z) <= Delta]`` for Algorithm 1 and any
    ``Delta`` (the identity matching costs ``sum_i ||noise_i|| / N``); equality when
    all words of the bag are the same.

    >>> round(sum_of_norms_probability(1.0, 1, 2, 1.0), 6) == round(theorem_4_2(1.0, 1, 2, 1.0), 6)
    True
    """
    n = check_positive_int(dim, "dim")
    size = check_positive_int(size, "size")
    return float(gammainc(size * n, _x(epsilon, size, delta)))


def theorem_a2(epsilon: float, size: int, dim: int, delta: float) -> float:
    """Theorem A2's bound (before the simplification to 4.2), clipped to [0, 1].

    ``1 - exp(-x) e_{n-1}(x) (q^N - 1)/(q - 1)`` with ``q = c_n V_n(N Delta) = x^n/n!``
    (eq. (35)); computed in log space. It is <= 0 (vacuous) whenever ``x <= n``.

    >>> theorem_a2(1.0, 3, 30, 3.0)
    0.0
    """
    n = check_positive_int(dim, "dim")
    size = check_positive_int(size, "size")
    x = _x(epsilon, size, delta)
    if x == 0:
        return 0.0
    # log of exp(-x) e_{n-1}(x), by log-sum-exp over the n terms (no underflow for large x)
    k = np.arange(n)
    log_tail = float(-x + logsumexp(k * math.log(x) - gammaln(k + 1)))
    log_q = n * math.log(x) - float(gammaln(n + 1))
    # geometric factor sum_{k<N} q^k, in logs
    if abs(log_q) < 1e-12:
        log_geo = math.log(size)
    elif log_q < 0:
        log_geo = math.log(-math.expm1(size * log_q)) - math.log(-math.expm1(log_q))
    else:
        log_geo = (size - 1) * log_q + math.log(-math.expm1(-size * log_q)) - math.log(-math.expm1(-log_q))
    log_sub = log_tail + log_geo
    if log_sub >= 0:
        return 0.0
    return float(-math.expm1(log_sub))


@dataclass(frozen=True)
class UtilityBound:
    """Utility statements for Algorithm 1 at radius ``delta`` (all probabilities).

    Attributes
    ----------
    theorem_4_2 : float
        The paper's ``1 - exp(-x) e_{n-1}(x)``.
    valid : bool
        Whether the paper's condition ``epsilon * e * N * Delta <= n`` holds.
    exact_lower_bound : float
        ``P(N*n, x)``: rigorous for every ``Delta``; use this one.
    theorem_a2 : float
        The unsimplified bound of Theorem A2 (clipped at 0).
    """

    epsilon: float
    size: int
    dim: int
    delta: float
    argument: float
    theorem_4_2: float
    valid: bool
    exact_lower_bound: float
    theorem_a2: float

    @property
    def condition(self) -> str:
        """The validity condition with numbers."""
        lhs = self.argument * math.e
        rel = "<=" if self.valid else ">"
        return f"epsilon*e*N*Delta = {lhs:.4g} {rel} n = {self.dim}"

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["condition"] = self.condition
        return out


def utility_bound(epsilon: float, size: int, dim: int, delta: float) -> UtilityBound:
    """All utility statements for radius ``delta`` (see the module notes).

    >>> u = utility_bound(epsilon=10.0, size=1, dim=50, delta=5.0)
    >>> u.valid, round(u.theorem_4_2, 3), u.theorem_4_2 == u.exact_lower_bound
    (False, 0.519, True)
    """
    x = _x(epsilon, size, delta)
    n = check_positive_int(dim, "dim")
    return UtilityBound(
        epsilon=float(epsilon),
        size=int(size),
        dim=n,
        delta=float(delta),
        argument=x,
        theorem_4_2=theorem_4_2(epsilon, size, n, delta),
        valid=bool(x * math.e <= n),
        exact_lower_bound=sum_of_norms_probability(epsilon, size, n, delta),
        theorem_a2=theorem_a2(epsilon, size, n, delta),
    )


def utility_radius(epsilon: float, size: int, dim: int, probability: float) -> float:
    """The ``Delta`` such that ``Pr[sum of noise norms <= N*Delta] = probability``.

    With at least that probability Algorithm 1's noisy bag is within Earth
    Mover's distance ``Delta`` of the input (before decoding to words).

    >>> round(utility_radius(10.0, 50, 50, 0.5), 3)  # ~ n/epsilon, the mean noise length
    4.999
    """
    eps = check_epsilon(epsilon)
    n = check_positive_int(dim, "dim")
    size = check_positive_int(size, "size")
    p = check_probability(probability, "probability")
    return float(gammaincinv(size * n, p) / (eps * size))


# -- two documents ----------------------------------------------------------------


@dataclass(frozen=True)
class DocumentGuarantee:
    """How distinguishable two documents remain after the mechanism, with numbers.

    ``words_a``/``words_b`` are the in-vocabulary words available after
    normalisation. ``distance`` is the distance the guarantee scales with
    (``distance_name``): for ``bag="truncate"`` the Earth Mover's distance ``E_d``
    between the two bags of ``size`` words (Thm 5.1); for ``bag="sample"`` the
    infinity-Wasserstein distance ``W_inf`` between the documents' word
    distributions (the document-level bound; see the module notes).
    ``privacy_loss`` is ``epsilon * size * distance``; ``multiplier`` is
    ``exp(privacy_loss)`` or ``None`` when it overflows (``log10_multiplier`` is
    always finite). ``epsilon_for_unit_loss`` is the epsilon at which the loss
    would be 1 nat (multiplier e), i.e. the two documents would be hard to tell apart.
    These numbers describe the two private documents: they are for the data owner.
    """

    epsilon: float
    size: int
    metric: str
    bag: str
    distance_name: str
    embeddings: str
    dim: int
    vocab_size: int
    n_tokens_a: int
    n_tokens_b: int
    dropped_oov_a: int
    dropped_oov_b: int
    words_a: int
    words_b: int
    distance: float
    earth_movers_distance: float | None
    wasserstein_infinity: float | None
    total_distance: float
    privacy_loss: float
    log10_multiplier: float
    multiplier: float | None
    multiplier_text: str
    epsilon_for_unit_loss: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (no inf/NaN: an overflowing multiplier is ``None``)."""
        return asdict(self)


def _document_distance(rows: Sequence[np.ndarray], n: int, bag: str, vectors: np.ndarray, metric: str,
                       names: tuple[str, str]) -> tuple[float, float | None, float | None]:
    """``(distance, E_d, W_inf)``: W_inf of the word distributions (``sample``) or E_d of the two bags."""
    if bag == "sample":
        w_inf = distribution_distance(rows[0], rows[1], vectors, metric=metric)
        return w_inf, None, w_inf
    bag_a = make_bag(rows[0], n, bag, doc_id=f"document {names[0]}")
    bag_b = make_bag(rows[1], n, bag, doc_id=f"document {names[1]}")
    e_d = bag_distance(bag_a, bag_b, vectors, metric=metric)
    return e_d, e_d, None


def document_guarantee(
    text_a: str,
    text_b: str,
    *,
    epsilon: float,
    size: int | None = None,
    embeddings: EmbeddingsSource = None,
    vocab_size: int | None = None,
    bag: str = "truncate",
    stop_words: str | Iterable[str] | None = "english",
    metric: str = "euclidean",
    names: tuple[str, str] = ("A", "B"),
) -> DocumentGuarantee:
    """Privacy loss between two texts, on exactly what the mechanism would see.

    ``bag="truncate"``: ``epsilon * N * E_d(b, b')`` between the two bags of the
    first N in-vocabulary words (Thm 5.1). ``bag="sample"``:
    ``epsilon * N * W_inf(p_a, p_b)`` between the documents' word distributions
    (the sampled bag is hidden, so the bound is about the documents; deterministic).

    Parameters
    ----------
    text_a, text_b : str
        The two documents.
    epsilon : float
        Privacy parameter of the release.
    size : int, optional
        Bag size N of the release; default: the smaller in-vocabulary length.
    embeddings, vocab_size, bag, stop_words
        As for :class:`~textdp.mechanisms.EarthMoversPrivacy` (``embeddings`` may be
        an :class:`~textdp.embeddings.Embeddings`, a path or ``None`` for GloVe 50d).
    metric : {"euclidean", "manhattan"}
        Ground metric. Theorem 5.1 is stated for Euclidean; Manhattan gives a
        larger (still valid, Cor. 1) loss.

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [3, 4]]), name="toy")
    >>> g = document_guarantee("dog car", "cat car", epsilon=2.0, embeddings=emb, stop_words=None)
    >>> g.earth_movers_distance, g.privacy_loss, g.multiplier_text
    (0.5, 2.0, '7.389')
    >>> s = document_guarantee("dog car", "cat car", epsilon=2.0, embeddings=emb, stop_words=None, bag="sample")
    >>> s.distance_name, s.wasserstein_infinity, s.privacy_loss
    ('W_inf', 1.0, 4.0)
    """
    if metric not in METRICS:
        raise ParameterError(f"unknown metric {metric!r}; choose one of: {', '.join(METRICS)}")
    check_choice(bag, "bag mode", BAG_MODES)
    if embeddings is not None and not isinstance(embeddings, (Embeddings, str, os.PathLike)):
        raise ParameterTypeError(f"embeddings must be an Embeddings, a path or None, got {type(embeddings).__name__}")
    mech = EarthMoversPrivacy(
        epsilon=epsilon, size=size, embeddings=embeddings, vocab_size=vocab_size, bag=bag, stop_words=stop_words
    ).fit()
    rows, n_tokens, dropped = mech.prepare([text_a, text_b], list(names))
    n = check_positive_int(size if size is not None else min(r.size for r in rows), "size")
    emb = mech.embeddings_
    distance, e_d, w_inf = _document_distance(rows, n, bag, emb.vectors, metric, names)
    loss = privacy_loss(mech.epsilon_, n, distance)
    return DocumentGuarantee(
        epsilon=mech.epsilon_, size=int(n), metric=metric, bag=bag, distance_name="W_inf" if bag == "sample" else "E_d",
        embeddings=emb.name, dim=emb.dim, vocab_size=emb.vocab_size,
        n_tokens_a=int(n_tokens[0]), n_tokens_b=int(n_tokens[1]), dropped_oov_a=int(dropped[0]),
        dropped_oov_b=int(dropped[1]), words_a=int(rows[0].size), words_b=int(rows[1].size),
        distance=float(distance), earth_movers_distance=None if e_d is None else float(e_d),
        wasserstein_infinity=None if w_inf is None else float(w_inf), total_distance=float(n * distance),
        privacy_loss=loss, log10_multiplier=log10_multiplier(loss), multiplier=multiplier(loss),
        multiplier_text=format_multiplier(loss),
        epsilon_for_unit_loss=(1.0 / (n * distance)) if distance > 0 else None,
    )
