"""Auditing the whole privacy curve: the hockey-stick profile δ(ε′) against the claimed law's.

Why: a pure ε·d claim is tight only on events of tiny probability in high dimension (in 50-d the
loss of n-dimensional Laplace noise concentrates at ~ε·d/√50), so the event audit of
:mod:`textdp.audit.core` cannot see a sampler whose noise is halved. Such a bug moves the *whole*
privacy curve, and the curve is measurable at every ε′ with ordinary sample sizes (Nasr et al.,
"Tight auditing of differentially private machine learning", USENIX Security 2023; Dong, Roth & Su,
"Gaussian differential privacy", JRSS-B 2022, for the equivalent f-DP trade-off view).

The claim. A mechanism here claims a *law*: "n-dimensional Laplace noise with parameter ε",
"words drawn with probability ∝ exp(−ε d/2)". For neighbours ``a``, ``b`` that law has the
privacy-loss statistic ``L(o) = ln p_a(o)/p_b(o)`` (computed by the case from the *claimed*
parameters: ``ε(||z − b|| − ||z − a||)`` for Laplace noise, a table of log-probabilities for an
exponential mechanism) and the privacy profile

    δ_claim(ε′) = sup_E P_a(E) − e^{ε′} P_b(E) = E_{o∼P_a}[(1 − e^{ε′ − L(o)})₊],

attained by the event ``E_{ε′} = {o : L(o) > ε′}``. The claimed law is (ε′, δ_claim(ε′))-DP for
this pair at every ε′ at once (equivalently: its f-DP trade-off curve), and that is the guarantee
a correct implementation inherits. The profile is computed independently of the mechanism object:
exactly from the score table (:func:`exact_profile`) or by simulating the claimed law with the
case's own numpy code (:func:`simulated_profile`, with an empirical-Bernstein upper band).

The test. The outputs of the mechanism under test are drawn from both inputs (``n`` each); for
each ε′ of a fixed grid the fixed event ``E_{ε′}`` (fixed before sampling: it depends only on the
claim) gives the lower confidence bound

    δ_lo(ε′) = CP_lo(#{L > ε′ | a}) − e^{ε′} CP_hi(#{L > ε′ | b})

on ``P_a(E) − e^{ε′}P_b(E)``, which is at most the mechanism's true δ(ε′). A **violation** is a
grid point where ``δ_lo(ε′) > δ_claim(ε′)`` (upper band): with the stated confidence the
mechanism's profile exceeds the claimed law's at that ε′, i.e. the implementation is less private
than the law it claims. Bonferroni over the grid points and the three bounds keeps the false-alarm
rate at most ``1 − confidence`` whatever the mechanism (the bounds are exact binomial ones).

What a pass means: no grid point where the mechanism is *shown* to be less private than its
claimed law, at this sample size. It is evidence, not proof: another pair, event or ε′, or a bug
that leaks only in rare outputs, can go unseen. Power is stated against a concrete alternative,
the same law with its noise scale multiplied by ``c < 1`` (BENCHMARKS.md: the largest ``c`` detected
with 95% power at the default sample size, per case). The test is one-sided: a mechanism with
*more* noise than claimed passes, as it should.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ParameterError, ParameterTypeError
from ..progress import ProgressCallback

#: ``sample(input, n, rng)``: ``n`` outputs of the mechanism under test on one of the audit's two
#: inputs. The input is whatever the case chose (a word row, a bag of rows, a matrix, a label), so
#: its type is the sampler's own; textdp only passes it through.
Sampler = Callable[[Any, int, np.random.Generator], np.ndarray]

__all__ = [
    "CURVE_POINTS",
    "ClaimedProfile",
    "CurveResult",
    "PrivacyCurve",
    "category_ids",
    "curve_test",
    "draw_in_chunks",
    "exact_profile",
    "hockey_stick",
    "simulated_profile",
]

#: Grid points ε′ of a curve audit (every built-in case).
CURVE_POINTS = 12

#: ``claimed(grid, alpha, rng) -> (point, upper)``: the claimed law's δ(ε′) on the grid and an
#: upper confidence band at level ``alpha`` (equal to the point for an exact profile).
ClaimedProfile = Callable[[np.ndarray, float, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def hockey_stick(loss: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``mean((1 − e^{ε′ − L})₊)`` for each ε′ of ``grid``: δ(ε′) from samples of the exact loss under ``P_a``.

    >>> hockey_stick(np.array([1.0, -1.0]), np.array([0.0, 1.0])).round(4).tolist()
    [0.3161, 0.0]
    """
    lo = np.asarray(loss, dtype=np.float64).reshape(-1)
    g = np.asarray(grid, dtype=np.float64).reshape(-1)
    out = np.empty(g.size)
    for j, e in enumerate(g):
        out[j] = float(np.mean(np.maximum(0.0, -np.expm1(np.minimum(e - lo, 700.0)))))
    return out


def exact_profile(logp_a: np.ndarray, logp_b: np.ndarray) -> ClaimedProfile:
    """The exact profile ``Σ_o (p_a(o) − e^{ε′} p_b(o))₊`` of two claimed discrete laws (log-probabilities).

    >>> import math
    >>> from textdp._rng import make_rng
    >>> e = 1.0; p = math.exp(e) / (1 + math.exp(e))
    >>> f = exact_profile(np.log([p, 1 - p]), np.log([1 - p, p]))
    >>> pt, up = f(np.array([0.0, 1.0]), 0.05, make_rng(0))
    >>> pt.round(4).tolist()  # randomised response: (e^ε - e^ε') / (1 + e^ε)
    [0.4621, 0.0]
    """
    pa = np.exp(np.asarray(logp_a, dtype=np.float64))
    pb = np.exp(np.asarray(logp_b, dtype=np.float64))

    def claimed(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        g = np.asarray(grid, dtype=np.float64)
        pt = np.array([float(np.maximum(pa - math.exp(e) * pb, 0.0).sum()) for e in g])
        return pt, pt + 1e-12

    return claimed


def simulated_profile(sample_loss: Callable[[int, np.random.Generator], np.ndarray], n: int) -> ClaimedProfile:
    """The claimed profile estimated from ``n`` draws of the exact loss under the claimed law from ``a``.

    ``sample_loss(n, rng)`` simulates the *claimed* law (the case's own code, not the mechanism's
    sampler). The upper band is Maurer & Pontil's empirical Bernstein bound on the mean of the
    integrand ``(1 − e^{ε′−L})₊ ∈ [0, 1]``: ``mean + sqrt(2 V ln(2/α)/n) + 7 ln(2/α)/(3(n − 1))``.
    """
    if n < 2:
        raise ParameterError("simulated_profile needs n >= 2")

    def claimed(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        g = np.asarray(grid, dtype=np.float64)
        loss = np.asarray(sample_loss(n, rng), dtype=np.float64).reshape(-1)
        pt = np.empty(g.size)
        up = np.empty(g.size)
        log_term = math.log(2.0 / alpha)
        for j, e in enumerate(g):
            x = np.maximum(0.0, -np.expm1(np.minimum(e - loss, 700.0)))
            m = float(x.mean())
            v = float(x.var(ddof=1))
            pt[j] = m
            up[j] = min(1.0, m + math.sqrt(2.0 * v * log_term / loss.size) + 7.0 * log_term / (3.0 * (loss.size - 1)))
        return pt, up

    return claimed


@dataclass(frozen=True)
class PrivacyCurve:
    """What a case needs for the curve audit.

    Attributes
    ----------
    sample : callable
        ``sample(input, n, rng) -> outputs``: the mechanism under test (its noisy vectors, its words).
    loss : callable or None
        ``loss(outputs) -> (n,)``: the claimed law's exact privacy loss ``ln p_a(o)/p_b(o)``.
        ``None``: the loss of the released outputs is not known in closed form (a noisy vector
        decoded to a word); the events ``{L̂ > ε′}`` are then *selected* on the first half of the
        event audit's outputs (``L̂`` the smoothed empirical log ratio of each output) and
        evaluated on the second half, against a claimed profile that bounds the released
        outputs' by post-processing (the noise's profile). Needs ``reuse_outputs``.
    claimed : ClaimedProfile
        The claimed law's profile (:func:`exact_profile` or :func:`simulated_profile`).
    grid : tuple of float
        The ε′ values tested (fixed in advance).
    description : str
        Public one-line description (what is sampled, how the claim is computed).
    chunk : int
        Outputs drawn per call of ``sample``.
    reuse_outputs : bool
        ``sample`` is the event audit's own sampler: the curve reuses its released outputs (the
        claimed loss is computed chunk by chunk as they are drawn) instead of drawing again. The
        curve's events are fixed by the claim before sampling (or selected on a half the
        evaluation never sees), so sharing the outputs keeps the union bound valid.
    """

    sample: Sampler = field(repr=False)
    loss: Callable[[np.ndarray], np.ndarray] | None = field(repr=False)
    claimed: ClaimedProfile = field(repr=False)
    grid: tuple[float, ...]
    description: str = ""
    chunk: int = 65_536
    reuse_outputs: bool = False

    def __post_init__(self) -> None:
        if not (callable(self.sample) and (self.loss is None or callable(self.loss)) and callable(self.claimed)):
            raise ParameterTypeError("PrivacyCurve needs callables sample, loss and claimed")
        if self.loss is None and not self.reuse_outputs:
            raise ParameterError("a curve with selected events (loss=None) reuses the event audit's outputs")
        g = np.asarray(self.grid, dtype=np.float64)
        if g.ndim != 1 or g.size == 0 or not np.all(np.isfinite(g)) or np.any(g < 0):
            raise ParameterError("PrivacyCurve.grid must be a non-empty list of finite epsilon' >= 0")


@dataclass(frozen=True)
class CurveResult:
    """The outcome of a curve audit (frozen; ``to_dict`` is the ``curve`` object of ``textdp audit --json``).

    ``excess`` is ``max_ε′ δ_lo(ε′) − δ_claim_upper(ε′)`` (> 0: violation); ``epsilon_prime``,
    ``delta_lower``, ``delta_estimate`` and ``delta_claimed`` describe the grid point where it is largest.
    """

    passed: bool
    excess: float
    epsilon_prime: float
    delta_lower: float
    delta_estimate: float
    delta_claimed: float
    grid_points: int
    description: str

    def to_dict(self) -> dict[str, bool | float | int]:
        return {
            "passed": self.passed,
            "epsilon_prime": self.epsilon_prime,
            "delta_lower_bound": self.delta_lower,
            "delta_estimate": self.delta_estimate,
            "delta_claimed": self.delta_claimed,
            "grid_points": self.grid_points,
        }


def category_ids(*arrays: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Category ids of the (1-D or row) outputs of several samples, shared across them: ``(ids, count)``.

    >>> [x.tolist() for x in category_ids(np.array([5, 7]), np.array([7, 9]))[0]]
    [[0, 1], [1, 2]]
    """
    pooled = np.concatenate(arrays, axis=0)
    if pooled.ndim == 1:
        _, inv = np.unique(pooled, return_inverse=True)
    else:
        _, inv = np.unique(pooled.reshape(len(pooled), -1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    cuts = np.cumsum([0] + [len(a) for a in arrays])
    return [inv[cuts[i]: cuts[i + 1]] for i in range(len(arrays))], int(inv.max()) + 1 if inv.size else 1


def draw_in_chunks(sample: Sampler, which: object, n: int, chunk: int, rng: np.random.Generator,
                   keep: Callable[[np.ndarray], np.ndarray], who: str,
                   tick: Callable[[int], None] | None = None) -> np.ndarray:
    """``n`` outputs of ``sample(which, k, rng)`` drawn ``chunk`` at a time, each chunk reduced by ``keep``.

    Only the kept parts (atoms, loss values) stay in memory; ``tick(k)`` follows each chunk.
    The event audit and the curve audit both draw this way.
    """
    parts = []
    done = 0
    while done < n:
        k = min(chunk, n - done)
        out = np.asarray(sample(which, k, rng))
        if out.shape[0] != k:
            raise ParameterError(f"{who}: sample(input, {k}, rng) returned {out.shape[0]} outputs")
        parts.append(keep(out))
        done += k
        if tick is not None:
            tick(k)
    return np.concatenate(parts, axis=0)


def _draw(curve: PrivacyCurve, which: object, n: int, rng: np.random.Generator,
          tick: Callable[[int], None]) -> np.ndarray:
    """``n`` values of the claimed privacy loss of the outputs from ``which``."""

    assert curve.loss is not None
    claimed_loss = curve.loss

    def loss(out: np.ndarray) -> np.ndarray:
        values = np.asarray(claimed_loss(out), dtype=np.float64).reshape(-1)
        if values.size != out.shape[0] or not np.all(np.isfinite(values)):
            raise ParameterError("the claimed privacy-loss statistic must be finite for every output")
        return values

    return draw_in_chunks(curve.sample, which, n, curve.chunk, rng, loss, "the curve sampler", tick)


def curve_test(curve: PrivacyCurve, input_a: object, input_b: object, n: int, rng: np.random.Generator,
               alpha: float, progress: ProgressCallback | None = None, done: int = 0, total: int = 0,
               outputs: tuple[np.ndarray, np.ndarray] | None = None,
               losses: tuple[np.ndarray, np.ndarray] | None = None,
               atoms: tuple[np.ndarray, np.ndarray] | None = None) -> CurveResult:
    """Run the curve audit with ``n`` outputs per input at overall false-alarm level ``alpha``.

    ``outputs``: the ``(a, b)`` outputs already drawn (``reuse_outputs``); ``losses``: their
    claimed loss values, computed as they were drawn; ``atoms``: the discrete outputs of a curve
    with selected events (``loss=None``). Else the outputs are drawn here.

    >>> import math
    >>> from textdp._rng import make_rng
    >>> def rr(bit, n, rng):
    ...     return np.where(rng.random(n) < math.e / (1 + math.e), bit, 1 - bit)
    >>> p = math.e / (1 + math.e)
    >>> def loss(o):  # randomised response at the claimed eps = 1
    ...     return np.where(o == 0, 1.0, -1.0)
    >>> c = PrivacyCurve(rr, loss, exact_profile(np.log([p, 1 - p]), np.log([1 - p, p])), (0.0, 0.5))
    >>> curve_test(c, 0, 1, 20_000, make_rng(0), 0.05).passed
    True
    >>> def rr2(bit, n, rng):  # eps = 2 in the sampler, claim eps = 1
    ...     return np.where(rng.random(n) < math.e**2 / (1 + math.e**2), bit, 1 - bit)
    >>> r = curve_test(PrivacyCurve(rr2, loss, c.claimed, c.grid), 0, 1, 20_000, make_rng(0), 0.05)
    >>> r.passed, round(r.delta_estimate, 2), round(r.delta_claimed, 3)
    (False, 0.69, 0.288)
    """
    a_share = alpha / (3.0 * len(curve.grid))  # Bonferroni: the a-bound, the b-bound and the claim's band at each point
    count = [done]

    def tick(k: int) -> None:
        count[0] += k
        if progress is not None:
            progress(count[0], max(total, count[0]))

    if curve.loss is None:
        if atoms is None:
            raise ParameterError("a curve with selected events needs the event audit's outputs")
        return _selected_curve(curve, atoms, n, a_share, rng)
    if losses is not None or outputs is not None:
        pair = losses if losses is not None else tuple(curve.loss(o) for o in outputs)  # type: ignore[union-attr]
        la, lb = (np.asarray(x, dtype=np.float64).reshape(-1) for x in pair)
        if la.size != n or lb.size != n or not (np.all(np.isfinite(la)) and np.all(np.isfinite(lb))):
            raise ParameterError("the claimed privacy-loss statistic must be finite for every output")
    else:
        la = _draw(curve, input_a, n, rng, tick)
        lb = _draw(curve, input_b, n, rng, tick)
    return _verdict(curve, la, lb, a_share, rng)


def _verdict(curve: PrivacyCurve, la: np.ndarray, lb: np.ndarray, a_share: float,
             rng: np.random.Generator) -> CurveResult:
    """The verdict from the loss values ``la``, ``lb`` (one per output of each input) of the fixed events ``{L > ε′}``.

    Both samples have the same size ``m``; each bound holds at level ``a_share`` (the caller's Bonferroni share).
    """
    from scipy.stats import beta as _beta

    grid = np.asarray(curve.grid, dtype=np.float64)
    m = la.size
    ka = (la[:, None] > grid[None, :]).sum(axis=0).astype(np.float64)
    kb = (lb[:, None] > grid[None, :]).sum(axis=0).astype(np.float64)
    pa_lo = np.where(ka > 0, _beta.ppf(a_share, np.maximum(ka, 1.0), m - ka + 1.0), 0.0)
    pb_hi = np.where(kb < m, _beta.ppf(1.0 - a_share, kb + 1.0, np.maximum(m - kb, 1.0)), 1.0)
    lower = pa_lo - np.exp(grid) * pb_hi
    estimate = ka / m - np.exp(grid) * kb / m
    claim_pt, claim_up = curve.claimed(grid, a_share, rng)
    excess = lower - np.asarray(claim_up, dtype=np.float64)
    j = int(np.argmax(excess))
    return CurveResult(
        passed=bool(excess[j] <= 0.0),
        excess=float(excess[j]),
        epsilon_prime=float(grid[j]),
        delta_lower=float(max(lower[j], 0.0)),
        delta_estimate=float(estimate[j]),
        delta_claimed=float(claim_pt[j]),
        grid_points=int(grid.size),
        description=curve.description,
    )


def _selected_curve(curve: PrivacyCurve, atoms: tuple[np.ndarray, np.ndarray], n: int, a_share: float,
                    rng: np.random.Generator) -> CurveResult:
    """The curve with events selected on the first half of the outputs and evaluated on the second.

    ``L̂(o) = ln((k_a(o) + ½)/(k_b(o) + ½))`` on the first half (0 for an output unseen there); for
    each ε′ the event ``{L̂ > ε′}`` is fixed before the second half is looked at, so its
    Clopper–Pearson bounds on the second half are valid as in :func:`curve_test`.
    """
    half = n // 2
    a, b = (np.asarray(x) for x in atoms)
    (sa, sb, ea, eb), k = category_ids(a[:half], b[:half], a[half:], b[half:])
    ca, cb = np.bincount(sa, minlength=k), np.bincount(sb, minlength=k)
    lhat = np.log((ca + 0.5) / (cb + 0.5))
    lhat[(ca + cb) == 0] = 0.0
    return _verdict(curve, lhat[ea], lhat[eb], a_share, rng)
