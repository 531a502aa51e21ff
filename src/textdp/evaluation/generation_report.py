"""The generation sweep's report: Table-1-style markdown, the privacy-utility plot, and the report folder.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..io import atomic_writer, write_json
from .generation_sweep import SweepResult, SweepRow
from .plots import save_figure

__all__ = ['plot_privacy_utility', 'render_generation_markdown', 'write_generation_report']

#: the sweep's tables drawn in the plot (table names, not mechanism names)
_PLOTTED_TABLES = ("equal-bound", "earth-movers", "lm", "reference")


def _fmt(x: object, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def render_generation_markdown(result: SweepResult) -> str:
    """Table-1-style markdown of a sweep result (one table per ``table`` kind)."""
    rows = result["rows"]
    lines = []
    header = ("| mechanism | variant | ε parameter | bound per sentence | semantic sim. ↑ | authorship ↓ (chance) | "
              "stylometric ↑ | doc. sim. | s |")
    sep = "|" + "---|" * 9
    for table, title in (("equal-bound", "Equal per-sentence bound (ER-AE's ε sets B; others calibrated to B)"),
                         ("nominal", "Equal nominal ε per step (the authors' framing; SynTF at ε per term)"),
                         ("earth-movers", "Earth Mover's privacy on the same documents (bags of words)"),
                         ("lm", "Language-model rewriters on the same documents (ε: each rewriter's own, per unit)")):
        sel = [r for r in rows if r["table"] in (table, "reference")]
        if len(sel) <= 1:
            continue
        lines += [f"### {title}", "", header, sep]
        for r in sel:
            auth = f"{r['authorship']:.3f} ({r['chance']:.3f})"
            lines.append(
                f"| {r['mechanism']} | {r['variant']} | {_fmt(r['epsilon'], 4)} | {_fmt(r.get('bound'), 1)} | "
                f"{_fmt(r.get('semantic_similarity'))} | {auth} | {_fmt(r['stylometric'], 2)} | "
                f"{_fmt(r['document_similarity'])} | {_fmt(r.get('seconds'), 1)} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot_privacy_utility(result: SweepResult, path: str | Path, title: str) -> Path:
    """PNG: authorship accuracy against document similarity, one line per mechanism (extra ``eval``)."""
    from ..errors import require

    mpl = require("matplotlib", "eval")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r["table"] in _PLOTTED_TABLES]
    fig, ax = plt.subplots(figsize=(7, 4.8), dpi=110)
    groups: dict[str, list[SweepRow]] = defaultdict(list)
    for r in rows:
        key = r["mechanism"] if r["variant"] in ("-", "autoregressive") else f"{r['mechanism']} ({r['variant']})"
        groups[key].append(r)
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["document_similarity"])
        xs = [r["document_similarity"] for r in rs]
        ys = [r["authorship"] for r in rs]
        ax.plot(xs, ys, marker="o" if key != "original" else "*", ms=9 if key == "original" else 5, label=key)
        for r, x, y in zip(rs, xs, ys, strict=True):
            if r["epsilon"] is not None:
                lab = f"{r['er_ae_epsilon']:g}" if r.get("er_ae_epsilon") is not None else f"{r['epsilon']:g}"
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6)
    chance = rows[0]["chance"]
    ax.axhline(chance, color="grey", ls=":", label=f"chance ({chance:.2f})")
    ax.set_xlabel("semantic utility: MiniLM cosine, rewritten vs original document")
    ax.set_ylabel("authorship attack accuracy (char n-gram SVM)")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def write_generation_report(result: SweepResult, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """``results.json``, ``report.md`` and (optionally) ``privacy_utility.png`` in ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "results.json", result)
    md = render_generation_markdown(result)
    with atomic_writer(d / "report.md") as fh:
        fh.write(f"# Generation sweep: {result['settings']['corpus']}\n\n{md}\n")
    files = [d / "results.json", d / "report.md"]
    if plots:
        files.append(plot_privacy_utility(result, d / "privacy_utility.png", f"{result['settings']['corpus']}: "
                                          "privacy-utility (labels: ER-AE nominal epsilon / EM epsilon)"))
    return files

