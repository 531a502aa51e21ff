"""Cost of a cryptographically secure bit generator, raw and on real releases.

textdp draws all noise from ``textdp._rng.make_rng``, whose bit generator is AES-128
in counter mode (``randomgen.AESCounter``). This measures, in one run and with the
same code paths, what that costs against numpy's default PCG64 (not cryptographic)
and against ChaCha20 (``randomgen.ChaCha``, the other CSPRNG candidate):

(a) raw throughput: ``standard_normal`` and ``gamma(shape=50)`` draws per second (the
    two laws of the n-dimensional Laplace mechanism), and the cost of making a
    generator (a fresh OS key for AES / ChaCha, a ``SeedSequence`` for PCG64);
(b) end to end:
    * Earth Mover's privacy, ``EarthMoversPrivacy(epsilon=10, size=N)`` with the exact
      decoder and GloVe 6B 50d, privatizing ``--docs`` Reuters C50 documents
      (``privatize_batch``: bags, noise, decoding, records);
    * a TopicDP Gaussian release: an sklearn LDA fit on the Enron users of
      ``pan11_enron`` (one fit; a real release also fits hundreds of neighbours to
      sample the sensitivity, so this overstates the generator's share), the top
      m x n topic matrix, and the Gaussian noise; and the noise step alone (generator
      creation + ``randomise``), the worst case.

Each timing is the minimum over ``--repeats`` runs, the generators interleaved in
every round, so that a shared machine's noise hits all of them alike; the overhead
is the ratio of minima measured in the same run.

    python benchmarks/bench_rng.py                 # the table of BENCHMARKS.md
    python benchmarks/bench_rng.py --docs 50 --repeats 2 --skip-topics   # quick
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import os
import secrets
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from randomgen import AESCounter, ChaCha  # type: ignore[import-untyped]

from textdp._rng import make_rng
from textdp.embeddings import load_embeddings
from textdp.mechanisms import EarthMoversPrivacy, noisy_vectors
from textdp.text import normalize

MAKERS: dict[str, Callable[[], np.random.Generator]] = {
    "PCG64": lambda: np.random.Generator(np.random.PCG64(np.random.SeedSequence())),
    "AESCounter": lambda: make_rng(None),  # the textdp default: AES-128-CTR, fresh OS key
    "ChaCha20": lambda: np.random.Generator(ChaCha(key=secrets.randbits(256))),
}


def data_dir() -> Path:
    env = os.environ.get("TEXTDP_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


CPU: dict[str, float] = {}  # CPU seconds (all threads) of the last min_times call, less disturbed by other load


def min_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Minimum wall seconds of each function over ``repeats`` interleaved rounds (CPU minima in ``CPU``)."""
    best = dict.fromkeys(fns, float("inf"))
    CPU.clear()
    for r in range(repeats):
        order = list(fns.items()) if r % 2 == 0 else list(fns.items())[::-1]  # ABBA...
        for name, fn in order:
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
            CPU[name] = min(CPU.get(name, float("inf")), time.process_time() - c0)
    return best


def report(title: str, times: dict[str, float], unit: str, count: float | None = None) -> None:
    base, cbase = times["PCG64"], CPU["PCG64"]
    print(f"\n{title}")
    for name, t in times.items():
        rate = f"{count / t:12.4g} {unit}/s" if count else f"{t:10.4g} s"
        c = CPU[name]
        print(f"  {name:11s} {rate}   wall vs PCG64: {t / base:5.3f} ({100 * (t / base - 1):+.1f}%)"
              f"   cpu {c:8.4g} s vs PCG64: {c / cbase:5.3f} ({100 * (c / cbase - 1):+.1f}%)")


def _make_many(mk: Callable[[], np.random.Generator]) -> list[np.random.Generator]:
    return [mk() for _ in range(1000)]


def raw_throughput(n: int, repeats: int) -> None:
    gens = {k: mk() for k, mk in MAKERS.items()}
    report(f"(a) standard_normal, {n:,} draws", min_times(
        {k: partial(g.standard_normal, n) for k, g in gens.items()}, repeats), "draws", n)
    m = n // 50
    report(f"(a) gamma(shape=50), {m:,} draws", min_times(
        {k: partial(g.gamma, 50.0, 0.1, size=m) for k, g in gens.items()}, repeats), "draws", m)
    report("(a) make a generator (x1000)", min_times(
        {k: partial(_make_many, mk) for k, mk in MAKERS.items()}, repeats), "s")


def _emp(**kw: Any) -> EarthMoversPrivacy:
    # the generator argument is `seed=` (issue 13) or the older `rng=`
    params = inspect.signature(EarthMoversPrivacy).parameters
    if "seed" in params:
        kw["seed"] = kw.pop("rng")
    return EarthMoversPrivacy(**kw)


def earth_movers(n_docs: int, size: int, repeats: int) -> None:
    emb = load_embeddings()
    rows = read_jsonl(data_dir() / "reuter_50_50" / "reuter_50_50.jsonl.gz")
    texts = []
    for r in rows:
        if len(emb.ids(normalize(r["text"], "english"))[0]) >= size:
            texts.append(r["text"])
        if len(texts) == n_docs:
            break
    kinds = ["PCG64", "AESCounter"]

    def release(kind: str) -> None:
        mech = _emp(epsilon=10.0, size=size, embeddings=emb, seed=MAKERS[kind](), decoder="exact")
        mech.fit()
        mech.privatize_batch(texts)

    def noise(kind: str) -> None:
        ids = np.zeros(n_docs * size, dtype=np.int64)
        noisy_vectors(ids, emb.vectors, 10.0, MAKERS[kind]())

    release("PCG64")  # warm the embeddings and BLAS
    t_rel = min_times({k: partial(release, k) for k in kinds}, repeats)
    report(f"(b) Earth Mover's release: {len(texts)} C50 documents, N={size}, eps=10, exact decoder",
           t_rel, "docs", len(texts))
    t_noise = min_times({k: partial(noise, k) for k in kinds}, max(repeats, 9))
    report(f"(b)   of which the noise (Algorithm 1, {n_docs * size:,} word vectors)", t_noise, "s")
    extra = t_noise["AESCounter"] - t_noise["PCG64"]
    print(f"  => AES-CTR's extra noise time / release time: {extra * 1e3:.2f} ms / {t_rel['PCG64']:.2f} s"
          f" = {100 * extra / t_rel['PCG64']:+.3f}%")


def topicdp(repeats: int, m: int, n: int) -> None:
    from textdp.topics import (
        GaussianNoise,
        UserCorpus,
        extract_topic_matrix,
        make_topic_model,
    )

    rows = read_jsonl(data_dir() / "pan11_enron" / "pan11_enron.jsonl.gz")
    rows = [r for r in rows if r.get("author")]
    corpus = UserCorpus.from_texts([r["text"] for r in rows], [r["author"] for r in rows],
                                   max_docs_per_user=30, max_features=2000)
    mech = GaussianNoise(epsilon=3.0, delta=1e-4, sensitivity=0.1)
    randomize = mech.randomize
    kinds = ["PCG64", "AESCounter"]

    def release(kind: str) -> None:
        model = make_topic_model("sklearn", n_topics=10, max_iter=10, seed=0)
        tw, prev = model.fit(corpus.X)
        tm = extract_topic_matrix(tw, prev, corpus.vocabulary, m, n)
        randomize(tm.matrix, seed=MAKERS[kind]())

    matrix = np.full((m, n), 0.01)

    def noise_only(kind: str) -> None:
        for _ in range(1000):
            randomize(matrix, seed=MAKERS[kind]())

    t_rel = min_times({k: partial(release, k) for k in kinds}, repeats)
    report(f"(b) TopicDP Gaussian release: LDA fit on {corpus.X.shape[0]:,} Enron documents "
           f"({len(corpus.users)} users), {m}x{n} matrix", t_rel, "s")
    t_noise = min_times({k: partial(noise_only, k) for k in kinds}, max(repeats, 9))
    report(f"(b)   the noise step alone: new generator + {m}x{n} Gaussian noise (x1000)", t_noise, "s")
    extra = (t_noise["AESCounter"] - t_noise["PCG64"]) / 1000
    print(f"  => AES-CTR's extra noise time / release time: {extra * 1e6:.1f} us / {t_rel['PCG64']:.2f} s"
          f" = {100 * extra / t_rel['PCG64']:+.5f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=5_000_000)
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--size", type=int, default=200, help="bag size N (C50 median: 270 tokens)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-release", action="store_true")
    ap.add_argument("--skip-topics", action="store_true")
    args = ap.parse_args()
    bg = AESCounter(key=1)
    print(f"numpy {np.__version__}; AES-NI in use: {bool(bg.use_aesni)}; cores: {os.cpu_count()}")
    raw_throughput(args.draws, max(args.repeats, 5))
    if not args.skip_release:
        earth_movers(args.docs, args.size, args.repeats)
    if not args.skip_topics:
        topicdp(args.repeats, 10, 10)


if __name__ == "__main__":
    main()
