"""A worker's vocabulary load: read once into private memory and verified (issue 28) vs the old mmap path.

Issue 28 replaced the worker's "hash one open, then memory-map the path again" with one read of
each file through the worker's own checked descriptor into private memory, hashing the very
matrix and words it then uses. This measures, in the same run and on the same files (GloVe 6B
50d, V = 400,000, 80 MB, in a private work directory), the time of:

* ``verified``: :func:`textdp.engines.workdir.load_verified_vocabulary` (what a worker does now);
* ``old-mmap``: the a779fc6 steps as a baseline (memory-map and hash, read the words, then
  memory-map the path again), which is what the attack raced.

Each is run ``--repeats`` times with the files in the page cache (a worker's first load after
the driver wrote them); the median and the ratio to the baseline are printed, and the bytes of
private memory each load holds (``verified`` holds a copy of the matrix; the mapping shares the
page cache).

    nice python benchmarks/bench_vocabulary_load.py
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from textdp.embeddings import Embeddings, load_embeddings
from textdp.engines.workdir import load_verified_vocabulary, save_vocabulary, vocabulary_digests


def _old_mmap(d: Path, name: str, want: tuple[str, str]) -> Embeddings:
    """The a779fc6 worker load: hash through one mapping, then map the path again."""
    vectors = np.load(d / "vectors.npy", mmap_mode="r", allow_pickle=False)
    words = (d / "words.txt").read_bytes()
    a = np.ascontiguousarray(vectors, dtype=np.float32)
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.data.cast("B"))
    if (h.hexdigest(), hashlib.sha256(words).hexdigest()) != want:
        raise SystemExit("hash mismatch")
    words_list = (d / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return Embeddings(words_list, np.load(d / "vectors.npy", mmap_mode="r", allow_pickle=False), name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=400000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    emb = load_embeddings(vocab_size=args.vocab)
    want = vocabulary_digests(emb)
    with tempfile.TemporaryDirectory() as tmp:
        d = save_vocabulary(emb, Path(tmp) / "wd", "bench")
        times: dict[str, list[float]] = {"old-mmap": [], "verified": []}
        for _ in range(args.repeats):  # interleaved, so both see the same machine load
            for label in times:
                t0 = time.perf_counter()
                got = _old_mmap(d, "glove", want) if label == "old-mmap" else load_verified_vocabulary(
                    str(d), "glove", *want)
                times[label].append(time.perf_counter() - t0)
                assert got.vectors.shape == emb.vectors.shape
        base = statistics.median(times["old-mmap"])
        print(f"V = {emb.vectors.shape[0]:,}, d = {emb.vectors.shape[1]}, {emb.vectors.nbytes / 2**20:.0f} MiB; "
              f"median of {args.repeats}")
        for label, ts in times.items():
            private = 0 if label == "old-mmap" else emb.vectors.nbytes
            print(f"{label:>9}: {statistics.median(ts) * 1000:8.1f} ms  x{statistics.median(ts) / base:5.2f}  "
                  f"private matrix memory {private / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
