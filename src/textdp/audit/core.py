"""The estimator behind ``textdp audit``: a lower confidence bound on a mechanism's privacy loss.

A mechanism ``M`` is (ε, δ)-DP when, for every pair of neighbouring inputs ``a``, ``b`` and every
set of outputs ``E``, ``P[M(a) ∈ E] <= e^ε P[M(b) ∈ E] + δ``. So every event ``E`` and
neighbouring pair give a *lower bound* on the ε the mechanism can honestly claim:

    ε >= ln((P_a(E) - δ) / P_b(E)).

The auditor estimates that quantity from samples, in the style of Google's DP stochastic tester
(Gilbert & McMillan 2018), DP-Sniper (Bichsel et al., S&P 2021) and Jagielski, Ullman & Oprea
(NeurIPS 2020):

1. draw ``n`` outputs from ``M(a)`` and ``n`` from ``M(b)`` (vectorised, in chunks);
2. map every output to an *atom*: the output itself for discrete outputs (decoded words, bags of
   ids) or a bin of a one-dimensional real statistic (for example the projection onto ``a - b``);
3. **select** an event on the first half of each sample. Candidates are the prefixes of an
   ordering of the atoms, in both directions (``a`` over ``b`` and ``b`` over ``a``): for a
   histogram, its upper and lower tails (threshold events, optimal when the likelihood ratio is
   monotone in the statistic); for discrete outputs, the atoms ranked by a lower confidence limit
   of their likelihood ratio on the first quarter of the samples (the Neyman–Pearson shape). The
   candidate with the largest Clopper–Pearson bound on the rest of the selection half wins;
4. **evaluate** that one event on the second, independent half: with one-sided Clopper–Pearson
   bounds ``P_a^lo`` and ``P_b^hi`` at level ``(1 - confidence) / 2`` each,

       lower_bound = ln((P_a^lo(E) - δ) / P_b^hi(E))

   holds with probability ``>= confidence`` for the true loss of ``E``. Because the event was
   chosen without looking at the second half, no multiple-testing correction is needed.

``passed`` is ``lower_bound <= claimed ε``: the audit found no evidence against the claim. A pass
is not a proof of privacy (the auditor only sees the pair and events it tries); a failure at 95%
confidence is strong evidence of a bug, with a false alarm rate of at most 5% per audit.

Cases whose claimed law is known (n-dimensional Laplace noise, the exponential mechanisms,
randomised response, CusText, SynTF's one-term law, the topic matrices' discrete Gaussian and
Laplace noise; ``docs/audit.md`` lists them) also carry a :class:`~textdp.audit.curve.PrivacyCurve`: the whole privacy profile δ(ε′) of the
mechanism under test is compared with the claimed law's (:mod:`textdp.audit.curve`), which sees a
halved noise scale in 50 dimensions where the worst-case event cannot. The two tests then share
the error budget (``(1 − confidence)/2`` each) and ``passed`` requires both.

References
----------
A. C. Gilbert, A. McMillan. Property testing for differential privacy. Allerton 2018 (and Google's
``differential-privacy`` stochastic tester). B. Bichsel, S. Steffen, I. Bogunovic, M. Vechev.
DP-Sniper: black-box discovery of differential privacy violations using classifiers. IEEE S&P
2021. M. Jagielski, J. Ullman, A. Oprea. Auditing differentially private machine learning: how
private is private SGD? NeurIPS 2020. C. J. Clopper, E. S. Pearson. The use of confidence or
fiducial limits illustrated in the case of the binomial. Biometrika 26 (1934).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import beta as _beta

from .._rng import make_rng
from .._validation import check_choice, check_positive_int, check_probability
from ..errors import ParameterError, ParameterTypeError
from ..progress import ProgressCallback
from .conformance import Conformance, ConformanceResult, conformance_test
from .curve import CurveResult, PrivacyCurve, Sampler, curve_test

__all__ = [
    "DEFAULT_SAMPLES",
    "EVENT_KINDS",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "AuditCase",
    "AuditResult",
    "clopper_pearson",
    "projection_statistic",
    "run_audit",
]

#: How outputs become events: ``discrete`` (each distinct output is an atom) or ``histogram``
#: (bins of a one-dimensional real statistic of the output).
EVENT_KINDS = ("discrete", "histogram")
#: Fewest samples per input the auditor accepts (half of them select the event).
MIN_SAMPLES = 200
#: Most samples per input (the atoms of both samples are kept in memory: ~16 bytes each).
MAX_SAMPLES = 20_000_000
#: Outputs drawn per input when neither the caller nor the case says otherwise.
DEFAULT_SAMPLES = 100_000



def projection_statistic(a: ArrayLike, b: ArrayLike) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic ``<x - (a + b)/2, a - b> / ||a - b||`` of a batch of outputs ``x``.

    For additive noise that is spherical (Gaussian, n-dimensional Laplace) this is the
    likelihood-ratio direction, so its tails are the most distinguishing events.

    >>> f = projection_statistic(np.array([1.0, 0.0]), np.array([0.0, 0.0]))
    >>> f(np.array([[1.0, 5.0], [0.0, -2.0]])).tolist()
    [0.5, -0.5]
    """
    a64 = np.asarray(a, dtype=np.float64).reshape(-1)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1)
    diff = a64 - b64
    norm = float(np.linalg.norm(diff))
    if norm == 0.0:
        raise ParameterError("the two audit inputs are equal; a projection statistic needs a != b")
    u = diff / norm
    mid = (a64 + b64) / 2.0

    def statistic(x: np.ndarray) -> np.ndarray:
        flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        return (flat - mid) @ u

    return statistic


@dataclass(frozen=True)
class AuditCase:
    """One mechanism at one setting, with the neighbouring pair the audit tries.

    Attributes
    ----------
    mechanism : str
        Registered mechanism name (``earth-movers``, ``topicdp``, ...).
    pair : str
        Short public description of the two inputs (toy or public inputs only).
    input_a, input_b : object
        The neighbouring inputs, chosen where the privacy loss should be largest.
    sample : callable
        ``sample(input, n, rng) -> numpy.ndarray`` with ``n`` independent outputs along axis 0.
    claimed_epsilon : float
        The ε the mechanism claims *for this pair* (for metric DP: ε times the pair's distance).
    claimed_delta : float
        The δ of the claim (0 for pure DP).
    events : {"discrete", "histogram"}
        ``discrete``: each distinct output (a row for 2-D outputs) is an atom. ``histogram``:
        ``statistic`` maps the outputs to reals, binned at quantiles of the selection half.
    statistic : callable, optional
        For ``histogram``: ``statistic(outputs) -> (n,)`` floats (default: the projection onto
        ``input_a - input_b``, :func:`projection_statistic`).
    bins : int
        Number of quantile bins for ``histogram`` (tails are resolved geometrically).
    chunk : int
        Outputs drawn per call of ``sample`` (bounds the memory of one call).
    curve : PrivacyCurve, optional
        The claimed law's privacy curve, audited beside the event (:mod:`textdp.audit.curve`).
    conformance : Conformance, optional
        The released outputs against an independent reference of the paper's law
        (:mod:`textdp.audit.conformance`), run when the audit asks for it.
    default_samples : int
        Outputs per input when the caller gives none (the release path of the topic matrices
        draws exact integer noise one release at a time: 10^4 there, 10^5 elsewhere).
    """

    mechanism: str
    pair: str
    input_a: object = field(repr=False)
    input_b: object = field(repr=False)
    sample: Sampler = field(repr=False)
    claimed_epsilon: float
    claimed_delta: float = 0.0
    events: str = "discrete"
    statistic: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    bins: int = 128
    chunk: int = 65_536
    curve: PrivacyCurve | None = field(default=None, repr=False)
    conformance: Conformance | None = field(default=None, repr=False)
    default_samples: int = DEFAULT_SAMPLES

    def __post_init__(self) -> None:
        if not callable(self.sample):
            raise ParameterTypeError("AuditCase.sample must be callable: sample(input, n, rng) -> array")
        check_choice(self.events, "event kind", EVENT_KINDS)
        if not (math.isfinite(self.claimed_epsilon) and self.claimed_epsilon >= 0):
            raise ParameterError(f"claimed_epsilon must be a finite number >= 0, got {self.claimed_epsilon!r}")
        if not (0.0 <= self.claimed_delta < 1.0):
            raise ParameterError(f"claimed_delta must lie in [0, 1), got {self.claimed_delta!r}")
        check_positive_int(self.bins, "bins", minimum=2)
        check_positive_int(self.chunk, "chunk")
        if self.curve is not None and self.curve.loss is None and self.events != "discrete":
            raise ParameterError("a curve whose events are selected on the outputs needs discrete events")
        check_positive_int(self.default_samples, "default_samples", minimum=MIN_SAMPLES)

    def atoms_of(self, outputs: np.ndarray) -> np.ndarray:
        """What the auditor keeps of a batch of outputs: the statistic, or the discrete outputs."""
        out = np.asarray(outputs)
        if self.events == "histogram":
            # histogram cases without a statistic of their own have vector inputs
            stat = self.statistic or projection_statistic(cast("ArrayLike", self.input_a),
                                                          cast("ArrayLike", self.input_b))
            values = np.asarray(stat(out), dtype=np.float64).reshape(-1)
            if values.shape[0] != out.shape[0]:
                raise ParameterError(f"{self.mechanism}: the statistic returned {values.shape[0]} values "
                                     f"for {out.shape[0]} outputs")
            if not np.all(np.isfinite(values)):
                raise ParameterError(f"{self.mechanism}: the audit statistic produced NaN or infinite values")
            return values
        if out.ndim == 1:
            return out
        return np.ascontiguousarray(out.reshape(out.shape[0], -1))


@dataclass(frozen=True)
class AuditResult:
    """The outcome of one audit (frozen). ``to_dict`` gives the JSON of ``textdp audit --json``.

    Attributes
    ----------
    mechanism : str
        The audited mechanism.
    claimed_epsilon, claimed_delta : float
        The (ε, δ) claim tested for this pair.
    estimated_epsilon : float
        Plug-in estimate ``ln((p_a - δ) / p_b)`` of the selected event on the evaluation half
        (``inf`` when the event never occurred from input b; ``0`` when ``p_a <= δ``).
    lower_bound : float
        Clopper–Pearson lower confidence bound on the privacy loss (>= 0).
    samples : int
        Outputs drawn from each input.
    events : int
        Candidate events compared on the selection half.
    passed : bool
        ``lower_bound <= claimed_epsilon``.
    seeded : bool
        Whether a seed was given.
    pair : str
        The neighbouring pair tried.
    confidence : float
        Confidence level of the lower bound.
    event : str
        The selected event (public description).
    seconds : float
        Wall time of the audit.
    curve : CurveResult or None
        The privacy-curve audit, for cases that carry one (``passed`` requires it to pass too).
    conformance : ConformanceResult or None
        The conformance test, when it was asked for (``passed`` then requires it to pass too).
    privacy_passed : bool
        The privacy verdict alone (event and curve).
    """

    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    estimated_epsilon: float
    lower_bound: float
    samples: int
    events: int
    passed: bool
    seeded: bool
    pair: str
    confidence: float = 0.95
    event: str = ""
    seconds: float = 0.0
    curve: CurveResult | None = None
    conformance: ConformanceResult | None = None
    privacy_passed: bool | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON form: exactly the fields of ``textdp audit --json`` (``inf`` becomes ``null``)."""
        est: float | None = self.estimated_epsilon if math.isfinite(self.estimated_epsilon) else None
        return {
            "mechanism": self.mechanism,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "estimated_epsilon": est,
            "lower_bound": self.lower_bound,
            "samples": self.samples,
            "events": self.events,
            "passed": self.passed,
            "seeded": self.seeded,
            "pair": self.pair,
            "curve": None if self.curve is None else self.curve.to_dict(),
            "conformance": None if self.conformance is None else self.conformance.to_dict(),
            "privacy_passed": self.passed if self.privacy_passed is None else self.privacy_passed,
        }


def clopper_pearson(k: np.ndarray | int, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` for ``k`` successes out of ``n``.

    Each bound alone holds with probability ``>= 1 - alpha``.

    >>> lo, hi = clopper_pearson(np.array([0, 5, 10]), 10, 0.025)
    >>> lo.round(3).tolist(), hi.round(3).tolist()
    ([0.0, 0.187, 0.692], [0.308, 0.813, 1.0])
    """
    k_arr = np.asarray(k, dtype=np.float64)
    lo = np.where(k_arr > 0, _beta.ppf(alpha, np.maximum(k_arr, 1.0), n - k_arr + 1.0), 0.0)
    hi = np.where(k_arr < n, _beta.ppf(1.0 - alpha, k_arr + 1.0, np.maximum(n - k_arr, 1.0)), 1.0)
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


def _loss_bound(ka: np.ndarray, kb: np.ndarray, n: int, delta: float, alpha: float) -> np.ndarray:
    """CP lower bound of ``ln((P_a - δ)/P_b)`` for count vectors (−inf where ``P_a^lo <= δ``)."""
    pa_lo, _ = clopper_pearson(ka, n, alpha)
    _, pb_hi = clopper_pearson(kb, n, alpha)
    num = pa_lo - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num > 0, np.log(np.maximum(num, 1e-300)) - np.log(pb_hi), -np.inf)


def _histogram_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """Bin edges at quantiles of ``values``: linear in the middle, geometric in both tails.

    An edge value that repeats (an atom of the statistic, e.g. a clipped maximum) also gets its
    successor ``nextafter(edge, +inf)`` as an edge, so the atom forms a bin of its own.
    """
    n = values.size
    q_min = min(0.25, 3.0 / max(n, 1))
    half = max(bins // 2, 2)
    tail = np.geomspace(q_min, 0.25, half // 2)
    probs = np.unique(np.concatenate([tail, np.linspace(0.25, 0.75, half - half // 2 + 2), 1.0 - tail]))
    edges = np.unique(np.quantile(values, probs, method="inverted_cdf"))
    ordered = np.sort(values)
    repeated = (np.searchsorted(ordered, edges, side="right") - np.searchsorted(ordered, edges, side="left")) > 1
    return np.unique(np.concatenate([edges, np.nextafter(edges[repeated], np.inf)]))


def _atom_ids(case: AuditCase, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Map the samples (a_rank, b_rank, a_sel, b_sel, a_eval, b_eval) to integer atom ids.

    Histogram edges come from the selection samples only (the first four).
    """
    if case.events == "histogram":
        edges = _histogram_edges(np.concatenate(arrays[:4]), case.bins)
        return [np.searchsorted(edges, x, side="right") for x in arrays], edges.size + 1
    pooled = np.concatenate(arrays, axis=0)
    if pooled.ndim == 1:
        _, inverse = np.unique(pooled, return_inverse=True)
    else:
        _, inverse = np.unique(pooled, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    sizes = np.cumsum([0] + [len(x) for x in arrays])
    ids = [inverse[sizes[i] : sizes[i + 1]] for i in range(len(arrays))]
    return ids, int(inverse.max()) + 1 if inverse.size else 1


#: z of the lower confidence limit of an atom's log likelihood ratio used to rank discrete atoms:
#: rare atoms (3 draws against 0) rank below well-estimated ones instead of above them.
_RANK_Z = 2.0


def _candidate_orders(case: AuditCase, num: np.ndarray, den: np.ndarray, n_atoms: int) -> list[np.ndarray]:
    """Orders of atoms whose prefixes are the candidate events.

    ``histogram``: the upper and the lower tails of the statistic (threshold events, optimal
    when the likelihood ratio is monotone in the statistic). ``discrete``: the atoms seen in the
    ranking part (``num``, ``den`` are its counts), by a lower confidence limit of their log
    likelihood ratio ``ln((k_a + ½)/(k_b + ½)) - z·sqrt(1/(k_a + ½) + 1/(k_b + ½))``: the
    Neyman–Pearson shape, robust to the many rare outputs of a large vocabulary.
    """
    if case.events == "histogram":
        up = np.arange(n_atoms - 1, -1, -1)
        return [up, up[::-1].copy()]
    # only outputs seen while ranking: which outputs exist in the evaluation half must not shape the event
    seen = np.flatnonzero(num + den > 0)
    x, y = num[seen] + 0.5, den[seen] + 0.5
    score = np.log(x / y) - _RANK_Z * np.sqrt(1.0 / x + 1.0 / y)
    return [seen[np.argsort(-score, kind="stable")]]


def _describe_event(case: AuditCase, atoms: np.ndarray, n_atoms: int, first: str) -> str:
    if atoms.size == 0:
        return "none: no event is likelier than delta under either input on the selection half"
    if case.events == "histogram":
        side = "upper" if atoms[0] == n_atoms - 1 else "lower"
        return f"{side} tail of the statistic ({atoms.size} of {n_atoms} bins), more likely under input {first}"
    return (f"{atoms.size} of {n_atoms} distinct outputs, the likeliest under input {first} "
            "(ranked on a quarter of the samples)")


def _select_event(case: AuditCase, out_a: np.ndarray, out_b: np.ndarray, n: int, delta: float,
                  alpha: float) -> tuple[int, np.ndarray, int, int, np.ndarray, np.ndarray]:
    """The event chosen on the selection half: ``(direction, atoms, n_atoms, events tried, ev_a, ev_b)``.

    ``ev_a``/``ev_b`` are the atom counts of the evaluation half (never seen by the selection).
    """
    n_sel = n // 2
    # discrete atoms are ranked on the first half of the selection samples and the prefix is
    # chosen on the second; the tails of a histogram need no ranking
    n_rank = n_sel // 2 if case.events == "discrete" else 0
    parts = [out_a[:n_rank], out_b[:n_rank], out_a[n_rank:n_sel], out_b[n_rank:n_sel], out_a[n_sel:], out_b[n_sel:]]
    ids, n_atoms = _atom_ids(case, parts)
    rank_a, rank_b, sel_a, sel_b, ev_a, ev_b = (np.bincount(x, minlength=n_atoms).astype(np.float64) for x in ids)

    best = (-np.inf, 0, np.zeros(0, dtype=np.int64))  # (selection bound, direction, atoms)
    n_events = 0
    for direction, (num, den, rnum, rden) in enumerate(((sel_a, sel_b, rank_a, rank_b),
                                                        (sel_b, sel_a, rank_b, rank_a))):
        for order in _candidate_orders(case, rnum, rden, n_atoms):
            n_events += order.size
            if order.size == 0:
                continue
            bounds = _loss_bound(np.cumsum(num[order]), np.cumsum(den[order]), n_sel - n_rank, delta, alpha)
            k = int(np.argmax(bounds))
            if bounds[k] > best[0]:
                best = (float(bounds[k]), direction, order[: k + 1])
    _, direction, chosen = best
    return direction, chosen, n_atoms, n_events, ev_a, ev_b


def _evaluate_event(ev_a: np.ndarray, ev_b: np.ndarray, direction: int, chosen: np.ndarray, n_eval: int,
                    delta: float, alpha: float) -> tuple[float, float]:
    """``(lower bound, point estimate)`` of the loss of the chosen event on the evaluation half."""
    num_eval, den_eval = (ev_a, ev_b) if direction == 0 else (ev_b, ev_a)
    ka, kb = float(num_eval[chosen].sum()), float(den_eval[chosen].sum())
    bound = float(_loss_bound(np.array([ka]), np.array([kb]), n_eval, delta, alpha)[0])
    lower = max(0.0, bound) if math.isfinite(bound) else 0.0
    pa, pb = ka / n_eval, kb / n_eval
    if pa <= delta:
        estimate = 0.0
    elif pb == 0.0:
        estimate = math.inf
    else:
        estimate = max(0.0, math.log((pa - delta) / pb))
    return lower, estimate


def _draw_views(case: AuditCase, which: object, n: int, rng: np.random.Generator,
                views: dict[str, Callable[[np.ndarray], np.ndarray]],
                tick: Callable[[int], None]) -> dict[str, np.ndarray]:
    """``n`` outputs of ``which`` drawn ``case.chunk`` at a time; each chunk reduced to every view at once.

    The outputs themselves are dropped after each chunk: the atoms of the event test, the claimed
    loss of a curve that reuses them and the values of the conformance test are all computed
    from the same released outputs.
    """
    parts: dict[str, list[np.ndarray]] = {k: [] for k in views}
    done = 0
    while done < n:
        k = min(case.chunk, n - done)
        out = np.asarray(case.sample(which, k, rng))
        if out.shape[0] != k:
            raise ParameterError(f"{case.mechanism}: sample(input, {k}, rng) returned {out.shape[0]} outputs")
        for name, view in views.items():
            parts[name].append(np.asarray(view(out)))
        done += k
        tick(k)
    return {k: np.concatenate(v, axis=0) for k, v in parts.items()}


def _checked_run(case: AuditCase, samples: int | None, confidence: float, conformance: bool) -> tuple[int, float]:
    """:func:`run_audit`'s checks, in order: the outputs per input and the confidence."""
    if not isinstance(case, AuditCase):
        raise ParameterTypeError(f"case must be an AuditCase, got {type(case).__name__}")
    n = check_positive_int(case.default_samples if samples is None else samples, "samples", minimum=MIN_SAMPLES)
    if n > MAX_SAMPLES:
        raise ParameterError(f"samples must be <= {MAX_SAMPLES:,} per input (memory); got {n:,}")
    conf = check_probability(confidence, "confidence")
    if conformance and case.conformance is None:
        raise ParameterError(f"the audit case {case.mechanism!r} has no conformance test yet; run it without "
                             "--conformance (docs/audit.md lists the cases that have one)")
    return n, conf


def _views(case: AuditCase, which: object, reuse: bool,
           conformance: bool) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """What is kept of each output drawn from ``which``: its atoms, its loss (reused), its conformance view."""
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {"atoms": case.atoms_of}
    if reuse and case.curve is not None and case.curve.loss is not None:
        out["loss"] = case.curve.loss
    if conformance and case.conformance is not None:
        keep = case.conformance.keep
        out["conformance"] = lambda o: keep(which, o)
    return out


def _run_curve(case: AuditCase, spec: PrivacyCurve, n: int, gen: np.random.Generator, budget: float,
               progress: ProgressCallback | None, done: int, total: int, *, reuse: bool,
               got: tuple[dict[str, np.ndarray], dict[str, np.ndarray]]) -> CurveResult:
    """The curve test: on fresh outputs, or on the event test's atoms or losses (``reuse``)."""
    if not reuse:
        return curve_test(spec, case.input_a, case.input_b, n, gen, budget, progress, done, total)
    if spec.loss is None:
        return curve_test(spec, case.input_a, case.input_b, n, gen, budget, atoms=(got[0]["atoms"], got[1]["atoms"]))
    return curve_test(spec, case.input_a, case.input_b, n, gen, budget, losses=(got[0]["loss"], got[1]["loss"]))


def run_audit(case: AuditCase, *, samples: int | None = None,
              seed: int | np.random.Generator | np.random.SeedSequence | None = None, confidence: float = 0.95,
              progress: ProgressCallback | None = None, conformance: bool = False) -> AuditResult:
    """Audit ``case`` with ``samples`` outputs per input (see the module docstring).

    ``progress(done, total)`` is called as outputs are drawn (``total``: all outputs of the audit).

    Examples
    --------
    A randomized-response bit with ``P(truth) = e / (1 + e)`` is exactly 1-DP:

    >>> def rr(bit, n, rng):
    ...     keep = rng.random(n) < math.e / (1 + math.e)
    ...     return np.where(keep, bit, 1 - bit)
    >>> case = AuditCase("rr", "bit 0 vs bit 1", 0, 1, rr, claimed_epsilon=1.0)
    >>> r = run_audit(case, samples=20_000, seed=1)
    >>> r.passed, 0.8 < r.lower_bound < 1.0, r.events
    (True, True, 4)
    >>> run_audit(AuditCase("rr", "bit 0 vs bit 1", 0, 1, rr, claimed_epsilon=0.5),
    ...           samples=20_000, seed=1).passed
    False
    """
    n, conf = _checked_run(case, samples, confidence, conformance)
    # the requested tests share the false-alarm budget 1 - confidence: the conformance test takes
    # half of it when it runs, the event and curve tests share the rest
    total_budget = 1.0 - conf
    conf_alpha = total_budget / 2.0 if conformance else 0.0
    privacy_budget = total_budget - conf_alpha
    budget = privacy_budget / (2.0 if case.curve is not None else 1.0)
    alpha = budget / 2.0
    delta = case.claimed_delta
    t0 = time.perf_counter()
    gen = make_rng(seed)
    reuse = case.curve is not None and case.curve.reuse_outputs
    total = 4 * n if case.curve is not None and not reuse else 2 * n
    counter = [0]

    def tick(k: int) -> None:
        counter[0] += k
        if progress is not None:
            progress(counter[0], total)

    got_a = _draw_views(case, case.input_a, n, gen, _views(case, case.input_a, reuse, conformance), tick)
    got_b = _draw_views(case, case.input_b, n, gen, _views(case, case.input_b, reuse, conformance), tick)
    out_a, out_b = got_a["atoms"], got_b["atoms"]
    direction, chosen, n_atoms, n_events, ev_a, ev_b = _select_event(case, out_a, out_b, n, delta, alpha)
    lower, estimate = _evaluate_event(ev_a, ev_b, direction, chosen, n - n // 2, delta, alpha)
    curve = None if case.curve is None else _run_curve(case, case.curve, n, gen, budget, progress, counter[0], total,
                                                       reuse=reuse, got=(got_a, got_b))
    conformed = None
    if conformance and case.conformance is not None:
        conformed = conformance_test(case.conformance, (got_a["conformance"], got_b["conformance"]),
                                     (case.input_a, case.input_b), n, gen, conf_alpha)
    private_ok = bool(lower <= case.claimed_epsilon) and (curve is None or curve.passed)
    return AuditResult(
        mechanism=case.mechanism,
        claimed_epsilon=float(case.claimed_epsilon),
        claimed_delta=float(delta),
        estimated_epsilon=float(estimate),
        lower_bound=lower,
        samples=n,
        events=n_events,
        passed=private_ok and (conformed is None or conformed.passed),
        seeded=seed is not None,
        pair=case.pair,
        confidence=conf,
        event=_describe_event(case, chosen, n_atoms, "a" if direction == 0 else "b"),
        seconds=time.perf_counter() - t0,
        curve=curve,
        conformance=conformed,
        privacy_passed=private_ok,
    )

