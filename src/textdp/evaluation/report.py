"""The report folder of ``textdp evaluate``: report.md, results.json, settings.json, PNG plots.

Every file is written to a temporary file in the report folder and moved into
place with :func:`os.replace`, so a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from ..io import atomic_writer, refuse_special_output
from .config import ATTACKERS, UTILITY_MODELS
from .datasets import Construction
from .experiment import ExperimentResult
from .scoring import Row

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


def _main(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.get("text", "bag") in MAIN_TEXTS]


def mechanism_labels(rows: Sequence[Row]) -> list[str | None]:
    """The mechanism labels of the main rows, in order (``[None]`` for rows without a ``mechanism`` key)."""
    labels = [m for m in dict.fromkeys(r.get("mechanism") for r in _main(rows)) if m is not None]
    return list(labels) or [None]


class EpsilonPoint(TypedDict):
    """One epsilon of a :class:`Frontier`: the strongest attacker and the utility drops there."""

    epsilon: float
    max_ratio: float | None
    strongest: str | None
    strongest_accuracy: float | None
    utility: dict[str, float]
    drops: dict[str, float]
    private: bool | None
    useful: bool | None
    meets: bool


class AtPrivacy(TypedDict):
    """At the largest epsilon meeting the privacy side: the first utility model's accuracy and drop."""

    epsilon: float
    utility: float | None
    drop: float | None
    max_ratio: float | None


class AtUtility(TypedDict):
    """At the smallest epsilon meeting the utility side: the strongest attacker."""

    epsilon: float
    max_ratio: float | None
    strongest: str | None
    drop: float | None


class Closest(TypedDict, total=False):
    """How close a mechanism comes to the target from either side."""

    at_privacy: AtPrivacy
    at_utility: AtUtility


class Frontier(TypedDict):
    """What :func:`frontier` returns (also ``settings.json``'s ``frontier``)."""

    mechanism: str | None
    per_epsilon: list[EpsilonPoint]
    met: list[float]
    status: str
    largest_private_epsilon: float | None
    smallest_useful_epsilon: float | None
    primary_utility: str | None
    baseline: dict[str, float]
    closest: Closest
    max_ratio: float
    max_drop: float


def _point(mine: list[Row], e: float, base: dict[str, float], primary: str | None, max_ratio: float,
           max_drop: float) -> EpsilonPoint:
    att = [(r["accuracy"] / r["chance"], r["model"], r["accuracy"]) for r in mine
           if r["epsilon"] == e and r["kind"] == "attack"]
    ratio, worst, worst_acc = max(att) if att else (None, None, None)
    util = {r["model"]: r["accuracy"] for r in mine if r["epsilon"] == e and r["kind"] == "utility"}
    drops = {m: base[m] - a for m, a in util.items() if m in base}
    private = None if ratio is None else bool(ratio <= max_ratio)
    useful = None if primary is None or primary not in drops else bool(drops[primary] <= max_drop)
    return EpsilonPoint(epsilon=e, max_ratio=ratio, strongest=worst, strongest_accuracy=worst_acc, utility=util,
                        drops=drops, private=private, useful=useful, meets=bool(private and useful))


def _closest(per: list[EpsilonPoint], primary: str | None) -> Closest:
    """The gap: the topic drop at the largest private epsilon, the strongest attacker at the smallest useful one."""
    private_eps = [p["epsilon"] for p in per if p["private"]]
    useful_eps = [p["epsilon"] for p in per if p["useful"]]
    closest = Closest()
    if private_eps and primary is not None:
        p = next(q for q in per if q["epsilon"] == max(private_eps))
        closest["at_privacy"] = AtPrivacy(epsilon=p["epsilon"], utility=p["utility"].get(primary),
                                          drop=p["drops"].get(primary), max_ratio=p["max_ratio"])
    if useful_eps:
        p = next(q for q in per if q["epsilon"] == min(useful_eps))
        closest["at_utility"] = AtUtility(epsilon=p["epsilon"], max_ratio=p["max_ratio"], strongest=p["strongest"],
                                          drop=p["drops"].get(primary) if primary else None)
    return closest


def frontier(rows: Sequence[Row], *, mechanism: object = _ALL, max_ratio: float = 2.0,
             max_drop: float = 0.05) -> Frontier:
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
    label = None if mechanism is None else str(mechanism)
    mine = [r for r in main if r.get("mechanism") == label]
    release = next((r.get("text", "bag") for r in mine), "bag")
    base = {r["model"]: r["accuracy"] for r in main if r.get("mechanism") is None and r["epsilon"] is None
            and r.get("text", "bag") == release and r["kind"] == "utility"}
    util_models = list(dict.fromkeys(r["model"] for r in mine if r["kind"] == "utility"))
    primary = next((m for m in util_models if m in base), None)
    eps_list = [e for e in dict.fromkeys(r["epsilon"] for r in mine) if e is not None]
    per = [_point(mine, e, base, primary, max_ratio, max_drop) for e in eps_list]
    met = [p["epsilon"] for p in per if p["meets"]]
    private_eps = [p["epsilon"] for p in per if p["private"]]
    useful_eps = [p["epsilon"] for p in per if p["useful"]]
    judged = bool(per) and all(p["private"] is not None and p["useful"] is not None for p in per)
    return Frontier(
        mechanism=label, per_epsilon=per, met=met,
        status="met" if met else ("not met" if judged else "not judged"),
        largest_private_epsilon=max(private_eps) if private_eps else None,
        smallest_useful_epsilon=min(useful_eps) if useful_eps else None,
        primary_utility=primary, baseline=base, closest=_closest(per, primary), max_ratio=max_ratio,
        max_drop=max_drop,
    )


def frontiers(rows: Sequence[Row], *, max_ratio: float = 2.0, max_drop: float = 0.05) -> dict[str, Frontier]:
    """:func:`frontier` of every mechanism label in ``rows`` (key ``"none"`` for label-less rows)."""
    return {str(m) if m is not None else "none": frontier(rows, mechanism=m, max_ratio=max_ratio, max_drop=max_drop)
            for m in mechanism_labels(rows)}


def _chance_cell(r: Row) -> str:
    return f"{r['chance']:.3f}"


def _construction_lines(c: Construction, n_authors: int) -> list[str]:
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


def _setup_lines(res: ExperimentResult) -> list[str]:
    cfg, c = res.config, res.construction
    return [
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
        + ("(shortest in-vocabulary snippet)" if cfg.size is None else "(set in the config)")
        + "; per-mechanism N below when it differs",
        f"- known texts given to the fixed attackers: {'truncated to N' if cfg.truncate_known else 'whole'}; "
        "noise-aware attackers: the known texts privatised by the same mechanism and epsilon"
        + (f" (first {cfg.noise_aware_known_words} in-vocabulary words)" if cfg.noise_aware_known_words else ""),
        f"- embeddings: {cfg.embeddings or 'GloVe 6B 50d'}"
        + (f", vocabulary {cfg.vocab_size}" if cfg.vocab_size else ", full vocabulary")
        + (f", restricted to the public domain vocabulary `{cfg.domain_vocab}` (words seen >= "
           f"{cfg.domain_min_count} times)" if cfg.domain_vocab else ""),
        f"- seed {cfg.seed}; 95% percentile bootstrap intervals ({cfg.bootstrap} resamples)",
        ("- unmodified row ('none') = the mechanism's input in the form it releases (a bag sorted by vocabulary "
         "row, or the words in order), so rows differ only by the noise"),
        "- chance = 1 / number of classes (a fraction, like the accuracies)",
        "",
        "Models:",
        "",
    ]


def _model_lines(res: ExperimentResult, main: list[Row]) -> list[str]:
    cfg = res.config
    lines = []
    for m, kind in dict.fromkeys((r["model"], r["kind"]) for r in main):
        desc = ATTACKERS.get(m) or UTILITY_MODELS.get(m, "")
        if "koppel" in m:
            desc += f"; {cfg.koppel_trials} trials, {cfg.koppel_features} features"
        if m in ("nn-author", "knn-topic", "noise-aware-nn-author"):
            desc += f"; distance: {'mean word vector (Euclidean)' if cfg.nn_distance == 'mean' else 'Earth Mover'}"
        lines.append(f"- `{m}` ({kind}): {desc}")
    if not res.n_topics:
        lines += ["", ("**No topic labels in this set: utility was not measured, so the target (which needs both "
                       "sides) cannot be judged; only the privacy side is reported.**")]
    return lines


def _table(head: list[str]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def _section(title: str, note: str, head: list[str]) -> list[str]:
    """A report section: its title, one paragraph and the header of its table."""
    return ["", f"## {title}", "", note, "", *_table(head)]


def _comparison_lines(res: ExperimentResult, frs: dict[str | None, Frontier]) -> list[str]:
    specs = {m.label: m for m in res.config.mechanisms}
    has_topics = bool(res.n_topics)
    head = ["mechanism", "options", "release", "N", "words/s", "target", "privacy side from eps"]
    head += ["topic there (drop)", "utility side down to eps", "strongest attacker there (x chance)"] if has_topics \
        else []
    lines = _section("Comparison", (
        "Target: every attacker (fixed and noise-aware) <= 2x chance while topic accuracy stays within 5 points of "
        "unmodified. The privacy side holds from the listed epsilon down; the utility side down to the listed "
        "epsilon; the cells after each give the other side at that epsilon."), head)
    for m, fr in frs.items():
        spec = specs.get(str(m))
        inf = res.mechanisms.get(str(m))
        wps = inf["words_per_second"] if inf else None
        target = ("met at eps " + ", ".join(_eps_label(e) for e in fr["met"])) if fr["met"] else fr["status"]
        cells = [f"`{m}`", spec.options() if spec else "", inf["release"] if inf else "",
                 str(inf["bag_size"]) if inf else "", f"{wps:,.0f}" if wps else "", target]
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
    return lines


def _conditions_lines(res: ExperimentResult, main: list[Row], frs: dict[str | None, Frontier]) -> list[str]:
    has_topics = bool(res.n_topics)
    head = ["mechanism", "eps", "unchanged", "strongest attacker", "accuracy", "x chance"]
    head += ["topic accuracy", "drop (points)", "meets", "words/s"] if has_topics else ["meets", "words/s"]
    lines = _section("Every mechanism and epsilon", (
        "Strongest attacker = the highest accuracy / chance among all attackers (fixed and noise-aware) at that "
        "condition; topic = the first utility model; drop against the unmodified row of the same release form."),
        head)
    for m, fr in frs.items():
        unch = {r["epsilon"]: r["unchanged"] for r in main if r.get("mechanism") == m}
        inf = res.mechanisms.get(str(m))
        wps = inf["words_per_second"] if inf else None
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
    return lines


def _cond_label(cm: str | None, e: float | None) -> str:
    return "none (selection only)" if e is None and cm is not None else _eps_label(e)


def _count_tables(table: list[Row]) -> list[str]:
    """Correct predictions and accuracies (with their intervals) per condition and model."""
    models = list(dict.fromkeys((r["model"], r["kind"]) for r in table))
    get = {(r.get("mechanism"), r["epsilon"], r["model"]): r for r in table}
    conds = list(dict.fromkeys((r.get("mechanism"), r["epsilon"]) for r in table))
    unchanged = {(r.get("mechanism"), r["epsilon"]): r["unchanged"] for r in table}
    first = {mm: next(r for r in table if r["model"] == mm) for mm, _ in models}
    lines = ["### Correct predictions per epsilon", ""]
    lines += _table(["eps", "words unchanged"] + [f"{mm} ({k})" for mm, k in models])
    for cm, e in conds:
        cells = ["" if (r := get.get((cm, e, mm))) is None else f"{r['correct']}/{r['total']}" for mm, _ in models]
        lines.append(f"| {_cond_label(cm, e)} | {unchanged.get((cm, e), 1.0):.3f} | " + " | ".join(cells) + " |")
    lines.append("| chance (fraction) | | " + " | ".join(_chance_cell(first[mm]) for mm, _ in models) + " |")
    lines += ["", "### Accuracy with 95% bootstrap interval", ""]
    lines += _table(["eps"] + [mm for mm, _ in models])
    for cm, e in conds:
        cells = ["" if (r := get.get((cm, e, mm))) is None
                 else f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]" for mm, _ in models]
        lines.append(f"| {_cond_label(cm, e)} | " + " | ".join(cells) + " |")
    lines.append("| chance | " + " | ".join(_chance_cell(first[mm]) for mm, _ in models) + " |")
    return lines


def _meets_cell(p: EpsilonPoint) -> str:
    if p["meets"]:
        return "yes"
    if p["private"] is None or p["useful"] is None:
        side = "privacy" if p["private"] is None else "utility"
        return f"not judged (no {side} measured)" + ("; privacy side holds" if p["private"] else "")
    return "no"


def _target_lines(fr: Frontier, mine: list[Row]) -> list[str]:
    """The target table (drop columns only for utility models with a baseline) and its one-line verdict."""
    umodels = [u for u in dict.fromkeys(r["model"] for r in mine if r["kind"] == "utility") if u in fr["baseline"]]
    lines = ["", "### Target: every attacker <= 2x chance with topic accuracy within 5 points", ""]
    lines += _table(["eps", "strongest attacker", "accuracy / chance"] + [f"{u} drop (points)" for u in umodels]
                    + ["meets"])
    for p in fr["per_epsilon"]:
        cells = [_eps_label(p["epsilon"]), str(p["strongest"]),
                 "" if p["max_ratio"] is None else f"{p['max_ratio']:.1f}"]
        cells += [f"{100 * p['drops'][u]:.1f}" if u in p["drops"] else "" for u in umodels]
        lines.append("| " + " | ".join(cells + [_meets_cell(p)]) + " |")
    lines.append("")
    if umodels:
        lines += ["Drops are unmodified minus private accuracy, in points (positive = worse).", ""]
    return lines + [_verdict(fr)]


def _verdict(fr: Frontier) -> str:
    lp, su = fr["largest_private_epsilon"], fr["smallest_useful_epsilon"]
    if fr["met"]:
        return (f"Target met at eps = {', '.join(_eps_label(e) for e in fr['met'])} "
                f"(both sides measured; utility judged on `{fr['primary_utility']}`).")
    privacy = (f"every attacker <= 2x chance from eps = {_eps_label(lp)} down." if lp is not None
               else "no epsilon of the grid brings every attacker to 2x chance.")
    if fr["status"] == "not judged":
        return ("Target not judged: " + ("no utility was measured (no topic labels)" if fr["primary_utility"] is None
                                         else "no attacker was measured") + ". Privacy side: " + privacy)
    return ("Target not met at any epsilon of the grid. Frontier: "
            + (f"attackers reach <= 2x chance only from eps = {_eps_label(lp)} down" if lp is not None
               else "no epsilon of the grid brings every attacker to 2x chance")
            + "; "
            + (f"topic accuracy stays within 5 points down to eps = {_eps_label(su)}" if su is not None
               else "topic accuracy drops by more than 5 points at every epsilon")
            + ".")


def _mechanism_lines(res: ExperimentResult, main: list[Row], m: str | None, fr: Frontier) -> list[str]:
    """The section of one mechanism: its counts, accuracies, target table and verdict."""
    mine = [r for r in main if r.get("mechanism") == m]
    release = next((r["text"] for r in mine), "bag")
    base = [r for r in main if r.get("mechanism") is None and r["epsilon"] is None and r["text"] == release]
    table = base + mine if m is not None else mine
    title = f"`{m}`" if m is not None else "the mechanism"
    spec = {s.label: s for s in res.config.mechanisms}.get(str(m))
    lines = ["", f"## {title}" + (f": {spec.name}, {spec.options()}" if spec else ""), ""]
    inf = res.mechanisms.get(str(m))
    if inf:
        lines.append(f"Release: {inf['release']}; N = {inf['bag_size']}; output vocabulary "
                     f"{inf['vocab_size']:,} words"
                     + (f"; {inf['selected_features']} topic features" if inf.get("selected_features") else "")
                     + (f"; {inf['words']:,} words privatised in {inf['seconds']:.0f} s" if inf.get("seconds")
                        else "") + ".")
        lines.append("")
    return lines + _count_tables(table) + _target_lines(fr, mine)


def _tail_lines(res: ExperimentResult) -> list[str]:
    """The reference rows, the run time and the pointer to the plots and files."""
    lines = []
    ref = [r for r in res.rows if r.get("text", "bag") not in MAIN_TEXTS]
    if ref:
        lines += ["", "## Reference rows (unmodified snippet in its original word order)", "",
                  "| text | model | correct | accuracy [95% CI] |", "|---|---|---|---|"]
        lines += [f"| {r['text']} | {r['model']} | {r['correct']}/{r['total']} | "
                  f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] |" for r in ref]
    lines += ["", "## Run time", ""]
    if res.load:
        lines += [(f"1-minute load average: {res.load.get('start', float('nan')):.1f} at the start, "
                   f"{res.load.get('end', float('nan')):.1f} at the end ({os.cpu_count()} cores)."), ""]
    lines += ["| stage | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in res.timings.items()]
    lines += ["", ("Plots: the PNG files of this folder (attack accuracy, utility and the privacy-utility frontier "
                   "against epsilon). Rows: `results.json`. Settings: `settings.json`."), ""]
    return lines


def render_markdown(res: ExperimentResult) -> str:
    """The report as Markdown: set-up, comparison, per-mechanism tables, frontier, timings."""
    main = _main(res.rows)
    frs = {m: frontier(res.rows, mechanism=m) for m in mechanism_labels(res.rows)}
    lines = _setup_lines(res) + _model_lines(res, main) + _comparison_lines(res, frs)
    lines += _conditions_lines(res, main, frs)
    for m, fr in frs.items():
        lines += _mechanism_lines(res, main, m, fr)
    return "\n".join(lines + _tail_lines(res))


def load_result(out_dir: str | os.PathLike[str]) -> ExperimentResult:
    """Read a report folder back (``results.json`` + ``settings.json``) to render it again.

    The rendering of :func:`render_markdown` and the plots depend only on these two
    files, so a report can be redrawn without repeating the run.
    """
    from .config import ExperimentConfig, MechanismSpec

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
        "load_average": res.load,
        "mechanisms": res.mechanisms,
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
                refuse_special_output(out / f.name, "the report file")  # a device or FIFO is never replaced
                os.replace(f, out / f.name)
                written.append(out / f.name)
    return written
