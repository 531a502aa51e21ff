"""The report folder of ``textdp evaluate``: report.md, results.json, settings.json, PNG plots.

Every file is written to a temporary file in the report folder and moved into
place with :func:`os.replace`, so a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..io import atomic_writer
from .experiment import ATTACKERS, UTILITY_MODELS, ExperimentResult

__all__ = ["RESULT_KEYS", "atomic_write_text", "frontier", "render_markdown", "write_report"]

#: Keys of every row of results.json.
RESULT_KEYS = ("epsilon", "model", "kind", "correct", "total", "accuracy", "chance", "ci_low", "ci_high", "unchanged", "text")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`textdp.io.atomic_writer`), with the umask's file mode."""
    with atomic_writer(path, private=False) as fh:
        fh.write(text)


def _eps_label(e: float | None) -> str:
    return "none" if e is None else f"{e:g}"


def frontier(rows: list[dict[str, Any]], *, max_ratio: float = 2.0, max_drop: float = 0.05) -> dict[str, Any]:
    """Where the privacy target (every attacker <= ``max_ratio`` x chance) meets utility.

    Returns per epsilon the strongest attacker's accuracy/chance and each
    utility model's drop from the unmodified accuracy, the epsilons meeting
    both targets (``met``), the largest epsilon meeting the privacy target and
    the smallest meeting the utility target (judged on the first utility model).

    >>> rows = [dict(epsilon=None, model="a", kind="attack", accuracy=0.5, chance=0.1, text="bag"),
    ...         dict(epsilon=None, model="u", kind="utility", accuracy=0.9, chance=0.5, text="bag"),
    ...         dict(epsilon=5.0, model="a", kind="attack", accuracy=0.1, chance=0.1, text="bag"),
    ...         dict(epsilon=5.0, model="u", kind="utility", accuracy=0.88, chance=0.5, text="bag")]
    >>> frontier(rows)["met"]
    [5.0]
    """
    main = [r for r in rows if r.get("text", "bag") == "bag"]
    eps_list = [e for e in dict.fromkeys(r["epsilon"] for r in main) if e is not None]
    util_models = list(dict.fromkeys(r["model"] for r in main if r["kind"] == "utility"))
    base = {r["model"]: r["accuracy"] for r in main if r["epsilon"] is None and r["kind"] == "utility"}
    per: list[dict[str, Any]] = []
    for e in eps_list:
        att = [(r["accuracy"] / r["chance"], r["model"]) for r in main if r["epsilon"] == e and r["kind"] == "attack"]
        ratio, worst = max(att) if att else (0.0, None)
        drops = {r["model"]: base[r["model"]] - r["accuracy"] for r in main
                 if r["epsilon"] == e and r["kind"] == "utility" and r["model"] in base}
        private = ratio <= max_ratio
        useful = (drops.get(util_models[0], 0.0) <= max_drop) if util_models else None
        per.append({"epsilon": e, "max_ratio": ratio, "strongest": worst, "drops": drops,
                    "private": private, "useful": useful})
    met = [p["epsilon"] for p in per if p["private"] and (p["useful"] is None or p["useful"])]
    private_eps = [p["epsilon"] for p in per if p["private"]]
    useful_eps = [p["epsilon"] for p in per if p["useful"]]
    return {
        "per_epsilon": per,
        "met": met,
        "largest_private_epsilon": max(private_eps) if private_eps else None,
        "smallest_useful_epsilon": min(useful_eps) if useful_eps else None,
        "primary_utility": util_models[0] if util_models else None,
        "max_ratio": max_ratio,
        "max_drop": max_drop,
    }


def render_markdown(res: ExperimentResult) -> str:
    """The report as Markdown: Table-1-style counts, accuracies with CIs, frontier, timings."""
    cfg = res.config
    rows = res.rows
    main = [r for r in rows if r.get("text", "bag") == "bag"]
    models = list(dict.fromkeys((r["model"], r["kind"]) for r in main))
    conds = list(dict.fromkeys(r["epsilon"] for r in main))
    get = {(r["epsilon"], r["model"]): r for r in main}
    unchanged = {r["epsilon"]: r["unchanged"] for r in main}
    c = res.construction
    lines = [
        f"# Privacy-utility report: {c.get('corpus')}",
        "",
        (
            "Earth Mover's privacy (Fernandes, Dras & McIver, POST 2019) applied to the unknown snippets of "
            f"{res.n_authors} authors; attackers attribute the snippets to the authors' known texts, utility models "
            "recover the snippet's topic (Section 6, Table 1, Appendix B)."
        ),
        "",
        "## Set-up",
        "",
        f"- corpus: `{c.get('corpus')}` ({c.get('authors')} authors of {c.get('eligible_authors')} eligible)"
        + (f", topics: {', '.join(c.get('topics') or [])}" if c.get("topics") else ""),
        f"- known text: first {c.get('known_words')} words, snippet: last {c.get('unknown_words')} words "
        f"(cut on {c.get('cut')} words); mechanism bag size N = {res.bag_size} "
        + ("(shortest in-vocabulary snippet)" if getattr(cfg, "size", None) is None else "(set in the config)")
        + f", bag mode `{getattr(cfg, 'bag', 'truncate')}`, decoder `{getattr(cfg, 'decoder', 'exact')}`"
        + (" (approximate: the released words differ from exact decoding; see docs/evaluation-results.md)"
           if getattr(cfg, "decoder", "exact") in ("ivf", "hnsw", "approximate") else ""),
        f"- known texts given to the attackers: {'truncated to N' if cfg.truncate_known else 'whole (stronger attacker)'}",
        f"- embeddings: {cfg.embeddings or 'GloVe 6B 50d'}"
        + (f", vocabulary {cfg.vocab_size}" if cfg.vocab_size else ", full vocabulary")
        + (f", restricted to the public domain vocabulary `{cfg.domain_vocab}` (words seen >= "
           f"{cfg.domain_min_count} times)" if getattr(cfg, "domain_vocab", None) else ""),
        f"- seed {cfg.seed}; 95% percentile bootstrap intervals ({cfg.bootstrap} resamples)",
        "- unmodified row ('none') = the mechanism's input bag in the mechanism's output order, so rows differ only by the noise",
        "",
        "Models:",
        "",
    ]
    for m, kind in models:
        desc = ATTACKERS.get(m) or UTILITY_MODELS.get(m, "")
        if m.startswith("koppel"):
            desc += f"; {cfg.koppel_trials} trials, {cfg.koppel_features} features"
        if m in ("nn-author", "knn-topic"):
            desc += f"; distance: {'mean word vector (Euclidean)' if cfg.nn_distance == 'mean' else 'Earth Mover'}"
        lines.append(f"- `{m}` ({kind}): {desc}")
    lines += ["", "## Table 1: correct predictions per epsilon", ""]
    header = "| eps | words unchanged | " + " | ".join(f"{m} ({k})" for m, k in models) + " |"
    lines += [header, "|" + "---|" * (len(models) + 2)]
    for e in conds:
        cells = []
        for m, _ in models:
            r = get.get((e, m))
            cells.append("" if r is None else f"{r['correct']}/{r['total']}")
        lines.append(f"| {_eps_label(e)} | {unchanged.get(e, 1.0):.2f} | " + " | ".join(cells) + " |")
    chance_cells = [f"{get[(conds[0], m)]['chance'] * get[(conds[0], m)]['total']:.1f}" for m, _ in models]
    lines.append("| chance | | " + " | ".join(chance_cells) + " |")
    lines += ["", "## Accuracy with 95% bootstrap interval", ""]
    lines += ["| eps | " + " | ".join(m for m, _ in models) + " |", "|" + "---|" * (len(models) + 1)]
    for e in conds:
        cells = []
        for m, _ in models:
            r = get.get((e, m))
            cells.append("" if r is None else f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]")
        lines.append(f"| {_eps_label(e)} | " + " | ".join(cells) + " |")
    lines.append("| chance | " + " | ".join(f"{get[(conds[0], m)]['chance']:.2f}" for m, _ in models) + " |")
    ref = [r for r in rows if r.get("text", "bag") != "bag"]
    if ref:
        lines += ["", "## Reference rows (unmodified snippet in its original word order)", "",
                  "| text | model | correct | accuracy [95% CI] |", "|---|---|---|---|"]
        for r in ref:
            lines.append(f"| {r['text']} | {r['model']} | {r['correct']}/{r['total']} | "
                         f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] |")
    fr = frontier(rows)
    lines += ["", "## Target: every attacker <= 2x chance with topic accuracy within 5 points", ""]
    if fr["primary_utility"] is None:
        lines.append("No topic labels in this set: only the privacy side can be judged.")
    umodels = list(dict.fromkeys(r["model"] for r in main if r["kind"] == "utility"))
    head = ["eps", "strongest attacker", "accuracy / chance"] + [f"{m} drop (points)" for m in umodels] + ["meets"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in fr["per_epsilon"]:
        drops = " | ".join(f"{100 * d:.1f}" for d in p["drops"].values())
        meets = "yes" if p["private"] and (p["useful"] is None or p["useful"]) else "no"
        lines.append(f"| {_eps_label(p['epsilon'])} | {p['strongest']} | {p['max_ratio']:.1f} | "
                     + (drops + " | " if drops else "") + f"{meets} |")
    lines.append("")
    lines.append("Drops are unmodified minus private accuracy (positive = worse).")
    lines.append("")
    if fr["met"]:
        lines.append(f"Target met at eps = {', '.join(_eps_label(e) for e in fr['met'])}.")
    else:
        lp, su = fr["largest_private_epsilon"], fr["smallest_useful_epsilon"]
        lines.append("Target not met at any epsilon of the grid. Frontier: "
                     + (f"attackers reach <= 2x chance only from eps = {_eps_label(lp)} down" if lp is not None
                        else "no epsilon of the grid brings every attacker to 2x chance")
                     + "; "
                     + (f"topic accuracy stays within 5 points down to eps = {_eps_label(su)}" if su is not None
                        else ("topic accuracy drops by more than 5 points at every epsilon"
                              if fr["primary_utility"] else "no topic labels"))
                     + ".")
    lines += ["", "## Run time", "", "| stage | seconds |", "|---|---|"]
    for k, v in res.timings.items():
        lines.append(f"| {k} | {v:.1f} |")
    lines += ["", ("Plots: the PNG files of this folder (attack accuracy, utility and the privacy-utility frontier "
                   "against epsilon). Rows: `results.json`. Settings: `settings.json`."), ""]
    return "\n".join(lines)


def write_report(res: ExperimentResult, out_dir: str | os.PathLike[str], *, plots: bool = True) -> list[Path]:
    """Write report.md, results.json, settings.json and the plots to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    results = [{k: r.get(k) for k in RESULT_KEYS} for r in res.rows]
    p = out / "results.json"
    atomic_write_text(p, json.dumps(results, indent=1) + "\n")
    written.append(p)
    settings = {
        "config": res.config.to_dict(),
        "construction": res.construction,
        "bag_size": res.bag_size,
        "n_authors": res.n_authors,
        "n_topics": res.n_topics,
        "timings_s": res.timings,
        "frontier": frontier(res.rows),
    }
    p = out / "settings.json"
    atomic_write_text(p, json.dumps(settings, indent=1, default=str) + "\n")
    written.append(p)
    p = out / "report.md"
    atomic_write_text(p, render_markdown(res))
    written.append(p)
    if plots:
        from .plots import plot_results

        with tempfile.TemporaryDirectory(dir=out, prefix=".plots-") as tmp:
            for f in plot_results(res.rows, Path(tmp), str(res.construction.get("corpus"))):
                os.replace(f, out / f.name)
                written.append(out / f.name)
    return written
