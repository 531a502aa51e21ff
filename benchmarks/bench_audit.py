"""The large audit run of BENCHMARKS.md: every registered mechanism at 10^6 samples per input.

For each case it prints one markdown row: mechanism, ε, δ, the claimed loss of the pair, the
plug-in estimate, the 95% Clopper–Pearson lower bound, samples per input, candidate events, the
verdict and the wall time. With ``--broken`` it also audits the deliberately broken variants of
``tests/test_audit.py`` at the same sample size (the same test must flag them).

    python benchmarks/bench_audit.py --samples 1000000 --seed 1
    python benchmarks/bench_audit.py --samples 1000000 --seed 1 --broken

Issue 21 (the privacy-curve audit):

    python benchmarks/bench_audit.py --power --seeds 40        # smallest noise error detected, 95% power
    python benchmarks/bench_audit.py --power --correct --seeds 200   # the curve test's false alarms (c = 1)
    python benchmarks/bench_audit.py --false-alarms --seeds 20 --only earth-movers cmp santext tem
    python benchmarks/bench_audit.py --planted --seed 1   # noise x0.5, eps x3 planted; default size

``--power`` runs the curve test of each case (earth-movers, cmp, santext, tem) at the default
10^5 samples per input and at its share ``(1 - 0.95)/2`` of the error budget, on outputs of the
mechanism's own law with the noise scale multiplied by ``c``: for the Laplace-noise cases
``laplace_noise`` at ``ε/c`` (the sampler the mechanisms call), for the exponential mechanisms
words drawn from the mechanism's exact ``probabilities`` at ``ε/c`` (the law their samplers are
χ²-tested against), which is what makes 40 seeds x 7 scales x 4 cases affordable. ``--false-alarms``
runs the full ``textdp audit NAME`` (events and curve, the real samplers) on the unmodified
mechanisms over ``--seeds`` seeds.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from textdp.accounting.gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)
from textdp.audit import AuditCase, audit, audit_case_names, run_audit
from textdp.audit.topic_cases import TOPIC_SENSITIVITY, matrix_case
from textdp.audit.word_cases import word_pair_case
from textdp.topics.noise import GaussianNoise

#: (mechanism, epsilon, delta) rows; None = the case's default.
ROWS: list[tuple[str, float | None, float | None]] = [
    ("earth-movers", 10.0, None),
    ("earth-movers", 5.0, None),
    ("earth-movers-noise", 10.0, None),
    ("earth-movers-noise", 5.0, None),
    ("laplace", 1.0, None),
    ("laplace", 3.0, None),
    ("topicdp", 1.0, 1e-4),
    ("topicdp", 3.0, 1e-5),
    ("topicdp-thesis", 1.0, 1e-4),
    ("mvg", 1.0, 1e-4),
    ("mvg-directional", 1.0, 1e-4),
    ("earth-movers-2d", 10.0, None),
    ("cmp", 10.0, None),
    ("mahalanobis", 10.0, None),
    ("vickrey", 10.0, None),
    ("tem", 2.0, None),
    ("santext", 2.0, None),
    ("santext+", 2.0, None),
    ("custext", 3.0, None),
    ("custext+", 3.0, None),
    ("random", 3.0, None),
]


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def row(label: str, eps: float | None, delta: float, r: object) -> str:
    e = "-" if eps is None else f"{eps:g}"
    return (f"| {label} | {e} | {delta:g} | {_fmt(r.claimed_epsilon)} | {_fmt(r.estimated_epsilon)} | "  # type: ignore[attr-defined]
            f"**{_fmt(r.lower_bound)}** | {r.samples:,} | {r.events:,} | "  # type: ignore[attr-defined]
            f"{'pass' if r.passed else 'VIOLATION'} | {r.seconds:.1f} |")  # type: ignore[attr-defined]


def _gaussian_sampler(sigma: float) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    def sample(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.normal(0.0, sigma, (n, 1))

    return sample


def broken_cases() -> list[tuple[str, float, AuditCase]]:
    from textdp.embeddings import ExactDecoder, load_embeddings
    from textdp.mechanisms.laplace import laplace_noise

    class ScaledLaplace:
        def __init__(self, scale: float) -> None:
            self.scale = scale

        def randomize(self, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return matrix + rng.laplace(0.0, self.scale, size=np.shape(matrix))

    from textdp.audit.topic_cases import l1_matrix_case

    out: list[tuple[str, float, AuditCase]] = [
        ("laplace, scale / 2", 1.0, l1_matrix_case("laplace", ScaledLaplace(1.0), claimed_epsilon=1.0)),
        ("laplace, scale / 4", 1.0, l1_matrix_case("laplace", ScaledLaplace(0.5), claimed_epsilon=1.0)),
        ("topicdp, sensitivity / 2", 3.0, matrix_case(
            "topicdp", GaussianNoise(epsilon=3.0, delta=1e-4, sensitivity=TOPIC_SENSITIVITY / 2),
            sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=3.0, claimed_delta=1e-4)),
    ]
    for label, sigma in (("gaussian, classic sigma at (8, 0.2)", classic_gaussian_sigma(8.0, 0.2, 1.0)),
                         ("gaussian, analytic sigma at (8, 0.2)", analytic_gaussian_sigma(8.0, 0.2, 1.0))):
        out.append((label, 8.0, AuditCase(
            "gaussian", "0 vs 1", np.array([0.0]), np.array([1.0]),
            _gaussian_sampler(sigma),
            claimed_epsilon=8.0, claimed_delta=0.2, events="histogram")))
    emb = load_embeddings(vocab_size=5000)
    vec = emb.vectors
    dec = ExactDecoder(vec)

    def decoded(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        z = vec[ids.reshape(-1)].astype(np.float64) + laplace_noise(ids.size, 50, 10.0, rng) / 50
        return np.sort(dec.decode(z).reshape(ids.shape), axis=-1)

    def noisy(scale: float, coordinate: bool = False):  # type: ignore[no-untyped-def]
        def f(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            base = vec[ids.reshape(-1)].astype(np.float64)
            noise = rng.laplace(0.0, 0.1, base.shape) if coordinate else laplace_noise(ids.size, 50, 10.0 / scale, rng)
            return (base + noise).reshape(ids.shape + (vec.shape[1],))
        return f

    out += [
        ("earth-movers, radius Gamma(1, 1/eps)", 10.0, word_pair_case("earth-movers", decoded, emb, 10.0)),
        ("earth-movers-noise, scale / 2", 10.0,
         word_pair_case("earth-movers-noise", noisy(0.5), emb, 10.0, observe="noise")),
        ("earth-movers-noise, scale / 4", 10.0,
         word_pair_case("earth-movers-noise", noisy(0.25), emb, 10.0, observe="noise")),
        ("earth-movers-noise, coordinate-wise Laplace", 10.0,
         word_pair_case("earth-movers-noise", noisy(1.0, coordinate=True), emb, 10.0, observe="noise")),
    ]
    out += word_level_broken_cases()
    return out


def word_level_broken_cases() -> list[tuple[str, float, AuditCase]]:
    """The broken word-level variants of ``tests/test_audit_mechanisms.py``: epsilon multiplied inside."""
    from textdp.audit.bag_cases import earth_movers_noise_case
    from textdp.audit.word_level import (
        DEFAULT_EPSILON,
        choose_mechanism_pair,
        group_pair,
        mechanism_case,
    )
    from textdp.embeddings import load_embeddings
    from textdp.mechanisms import get, noisy_vectors

    emb = load_embeddings(vocab_size=5000)
    out: list[tuple[str, float, AuditCase]] = []
    for name, factor in (("random", 2.0), ("custext", 2.0), ("santext", 3.0), ("tem", 3.0)):
        eps = DEFAULT_EPSILON[name]
        bad = get(name, epsilon=eps * factor, embeddings=emb, stop_words=None).fit()
        pair = group_pair(emb, epsilon=eps) if name == "custext" else choose_mechanism_pair(name, eps, emb)
        out.append((f"{name}, epsilon x {factor:g} inside", eps,
                     mechanism_case(name, bad, pair, epsilon=eps, embeddings=emb)))

    def half(ids: np.ndarray, vectors: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        return noisy_vectors(ids, vectors, 2.0 * epsilon, rng)

    out.append(("earth-movers-2d, scale / 2", 10.0, earth_movers_noise_case(dim=2, noisy=half)))
    return out


#: Noise-scale factors c of the power table (c < 1: less noise than claimed).
POWER_SCALES = (0.98, 0.96, 0.94, 0.92, 0.9, 0.85, 0.8, 0.5)
POWER_CASES = ("earth-movers", "cmp", "santext", "tem")
#: earth-movers and cmp audit the same noise law on the same pair (monday/tuesday at eps 10): one row
POWER_ROWS = ("earth-movers", "santext", "tem")


def _law_sampler(name: str, case: AuditCase, c: float):  # type: ignore[no-untyped-def]
    """``(sample, loss)`` of the case's mechanism law with its noise scale multiplied by ``c``.

    Laplace-noise cases: the claimed loss ``ε(||z − b|| − ||z − a||)`` of ``z = a + r u`` depends on
    the noise only through the radius ``r ~ Gamma(d, c/ε)`` and ``t = <u, (b − a)/|b − a|>``, whose law
    is that of ``g₁ / sqrt(g₁² + χ²_{d−1})``: the sampler returns the loss itself (the same law as
    ``laplace_noise`` followed by the loss, 50 times cheaper); from ``b`` the loss is ``−L`` in law.
    Exponential mechanisms: words from the mechanism's exact ``probabilities`` at ``ε/c``.
    """
    from textdp.audit.word_level import DEFAULT_EPSILON
    from textdp.embeddings import load_embeddings
    from textdp.mechanisms import get

    emb = load_embeddings(vocab_size=5000)
    if name in ("earth-movers", "cmp"):
        eps = 10.0
        vec = emb.vectors.astype(np.float64)
        a, b = int(np.asarray(case.input_a).reshape(-1)[0]), int(np.asarray(case.input_b).reshape(-1)[0])
        d = float(np.linalg.norm(vec[a] - vec[b]))
        dim = vec.shape[1]

        def losses(x: object, n: int, rng: np.random.Generator) -> np.ndarray:
            r = rng.gamma(float(dim), c / eps, n)
            g1 = rng.standard_normal(n)
            t = g1 / np.sqrt(g1 * g1 + rng.chisquare(dim - 1, n))
            loss = eps * (np.sqrt(np.maximum(r * r + 2.0 * r * d * t + d * d, 0.0)) - r)
            same = int(np.asarray(x).reshape(-1)[0]) == a
            return loss if same else -loss

        return losses, lambda o: np.asarray(o)
    mech = get(name, epsilon=DEFAULT_EPSILON[name] / c, embeddings=emb, stop_words=None).fit()
    if name == "tem":  # a weakened sampler keeps the claimed threshold gamma
        ref = get(name, epsilon=DEFAULT_EPSILON[name], embeddings=emb, stop_words=None).fit()
        mech.gamma_ = ref.gamma_
    laws = {int(case.input_a): mech.probabilities(int(case.input_a)),
            int(case.input_b): mech.probabilities(int(case.input_b))}

    def words(x: object, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(laws[int(x)].size, size=n, p=laws[int(x)])  # type: ignore[call-overload]

    assert case.curve is not None
    return words, case.curve.loss


def power(seeds: int, samples: int, scales: tuple[float, ...] = POWER_SCALES) -> None:
    import dataclasses

    from textdp.audit import audit_case
    from textdp.audit.curve import curve_test

    print("| case | " + " | ".join(f"c = {c:g}" for c in scales) + " | smallest error detected, power >= 0.95 |")
    print("|---|" + "---|" * (len(scales) + 1))
    for name in POWER_ROWS:
        case = audit_case(name)
        assert case.curve is not None
        # the claimed profile does not depend on c: estimated once per case (its own band kept)
        cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        claimed = case.curve.claimed

        def once(grid: np.ndarray, alpha: float, rng: np.random.Generator, claimed=claimed, cache=cache):  # type: ignore[no-untyped-def]
            key = grid.tobytes() + repr(alpha).encode()
            if key not in cache:
                cache[key] = claimed(grid, alpha, np.random.default_rng(7))
            return cache[key]

        cells = []
        best = None
        for c in scales:
            sample, loss = _law_sampler(name, case, c)
            curve = dataclasses.replace(case.curve, sample=sample, loss=loss, reuse_outputs=False, claimed=once)
            flagged = 0
            for s in range(seeds):
                r = curve_test(curve, case.input_a, case.input_b, samples, np.random.default_rng([21, s]), 0.025)
                flagged += not r.passed
            p = flagged / seeds
            cells.append(f"{p:.2f}")
            if p >= 0.95 and best is None:
                best = c
            if p == 1.0:  # every larger error is detected too: stop early
                cells += ["1.00"] * (len(scales) - len(cells))
                break
            print(f"  {name} c={c}: {p:.2f}", flush=True)
        found = f"x{best:g}" if best is not None else f"none up to x{scales[-1]:g}"
        print(f"| {name} | " + " | ".join(cells) + f" | {found} |", flush=True)


def planted(samples: int, seed: int, only: list[str] | None) -> None:
    """The done-when of issue 21: noise x0.5 (and eps x3 in CMP's noise) planted in the samplers."""
    import textdp.mechanisms.earth_movers as em_module
    import textdp.mechanisms.exponential as exp_module
    import textdp.mechanisms.perturbation as pert_module

    lap_em, lap_pert, by_distance = em_module.laplace_noise, pert_module.laplace_noise, exp_module.sample_by_distance

    def plant(noise: float, cmp_eps: float = 1.0) -> None:
        em_module.laplace_noise = lambda k, d, e, rng: lap_em(k, d, e / noise, rng)  # type: ignore[assignment]
        pert_module.laplace_noise = (  # type: ignore[assignment]
            lambda k, d, e, rng: lap_pert(k, d, e * cmp_eps / noise, rng))

        def scaled(vectors, x, scale, rng, **kw):  # type: ignore[no-untyped-def]
            return by_distance(vectors, x, scale / noise, rng, **kw)

        exp_module.sample_by_distance = scaled  # type: ignore[assignment]

    print("| case | planted bug | event lower bound / claim | curve: eps', delta lower / claimed law | verdict | "
          "seconds |")
    print("|---|---|---|---|---|---|")
    runs = [(n, "none", 1.0, 1.0) for n in POWER_CASES] + [(n, "noise x0.5", 0.5, 1.0) for n in POWER_CASES]
    runs.append(("cmp", "epsilon x3 in the noise only", 1.0, 3.0))
    for name, label, noise, cmp_eps in runs:
        if only and name not in only:
            continue
        plant(noise, cmp_eps)
        r = audit(name, samples=samples, seed=seed)
        c = r.curve
        assert c is not None
        print(f"| {name} | {label} | {r.lower_bound:.3f} / {r.claimed_epsilon:.3f} | {c.epsilon_prime:.2f}: "
              f"{c.delta_lower:.4f} / {c.delta_claimed:.4f} | {'pass' if r.passed else 'VIOLATION'} | "
              f"{r.seconds:.1f} |", flush=True)
    plant(1.0)


def false_alarms(seeds: int, samples: int, only: list[str] | None) -> None:
    print("| case | audits | flagged | false-alarm rate | mean seconds per audit |")
    print("|---|---|---|---|---|")
    for name in only or list(POWER_CASES):
        flagged = 0
        t0 = time.perf_counter()
        for s in range(seeds):
            flagged += not audit(name, samples=samples, seed=1000 + s).passed
        dt = (time.perf_counter() - t0) / seeds
        print(f"| {name} | {seeds} | {flagged} | {flagged / seeds:.2f} | {dt:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=float, default=1e6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--broken", action="store_true", help="audit the broken variants instead")
    ap.add_argument("--only", nargs="*", default=None, help="only these mechanisms (with --broken: these prefixes)")
    ap.add_argument("--power", action="store_true", help="the power table of the curve audit (issue 21)")
    ap.add_argument("--false-alarms", action="store_true", help="false alarms of the real mechanisms (issue 21)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--correct", action="store_true", help="with --power: c = 1 only (the curve test's false alarms)")
    ap.add_argument("--planted", action="store_true", help="noise x0.5 / eps x3 planted, default size (issue 21)")
    args = ap.parse_args()
    n = int(args.samples)
    if args.power:
        power(args.seeds, 100_000 if args.samples == 1e6 else n, (1.0,) if args.correct else POWER_SCALES)
        return
    if args.planted:
        planted(100_000 if args.samples == 1e6 else n, args.seed, args.only)
        return
    if args.false_alarms:
        false_alarms(args.seeds, 100_000 if args.samples == 1e6 else n, args.only)
        return
    print("| mechanism | epsilon | delta | claimed loss | estimate | lower bound | samples/input | events | "
          "verdict | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    if args.broken:
        for label, eps, case in broken_cases():
            if args.only and label.split(",")[0].split(" ")[0] not in args.only:
                continue
            t0 = time.perf_counter()
            r = run_audit(case, samples=n, seed=args.seed)
            assert abs(r.seconds - (time.perf_counter() - t0)) < 5
            print(row(label, eps, case.claimed_delta, r), flush=True)
        return
    names = set(audit_case_names())
    for mech, row_eps, delta in ROWS:
        if mech not in names or (args.only and mech not in args.only):
            continue
        r = audit(mech, epsilon=row_eps, delta=delta, samples=n, seed=args.seed)
        print(row(mech, row_eps, r.claimed_delta, r), flush=True)


if __name__ == "__main__":
    main()
