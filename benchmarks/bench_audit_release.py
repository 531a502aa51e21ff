"""Power of `textdp audit --conformance` against errors planted in the real release path (issue 29).

Each planted error multiplies the noise scale by ``c`` (ε by ``1/c``) inside the code a release runs:
Earth Mover's ``privatize_ids`` (the release function, not the noise helper), CMP's ``core``, SanText's
``sample_by_distance``, SynTF's ``sample_bags``, TopicDP's ``zcdp_rho`` (σ×c). ``c = 1`` is the
unpatched mechanism (false alarms). Seeds are fixed up front (``--first-seed``); every audit is the
full one (event, curve, conformance) on the real samplers.

    python benchmarks/bench_audit_release.py --seeds 4 --samples 10000
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator

import numpy as np

import textdp.mechanisms.earth_movers as em
import textdp.mechanisms.exponential as ex
import textdp.mechanisms.perturbation as pert
import textdp.mechanisms.syntf as sy
import textdp.topics.noise as tm
from textdp.audit import audit


@contextlib.contextmanager
def planted(case: str, c: float) -> Iterator[None]:
    saved: list[tuple[object, str, object]] = []

    def put(obj: object, name: str, value: Callable[..., object]) -> None:
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    if c != 1.0:
        if case == "earth-movers":
            f = em.privatize_ids
            put(em, "privatize_ids", lambda ids, v, e, rng, *a, **k: f(ids, v, e / c, rng, *a, **k))
        elif case == "cmp":
            def core(self: pert._NoisyVector, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
                z = self.noisy_vectors(ids, rng)
                return self.release(self._v64[ids] + (z - self._v64[ids]) * c, rng)
            put(pert._NoisyVector, "core", core)
        elif case == "santext":
            g = ex.sample_by_distance
            put(ex, "sample_by_distance", lambda v, x, scale, rng, **kw: g(v, x, scale / c, rng, **kw))
        elif case == "syntf":
            h = sy.sample_bags
            put(sy, "sample_bags", lambda r, w, vs, e, n, rng: h(r, w, vs, e / c, n, rng))
        elif case == "topicdp":
            r = tm.zcdp_rho
            put(tm, "zcdp_rho", lambda e, d: r(e, d) / (c * c))
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=2900)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--topic-samples", type=int, default=2_000)
    ap.add_argument("--cases", default="earth-movers,cmp,santext,syntf,topicdp")
    ap.add_argument("--scales", default="1.0,0.9,0.75")
    args = ap.parse_args()
    scales = [float(x) for x in args.scales.split(",")]
    print("| case | c | privacy flagged | conformance flagged | either | s/audit |")
    print("|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        n = args.topic_samples if case == "topicdp" else args.samples
        for c in scales:
            priv = conf = either = 0
            t0 = time.perf_counter()
            for s in range(args.first_seed, args.first_seed + args.seeds):
                with planted(case, c):
                    r = audit(case, samples=n, seed=s, conformance=True)
                priv += not r.privacy_passed
                conf += r.conformance is not None and not r.conformance.passed
                either += not r.passed
            dt = (time.perf_counter() - t0) / args.seeds
            k = args.seeds
            print(f"| {case} (n={n:,}) | {c:g} | {priv}/{k} | {conf}/{k} | {either}/{k} | {dt:.0f} |", flush=True)


if __name__ == "__main__":
    main()
