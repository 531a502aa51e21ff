"""Exact discrete samplers (CKS20) vs numpy's floating-point samplers, for TopicDP-sized releases.

Times one release-sized draw (m x n entries) of the exact discrete Gaussian and discrete Laplace
at the scales TopicDP uses on the default grid 2^-20, and numpy's ``normal`` / ``laplace`` on the
same generator in the same run (the floating-point baseline the exact samplers replace). Best of
``--repeats``.

    python benchmarks/bench_samplers.py
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--sigma", type=float, default=0.45, help="noise sd in value units (TopicDP, eps=3, Enron)")
    ap.add_argument("--scale", type=float, default=20 / 3, help="Laplace scale in value units (m=10, eps=3)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
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
