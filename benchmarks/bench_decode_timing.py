"""Does the default release decoder's time depend on the input words? (issue 19, item 4)

Decodes noisy vectors of three kinds of 200-word documents with the default exact decoder
(``ExactDecoder``, no sources: the release path), interleaved repetition by repetition so that
machine load hits all kinds alike:

* ``frequent``: words of GloVe frequency rank 1,000-1,200 (the reference);
* ``frequent-2``: words of rank 1,200-1,400, the **baseline** -- a document of the same kind, so
  ``frequent-2 / frequent`` is the ratio measurement noise alone gives in this run;
* ``rare``: words from the last 20,000 rows of the vocabulary.

It prints the median milliseconds per document, the ratio against ``frequent``, and in how many
repetitions the kind was slower than ``frequent``. A ratio for ``rare`` above the baseline's
means the decode time depends on the words -- through the noisy vectors, which are all the
decoder sees: the time is a function of the mechanism's output (post-processing), covered by
the same eps*d guarantee as the released words, never of the words themselves.

    PYTHONPATH=src python benchmarks/bench_decode_timing.py                 # V = 400k, eps 10, 20 repeats
    PYTHONPATH=src python benchmarks/bench_decode_timing.py --vocab 50000 --repeats 10 --eps 1 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from textdp._rng import make_rng
from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.mechanisms import noisy_vectors

KINDS = ("frequent", "frequent-2", "rare")


def documents(v: int, words: int, gen: np.random.Generator) -> dict[str, np.ndarray]:
    """Word ids of one document of each kind (fixed for the whole run)."""
    return {"frequent": gen.integers(1000, 1200, size=words),
            "frequent-2": gen.integers(1200, 1400, size=words),
            "rare": gen.integers(max(1400, v - 20000), v, size=words)}


def measure(vec: np.ndarray, eps: float, repeats: int, words: int, gen: np.random.Generator) -> dict[str, list[float]]:
    """Milliseconds per document decode, ``repeats`` interleaved rounds (kind order rotated each round)."""
    docs = documents(vec.shape[0], words, gen)
    dec = ExactDecoder(vec)
    warm = gen.integers(0, vec.shape[0], size=words)
    dec.decode(noisy_vectors(warm, vec, eps, gen))  # first call pays one-time set-up
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(repeats):
        order = KINDS[r % 3:] + KINDS[:r % 3]
        for kind in order:
            z = noisy_vectors(docs[kind], vec, eps, gen)  # the mechanism's output
            t0 = time.perf_counter()
            dec.decode(z)  # the release path: the decoder gets the noisy vectors only
            times[kind].append(1e3 * (time.perf_counter() - t0))
    dec.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=400_000, help="vocabulary size V (GloVe 6B 50d rows)")
    ap.add_argument("--eps", type=float, nargs="+", default=[10.0], help="epsilon values")
    ap.add_argument("--repeats", type=int, default=20, help="interleaved repetitions")
    ap.add_argument("--words", type=int, default=200, help="words per document")
    ap.add_argument("--seed", type=int, default=None, help="seed (experiments only; default OS entropy)")
    args = ap.parse_args()
    vec = np.asarray(load_embeddings(vocab_size=args.vocab).vectors)
    gen = make_rng(args.seed)
    print(f"default exact decoder, V={vec.shape[0]} d={vec.shape[1]}, {args.words}-word documents, "
          f"{args.repeats} interleaved repetitions")
    print(f"{'eps':>6} {'kind':>11} {'median ms':>10} {'/ frequent':>10} {'slower than frequent':>21}")
    for eps in args.eps:
        t = measure(vec, eps, args.repeats, args.words, gen)
        ref = float(np.median(t["frequent"]))
        for kind in KINDS:
            med = float(np.median(t[kind]))
            slower = sum(a > b for a, b in zip(t[kind], t["frequent"]))
            tag = " (baseline)" if kind == "frequent-2" else ""
            print(f"{eps:>6g} {kind:>11} {med:>10.1f} {med / ref:>10.3f} {slower:>11}/{args.repeats}{tag}", flush=True)


if __name__ == "__main__":
    main()
