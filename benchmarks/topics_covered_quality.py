"""What does the covered default cost in topic quality? (issue 30)

Compares, on one user-attributed corpus, the two releases of ``textdp topics`` at the CLI's model settings
(sklearn LDA, ``--model-topics``/``--topics`` m, ``--keywords`` n, 10 passes, at most 30 documents per user):

* **old default** (``--keywords-from model --vocabulary corpus``): the corpus vocabulary (``--max-features``
  2000, min_df 5, max_df 0.5), each topic's top n keywords chosen by the non-private model (NOT covered), the
  noise only on their n values;
* **covered default** (``--keywords-from noisy --vocabulary glove:10000``): the whole top-m rows over the
  public vocabulary, noise on every entry, keywords = each topic's n largest noisy values.

Both are calibrated with TopicDP's analytic discrete Gaussian at each ε (δ = 1e-4) for the same L2
sensitivity Δ (``--sensitivities``: ``worst-case`` is sqrt(2m); a number stands for a sampled value -- the
sampled Δ of each function is a corpus property, 0.29-0.50 for the old 10 x 10 release on Enron,
docs/topics-results.md). For each (Δ, ε) and ``--repeats`` noise draws it reports

* **overlap**: the share of the released keywords that are among the non-private model's top n of the same
  topic (the old default's keywords are the model's own: 100% by construction, its noise is on the values);
* **mass**: the true probability mass of the released keywords in their topic, as a share of the mass of the
  model's own top n (the old default: 100%);
* **UMass coherence** (Mimno et al. 2011) of the released keywords on the corpus's documents:
  mean over topics of ``sum_{i<j} log((D(w_i, w_j) + 1) / D(w_j))`` over the keyword pairs in release order;
  a keyword the corpus never uses gets the floor ``log(1 / D)`` (D documents) for each of its pairs, so
  random public words do not look coherent (higher is better; the model's own top n is the reference row);
* **value error**: RMSE of the released (post-processed) values against the true probabilities of the released
  keywords.

    PYTHONPATH=src nice python benchmarks/topics_covered_quality.py /path/to/pan11_enron.jsonl.gz --repeats 5
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from textdp.topics import SklearnLDA, UserCorpus, extract_topic_matrix
from textdp.topics.family import TopicDP
from textdp.topics.models import fit_database, topic_rows
from textdp.topics.release import postprocess
from textdp.topics.vocabulary import glove_vocabulary


def umass(keywords: list[tuple[str, ...]], docs: np.ndarray, index: dict[str, int]) -> float:
    """Mean UMass coherence of the topics' keyword lists on a binary document-word matrix ``docs``
    (a pair with a word the corpus never uses scores the floor ``log(1 / D)``)."""
    floor = math.log(1.0 / docs.shape[0])
    scores = []
    for kws in keywords:
        cols = [index.get(w) for w in kws]
        s = 0.0
        for i in range(1, len(cols)):
            for j in range(i):
                ci, cj = cols[i], cols[j]
                if ci is None or cj is None or not docs[:, cj].any() or not docs[:, ci].any():
                    s += floor
                    continue
                wi, wj = docs[:, ci], docs[:, cj]
                s += math.log((float((wi & wj).sum()) + 1.0) / float(wj.sum()))
        scores.append(s)
    return float(np.mean(scores))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--keywords", type=int, default=10)
    ap.add_argument("--vocabulary", type=int, default=10000, help="K of the public glove:K vocabulary")
    ap.add_argument("--sensitivities", default="worst-case,0.3", help="L2 sensitivities: worst-case or numbers")
    ap.add_argument("--epsilons", default="1,3,10,100,1000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=30)
    args = ap.parse_args()
    m, n = args.topics, args.keywords
    t0 = time.perf_counter()
    old = UserCorpus.from_jsonl(args.corpus, max_docs_per_user=30, max_features=2000)
    new = UserCorpus.from_jsonl(args.corpus, max_docs_per_user=30, vocabulary=glove_vocabulary(args.vocabulary))
    model = SklearnLDA(n_topics=max(m, 10), max_iter=10, seed=0)
    tw_o, prev_o, voc_o = fit_database(old, model)
    tw_n, prev_n, voc_n = fit_database(new, model)
    fit_s = time.perf_counter() - t0
    assert old.counts is not None
    docs = (old.counts > 0).toarray()  # every word of the corpus, for coherence
    index = {w: i for i, w in enumerate(old.columns)}
    model_old = extract_topic_matrix(tw_o, prev_o, voc_o, m, n)
    model_new = extract_topic_matrix(tw_n, prev_n, voc_n, m, n)
    rows = topic_rows(tw_n, prev_n, voc_n, m)
    print(f"corpus {args.corpus}: m={m} n={n} repeats {args.repeats}; fits {fit_s:.1f} s")
    print(f"non-private top {n}, corpus vocabulary: UMass {umass(list(model_old.keywords), docs, index):.2f}")
    print(f"non-private top {n}, glove:{args.vocabulary}: UMass {umass(list(model_new.keywords), docs, index):.2f}")
    print("| sensitivity | epsilon | release | overlap with the model's top n | mass of the model's top n | "
          "UMass coherence | value RMSE |")
    print("|---|---|---|---|---|---|---|")
    seed = np.random.SeedSequence(args.seed)
    grid = [(d, float(e)) for d in args.sensitivities.split(",") for e in args.epsilons.split(",")]
    for d, eps in grid:
        sens = math.sqrt(2 * m) if d == "worst-case" else float(d)
        mech_o = TopicDP(epsilon=eps, delta=1e-4, sensitivity=sens, keywords_from="model")
        mech_n = TopicDP(epsilon=eps, delta=1e-4, sensitivity=sens, keywords=n)
        res: dict[str, list[tuple[float, float, float, float]]] = {"old": [], "covered": []}
        for child in seed.spawn(args.repeats):
            a, b = child.spawn(2)
            rel = mech_o.privatize_batch([model_old], seed=a)[0]
            err = float(np.sqrt(np.mean((np.array(rel.matrix) - model_old.matrix) ** 2)))
            res["old"].append((1.0, 1.0, umass(list(rel.keywords), docs, index), err))
            rel = mech_n.privatize_batch([rows], seed=b)[0]
            over = np.mean([len(set(k) & set(t)) / n for k, t in zip(rel.keywords, model_new.keywords, strict=True)])
            true = np.array([[tw_n[model_new.topic_ids[i], voc_n.index(w)] for w in k]
                             for i, k in enumerate(rel.keywords)])
            err = float(np.sqrt(np.mean((postprocess(np.array(rel.raw_matrix)) - true) ** 2)))
            mass = np.mean(true.sum(axis=1) / model_new.matrix.sum(axis=1))
            res["covered"].append((float(over), float(mass), umass(list(rel.keywords), docs, index), err))
        for name, vals in res.items():
            v = np.array(vals)
            label = ("old default (model's keywords, NOT covered)" if name == "old" else
                     "covered default (keywords from noisy values)")
            print(f"| {d} | {eps:g} | {label} | {v[:, 0].mean():.0%} | {v[:, 1].mean():.0%} | {v[:, 2].mean():.2f} "
                  f"| {v[:, 3].mean():.4f} |")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
