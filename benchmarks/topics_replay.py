"""Record and replay of TopicDP's sampled sensitivity on a real corpus (issue 29): the verdicts, planted errors, time.

Samples the user-level L2 sensitivity of the released ``m x n`` matrix with the real sampler, then replays the
release (:func:`textdp.audit.replay.replay_sensitivity`) on fresh neighbouring pairs with the noise frozen: for the
correct code, for a declared sensitivity halved, and for a sampler whose distance is halved (a planted bug). The
corpus is a slice of PAN-11 Enron (``/work/shared/data``; never copied anywhere). Run::

    python benchmarks/topics_replay.py --max-docs 3 --topics 5 --m 5 --n 5 --gamma 0.3 --pairs 24

Prints one line per verdict and the seconds each step took (this is an audit of the corpus: private numbers).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

import textdp.audit.replay as replay_module
import textdp.topics.sensitivity as sensitivity_module
from textdp.audit.replay import replay_sensitivity
from textdp.mechanisms import get
from textdp.topics import SensitivitySampler, SklearnLDA, UserCorpus
from textdp.topics.models import fit_database


def data_dir() -> Path:
    env = os.environ.get("TEXTDP_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-docs", type=int, default=3)
    ap.add_argument("--topics", type=int, default=5)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--gamma", type=float, default=0.3)
    ap.add_argument("--pairs", type=int, default=24)
    args = ap.parse_args()
    corpus = UserCorpus.from_jsonl(data_dir() / "pan11_enron" / "pan11_enron.jsonl.gz", user_field="author",
                                   max_docs_per_user=args.max_docs)
    model = SklearnLDA(n_topics=args.topics, max_iter=3, seed=0)
    fits: dict[tuple[int, ...], object] = {}

    def fit(c, mod, users=None):  # each database fitted once: the planted runs reuse the fits
        key = tuple(users) if users is not None else ()
        if key not in fits:
            fits[key] = fit_database(c, mod, users)
        return fits[key]

    sensitivity_module.fit_database = fit  # type: ignore[assignment]
    replay_module.fit_database = fit  # type: ignore[assignment]
    size = (args.m, args.n)
    print(f"corpus: {corpus.n_users} users, {corpus.n_docs} documents; LDA {args.topics} topics; release {size}")
    t = time.perf_counter()
    sens = SensitivitySampler(corpus=corpus, model=model, sizes=[size]).sample(args.gamma, seed=1)[size]
    print(f"sampled sensitivity {sens.value:.4g} (order statistic {sens.order_statistic} of {sens.n_samples}) "
          f"in {time.perf_counter() - t:.0f} s")

    def run(label: str, sensitivity: object) -> None:
        t = time.perf_counter()
        mech = get("topicdp", epsilon=1.0, delta=1e-5, sensitivity=sensitivity)
        r = replay_sensitivity(corpus, model, mech, m=args.m, n=args.n, pairs=args.pairs, seed=2)
        print(f"{label}: {r.summary()} [{time.perf_counter() - t:.0f} s]")

    run("correct", sens)
    run("declared value halved", dataclasses.replace(sens, value=sens.value / 2))
    real = sensitivity_module.released_matrix_distance
    sensitivity_module.released_matrix_distance = lambda *a, **k: real(*a, **k) / 2  # type: ignore[assignment]
    half = SensitivitySampler(corpus=corpus, model=model, sizes=[size]).sample(args.gamma, seed=1)[size]
    sensitivity_module.released_matrix_distance = real  # type: ignore[assignment]
    run("sampler distance halved", half)
    run("worst-case sqrt(2m)", "worst-case")


if __name__ == "__main__":
    main()
