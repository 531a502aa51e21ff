"""False alarms and planted errors of the textdp-model sentence cases (``er-ae``, ``ae-dp``, ``syntf-sentence``, ``random-sentence``).

Every audit is the full one of ``textdp audit NAME --conformance`` (event, curve and conformance tests) on the
case the registry builds (``audit_case(NAME)``: the mechanism through ``privatize_batch`` on the tiny model
audit/generation.py trains; audit/sentence_release.py for the two vocabulary mechanisms), at the case's
default samples (10^4 per input) unless ``--samples``. An error is planted from outside the library in the
release primitive the mechanism's loop calls (generation/rewriter.py's bound ``two_set_step``, ``em_step`` or
``syntf``; ``RandomReplacement.core``):

``none``
    nothing planted: the false alarms;
``nonoise``
    the primitive returns its input's likeliest token (ER-AE, AE-DP: the argmax of the model's step; SynTF:
    the sentence's likeliest word N times; Random-R: the input words);
``eps3``, ``eps1.5``, ``eps1.25``
    the primitive's ε multiplied while the claim stays.

Repetition ``r`` of every cell uses seed ``first_seed + r`` (fixed up front). One line per audit on stdout,
then a markdown table (flagged / runs; the privacy tests alone; the conformance test alone; seconds per
audit)::

    nice -n 10 python tools/audit_sentence_power.py --cases ae-dp,syntf-sentence,random-sentence --plants none --reps 60
    nice -n 10 python tools/audit_sentence_power.py --plants nonoise,eps3,eps1.5,eps1.25 --reps 5
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CASES = ("er-ae", "ae-dp", "syntf-sentence", "random-sentence")
PLANTS = ("none", "nonoise", "eps3", "eps1.5", "eps1.25")
FACTORS = {"nonoise": None, "eps3": 3.0, "eps1.5": 1.5, "eps1.25": 1.25}


def planters() -> dict[str, Callable[[float | None], tuple[Any, str, Any]]]:
    """``{case: make(factor) -> (owner, attribute, replacement)}``: the planted release primitive of each case."""
    import textdp.generation.rewriter as rw
    from textdp.mechanisms.exponential import RandomReplacement

    two_set, em, syntf = rw.two_set_step, rw.em_step, rw.syntf

    def er_ae(f: float | None) -> tuple[Any, str, Any]:
        def step(logp: Any, rng: Any, *, epsilon_set: float, epsilon_word: float, **kw: Any) -> Any:
            if f is None:
                return logp.argmax(dim=1)
            return two_set(logp, rng, epsilon_set=f * epsilon_set, epsilon_word=f * epsilon_word, **kw)
        return rw, "two_set_step", step

    def ae_dp(f: float | None) -> tuple[Any, str, Any]:
        def step(logp: Any, rng: Any, *, epsilon: float) -> Any:
            return logp.argmax(dim=1) if f is None else em(logp, rng, epsilon=f * epsilon)
        return rw, "em_step", step

    def syntf_sentence(f: float | None) -> tuple[Any, str, Any]:
        def bags(counts: np.ndarray, eps: float, size: int, rng: Any) -> np.ndarray:
            if f is None:
                c = np.atleast_2d(counts)
                out = np.zeros(c.shape, dtype=np.int64)
                out[np.arange(len(c)), c.argmax(1)] = size
                return out
            return np.asarray(syntf(counts, f * eps, size, rng))
        return rw, "syntf", bags

    def random_sentence(f: float | None) -> tuple[Any, str, Any]:
        def core(self: Any, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            ids = np.asarray(ids, dtype=np.int64)
            if f is None:
                return ids
            v = self.embeddings_.vocab_size
            rate = v / (v + math.expm1(f * self.epsilon_))
            return np.where(rng.random(ids.size) < rate, rng.integers(0, v, size=ids.size), ids)
        return RandomReplacement, "core", core

    return {"er-ae": er_ae, "ae-dp": ae_dp, "syntf-sentence": syntf_sentence, "random-sentence": random_sentence}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--plants", default="none,nonoise,eps3")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=None, help="per input (default: the case's own)")
    args = ap.parse_args(argv)

    import torch

    from textdp.audit import audit_case, run_audit

    torch.set_num_threads(1)
    makers = planters()
    rows = []
    for name in args.cases.split(","):
        if name not in makers:
            raise SystemExit(f"unknown case {name!r}; choose from {', '.join(CASES)}")
        case = audit_case(name)  # built once, unpatched (the tiny model and the reference law)
        for pl in args.plants.split(","):
            if pl not in PLANTS:
                raise SystemExit(f"unknown plant {pl!r}; choose from {', '.join(PLANTS)}")
            saved = None
            if pl != "none":
                owner, attr, new = makers[name](FACTORS[pl])
                saved = (owner, attr, getattr(owner, attr))
                setattr(owner, attr, new)
            flagged = privacy = conformance = 0
            seconds = 0.0
            try:
                for r in range(args.reps):
                    seed = args.first_seed + r
                    t = time.perf_counter()
                    res = run_audit(case, samples=args.samples, seed=seed, conformance=True)
                    seconds += time.perf_counter() - t
                    flagged += not res.passed
                    privacy += not res.privacy_passed
                    conformance += res.conformance is not None and not res.conformance.passed
                    excess = res.curve.excess if res.curve is not None else float("nan")
                    p_conf = res.conformance.p_value if res.conformance is not None else float("nan")
                    print(f"{name} {pl} seed={seed} passed={res.passed} privacy={res.privacy_passed} "
                          f"event_lb={res.lower_bound:.3f} claim={res.claimed_epsilon:.4g} "
                          f"curve_excess={excess:.4f} conformance_p={p_conf:.3g}", flush=True)
            finally:
                if saved is not None:
                    setattr(*saved)
            rows.append((name, pl, flagged, privacy, conformance, args.reps, seconds / args.reps))
    print("\n| case | planted | flagged | privacy tests flagged | conformance flagged | s/audit |")
    print("|---|---|---|---|---|---|")
    for name, pl, f, pr, c, n, s in rows:
        print(f"| {name} | {pl} | {f}/{n} | {pr}/{n} | {c}/{n} | {s:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
