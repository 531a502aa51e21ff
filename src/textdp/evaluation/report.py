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

__all__ = ["MAIN_TEXTS", "RESULT_KEYS", "atomic_write_text", "frontier", "frontiers", "load_result",
           "mechanism_labels", "render_markdown", "write_report"]

#: Keys of every row of results.json.
RESULT_KEYS = ("mechanism", "epsilon", "model", "kind", "correct", "total", "accuracy", "chance", "ci_low", "ci_high",
               "unchanged", "text")
#: ``text`` values of the main rows (the release form); the others are reference rows.
MAIN_TEXTS = ("bag", "text")
_ALL = object()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`textdp.io.atomic_writer`), with the umask's file mode."""
    with atomic_writer(path, private=False) as fh:
        fh.write(text)


def _eps_label(e: float | None) -> str:
    return "none" if e is None else f"{e:g}"


def _main(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("text", "bag") in MAIN_TEXTS]


def mechanism_labels(rows: list[dict[str, Any]]) -> list[str | None]:
    """The mechanism labels of the main rows, in order (``[None]`` for rows without a ``mechanism`` key)."""
    labels = [m for m in dict.fromkeys(r.get("mechanism") for r in _main(rows)) if m is not None]
    return list(labels) or [None]


def frontier(rows: list[dict[str, Any]], *, mechanism: Any = _ALL, max_ratio: float = 2.0,
             max_drop: float = 0.05) -> dict[str, Any]:
    """Where the privacy target (every attacker <= ``max_ratio`` x chance) meets utility, for one mechanism.

    Per epsilon: the strongest attacker's accuracy / chance (``private``: at most
    ``max_ratio``), and each utility model's drop from the unmodified accuracy of the
    same release form (``useful``: the first utility model drops at most ``max_drop``).
    ``private``/``useful`` are ``None`` when that side was not measured (no attacker,
    no utility model, or no topic labels), and an epsilon only *meets* the target
    when both sides were measured and hold. ``status`` is ``"met"``, ``"not met"``
    or ``"not judged"`` (a side was never measured). ``closest`` describes the gap:
    at the largest epsilon meeting the privacy side, the topic drop; at the
    smallest epsilon meeting the utility side, the strongest attacker.

    >>> rows = [dict(epsilon=None, model="a", kind="attack", accuracy=0.5, chance=0.1, text="bag"),
    ...         dict(epsilon=None, model="u", kind="utility", accuracy=0.9, chance=0.5, text="bag"),
    ...         dict(epsilon=5.0, model="a", kind="attack", accuracy=0.1, chance=0.1, text="bag"),
    ...         dict(epsilon=5.0, model="u", kind="utility", accuracy=0.88, chance=0.5, text="bag")]
    >>> frontier(rows)["met"], frontier(rows)["status"]
    ([5.0], 'met')

    Without utility rows nothing is "met", whatever the attackers do:

    >>> fr = frontier([r for r in rows if r["kind"] == "attack"])
    >>> fr["met"], fr["status"], fr["per_epsilon"][0]["private"], fr["per_epsilon"][0]["useful"]
    ([], 'not judged', True, None)
    """
    main = _main(rows)
    if mechanism is _ALL:
        labels = mechanism_labels(rows)
        if len(labels) > 1:
            raise ValueError(f"rows of {len(labels)} mechanisms: pass mechanism= (or use frontiers)")
        mechanism = labels[0]
    mine = [r for r in main if r.get("mechanism") == mechanism]
    release = next((r.get("text", "bag") for r in mine), "bag")
    base_rows = [r for r in main if r.get("mechanism") is None and r["epsilon"] is None
                 and r.get("text", "bag") == release]
    eps_list = [e for e in dict.fromkeys(r["epsilon"] for r in mine) if e is not None]
    util_models = list(dict.fromkeys(r["model"] for r in mine if r["kind"] == "utility"))
    base = {r["model"]: r["accuracy"] for r in base_rows if r["kind"] == "utility"}
    primary = next((m for m in util_models if m in base), None)
    per: list[dict[str, Any]] = []
    for e in eps_list:
        att = [(r["accuracy"] / r["chance"], r["model"], r["accuracy"]) for r in mine
               if r["epsilon"] == e and r["kind"] == "attack"]
        ratio, worst, worst_acc = max(att) if att else (None, None, None)
        util = {r["model"]: r["accuracy"] for r in mine if r["epsilon"] == e and r["kind"] == "utility"}
        drops = {m: base[m] - a for m, a in util.items() if m in base}
        private = None if ratio is None else bool(ratio <= max_ratio)
        useful = None if primary is None or primary not in drops else bool(drops[primary] <= max_drop)
        per.append({"epsilon": e, "max_ratio": ratio, "strongest": worst, "strongest_accuracy": worst_acc,
                    "utility": util, "drops": drops, "private": private, "useful": useful,
                    "meets": bool(private and useful)})
    met = [p["epsilon"] for p in per if p["meets"]]
    private_eps = [p["epsilon"] for p in per if p["private"]]
    useful_eps = [p["epsilon"] for p in per if p["useful"]]
    judged = bool(per) and all(p["private"] is not None and p["useful"] is not None for p in per)
    status = "met" if met else ("not met" if judged else "not judged")
    closest: dict[str, Any] = {}
    if private_eps and primary is not None:
        p = next(q for q in per if q["epsilon"] == max(private_eps))
        closest["at_privacy"] = {"epsilon": p["epsilon"], "utility": p["utility"].get(primary),
                                 "drop": p["drops"].get(primary), "max_ratio": p["max_ratio"]}
    if useful_eps:
        p = next(q for q in per if q["epsilon"] == min(useful_eps))
        closest["at_utility"] = {"epsilon": p["epsilon"], "max_ratio": p["max_ratio"], "strongest": p["strongest"],
                                 "drop": p["drops"].get(primary) if primary else None}
    return {
        "mechanism": mechanism,
        "per_epsilon": per,
        "met": met,
        "status": status,
        "largest_private_epsilon": max(private_eps) if private_eps else None,
        "smallest_useful_epsilon": min(useful_eps) if useful_eps else None,
        "primary_utility": primary,
        "baseline": base,
        "closest": closest,
        "max_ratio": max_ratio,
        "max_drop": max_drop,
    }


def frontiers(rows: list[dict[str, Any]], **kw: Any) -> dict[str, dict[str, Any]]:
    """:func:`frontier` of every mechanism label in ``rows`` (key ``"none"`` for label-less rows)."""
    return {str(m) if m is not None else "none": frontier(rows, mechanism=m, **kw) for m in mechanism_labels(rows)}


def _chance_cell(r: dict[str, Any]) -> str:
    return f"{r['chance']:.3f}"


def _construction_lines(c: dict[str, Any], n_authors: int) -> list[str]:
    lines = [
        f"- corpus: `{c.get('corpus')}`: {c.get('authors')} authors evaluated, of {c.get('eligible_authors')} eligible "
        f"and {c.get('corpus_authors', '?')} in the corpus"
        + (f" (after the filter `{c.get('filter_field')}`)" if c.get("filter_field") else "")
        + (f"; topics: {', '.join(c.get('topics') or [])}" if c.get("topics") else ""),
    ]
    excluded = c.get("excluded") or []
    if excluded:
        names = ", ".join(f"`{x['author']}`" for x in excluded[:8]) + (" ..." if len(excluded) > 8 else "")
        reasons = sorted({str(x["reason"]) for x in excluded})
        lines.append(f"- excluded: {len(excluded)} author(s) with too few words ({'; '.join(reasons)}): {names}")
    elif "excluded" in c:
        lines.append("- excluded: none (every author had enough words)")
    not_chosen = int(c.get("eligible_authors") or 0) - int(c.get("authors") or 0)
    if not_chosen > 0:
        lines.append(f"- not chosen: {not_chosen} eligible author(s) beyond the set size "
                     "(max_authors / n_topics / authors_per_topic)")
    if c.get("split_field"):
        lines.append(f"- known/unknown split along the corpus field `{c['split_field']}`: known text from "
                     f"{', '.join(c.get('known_split') or [])} documents (first {c.get('known_words')} words), snippet "
                     f"from {', '.join(c.get('unknown_split') or [])} documents (first {c.get('unknown_words')} "
                     "words); the two never cross")
    else:
        lines.append(f"- known text: first {c.get('known_words')} words, snippet: last {c.get('unknown_words')} words "
                     f"of the author's documents in file order (cut on {c.get('cut')} words)")
        crossed = c.get("crossed_split") or {}
        if c.get("detected_split_field"):
            field = c["detected_split_field"]
            if crossed:
                lines.append(
                    f"- **split crossed**: the corpus has a `{field}` field that this cut ignores; for "
                    f"{len(crossed)} of {n_authors} authors one `{field}` value fed both the known text and the "
                    f"snippet, or the known text mixed values. Set `split_field = \"{field}\"` (with known_split / "
                    "unknown_split) to follow the corpus's split")
            else:
                lines.append(f"- the corpus's `{field}` field is not crossed: each author's known text and snippet "
                             "come from different values")
    return lines


def render_markdown(res: ExperimentResult) -> str:
    """The report as Markdown: set-up, comparison, per-mechanism tables, frontier, timings."""
    cfg = res.config
    rows = res.rows
    main = _main(rows)
    c = res.construction
    labels = mechanism_labels(rows)
    specs = {m.label: m for m in getattr(cfg, "mechanisms", [])}
    info = getattr(res, "mechanisms", {}) or {}
    has_topics = bool(res.n_topics)
    lines = [
        f"# Privacy-utility report: {c.get('corpus')}",
        "",
        (f"Mechanisms applied to the unknown snippets of {res.n_authors} authors; attackers attribute the snippets "
         "to the authors' known texts, utility models recover the snippet's topic (after Fernandes, Dras & McIver, "
         "POST 2019, Section 6, Table 1, Appendix B)."),
        "",
        "## Set-up",
        "",
        *_construction_lines(c, res.n_authors),
        f"- mechanism input: the snippet's first N in-vocabulary words, N = {res.bag_size} "
        + ("(shortest in-vocabulary snippet)" if getattr(cfg, "size", None) is None else "(set in the config)")
        + "; per-mechanism N below when it differs",
        f"- known texts given to the fixed attackers: {'truncated to N' if cfg.truncate_known else 'whole'}; "
        "noise-aware attackers: the known texts privatised by the same mechanism and epsilon"
        + (f" (first {cfg.noise_aware_known_words} in-vocabulary words)" if getattr(cfg, "noise_aware_known_words", None)
           else ""),
        f"- embeddings: {cfg.embeddings or 'GloVe 6B 50d'}"
        + (f", vocabulary {cfg.vocab_size}" if cfg.vocab_size else ", full vocabulary")
        + (f", restricted to the public domain vocabulary `{cfg.domain_vocab}` (words seen >= "
           f"{cfg.domain_min_count} times)" if getattr(cfg, "domain_vocab", None) else ""),
        f"- seed {cfg.seed}; 95% percentile bootstrap intervals ({cfg.bootstrap} resamples)",
        ("- unmodified row ('none') = the mechanism's input in the form it releases (a bag sorted by vocabulary "
         "row, or the words in order), so rows differ only by the noise"),
        "- chance = 1 / number of classes (a fraction, like the accuracies)",
        "",
        "Models:",
        "",
    ]
    for m, kind in dict.fromkeys((r["model"], r["kind"]) for r in main):
        desc = ATTACKERS.get(m) or UTILITY_MODELS.get(m, "")
        if "koppel" in m:
            desc += f"; {cfg.koppel_trials} trials, {cfg.koppel_features} features"
        if m in ("nn-author", "knn-topic", "noise-aware-nn-author"):
            desc += f"; distance: {'mean word vector (Euclidean)' if cfg.nn_distance == 'mean' else 'Earth Mover'}"
        lines.append(f"- `{m}` ({kind}): {desc}")
    if not has_topics:
        lines += ["", ("**No topic labels in this set: utility was not measured, so the target (which needs both "
                       "sides) cannot be judged; only the privacy side is reported.**")]

    frs = {m: frontier(rows, mechanism=m) for m in labels}
    # ---- comparison across mechanisms
    lines += ["", "## Comparison", "",
              ("Target: every attacker (fixed and noise-aware) <= 2x chance while topic accuracy stays within 5 "
               "points of unmodified. The privacy side holds from the listed epsilon down; the utility side down to "
               "the listed epsilon; the cells after each give the other side at that epsilon."), ""]
    head = ["mechanism", "options", "release", "N", "words/s", "target"]
    head += ["privacy side from eps", "topic there (drop)"] if has_topics else ["privacy side from eps"]
    head += ["utility side down to eps", "strongest attacker there (x chance)"] if has_topics else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in labels:
        fr = frs[m]
        spec = specs.get(str(m))
        inf = info.get(str(m), {})
        wps = inf.get("words_per_second")
        target = ("met at eps " + ", ".join(_eps_label(e) for e in fr["met"])) if fr["met"] else fr["status"]
        cells = [f"`{m}`", spec.options() if spec else "", inf.get("release", ""), str(inf.get("bag_size", "")),
                 f"{wps:,.0f}" if wps else "", target]
        lp = fr["largest_private_epsilon"]
        cells.append(_eps_label(lp) if lp is not None else "none of the grid")
        if has_topics:
            cp = fr["closest"].get("at_privacy")
            cells.append(f"{cp['utility']:.2f} ({100 * cp['drop']:+.0f} pts)" if cp and cp["drop"] is not None else "")
            su = fr["smallest_useful_epsilon"]
            cu = fr["closest"].get("at_utility")
            cells.append(_eps_label(su) if su is not None else "none of the grid")
            cells.append(f"{cu['strongest']} ({cu['max_ratio']:.1f}x)" if cu and cu["max_ratio"] is not None else "")
        lines.append("| " + " | ".join(cells) + " |")

    # ---- every condition in one table
    lines += ["", "## Every mechanism and epsilon", "",
              ("Strongest attacker = the highest accuracy / chance among all attackers (fixed and noise-aware) at "
               "that condition; topic = the first utility model; drop against the unmodified row of the same "
               "release form."), ""]
    head = ["mechanism", "eps", "unchanged", "strongest attacker", "accuracy", "x chance"]
    head += ["topic accuracy", "drop (points)", "meets"] if has_topics else ["meets"]
    head += ["words/s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in labels:
        fr = frs[m]
        unch = {r["epsilon"]: r["unchanged"] for r in main if r.get("mechanism") == m}
        wps = (info.get(str(m), {}) or {}).get("words_per_second")
        for p in fr["per_epsilon"]:
            cells = [f"`{m}`", _eps_label(p["epsilon"]), f"{unch.get(p['epsilon'], float('nan')):.3f}",
                     str(p["strongest"]),
                     "" if p["strongest_accuracy"] is None else f"{p['strongest_accuracy']:.2f}",
                     "" if p["max_ratio"] is None else f"{p['max_ratio']:.1f}"]
            if has_topics:
                u = p["utility"].get(fr["primary_utility"]) if fr["primary_utility"] else None
                d = p["drops"].get(fr["primary_utility"]) if fr["primary_utility"] else None
                cells += ["" if u is None else f"{u:.2f}", "" if d is None else f"{100 * d:+.0f}"]
            cells.append("yes" if p["meets"] else ("no" if p["private"] is not None and p["useful"] is not None
                                                   else "not judged"))
            cells.append(f"{wps:,.0f}" if wps else "")
            lines.append("| " + " | ".join(cells) + " |")

    # ---- per mechanism
    for m in labels:
        mine = [r for r in main if r.get("mechanism") == m]
        release = next((r["text"] for r in mine), "bag")
        base = [r for r in main if r.get("mechanism") is None and r["epsilon"] is None and r["text"] == release]
        table = base + [r for r in mine if m is not None] if m is not None else mine
        models = list(dict.fromkeys((r["model"], r["kind"]) for r in table))
        get = {(r.get("mechanism"), r["epsilon"], r["model"]): r for r in table}
        conds = list(dict.fromkeys((r.get("mechanism"), r["epsilon"]) for r in table))
        unchanged = {(r.get("mechanism"), r["epsilon"]): r["unchanged"] for r in table}

        def cond_label(cm: str | None, e: float | None, mm: Any = m) -> str:
            if e is None and cm is not None:
                return "none (selection only)"
            return _eps_label(e)

        title = f"`{m}`" if m is not None else "the mechanism"
        spec = specs.get(str(m))
        lines += ["", f"## {title}" + (f": {spec.name}, {spec.options()}" if spec else ""), ""]
        inf = info.get(str(m), {})
        if inf:
            lines.append(f"Release: {inf.get('release')}; N = {inf.get('bag_size')}; output vocabulary "
                         f"{inf.get('vocab_size'):,} words"
                         + (f"; {inf['selected_features']} topic features" if inf.get("selected_features") else "")
                         + (f"; {inf['words']:,} words privatised in {inf['seconds']:.0f} s" if inf.get("seconds")
                            else "") + ".")
            lines.append("")
        lines += ["### Correct predictions per epsilon", ""]
        lines += ["| eps | words unchanged | " + " | ".join(f"{mm} ({k})" for mm, k in models) + " |",
                  "|" + "---|" * (len(models) + 2)]
        for cm, e in conds:
            cells = []
            for mm, _ in models:
                r = get.get((cm, e, mm))
                cells.append("" if r is None else f"{r['correct']}/{r['total']}")
            lines.append(f"| {cond_label(cm, e)} | {unchanged.get((cm, e), 1.0):.3f} | " + " | ".join(cells) + " |")
        first = {mm: next(r for r in table if r["model"] == mm) for mm, _ in models}
        lines.append("| chance (fraction) | | " + " | ".join(_chance_cell(first[mm]) for mm, _ in models) + " |")
        lines += ["", "### Accuracy with 95% bootstrap interval", ""]
        lines += ["| eps | " + " | ".join(mm for mm, _ in models) + " |", "|" + "---|" * (len(models) + 1)]
        for cm, e in conds:
            cells = []
            for mm, _ in models:
                r = get.get((cm, e, mm))
                cells.append("" if r is None else f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]")
            lines.append(f"| {cond_label(cm, e)} | " + " | ".join(cells) + " |")
        lines.append("| chance | " + " | ".join(_chance_cell(first[mm]) for mm, _ in models) + " |")
        # target table: drop columns only for utility models that have a baseline
        fr = frs[m]
        umodels = [u for u in dict.fromkeys(r["model"] for r in mine if r["kind"] == "utility") if u in fr["baseline"]]
        lines += ["", "### Target: every attacker <= 2x chance with topic accuracy within 5 points", ""]
        head = ["eps", "strongest attacker", "accuracy / chance"] + [f"{u} drop (points)" for u in umodels] + ["meets"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for p in fr["per_epsilon"]:
            cells = [_eps_label(p["epsilon"]), str(p["strongest"]),
                     "" if p["max_ratio"] is None else f"{p['max_ratio']:.1f}"]
            cells += [f"{100 * p['drops'][u]:.1f}" if u in p["drops"] else "" for u in umodels]
            if p["meets"]:
                meets = "yes"
            elif p["private"] is None or p["useful"] is None:
                side = "privacy" if p["private"] is None else "utility"
                meets = f"not judged (no {side} measured)" + ("; privacy side holds" if p["private"] else "")
            else:
                meets = "no"
            lines.append("| " + " | ".join(cells + [meets]) + " |")
        lines.append("")
        if umodels:
            lines.append("Drops are unmodified minus private accuracy, in points (positive = worse).")
            lines.append("")
        lp, su = fr["largest_private_epsilon"], fr["smallest_useful_epsilon"]
        if fr["met"]:
            lines.append(f"Target met at eps = {', '.join(_eps_label(e) for e in fr['met'])} "
                         f"(both sides measured; utility judged on `{fr['primary_utility']}`).")
        elif fr["status"] == "not judged":
            lines.append("Target not judged: "
                         + ("no utility was measured (no topic labels)" if fr["primary_utility"] is None
                            else "no attacker was measured")
                         + ". Privacy side: "
                         + (f"every attacker <= 2x chance from eps = {_eps_label(lp)} down." if lp is not None
                            else "no epsilon of the grid brings every attacker to 2x chance."))
        else:
            lines.append("Target not met at any epsilon of the grid. Frontier: "
                         + (f"attackers reach <= 2x chance only from eps = {_eps_label(lp)} down" if lp is not None
                            else "no epsilon of the grid brings every attacker to 2x chance")
                         + "; "
                         + (f"topic accuracy stays within 5 points down to eps = {_eps_label(su)}" if su is not None
                            else "topic accuracy drops by more than 5 points at every epsilon")
                         + ".")
    ref = [r for r in rows if r.get("text", "bag") not in MAIN_TEXTS]
    if ref:
        lines += ["", "## Reference rows (unmodified snippet in its original word order)", "",
                  "| text | model | correct | accuracy [95% CI] |", "|---|---|---|---|"]
        for r in ref:
            lines.append(f"| {r['text']} | {r['model']} | {r['correct']}/{r['total']} | "
                         f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] |")
    lines += ["", "## Run time", ""]
    load = getattr(res, "load", {}) or {}
    if load:
        lines += [(f"1-minute load average: {load.get('start', float('nan')):.1f} at the start, "
                   f"{load.get('end', float('nan')):.1f} at the end ({os.cpu_count()} cores)."), ""]
    lines += ["| stage | seconds |", "|---|---|"]
    for k, v in res.timings.items():
        lines.append(f"| {k} | {v:.1f} |")
    lines += ["", ("Plots: the PNG files of this folder (attack accuracy, utility and the privacy-utility frontier "
                   "against epsilon). Rows: `results.json`. Settings: `settings.json`."), ""]
    return "\n".join(lines)


def load_result(out_dir: str | os.PathLike[str]) -> ExperimentResult:
    """Read a report folder back (``results.json`` + ``settings.json``) to render it again.

    The rendering of :func:`render_markdown` and the plots depend only on these two
    files, so a report can be redrawn without repeating the run.
    """
    from .experiment import ExperimentConfig, MechanismSpec

    folder = Path(out_dir)
    rows = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    conf = dict(settings["config"])
    conf["mechanisms"] = [MechanismSpec(**m) for m in conf.get("mechanisms", [])]
    return ExperimentResult(
        rows=rows, config=ExperimentConfig(**conf), construction=settings["construction"],
        bag_size=settings["bag_size"], timings=settings["timings_s"], n_authors=settings["n_authors"],
        n_topics=settings["n_topics"], mechanisms=settings.get("mechanisms", {}),
        load=settings.get("load_average", {}),
    )


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
        "load_average": getattr(res, "load", {}),
        "mechanisms": getattr(res, "mechanisms", {}),
        "frontier": frontiers(res.rows),
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
