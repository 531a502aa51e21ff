"""The topic-matrix cases: TopicDP, the Laplace baseline and MVG released through ``privatize_batch``.

* ``topicdp`` / ``topicdp-thesis`` -- 2×2 topic matrices at Frobenius distance Δ (the stated L2 sensitivity,
  one entry moved by Δ), released through the registered mechanism's ``privatize_batch``
  (:func:`topic_release_sampler`; its records' grid-exact ``raw_matrix``); events are bins of the projection
  onto ``a - b``, the likelihood-ratio direction of the Gaussian; the claim is the guarantee's (ε, δ).
* ``laplace`` -- 1×2 matrices ``[[1, 0]]`` and ``[[0, 1]]`` (``topicdp-laplace``): each row moves by 2 in L1,
  the global sensitivity 2m; events are bins of the Laplace log-likelihood-ratio statistic
  ``Σ |x - b| - |x - a|``, whose extreme atom reaches the full ratio ``e^ε``.
* ``mvg`` / ``mvg-directional`` -- as ``topicdp`` with the MVG claim (ε, δ).

Each also audits the privacy curve (reusing the event test's releases) against the discrete Gaussian with the
least noise (ε, δ) allows, or the discrete Laplace of the rounded L1 sensitivity over ε
(:mod:`textdp.audit.grid_curves`, :mod:`textdp.audit.accountant`), and its conformance test checks every
released entry against the paper's own law (:func:`topic_conformance`). :func:`textdp.audit.power.exact_law_releases`
draws a topic mechanism's *declared* law instead: it exists for power studies only and no registered case uses it.
The covered release (keywords read off the noisy row) is :mod:`textdp.audit.covered_topics`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._validation import check_epsilon, check_probability
from ..errors import ParameterError
from . import accountant
from .conformance import Conformance
from .core import AuditCase
from .grid_curves import gaussian_entry_curve, laplace_pair_curve

__all__ = [
    "DEFAULT_GRID",
    "TOPIC_DEFAULT_DELTA",
    "TOPIC_DEFAULT_EPSILON",
    "TOPIC_SAMPLES",
    "TOPIC_SENSITIVITY",
    "grid_units",
    "l1_likelihood_statistic",
    "l1_matrix_case",
    "laplace_case",
    "matrix_case",
    "matrix_pair",
    "mvg_case",
    "randomizer",
    "sample_releases",
    "topic_conformance",
    "topic_grid",
    "topic_params",
    "topic_release_sampler",
    "topicdp_case",
]


TOPIC_DEFAULT_EPSILON = 1.0
TOPIC_DEFAULT_DELTA = 1e-4
#: L2 sensitivity used by the matrix cases (any value works: the pair is placed at distance Δ).
TOPIC_SENSITIVITY = 0.1
#: Default releases per input of the topic cases: each is one call of the exact integer-noise
#: sampler through ``privatize_batch`` (~2-7 ms on 2 cores), so 10^4 keeps a case near a minute.
TOPIC_SAMPLES = 10_000
_TOY_MATRIX = np.array([[0.4, 0.3], [0.2, 0.1]])
#: The grid of the topic cases (2^-20, the mechanisms' public default, written here: the audit reads no
#: constant of :mod:`textdp.samplers`).
DEFAULT_GRID = 2.0 ** -20


def grid_units(values: object, grid: float) -> np.ndarray:
    """``rint(values / grid)`` as int64: the audit's own rounding to a public grid (shares no code with the release).

    >>> grid_units(np.array([0.3, -0.26]), 0.25).tolist()
    [1, -1]
    """
    return np.asarray(np.rint(np.asarray(values, dtype=np.float64) / float(grid)), dtype=np.int64)


def randomizer(mechanism: object) -> Callable[..., np.ndarray]:
    """The mechanism's ``randomize(matrix, seed)`` method."""
    fn = getattr(mechanism, "randomize", None)
    if fn is None:
        raise ParameterError(f"{type(mechanism).__name__} has no randomize method")
    return fn


def topic_release_sampler(mechanism: object) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """``sample(matrix, n, rng)``: ``n`` releases of ``matrix`` through the mechanism's public entry point.

    A registered topics mechanism (:class:`~textdp.topics.family.TopicsMechanism`) releases a batch
    of ``n`` copies of the :class:`~textdp.topics.models.TopicMatrix` with ``privatize_batch`` (its
    grid rounding, exact noise and record), and the audit reads each record's grid-exact
    ``raw_matrix`` (the DP output; ``matrix`` is its post-processing). Any other object (a
    hand-built variant in a test) is called through its ``randomize(matrix, seed=rng)``.
    """
    from ..topics.family import TopicsMechanism
    from ..topics.models import TopicMatrix

    def sample(matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(matrix, dtype=np.float64)
        if isinstance(mechanism, TopicsMechanism):
            keywords = tuple(tuple(f"w{i}_{j}" for j in range(x.shape[1])) for i in range(x.shape[0]))
            unit = TopicMatrix(x, keywords, tuple(range(x.shape[0])))
            recs = mechanism.privatize_batch([unit] * n, seed=rng, chunk=n)
            return np.asarray([r.raw_matrix for r in recs], dtype=np.float64).reshape((n,) + x.shape)
        fn = randomizer(mechanism)
        out = np.empty((n,) + x.shape, dtype=np.float64)
        for k in range(n):
            out[k] = fn(x, seed=rng)
        return out

    return sample


def sample_releases(mechanism: object, matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` independent releases of ``matrix`` through the release path: shape ``(n,) + matrix.shape``.

    See :func:`topic_release_sampler` (the audit's sampler). The exact-law shortcut of earlier
    versions is :func:`textdp.audit.power.exact_law_releases`, for power studies only.
    """
    return topic_release_sampler(mechanism)(matrix, n, rng)


def topic_conformance(grid: float, *, variances: list[float] | None = None, scale: float | None = None,
                      law: str) -> Conformance:
    """Conformance of a topic release: its noise in grid units, every entry, against the paper's law.

    The kept values are ``o/g − rint(x/g)`` of every entry (i.i.d. under the law), mapped by the
    law's CDF: a Gaussian of the column's variance ``variances[j]``, or a Laplace of scale
    ``scale`` (the continuous CDFs; the integer laws differ from them by less than one atom, < 10⁻⁵).
    """
    from scipy.special import ndtr

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        o = np.asarray(out, dtype=np.float64)
        z = np.rint(o / grid) - grid_units(x, grid)[None]
        if variances is not None:
            sd = np.sqrt(np.asarray(variances, dtype=np.float64))[None, None, :]
            return np.asarray(ndtr(z / sd)).reshape(-1)
        assert scale is not None
        t = z / float(scale)
        return np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(t, 0.0))).reshape(-1)

    return Conformance(description=f"noise of every released entry (grid units) vs {law}", kind="uniform", keep=keep)


def matrix_pair(sensitivity: float) -> tuple[np.ndarray, np.ndarray]:
    """Two 2×2 sub-stochastic toy matrices at Frobenius distance ``sensitivity`` (entry (0, 0) moved).

    >>> a, b = matrix_pair(0.1)
    >>> round(float(np.linalg.norm(a - b)), 12)
    0.1
    """
    a = _TOY_MATRIX.copy()
    b = a.copy()
    b[0, 0] = a[0, 0] - sensitivity
    return a, b


def matrix_case(name: str, mechanism: object, *, sensitivity: float, claimed_epsilon: float,
                claimed_delta: float = 0.0, noise_variance: float | None = None,
                grid: float = DEFAULT_GRID, conformance: Conformance | None = None,
                default_samples: int = TOPIC_SAMPLES) -> AuditCase:
    """An audit case for a matrix mechanism with an L2 (Frobenius) sensitivity claim.

    The pair is :func:`matrix_pair` at distance ``sensitivity``; events are the tails of the
    projection onto ``a - b`` (the likelihood-ratio direction of Gaussian noise). ``mechanism``
    is a registered topics mechanism (released through ``privatize_batch``) or a hand-built
    object with ``randomize(matrix, seed=...)`` (:func:`topic_release_sampler`).
    ``noise_variance``: the claimed σ² (grid units of ``grid``) of the discrete Gaussian on the
    differing entry, computed from public parameters by the audit's accountant: the privacy
    curve is then audited too (:func:`~textdp.audit.grid_curves.gaussian_entry_curve`, reusing
    the event test's releases).
    """
    a, b = matrix_pair(sensitivity)
    sample = topic_release_sampler(mechanism)

    return AuditCase(
        mechanism=name,
        pair=f"2x2 toy topic matrices one entry apart, Frobenius distance {sensitivity:g} = the stated L2 sensitivity",
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
        events="histogram",
        chunk=8_192,
        curve=None if noise_variance is None else dataclasses.replace(gaussian_entry_curve(
            sample, a, b, noise_variance, grid, what=f"{name}'s releases",
            law="the discrete Gaussian with the least noise (epsilon, delta) allows"), reuse_outputs=True),
        conformance=conformance,
        default_samples=default_samples,
    )


def l1_matrix_case(name: str, mechanism: object, *, claimed_epsilon: float, noise_scale: float | None = None,
                   grid: float = DEFAULT_GRID, conformance: Conformance | None = None,
                   default_samples: int = TOPIC_SAMPLES) -> AuditCase:
    """An audit case for a 1-row matrix mechanism with the L1 sensitivity 2 of a probability row.

    The pair ``[[1, 0]]`` / ``[[0, 1]]`` moves the row by 2 in L1; events are the tails of
    :func:`l1_likelihood_statistic`, whose extreme atom carries the full ratio of Laplace noise.
    ``noise_scale``: the claimed discrete Laplace scale (grid units of ``grid``), recomputed from
    public parameters by the caller: the privacy curve is then audited too
    (:func:`~textdp.audit.grid_curves.laplace_pair_curve`).
    """
    a = np.array([[1.0, 0.0]])
    b = np.array([[0.0, 1.0]])
    sample = topic_release_sampler(mechanism)

    return AuditCase(
        mechanism=name,
        pair="1x2 topic matrices [[1, 0]] vs [[0, 1]]: L1 distance 2 = the global sensitivity 2m (m = 1)",
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claimed_epsilon,
        events="histogram",
        statistic=l1_likelihood_statistic(a, b),
        chunk=8_192,
        curve=None if noise_scale is None else dataclasses.replace(laplace_pair_curve(
            sample, a, b, noise_scale, grid, what=f"{name}'s releases", law=f"{name}'s claimed discrete Laplace"),
            reuse_outputs=True),
        conformance=conformance,
        default_samples=default_samples,
    )


def topic_params(epsilon: float | None, delta: float | None) -> tuple[float, float]:
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    dlt = check_probability(TOPIC_DEFAULT_DELTA if delta is None else delta, "delta")
    return eps, dlt


def topic_grid(grid: object) -> float:
    """The grid of a topic case: the public default, or ``--param grid=G`` (a positive number)."""
    if grid is None:
        return DEFAULT_GRID
    try:
        g = float(grid)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"grid must be a positive number (a power of two, e.g. {DEFAULT_GRID:g}), got "
                             f"{grid!r}") from None
    if not (math.isfinite(g) and g > 0):
        raise ParameterError(f"grid must be a positive number (a power of two, e.g. {DEFAULT_GRID:g}), got {grid!r}")
    return g


def topicdp_case(epsilon: float | None = None, delta: float | None = None, *,
                 calibration: str = "analytic", mechanism: object | None = None, grid: object = None) -> AuditCase:
    """TopicDP (``topicdp`` or ``topicdp-thesis``) through ``privatize_batch`` at the supplied sensitivity Δ = 0.1.

    Privacy claim: (ε, δ), the mechanism's guarantee. The privacy curve is compared with the
    discrete Gaussian of the least noise any (ε, δ) claim allows on the rounded query
    (:func:`~textdp.audit.accountant.analytic_gaussian_sigma` at ``Δ_g = Δ/g + sqrt(mn)``, the audit's
    own accountant). Conformance: every released entry's noise against the paper's law, σ
    derived again by the audit (CKS20 Cor. 13 and Thm. 14; thesis: Sharma 2021 Alg. 2).
    ``mechanism``: sample this object instead (tests pass deliberately broken variants).
    """
    from ..topics.family import topics_mechanism

    eps, dlt = topic_params(epsilon, delta)
    name = "topicdp" if calibration == "analytic" else "topicdp-thesis"
    if calibration not in ("analytic", "thesis"):
        raise ParameterError(f"unknown calibration {calibration!r}; choose one of: analytic, thesis")
    g = topic_grid(grid)
    mech = topics_mechanism(name, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, grid=g) \
        if mechanism is None else mechanism
    m, n = _TOY_MATRIX.shape
    d_g = accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n)
    least = accountant.analytic_gaussian_sigma(eps, dlt, d_g)
    if calibration == "analytic":
        paper, law = accountant.cks20_sigma(eps, dlt, d_g), "TopicDP's discrete Gaussian (CKS20 calibration)"
    else:
        paper, law = accountant.thesis_sigma(eps, dlt, d_g, m, n), "TopicDP's discrete Gaussian (thesis Alg. 2)"
    conformance = topic_conformance(g, variances=[paper * paper] * n,
                                    law=f"{law}, sigma {paper:.6g} grid units")
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=dlt,
                       noise_variance=least * least, conformance=conformance, grid=g)


def laplace_case(epsilon: float | None = None, delta: float | None = None, *,
                 mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The Laplace baseline (``topicdp-laplace``, global L1 sensitivity 2m) through ``privatize_batch``.

    The pair ``[[1, 0]]`` / ``[[0, 1]]`` is the extreme one. Privacy curve: the discrete Laplace
    of scale ``(2m/g + mn)/ε`` (the rounded L1 sensitivity over ε, the audit's accountant);
    conformance: the released noise against the stated scale (rounded up to 1/1024 grid unit).
    """
    from ..topics.family import topics_mechanism

    if delta not in (None, 0, 0.0):
        raise ParameterError("laplace is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon)
    g = topic_grid(grid)
    mech = topics_mechanism("topicdp-laplace", epsilon=eps, grid=g) if mechanism is None else mechanism
    least = float(accountant.rounded_l1(2.0, g, 2) / Fraction(eps))
    stated = float(accountant.laplace_scale(eps, 1, (1, 2), g))
    return l1_matrix_case("laplace", mech, claimed_epsilon=eps, noise_scale=least, grid=g,
                          conformance=topic_conformance(g, scale=stated,
                                                        law=f"the discrete Laplace of scale {stated:.6g} grid units"))


def l1_likelihood_statistic(a: np.ndarray, b: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``Σ |x - b| - |x - a|`` (rounded to 1e-9): the Laplace log-likelihood ratio up to its scale.

    >>> f = l1_likelihood_statistic(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    >>> f(np.array([[[1.3, -0.2]], [[0.5, 0.5]]])).tolist()
    [2.0, 0.0]
    """
    a64 = np.asarray(a, dtype=np.float64).reshape(-1)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1)

    def statistic(x: np.ndarray) -> np.ndarray:
        flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        return np.round((np.abs(flat - b64) - np.abs(flat - a64)).sum(axis=1), 9)

    return statistic


def mvg_case(epsilon: float | None = None, delta: float | None = None, *,
             covariance: str = "isotropic", mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The MVG mechanism (Chanyaswad et al. 2018; ``mvg``, ``mvg-directional``) through ``privatize_batch``.

    Privacy claim (ε, δ): the curve is compared with the least noise (ε, δ) allows (the analytic
    Gaussian, as for TopicDP); MVG adds ~30 times more, so a calibration slip that keeps it private
    passes the privacy test and is found by the conformance test: every released entry against
    the paper's column variances (:func:`~textdp.audit.accountant.mvg_column_variances`).
    """
    from ..topics.family import topics_mechanism

    eps, dlt = topic_params(epsilon, delta)
    name = "mvg" if covariance == "isotropic" else "mvg-directional"
    g = topic_grid(grid)
    mech = topics_mechanism(name, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, grid=g) \
        if mechanism is None else mechanism
    m, n = _TOY_MATRIX.shape
    least = accountant.analytic_gaussian_sigma(eps, dlt, accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n))
    paper = accountant.mvg_column_variances(eps, dlt, TOPIC_SENSITIVITY, (m, n), g, covariance)
    conformance = topic_conformance(g, variances=paper,
                                    law=f"the MVG law ({covariance}, Chanyaswad et al. Thm. 3)")
    return matrix_case(name, mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=eps, claimed_delta=dlt,
                       noise_variance=least * least, conformance=conformance, grid=g)
