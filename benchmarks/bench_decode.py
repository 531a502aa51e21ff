"""Exact decode throughput versus the naive loop, the sgemm roofline and the peer library.

Everything is measured in the same run on the same queries, and ratios are printed:

* textdp ``exact`` (numpy blocked GEMM) and ``faiss-exact`` (certified, identical results);
* the naive per-word loop ``argmin(np.linalg.norm(E - v, axis=1))``;
* the roofline: the machine's large square sgemm rate (measured here, all cores)
  divided by ``2 V d`` flops per word;
* the known-source shortcut (``decode(Z, sources=...)``, opt-in: ``known_source=True``) at several
  epsilons, against the default release path, which never passes sources;
* the timing side channel: decode time of a document of frequent words vs one of rare words,
  default path vs shortcut (``--timing-docs``);
* the peer library mldp-text on a 34k-word 300-d vocabulary (random vectors): its own
  rate when it is installed, otherwise its documented ~8 words/s.

d = 50 uses GloVe 6B 50d (top-V words, queries = words of rank 1,000-6,000 plus Laplace
noise); d = 300 uses random Gaussian vectors. The machine may be shared: each timing
is the best of ``--repeats`` runs, interleaved with the sgemm measurement.

    python benchmarks/bench_decode.py                      # the full table of BENCHMARKS.md
    python benchmarks/bench_decode.py --vocab 400000 --dims 50 --queries 2000 --naive-queries 20
    python benchmarks/bench_decode.py --only-known-source --vocab 400000 --queries 2048 --known-source-eps 10 40
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.mechanisms import noisy_vectors

PEER_DOCUMENTED_WPS = 8.0  # mldp-text, its own 34k-word 300-d vocabulary (issue 4)


def naive_decode(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The obvious implementation: one full distance pass per word."""
    return np.array([int(np.argmin(np.linalg.norm(vectors - q, axis=1))) for q in queries])


def sgemm_rate(n: int = 2048, rng: np.random.Generator | None = None) -> float:
    """Flop/s of one large square float32 matrix product (BLAS, all cores)."""
    rng = rng or np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    t0 = time.perf_counter()
    a @ b
    return 2.0 * n**3 / (time.perf_counter() - t0)


def best_rate(fn, n_items: int, repeats: int, rates: list[float] | None = None) -> float:
    """Best items/s over ``repeats`` calls; measures sgemm in between when ``rates`` is given."""
    best = 0.0
    for _ in range(repeats):
        if rates is not None:
            rates.append(sgemm_rate())
        t0 = time.perf_counter()
        fn()
        best = max(best, n_items / (time.perf_counter() - t0))
    return best


def vocabulary(v: int, d: int, rng: np.random.Generator) -> np.ndarray:
    if d == 50:
        return np.asarray(load_embeddings(vocab_size=v).vectors)
    return rng.standard_normal((v, d), dtype=np.float32)


def queries_for(vec: np.ndarray, n: int, eps: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    v = vec.shape[0]
    lo, hi = (1000, 6000) if v > 6000 else (0, v)
    src = rng.integers(lo, hi, size=n)
    return src, noisy_vectors(src, vec, eps, rng)


def try_peer() -> str | None:
    try:
        import mldp  # noqa: F401  (mldp-text)
    except ImportError:
        return None
    return "installed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, nargs="+", default=[30000, 100000, 400000])
    ap.add_argument("--dims", type=int, nargs="+", default=[50, 300])
    ap.add_argument("--queries", type=int, default=4096)
    ap.add_argument("--naive-queries", type=int, default=10)
    ap.add_argument("--epsilon", type=float, default=10.0, help="eps of the d=50 queries")
    ap.add_argument("--epsilon-300", type=float, default=30.0, help="eps of the d=300 queries")
    ap.add_argument("--known-source-eps", type=float, nargs="*", default=[10, 20, 30, 40, 60])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-faiss", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only-known-source", action="store_true", help="skip the throughput table and the peer")
    ap.add_argument("--timing-docs", type=int, default=15, help="repeats of the frequent/rare document timing")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"cores={os.cpu_count()} queries={args.queries} repeats={args.repeats} (best of)")
    hdr = (f"{'V':>7} {'d':>4} {'exact w/s':>10} {'faiss-ex w/s':>12} {'naive w/s':>9} {'roofline w/s':>12} "
           f"{'%roof':>6} {'x naive':>8} {'agree':>5}")
    print(hdr)
    results = {}
    for d in ([] if args.only_known_source else args.dims):
        for v in args.vocab:
            vec = vocabulary(v, d, rng)
            _src, q = queries_for(vec, args.queries, args.epsilon if d == 50 else args.epsilon_300, rng)
            dec = ExactDecoder(vec)
            dec.decode(q[:64])
            rates: list[float] = []
            out = {}
            exact_wps = best_rate(lambda: out.__setitem__("e", dec.decode(q)), len(q), args.repeats, rates)
            faiss_wps = float("nan")
            if not args.no_faiss:
                try:
                    from textdp.embeddings import FaissExactDecoder

                    fdec = FaissExactDecoder(vec, fallback=dec)
                    fdec.decode(q[:64])
                    faiss_wps = best_rate(lambda: out.__setitem__("f", fdec.decode(q)), len(q), args.repeats)
                    assert np.array_equal(out["f"], out["e"]), "faiss-exact differs from exact"
                except ImportError:
                    pass
            nq = args.naive_queries
            t0 = time.perf_counter()
            slow = naive_decode(vec, q[:nq])
            naive_wps = nq / (time.perf_counter() - t0)
            agree = float(np.mean(out["e"][:nq] == slow))
            roof = max(rates) / (2.0 * v * d)
            results[(v, d)] = exact_wps
            print(f"{v:>7} {d:>4} {exact_wps:>10.0f} {faiss_wps:>12.0f} {naive_wps:>9.1f} {roof:>12.0f} "
                  f"{100 * exact_wps / roof:>5.0f}% {exact_wps / naive_wps:>7.0f}x {agree:>5.2f}", flush=True)
            dec.close()
            vec = dec = None  # free the vocabulary before the next size

    if not args.only_known_source:
        peer(args, rng)
    known_source(args, rng)


def peer(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """mldp-text on a 34k-word 300-d vocabulary (random vectors here)."""
    vec = rng.standard_normal((34000, 300), dtype=np.float32)
    _, q = queries_for(vec, args.queries, args.epsilon_300, rng)
    dec = ExactDecoder(vec)
    dec.decode(q[:64])
    ours = best_rate(lambda: dec.decode(q), len(q), args.repeats)
    installed = try_peer()
    peer_note = "measured" if installed else "documented (mldp-text not installable here)"
    print(f"\npeer V=34000 d=300: textdp exact {ours:.0f} words/s vs mldp-text {PEER_DOCUMENTED_WPS:.0f} "
          f"words/s ({peer_note}): {ours / PEER_DOCUMENTED_WPS:.0f}x")


def known_source(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """The opt-in known-source shortcut against the default path (no sources), V = max(--vocab), d = 50."""
    if args.known_source_eps and 50 in args.dims:
        vmax = max(args.vocab)
        vec = vocabulary(vmax, 50, rng)
        print(f"\nknown source, V={vmax} d=50 ({args.queries} words, sources of rank 1,000-6,000):")
        print(f"{'eps':>5} {'self':>6} {'shortcut':>8} {'no-src w/s':>10} {'cold w/s':>9} {'warm w/s':>9} {'speed-up':>8}")
        for eps in args.known_source_eps:
            src, q = queries_for(vec, args.queries, eps, rng)
            plain = ExactDecoder(vec, neighbours=0)
            plain.decode(q[:64])
            ref = {}
            base = best_rate(lambda: ref.__setitem__("r", plain.decode(q)), len(q), args.repeats)
            ks = ExactDecoder(vec)
            t0 = time.perf_counter()
            got = ks.decode(q, sources=src)  # cold: builds the neighbour lists it needs
            cold = len(q) / (time.perf_counter() - t0)
            assert np.array_equal(got, ref["r"]), "known-source result differs from exact"
            q2, src2 = noisy_vectors(src, vec, eps, rng), src  # fresh noise, same source words
            ks.stats.update(queries=0, known_source=0)
            warm = best_rate(lambda: ks.decode(q2, sources=src2), len(q2), args.repeats)
            frac = ks.stats["known_source"] / max(ks.stats["queries"], 1)
            selfrate = float(np.mean(ref["r"] == src))
            print(f"{eps:>5.0f} {selfrate:>6.2f} {frac:>8.2f} {base:>10.0f} {cold:>9.0f} {warm:>9.0f} "
                  f"{warm / base:>7.1f}x", flush=True)
            plain.close()
            ks.close()
        timing_channel(vec, args, rng)


def timing_channel(vec: np.ndarray, args: argparse.Namespace, rng: np.random.Generator) -> None:
    """Decode time of a 200-word document of frequent words vs one of rare words (median of repeats).

    The default path (no sources) does the same work whatever the words; the shortcut's time
    depends on them (and on the words the process decoded before).
    """
    v = vec.shape[0]
    frequent = rng.integers(1000, 1200, size=200)
    rare = rng.integers(v - 20000, v, size=200)
    print(f"\ntiming side channel, V={v} d=50: 200-word documents, median ms over {args.timing_docs} repeats")
    print(f"{'eps':>5} {'path':>13} {'frequent ms':>11} {'rare ms':>8} {'rare/frequent':>13} "
          f"{'re-decided f/r':>14} {'shortcut f/r':>12}")
    for eps in args.known_source_eps:
        for label, use_src in (("default", False), ("known-source", True)):
            dec = ExactDecoder(vec)
            warm = rng.integers(0, v, size=256)
            dec.decode(noisy_vectors(warm, vec, eps, rng), sources=warm if use_src else None)
            times: dict[str, list[float]] = {"f": [], "r": []}
            work = {k: {"ambiguous": 0, "known_source": 0} for k in ("f", "r")}
            for _ in range(args.timing_docs):
                for key, words in (("f", frequent), ("r", rare)):
                    z = noisy_vectors(words, vec, eps, rng)
                    before = dict(dec.stats)
                    t0 = time.perf_counter()
                    dec.decode(z, sources=words if use_src else None)
                    times[key].append(1e3 * (time.perf_counter() - t0))
                    for name in work[key]:
                        work[key][name] += dec.stats[name] - before[name]
            f, r = float(np.median(times["f"])), float(np.median(times["r"]))
            n = args.timing_docs
            amb = f"{work['f']['ambiguous'] / n:.1f}/{work['r']['ambiguous'] / n:.1f}"
            short = f"{work['f']['known_source'] / n:.0f}/{work['r']['known_source'] / n:.0f}"
            print(f"{eps:>5.0f} {label:>13} {f:>11.1f} {r:>8.1f} {r / f:>13.2f} {amb:>14} {short:>12}", flush=True)
            dec.close()


if __name__ == "__main__":
    main()
