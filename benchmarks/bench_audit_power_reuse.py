"""tools/audit_power.py: a repetition on the case built once per cell against a case rebuilt per repetition.

For each case, ``--reps`` full audits (``conformance=True``, ``--samples`` per input, seeds 1..reps) two ways,
in alternating order within one run: **rebuilt** (``audit(name, seed=s)``: the case, its mechanism, vocabulary,
output sets, claim and reference law built again for every seed, as tools/audit_power.py did before) and
**reused** (``run_audit(case, seed=s)`` on one case built before the timing starts, plus that build once). The
verdicts must agree seed by seed (the build does not depend on the seed). CPU seconds of this process
(``time.process_time``), less sensitive to the other jobs of a shared machine than wall time::

    python benchmarks/bench_audit_power_reuse.py --cases custext,random,syntf,laplace,topicdp,mahalanobis --reps 3
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
