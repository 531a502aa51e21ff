"""The privacy curves of claimed laws, from public parameters only: metric noise, exponential, table and bag laws.

Each builds a :class:`~textdp.audit.curve.PrivacyCurve` whose claimed profile is computed here (exactly, or
simulated with numpy), never with the mechanism's sampler; the word, bag and sentence cases attach them.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from .claims import exponential_tables
from .curve import CURVE_POINTS, PrivacyCurve, Sampler, exact_profile, simulated_profile

__all__ = [
    "CLAIM_SIMULATIONS",
    "bag_curve",
    "exponential_curve",
    "metric_noise_curve",
    "selected_noise_curve",
    "table_curve",
]


#: Draws of the claimed law's loss used to estimate its privacy curve (simulated profiles).
CLAIM_SIMULATIONS = 400_000


def metric_noise_curve(noisy: Sampler, vec_a: np.ndarray,
                       vec_b: np.ndarray, epsilon: float, *, transform: np.ndarray | None = None,
                       what: str = "noisy vectors", simulations: int = CLAIM_SIMULATIONS) -> PrivacyCurve:
    """The curve audit of n-dimensional Laplace noise ``∝ exp(−ε ||T z||)`` (``T = I``: Fernandes et al.).

    ``noisy(x, n, rng)`` returns ``n`` noisy vectors ``(n, d)`` of word ``x`` from the mechanism
    under test. The claimed loss is ``ε(||T(z − e_b)|| − ||T(z − e_a)||)`` with the *public* ε; the
    claimed profile is simulated here with numpy (radius ``Gamma(d, 1/ε)`` times a uniform direction,
    mapped by ``T⁻¹``), never with the mechanism's sampler. Grid: ``CURVE_POINTS`` values of ε′ in
    ``[0, 0.75 ε d_T)``.
    """
    eps = check_epsilon(epsilon)
    a64 = np.asarray(vec_a, dtype=np.float64).reshape(-1)
    b64 = np.asarray(vec_b, dtype=np.float64).reshape(-1)
    dim = a64.size
    t = np.eye(dim) if transform is None else np.asarray(transform, dtype=np.float64)
    ta, tb = a64 @ t, b64 @ t
    dist = float(np.linalg.norm(ta - tb))

    def loss(z: np.ndarray) -> np.ndarray:
        tz = np.asarray(z, dtype=np.float64).reshape(len(z), dim) @ t
        return np.asarray(eps * (np.linalg.norm(tz - tb, axis=1) - np.linalg.norm(tz - ta, axis=1)))

    def claimed_loss(n: int, rng: np.random.Generator) -> np.ndarray:
        out = []
        for start in range(0, n, 65_536):  # in the transformed space the claimed noise is spherical
            k = min(65_536, n - start)
            g = rng.standard_normal((k, dim))
            g *= (rng.gamma(float(dim), 1.0 / eps, k) / np.linalg.norm(g, axis=1))[:, None]
            u = g + ta
            out.append(eps * (np.linalg.norm(u - tb, axis=1) - np.linalg.norm(g, axis=1)))
        return np.concatenate(out)

    return PrivacyCurve(
        sample=noisy, loss=loss, claimed=simulated_profile(claimed_loss, simulations),
        grid=tuple(np.linspace(0.0, 0.75 * eps * dist, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * eps * dist:.3g}] vs the claimed "
                     f"Laplace law (epsilon={eps:g}, simulated {simulations:,} times)"),
    )


def exponential_curve(sample: Sampler, vectors: np.ndarray,
                      a: int, b: int, epsilon: float, *, cap: float = math.inf, first: int = 0,
                      what: str = "released words") -> PrivacyCurve:
    """The curve audit of the exponential mechanism ``P(y | x) ∝ exp(−(ε/2) min(||e_x − e_y||, cap))``.

    SanText (``cap = inf``), TEM (``cap = γ``; its Gumbel race has exactly this law) and SanText+
    for two sensitive words (outputs: the sensitive rows ``first, first + 1, ...`` only). The score
    tables of ``a`` and ``b`` are computed here from the public vocabulary and ε; the claimed profile
    is exact. ``sample(x, n, rng)`` returns released word rows from the mechanism under test.
    """
    la, lb, law = exponential_tables(check_epsilon(epsilon), vectors, a, b, cap=cap, first=first)
    return table_curve(sample, la, lb, what=what, law=law)


def table_curve(sample: Sampler, logp_a: np.ndarray, logp_b: np.ndarray, *, what: str = "released words",
                law: str = "the claimed law") -> PrivacyCurve:
    """The curve audit of a claimed discrete law over vocabulary rows, given its two log-probability vectors.

    The loss of output ``o`` is ``logp_a[o] − logp_b[o]`` (an output impossible under both claimed
    laws has loss 0: it is in no event ``{L > ε′}``, ε′ ≥ 0); the claimed profile is exact
    (:func:`~textdp.audit.curve.exact_profile`); the curve reuses the event audit's released rows.
    Used by the exponential mechanisms (:func:`exponential_curve`), ``random`` and ``custext``.

    >>> c = table_curve(lambda x, n, rng: np.full(n, x), np.log([0.6, 0.2, 0.2]), np.log([0.2, 0.6, 0.2]))
    >>> c.loss(np.array([0, 1, 2])).round(4).tolist(), round(float(c.grid[-1]), 4)
    ([1.0986, -1.0986, 0.0], 0.824)
    """
    la = np.asarray(logp_a, dtype=np.float64).reshape(-1)
    lb = np.asarray(logp_b, dtype=np.float64).reshape(-1)
    both = np.isneginf(la)
    if la.shape != lb.shape or np.any(both != np.isneginf(lb)):
        raise ParameterError("the two claimed laws have different supports: the pair is not protected "
                             "from each other (infinite privacy loss)")
    table = np.where(both, 0.0, la) - np.where(both, 0.0, lb)
    top = float(np.max(np.abs(table)))

    def loss(o: np.ndarray) -> np.ndarray:
        return np.asarray(table[np.asarray(o, dtype=np.int64).reshape(-1)])

    return PrivacyCurve(
        sample=sample, loss=loss, claimed=exact_profile(la, lb),
        grid=tuple(np.linspace(0.0, 0.75 * top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * top:.3g}] vs the exact profile of "
                     f"{law}"),
        chunk=16_384,
        reuse_outputs=True,
    )


def bag_curve(sample: Sampler, logp_a: np.ndarray, logp_b: np.ndarray, size: int, *, what: str = "released bags",
              law: str = "the claimed law") -> PrivacyCurve:
    """The curve audit of bags of ``size`` i.i.d. terms of a claimed one-term law (SynTF with N > 1).

    A released bag ``o`` (a row of ``size`` term ids) has the loss ``Σ_i logp_a[o_i] − logp_b[o_i]``
    (the multinomial coefficient is the same under both inputs and cancels). The profile depends
    only on the law of that sum under ``a``: the per-term loss takes a few values, so its ``size``-fold
    convolution is computed exactly here, and ``P_b`` of each value is ``P_a`` times ``e^{−ℓ}``.
    Grid: ``CURVE_POINTS`` values of ε′ in ``[0, 0.75 max ℓ]``.

    >>> c = bag_curve(lambda x, n, rng: np.zeros((n, 2), dtype=int), np.log([0.6, 0.2, 0.2]),
    ...               np.log([0.2, 0.6, 0.2]), 2)
    >>> c.loss(np.array([[0, 0], [0, 1], [2, 2]])).round(4).tolist(), round(float(c.grid[-1]), 4)
    ([2.1972, 0.0, 0.0], 1.6479)
    """
    la = np.asarray(logp_a, dtype=np.float64).reshape(-1)
    lb = np.asarray(logp_b, dtype=np.float64).reshape(-1)
    if la.shape != lb.shape or np.any(np.isneginf(la) != np.isneginf(lb)):
        raise ParameterError("the two claimed laws have different supports: the pair is not protected "
                             "from each other (infinite privacy loss)")
    n_terms = check_positive_int(size, "size")
    live = ~np.isneginf(la)
    table = np.where(live, la, 0.0) - np.where(live, lb, 0.0)
    values, inv = np.unique(np.round(table[live], 12), return_inverse=True)
    step = np.bincount(inv.reshape(-1), weights=np.exp(la[live]), minlength=values.size)
    support, prob = np.zeros(1), np.ones(1)
    for _ in range(n_terms):  # the law of the summed loss under a, one term at a time
        sums = np.round((support[:, None] + values[None, :]).reshape(-1), 12)
        uniq, where = np.unique(sums, return_inverse=True)
        support = np.asarray(uniq, dtype=np.float64)
        prob = np.asarray(np.bincount(where.reshape(-1), weights=(prob[:, None] * step[None, :]).reshape(-1),
                                      minlength=support.size), dtype=np.float64)
    keep = prob > 0
    support, prob = support[keep], prob[keep]
    top = float(np.max(np.abs(support)))

    def loss(o: np.ndarray) -> np.ndarray:
        rows = np.asarray(o, dtype=np.int64).reshape(len(o), -1)
        return np.asarray(table[rows].sum(axis=1))

    return PrivacyCurve(
        sample=sample, loss=loss, claimed=exact_profile(np.log(prob), np.log(prob) - support),
        grid=tuple(np.linspace(0.0, 0.75 * top, CURVE_POINTS)),
        description=(f"{what}: delta(eps') at {CURVE_POINTS} eps' in [0, {0.75 * top:.3g}] vs the exact profile of "
                     f"bags of {n_terms} i.i.d. terms of {law}"),
        chunk=16_384,
        reuse_outputs=True,
    )


def selected_noise_curve(sample: Sampler, noise_curve: PrivacyCurve, what: str) -> PrivacyCurve:
    """The curve of a noise-then-decode mechanism on its *released words*, against the noise's claimed profile.

    The decoded word is post-processing of the noisy vector, so its privacy profile is at most
    the claimed noise law's (``noise_curve.claimed``: data processing for the hockey-stick
    divergence). The loss of a word has no closed form, so the events are selected on half of
    the released words and evaluated on the other half (``loss=None``,
    :func:`~textdp.audit.curve.curve_test`). This samples what is released: a bug in the decoder
    or in the release (``_privatize``, run by ``privatize_batch``) moves these words, not the noise helper.
    """
    return PrivacyCurve(sample=sample, loss=None, claimed=noise_curve.claimed, grid=noise_curve.grid,
                        description=(f"{what}: delta(eps') at {len(noise_curve.grid)} eps' in "
                                     f"[0, {noise_curve.grid[-1]:.3g}], events selected on half of the released "
                                     "words, vs the claimed noise law's profile (decoding is post-processing)"),
                        chunk=16_384, reuse_outputs=True)
