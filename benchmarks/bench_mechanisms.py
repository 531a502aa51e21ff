"""Words/s of every word-level mechanism at V = 400k (GloVe 6B 50d), with same-run baselines.

Measured in one run, on the same input words (GloVe ranks 1,000-50,000):

* every registered word-level mechanism (``privatize_ids``, exact decoding where it
  applies; best of ``--repeats``), plus its one-off setup time (``fit``);
* same-run baselines: the naive per-word loops ``argmin ||E - v||`` (CMP) and
  "distances to all words, softmax, ``rng.choice``" (SanText without the V x V matrix),
  and the ratio of each mechanism to CMP; for SynTF, the dense sampler (a softmax over all
  V words per document, :func:`textdp.mechanisms.syntf.syntf`) against the sparse one
  (``sample_bags``: the document's terms plus one category for the rest);
* optionally (``--identity``) the fraction of words released unchanged at several
  epsilons (where each mechanism's output *is* its input);
* optionally (``--peer PYTHON``) the peer library mldp-text, run in its own
  interpreter (it needs numpy < 2) on the same 400k x 50 vocabulary.

The machine is shared: the load average before and after is printed; compare
ratios taken within one run, not absolute rates across runs.

    python benchmarks/bench_mechanisms.py                              # table of BENCHMARKS.md
    python benchmarks/bench_mechanisms.py --identity --peer /tmp/mldp-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from textdp._rng import make_rng
from textdp.embeddings import load_embeddings
from textdp.mechanisms import get

# (name, params, words timed); epsilon 10 unless given
CONFIGS: list[tuple[str, dict[str, Any], int]] = [
    ("earth-movers", {"size": 64}, 2048),  # bags of 64 words (privatize_ids on a (B, 64) array)
    ("earth-movers", {"size": 64, "postprocess": "mbr"}, 512),
    ("cmp", {}, 2048),
    ("cmp", {"postprocess": "mbr"}, 512),
    ("mahalanobis", {"lambd": 0.2}, 2048),
    ("vickrey", {"t": 0.5}, 1024),
    ("tem", {"beta": 0.001}, 256),
    ("santext", {}, 256),
    ("santext+", {"p": 0.3, "sensitive_fraction": 0.9}, 256),
    ("custext", {"top_k": 20}, 200_000),
    ("custext+", {"top_k": 20}, 200_000),
    ("random", {"rate": 0.3, "epsilon": None}, 1_000_000),
    ("syntf", {"size": 64}, 262_144),  # documents of 64 input words -> synthetic bags of 64 words
]


def label(name: str, params: dict[str, Any]) -> str:
    extra = ",".join(f"{k}={v}" for k, v in params.items() if k != "epsilon")
    return f"{name}({extra})" if extra else name


def naive_cmp(vectors: np.ndarray, ids: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """The obvious per-word loop: noise, then argmin of the distance to every word."""
    from textdp.mechanisms import laplace_noise

    out = []
    for i in ids:
        z = vectors[i] + laplace_noise(1, vectors.shape[1], eps, rng)[0]
        out.append(int(np.argmin(np.linalg.norm(vectors - z, axis=1))))
    return np.array(out)


def naive_santext(vectors: np.ndarray, ids: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Per word: distances to every word, softmax in float64, ``rng.choice`` (the authors' method, row by row)."""
    out = []
    for i in ids:
        d = np.linalg.norm(vectors - vectors[i], axis=1)
        lw = -eps * d / 2
        p = np.exp(lw - lw.max())
        out.append(int(rng.choice(vectors.shape[0], p=p / p.sum())))
    return np.array(out)


def dense_syntf(v: int, bags: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """SynTF with a dense (B, V) count matrix and a softmax over all V words per document."""
    from textdp.mechanisms.syntf import syntf

    w = np.zeros((bags.shape[0], v))
    np.add.at(w, (np.repeat(np.arange(bags.shape[0]), bags.shape[1]), bags.reshape(-1)), 1.0)
    return syntf(w, eps, bags.shape[1], rng)


def timed(fn: Any, n: int, repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = max(best, n / (time.perf_counter() - t0))
    return best


PEER_SNIPPET = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from gensim.models import KeyedVectors
import mldp_text
npy, words_path, eps = sys.argv[1], sys.argv[2], float(sys.argv[3])
E = np.load(npy)
words = open(words_path, encoding="utf-8").read().split("\n")[:-1]
kv = KeyedVectors(vector_size=E.shape[1])
kv.add_vectors(words, E)
rng = np.random.default_rng(0)
sample = [words[i] for i in rng.integers(1000, 50000, 40)]
out = {}
for name, kw, n in [("multivariate_calibrated", {"use_faiss": False}, 4),
                    ("multivariate_calibrated", {"use_faiss": True}, 40),
                    ("mahalanobis", {"use_faiss": False}, 4),
                    ("vickrey", {"use_faiss": False}, 4),
                    ("tem", {}, 3),
                    ("truncated_gumbel", {"use_faiss": False}, 4)]:
    key = name + ("+faiss-ivf" if kw.get("use_faiss") else "")
    try:
        t0 = time.perf_counter()
        m = mldp_text.get_mechanism(name, epsilon=eps, embedding_matrix=kv, dim=E.shape[1], vocab=set(words), **kw)
        setup = time.perf_counter() - t0
        m.replace_word(sample[0])
        t0 = time.perf_counter()
        for w in sample[1:n + 1]:
            m.replace_word(w)
        out[key] = {"words_per_s": n / (time.perf_counter() - t0), "setup_s": setup}
    except Exception as exc:  # report, do not hide
        out[key] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
print(json.dumps(out))
"""


def run_peer(python: str, vectors: np.ndarray, words: tuple[str, ...], eps: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        npy = Path(tmp) / "glove.npy"
        wp = Path(tmp) / "words.txt"
        np.save(npy, np.asarray(vectors, dtype=np.float32))
        wp.write_text("".join(w + "\n" for w in words), encoding="utf-8")
        res = subprocess.run(
            [python, "-c", PEER_SNIPPET, str(npy), str(wp), str(eps)], capture_output=True, text=True, timeout=3000,
            check=False,
        )
    if res.returncode != 0:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "failed"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=400_000)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of timed words")
    ap.add_argument("--naive-words", type=int, default=10)
    ap.add_argument("--only", nargs="*", help="mechanism names to run")
    ap.add_argument("--identity", action="store_true", help="fraction released unchanged at several epsilons")
    ap.add_argument("--identity-eps", type=float, nargs="*", default=[1, 3, 5, 10, 20, 50])
    ap.add_argument("--peer", help="python interpreter with mldp-text installed")
    ap.add_argument("--mbr-eps", type=float, nargs="*", default=[], help="compare CMP with and without MBR here")
    args = ap.parse_args()

    print(f"cores: {os.cpu_count()}  load average before: {os.getloadavg()}")
    emb = load_embeddings(vocab_size=args.vocab)
    vec64 = np.asarray(emb.vectors, dtype=np.float64)
    ids_all = make_rng(0).integers(1000, min(50_000, emb.vocab_size), 1_000_000)
    rows = []
    rates: dict[str, float] = {}
    for name, params, n in CONFIGS:
        if args.only and name not in args.only:
            continue
        params = dict(params)
        eps = params.pop("epsilon", args.epsilon)
        n = max(16, int(n * args.scale))
        ids = ids_all[:n]
        t0 = time.perf_counter()
        mech = get(name, epsilon=eps, embeddings=emb, seed=1, **params).fit()
        setup = time.perf_counter() - t0
        if "size" in params:  # a bag mechanism: (B, N) bags of vocabulary rows
            bags = ids[: n - n % params["size"]].reshape(-1, params["size"])
            n = bags.size
            mech.privatize_ids(bags[:1])  # warm-up
            wps = timed(lambda m=mech, x=bags: m.privatize_ids(x), n, args.repeats)
            m_eps = float(mech.epsilon_)
        else:
            mech.privatize_ids(ids[:16])  # warm-up (thread pools, lazy buffers)
            wps = timed(lambda m=mech, x=ids: m.privatize_ids(x), n, args.repeats)
            m_eps = float(mech.guarantee.epsilon)
        key = label(name, dict(params.items()))
        rates[key] = wps
        rows.append((key, m_eps, wps, setup))
        print(f"{key:42s} eps={m_eps:<8.4g} {wps:12,.1f} words/s   setup {setup:6.1f} s", flush=True)

    rng = make_rng(2)
    nw = args.naive_words
    naive = {
        "naive CMP loop": timed(lambda: naive_cmp(vec64, ids_all[:nw], args.epsilon, rng), nw, 1),
        "naive SanText loop": timed(lambda: naive_santext(vec64, ids_all[:nw], args.epsilon, rng), nw, 1),
    }
    if "syntf(size=64)" in rates:
        dense_bags = ids_all[: 64 * 16].reshape(16, 64)
        naive["dense SynTF (softmax over V per document)"] = timed(
            lambda: dense_syntf(emb.vocab_size, dense_bags, args.epsilon, rng), dense_bags.size, args.repeats)
    for k, v in naive.items():
        print(f"{k:42s} {'':12s} {v:12,.2f} words/s")
    print("\n| mechanism | epsilon | words/s | setup (s) | vs CMP | vs naive loop of its family |")
    print("|---|---|---|---|---|---|")
    cmp_rate = rates.get("cmp")
    for key, eps, wps, setup in rows:
        fam = naive["naive SanText loop"] if key.startswith(("santext", "tem")) else naive["naive CMP loop"]
        if key.startswith("syntf"):
            fam = naive["dense SynTF (softmax over V per document)"]
        vs_cmp = f"{wps / cmp_rate:.2f}x" if cmp_rate else "-"
        print(f"| {key} | {eps:.4g} | {wps:,.0f} | {setup:.1f} | {vs_cmp} | {wps / fam:,.0f}x |")

    if args.identity:
        print("\nFraction released unchanged (300 words, ranks 1,000-50,000):")
        eps_grid = args.identity_eps
        print("| mechanism | " + " | ".join(f"eps={e:g}" for e in eps_grid) + " |")
        print("|---|" + "---|" * len(eps_grid))
        ids = ids_all[:300]
        for name, params, _ in CONFIGS:
            if name in ("random", "earth-movers", "syntf") or (args.only and name not in args.only):
                continue
            params = dict(params)
            cells = []
            for e in eps_grid:
                out = get(name, epsilon=e, embeddings=emb, seed=3, **params).fit().privatize_ids(ids)
                cells.append(f"{np.mean(out == ids):.2f}")
            print(f"| {label(name, params)} | " + " | ".join(cells) + " |", flush=True)

    if args.mbr_eps:
        from textdp.mechanisms.kernels import nearest_k

        src = make_rng(5).integers(1000, 6000, 300)
        top, _ = nearest_k(vec64[src], emb.vectors, 101)
        print("\nMBR post-processing: replaced fraction, and share of replacements among the input's 100 nearest")
        print("| epsilon | replaced (nn) | replaced (mbr) | in top-100 (nn) | in top-100 (mbr) |")
        print("|---|---|---|---|---|")
        for e in args.mbr_eps:
            outs = [
                get("cmp", epsilon=e, embeddings=emb, seed=21, **kw).fit().privatize_ids(src)
                for kw in ({}, {"postprocess": "mbr"})
            ]
            cells = [f"{np.mean(o != src):.2f}" for o in outs]
            for o in outs:
                ch = o != src
                cells.append(f"{np.mean([w in t for w, t in zip(o[ch], top[ch])]):.2f}")
            print(f"| {e:g} | " + " | ".join(cells) + " |", flush=True)

    if args.peer:
        print("\nmldp-text (same vocabulary, its own interpreter):")
        peer = run_peer(args.peer, emb.vectors, emb.words, args.epsilon)
        for k, v in peer.items():
            print(f"  {k:38s} {v}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
