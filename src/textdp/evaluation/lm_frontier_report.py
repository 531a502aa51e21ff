"""The report of dp-prompt's instruction frontier (:mod:`textdp.evaluation.lm_frontier`): a markdown table per
corpus, and one plot of similarity against attribution (a point per row)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..io import atomic_writer, write_json
from .lm_frontier import FrontierResult, FrontierRow
from .plots import save_figure

__all__ = ["best_tradeoff", "plot_frontier", "render_frontier_markdown", "write_frontier_report"]


def _f(x: object, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{nd}f}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def _ci(ci: Sequence[float] | None) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def _attack_cells(r: FrontierRow, names: Sequence[str]) -> list[str]:
    """One cell per attacker: accuracy [95% CI], the strongest in bold (rows without ``attacks``: the one figure)."""
    attacks = r.get("attacks")
    if not attacks:
        return [f"{r['attribution']:.2f}{_ci(r.get('attribution_ci'))}"]
    cells = []
    for a in names:
        s = attacks.get(a)
        if s is None:
            cells.append("–")
            continue
        v = f"{s['accuracy']:.2f}"
        cells.append((f"**{v}**" if a == r.get("strongest") and len(names) > 1 else v) + _ci(s["ci"]))
    return cells


def best_tradeoff(rows: Sequence[FrontierRow]) -> FrontierRow | None:
    """The private row with the largest ``similarity - (attribution - chance)``: meaning kept minus the strongest
    attacker's advantage over chance (both in [0, 1]; the rule of docs/lm-rewriting.md). None without private
    rows."""
    private = [r for r in rows if r.get("epsilon_token") is not None]
    if not private:
        return None
    return max(private, key=lambda r: r["similarity"] - (r["attribution"] - r["chance"]))


def render_frontier_markdown(result: FrontierResult) -> str:
    """One table: instruction, prior, ε per token and per document, similarity, each attacker's chunk accuracy
    [95% bootstrap interval] against chance (the row's strongest in bold), the score (similarity − (strongest −
    chance)), and the counts of empty outputs, chat replies and verbatim copies."""
    c = result["construction"]
    rows = result["rows"]
    names = list(rows[0].get("attacks") or {}) or ["attribution"]
    lines = [f"{c.get('sentences')} sentences of {c.get('authors')} authors ({c.get('corpus')}); chunk attribution "
             f"on {rows[0].get('chunks')} chunks; chance {rows[0]['chance']:.3f}; attackers trained on the originals: "
             f"{', '.join(names)}.", "",
             "| instruction | prior | ε/token | ε/document | similarity ↑ | "
             + " | ".join(f"{a} ↓ [95% CI]" for a in names) + " | score ↑ | empty | reply | copy | s |",
             "|" + "---|" * (10 + len(names))]
    for r in rows:
        score = r["similarity"] - (r["attribution"] - r["chance"])
        lines.append(f"| {r['instruction']} | {r['setting']} | {_f(r.get('epsilon_token'), 0)} | "
                     f"{_f(r.get('epsilon_document'), 0)} | {r['similarity']:.3f} | "
                     + " | ".join(_attack_cells(r, names)) + f" | {score:.3f} | "
                     f"{r.get('empty', 0)} | {r.get('replies', 0)} | {r.get('copies', 0)} | {_f(r.get('seconds'), 0)} |")
    best = best_tradeoff(result["rows"])
    if best is not None:
        lines += ["", f"Best trade-off (largest similarity − (attribution − chance)): **{best['instruction']}**, "
                      f"{best['setting']}, ε/token {best['epsilon_token']:g}."]
    return "\n".join(lines) + "\n"


def plot_frontier(results: Sequence[FrontierResult], path: str | Path) -> Path:
    """PNG: the strongest attacker's chunk accuracy against similarity, a point per row, a panel per corpus (extra
    ``eval``)."""
    from ..errors import require

    mpl = require("matplotlib", "eval")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.6 * len(results), 4.2), dpi=110, squeeze=False)
    colors = {"paraphrase": "C0", "neutral": "C1", "simplify": "C2", "formal": "C3", "-": "k"}
    for ax, res in zip(axes[0], results, strict=True):
        for r in res["rows"]:
            marker = ("*" if r["instruction"] == "-" else "s" if r.get("epsilon_token") is None else
                      "o" if r.get("prior") else "^")
            size = 30 + 0.25 * float(r.get("epsilon_token") or 0)
            ax.scatter(r["similarity"], r["attribution"], marker=marker, s=size,
                       color=colors.get(r["instruction"], "C4"), alpha=0.8, edgecolor="k", linewidth=0.4)
            if r.get("epsilon_token") is not None:
                ax.annotate(f"{r['epsilon_token']:g}", (r["similarity"], r["attribution"]), textcoords="offset points",
                            xytext=(3, 3), fontsize=6)
        chance = res["rows"][0]["chance"]
        ax.axhline(chance, color="grey", ls=":")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_title(str(res["construction"].get("corpus")), fontsize=9)
        ax.set_xlabel("MiniLM similarity to the input")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("chunk attribution (strongest attacker of the row)")
    handles = [plt.Line2D([], [], ls="", marker="o", color=v, label=k) for k, v in colors.items() if k != "-"]
    handles += [plt.Line2D([], [], ls="", marker=m, color="grey", label=lab) for m, lab in
                (("o", "prior on"), ("^", "prior off"), ("s", "generate (non-private)"), ("*", "identity"))]
    axes[0][-1].legend(handles=handles, fontsize=6, loc="upper left")
    fig.suptitle("dp-prompt instructions: similarity vs authorship (labels: ε per token; dotted: chance)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def write_frontier_report(result: FrontierResult, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """``results.json``, ``report.md`` and (optionally) ``frontier.png`` in ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "results.json", result)
    with atomic_writer(d / "report.md") as fh:
        fh.write(f"# dp-prompt instruction frontier: {result['settings']['corpus']}\n\n"
                 f"{render_frontier_markdown(result)}")
    files = [d / "results.json", d / "report.md"]
    if plots:
        files.append(plot_frontier([result], d / "frontier.png"))
    return files
