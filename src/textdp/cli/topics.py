"""``textdp topics`` and ``textdp topics-report``: TopicDP on a user-attributed corpus."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .. import __version__
from ..io import settings_path, write_json
from ._common import cli_errors, err_console, progress_bar

TOPICS_HELP = (
    "Release the topic-keyword matrix of an LDA model (top --topics topics x top --keywords words) "
    "with user-level differential privacy (TopicDP, Sharma 2021).\n\n"
    "What the parameters mean, in plain words: EPSILON is the privacy dial -- how much any one user's "
    "presence may change the odds of any output (at most a factor exp(epsilon)); smaller = more noise "
    "= more privacy. DELTA is the small probability (e.g. 1e-4) with which that bound may fail. GAMMA "
    "is the share of users the sampled sensitivity may fail to cover: the sensitivity is estimated by "
    "fitting the model on random pairs of databases that differ in one user, so the guarantee is "
    "'random DP' -- it holds for a random user with probability at least 1 - gamma, not for every "
    "user. Smaller gamma = more samples (285 for 0.1, 9498 for 0.02) = slower. The keyword identities "
    "come from the non-private model and are not protected; only the probabilities are."
)


class Mechanism(str, Enum):
    topicdp = "topicdp"
    topicdp_thesis = "topicdp-thesis"
    laplace = "laplace"
    mvg = "mvg"
    mvg_directional = "mvg-directional"


class Backend(str, Enum):
    sklearn = "sklearn"
    tomotopy = "tomotopy"


class Neighbours(str, Enum):
    add_remove = "add-remove"
    replace = "replace"


EPS_HELP = "Privacy dial epsilon > 0: a user's presence changes output odds by at most exp(epsilon)."
DELTA_HELP = "Probability delta in (0,1) that the epsilon bound fails (keep it below 1/number of users)."
GAMMA_HELP = "Share gamma in (0, 0.5) of random neighbouring pairs the sampled sensitivity may miss."


def _load(corpus: Path, user_field: str, text_field: str, max_docs: int, min_user_docs: int,
          max_features: int, strip_quotes: bool) -> Any:
    from ..topics import UserCorpus

    return UserCorpus.from_jsonl(corpus, user_field=user_field, text_field=text_field,
                                 max_docs_per_user=max_docs if max_docs > 0 else None,
                                 min_user_docs=min_user_docs, max_features=max_features,
                                 strip_quoted=strip_quotes)


STRIP_HELP = ("Drop quoted-reply ('>') and '... writes:' lines: they are other users' words "
              "(recommended for e-mail / Usenet such as 20newsgroups).")


def _sample(sampler: Any, gamma: float, rng: Any, quiet: bool) -> Any:
    from ..topics import sampler_parameters

    total = sampler_parameters(gamma).n_samples
    with progress_bar(disable=quiet) as bar:
        task = bar.add_task("sampling sensitivity", total=total)
        return sampler.sample(gamma, rng=rng, progress=lambda d, t: bar.update(task, completed=d, total=t))


def topics(
    corpus: Annotated[Path, typer.Argument(help="User-attributed corpus (.jsonl or .jsonl.gz).")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the release JSON here "
                                                   "(and <output>.settings.json); default: stdout.")] = None,
    user_field: Annotated[str, typer.Option(help="JSON field naming the user (the unit of privacy).")] = "author",
    text_field: Annotated[str, typer.Option(help="JSON field with the document text.")] = "text",
    n_topics: Annotated[int, typer.Option("--topics", "-m", help="Topics m to release (top by prevalence).")] = 10,
    n_keywords: Annotated[int, typer.Option("--keywords", "-n", help="Keywords n per topic.")] = 10,
    model_topics: Annotated[int, typer.Option(help="Topics K fitted (0 = max(--topics, 10)).")] = 0,
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help=EPS_HELP)] = 3.0,
    delta: Annotated[float, typer.Option(help=DELTA_HELP)] = 1e-4,
    gamma: Annotated[float, typer.Option(help=GAMMA_HELP)] = 0.1,
    mechanism: Annotated[Mechanism, typer.Option(help="topicdp: Gaussian, analytic calibration (default); "
                                                 "topicdp-thesis: the thesis's budget split (reproduction); "
                                                 "laplace / mvg: the thesis's baselines.")] = Mechanism.topicdp,
    backend: Annotated[Backend, typer.Option(help="Topic model: sklearn LDA or tomotopy LDA.")] = Backend.sklearn,
    max_iter: Annotated[int, typer.Option(help="LDA passes (tomotopy: x20 Gibbs iterations).")] = 10,
    model_seed: Annotated[int, typer.Option(help="Fixed seed of the LDA initialisation (defines the function).")] = 0,
    max_docs_per_user: Annotated[int, typer.Option(help="Contribution bound: first N documents of each user "
                                                   "(0 = no bound). Part of the released function.")] = 30,
    min_user_docs: Annotated[int, typer.Option(help="Drop users with fewer documents.")] = 1,
    max_features: Annotated[int, typer.Option(help="Vocabulary size.")] = 2000,
    strip_quotes: Annotated[bool, typer.Option(help=STRIP_HELP)] = False,
    per_db_users: Annotated[int, typer.Option(help="Users per sampled database (0 = all users of the corpus).")] = 0,
    neighbours: Annotated[Neighbours, typer.Option(help="add-remove one user (default) or replace one "
                                                   "(thesis).")] = Neighbours.add_remove,
    sensitivity: Annotated[Optional[float], typer.Option(help="Use this L2 sensitivity instead of sampling "
                                                         "(you vouch for it).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Worker processes for sampling.")] = 2,
    cache_dir: Annotated[Optional[Path], typer.Option(help="Cache of sampled distances "
                                                      "(default $TEXTDP_CACHE_DIR or ~/.cache/textdp).")] = None,
    no_cache: Annotated[bool, typer.Option(help="Do not read or write the cache.")] = False,
    seed: Annotated[Optional[int], typer.Option(help="Seed for sampling and noise (default: OS entropy; "
                                                "a published seed lets anyone undo the noise).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Release a noisy topic-keyword matrix with user-level (random) differential privacy."""
    with cli_errors():
        from .._rng import make_rng
        from .._validation import check_epsilon, check_positive_int, check_probability
        from ..topics import (SensitivitySampler, default_cache_dir, extract_topic_matrix,
                              make_topic_model, release_topics)
        from ..topics.report import build_mechanism

        check_epsilon(epsilon)
        check_probability(delta, "delta")
        check_probability(gamma, "gamma")
        m = check_positive_int(n_topics, "--topics")
        n = check_positive_int(n_keywords, "--keywords")
        K = model_topics or max(m, 10)
        gen = make_rng(seed)
        data = _load(corpus, user_field, text_field, max_docs_per_user, min_user_docs, max_features, strip_quotes)
        model = make_topic_model(backend.value, n_topics=K, max_iter=max_iter, seed=model_seed)
        t0 = time.perf_counter()
        tw, prev = model.fit(data.X)
        tm = extract_topic_matrix(tw, prev, data.vocabulary, m, n)
        sens_record: dict[str, Any] | None = None
        if mechanism is Mechanism.laplace:
            sens_value = 2.0 * m
        elif sensitivity is not None:
            sens_value = float(sensitivity)
        else:
            sizes = sorted({(k, k) for k in range(2, min(K, 10) + 1)} | {(m, n)})
            sampler = SensitivitySampler(
                corpus=data, model=model, sizes=sizes, n_jobs=check_positive_int(jobs, "--jobs"),
                n_users=per_db_users or None, neighbours=neighbours.value,
                cache_dir=None if no_cache else (cache_dir or default_cache_dir()))
            sampled = _sample(sampler, gamma, gen, quiet)[(m, n)]
            sens_value = sampled.value
            sens_record = sampled.to_dict()
        mech = build_mechanism(mechanism.value, epsilon=epsilon, delta=delta, gamma=gamma,
                               sensitivity=sens_value, m=m)
        rel = release_topics(tm, mech, rng=gen)
        record: dict[str, Any] = {**rel.to_dict(), "topics": m, "keywords_per_topic": n,
                                  "sensitivity_sampling": sens_record}
        if sens_record is None and sensitivity is not None and mechanism is not Mechanism.laplace:
            record["guarantee"] += " The sensitivity was supplied by the user, not sampled."
        settings = {
            "textdp_version": __version__, "command": "topics", "corpus": str(corpus),
            "user_field": user_field, "text_field": text_field, "corpus_settings": data.settings,
            "model": model.settings(), "mechanism": mechanism.value, "epsilon": epsilon, "delta": delta,
            "gamma": gamma, "topics": m, "keywords": n, "per_db_users": per_db_users or data.n_users,
            "neighbours": neighbours.value, "seed": seed,
            "seed_note": None if seed is not None else "fresh OS entropy (not recorded)",
            "seconds": round(time.perf_counter() - t0, 2),
        }
        if output is None:
            import json

            typer.echo(json.dumps(record, indent=2))
        else:
            write_json(output, record)
            write_json(settings_path(output), settings)
            err_console.print(f"wrote {output} ({rel.mechanism}, sensitivity {rel.sensitivity:.4g})",
                              highlight=False)


def topics_report(
    corpus: Annotated[Path, typer.Argument(help="User-attributed corpus (.jsonl or .jsonl.gz).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Report folder (figures, results.json, "
                                         "report.md).")] = Path("reports/topics"),
    name: Annotated[Optional[str], typer.Option(help="Corpus name in titles (default: file stem).")] = None,
    user_field: Annotated[str, typer.Option(help="JSON field naming the user.")] = "author",
    text_field: Annotated[str, typer.Option(help="JSON field with the document text.")] = "text",
    delta: Annotated[float, typer.Option(help=DELTA_HELP)] = 1e-4,
    gamma: Annotated[float, typer.Option(help="gamma of the epsilon and size sweeps. " + GAMMA_HELP)] = 0.1,
    epsilon: Annotated[float, typer.Option(help="epsilon of the gamma sweep and bar charts. " + EPS_HELP)] = 3.0,
    repeats: Annotated[int, typer.Option(help="Noise draws averaged per point.")] = 20,
    max_samples: Annotated[int, typer.Option(help="Largest sensitivity sample to draw; gammas needing more "
                                             "are reported as skipped (gamma=0.02 needs 9498).")] = 700,
    backend: Annotated[Backend, typer.Option(help="Topic model backend.")] = Backend.sklearn,
    max_iter: Annotated[int, typer.Option(help="LDA passes.")] = 10,
    max_docs_per_user: Annotated[int, typer.Option(help="Contribution bound per user (0 = none).")] = 30,
    min_user_docs: Annotated[int, typer.Option(help="Drop users with fewer documents.")] = 1,
    max_features: Annotated[int, typer.Option(help="Vocabulary size.")] = 2000,
    strip_quotes: Annotated[bool, typer.Option(help=STRIP_HELP)] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Worker processes.")] = 2,
    cache_dir: Annotated[Optional[Path], typer.Option(help="Cache of sampled distances.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed (default: OS entropy).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Sweep epsilon in [1, 10], gamma in [0.02, 0.22] and m = n in [2, 10] for TopicDP, MVG and
    Laplace, and draw the thesis's figures with a report.md."""
    with cli_errors():
        from .._validation import check_positive_int
        from ..topics import default_cache_dir, make_topic_model
        from ..topics.report import ReportConfig, run_report

        data = _load(corpus, user_field, text_field, max_docs_per_user, min_user_docs, max_features, strip_quotes)
        model = make_topic_model(backend.value, n_topics=10, max_iter=max_iter, seed=0)
        cfg = ReportConfig(delta=delta, gamma=gamma, epsilon=epsilon,
                           repeats=check_positive_int(repeats, "--repeats"),
                           max_samples=check_positive_int(max_samples, "--max-samples"))
        label = name or corpus.name.split(".")[0]
        with progress_bar(disable=quiet) as bar:
            task = bar.add_task("sampling sensitivity", total=None)
            res = run_report(data, model, output, name=label, config=cfg,
                             n_jobs=check_positive_int(jobs, "--jobs"),
                             cache_dir=cache_dir or default_cache_dir(), rng=seed,
                             progress=lambda d, t: bar.update(task, completed=d, total=t),
                             log=lambda s: err_console.print(s, highlight=False))
        write_json(output / "report.settings.json", {
            "textdp_version": __version__, "command": "topics-report", "corpus": str(corpus),
            "user_field": user_field, "corpus_settings": data.settings, "model": model.settings(),
            "delta": delta, "gamma": gamma, "epsilon": epsilon, "repeats": repeats,
            "max_samples": max_samples, "seed": seed, "sampling_seconds": res["sampling_seconds"]})
        err_console.print(f"wrote {output / 'report.md'}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``topics`` and ``topics-report`` to ``app``."""
    app.command("topics", help=TOPICS_HELP)(topics)
    app.command("topics-report")(topics_report)


__all__ = ["register"]
