"""tools/audit_power.py: a repetition on the case built once per cell against a case rebuilt per repetition.

For each case, ``--reps`` full audits (``conformance=True``, ``--samples`` per input, seeds 1..reps) two ways,
in alternating order within one run: **rebuilt** (``audit(name, seed=s)``: the case, its mechanism, vocabulary,
output sets, claim and reference law built again for every seed, as tools/audit_power.py did before) and
**reused** (``run_audit(case, seed=s)`` on one case built before the timing starts, plus that build once). The
verdicts must agree seed by seed (the build does not depend on the seed). CPU seconds of this process
(``time.process_time``), less sensitive to the other jobs of a shared machine than wall time::

    python benchmarks/bench_audit_power_reuse.py --cases custext,random,syntf,laplace,topicdp,mahalanobis --reps 3

``--reference`` times instead the conformance test's reference decoder (``textdp.audit.reference``) on 20,000
noisy vectors of 'monday' (ε = 10, GloVe top 5,000, the size of one audit's draw per input): the float32
screen with float64 decision against the float64 expansion it replaced (the baseline, written out here), in
alternating order, with the answers compared::

    python benchmarks/bench_audit_power_reuse.py --reference --reps 3
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="custext,random,syntf,laplace,topicdp,mahalanobis")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--reference", action="store_true", help="time the reference decoder instead")
    args = ap.parse_args()
    if args.reference:
        reference(args.reps)
        return
    from textdp.audit import audit, audit_case, run_audit

    print("| case | rebuilt: CPU s / audit | reused: CPU s / audit (build shared) | speed-up | verdicts agree |")
    print("|---|---|---|---|---|")
    for name in args.cases.split(","):
        audit_case(name)  # warm: embeddings and imports loaded once, outside both timings
        seeds = list(range(1, args.reps + 1))
        t0 = time.process_time()
        rebuilt = [audit(name, samples=args.samples, seed=s, conformance=True).to_dict() for s in seeds]
        t_rebuilt = time.process_time() - t0
        t0 = time.process_time()
        case = audit_case(name)
        reused = [run_audit(case, samples=args.samples, seed=s, conformance=True).to_dict() for s in seeds]
        t_reused = time.process_time() - t0
        same = all(json.dumps({k: v for k, v in a.items() if k != "seconds"}, sort_keys=True)
                   == json.dumps({k: v for k, v in b.items() if k != "seconds"}, sort_keys=True)
                   for a, b in zip(rebuilt, reused, strict=True))
        print(f"| {name} | {t_rebuilt / args.reps:.2f} | {t_reused / args.reps:.2f} | "
              f"{t_rebuilt / t_reused:.2f}x | {'yes' if same else 'NO'} |", flush=True)


def reference(reps: int) -> None:
    """The reference decoder against the float64 expansion (the code before), CPU seconds per 20,000 vectors."""
    import numpy as np

    from textdp._rng import make_rng
    from textdp.audit import reference as ref
    from textdp.embeddings import load_embeddings

    emb = load_embeddings(vocab_size=5_000)
    v = emb.vectors
    z = v[emb.index["monday"]].astype(np.float64) + ref.laplace_noise(20_000, v.shape[1], 10.0, make_rng(3))

    def old_sq(block: np.ndarray) -> np.ndarray:
        vv = np.asarray(v, dtype=np.float64)
        return np.asarray((block * block).sum(1)[:, None] - 2.0 * block @ vv.T + (vv * vv).sum(1)[None, :])

    def old_nearest() -> np.ndarray:
        return np.concatenate([np.argmin(old_sq(z[s:s + 2048]), axis=1) for s in range(0, len(z), 2048)])

    def old_two() -> np.ndarray:
        out = []
        for s in range(0, len(z), 2048):
            block = z[s:s + 2048]
            two = np.argpartition(old_sq(block), 1, axis=1)[:, :2]
            exact = np.linalg.norm(block[:, None, :] - v.astype(np.float64)[two], axis=2)
            out.append(np.take_along_axis(two, np.argsort(exact, axis=1, kind="stable"), axis=1))
        return np.concatenate(out)

    def new_two() -> np.ndarray:
        w1, w2, _, _ = ref.two_nearest(z, v)
        return np.stack([w1, w2], axis=1)

    print("| search | float64 expansion (before): CPU s | float32 screen + float64 decision: CPU s | speed-up | "
          "same answers |")
    print("|---|---|---|---|---|")
    for what, old, new in (("nearest", old_nearest, lambda: ref.nearest(z, v)), ("two_nearest", old_two, new_two)):
        t_old = t_new = 0.0
        same = True
        for _ in range(reps):
            t0 = time.process_time()
            a = old()
            t1 = time.process_time()
            b = new()
            t_old += t1 - t0
            t_new += time.process_time() - t1
            same = same and bool(np.array_equal(a, b))
        print(f"| {what} | {t_old / reps:.2f} | {t_new / reps:.2f} | {t_old / t_new:.2f}x | {'yes' if same else 'NO'} |",
              flush=True)


if __name__ == "__main__":
    main()
