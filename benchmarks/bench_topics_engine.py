"""TopicDP sensitivity sampling through the engine layer: in process vs 1 and 2 local Dask workers.

Draws the same ``--pairs`` neighbouring pairs (same seed, so the same samples on every engine)
in process (``LocalBackend``) and on local Dask clusters of 1 and 2 single-threaded worker
processes, and prints wall time, CPU time (this process + reaped workers), the speed-up of 2
workers over 1 measured in this run, the CPU cost per LDA fit, and the projected wall time of
gamma = 0.02 (9,498 pairs = 18,996 fits) on 64 workers. The load average is printed before and
after: on a shared machine the wall-clock ratios are only meaningful with it.

    python benchmarks/bench_topics_engine.py --corpus ../shared/data/pan11_enron/pan11_enron.jsonl.gz
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time

import numpy as np

from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus, sampler_parameters


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="../shared/data/pan11_enron/pan11_enron.jsonl.gz")
    ap.add_argument("--user-field", default="author")
    ap.add_argument("--max-docs-per-user", type=int, default=30)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--target-workers", type=int, default=64)
    ap.add_argument("--target-gamma", type=float, default=0.02)
    args = ap.parse_args()

    import distributed

    from textdp.engines.dask import DaskBackend

    corpus = UserCorpus.from_jsonl(args.corpus, user_field=args.user_field, max_docs_per_user=args.max_docs_per_user)
    model = SklearnLDA(n_topics=10, max_iter=10)
    sizes = [(k, k) for k in range(2, 11)]
    print(f"corpus: {corpus.n_users} users, {corpus.n_docs} documents; {args.pairs} pairs = {2 * args.pairs} fits")
    print(f"load average before: {os.getloadavg()}")

    results: dict[str, tuple[float, float, np.ndarray]] = {}
    c0, t0 = _cpu(), time.perf_counter()
    local = SensitivitySampler(corpus=corpus, model=model, sizes=sizes).draw(args.pairs, seed=args.seed)[0]
    results["in process"] = (time.perf_counter() - t0, _cpu() - c0, local)
    print(f"in process: {results['in process'][0]:.1f} s wall, {results['in process'][1]:.1f} s CPU", flush=True)
    for w in args.workers:
        c0 = _cpu()
        t_start = time.perf_counter()
        with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
            startup = time.perf_counter() - t_start
            backend = DaskBackend(client=client)
            t0 = time.perf_counter()
            out = SensitivitySampler(corpus=corpus, model=model, sizes=sizes, backend=backend).draw(
                args.pairs, seed=args.seed)[0]
            wall = time.perf_counter() - t0
        results[f"dask {w}"] = (wall, _cpu() - c0, out)
        same = np.allclose(out, local, rtol=0, atol=1e-9)
        print(f"dask, {w} worker(s): {wall:.1f} s wall (+{startup:.1f} s cluster start), "
              f"{results[f'dask {w}'][1]:.1f} s CPU incl. workers; same samples as in process: {same}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    if "dask 1" in results and "dask 2" in results:
        print(f"speed-up 1 -> 2 workers (wall, same run): {results['dask 1'][0] / results['dask 2'][0]:.2f}x")
    fit_cpu = results["in process"][1] / (2 * args.pairs)
    fit_wall = results["in process"][0] / (2 * args.pairs)
    n = sampler_parameters(args.target_gamma).n_samples
    hours = 2 * n * fit_cpu / args.target_workers / 3600
    print(f"per fit: {fit_cpu:.2f} s CPU ({fit_wall:.2f} s wall) in process")
    print(f"gamma={args.target_gamma}: {n} pairs = {2 * n} fits; on {args.target_workers} dedicated workers "
          f"~{hours * 60:.0f} min ({math.ceil(n / args.target_workers)} pairs per worker), plus cluster start "
          f"and the corpus shipped once per job")


if __name__ == "__main__":
    main()
