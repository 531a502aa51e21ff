"""Does LiRA see the covered default when its noise is too small? (issue 30: the test paired with a wrong law)

The covered release (whole 5 x 500 rows over the fixed stand-in vocabulary, keywords read off the noisy values)
on PAN-11 Enron, 64 shadows, epsilon 1, delta 1e-5, n = 500 keywords per topic: the same shadow fits, the
noise calibrated to several supplied L2 sensitivities -- 0.293 (the largest of the sampler's first 25 pairs),
then 6x, 30x and 293x too small (a planted under-noising bug). Prints one LiRA row per sensitivity.

    PYTHONPATH=src nice python benchmarks/lira_covered_sensitivity.py /path/to/pan11_enron.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from textdp._rng import make_rng, spawn
from textdp.audit import lira
from textdp.topics import UserCorpus
from textdp.topics.family import TopicDP


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--sensitivities", default="0.2928253544848906,0.05,0.01,0.001")
    args = ap.parse_args()
    users = UserCorpus.from_jsonl(args.corpus, max_docs_per_user=30, max_features=500, min_df=3)
    member_rng, noise_rng, _ = spawn(make_rng(1), 3)  # as run_lira(seed=1): the same membership draw
    member = lira.membership_matrix(64, users.n_users, member_rng)
    pub = users.with_public_vocabulary(lira.stand_in_vocabulary(users))
    index = {w: i for i, w in enumerate(users.columns)}
    t = time.perf_counter()
    fits = lira._fits(pub, member, index, n_topics=5, max_iter=5, progress=None, done=0, total=64)
    freqs = lira._user_frequencies(users)
    for d in (float(x) for x in args.sensitivities.split(",")):
        mech = TopicDP(epsilon=1.0, delta=1e-5, sensitivity=d).fit()
        stats = np.empty((64, users.n_users))
        for j, fit in enumerate(fits):
            values, cols = lira._non_private("noisy", fit, 5, 500, np.zeros(0, dtype=np.int64))
            released, released_cols = lira._released("noisy", mech.noise(values.shape).randomize(values, seed=noise_rng), cols, 500)
            stats[j] = lira._statistic(freqs, released, released_cols, len(users.columns))
        row = lira._lira_row("topicdp", "noisy", 1.0, 1e-5, lira.lira_scores(stats, member), member, n=500,
                             sensitivity=f"supplied {d:g}")
        print(json.dumps(row.to_dict()))
    print(f"seconds {time.perf_counter() - t:.1f}")


if __name__ == "__main__":
    main()
