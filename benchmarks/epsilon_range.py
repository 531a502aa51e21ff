"""Where does epsilon stop mattering for Earth Mover's privacy? (the supported range of epsilon)

The same noise draws are used at every epsilon: radius ``Gamma(n, 1) / epsilon`` (numpy's
gamma with scale ``1/epsilon`` is the standard gamma times the scale) and one direction per
word. For each epsilon the script prints the share of decoded words equal to the
epsilon -> 0 limit (the word decoded from the direction alone, at radius 10^15) and the
share left unchanged. Where the first share is ~1 (small epsilon) or the second is ~1
(large epsilon), a smaller / larger epsilon changes nothing: ``textdp._validation``
supports [1e-6, 1e6], three decades beyond both ends measured here on GloVe 6B 50d.

    python benchmarks/epsilon_range.py [--words 1000] [--seed 7]
"""

from __future__ import annotations

import argparse

import numpy as np

from textdp._rng import make_rng
from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.mechanisms.laplace import sample_direction


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=1000, help="sampled words (frequency ranks 1-50,000)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    emb = load_embeddings()
    dec = ExactDecoder(emb.vectors)
    rng = make_rng(args.seed)
    rows = rng.integers(0, 50_000, args.words)
    n = emb.dim
    radius = rng.gamma(float(n), 1.0, rows.size)
    direction = sample_direction(rows.size, n, rng)
    base = np.asarray(emb.vectors[rows], dtype=np.float64)
    limit = dec.decode(base + 1e15 * direction)  # epsilon -> 0: the direction alone decides
    print(f"{emb.name}: n={n}, largest vector norm {float(np.linalg.norm(emb.vectors, axis=1).max()):.1f}, "
          f"{rows.size} words")
    print(f"{'epsilon':>8}  {'= eps->0 limit':>14}  {'unchanged':>9}")
    for eps in [1e-9, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 1e4, 1e6]:
        out = dec.decode(base + (radius / eps)[:, None] * direction)
        print(f"{eps:>8g}  {np.mean(out == limit):>14.4f}  {np.mean(out == rows):>9.4f}")


if __name__ == "__main__":
    main()
