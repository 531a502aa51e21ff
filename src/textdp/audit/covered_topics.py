"""The covered topic release's cases: keywords read off a noisy topic row over a public vocabulary.

``textdp topics``' default release: the registered topic mechanism names each topic's largest *noisy* values.
The audit samples those keywords through ``privatize_batch`` (:func:`covered_topic_case`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Protocol

import numpy as np

from .._validation import check_epsilon
from ..errors import ParameterError
from . import accountant
from .conformance import Conformance
from .core import AuditCase
from .curve import PrivacyCurve
from .grid_curves import gaussian_entry_curve, laplace_pair_curve
from .topic_cases import (
    TOPIC_DEFAULT_EPSILON,
    TOPIC_SAMPLES,
    TOPIC_SENSITIVITY,
    grid_units,
    topic_grid,
    topic_params,
)

__all__ = ["COVERED_KEYWORDS", "COVERED_LAWS", "COVERED_MECHANISMS", "COVERED_WORDS", "covered_topic_case",
           "keyword_codes"]


#: The public vocabulary of the covered topic cases (toy words; the unit is one topic row over all of them).
COVERED_WORDS: tuple[str, ...] = ("river", "market", "school", "garden")
#: Keywords per topic the covered cases release (the top of each noisy row, in order).
COVERED_KEYWORDS = 2
#: The registered topics mechanism each covered case releases through (case name without ``-covered``).
COVERED_MECHANISMS = {"topicdp": "topicdp", "topicdp-thesis": "topicdp-thesis", "laplace": "topicdp-laplace",
                      "mvg": "mvg", "mvg-directional": "mvg-directional"}
#: The paper's law of each covered case (the audit's own derivation: :mod:`textdp.audit.accountant`).
COVERED_LAWS = {"topicdp": "cks20", "topicdp-thesis": "thesis", "laplace": "laplace", "mvg": "isotropic",
                "mvg-directional": "directional"}


class KeywordRecord(Protocol):
    """A topic release record: each topic's released keywords, in rank order."""

    @property
    def keywords(self) -> tuple[tuple[str, ...], ...]: ...


def keyword_codes(records: Iterable[KeywordRecord], words: tuple[str, ...] = COVERED_WORDS) -> np.ndarray:
    """Each topic release's keywords (its one topic, in rank order) as one integer: ``Σ_p col_p |V|^p``.

    >>> class R:
    ...     keywords = (("market", "river"),)
    >>> keyword_codes([R()]).tolist()  # market = 1 at rank 0, river = 0 at rank 1
    [1]
    """
    index = {w: i for i, w in enumerate(words)}
    v = len(words)
    return np.asarray([sum(index[w] * v ** p for p, w in enumerate(r.keywords[0])) for r in records],
                      dtype=np.int64)


#: what a covered topic law builds: claim, pair, mechanism, claimed curve, the paper's noise (grid units), its name
_CoveredLaw = tuple[float, float, np.ndarray, np.ndarray, object, PrivacyCurve,
                    Callable[[tuple[int, ...], np.random.Generator], np.ndarray], str]


def _covered_laplace(reg: str, epsilon: float | None, delta: float | None, mechanism: object | None, g: float,
                     m: int, n: int, k: int) -> _CoveredLaw:
    """:func:`covered_topic_case`'s Laplace baseline (pure epsilon-DP)."""
    from ..topics.family import topics_mechanism

    if delta not in (None, 0, 0.0):
        raise ParameterError("laplace is pure epsilon-DP (delta = 0); --delta does not apply")
    eps, dlt = check_epsilon(TOPIC_DEFAULT_EPSILON if epsilon is None else epsilon), 0.0
    a, b = np.array([[0.6, 0.4, 0.0, 0.0]]), np.array([[0.4, 0.6, 0.0, 0.0]])
    mech = topics_mechanism(reg, epsilon=eps, keywords=k, grid=g) if mechanism is None else mechanism
    scale = float(accountant.laplace_scale(eps, m, (m, n), g))
    claimed = laplace_pair_curve(lambda x, n_, rng: x, a, b,
                                 float(accountant.rounded_l1(2.0, g, m * n) / Fraction(eps)), g)

    def noise(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.asarray(rng.laplace(0.0, scale, size))

    law = f"the discrete Laplace of scale {scale:.6g} grid units"
    return eps, dlt, a, b, mech, claimed, noise, law


def _covered_gaussian(reg: str, paper: str, epsilon: float | None, delta: float | None, mechanism: object | None,
                      g: float, m: int, n: int, k: int) -> _CoveredLaw:
    """:func:`covered_topic_case`'s Gaussian mechanisms (the paper's variances, per column)."""
    from ..topics.family import topics_mechanism

    eps, dlt = topic_params(epsilon, delta)
    a, b = np.array([[0.35, 0.3, 0.2, 0.1]]), np.array([[0.25, 0.3, 0.2, 0.1]])
    mech = topics_mechanism(reg, epsilon=eps, delta=dlt, sensitivity=TOPIC_SENSITIVITY, keywords=k, grid=g) \
        if mechanism is None else mechanism
    d_g = accountant.rounded_l2(TOPIC_SENSITIVITY, g, m * n)
    least = accountant.analytic_gaussian_sigma(eps, dlt, d_g)
    claimed = gaussian_entry_curve(lambda x, n_, rng: x, a, b, least * least, g)
    if paper == "cks20":
        variances = [accountant.cks20_sigma(eps, dlt, d_g) ** 2] * n
    elif paper == "thesis":
        variances = [accountant.thesis_sigma(eps, dlt, d_g, m, n) ** 2] * n
    else:
        variances = list(accountant.mvg_column_variances(eps, dlt, TOPIC_SENSITIVITY, (m, n), g, paper))
    sd = np.sqrt(np.asarray(variances, dtype=np.float64))

    def noise(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.asarray(rng.standard_normal(size) * sd)

    law = f"{reg}'s Gaussian noise (the paper's variances, per column)"
    return eps, dlt, a, b, mech, claimed, noise, law


def covered_topic_case(kind: str, epsilon: float | None = None, delta: float | None = None, *,
                       mechanism: object | None = None, grid: object = None) -> AuditCase:
    """The covered topic release (``textdp topics``' default): one row over a public vocabulary, keywords from the noise.

    The registered mechanism (:data:`COVERED_MECHANISMS`) is built with ``keywords=2`` and releases,
    through ``privatize_batch``, a :class:`~textdp.topics.models.TopicMatrix` whose one row spans the
    public vocabulary :data:`COVERED_WORDS` (``columns="public"``): each record names the row's two
    largest *noisy* values. The audit samples those keywords (:func:`keyword_codes`; discrete events).
    The pair puts different words on top (``[.35, .3, .2, .1]`` vs ``[.25, .3, .2, .1]`` at the
    stated L2 sensitivity 0.1; the Laplace baseline: ``[.6, .4, 0, 0]`` vs ``[.4, .6, 0, 0]``), so a
    release that ranks by the private row releases a different keyword pair for each input with
    certainty. Claims as the model-column case's; the curve selects events on half of the keywords
    against the claimed noise law's profile (keywords are post-processing of the noisy row); the
    conformance test compares the keywords with the audit's own reference (the paper's noise,
    drawn by numpy and rounded, ranked with ties to the earlier column).
    """
    from ..topics.models import TopicMatrix

    if kind not in COVERED_MECHANISMS:
        raise ParameterError(f"unknown covered topic case {kind!r}; choose one of {', '.join(COVERED_MECHANISMS)}")
    reg, paper = COVERED_MECHANISMS[kind], COVERED_LAWS[kind]
    m, n = 1, len(COVERED_WORDS)
    g = topic_grid(grid)
    k = COVERED_KEYWORDS
    if paper == "laplace":
        eps, dlt, a, b, mech, claimed, noise, law = _covered_laplace(reg, epsilon, delta, mechanism, g, m, n, k)
    else:
        eps, dlt, a, b, mech, claimed, noise, law = _covered_gaussian(reg, paper, epsilon, delta, mechanism, g, m, n,
                                                                      k)

    def sample(x: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
        unit = TopicMatrix(np.asarray(x, dtype=np.float64), (COVERED_WORDS,), (0,), columns="public")
        recs = mech.privatize_batch([unit] * count, seed=rng, chunk=count)  # type: ignore[attr-defined]
        return keyword_codes(recs)

    def reference(x: object, count: int, rng: np.random.Generator) -> np.ndarray:
        noisy = grid_units(x, g).reshape(-1)[None, :] + np.rint(noise((count, n), rng))
        cols = np.argsort(-noisy, axis=1, kind="stable")[:, :k]
        return np.asarray((cols * (n ** np.arange(k))[None, :]).sum(axis=1), dtype=np.int64)

    curve = PrivacyCurve(sample=sample, loss=None, claimed=claimed.claimed, grid=claimed.grid,
                         description=(f"{kind}-covered's released keywords: delta(eps') at {len(claimed.grid)} eps' "
                                      f"in [0, {claimed.grid[-1]:.3g}], events selected on half of the keywords, vs "
                                      "the claimed noise law's profile (keywords are post-processing)"),
                         chunk=8_192, reuse_outputs=True)
    return AuditCase(
        mechanism=f"{kind}-covered",
        pair=(f"one topic row over the public vocabulary {', '.join(COVERED_WORDS)} (columns='public', "
              f"keywords={k}): {a.tolist()} vs {b.tolist()}; claim ({eps:g}, {dlt:g}); events: released keywords"),
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=eps,
        claimed_delta=dlt,
        events="discrete",
        chunk=8_192,
        curve=curve,
        conformance=Conformance(description=(f"released keywords vs the audit's reference ({law}, ranked by "
                                              "the noisy row)"), kind="reference",
                                keep=lambda x, out: np.asarray(out).reshape(-1), reference=reference),
        default_samples=TOPIC_SAMPLES,
    )
