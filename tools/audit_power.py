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
    from textdp.audit import topic_cases as cases
    from textdp.topics.family import topics_mechanism

    eps, dlt = cases.TOPIC_DEFAULT_EPSILON, cases.TOPIC_DEFAULT_DELTA
    if case == "laplace":
        return cases.laplace_case(mechanism=topics_mechanism("topicdp-laplace", epsilon=k * eps))
    mech = topics_mechanism(case, epsilon=k * eps, delta=dlt, sensitivity=cases.TOPIC_SENSITIVITY)
    if case.startswith("topicdp"):
        return cases.topicdp_case(calibration="thesis" if case == "topicdp-thesis" else "analytic", mechanism=mech)
    return cases.mvg_case(covariance="directional" if case == "mvg-directional" else "isotropic", mechanism=mech)


#: The detection edge of the 2-repetition ladder run (docs/audit.md, issue 29): per case, the smallest
#: scale error (and for the topic matrices the smallest ε error) flagged in 2 of 2. ``--plan edge``
#: measures these cells and ``c = 1`` with ``--reps`` repetitions each.
EDGE: dict[str, tuple[float, float | None]] = {
    "earth-movers": (0.95, None), "earth-movers-noise": (0.98, None), "earth-movers-2d": (0.98, None),
    "cmp": (0.95, None), "mahalanobis": (0.95, None), "vickrey": (0.95, None), "santext": (0.95, None),
    "santext+": (0.95, None), "tem": (0.98, None), "custext": (0.9, None), "custext+": (0.9, None),
    "random": (0.75, None), "syntf": (0.9, None), "laplace": (0.95, 1.1), "topicdp": (0.95, 1.05),
    "topicdp-thesis": (0.95, 1.05), "mvg": (0.95, 1.05), "mvg-directional": (0.95, 1.05)}

Cell = tuple[str, str, float]  # (case, kind: none | scale | epsilon, error)


@contextlib.contextmanager
def planted(case: str, kind: str, error: float) -> Iterator[Any]:
    """The audit case of ``case`` with the error planted, built ONCE (yielded) and valid while the context is open.

    Everything a repetition would rebuild (the embeddings, the fitted mechanism, its output sets and
    tables, the claim and the reference law) depends on the case and the planted error only, never
    on the seed: the case is built under the patch and reused for every seed of the cell (the patch
    stays in force, so a primitive read at fit time, e.g. ``random``'s rate, is planted too).
    ``tests/test_audit_power.py`` checks that a reused case gives the same result as a fresh one.
    """
    from textdp.audit import audit_case

    if kind == "epsilon" and case in TOPICS and error != 1.0:
        yield epsilon_error_case(case, error)
        return
    c = 1.0 if kind == "none" else (error if kind == "scale" else 1.0 / error)
    with scale_error(case, c):
        yield audit_case(case)


def audit_row(case_obj: Any, cell: Cell, seed: int, samples: int | None) -> dict[str, Any]:
    """One full audit (event, curve, conformance) of a built case at ``seed``: a JSON-lines row."""
    from textdp.audit import run_audit

    t0 = time.perf_counter()
    res = run_audit(case_obj, samples=samples, seed=seed, conformance=True)
    conf = res.conformance
    return {"case": cell[0], "kind": cell[1], "error": cell[2], "seed": seed, "reps": 1,
            "flagged": int(not res.passed), "privacy": int(not res.privacy_passed),
            "conformance": int(conf is not None and not conf.passed),
            "conformance_p": None if conf is None else float(conf.p_value),
            "curve_passed": None if res.curve is None else bool(res.curve.passed),
            "lower_bound": float(res.lower_bound), "claimed_epsilon": float(res.claimed_epsilon),
            "samples": res.samples, "seconds": time.perf_counter() - t0}


def run_cell(case: str, kind: str, error: float, reps: int, first_seed: int, samples: int | None,
             out: Path | None = None) -> dict[str, Any]:
    """``reps`` full audits of ``case`` with the planted error (the case built once); the counts flagged by each test."""
    rows = []
    t0 = time.perf_counter()
    with planted(case, kind, error) as built:
        for r in range(reps):
            rows.append(audit_row(built, (case, kind, error), first_seed + r, samples))
            if out is not None:
                _write(out, rows[-1])
    return {"case": case, "kind": kind, "error": error, "reps": reps, "flagged": sum(x["flagged"] for x in rows),
            "privacy": sum(x["privacy"] for x in rows), "conformance": sum(x["conformance"] for x in rows),
            "samples": rows[-1]["samples"], "seconds": (time.perf_counter() - t0) / reps, "first_seed": first_seed}


def ladder(case: str, kind: str, reps: int, first_seed: int, samples: int | None, out: Path,
           deadline: float) -> None:
    errors = SCALES if kind == "scale" else FACTORS
    for e in errors:
        if time.time() > deadline:
            return
        row = run_cell(case, kind, e, reps, first_seed, samples, out)
        if row["flagged"] < reps:
            return


def edge_plan(cases: list[str]) -> list[Cell]:
    """``c = 1`` and the detection-edge cells (:data:`EDGE`) of ``cases``."""
    cells: list[Cell] = []
    for case in cases:
        scale, eps = EDGE[case]
        cells += [(case, "none", 1.0), (case, "scale", scale)]
        if eps is not None:
            cells.append((case, "epsilon", eps))
    return cells


def run_plan(cells: list[Cell], reps: int, first_seed: int, samples: int | None, out: Path, deadline: float,
             chunk: int) -> None:
    """Every cell ``reps`` times, round robin in chunks of ``chunk`` seeds (one case built per chunk).

    Repetition ``r`` of every cell uses seed ``first_seed + r`` (fixed up front). A (cell, seed) already in
    ``out`` is skipped, so a stopped run resumes; every audit is one JSON line, flushed as it comes, so
    a run stopped at its deadline leaves every cell with about the same number of repetitions.
    """
    done = {(r["case"], r["kind"], float(r["error"]), r.get("seed")) for r in _read(out)} if out.exists() else set()
    for start in range(0, reps, chunk):
        for cell in cells:
            seeds = [first_seed + r for r in range(start, min(reps, start + chunk))
                     if (cell[0], cell[1], float(cell[2]), first_seed + r) not in done]
            if not seeds:
                continue
            if time.time() > deadline:
                return
            with planted(*cell) as built:
                for s in seeds:
                    _write(out, audit_row(built, cell, s, samples))


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _write(out: Path, row: dict[str, Any]) -> None:
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
        fh.flush()
    print(json.dumps(row), file=sys.stderr, flush=True)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """One-sided ``level`` Clopper–Pearson bounds ``(lower, upper)`` on a binomial proportion from ``k`` of ``n``.

    >>> round(clopper_pearson(2, 2)[0], 3), round(clopper_pearson(59, 59)[0], 3), clopper_pearson(0, 20)[0]
    (0.224, 0.95, 0.0)
    >>> round(clopper_pearson(0, 20)[1], 3)   # 0 false alarms in 20: the rate is below 0.139
    0.139
    """
    from scipy.stats import beta

    a = 1.0 - level
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def cells(rows: list[dict[str, Any]]) -> dict[Cell, dict[str, Any]]:
    """The rows summed per cell (per-audit rows and the per-cell rows of older runs alike).

    A per-audit row whose (cell, seed) was already counted is skipped: the audit is deterministic given its
    seed, so a repeat (two files of overlapping runs) is the same audit, not a new repetition.
    """
    agg: dict[Cell, dict[str, Any]] = {}
    seen: set[tuple[Cell, int]] = set()
    for r in rows:
        key = (str(r["case"]), str(r["kind"]), float(r["error"]))
        if r.get("seed") is not None:
            if (key, int(r["seed"])) in seen:
                continue
            seen.add((key, int(r["seed"])))
        a = agg.setdefault(key, {"n": 0, "flagged": 0, "privacy": 0, "conformance": 0, "seconds": 0.0,
                                 "samples": r["samples"]})
        n = int(r["reps"])
        a["n"] += n
        for f in ("flagged", "privacy", "conformance"):
            a[f] += int(r[f])
        a["seconds"] += float(r["seconds"]) * n
    return agg


def power_table(rows: list[dict[str, Any]], level: float = 0.95) -> str:
    """Markdown: per cell, k/n flagged, the one-sided Clopper–Pearson bound and whether 95% power is shown.

    For ``c = 1`` (nothing planted) the cell is the false-alarm rate: its upper bound is given. For a
    planted error, "95% power" is **shown** when the lower bound reaches 0.95 (needs 59 of 59), and
    **not excluded** when the point estimate is at least 0.95 but the bound is lower.
    """
    agg = cells(rows)
    lines = ["| case | planted | samples/input | flagged k/n | privacy tests | conformance | point estimate | "
             f"one-sided {level:.0%} Clopper-Pearson bound | 95% power | s/audit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (case, kind, error), a in agg.items():
        n, k = a["n"], a["flagged"]
        lo, hi = clopper_pearson(k, n, level)
        what = {"none": "nothing (c = 1)", "scale": f"scale x{error:g}", "epsilon": f"eps x{error:g}"}[kind]
        if kind == "none":
            bound, verdict = f"false-alarm rate <= {hi:.3f}", "-"
        else:
            bound = f"power >= {lo:.3f}"
            verdict = ("shown (lower bound)" if lo >= 0.95 else
                       "point estimate only" if k / n >= 0.95 else "no")
        lines.append(f"| {case} | {what} | {a['samples']:,} | {k}/{n} | {a['privacy']}/{n} | {a['conformance']}/{n} "
                     f"| {k / n:.2f} | {bound} | {verdict} | {a['seconds'] / n:.1f} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown ladder table (smallest error flagged in every repetition) from the JSON lines."""
    agg = cells(rows)
    lines = ["| case | samples/input | false alarms (c = 1) | smallest scale error flagged in every rep | "
             "smallest epsilon error flagged in every rep | largest error missed | privacy tests alone: smallest "
             "scale error flagged in every rep | s/audit |",
             "|---|---|---|---|---|---|---|---|"]
    for case in dict.fromkeys(key[0] for key in agg):
        mine = {key: a for key, a in agg.items() if key[0] == case}
        base = [a for key, a in mine.items() if key[1] == "none"]
        fa = f"{base[0]['flagged']}/{base[0]['n']}" if base else "-"

        def best(kind: str, mine: dict[Cell, dict[str, Any]] = mine) -> tuple[str, str]:
            cs = sorted(((key[2], a) for key, a in mine.items() if key[1] == kind),
                        key=lambda t: abs(1.0 - t[0]), reverse=True)
            hit = [(e, a) for e, a in cs if a["flagged"] == a["n"]]
            miss = [(e, a) for e, a in cs if a["flagged"] < a["n"]]
            sym = "x" if kind == "scale" else "eps x"
            h = f"{sym}{hit[-1][0]:g} ({hit[-1][1]['flagged']}/{hit[-1][1]['n']})" if hit else "none tried"
            m = f"{sym}{miss[0][0]:g} ({miss[0][1]['flagged']}/{miss[0][1]['n']})" if miss else "-"
            return h, m

        s_hit, s_miss = best("scale")
        e_hit, e_miss = best("epsilon")
        if case not in TOPICS and not any(key[1] == "epsilon" for key in mine):
            e_hit = "= scale x1/k (noise scale 1/epsilon)"
        misses = "; ".join(x for x in (s_miss, e_miss) if x != "-") or "-"
        private = sorted((key[2] for key, a in mine.items() if key[1] == "scale" and a["privacy"] == a["n"]),
                         reverse=True)
        alone = f"x{private[-1]:g}" if private else "none of the ladder"
        secs = sum(a["seconds"] for a in mine.values()) / sum(a["n"] for a in mine.values())
        samples = next(iter(mine.values()))["samples"]
        lines.append(f"| {case} | {samples:,} | {fa} | {s_hit} | {e_hit} | {misses} | {alone} | {secs:.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2, help="audits per cell (seeds first-seed .. first-seed+reps-1)")
    ap.add_argument("--first-seed", type=int, default=2950)
    ap.add_argument("--samples", type=int, default=None, help="per input (default: each case's own)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--plan", choices=("ladder", "edge", "null"), default="ladder",
                    help="ladder: down the ladder of errors until one is missed; edge: c = 1 and the detection "
                         "edge (EDGE) of every case, round robin; null: c = 1 only (false alarms)")
    ap.add_argument("--chunk", type=int, default=5, help="--plan edge: seeds per built case")
    ap.add_argument("--minutes", type=float, default=60.0, help="stop starting new cells after this long")
    ap.add_argument("--out", type=Path, default=Path("audit_power.jsonl"))
    ap.add_argument("--table", type=Path, default=None, help="print the tables of an existing JSON-lines file")
    args = ap.parse_args()
    if args.table is not None:
        rows = _read(args.table)
        print(table(rows) + "\n\n" + power_table(rows))
        return
    deadline = time.time() + 60.0 * args.minutes
    names = args.cases.split(",")
    if args.plan != "ladder":
        plan = edge_plan(names) if args.plan == "edge" else [(case, "none", 1.0) for case in names]
        run_plan(plan, args.reps, args.first_seed, args.samples, args.out, deadline, args.chunk)
    else:
        for case in names:
            if time.time() > deadline:
                break
            run_cell(case, "none", 1.0, args.reps, args.first_seed, args.samples, args.out)
            ladder(case, "scale", args.reps, args.first_seed, args.samples, args.out, deadline)
            if case in TOPICS:
                ladder(case, "epsilon", args.reps, args.first_seed, args.samples, args.out, deadline)
    rows = _read(args.out)
    print(table(rows) + "\n\n" + power_table(rows))


if __name__ == "__main__":
    main()
