"""Peak memory of one document of N words: blocked noise/decoding against one block, same run.

``privatize_ids`` noises and decodes a bag in blocks of ``WORDS_PER_BLOCK`` words; the baseline
is the same call with the block size raised above N (everything at once, as before issue 10).
Peak memory is Python's tracemalloc peak (numpy buffers included) for one document run through
``textdp.pipeline.iter_privatize_documents`` and written to an in-memory JSONL buffer. The
vocabulary is a random 2,000-word, 50-d matrix (exact decoding of 10^6 words over GloVe's
400,000 would take ~7 minutes per setting; the memory does not depend on the vocabulary size
beyond the decoder's fixed block buffers).

    python benchmarks/bench_memory.py [--sizes 10000 100000 1000000] [--baseline-max 100000]
"""

from __future__ import annotations

import argparse
import io
import time
import tracemalloc

import numpy as np

import textdp.mechanisms.earth_movers as em
from textdp.embeddings import Embeddings
from textdp.io import SourcedDocument
from textdp.mechanisms import EarthMoversPrivacy
from textdp.pipeline import iter_privatize_documents, write_records


def peak(mech: EarthMoversPrivacy, doc: SourcedDocument, n: int) -> tuple[float, float]:
    tracemalloc.start()
    t = time.perf_counter()
    out = io.StringIO()
    for job in iter_privatize_documents(mech, [doc], size=n):
        write_records(out, job.records)
    _, p = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return p / 1e6, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--baseline-max", type=int, default=100_000, help="largest N run as one block")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}" for i in range(2000)]
    emb = Embeddings(words, rng.standard_normal((2000, 50)).astype(np.float32), name="random-2000x50")
    mech = EarthMoversPrivacy(epsilon=10, embeddings=emb, stop_words=None, bag="sample", seed=1).fit()
    doc = SourcedDocument(None, " ".join(words[:5]), "x")
    peak(mech, doc, 1000)  # warm-up (decoder buffers, imports)
    block = em.WORDS_PER_BLOCK
    print(f"{'N':>9}  {'blocked MB':>10}  {'one block MB':>12}  {'ratio':>6}  {'blocked s':>9}")
    for n in args.sizes:
        p_blocked, t_blocked = peak(mech, doc, n)
        if n <= args.baseline_max:
            em.WORDS_PER_BLOCK = max(block, n)
            try:
                p_one, _ = peak(mech, doc, n)
            finally:
                em.WORDS_PER_BLOCK = block
            print(f"{n:>9}  {p_blocked:>10.0f}  {p_one:>12.0f}  {p_one / p_blocked:>6.1f}  {t_blocked:>9.1f}")
        else:
            print(f"{n:>9}  {p_blocked:>10.0f}  {'-':>12}  {'-':>6}  {t_blocked:>9.1f}")


if __name__ == "__main__":
    main()
