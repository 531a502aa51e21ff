"""The power table of ``textdp audit`` measured on the REAL samplers (issue 29).

Every audit here is the full one a user runs (``audit(name, seed=s, conformance=True)``: event,
curve and conformance tests, the case's default samples unless ``--samples``), on the registered
case with an error planted from outside the library in the code a release runs:

* **scale error** ``c < 1``: the noise the release adds is multiplied by ``c``. Earth Mover's
  ``privatize_ids`` (its ε divided by ``c``: Laplace noise has scale 1/ε), CMP's / Mahalanobis' /
  Vickrey's ``core`` (the noisy vector's offset times ``c``), the exponential mechanisms'
  ``sample_by_distance`` (temperature ``2/ε`` times ``c``), CusText's log-weights (divided by ``c``),
  SynTF's ``sample_bags`` (ε/c), ``random``'s replacement rate (the rate of ε/c), and the topic
  matrices' ``randomize`` (the integer noise ``Z`` replaced by ``rint(c Z)``);
* **ε error** ``k > 1``: the registered mechanism built at ``k ε`` while the claim stays at ε (the
  case's ``mechanism=`` hook for the topic matrices). For every word-level case the noise scale is
  ``1/ε`` (or the temperature ``2/ε``), so ε×k *is* scale ×1/k and one ladder serves both columns;
  for the Gaussian topic mechanisms σ(ε) is not ``1/ε`` and the two ladders differ.

The search goes down a ladder of errors, largest first, and stops at the first error not flagged
in every repetition; ``c = 1`` (nothing planted) gives the false alarms. Seeds are fixed up front:
repetition ``r`` of every cell uses seed ``first_seed + r``. Results go to ``--out`` (JSON lines,
one per cell, flushed as they come) and a markdown table to stdout::

    nice -n 10 python tools/audit_power.py --reps 2 --out power.jsonl
    python tools/audit_power.py --table power.jsonl   # the table again, from the file
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: Registered cases measured (the language-model cases and er-ae have their own audit module).
CASES = ("earth-movers", "earth-movers-noise", "earth-movers-2d", "cmp", "mahalanobis", "vickrey", "santext",
         "santext+", "tem", "custext", "custext+", "random", "syntf", "laplace", "topicdp", "topicdp-thesis", "mvg",
         "mvg-directional")
TOPICS = ("laplace", "topicdp", "topicdp-thesis", "mvg", "mvg-directional")
#: Ladders, largest error first.
SCALES = (0.75, 0.9, 0.95, 0.98)
FACTORS = (1.5, 1.25, 1.1, 1.05)


@contextlib.contextmanager
def scale_error(case: str, c: float) -> Iterator[None]:
    """Noise ×``c`` in the release primitive of ``case`` (nothing when ``c == 1``)."""
    import importlib

    import textdp.mechanisms.earth_movers as em
    import textdp.mechanisms.exponential as ex
    import textdp.mechanisms.perturbation as pert
    import textdp.mechanisms.syntf as sy

    try:  # the topic noise classes' module (textdp.topics.mechanisms before issue 31)
        tm = importlib.import_module("textdp.topics.noise")
        grid_class = tm.GridNoise
    except ImportError:
        tm = importlib.import_module("textdp.topics.mechanisms")
        grid_class = tm._GridMechanism

    saved: list[tuple[object, str, object]] = []

    def put(obj: object, name: str, value: Callable[..., object]) -> None:
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    if c != 1.0:
        if case.startswith("earth-movers"):
            f = em.privatize_ids
            put(em, "privatize_ids", lambda ids, v, e, rng, *a, **k: f(ids, v, e / c, rng, *a, **k))
        elif case in ("cmp", "mahalanobis", "vickrey"):
            def core(self: pert._NoisyVector, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
                z = self.noisy_vectors(ids, rng)
                return self.release(self._v64[ids] + (z - self._v64[ids]) * c, rng)
            put(pert._NoisyVector, "core", core)
        elif case in ("santext", "santext+", "tem"):
            g = ex.sample_by_distance
            put(ex, "sample_by_distance", lambda v, x, scale, rng, **kw: g(v, x, scale / c, rng, **kw))
        elif case in ("custext", "custext+"):
            w = ex.CusText._log_weights
            put(ex.CusText, "_log_weights", lambda self, x, members: w(self, x, members) / c)
        elif case == "random":
            def setup(self: ex.RandomReplacement, emb: object) -> None:
                v = emb.vocab_size  # type: ignore[attr-defined]
                self.rate_ = v / (v + math.expm1(self.epsilon_ / c))
            put(ex.RandomReplacement, "_setup", setup)
        elif case == "syntf":
            h = sy.sample_bags
            put(sy, "sample_bags", lambda r, w, vs, e, n, rng: h(r, w, vs, e / c, n, rng))
        elif case in TOPICS:
            rnd = grid_class.randomize

            def randomize(self: object, matrix: np.ndarray, seed: object = None) -> np.ndarray:
                out = rnd(self, matrix, seed)
                g = self.grid  # type: ignore[attr-defined]
                k = np.rint(np.asarray(matrix, dtype=np.float64) / g)
                return np.asarray((k + np.rint(c * (np.rint(out / g) - k))) * g)
            put(grid_class, "randomize", randomize)
        else:
            raise SystemExit(f"no scale error defined for {case}")
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


def epsilon_error_case(case: str, k: float) -> object:
    """The registered topic case with its mechanism built at ``k ε`` (the claim stays at ε)."""
    from textdp.audit import cases
    from textdp.topics.family import topics_mechanism

    eps, dlt = cases.TOPIC_DEFAULT_EPSILON, cases.TOPIC_DEFAULT_DELTA
    if case == "laplace":
        return cases.laplace_case(mechanism=topics_mechanism("topicdp-laplace", epsilon=k * eps))
    mech = topics_mechanism(case, epsilon=k * eps, delta=dlt, sensitivity=cases.TOPIC_SENSITIVITY)
    if case.startswith("topicdp"):
        return cases.topicdp_case(calibration="thesis" if case == "topicdp-thesis" else "analytic", mechanism=mech)
    return cases.mvg_case(covariance="directional" if case == "mvg-directional" else "isotropic", mechanism=mech)


def run_cell(case: str, kind: str, error: float, reps: int, first_seed: int, samples: int | None) -> dict[str, Any]:
    """``reps`` full audits of ``case`` with the planted error; the counts flagged by each test."""
    from textdp.audit import audit

    flagged = privacy = conformance = 0
    t0 = time.perf_counter()
    for r in range(reps):
        seed = first_seed + r
        if kind == "epsilon" and case in TOPICS and error != 1.0:
            res = audit(epsilon_error_case(case, error), samples=samples, seed=seed, conformance=True)  # type: ignore[arg-type]
        else:
            c = error if kind == "scale" else 1.0 / error
            with scale_error(case, c):
                res = audit(case, samples=samples, seed=seed, conformance=True)
        flagged += not res.passed
        privacy += not res.privacy_passed
        conformance += res.conformance is not None and not res.conformance.passed
        n = res.samples
    return {"case": case, "kind": kind, "error": error, "reps": reps, "flagged": flagged, "privacy": privacy,
            "conformance": conformance, "samples": n, "seconds": (time.perf_counter() - t0) / reps,
            "first_seed": first_seed}


def ladder(case: str, kind: str, reps: int, first_seed: int, samples: int | None, out: Path,
           deadline: float) -> None:
    errors = SCALES if kind == "scale" else FACTORS
    for e in errors:
        if time.time() > deadline:
            return
        row = run_cell(case, kind, e, reps, first_seed, samples)
        _write(out, row)
        if row["flagged"] < reps:
            return


def _write(out: Path, row: dict[str, Any]) -> None:
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row), file=sys.stderr, flush=True)


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown power table from the JSON lines."""
    lines = ["| case | samples/input | false alarms (c = 1) | smallest scale error flagged in every rep | "
             "smallest epsilon error flagged in every rep | largest error missed | privacy tests alone: smallest "
             "scale error flagged in every rep | s/audit |",
             "|---|---|---|---|---|---|---|---|"]
    for case in dict.fromkeys(str(r["case"]) for r in rows):
        mine = [r for r in rows if r["case"] == case]
        base = [r for r in mine if r["kind"] == "none"]
        fa = f"{base[0]['flagged']}/{base[0]['reps']}" if base else "-"

        def best(kind: str, mine: list[dict[str, Any]] = mine) -> tuple[str, str]:
            cells = [r for r in mine if r["kind"] == kind]
            hit = [r for r in cells if r["flagged"] == r["reps"]]
            miss = [r for r in cells if r["flagged"] < r["reps"]]
            sym = "x" if kind == "scale" else "eps x"
            h = f"{sym}{hit[-1]['error']:g} ({hit[-1]['flagged']}/{hit[-1]['reps']})" if hit else "none tried"
            m = f"{sym}{miss[0]['error']:g} ({miss[0]['flagged']}/{miss[0]['reps']})" if miss else "-"
            return h, m

        s_hit, s_miss = best("scale")
        e_hit, e_miss = best("epsilon")
        if case not in TOPICS and not any(r["kind"] == "epsilon" for r in mine):
            e_hit = "= scale x1/k (noise scale 1/epsilon)"
        misses = "; ".join(x for x in (s_miss, e_miss) if x != "-") or "-"
        private = [r for r in mine if r["kind"] == "scale" and r["privacy"] == r["reps"]]
        alone = f"x{private[-1]['error']:g}" if private else "none of the ladder"
        secs = float(np.mean([float(str(r["seconds"])) for r in mine]))
        lines.append(f"| {case} | {mine[0]['samples']:,} | {fa} | {s_hit} | {e_hit} | {misses} | {alone} | "
                     f"{secs:.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2, help="audits per cell (seeds first-seed .. first-seed+reps-1)")
    ap.add_argument("--first-seed", type=int, default=2950)
    ap.add_argument("--samples", type=int, default=None, help="per input (default: each case's own)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--minutes", type=float, default=60.0, help="stop starting new cells after this long")
    ap.add_argument("--out", type=Path, default=Path("audit_power.jsonl"))
    ap.add_argument("--table", type=Path, default=None, help="print the table of an existing JSON-lines file")
    args = ap.parse_args()
    if args.table is not None:
        rows = [json.loads(x) for x in args.table.read_text(encoding="utf-8").splitlines() if x.strip()]
        print(table(rows))
        return
    deadline = time.time() + 60.0 * args.minutes
    for case in args.cases.split(","):
        if time.time() > deadline:
            break
        _write(args.out, run_cell(case, "none", 1.0, args.reps, args.first_seed, args.samples))
        ladder(case, "scale", args.reps, args.first_seed, args.samples, args.out, deadline)
        if case in TOPICS:
            ladder(case, "epsilon", args.reps, args.first_seed, args.samples, args.out, deadline)
    rows = [json.loads(x) for x in args.out.read_text(encoding="utf-8").splitlines() if x.strip()]
    print(table(rows))


if __name__ == "__main__":
    main()
