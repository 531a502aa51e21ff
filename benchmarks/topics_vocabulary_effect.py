"""How much does one user move TopicDP's vocabulary and released matrix? (issue 19, item 3)

For each of the first ``--users`` users of a user-attributed corpus (CLI defaults: at most 30
documents per user, max_features 2000, min_df 5, max_df 0.5, sklearn LDA with 10 topics and 10
passes, model seed 0), remove that user and compare the released ``m x m`` matrix of the whole
database with that of the neighbour, two ways:

* **rebuilt** (the released function, textdp >= this change): the neighbour gets its own vocabulary;
* **fixed** (what the sampler measured up to b4f2b11): the neighbour is fitted on the whole
  corpus's vocabulary.

Prints the number of vocabulary words that change (median, max), the largest released-matrix
distance each way, and how many users move the rebuilt function more than any fixed neighbour.

    PYTHONPATH=src python benchmarks/topics_vocabulary_effect.py /path/to/pan11_enron.jsonl.gz --users 40
    PYTHONPATH=src python benchmarks/topics_vocabulary_effect.py /path/to/pan11_enron.jsonl.gz --users 40 --sample-gamma 0.3
"""

from __future__ import annotations

import argparse
import gzip
import json

import numpy as np

from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus, released_matrix_distance
from textdp.topics.models import fit_database


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--users", type=int, default=40)
    ap.add_argument("--size", type=int, default=5, help="m = n of the released matrix")
    ap.add_argument("--sample-gamma", type=float, default=None,
                    help="also run the sensitivity sampler for this gamma (sampler seed 1, no cache)")
    args = ap.parse_args()
    texts, users, seen = [], [], []
    opener = gzip.open if args.corpus.endswith(".gz") else open
    with opener(args.corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            a = str(r["author"])
            if a not in seen:
                if len(seen) == args.users:
                    continue
                seen.append(a)
            texts.append(r["text"])
            users.append(a)
    corpus = UserCorpus.from_texts(texts, users, max_docs_per_user=30)
    model = SklearnLDA(n_topics=10, max_iter=10)
    size = [(args.size, args.size)]
    tw, prev, vocab = fit_database(corpus, model)
    changed, rebuilt, fixed = [], [], []
    for u in range(corpus.n_users):
        rest = [x for x in range(corpus.n_users) if x != u]
        X_r, vocab_r = corpus.database(rest)
        changed.append(len(set(vocab) ^ set(vocab_r)))
        tw_r, prev_r = model.fit(X_r)
        rebuilt.append(float(released_matrix_distance(tw, prev, tw_r, prev_r, size)[0]))
        tw_f, prev_f = model.fit(corpus.X[corpus._rows(rest)])  # the old sampler: vocabulary held fixed
        fixed.append(float(released_matrix_distance(tw, prev, tw_f, prev_f, size)[0]))
    rebuilt_a, fixed_a = np.array(rebuilt), np.array(fixed)
    print(f"{corpus.n_users} users, {len(vocab)} vocabulary words; released {args.size}x{args.size} matrix")
    print(f"vocabulary words changed by removing one user: median {np.median(changed):g}, max {max(changed)}")
    print(f"largest released-matrix distance: rebuilt {rebuilt_a.max():.4f}, fixed {fixed_a.max():.4f}")
    print(f"users moving the rebuilt function more than any fixed neighbour: "
          f"{int((rebuilt_a > fixed_a.max()).sum())} of {corpus.n_users}")
    if args.sample_gamma is not None:
        sampler = SensitivitySampler(corpus=corpus, model=model, sizes=size, cache_dir=None)
        res = sampler.sample(args.sample_gamma, seed=1)[size[0]]
        print(f"sampled sensitivity (gamma {res.gamma:g}, {res.n_samples} pairs): {res.value:.4f} "
              f"in {res.seconds:.0f} s")


if __name__ == "__main__":
    main()
