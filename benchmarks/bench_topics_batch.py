"""A batch of topic releases: one vectorised noise draw per chunk against one draw per matrix (issue 29).

``TopicsMechanism._privatize`` used to call the noise core's ``randomize`` once per matrix; each call
pays the exact sampler's set-up (CKS20's rational Bernoulli trials), which dominates for the small
matrices the audit releases 10^5 times per input. It now stacks the chunk's matrices and draws all
their noise in one call. Both ways run here in the same process on the same matrices:

* **noise**: ``k`` calls of ``noise.randomize(x)`` (old) against one ``noise.randomize(stack of k)``;
* **release**: ``privatize_batch([unit] * k)`` with the old per-matrix ``_privatize`` (a subclass
  restoring it) against the mechanism as it is (the audit's path, records included).

Run::

    python benchmarks/bench_topics_batch.py --k 300 --shapes 2x2 10x10

Prints one row per (mechanism, shape, path) with releases/s of each way and the ratio.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from textdp._rng import make_rng
from textdp.mechanisms import get
from textdp.mechanisms.base import ReleaseContext
from textdp.topics.family import TopicsMechanism
from textdp.topics.models import TopicMatrix

CASES: dict[str, dict[str, object]] = {
    "topicdp": {"delta": 1e-4, "sensitivity": 0.1},
    "topicdp-laplace": {},
    "mvg-directional": {"delta": 1e-4, "sensitivity": 0.1},
}


def per_matrix(mech: TopicsMechanism) -> TopicsMechanism:
    """The same mechanism with the old ``_privatize``: one ``randomize`` call (one noise draw) per matrix."""

    def _privatize(prepared: Sequence[TopicMatrix], context: ReleaseContext,
                   rng: np.random.Generator) -> list[np.ndarray]:
        assert context.shape is not None
        core = mech.noise(context.shape)
        return [core.randomize(p.matrix, seed=rng) for p in prepared]

    mech._privatize = _privatize  # type: ignore[method-assign]
    return mech


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=300, help="releases per way (the old way costs ~10 ms each)")
    ap.add_argument("--shapes", nargs="+", default=["2x2", "10x10"])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print("| mechanism | shape | path | old: one draw per matrix (releases/s) | new: one draw per chunk "
          "(releases/s) | new/old |")
    print("|---|---|---|---|---|---|")
    for shape_text in args.shapes:
        m, n = (int(v) for v in shape_text.split("x"))
        x = make_rng(args.seed).dirichlet(np.ones(n + 5), size=m)[:, :n]
        unit = TopicMatrix(x, tuple(tuple(f"w{i}_{j}" for j in range(n)) for i in range(m)), tuple(range(m)))
        for name, params in CASES.items():
            mech = get(name, epsilon=1.0, **params).fit()
            assert isinstance(mech, TopicsMechanism)
            core = mech.noise((m, n))
            rng = make_rng(args.seed)
            old = timed(lambda: [core.randomize(x, seed=rng) for _ in range(args.k)])
            new = timed(lambda: core.randomize(np.stack([x] * args.k), seed=rng))
            print(f"| {name} | {shape_text} | noise | {args.k / old:,.0f} | {args.k / new:,.0f} | {old / new:.0f}x |")
            slow = per_matrix(get(name, epsilon=1.0, **params).fit())  # type: ignore[arg-type]
            old = timed(lambda: slow.privatize_batch([unit] * args.k, seed=rng, chunk=args.k))
            new = timed(lambda: mech.privatize_batch([unit] * args.k, seed=rng, chunk=args.k))
            print(f"| {name} | {shape_text} | privatize_batch | {args.k / old:,.0f} | {args.k / new:,.0f} | "
                  f"{old / new:.0f}x |")


if __name__ == "__main__":
    main()
