"""Exact decoding against the machine's limit: words/s as ratios to the sgemm roofline and the plain matmul.

Everything is measured in the same run on the same noisy vectors, interleaved repetition by repetition
(the best of ``--repeats`` is kept for each), so the ratios survive a loaded machine:

* **roofline**: the rate of one square ``2048^3`` float32 matrix product (BLAS, all cores) divided by
  ``2 V d`` flops per word;
* **plain matmul**: ``[Z, 1] @ [E, -||E||^2/2]^T`` of the same batch against the whole vocabulary
  (BLAS, all cores, the scores written to memory in 16,384-column chunks and nothing else done);
* **decoders** (identical words, checked): textdp ``exact`` (fused tiles) at 1 and ``--threads``
  threads, optionally the previous decoder (``--old-decoder FILE``, a copy of an older ``decode.py``),
  faiss ``IndexFlatL2.search(k=1)`` (raw, float32, not certified: the peer's exact search),
  textdp ``faiss-exact`` (certified), and the torch decoder (float32; ``--float16`` adds the
  lower-precision candidate path, slow on a CPU without float16 arithmetic); textdp ``exact`` with
  ``precision="bfloat16"`` (issue 44: bfloat16 tiles, proven margin, float64 re-rank) beside the
  bfloat16 plain matmul (torch) and the square bfloat16 GEMM rate (``--no-bf16`` skips them);
* **GEMM ceiling**: with one thread and CPU time, the GEMM alone on the decoder's tiles (K = d + 1)
  against the square sgemm, beside the whole decode: the most any float32 exact search can reach;
* **end to end**: ``textdp obfuscate`` (``--engine single``) on the first ``--docs`` Reuters C50
  documents, ``-e 10 --bag sample --size 500``, as a subprocess, once per ``--e2e-precisions``
  (``--decoder-precision``; outputs checked byte-identical); words/s = docs x size / wall time,
  and the ratio to the roofline measured just before and after it. CPU-time ratios (words per
  CPU-second against sgemm flops per CPU-second) are printed beside the wall ones.

    PYTHONPATH=src python benchmarks/bench_fused_decode.py --queries 2048 --repeats 3 --docs 120 --e2e-repeats 2
    PYTHONPATH=src python benchmarks/bench_fused_decode.py --queries 1024 --repeats 2 --no-torch --e2e-repeats 2
    git show HEAD~3:src/textdp/embeddings/decode.py | sed 's/from \\.\\.errors/from textdp.errors/' > /tmp/old_decode.py
    PYTHONPATH=src python benchmarks/bench_fused_decode.py --old-decoder /tmp/old_decode.py --no-e2e
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from textdp._rng import make_rng
from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.errors import TextDPError
from textdp.mechanisms import noisy_vectors

C50 = Path("/work/shared/data/reuter_50_50/reuter_50_50.jsonl.gz")


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds, result) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def sgemm(n: int = 2048, gen: np.random.Generator | None = None) -> tuple[float, float]:
    """(flop/s wall, flop per CPU-second) of one square float32 product, BLAS on all cores."""
    gen = gen or make_rng(0)
    a = gen.standard_normal((n, n), dtype=np.float32)
    b = gen.standard_normal((n, n), dtype=np.float32)
    a @ b
    wall, cpu, _ = timed(lambda: a @ b)
    return 2.0 * n**3 / wall, 2.0 * n**3 / max(cpu, 1e-9)


def plain_matmul(qa: np.ndarray, aug: np.ndarray, chunk: int = 16384) -> None:
    """The scores of the batch against every row, written to memory (the baseline of the decode)."""
    out = np.empty((qa.shape[0], chunk), dtype=np.float32)
    for vs in range(0, aug.shape[0], chunk):
        ve = min(vs + chunk, aug.shape[0])
        np.matmul(qa, aug[vs:ve].T, out=out[:, : ve - vs] if ve - vs < chunk else out)


def bf16_plain_matmul(z: np.ndarray, vec: np.ndarray, threads: int, chunk: int = 16384) -> Callable[[], None]:
    """The bfloat16 scores ``[Z, 1, 1, 1] @ [E, h1, h2, h3]^T`` of the batch against every row (torch, all cores)."""
    import torch

    from textdp.embeddings.bf16 import Bf16Scorer

    sc = Bf16Scorer(vec, (vec.astype(np.float64) ** 2).sum(axis=1), 4096)
    qb = sc.queries(z)
    out = torch.empty((z.shape[0], chunk), dtype=torch.bfloat16)

    def run() -> None:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for vs in range(0, sc.vocab_size, chunk):
                ve = min(vs + chunk, sc.vocab_size)
                torch.mm(qb, sc.e[vs:ve].T, out=out[:, : ve - vs])
        finally:
            torch.set_num_threads(before)

    return run


def bf16_square(threads: int, n: int = 2048) -> float:
    """flop/s of one square bfloat16 product (torch, ``threads`` threads): the bfloat16 ceiling here."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(n, n).bfloat16()
        a @ a
        wall, _, _ = timed(lambda: a @ a)
    finally:
        torch.set_num_threads(before)
    return 2.0 * n**3 / wall


def cpu_line() -> str:
    """The CPU model and the flags that matter to the decoder's precisions."""
    from textdp.embeddings.bf16 import cpu_flags

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile", "avx512_fp16")
    return f"cpu: {model or 'unknown'}; flags: {' '.join(f for f in wanted if f in cpu_flags()) or 'none of ' + ', '.join(wanted)}"


def load_old(path: str) -> type:
    spec = importlib.util.spec_from_file_location("old_decode", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ExactDecoder  # type: ignore[no-any-return]


def decode_alone(args: argparse.Namespace, vec: np.ndarray, gen: np.random.Generator) -> None:
    v, d = vec.shape
    src = gen.integers(1000, 6000, args.queries)
    z = noisy_vectors(src, vec, args.epsilon, gen)
    ref = ExactDecoder(vec, threads=args.threads, precision="float32")
    qa = ref._augment(z)
    cases: dict[str, Callable[[], object]] = {"plain matmul (BLAS, all cores)": lambda: plain_matmul(qa, ref._aug)}
    decoders: dict[str, object] = {f"textdp exact float32, {t} thread(s)": ExactDecoder(vec, threads=t,
                                                                                          precision="float32")
                                   for t in sorted({1, args.threads})}
    if not args.no_bf16:
        try:
            for t in sorted({1, args.threads}):
                bdec = ExactDecoder(vec, threads=t, precision="bfloat16")
                t0 = time.perf_counter()
                bdec.score_precision  # noqa: B018 - builds the bfloat16 tiles and runs the probe (timed)
                print(f"bfloat16 tiles built and probed in {time.perf_counter() - t0:.2f} s")
                decoders[f"textdp exact bfloat16, {t} thread(s)"] = bdec
            auto = ExactDecoder(vec, threads=args.threads)
            print(f"precision auto chooses: {auto.score_precision}")
            cases["plain matmul bfloat16 (torch, all cores)"] = bf16_plain_matmul(z, vec, args.threads)
        except TextDPError as exc:  # torch missing, or its bfloat16 product fails the probe
            print(f"bfloat16 rows skipped: {exc}")
    if args.old_decoder:
        decoders["previous exact decoder"] = load_old(args.old_decoder)(vec, threads=args.threads)
    try:
        if args.no_faiss:
            raise ImportError
        import faiss

        from textdp.embeddings import FaissExactDecoder

        faiss.omp_set_num_threads(args.threads)
        index = faiss.IndexFlatL2(d)
        index.add(np.ascontiguousarray(vec, dtype=np.float32))
        z32 = np.ascontiguousarray(z, dtype=np.float32)
        cases["faiss IndexFlatL2.search k=1 (raw)"] = lambda: index.search(z32, 1)[1][:, 0]
        decoders["textdp faiss-exact (certified)"] = FaissExactDecoder(vec, fallback=ExactDecoder(vec, threads=1))
    except ImportError:
        print("faiss rows skipped (--no-faiss, or faiss not installed)")
    try:
        if args.no_torch:
            raise ImportError
        from textdp.embeddings.gpu import TorchDecoder

        decoders["textdp torch float32 (cpu)"] = TorchDecoder(vec, device="cpu", threads=args.threads)
        if args.float16:
            decoders["textdp torch float16 (cpu)"] = TorchDecoder(vec, device="cpu", precision="float16",
                                                                  threads=args.threads, query_tile=1024)
    except ImportError:
        print("torch rows skipped (--no-torch, or torch not installed)")
    for name, dec in decoders.items():
        cases[name] = (lambda dd: lambda: dd.decode(z))(dec)  # type: ignore[attr-defined]
    expected = ref.decode(z)
    best: dict[str, tuple[float, float]] = dict.fromkeys(cases, (np.inf, np.inf))
    roof_wall, roof_cpu, roof_bf16 = 0.0, 0.0, 0.0
    has_bf16 = any("bfloat16" in name for name in cases)
    for r in range(args.repeats):
        w, c = sgemm(gen=gen)
        roof_wall, roof_cpu = max(roof_wall, w), max(roof_cpu, c)
        if has_bf16:
            roof_bf16 = max(roof_bf16, bf16_square(args.threads))
        for name, fn in cases.items():
            if name.startswith("textdp torch float16") and r > 0:
                continue  # slow on a CPU: once
            wall, cpu, out = timed(fn)
            if out is not None and not np.array_equal(np.asarray(out), expected):
                raise SystemExit(f"{name}: words differ from the exact decoder")
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    flops = 2.0 * v * d
    n = args.queries
    plain = n / best["plain matmul (BLAS, all cores)"][0]
    print(f"\ndecode alone: V={v} d={d}, {n} noisy vectors (eps {args.epsilon}), best of {args.repeats}; "
          f"roofline {roof_wall * 1e-9:.1f} GFLOP/s = {roof_wall / flops:.0f} words/s "
          f"({roof_cpu * 1e-9:.1f} GFLOP per CPU-s)")
    if has_bf16:
        print(f"square 2048^3 bfloat16 (torch, {args.threads} threads): {roof_bf16 * 1e-9:.1f} GFLOP/s "
              f"= {roof_bf16 / roof_wall:.2f} x the float32 roofline")
    print(f"{'method':<38} {'words/s':>8} {'/ roofline':>10} {'/ plain mm':>10} {'CPU ratio':>9}")
    for name, (wall, cpu) in best.items():
        wps = n / wall
        cpu_ratio = (n / cpu) * flops / roof_cpu
        print(f"{name:<38} {wps:>8.0f} {wps * flops / roof_wall:>10.2f} {wps / plain:>10.2f} {cpu_ratio:>9.2f}",
              flush=True)
    for name, dec in decoders.items():
        stats = getattr(dec, "stats", {})
        if "ambiguous" in stats and stats.get("queries"):
            print(f"{name}: {stats['ambiguous'] / stats['queries']:.3f} of the queries had more than one candidate "
                  "(re-ranked in float64)")
    if "textdp torch float16 (cpu)" in decoders:
        ex = decoders[f"textdp exact float32, {args.threads} thread(s)"]
        m32 = ex.margins(z)  # type: ignore[attr-defined]
        m16 = ex.margins(z, u_in=2.0**-11 + 2.0**-23, u_acc=2.0**-24, u_out=2.0**-11,  # type: ignore[attr-defined]
                         norm_in_product=False)
        print(f"candidate margin (score units, median): float32 {np.median(m32):.4f}, float16 {np.median(m16):.3f}")
    for dec in decoders.values():
        getattr(dec, "close", lambda: None)()


def gemm_ceiling(args: argparse.Namespace, vec: np.ndarray, gen: np.random.Generator) -> None:
    """One thread, CPU time: square sgemm vs the GEMM alone on the decoder's tiles vs the whole decode.

    The GEMM on ``query_tile x vocab_block`` tiles with K = d + 1 is what any float32 exact search
    must do; its rate against the square sgemm is the ceiling of the decode's roofline ratio.
    """
    from threadpoolctl import threadpool_limits

    dec = ExactDecoder(vec, threads=1, precision="float32")
    z = noisy_vectors(gen.integers(1000, 6000, min(args.queries, 1024)), vec, args.epsilon, gen)
    qa = dec._augment(z)
    qt, vt = dec.query_tile, dec.vocab_block
    buf = np.empty((qt, vt), dtype=np.float32)
    aug = dec._aug
    v = aug.shape[0] // vt * vt

    def tiles() -> None:
        for vs in range(0, v, vt):
            for qs in range(0, qa.shape[0] - qt + 1, qt):
                np.matmul(qa[qs : qs + qt], aug[vs : vs + vt].T, out=buf)

    sq = gen.standard_normal((2048, 2048), dtype=np.float32)
    res: dict[str, float] = {"gemm": 0.0, "decode": 0.0}
    with threadpool_limits(1):
        for _ in range(args.repeats):
            sq @ sq
            _, c_sq, _ = timed(lambda: sq @ sq)
            rate = 2.0 * 2048**3 / c_sq
            _, c_g, _ = timed(tiles)
            res["gemm"] = max(res["gemm"], 2.0 * (qa.shape[0] // qt * qt) * v * vec.shape[1] / c_g / rate)
            _, c_d, _ = timed(lambda: dec.decode(z))
            res["decode"] = max(res["decode"], 2.0 * z.shape[0] * vec.shape[0] * vec.shape[1] / c_d / rate)
    print(f"\none thread, CPU time, best of {args.repeats}: GEMM alone on {qt} x {vt} tiles (K = {aug.shape[1]}) "
          f"= {res['gemm']:.2f} of the square sgemm; textdp exact decode = {res['decode']:.2f}", flush=True)


def end_to_end(args: argparse.Namespace, gen: np.random.Generator) -> None:
    """``textdp obfuscate`` on the first ``--docs`` C50 documents; ratio to the roofline around it."""
    if not C50.exists():
        print(f"\n{C50} not found: end-to-end rows skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs.jsonl"
        with gzip.open(C50, "rt", encoding="utf-8") as fh, docs.open("w", encoding="utf-8") as out:
            for i, line in zip(range(args.docs), fh):
                row = json.loads(line)
                out.write(json.dumps({"id": row.get("id", i), "text": row["text"]}) + "\n")
        words = args.docs * args.size
        v, d = 400_000, 50
        print(f"\nend to end: textdp obfuscate, {args.docs} C50 documents, -e 10 --bag sample --size {args.size} "
              f"({words} words, V={v} d={d}), best of {args.e2e_repeats}")
        print(f"{'precision':>9} {'threads':>7} {'wall s':>7} {'words/s':>8} {'/ roofline':>10} {'CPU s':>6} "
              f"{'CPU ratio':>9}")
        outputs = {}
        for prec in args.e2e_precisions.split(","):
            for t in sorted({1, args.threads} if args.e2e_one_thread else {args.threads}):
                best = (np.inf, np.inf, 0.0, 0.0)
                for _ in range(args.e2e_repeats):
                    w0, c0 = sgemm(gen=gen)
                    out_path = Path(tmp) / f"out_{prec}_{t}.jsonl"
                    cmd = [sys.executable, "-m", "textdp", "obfuscate", str(docs), "-e", "10", "--bag", "sample",
                           "--size", str(args.size), "--seed", "1", "--engine", "single", "--threads", str(t),
                           "--decoder-precision", prec, "-o", str(out_path), "--force"]
                    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.perf_counter()
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    wall = time.perf_counter() - t0
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                    w1, c1 = sgemm(gen=gen)
                    if wall < best[0]:
                        best = (wall, cpu, max(w0, w1), max(c0, c1))
                    outputs[(prec, t)] = out_path.read_bytes()
                wall, cpu, roof_w, roof_c = best
                flops = 2.0 * v * d
                print(f"{prec:>9} {t:>7} {wall:>7.1f} {words / wall:>8.0f} {words / wall * flops / roof_w:>10.2f} "
                      f"{cpu:>6.1f} {words / cpu * flops / roof_c:>9.2f}  (roofline {roof_w * 1e-9:.1f} GFLOP/s, "
                      f"load {os.getloadavg()[0]:.1f})", flush=True)
        same = len(set(outputs.values())) == 1
        print(f"outputs byte-identical across precisions and thread counts (seed 1): {same}")
        if not same:
            raise SystemExit("outputs differ between precisions or thread counts")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=400_000, help="GloVe 6B 50d rows")
    ap.add_argument("--queries", type=int, default=2048)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--old-decoder", help="a copy of an older decode.py to compare against")
    ap.add_argument("--float16", action="store_true", help="add the torch float16 candidate path (slow on CPU)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch rows (slow on a CPU)")
    ap.add_argument("--docs", type=int, default=120)
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--e2e-repeats", type=int, default=2)
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--e2e-precisions", default="float32,bfloat16",
                    help="--decoder-precision values run end to end (comma-separated)")
    ap.add_argument("--e2e-one-thread", action="store_true", help="also run end to end with --threads 1")
    ap.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 rows")
    ap.add_argument("--no-faiss", action="store_true", help="skip the faiss rows (slow on a CPU)")
    ap.add_argument("--no-alone", action="store_true")
    ap.add_argument("--seed", type=int, default=0, help="seed of the noisy vectors (experiments)")
    args = ap.parse_args()
    gen = make_rng(args.seed)
    print(f"cores={os.cpu_count()} load={os.getloadavg()[0]:.1f} threads={args.threads}")
    print(cpu_line())
    if not args.no_alone:
        vec = np.asarray(load_embeddings(vocab_size=args.vocab).vectors)
        decode_alone(args, vec, gen)
        gemm_ceiling(args, vec, gen)
    if not args.no_e2e:
        end_to_end(args, gen)
    print(f"load at the end={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
