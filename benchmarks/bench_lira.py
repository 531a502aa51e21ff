"""LiRA's shadow path (issue 30): what one shadow costs, and what sharing the fits saves.

Times, on one user-attributed corpus (audit defaults: K = m = 5 topics, 5 EM passes, vocabulary 500,
at most 30 documents per user):

1. one shadow fit (the released function on a random half of the users);
2. one release of an existing fit: the covered default's noise on the whole 5 x V rows, the keywords
   read off it, and the attack statistic for every user;
3. **baseline**: ``run_lira`` once per keyword count (``n = 20`` and ``n = 500``: the shadows are
   fitted twice), against **fast**: one ``run_lira(n=[20, 500])`` that fits the shadows once and draws
   only the noise per keyword count, release and ε. Prints the ratio baseline / fast (same run, same
   machine).

    PYTHONPATH=src nice python benchmarks/bench_lira.py /path/to/pan11_enron.jsonl.gz --models 8
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from textdp._rng import make_rng
from textdp.audit.lira import _statistic, _user_frequencies, run_lira, stand_in_vocabulary
from textdp.topics import SklearnLDA, UserCorpus
from textdp.topics.family import TopicDP
from textdp.topics.models import fit_database
from textdp.topics.release import noisy_keywords


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--models", type=int, default=8, help="shadow models of the timed runs (>= 8)")
    args = ap.parse_args()
    users = UserCorpus.from_jsonl(args.corpus, max_docs_per_user=30, max_features=500, min_df=3)
    pub = users.with_public_vocabulary(stand_in_vocabulary(users))
    rng = make_rng(30)
    half = np.flatnonzero(rng.random(pub.n_users) < 0.5)
    t = time.perf_counter()
    tw, prev, _ = fit_database(pub, SklearnLDA(n_topics=5, max_iter=5, seed=0), half)
    fit_s = time.perf_counter() - t
    mech = TopicDP(epsilon=1.0, delta=1e-5, sensitivity=0.3).fit()
    freqs = _user_frequencies(pub)
    rows = tw[np.argsort(-prev, kind="stable")[:5]]
    cols = np.broadcast_to(np.arange(rows.shape[1]), rows.shape)
    t = time.perf_counter()
    for _ in range(10):
        noisy = mech.noise(rows.shape).randomize(rows, seed=rng)
        keep = noisy_keywords(noisy, 500)
        _statistic(freqs, np.take_along_axis(noisy, keep, axis=1), np.take_along_axis(cols, keep, axis=1),
                   rows.shape[1])
    release_s = (time.perf_counter() - t) / 10
    print(f"corpus {args.corpus}: one shadow fit {fit_s:.2f} s; one release (noise on 5 x {rows.shape[1]}, "
          f"keywords, statistic of every user) {release_s * 1000:.0f} ms")
    common: dict[str, object] = {"models": args.models, "n_topics": 5, "m": 5, "keywords": ("noisy", "model"),
                                 "mechanisms": [("none", None), ("topicdp", 1.0)], "seed": 1}
    t = time.perf_counter()
    for k in (20, 500):
        run_lira(users, n=k, **common)  # type: ignore[arg-type]
    base_s = time.perf_counter() - t
    t = time.perf_counter()
    run_lira(users, n=[20, 500], **common)  # type: ignore[arg-type]
    fast_s = time.perf_counter() - t
    print(f"{args.models} shadows, releases noisy+model, n = 20 and 500: baseline (fits per n) {base_s:.1f} s, "
          f"fast (fits shared) {fast_s:.1f} s, ratio {base_s / fast_s:.2f}")


if __name__ == "__main__":
    main()
