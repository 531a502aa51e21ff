"""The thesis's experiments: error vs eps, vs gamma, vs matrix size, Kendall tau,
and keyword bar charts, for TopicDP and its baselines, with a ``report.md``.

Every point averages ``repeats`` independent noise draws on the *same* true
matrix (the non-private LDA fit of the corpus). The figures and the main
metrics (``l1``, ``row_euclidean``, ``rmse``, ``kendall_tau``) compare the raw
noisy matrix with the true one, as the thesis does (that is what separates the
mechanisms); the same metrics on the released, clipped and row-renormalised
matrix are kept as ``post_*`` (post-processing caps every error, so once the
noise dwarfs the probabilities all mechanisms look alike there).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TypedDict

import numpy as np

from .._rng import spawn
from ..backend import Backend
from ..errors import ParameterError, require
from ..io import atomic_writer, write_json
from ..mechanisms.registry import mechanism_class, names
from ..progress import ProgressCallback
from .family import TopicsMechanism, needs_sensitivity, takes_corpus, topics_mechanism
from .metrics import all_metrics
from .models import TopicModel, UserCorpus, extract_topic_matrix
from .release import postprocess
from .sensitivity import SensitivitySampler, sampler_parameters

__all__ = ["ReportConfig", "run_report"]
METRIC_LABELS = {"l1": "L1 distance", "row_euclidean": "per-row Euclidean (thesis 'L1')",
                 "rmse": "RMSE", "kendall_tau": "Kendall tau distance"}


def _matrix_mechanisms() -> tuple[str, ...]:
    return tuple(n for n in names("topics") if not takes_corpus(n))


@dataclass(frozen=True)
class ReportConfig:
    """Grids of the sweep (defaults: the thesis's)."""

    epsilons: tuple[float, ...] = tuple(float(x) for x in np.arange(1.0, 10.01, 0.5))
    gammas: tuple[float, ...] = (0.02, 0.07, 0.12, 0.17, 0.22)
    sizes: tuple[int, ...] = tuple(range(2, 11))
    size_epsilons: tuple[float, ...] = (3.0, 5.0)
    delta: float = 1e-4
    gamma: float = 0.1
    epsilon: float = 3.0
    repeats: int = 20
    max_samples: int = 700
    #: the topic-matrix mechanisms (those that noise a fitted model's matrix); the corpus-statistic ones
    #: (``takes_corpus``: noisy-cooccurrence, spectral-lda) release no matrix of the model this report compares
    mechanisms: tuple[str, ...] = field(default_factory=_matrix_mechanisms)
    bar_topics: tuple[int, ...] = (2, 4, 5, 9)
    extra: dict[str, object] = field(default_factory=dict)


#: One point of a sweep: its coordinates (``epsilon``, ``gamma``, ``size``, ``sensitivity``) and, under
#: each mechanism's name, its mean metrics.
SweepPoint = dict[str, float | dict[str, float]]


class ReportResults(TypedDict):
    """``results.json`` of :func:`run_report` (an experiment on the corpus, never a release)."""

    not_a_release: str
    corpus: str
    corpus_settings: dict[str, object]
    n_docs: int
    model: dict[str, object]
    n_users: int
    per_db_users: int
    neighbours: str
    delta: float
    gamma: float
    epsilon: float
    repeats: int
    fit_seconds: float
    sampling_seconds: float
    sampling_cache_hit: bool
    pool_samples: int
    skipped_gammas: dict[str, int]
    sensitivity: dict[str, dict[str, float]]
    sample_quantiles_10x10: dict[float, float]
    vs_epsilon: list[SweepPoint]
    vs_gamma: list[SweepPoint]
    vs_size: dict[str, list[SweepPoint]]
    keywords: list[list[str]]
    true_matrix: list[list[float]]
    bars: dict[str, list[list[float]]]
    mechanisms: list[str]


def _coordinate(point: SweepPoint, key: str) -> float:
    value = point[key]
    if isinstance(value, dict):
        raise TypeError(f"{key!r} is a mechanism of the sweep, not a coordinate")
    return value


def _score(point: SweepPoint, mechanism: str, metric: str) -> float:
    value = point[mechanism]
    if not isinstance(value, dict):
        raise TypeError(f"{mechanism!r} is a coordinate of the sweep, not a mechanism")
    return value[metric]


def _label(name: str) -> str:
    """The figure label of a registered topics mechanism (its class's ``label``)."""
    return str(getattr(mechanism_class(name), "label", name)) if name in names("topics") else name


def _mechanism(name: str, *, epsilon: float, delta: float, gamma: float, sensitivity: float) -> TopicsMechanism:
    """The registered mechanism ``name``, fitted, calibrated to ``sensitivity`` where it takes one."""
    params: dict[str, object] = {"epsilon": epsilon, "delta": delta}
    if needs_sensitivity(name):
        params.update(sensitivity=sensitivity, gamma=gamma)
    return topics_mechanism(name, **params).fit()


def _evaluate(true: np.ndarray, mech: TopicsMechanism, repeats: int, gen: np.random.Generator) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    draws = mech.noise((int(true.shape[0]), int(true.shape[1]))).randomize(np.stack([true] * repeats), seed=gen)
    for raw in draws:
        out = all_metrics(true, raw)
        out.update({f"post_{k}": v for k, v in all_metrics(true, postprocess(raw)).items()})
        for k, v in out.items():
            acc.setdefault(k, []).append(v)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def run_report(corpus: UserCorpus, model: TopicModel, out_dir: str | Path, *, name: str = "corpus",
               config: ReportConfig | None = None, backend: Backend | None = None,
               cache_dir: str | Path | None = None, seed: int | None = None,
               progress: ProgressCallback | None = None,
               log: Callable[[str], None] | None = None) -> ReportResults:
    """Run the sweeps, write ``results.json``, the figures and ``report.md`` to ``out_dir``.

    This is an *experiment* on a corpus, not a release: ``results.json`` holds the
    non-private true matrix, the sampled sensitivities, user counts and timings.
    Never publish it for a private corpus. ``seed`` seeds the sensitivity sampler
    and the noise draws (separate streams, ``textdp._rng.spawn``).
    """
    cfg = config or ReportConfig()
    sampler_gen, gen = spawn(seed, 2)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda s: None)
    K = max(cfg.sizes)
    t0 = time.perf_counter()
    tw, prev = model.fit(corpus.X)
    fit_seconds = time.perf_counter() - t0
    true = {k: extract_topic_matrix(tw, prev, corpus.vocabulary, k, k) for k in cfg.sizes}

    sampler = SensitivitySampler(corpus=corpus, model=model, sizes=[(k, k) for k in cfg.sizes],
                                 backend=backend, cache_dir=cache_dir)
    needed = {g: sampler_parameters(g) for g in sorted({*cfg.gammas, cfg.gamma})}
    feasible = {g: p for g, p in needed.items() if p.n_samples <= cfg.max_samples}
    skipped = {g: p.n_samples for g, p in needed.items() if p.n_samples > cfg.max_samples}
    if cfg.gamma not in feasible:
        raise ParameterError(f"gamma={cfg.gamma} needs {needed[cfg.gamma].n_samples} samples > max_samples")
    pool = max(p.n_samples for p in feasible.values())
    say(f"sampling sensitivity: {pool} neighbouring pairs (gammas {sorted(feasible)}; skipped {skipped})")
    t1 = time.perf_counter()
    samples, hit, _ = sampler.draw(pool, seed=sampler_gen, progress=progress)
    sample_seconds = time.perf_counter() - t1
    sens: dict[float, dict[int, float]] = {}
    for g, p in feasible.items():
        sub = np.sort(samples[: p.n_samples], axis=0)
        sens[g] = {k: float(sub[p.order_statistic - 1, s]) for s, k in enumerate(cfg.sizes)}

    def point(eps: float, g: float, k: int) -> dict[str, dict[str, float]]:
        res = {}
        for mname in cfg.mechanisms:
            mech = _mechanism(mname, epsilon=eps, delta=cfg.delta, gamma=g, sensitivity=sens[g][k])
            res[mname] = _evaluate(true[k].matrix, mech, cfg.repeats, gen)
        return res

    say("sweeping epsilon, gamma and size")
    vs_eps: list[SweepPoint] = [{"epsilon": e, **point(e, cfg.gamma, K)} for e in cfg.epsilons]
    vs_gamma: list[SweepPoint] = [{"gamma": g, "sensitivity": sens[g][K], **point(cfg.epsilon, g, K)} for g in sorted(feasible)]
    vs_size: dict[str, list[SweepPoint]] = {str(e): [{"size": k, "sensitivity": sens[cfg.gamma][k], **point(e, cfg.gamma, k)}
                        for k in cfg.sizes] for e in cfg.size_epsilons}
    # keyword bar charts at the default point
    bars = {}
    for mname in cfg.mechanisms:
        mech = _mechanism(mname, epsilon=cfg.epsilon, delta=cfg.delta, gamma=cfg.gamma, sensitivity=sens[cfg.gamma][K])
        bars[mname] = postprocess(mech.noise(true[K].shape).randomize(true[K].matrix, seed=gen)).tolist()
    results: ReportResults = {
        "not_a_release": "experiment on the corpus: holds the true matrix and private statistics; never publish",
        "corpus": name, "corpus_settings": corpus.settings, "n_docs": corpus.n_docs, "model": model.settings(),
        "n_users": corpus.n_users, "per_db_users": sampler.n_users, "neighbours": sampler.neighbours,
        "delta": cfg.delta, "gamma": cfg.gamma, "epsilon": cfg.epsilon, "repeats": cfg.repeats,
        "fit_seconds": fit_seconds, "sampling_seconds": sample_seconds, "sampling_cache_hit": hit,
        "pool_samples": pool, "skipped_gammas": {str(g): n for g, n in skipped.items()},
        "sensitivity": {str(g): {str(k): v for k, v in d.items()} for g, d in sens.items()},
        "sample_quantiles_10x10": {q: float(np.quantile(samples[:, -1], q)) for q in (0.5, 0.9, 1.0)},
        "vs_epsilon": vs_eps, "vs_gamma": vs_gamma, "vs_size": vs_size,
        "keywords": [list(k) for k in true[K].keywords], "true_matrix": true[K].matrix.tolist(),
        "bars": bars, "mechanisms": list(cfg.mechanisms),
    }
    write_json(out / "results.json", results)
    figs = _figures(results, out, cfg)
    _markdown(results, out, figs, cfg)
    return results


def _figures(res: ReportResults, out: Path, cfg: ReportConfig) -> list[str]:
    matplotlib: ModuleType = require("matplotlib", "plot")
    matplotlib.use("Agg")
    plt: ModuleType = require("matplotlib.pyplot", "plot")
    mechs = res["mechanisms"]
    name = res["corpus"]
    files: list[str] = []

    def grid(rows: list[SweepPoint], xkey: str, title: str, fname: str, xlabel: str) -> None:
        fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
        xs = [_coordinate(r, xkey) for r in rows]
        for ax, metric in zip(axes, METRIC_LABELS):
            for mname in mechs:
                ax.plot(xs, [_score(r, mname, metric) for r in rows], marker="o", ms=3, label=_label(mname))
            ax.set_xlabel(xlabel)
            ax.set_title(METRIC_LABELS[metric])
            if metric != "kendall_tau":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{name}: {title}")
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        files.append(fname)

    grid(res["vs_epsilon"], "epsilon",
         f"error vs epsilon (gamma={cfg.gamma}, delta={cfg.delta:g}, {max(cfg.sizes)}x{max(cfg.sizes)})", "fig_vs_epsilon.png", "epsilon")
    grid(res["vs_gamma"], "gamma",
         f"error vs gamma (epsilon={cfg.epsilon:g}, delta={cfg.delta:g}, {max(cfg.sizes)}x{max(cfg.sizes)})", "fig_vs_gamma.png", "gamma")
    for e, rows in res["vs_size"].items():
        grid(rows, "size", f"error vs matrix size m=n (epsilon={e}, gamma={cfg.gamma})",
             f"fig_vs_size_eps{float(e):g}.png", "m = n")
    # keyword bar charts
    kws = res["keywords"]
    true = np.asarray(res["true_matrix"])
    topics = [t for t in cfg.bar_topics if 1 <= t <= true.shape[0]]
    fig, axes = plt.subplots(1, len(topics), figsize=(5 * len(topics), 4.2))
    axes = np.atleast_1d(axes)
    width = 0.8 / (1 + len(mechs))
    for ax, t in zip(axes, topics):
        x = np.arange(true.shape[1])
        ax.bar(x, true[t - 1], width, label="non-private")
        for j, mname in enumerate(mechs):
            ax.bar(x + (j + 1) * width, np.asarray(res["bars"][mname])[t - 1], width,
                   label=_label(mname))
        ax.set_xticks(x + 0.4 - width / 2)
        ax.set_xticklabels(kws[t - 1], rotation=60, fontsize=8)
        ax.set_title(f"topic {t}")
        top = 3.0 * float(max(true[t - 1].max(), np.max(np.asarray(res["bars"][mechs[0]])[t - 1])))
        ax.set_ylim(0, min(1.0, max(top, 1e-3)))
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{name}: keyword probabilities before and after noise (epsilon={cfg.epsilon:g}, gamma={cfg.gamma}; "
                 "released = clipped and renormalised; bars taller than the axis are cut)")
    fig.tight_layout()
    fig.savefig(out / "fig_keywords.png", dpi=110)
    plt.close(fig)
    files.append("fig_keywords.png")
    return files


def _table(rows: Sequence[SweepPoint], key: str, mechs: Sequence[str], metric: str) -> str:
    head = f"| {key} | " + " | ".join(mechs) + " |\n|---|" + "---|" * len(mechs) + "\n"
    body = ""
    for r in rows:
        body += f"| {_coordinate(r, key):g} | " + " | ".join(f"{_score(r, m, metric):.4g}" for m in mechs) + " |\n"
    return head + body


def _markdown(res: ReportResults, out: Path, figs: list[str], cfg: ReportConfig) -> None:
    mechs = res["mechanisms"]
    sens = res["sensitivity"]
    K = max(cfg.sizes)
    lines = [f"# TopicDP report: {res['corpus']}", "",
             f"Corpus settings: `{json.dumps(res['corpus_settings'])}`; model `{json.dumps(res['model'])}`.",
             (f"Users: {res['n_users']}; sampled databases have {res['per_db_users']} users "
              f"(uniform with replacement, {res['neighbours']} neighbours). delta = {cfg.delta:g}; "
              f"{cfg.repeats} noise draws per point; metrics compare the raw noisy matrix with the true "
              "one (as the thesis); `post_*` tables use the clipped/renormalised release."), "",
             "## Sampled L2 sensitivity (order statistic = sample maximum)", "",
             "| gamma | samples | " + " | ".join(f"{k}x{k}" for k in cfg.sizes) + " |",
             "|---|---|" + "---|" * len(cfg.sizes)]
    for g, d in sorted(sens.items(), key=lambda x: float(x[0])):
        lines.append(f"| {float(g):g} | {sampler_parameters(float(g)).n_samples} | "
                     + " | ".join(f"{d[str(k)]:.4g}" for k in cfg.sizes) + " |")
    if res["skipped_gammas"]:
        lines += ["", "Not computed (sample size above `max_samples`): "
                  + ", ".join(f"gamma={g} needs {n} samples" for g, n in res["skipped_gammas"].items()) + "."]
    lines += ["", (f"Sampling took {res['sampling_seconds']:.0f} s (cache hit: {res['sampling_cache_hit']}); "
                   f"one fit on the real corpus {res['fit_seconds']:.1f} s."), ""]
    for metric in ("l1", "rmse", "kendall_tau", "row_euclidean", "post_l1", "post_rmse", "post_kendall_tau"):
        label = METRIC_LABELS.get(metric) or METRIC_LABELS[metric[5:]] + " of the released (clipped) matrix"
        lines += [f"## {label} vs epsilon (gamma={cfg.gamma}, {K}x{K})", "",
                  _table(res["vs_epsilon"], "epsilon", mechs, metric)]
    lines += [f"## L1 / RMSE vs gamma (epsilon={cfg.epsilon:g})", "",
              _table(res["vs_gamma"], "gamma", mechs, "l1"), _table(res["vs_gamma"], "gamma", mechs, "rmse")]
    for e, rows in res["vs_size"].items():
        lines += [f"## L1 / Kendall vs size (epsilon={e})", "", _table(rows, "size", mechs, "l1"),
                  _table(rows, "size", mechs, "kendall_tau")]
    # ranking summary
    wins = dict.fromkeys(mechs, 0)
    total = 0
    for r in res["vs_epsilon"]:
        for metric in METRIC_LABELS:
            best = min(mechs, key=lambda m: _score(r, m, metric))
            wins[best] += 1
            total += 1
    lines += ["## Ranking", "", "Best mechanism per (epsilon, metric) on the epsilon sweep: "
              + ", ".join(f"{m}: {wins[m]}/{total}" for m in mechs) + ".", ""]
    lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figs]
    with atomic_writer(out / "report.md") as fh:
        fh.write("\n".join(lines) + "\n")
