"""Issue 42: are the covered topic mechanisms useful? NPMI on held-out documents, diversity, time.

For one user-attributed corpus (20 Newsgroups posters: the ``train`` split is the private corpus and the
``test`` split the held-out documents; Enron: a user-disjoint or document split, see ``--heldout``), at
each ε (δ given), it releases ``--topics`` x ``--keywords`` with each named mechanism through the library
(``textdp.mechanisms.get(...).privatize(corpus)``, the path of ``textdp topics``) and reports

* **NPMI** (Bouma 2009; Aletras & Stevenson 2013) of each topic's keywords on the held-out documents
  (binary occurrence; a pair that never co-occurs scores -1), mean over topics;
* **diversity**: distinct keywords / all keywords (Dieng et al. 2020);
* **overlap**: the share of the released keywords among the top ``--keywords`` of the non-private LDA topic
  matched to each released topic (Hungarian matching on keyword overlap);
* **time** of the release (seconds, one process).

A mechanism that is not a corpus mechanism (``topicdp``: the covered default before issue 42) is run as
``textdp topics --mechanism topicdp --sensitivity worst-case`` runs it: one LDA (10 topics, 10 passes) over the
public vocabulary (``--glove``, 10,000 words as the CLI), its whole rows noised, keywords its largest noisy values
(the sampled sensitivity's 570 fits on 5,756 users are not run here).

The reference is a non-private scikit-learn LDA (batch VB, 10 passes, seed 0; ``textdp topics``' model) on the
same documents (the same users and contribution bound), over the CLI's corpus vocabulary (2,000 words,
min_df 5, max_df 0.5) and, for comparison, over the same public columns as the mechanisms.

    nice -n 10 python benchmarks/topics_private_quality.py 20ng --epsilons 1 3 10 --mechanisms noisy-cooccurrence
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from textdp.mechanisms import get
from textdp.text import normalize
from textdp.text import strip_quoted as strip_quoted_text
from textdp.topics import SklearnLDA, UserCorpus
from textdp.topics.family import takes_corpus
from textdp.topics.models import fit_database, topic_rows
from textdp.topics.vocabulary import glove_vocabulary

DATA = Path("/work/shared/data")


def load(name: str, split: str | None) -> tuple[list[str], list[str]]:
    """``(texts, users)`` of a shared corpus (``split``: 20NG's train/test; None = all records)."""
    path = {"20ng": DATA / "20newsgroups/20newsgroups.jsonl.gz", "enron": DATA / "pan11_enron/pan11_enron.jsonl.gz"}[name]
    texts, users = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if split is not None and r.get("split") != split:
                continue
            texts.append(str(r.get("text") or ""))
            users.append(str(r.get("author")))
    return texts, users


def npmi(topics: list[list[str]], docs: list[set[str]]) -> float:
    """Mean NPMI over topics of their keyword pairs on binary documents (never together: -1)."""
    D = len(docs)
    words = {w for t in topics for w in t}
    occ = {w: {i for i, d in enumerate(docs) if w in d} for w in words}
    scores = []
    for t in topics:
        s = []
        for i in range(len(t)):
            for j in range(i + 1, len(t)):
                a, b = occ[t[i]], occ[t[j]]
                n_ab = len(a & b)
                if n_ab == 0:
                    s.append(-1.0)
                    continue
                p_ab, p_a, p_b = n_ab / D, len(a) / D, len(b) / D
                s.append(-1.0 if p_ab >= 1.0 else math.log(p_ab / (p_a * p_b)) / -math.log(p_ab))
        scores.append(float(np.mean(s)))
    return float(np.mean(scores))


def diversity(topics: list[list[str]]) -> float:
    allw = [w for t in topics for w in t]
    return len(set(allw)) / len(allw)


def overlap(topics: list[list[str]], reference: list[list[str]]) -> float:
    """Share of released keywords in the matched reference topic's keywords (Hungarian on overlap)."""
    cost = np.array([[-len(set(a) & set(b)) for b in reference] for a in topics])
    r, c = linear_sum_assignment(cost)
    return float(-cost[r, c].sum() / sum(len(t) for t in topics))


def lda_topics(X, vocab, k: int, n: int) -> list[list[str]]:
    tw, prev = SklearnLDA(n_topics=k, max_iter=10, seed=0).fit(X)
    order = np.argsort(-prev, kind="stable")
    return [[vocab[j] for j in np.argsort(-tw[t], kind="stable")[:n]] for t in order]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", choices=("20ng", "enron"))
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 10.0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--keywords", type=int, default=10)
    ap.add_argument("--mechanisms", nargs="+", default=["noisy-cooccurrence"])
    ap.add_argument("--param", action="append", default=[], help="NAME=VALUE for every mechanism")
    ap.add_argument("--glove", type=int, default=10000)
    ap.add_argument("--max-docs-per-user", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--no-lda", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    params = {}
    for p in a.param:
        k, v = p.split("=", 1)
        params[k] = float(v) if "." in v or "e" in v else int(v)

    t0 = time.perf_counter()
    if a.corpus == "20ng":
        texts, users = load("20ng", "train")
        held, _ = load("20ng", "test")
    else:  # Enron has no split: every 5th document of each user is held out, the rest is the private corpus
        all_t, all_u = load("enron", None)
        seen: dict[str, int] = {}
        texts, users, held = [], [], []
        for t, u in zip(all_t, all_u, strict=True):
            seen[u] = seen.get(u, 0) + 1
            (held.append(t) if seen[u] % 5 == 0 else (texts.append(t), users.append(u)))
    heldout = [set(normalize(strip_quoted_text(t))) for t in held]
    vocab = glove_vocabulary(a.glove)
    corpus = UserCorpus.from_texts(texts, users, max_docs_per_user=a.max_docs_per_user or None,
                                   strip_quoted=True, vocabulary=vocab)
    print(f"# {a.corpus}: {corpus.n_users} users, {corpus.n_docs} documents, {len(held)} held-out documents "
          f"(load {time.perf_counter() - t0:.0f} s)", flush=True)
    rows = []
    if not a.no_lda:
        cv = UserCorpus.from_texts(texts, users, max_docs_per_user=a.max_docs_per_user or None, strip_quoted=True)
        for what, X, voc in (("LDA (corpus vocabulary 2000, non-private)", cv.X, cv.vocabulary),
                             (f"LDA (public columns {params.get('words', 500)}, non-private)",
                              corpus.X[:, : int(params.get("words", 500))], corpus.vocabulary)):
            t = time.perf_counter()
            kw = lda_topics(X, voc, a.topics, a.keywords)
            rows.append({"mechanism": what, "epsilon": None, "npmi": npmi(kw, heldout), "diversity": diversity(kw),
                         "overlap": 1.0, "seconds": time.perf_counter() - t, "keywords": kw})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "keywords"}), flush=True)
            print("   ", [" ".join(k[:6]) for k in kw[:5]], flush=True)
            if what.startswith("LDA (corpus"):
                reference = kw
    fitted = None
    for name in a.mechanisms:
        for eps in a.epsilons:
            for r in range(a.repeats):
                t = time.perf_counter()
                if takes_corpus(name):
                    mech = get(name, epsilon=eps, delta=a.delta, topics=a.topics, keywords=a.keywords,
                               seed=a.seed + r, **params)
                    rel = mech.privatize(corpus)
                else:  # the previous covered default: LDA over the public columns, noise on whole rows
                    if fitted is None:  # one fit (timed once, in the first release's seconds)
                        fitted = topic_rows(*fit_database(corpus, SklearnLDA(n_topics=a.topics, max_iter=10, seed=0)),
                                            a.topics)
                    mech = get(name, epsilon=eps, delta=a.delta, sensitivity="worst-case", keywords=a.keywords,
                               seed=a.seed + r)
                    rel = mech.privatize(fitted)
                secs = time.perf_counter() - t
                kw = [list(k) for k in rel.keywords]
                row = {"mechanism": name, "params": params, "epsilon": eps, "repeat": r, "npmi": npmi(kw, heldout),
                       "diversity": diversity(kw), "overlap": overlap(kw, reference) if not a.no_lda else None,
                       "seconds": secs, "keywords": kw}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "keywords"}), flush=True)
                print("   ", [" ".join(k[:6]) for k in kw[:5]], flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
