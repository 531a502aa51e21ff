"""The report of dp-prompt's instruction frontier (:mod:`textdp.evaluation.lm_frontier`): a markdown table per
corpus, and one plot of similarity against attribution (a point per row)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..io import atomic_writer, write_json
from .lm_frontier import FrontierResult, FrontierRow

__all__ = ["best_tradeoff", "plot_frontier", "render_frontier_markdown", "write_frontier_report"]


def _f(x: object, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{nd}f}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def _ci(r: FrontierRow) -> str:
    ci = r.get("attribution_ci")
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def best_tradeoff(rows: Sequence[FrontierRow]) -> FrontierRow | None:
    """The private row with the largest ``similarity - (attribution - chance)``: meaning kept minus the attacker's
    advantage over chance (both in [0, 1]; the rule of docs/lm-rewriting.md). None without private rows."""
    private = [r for r in rows if r.get("epsilon_token") is not None]
    if not private:
        return None
    return max(private, key=lambda r: r["similarity"] - (r["attribution"] - r["chance"]))


def render_frontier_markdown(result: FrontierResult) -> str:
    """One table: instruction, prior, ε per token and per document, similarity, chunk attribution against chance,
    and the counts of empty outputs, chat replies and verbatim copies."""
    c = result["construction"]
    lines = [f"{c.get('sentences')} sentences of {c.get('authors')} authors ({c.get('corpus')}); chunk attribution "
             f"on {result['rows'][0].get('chunks')} chunks; chance {result['rows'][0]['chance']:.3f}.", "",
             "| instruction | prior | ε/token | ε/document | similarity ↑ | attribution ↓ [95% CI] | empty | reply | copy | s |",
             "|" + "---|" * 10]
    for r in result["rows"]:
        lines.append(f"| {r['instruction']} | {r['setting']} | {_f(r.get('epsilon_token'), 0)} | "
                     f"{_f(r.get('epsilon_document'), 0)} | {r['similarity']:.3f} | {r['attribution']:.2f} {_ci(r)} | "
                     f"{r.get('empty', 0)} | {r.get('replies', 0)} | {r.get('copies', 0)} | {_f(r.get('seconds'), 0)} |")
    best = best_tradeoff(result["rows"])
    if best is not None:
        lines += ["", f"Best trade-off (largest similarity − (attribution − chance)): **{best['instruction']}**, "
                      f"{best['setting']}, ε/token {best['epsilon_token']:g}."]
    return "\n".join(lines) + "\n"


def plot_frontier(results: Sequence[FrontierResult], path: str | Path) -> Path:
    """PNG: attribution against similarity, a point per row, a panel per corpus (extra ``eval``)."""
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
    axes[0][0].set_ylabel("chunk attribution (char n-grams)")
    handles = [plt.Line2D([], [], ls="", marker="o", color=v, label=k) for k, v in colors.items() if k != "-"]
    handles += [plt.Line2D([], [], ls="", marker=m, color="grey", label=lab) for m, lab in
                (("o", "prior on"), ("^", "prior off"), ("s", "generate (non-private)"), ("*", "identity"))]
    axes[0][-1].legend(handles=handles, fontsize=6, loc="upper left")
    fig.suptitle("dp-prompt instructions: similarity vs authorship (labels: ε per token; dotted: chance)", fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


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
