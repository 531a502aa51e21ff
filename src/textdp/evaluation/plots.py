"""PNG plots of a run: attack accuracy and utility against epsilon, and the privacy-utility frontier (extra ``eval``).

With one mechanism the per-model plots of the paper's Table 1 are drawn; with
several, one line per mechanism: the strongest attacker (accuracy / chance, fixed
and noise-aware attackers together) and the first utility model against epsilon,
and one privacy-utility plot with every mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .scoring import Row

__all__ = ["plot_comparison", "plot_results", "save_figure"]

_MAIN = ("bag", "text")


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (its folder made if missing), close it, and return the path."""
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


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


def _labels(main: Sequence[Row]) -> list[str | None]:
    return [m for m in dict.fromkeys(r.get("mechanism") for r in main) if m is not None] or [None]


def _curve(main: Sequence[Row], label: str | None) -> list[tuple[float | None, float, float | None]]:
    """(epsilon, strongest attacker / chance, first utility accuracy) per condition of ``label`` plus its baseline."""
    mine = [r for r in main if r.get("mechanism") == label]
    release = next((r.get("text", "bag") for r in mine), "bag")
    base = [r for r in main if r.get("mechanism") is None and r["epsilon"] is None and r.get("text", "bag") == release]
    rows = (base + [r for r in mine if r["epsilon"] is not None]) if label is not None else mine
    umodel = next((r["model"] for r in rows if r["kind"] == "utility"), None)
    out = []
    for e in dict.fromkeys(r["epsilon"] for r in rows):
        att = [r["accuracy"] / r["chance"] for r in rows if r["epsilon"] == e and r["kind"] == "attack"]
        uti = [r["accuracy"] for r in rows if r["epsilon"] == e and r["model"] == umodel]
        out.append((e, max(att) if att else float("nan"), uti[0] if uti else None))
    return out


def plot_comparison(rows: Sequence[Row], path: Path, title: str) -> Path | None:
    """One privacy-utility plot with every mechanism: topic accuracy against the strongest attacker / chance.

    Each mechanism is a line through its epsilons (labelled), starting at the
    unmodified point; returns ``None`` when the rows hold no utility model.
    """
    mpl = require("matplotlib", "eval")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    main = [r for r in rows if r.get("text", "bag") in _MAIN]
    if not any(r["kind"] == "utility" for r in main):
        return None
    fig, ax = plt.subplots(figsize=(8.5, 6), dpi=120)
    markers = "osD^v<>phX*"
    for i, label in enumerate(_labels(main)):
        # from the unmodified point down the epsilons (largest first), whatever the grid's order
        pts = sorted(((x, y, e) for e, x, y in _curve(main, label) if y is not None),
                     key=lambda p: float("inf") if p[2] is None else p[2], reverse=True)
        if not pts:
            continue
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], ms=4, lw=1.2,
                       label=str(label or "mechanism"))[0]
        for x, y, e in pts:
            if e is not None:
                ax.annotate(f"{e:g}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6,
                            color=line.get_color())
    ax.axvline(2.0, color="grey", ls="--", lw=0.8, label="strongest attacker = 2x chance")
    base = [r for r in main if r["epsilon"] is None and r.get("mechanism") is None and r["kind"] == "utility"]
    if base:
        ax.axhline(base[0]["accuracy"] - 0.05, color="grey", ls=":", lw=0.8, label="unmodified topic - 5 points")
    ax.set_xscale("symlog", linthresh=2.0)
    ax.set_xlabel("strongest attacker accuracy / chance (fixed and noise-aware; symlog scale)")
    ax.set_ylabel("topic accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{title}: privacy-utility frontier (point labels = epsilon)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_results(rows: Sequence[Row], out_dir: Path, title: str) -> list[Path]:
    """Write ``attacks.png``, ``utility.png`` and ``privacy_utility.png``; return their paths."""
    mpl = require("matplotlib", "eval")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    main = [r for r in rows if r.get("text", "bag") in _MAIN]
    labels = _labels(main)
    epsilons = [r["epsilon"] for r in main if r["epsilon"] is not None]
    pos, ticks, tick_labels = _x_positions(epsilons)
    written: list[Path] = []
    for kind, fname, ylabel in (("attack", "attacks.png", "author attribution accuracy"),
                                ("utility", "utility.png", "topic accuracy")):
        sel = [r for r in main if r["kind"] == kind]
        if not sel:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        if len(labels) == 1:
            for model in dict.fromkeys(r["model"] for r in sel):
                pts = sorted((pos[r["epsilon"]], r["accuracy"], r["ci_low"], r["ci_high"]) for r in sel
                             if r["model"] == model)
                xs = [p[0] for p in pts]
                ys = [p[1] for p in pts]
                line = ax.plot(xs, ys, marker="o", label=model)[0]
                ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], color=line.get_color(), alpha=0.07)
            chance = sel[0]["chance"]
            ax.axhline(chance, color="grey", ls=":", label=f"chance ({chance:.2f})")
            if kind == "attack":
                ax.axhline(2 * chance, color="grey", ls="--", lw=0.8, label="2x chance")
            ax.set_ylim(0, 1)
        else:  # one line per mechanism: strongest attacker / chance, or the first utility model
            for label in labels:
                curve = sorted((pos[e], x if kind == "attack" else y) for e, x, y in _curve(main, label)
                               if (y is not None or kind == "attack"))
                ax.plot([p[0] for p in curve], [float("nan") if p[1] is None else p[1] for p in curve], marker="o", ms=3,
                        label=str(label))
            if kind == "attack":
                ax.axhline(2.0, color="grey", ls="--", lw=0.8, label="2x chance")
                ylabel = "strongest attacker accuracy / chance"
                ax.set_yscale("symlog", linthresh=2.0)
            else:
                ax.set_ylim(0, 1)
        ax.set_xscale("log")
        ax.set_xticks(ticks)
        ax.set_xticklabels(tick_labels, fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("epsilon (log scale; 'none' = unmodified)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {ylabel}")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    frontier_png = plot_comparison(rows, out_dir / "privacy_utility.png", title)
    if frontier_png is not None:
        written.append(frontier_png)
    return written
