"""LiRA on the default of ``textdp topics`` since issue 42 (``noisy-cooccurrence``): does the attack stay in its bound?

The same attack as ``textdp.audit.lira`` (online LiRA, leave-one-out, Manzonelli et al. 2024's statistic: a
user's mean log-likelihood under the released topics), on PAN-11 Enron users (at most 30 documents each):
``--models`` shadow releases, each on a random half of the users, each a full ``noisy-cooccurrence`` release
(noise drawn per release) over the public GloVe list; the attacker reads each topic's released keywords and
their values (the top ``n`` of the release's keyword order, for each ``n`` of ``--keywords``: a shorter
release is a prefix of the longer one). Rows: the mechanism at ``--epsilons`` (δ = 1e-5) and a no-noise
reference (ε = 1e6, the same function with almost no noise: the attack's power without privacy).

    nice -n 10 python benchmarks/lira_noisy_cooccurrence.py --models 64 --epsilons 3 --words 100
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace

import numpy as np

from textdp._rng import make_rng, spawn
from textdp.audit import lira
from textdp.mechanisms import get
from textdp.topics import UserCorpus
from textdp.topics.vocabulary import glove_vocabulary

ENRON = "/work/shared/data/pan11_enron/pan11_enron.jsonl.gz"


def subset(corpus: UserCorpus, users: np.ndarray) -> UserCorpus:
    """The database of ``users`` (same public columns)."""
    return replace(corpus, users=tuple(corpus.users[u] for u in users),
                   user_rows=tuple(corpus.user_rows[u] for u in users))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--corpus", default=ENRON)
    ap.add_argument("--models", type=int, default=64)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[3.0])
    ap.add_argument("--keywords", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--words", type=int, default=500, help="the mechanism's words= (public columns kept)")
    ap.add_argument("--topics", type=int, default=10)
    args = ap.parse_args()
    t0 = time.perf_counter()
    corpus = UserCorpus.from_jsonl(args.corpus, max_docs_per_user=30, vocabulary=glove_vocabulary(10000))
    member_rng, noise_rng = spawn(make_rng(1), 2)
    member = lira.membership_matrix(args.models, corpus.n_users, member_rng)
    freqs = lira._user_frequencies(corpus)
    index = {w: i for i, w in enumerate(corpus.columns)}
    V = len(corpus.columns)
    nmax = max(args.keywords)
    for eps in [*args.epsilons, 1e6]:
        stats = {n: np.empty((args.models, corpus.n_users)) for n in args.keywords}
        for j in range(args.models):
            mech = get("noisy-cooccurrence", epsilon=eps, delta=1e-5, topics=args.topics, words=args.words,
                       keywords=nmax, seed=noise_rng)
            rel = mech.privatize(subset(corpus, np.flatnonzero(member[j])))
            values = np.array(rel.matrix)
            cols = np.array([[index[w] for w in row] for row in rel.keywords])
            for n in args.keywords:
                stats[n][j] = lira._statistic(freqs, values[:, :n], cols[:, :n], V)
        for n in args.keywords:
            row = lira._lira_row("noisy-cooccurrence", "noisy", eps if eps < 1e6 else None, 1e-5,
                                 lira.lira_scores(stats[n], member), member, n=n)
            if eps < 1e6:  # an L2 (Gaussian) release with delta, its sensitivity the public clip
                row = replace(row, delta=1e-5, sensitivity="public clip",
                              dp_bound=tuple(min(1.0, math.exp(eps) * f + 1e-5) for f in lira.FPRS))
            out = row.to_dict()
            out["epsilon_run"] = eps
            print(json.dumps(out), flush=True)
    print(f"users {corpus.n_users}, models {args.models}, seconds {time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
