"""Exact discrete samplers (CKS20) vs numpy's floating-point samplers, for TopicDP-sized releases.

Times one release-sized draw (m x n entries) of the exact discrete Gaussian and discrete Laplace
at the scales TopicDP uses on the default grid 2^-20, and numpy's ``normal`` / ``laplace`` on the
same generator in the same run (the floating-point baseline the exact samplers replace). Best of
``--repeats``.

    python benchmarks/bench_samplers.py
    python benchmarks/bench_samplers.py --audit      # issue 21: the audit's draws, before vs after

``--audit`` times what ``textdp audit laplace`` / ``topicdp`` draw: ``n`` releases of the audit's toy
matrix as ``n`` calls of ``randomize`` (the audit before issue 21: one exact draw of 2 or 4 entries
per call, so the per-call overhead of the rejection loops dominated) against one vectorised draw of
the same exact law (``textdp.audit.power.exact_law_releases``), and the vectorised discrete Laplace
sampler against a scalar pure-Python transcription of CKS20 Algorithms 1-2 (kept here only, as
the baseline).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial

from textdp._rng import make_rng
from textdp.samplers import DEFAULT_GRID, discrete_gaussian, discrete_laplace


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _scalar_bernoulli_exp(num: int, den: int, gen: random.Random) -> bool:
    """CKS20 Algorithm 1 for gamma = num/den in [0, 1], one draw (pure Python, the baseline)."""
    k = 1
    while True:
        if gen.randrange(den * k) < num:  # Bernoulli(gamma / k)
            k += 1
        else:
            return k % 2 == 1


def _scalar_discrete_laplace(t: int, s: int, gen: random.Random) -> int:
    """CKS20 Algorithm 2 for scale t/s, one draw (pure Python, the baseline)."""
    while True:
        u = gen.randrange(t)
        if not _scalar_bernoulli_exp(u, t, gen):
            continue
        v = 0
        while _scalar_bernoulli_exp(1, 1, gen):
            v += 1
        y = (u + t * v) // s
        b = gen.randrange(2)
        if b == 1 and y == 0:
            continue
        return -y if b else y


def audit_draws(n: int, repeats: int) -> None:
    import numpy as np

    from textdp.audit.power import exact_law_releases as grid_releases
    from textdp.topics.noise import GaussianNoise, LaplaceNoise

    gen = make_rng(0)
    cases = [("laplace (1x2, eps 1)", LaplaceNoise(epsilon=1.0, m=1), np.array([[1.0, 0.0]])),
             ("topicdp (2x2, eps 1, delta 1e-4)",
              GaussianNoise(epsilon=1.0, delta=1e-4, sensitivity=0.1), np.array([[0.4, 0.3], [0.2, 0.1]]))]
    print(f"| audit draw, {n:,} releases | n calls of randomize | one vectorised draw | ratio |")
    print("|---|---|---|---|")
    for label, mech, x in cases:
        def slow(mech=mech, x=x) -> None:  # type: ignore[no-untyped-def]
            for _ in range(n):
                mech.randomize(x, seed=gen)

        per_call = _best(slow, 1)
        fast = _best(partial(grid_releases, mech, x, n, gen), repeats)
        print(f"| {label} | {per_call:.2f} s | {fast * 1e3:.1f} ms | {per_call / fast:.0f}x |", flush=True)
    scale = LaplaceNoise(epsilon=1.0, m=1).grid_scale((1, 2))
    py = random.Random(0)
    k = max(n // 10, 1000)
    t_py = _best(lambda: [_scalar_discrete_laplace(scale.numerator, scale.denominator, py) for _ in range(k)], 1)
    t_np = _best(partial(discrete_laplace, scale, k, gen), repeats)
    print(f"| discrete Laplace, {k:,} draws: scalar pure-Python CKS20 | {t_py:.2f} s | vectorised "
          f"{t_np * 1e3:.1f} ms | {t_py / t_np:.0f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--sigma", type=float, default=0.45, help="noise sd in value units (TopicDP, eps=3, Enron)")
    ap.add_argument("--scale", type=float, default=20 / 3, help="Laplace scale in value units (m=10, eps=3)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--audit", action="store_true", help="time the audit's draws (issue 21)")
    ap.add_argument("--releases", type=int, default=20_000, help="releases drawn with --audit")
    args = ap.parse_args()
    if args.audit:
        audit_draws(args.releases, args.repeats)
        return
    gen = make_rng(0)
    s_grid = args.sigma / DEFAULT_GRID
    sigma2 = Fraction(s_grid * s_grid)
    scale = Fraction(args.scale / DEFAULT_GRID)
    print(f"grid 2^-20: sigma = {s_grid:.3g} grid units, Laplace scale = {float(scale):.3g} grid units")
    print("| m x n | discrete Gaussian | numpy normal | ratio | discrete Laplace | numpy laplace | ratio |")
    print("|---|---|---|---|---|---|---|")
    for k in args.sizes:
        n = k * k
        dg = _best(partial(discrete_gaussian, sigma2, n, gen), args.repeats)
        ng = _best(partial(gen.normal, 0.0, args.sigma, n), args.repeats)
        dl = _best(partial(discrete_laplace, scale, n, gen), args.repeats)
        nl = _best(partial(gen.laplace, 0.0, args.scale, n), args.repeats)
        print(f"| {k}x{k} | {dg * 1e3:.1f} ms | {ng * 1e3:.3f} ms | {dg / ng:.0f}x | {dl * 1e3:.1f} ms | "
              f"{nl * 1e3:.3f} ms | {dl / nl:.0f}x |")


if __name__ == "__main__":
    main()
