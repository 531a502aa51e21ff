"""PNG plots of a run: attack accuracy and utility against epsilon (extra ``eval``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import require

__all__ = ["plot_results"]


def _x_positions(epsilons: list[float]) -> tuple[dict[float | None, float], list[float], list[str]]:
    """Plot positions: epsilons on a log axis, "none" one step to the right of the largest."""
    import math

    eps = sorted(set(epsilons))
    top = eps[-1] * 1.6 if eps else 1.0
    pos: dict[float | None, float] = {e: e for e in eps}
    pos[None] = top
    ticks = eps + [top]
    labels = [f"{e:g}" for e in eps] + ["none"]
    assert all(math.isfinite(v) for v in ticks)
    return pos, ticks, labels


def plot_results(rows: list[dict[str, Any]], out_dir: Path, title: str) -> list[Path]:
    """Write ``attacks.png``, ``utility.png`` and ``privacy_utility.png``; return their paths."""
    mpl = require("matplotlib", "eval")
    mpl.use("Agg")  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    main = [r for r in rows if r.get("text", "bag") == "bag"]
    epsilons = [r["epsilon"] for r in main if r["epsilon"] is not None]
    pos, ticks, labels = _x_positions(epsilons)
    written: list[Path] = []
    for kind, fname, ylabel in (("attack", "attacks.png", "author attribution accuracy"),
                                ("utility", "utility.png", "topic accuracy")):
        sel = [r for r in main if r["kind"] == kind]
        if not sel:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        for model in dict.fromkeys(r["model"] for r in sel):
            pts = sorted((pos[r["epsilon"]], r["accuracy"], r["ci_low"], r["ci_high"]) for r in sel if r["model"] == model)
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            line = ax.plot(xs, ys, marker="o", label=model)[0]
            ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], color=line.get_color(), alpha=0.07)
        chance = sel[0]["chance"]
        ax.axhline(chance, color="grey", ls=":", label=f"chance ({chance:.2f})")
        if kind == "attack":
            ax.axhline(2 * chance, color="grey", ls="--", lw=0.8, label="2x chance")
        ax.set_xscale("log")
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels)
        ax.minorticks_off()
        ax.set_xlabel("epsilon (log scale; 'none' = unmodified)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1)
        ax.set_title(f"{title}: {ylabel}")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    att = [r for r in main if r["kind"] == "attack"]
    uti = [r for r in main if r["kind"] == "utility"]
    if att and uti:
        fig, ax = plt.subplots(figsize=(6.5, 4.5), dpi=110)
        conds = list(dict.fromkeys(r["epsilon"] for r in main))
        for umodel in dict.fromkeys(r["model"] for r in uti):
            xs, ys, labs = [], [], []
            for e in conds:
                a = [r["accuracy"] / r["chance"] for r in att if r["epsilon"] == e]
                u = [r["accuracy"] for r in uti if r["epsilon"] == e and r["model"] == umodel]
                if a and u:
                    xs.append(max(a))
                    ys.append(u[0])
                    labs.append("none" if e is None else f"{e:g}")
            ax.plot(xs, ys, marker="o", label=umodel)
            for x, y, lab in zip(xs, ys, labs, strict=True):
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.axvline(2.0, color="grey", ls="--", lw=0.8, label="strongest attacker = 2x chance")
        ax.set_xlim(left=0)
        ax.set_xlabel("strongest attacker accuracy / chance")
        ax.set_ylabel("topic accuracy")
        ax.set_ylim(0, 1)
        ax.set_title(f"{title}: privacy-utility frontier (labels = epsilon)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / "privacy_utility.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
