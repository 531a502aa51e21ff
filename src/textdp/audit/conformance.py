"""Conformance: do the released outputs follow the paper's law? (Second evidence beside the privacy bound.)

A privacy audit flags a mechanism only when its loss *exceeds* the claim; a bug that changes the
law but stays under a loose bound (ε×3 inside a 50-dimensional decoder, a precision budget 2.25
times too large in an MVG mechanism that adds 30 times the noise it needs) passes it. The
conformance test compares the released outputs of each audited input with an **independent
reference of the paper's law** (never the mechanism's own sampler or calibration):

* ``"table"`` -- the exact probabilities of every output (exponential mechanisms, randomised
  response, CusText, SynTF's one-term law; :mod:`textdp.audit.claims`): Pearson's χ² goodness of
  fit, the cells merged in decreasing order of probability into bins of expected count >= 5;
* ``"reference"`` -- a reference sampler of the law, written again in :mod:`textdp.audit.reference`
  (n-dimensional Laplace or Mahalanobis noise and an exact float64 nearest-word search, Vickrey's
  threshold rule, SynTF bags): a χ² test of homogeneity between the two samples, outputs seen
  fewer than 10 times in both pooled into one cell;
* ``"uniform"`` -- the probability integral transform of each kept value under the law's CDF
  (the topic matrices' noise in grid units; the radius of Laplace noise): Kolmogorov–Smirnov
  against U(0, 1). For the integer noise of the topic releases the CDF is the continuous one's;
  the discrete law differs from it by less than one atom, ``1/(σ sqrt(2π)) < 10⁻⁵`` here,
  far below the test's resolution (~``1/sqrt(n)``).

The two inputs of the pair are tested separately and combined by Bonferroni: the test rejects at
level α when ``min(p_a, p_b) < α/2``. The test is two-sided: *more* noise than the law states is a
change of law too (a pass of the privacy audit, a failure here).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError
from .curve import Sampler, category_ids

__all__ = ["CONFORMANCE_KINDS", "Conformance", "ConformanceResult", "conformance_test"]

#: How the kept outputs are compared with the law (module docstring).
CONFORMANCE_KINDS = ("table", "reference", "uniform")


@dataclass(frozen=True)
class Conformance:
    """What a case needs for the conformance test (frozen).

    Attributes
    ----------
    description : str
        The law and where it comes from (public one line).
    kind : {"table", "reference", "uniform"}
        See the module docstring.
    keep : callable
        ``keep(input, outputs) -> values``: what the test looks at, from a chunk of released
        outputs of ``input`` (category ids or rows for ``table``/``reference``; PIT values in
        [0, 1] for ``uniform``).
    table : callable, optional
        ``table(input) -> probabilities`` of every category id (``kind="table"``).
    reference : callable, optional
        ``reference(input, n, rng) -> outputs`` of the reference law (``kind="reference"``), kept
        with ``keep`` as the mechanism's are.
    """

    description: str
    kind: str
    keep: Callable[[object, np.ndarray], np.ndarray] = field(repr=False)
    table: Callable[[object], np.ndarray] | None = field(default=None, repr=False)
    reference: Sampler | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in CONFORMANCE_KINDS:
            raise ParameterError(f"conformance kind must be one of {CONFORMANCE_KINDS}, got {self.kind!r}")
        if self.kind == "table" and self.table is None:
            raise ParameterError("a 'table' conformance test needs table(input) -> probabilities")
        if self.kind == "reference" and self.reference is None:
            raise ParameterError("a 'reference' conformance test needs a reference sampler")


@dataclass(frozen=True)
class ConformanceResult:
    """The outcome of a conformance test (frozen; ``to_dict`` is the ``conformance`` object of ``--json``).

    ``p_value`` is the Bonferroni-combined ``min(1, 2 min(p_a, p_b))``; ``passed`` is
    ``p_value >= alpha``.
    """

    passed: bool
    p_value: float
    statistic: float
    test: str
    alpha: float
    description: str

    def to_dict(self) -> dict[str, bool | float | str]:
        return {"passed": self.passed, "p_value": self.p_value, "statistic": self.statistic, "test": self.test,
                "alpha": self.alpha}


def chi2_goodness_of_fit(ids: np.ndarray, probs: np.ndarray) -> tuple[float, float]:
    """Pearson's χ² of category counts against probabilities: ``(statistic, p-value)``.

    Cells are taken in decreasing order of probability and merged consecutively into bins of
    expected count at least 5 (the last bin joins its predecessor if smaller), so a law spread
    over thousands of rare words keeps its likeliest outputs in bins of their own.

    >>> from textdp._rng import make_rng
    >>> rng = make_rng(0)
    >>> p = np.array([0.5, 0.3, 0.2])
    >>> round(chi2_goodness_of_fit(rng.choice(3, 5000, p=p), p)[1], 2) > 0.01
    True
    >>> chi2_goodness_of_fit(rng.choice(3, 5000, p=[0.4, 0.4, 0.2]), p)[1] < 1e-6
    True
    """
    from scipy.stats import chi2

    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    x = np.asarray(ids, dtype=np.int64).reshape(-1)
    if x.size and (x.min() < 0 or x.max() >= p.size):
        raise ParameterError("an output outside the law's support")
    n = x.size
    obs = np.bincount(x, minlength=p.size).astype(np.float64)
    exp = n * p / p.sum()
    if np.any((exp == 0) & (obs > 0)):
        return math.inf, 0.0  # an output the law gives probability 0
    order = np.argsort(-exp, kind="stable")
    before = np.concatenate([[0.0], np.cumsum(exp[order])[:-1]])
    bins = np.floor(before / 5.0).astype(np.int64)
    n_bins = int(bins.max()) + 1
    e = np.bincount(bins, weights=exp[order], minlength=n_bins)
    o = np.bincount(bins, weights=obs[order], minlength=n_bins)
    if n_bins > 1 and e[-1] < 5.0:
        e[-2] += e[-1]
        o[-2] += o[-1]
        e, o = e[:-1], o[:-1]
    keep = e > 0
    o, e = o[keep], e[keep]
    if o.size < 2:
        return 0.0, 1.0
    stat = float(((o - e) ** 2 / e).sum())
    return stat, float(chi2.sf(stat, o.size - 1))


def chi2_two_sample(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """χ² test of homogeneity of two samples of categories (rows allowed); categories seen < 10 times pooled.

    >>> from textdp._rng import make_rng
    >>> rng = make_rng(0)
    >>> round(chi2_two_sample(rng.integers(0, 4, 4000), rng.integers(0, 4, 4000))[1], 2) > 0.01
    True
    >>> chi2_two_sample(rng.integers(0, 4, 4000), rng.integers(0, 3, 4000))[1] < 1e-6
    True
    """
    from scipy.stats import chi2

    (ix, iy), k = category_ids(np.asarray(x), np.asarray(y))
    cx = np.bincount(ix, minlength=k).astype(np.float64)
    cy = np.bincount(iy, minlength=k).astype(np.float64)
    big = (cx + cy) >= 10
    cx = np.append(cx[big], cx[~big].sum())
    cy = np.append(cy[big], cy[~big].sum())
    keep = (cx + cy) > 0
    cx, cy = cx[keep], cy[keep]
    if cx.size < 2:
        return 0.0, 1.0
    nx, ny = cx.sum(), cy.sum()
    tot = cx + cy
    ex, ey = tot * nx / (nx + ny), tot * ny / (nx + ny)
    stat = float((((cx - ex) ** 2) / ex + ((cy - ey) ** 2) / ey).sum())
    return stat, float(chi2.sf(stat, cx.size - 1))


def conformance_test(conf: Conformance, kept: tuple[np.ndarray, np.ndarray], inputs: tuple[object, object],
                     n: int, rng: np.random.Generator, alpha: float) -> ConformanceResult:
    """Run the test on the kept values of the two inputs' outputs (``kept``) at level ``alpha``.

    ``n``: outputs per input (the reference sampler draws as many, in chunks of 16,384).
    """
    from scipy.stats import kstest

    pvals, stats = [], []
    for which, values in zip(inputs, kept, strict=True):
        if conf.kind == "uniform":
            u = np.asarray(values, dtype=np.float64).reshape(-1)
            if u.size == 0 or np.any(~np.isfinite(u)) or np.any((u < 0) | (u > 1)):
                raise ParameterError("conformance: the probability integral transform must lie in [0, 1]")
            res = kstest(u, "uniform")
            stats.append(float(res.statistic))
            pvals.append(float(res.pvalue))
        elif conf.kind == "table":
            assert conf.table is not None
            s, p = chi2_goodness_of_fit(np.asarray(values), conf.table(which))
            stats.append(s)
            pvals.append(p)
        else:
            assert conf.reference is not None
            parts, done = [], 0
            while done < n:
                k = min(16_384, n - done)
                parts.append(np.asarray(conf.keep(which, np.asarray(conf.reference(which, k, rng)))))
                done += k
            s, p = chi2_two_sample(np.asarray(values), np.concatenate(parts, axis=0))
            stats.append(s)
            pvals.append(p)
    p_value = min(1.0, 2.0 * min(pvals))
    test = {"uniform": "Kolmogorov-Smirnov of the PIT against U(0, 1)", "table": "chi-square goodness of fit",
            "reference": "chi-square two-sample (homogeneity) against the reference sampler"}[conf.kind]
    return ConformanceResult(passed=bool(p_value >= alpha), p_value=float(p_value),
                             statistic=float(max(stats)), test=test, alpha=float(alpha),
                             description=conf.description)
