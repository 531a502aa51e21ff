"""Approximate decoding (faiss HNSW / IVF): speed and top-1 agreement with exact decoding.

Speed and agreement are measured in the same run against the exact decoder on the
same noisy queries (GloVe 6B 50d, V = 400,000, sources of rank 1,000-6,000), at
several epsilons and search efforts. Index build time is printed (it is cached on disk).

    python benchmarks/bench_approx.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from textdp.embeddings import ApproximateDecoder, ExactDecoder, load_embeddings
from textdp.mechanisms import noisy_vectors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=400000)
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--exact-queries", type=int, default=4000, help="subset decoded exactly for agreement")
    ap.add_argument("--eps", type=float, nargs="+", default=[8, 10, 12, 15, 20])
    ap.add_argument("--ef", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--nprobe", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    vec = np.asarray(load_embeddings(vocab_size=args.vocab).vectors)
    exact = ExactDecoder(vec)
    t0 = time.perf_counter()
    hnsw = ApproximateDecoder(vec, method="hnsw")
    print(f"HNSW index ready in {time.perf_counter() - t0:.1f} s (built once, cached on disk)")
    t0 = time.perf_counter()
    ivf = ApproximateDecoder(vec, method="ivf")
    print(f"IVF index ready in {time.perf_counter() - t0:.1f} s ({ivf.params})")
    print(f"{'eps':>5} {'changed':>7} {'decoder':>16} {'words/s':>9} {'agree':>7}")
    for eps in args.eps:
        src = rng.integers(1000, 6000, size=args.queries)
        q = noisy_vectors(src, vec, eps, rng)
        ne = args.exact_queries
        ref = exact.decode(q[:ne])
        t0 = time.perf_counter()
        exact.decode(q[:ne])
        exact_wps = ne / (time.perf_counter() - t0)
        changed = float(np.mean(ref != src[:ne]))
        print(f"{eps:>5.0f} {changed:>7.2f} {'exact':>16} {exact_wps:>9.0f} {1.0:>7.4f}")
        for name, dec, knob, values in (("hnsw ef", hnsw, "ef_search", args.ef), ("ivf nprobe", ivf, "nprobe", args.nprobe)):
            for val in values:
                dec.set_search(**{knob: val})
                dec.decode(q[:256], sources=src[:256])
                t0 = time.perf_counter()
                got = dec.decode(q, sources=src)
                wps = len(q) / (time.perf_counter() - t0)
                agree = float(np.mean(got[:ne] == ref))
                print(f"{eps:>5.0f} {changed:>7.2f} {name + '=' + str(val):>16} {wps:>9.0f} {agree:>7.4f}", flush=True)


if __name__ == "__main__":
    main()
