"""Decode throughput: textdp's exact blocked-GEMM decoder versus the naive per-word loop.

Both are measured in the same run on the same queries (noisy GloVe vectors at a
given epsilon), and the ratio is printed. Run:

    python benchmarks/bench_decode.py --vocab 400000 --queries 2000 --naive-queries 20
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.mechanisms import noisy_vectors


def naive_decode(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The obvious implementation: one full distance pass per word."""
    return np.array([int(np.argmin(np.linalg.norm(vectors - q, axis=1))) for q in queries])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=400000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--naive-queries", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    emb = load_embeddings(vocab_size=args.vocab)
    rng = np.random.default_rng(args.seed)
    src = rng.integers(1000, min(6000, emb.vocab_size), size=args.queries)
    q = noisy_vectors(src, emb.vectors, args.epsilon, rng)

    t0 = time.perf_counter()
    dec = ExactDecoder(emb.vectors)
    t_build = time.perf_counter() - t0
    dec.decode(q[:64])  # warm-up
    t0 = time.perf_counter()
    fast = dec.decode(q)
    t_fast = time.perf_counter() - t0

    nq = args.naive_queries
    vec = np.asarray(emb.vectors)
    t0 = time.perf_counter()
    slow = naive_decode(vec, q[:nq])
    t_naive = time.perf_counter() - t0

    agree = float(np.mean(fast[:nq] == slow))
    fast_rate = args.queries / t_fast
    naive_rate = nq / t_naive
    print(f"cores={os.cpu_count()} V={emb.vocab_size} d={emb.dim} eps={args.epsilon}")
    print(f"decoder build            {t_build:8.3f} s (once per vocabulary)")
    print(f"textdp exact decode      {fast_rate:10.0f} words/s ({args.queries} words)")
    print(f"naive per-word loop      {naive_rate:10.1f} words/s ({nq} words)")
    print(f"speed-up                 {fast_rate / naive_rate:10.1f} x   (agreement on naive subset: {agree:.3f})")


if __name__ == "__main__":
    main()
