"""The mechanism comparison of docs/mechanism-comparison.md, from ``textdp evaluate`` report folders.

Reads ``results.json`` + ``settings.json`` of one or more report folders (the first
gives the unmodified rows; later folders add their mechanism rows, which is sound
when they share the corpus set and seed: a condition's noise depends only on its
label and epsilon) and prints one Markdown table: per mechanism and epsilon the
strongest attacker (fixed and noise-aware) against chance, the first utility
model against its unmodified accuracy (same release form), the words/s measured
in the sweep, and whether the target holds (every attacker <= 2x chance while
topic accuracy stays within 5 points of unmodified). Per mechanism it then names
the epsilon that meets the target or, if none does, the one that comes closest:
the smallest shortfall = (strongest accuracy - 2 x chance)+ + (topic drop - 5 points)+,
in accuracy points. Optionally draws one privacy-utility plot with every
mechanism (:func:`textdp.evaluation.plots.plot_comparison`).

    python benchmarks/mechanism_comparison.py reports/final-ng20-mechanisms reports/final-ng20-options \\
        --plot docs/mechanism-comparison-20ng.png --title "20 Newsgroups"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _load(folders: list[Path]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    info: dict[str, dict[str, Any]] = {}
    for i, folder in enumerate(folders):
        r = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        s = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
        rows += r if i == 0 else [x for x in r if x.get("mechanism") is not None]
        info.update(s.get("mechanisms", {}))
    return rows, info


def _fmt_eps(e: float | None) -> str:
    return "none" if e is None else f"{e:g}"


def compare(rows: list[dict[str, Any]], info: dict[str, dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(table lines, per-mechanism verdict lines)."""
    main = [r for r in rows if r.get("text") in ("bag", "text")]
    umodel = next((r["model"] for r in main if r["kind"] == "utility"), None)
    head = ["mechanism", "eps", "unchanged", "strongest attacker", "accuracy (chance)", "x chance"]
    if umodel:
        head += [f"topic ({umodel})", "unmodified topic", "drop (points)", "target"]
    head += ["words/s (sweep)"]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    verdicts = []
    keys = [(m, t if m is None else None) for m, t in dict.fromkeys((r.get("mechanism"), r["text"]) for r in main)]
    for label, form in dict.fromkeys(keys):
        release = info[label]["release"] if label is not None else form
        mine = [r for r in main if r.get("mechanism") == label and (form is None or r["text"] == form)]
        base_u = None
        if umodel:
            base = [r for r in main if r.get("mechanism") is None and r["epsilon"] is None and r["model"] == umodel
                    and r["text"] == (release or r["text"])]
            base_u = base[0]["accuracy"] if base else None
        best: tuple[float, float | None, float, float] | None = None
        met = []
        for eps in dict.fromkeys(r["epsilon"] for r in mine):
            cell = [r for r in mine if r["epsilon"] == eps]
            att = [r for r in cell if r["kind"] == "attack"]
            top = max(att, key=lambda r: r["accuracy"] / r["chance"])
            ratio = top["accuracy"] / top["chance"]
            name = f"`{label}`" if label is not None else f"unmodified ({cell[0]['text']})"
            wps = info.get(label, {}).get("words_per_second") if label is not None else None
            line = [name, _fmt_eps(eps), f"{cell[0]['unchanged']:.3f}", top["model"],
                    f"{top['accuracy']:.2f} ({top['chance']:.2f})", f"{ratio:.1f}"]
            priv_gap = max(0.0, top["accuracy"] - 2 * top["chance"]) * 100
            if umodel:
                u = next((r for r in cell if r["model"] == umodel), None)
                drop = None if (u is None or base_u is None) else (base_u - u["accuracy"]) * 100
                ok = drop is not None and priv_gap == 0 and drop <= 5 + 1e-9
                line += ["" if u is None else f"{u['accuracy']:.2f}", "" if base_u is None else f"{base_u:.2f}",
                         "" if drop is None else f"{drop:+.0f}", "meets" if ok else "no"]
                if label is not None and drop is not None:
                    gap = priv_gap + max(0.0, drop - 5)
                    if ok:
                        met.append(eps)
                    if best is None or gap < best[0]:
                        best = (gap, eps, priv_gap, max(0.0, drop - 5))
            line += ["" if wps is None else f"{wps:,.0f}"]
            table.append("| " + " | ".join(line) + " |")
        if label is None or not umodel:
            continue
        if met:
            verdicts.append(f"- `{label}`: target met at eps = {', '.join(_fmt_eps(e) for e in met)}")
        elif best is not None:
            verdicts.append(f"- `{label}`: not met; closest at eps = {_fmt_eps(best[1])}, shortfall {best[0]:.0f} "
                            f"points (attacker {best[2]:.0f} points above 2x chance, topic {best[3]:.0f} points "
                            "beyond the 5-point drop)")
    return table, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="textdp evaluate report folders (first = baseline)")
    ap.add_argument("--plot", type=Path, help="write one privacy-utility PNG with every mechanism here")
    ap.add_argument("--title", default="privacy-utility")
    args = ap.parse_args()
    rows, info = _load(args.folders)
    table, verdicts = compare(rows, info)
    print("\n".join(table))
    if verdicts:
        print()
        print("\n".join(verdicts))
    if args.plot is not None:
        from textdp.evaluation.plots import plot_comparison

        out = plot_comparison(rows, args.plot, args.title)
        print(f"\nplot: {out}" if out is not None else "\nplot: none (no utility rows)")


if __name__ == "__main__":
    main()
