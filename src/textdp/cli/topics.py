"""``textdp topics`` and ``textdp topics-report``: TopicDP on a user-attributed corpus."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .. import __version__
from .._validation import check_budget
from ..engines import ENGINES
from ..io import check_output_paths, is_stdout, same_file, settings_path, write_json
from ..mechanisms.registry import spoken_list
from ..topics.names import KEYWORD_SOURCES, MAX_MODEL_TOPICS, MECHANISMS, NEIGHBOURS, SENSITIVITIES, TOPIC_MODELS
from ._choices import choice
from ._common import (
    ENGINE_PANEL,
    BudgetOption,
    DeltaBudgetOption,
    ForceOption,
    Interrupted,
    InterruptedRun,
    LedgerOption,
    NewLedgerOption,
    QuietOption,
    ReportForceOption,
    SchedulerOption,
    SeedOption,
    WorkersOption,
    check_report_folder,
    cli_errors,
    parse_param_options,
    print_info,
    print_warning,
    progress_bar,
)

if TYPE_CHECKING:
    import numpy as np

    from ..backend import Backend
    from ..topics import SampledSensitivity, SensitivitySampler, UserCorpus
    from ..topics.models import TopicMatrix, TopicModel
    from ..topics.noise import GridNoise
    from ..topics.vocabulary import PublicVocabulary

TOPICS_HELP = (
    "Release topics (top --topics topics x --keywords words) of a user-attributed corpus with user-level "
    "differential privacy.\n\n"
    "What the parameters mean, in plain words: EPSILON is the privacy dial -- how much any one user's "
    "presence may change the odds of any output (at most a factor exp(epsilon)); smaller = more noise "
    "= more privacy. DELTA is the small probability (e.g. 1e-5) with which that bound may fail.\n\n"
    "Default mechanism (noisy-cooccurrence): each user's word co-occurrence distribution over the first 500 words "
    "of the public vocabulary, clipped to a public norm, summed, Gaussian noise for (epsilon, delta), then topics "
    "fitted to the noisy matrix. The sensitivity is the public clip: (epsilon, delta)-DP for every user, no "
    "sampling, one pass, and every part of the release (topics, order, keywords, values) is covered "
    "(docs/topics-results.md measures it on 20 Newsgroups and Enron). spectral-lda is the spectral LDA of "
    "DeCarolis et al. 2020 on noisy moments.\n\n"
    "--mechanism topicdp (and its variants) is the thesis's TopicDP (Sharma 2021): fit an LDA model, add noise "
    "calibrated to how much one user moves the fit. GAMMA is then the share of users the sampled sensitivity may "
    "fail to cover: the guarantee is 'random DP' -- it holds for a random user with probability at least "
    "1 - gamma. Smaller gamma = more samples (285 for 0.1, 9498 for 0.02) = slower; --sensitivity worst-case uses "
    "the global bound sqrt(2m) instead: plain DP, much more noise. Its noise goes on each released topic's "
    "probability of every word of the public vocabulary (--vocabulary, default GloVe's 10,000 most frequent words) "
    "and each topic's keywords are its largest NOISY values; --keywords-from model is the thesis's release "
    "instead: keywords chosen by the non-private model, NOT covered.\n\n"
    "Cost (topicdp): the default sampled sensitivity fits the model on 285 pairs of databases (570 fits, gamma "
    "0.1); the command says how long that will take before it starts and prints progress lines when its output is "
    "not a terminal.\n\n"
    "The release (-o) holds only the guarantee, public parameters, keywords and the noisy values (exact "
    "multiples of the public grid 2^-GRID_BITS). Everything that describes the private corpus (user and "
    "document counts, the sampled sensitivity and the noise scale, timings, paths) goes to the private "
    "report (--private-report), which must never be published."
)



EPS_HELP = "Privacy dial epsilon > 0: a user's presence changes output odds by at most exp(epsilon)."
DELTA_HELP = "Probability delta in (0,1) that the epsilon bound fails (keep it below 1/number of users)."
GAMMA_HELP = "Share gamma in (0, 0.5) of random neighbouring pairs the sampled sensitivity may miss."
MECHANISM_HELP = ("A registered topics mechanism: " + spoken_list(MECHANISMS) + " (default noisy-cooccurrence: "
                  "noise on per-user clipped word co-occurrences, then NMF topics, all covered; each states its "
                  "guarantee in the release's settings file; README's mechanism table lists them).")
#: Default ``--mechanism``: noise on a clipped statistic of the corpus (issue 42: useful at epsilon 3, all covered).
DEFAULT_MECHANISM = "noisy-cooccurrence"
ENGINE_HELP = ("Where the sensitivity pairs are fitted: local (this process) or dask (a local cluster of --workers "
               "processes, or the cluster at --scheduler). The same --seed gives the same result on any engine.")
VOCABULARY_HELP = ("Columns of the model: 'glove:K' (GloVe's K most frequent words, public), FILE (a public word "
                   "list, one per line) or 'corpus' (built from the corpus by --max-features and rebuilt for every "
                   "sampled database; only with --keywords-from model, since its words are private).")
#: Default ``--vocabulary``: public, so that the keywords read off the noisy values are covered.
DEFAULT_VOCABULARY = "glove:10000"
KEYWORDS_FROM_HELP = (
    "noisy (default): noise on every word of the public vocabulary in each topic, keywords = the largest noisy "
    "values; every part of the release is covered. model: the thesis's release, keywords chosen by the "
    "non-private model and NOT covered: LiRA on Enron (64 shadows, K = 5, epsilon 1, worst-case sensitivity) "
    "reaches 11-13% TPR at 0.1% FPR with 500 keywords per topic (500 words) and 33-38% with 1000 of 2000, against "
    "the 0.27% an (epsilon 1)-DP release allows (docs/topics-membership.md).")
MODEL_KEYWORDS_LINE = ("note: --keywords-from model: the keyword identities (which words, which topics) are chosen by "
                       "the non-private model and are NOT covered by the guarantee; only the values are.")
SENSITIVITY_HELP = ("L2 sensitivity of the Gaussian mechanisms: 'sampled' (random DP with --gamma), 'worst-case' "
                    "(the global bound sqrt(2m): plain DP, no gamma, more noise) or a number you vouch for.")
STRIP_HELP = ("Drop quoted-reply ('>', '|') and '... writes:' lines: they are other users' words "
              "(recommended for e-mail / Usenet such as 20newsgroups).")


def _load(corpus: Path, user_field: str, text_field: str, max_docs: int, min_user_docs: int,
          max_features: int, strip_quotes: bool, vocabulary: PublicVocabulary | None = None) -> UserCorpus:
    from ..topics import UserCorpus

    return UserCorpus.from_jsonl(corpus, user_field=user_field, text_field=text_field,
                                 max_docs_per_user=max_docs if max_docs > 0 else None,
                                 min_user_docs=min_user_docs, max_features=max_features,
                                 strip_quoted=strip_quotes, vocabulary=vocabulary)


def _sensitivity_option(value: str) -> str | float:
    """``--sensitivity``: ``sampled``, ``worst-case`` or a number > 0 (one line of error otherwise)."""
    from ..errors import ParameterError

    v = value.strip()
    if v in SENSITIVITIES:
        return v
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not (x > 0 and x < float("inf")):
        raise ParameterError(f"--sensitivity {value!r}: give one of {', '.join(SENSITIVITIES)} or a number > 0")
    return x


def _check_topic_counts(m: int, model_topics: int) -> int:
    """Check --topics and --model-topics against each other and the public cap before any data is read."""
    from .._validation import check_positive_int
    from ..errors import ParameterError

    check_positive_int(model_topics, "--model-topics", minimum=0)
    K = model_topics or max(m, 10)
    if max(m, K) > MAX_MODEL_TOPICS:
        raise ParameterError(f"--topics/--model-topics at most {MAX_MODEL_TOPICS} (the limit of topics per model; "
                             f"got {max(m, K)})")
    if m > K:
        raise ParameterError(f"--topics {m} is more than --model-topics {K}: the release keeps m of the K topics")
    return K


def _engine_options(engine: str, workers: int | None, scheduler: str | None) -> tuple[str, int | None]:
    """Check the engine options early."""
    from .._validation import check_positive_int
    from ..errors import ParameterError

    if workers is not None:
        check_positive_int(workers, "--workers")
    if engine == "local" and scheduler:
        raise ParameterError("--scheduler needs --engine dask")
    return engine, workers


def _backend(engine: str, workers: int | None, scheduler: str | None) -> Backend | None:
    """The execution engine for the sampler (``None`` = in this process)."""
    if engine == "local":
        return None
    from ..engines import get_backend

    return get_backend("dask", scheduler=scheduler, workers=workers)


def _duration(seconds: float) -> str:
    """A duration in words a person can hold: ``45 s``, ``12 min``, ``2.8 h``.

    >>> _duration(44.6), _duration(700), _duration(10_080)
    ('45 s', '12 min', '2.8 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class SamplerProgress:
    """The sampler's progress: a bar on a terminal, plain lines otherwise, and time estimates.

    Before the first pair: an estimate from the release's own fit (``fit_seconds``; a pair is two
    fits, ``workers`` in parallel). After the first pairs (3, or a minute): an estimate from them. Off a
    terminal (``plain``): a line at least every ``every`` seconds and at the end. ``emit`` prints a line.
    """

    def __init__(self, total: int, emit: Callable[[str], None], *, plain: bool, fit_seconds: float = 0.0,
                 workers: int = 1, every: float = 30.0, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.emit, self.plain, self.every, self.clock = total, emit, plain, every, clock
        self.fit_seconds, self.workers = fit_seconds, max(1, workers)
        self.start: float | None = None
        self.first = 0
        self.last_line = 0.0
        self.estimated = False

    def announce(self, cached: int) -> None:
        """Say what the sampler will do and, from the release's fit, about how long it will take."""
        todo = max(self.total - cached, 0)
        what = (f"sampling the sensitivity: {todo} of {self.total} pairs of databases to fit "
                f"({2 * todo} model fits{f'; {cached} pairs from the cache' if cached else ''})")
        if todo and self.fit_seconds > 0:
            what += (f"; about {_duration(2 * todo * self.fit_seconds / self.workers)} (one fit of the corpus took "
                     f"{self.fit_seconds:.1f} s; refined after the first pairs)")
        self.emit(what + ". --sensitivity worst-case skips this (plain DP, more noise).")

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start, self.first, self.last_line = now, done, now
            return
        new, elapsed = done - self.first, now - self.start
        left = elapsed / new * (total - done) if new > 0 else float("nan")
        if not self.estimated and new > 0 and done < total and (new >= 3 or elapsed >= 60):
            self.estimated = True
            self.emit(f"sampling the sensitivity: the first {new} pairs took {_duration(elapsed)}; about "
                      f"{_duration(left)} left for the other {total - done}")
            self.last_line = now
        elif self.plain and (done >= total or now - self.last_line >= self.every):
            self.last_line = now
            tail = "" if done >= total else f", about {_duration(left)} left"
            self.emit(f"sampling the sensitivity: {done}/{total} pairs ({done / total:.0%}), "
                      f"{_duration(elapsed)} elapsed{tail}")


def _sample(sampler: SensitivitySampler, gamma: float, seed: np.random.Generator,
            quiet: bool, fit_seconds: float = 0.0) -> dict[tuple[int, int], SampledSensitivity]:
    """Run the sampler; an interrupt says truthfully what the cache keeps and that re-running resumes."""
    import sys

    from ..topics import sampler_parameters

    total = sampler_parameters(gamma).n_samples
    workers_of = getattr(sampler.backend, "n_workers", None)
    watch = SamplerProgress(total, print_info, plain=not sys.stderr.isatty(), fit_seconds=fit_seconds,
                            workers=int(workers_of()) if callable(workers_of) else 1)
    if not quiet:
        watch.announce(min(sampler.cached_samples(), total))
    try:
        with progress_bar(disable=quiet) as bar:
            task = bar.add_task("sampling sensitivity", total=total)

            def progress(d: int, t: int) -> None:
                bar.update(task, completed=d, total=t)
                if not quiet:
                    watch(d, t)

            return sampler.sample(gamma, seed=seed, progress=progress)
    except (KeyboardInterrupt, Interrupted) as exc:
        status = exc.status if isinstance(exc, Interrupted) else 130
        raise InterruptedRun(_interrupted_message(sampler, total), status) from None


def _interrupted_message(sampler: SensitivitySampler, total: int) -> str:
    """What an interrupted sensitivity sampler leaves behind (read back from its cache file)."""
    if sampler.cache_path is None:
        return ("no release was written; the sensitivity samples drawn so far are lost (--no-cache); "
                "re-running starts the sampling again")
    kept = sampler.cached_samples()
    if kept == 0:
        return (f"no release was written and no sensitivity sample was saved yet (the cache keeps them in groups "
                f"of 25, in {sampler.cache_path}); re-running starts the sampling again")
    return (f"no release was written; {min(kept, total)} of {total} sensitivity samples are saved in the cache "
            f"{sampler.cache_path}; run the same command again to resume from them")


def _check_paths(corpus: Path, output: Path | None, private_report: Path | None, force: bool) -> None:
    """Refuse outputs that are the corpus, each other, folders or existing files (unless ``force``), early."""
    from ..errors import DocumentError, ParameterError

    if str(corpus) != "-" and not corpus.exists():  # said before the public vocabulary is loaded
        raise DocumentError(f"{corpus}: no such file")
    if output is not None and (not output.name or output.is_dir()):
        raise ParameterError(f"--output {str(output)!r} is a directory; give a file name")
    if output is not None and private_report is not None:
        for what, path in (("release", output), ("release's settings file", settings_path(output))):
            if same_file(private_report, path):
                raise ParameterError(f"--private-report {private_report} is the same file as the {what} {path}; the "
                                     "private report must be a separate file that is never published")
    check_output_paths(
        [("--output", output), ("--output's settings file", None if output is None else settings_path(output)),
         ("--private-report", private_report)],
        inputs=[corpus], force=force, new_folders=False,
    )


Corpus = Annotated[Path, typer.Argument(help="User-attributed corpus (.jsonl or .jsonl.gz).")]
UserField = Annotated[str, typer.Option(help="JSON field naming the user (the unit of privacy).")]
TextField = Annotated[str, typer.Option(help="JSON field with the document text.")]
MaxDocsPerUser = Annotated[int, typer.Option(
    help="Contribution bound: first N documents of each user (0 = no bound). Part of the released function.")]
MinUserDocs = Annotated[int, typer.Option(help="Drop users with fewer documents.")]
StripQuotes = Annotated[bool, typer.Option("--strip-quotes", help=STRIP_HELP)]
Delta = Annotated[float, typer.Option(help=DELTA_HELP)]
EngineOption = Annotated[str, choice(ENGINES, rich_help_panel=ENGINE_PANEL, help=ENGINE_HELP)]
TopicModelOption = Annotated[str, choice(TOPIC_MODELS, help="Topic model: sklearn LDA or tomotopy LDA.")]

ReleaseOutput = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Write the release JSON here (and OUTPUT.settings.json); default or '-': stdout.")]
PrivateReport = Annotated[Path | None, typer.Option(
    help="Write what describes the private corpus here (user/document counts, sampled sensitivity, noise scale, "
    "timings, paths). Never publish it; it must differ from --output.")]
MechanismOption = Annotated[str, choice(MECHANISMS, help=MECHANISM_HELP)]
#: the mechanism parameters ``textdp topics`` sets with its own options, never with ``--param``
TOPICS_OPTIONS = {"epsilon": "--epsilon", "delta": "--delta", "sensitivity": "--sensitivity", "gamma": "--gamma",
                  "grid": "--grid-bits", "vocabulary_note": "--vocabulary", "keywords_from": "--keywords-from",
                  "keywords": "--keywords", "seed": "--seed"}
TopicsParamOption = Annotated[list[str] | None, typer.Option(
    metavar="KEY=VALUE", help="A parameter of the topics mechanism that has no option here, repeatable (its class's "
    "own parameters; a bad key lists those it takes).")]
Neighbours = Annotated[str, choice(NEIGHBOURS, help="add-remove one user (default) or replace one (thesis).")]
GridBits = Annotated[int, typer.Option(
    help="Released values are exact multiples of 2^-GRID_BITS (floating-point-safe noise).")]
CacheDir = Annotated[Path | None, typer.Option(
    help="Cache of sampled distances (default $TEXTDP_CACHE_DIR or ~/.cache/textdp).")]


@dataclass(frozen=True)
class _TopicsOptions:
    """What ``textdp topics`` was given (one field per option)."""

    corpus: Path
    output: Path | None
    private_report: Path | None
    user_field: str
    text_field: str
    n_topics: int
    n_keywords: int
    model_topics: int
    epsilon: float
    delta: float
    gamma: float
    mechanism: str
    topic_model: str
    max_iter: int
    model_seed: int
    max_docs_per_user: int
    min_user_docs: int
    max_features: int
    vocabulary: str
    keywords_from: str
    strip_quotes: bool
    per_db_users: int
    neighbours: str
    sensitivity: str
    grid_bits: int
    engine: str
    workers: int | None
    scheduler: str | None
    cache_dir: Path | None
    no_cache: bool
    seed: int | None
    quiet: bool
    force: bool
    ledger: Path | None = None
    budget: float | None = None
    delta_budget: float | None = None
    new_ledger: bool = False
    param: list[str] | None = None


@dataclass(frozen=True)
class _TopicsRun:
    """The checked options: the release's shape, the sensitivity choice, the engine."""

    m: int
    n: int
    K: int
    sensitivity: str | float
    grid: float
    engine: str
    workers: int | None
    output: Path | None
    topic_model: str
    params: dict[str, object]
    corpus_unit: bool = False


def topics(
    corpus: Corpus,
    output: ReleaseOutput = None,
    private_report: PrivateReport = None,
    user_field: UserField = "author",
    text_field: TextField = "text",
    n_topics: Annotated[int, typer.Option("--topics", "-m", help="Topics m to release (top by prevalence).")] = 10,
    n_keywords: Annotated[int, typer.Option("--keywords", help="Keywords n per topic.")] = 10,
    model_topics: Annotated[int, typer.Option(help="Topics K fitted (0 = max(--topics, 10)).")] = 0,
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help=EPS_HELP)] = 3.0,
    delta: Delta = 1e-4,
    gamma: Annotated[float, typer.Option(help=GAMMA_HELP)] = 0.1,
    mechanism: MechanismOption = DEFAULT_MECHANISM,
    topic_model: TopicModelOption = "sklearn",
    max_iter: Annotated[int, typer.Option(help="LDA passes (tomotopy: x20 Gibbs iterations).")] = 10,
    model_seed: Annotated[int, typer.Option(help="Fixed seed of the LDA initialisation (defines the function).")] = 0,
    max_docs_per_user: MaxDocsPerUser = 30,
    min_user_docs: MinUserDocs = 1,
    max_features: Annotated[int, typer.Option(help="Size of the corpus vocabulary (--vocabulary corpus).")] = 2000,
    vocabulary: Annotated[str, typer.Option(help=VOCABULARY_HELP)] = DEFAULT_VOCABULARY,
    keywords_from: Annotated[str, choice(KEYWORD_SOURCES, help=KEYWORDS_FROM_HELP)] = "noisy",
    strip_quotes: StripQuotes = False,
    per_db_users: Annotated[int, typer.Option(help="Users per sampled database (0 = all users of the corpus).")] = 0,
    neighbours: Neighbours = "add-remove",
    sensitivity: Annotated[str, typer.Option(help=SENSITIVITY_HELP)] = "sampled",
    grid_bits: GridBits = 20,
    engine: EngineOption = "local",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    cache_dir: CacheDir = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the cache.")] = False,
    seed: SeedOption = None,
    quiet: QuietOption = False,
    force: ForceOption = False,
    ledger: LedgerOption = None,
    budget: BudgetOption = None,
    delta_budget: DeltaBudgetOption = None,
    new_ledger: NewLedgerOption = False,
    param: TopicsParamOption = None,
) -> None:
    """Release a noisy topic-keyword matrix with user-level (random) differential privacy."""
    o = _TopicsOptions(**locals())  # the parameters, and nothing else yet
    with cli_errors():
        run = _check_topics_options(o)  # before numpy and the topic models are imported (fast one-line errors)
        from .._rng import spawn
        from ..topics import extract_topic_matrix, make_topic_model
        from ..topics.models import fit_database, topic_rows
        from ..topics.vocabulary import public_vocabulary

        public_vocab = public_vocabulary(o.vocabulary, inputs=[o.corpus])
        sampler_seed, release_seed = spawn(o.seed, 2)  # separate streams: sampling never shifts the noise
        t0 = time.perf_counter()
        data = _load(o.corpus, o.user_field, o.text_field, o.max_docs_per_user, o.min_user_docs, o.max_features,
                     o.strip_quotes, public_vocab)
        if run.corpus_unit:  # noise on a clipped statistic of the corpus, the topics fitted after it
            _release_from_corpus(o, run, data, release_seed, t0)
            return
        model = make_topic_model(run.topic_model, n_topics=run.K, max_iter=o.max_iter, seed=o.model_seed)
        t_fit = time.perf_counter()
        tw, prev, vocab = fit_database(data, model)  # the released function; the sampler measures this one
        fit_seconds = time.perf_counter() - t_fit
        noisy = o.keywords_from == "noisy"
        if noisy and run.n > len(vocab):
            from ..errors import ParameterError

            raise ParameterError(f"--keywords {run.n} is more than the {len(vocab)} words of the vocabulary; "
                                 "lower --keywords or give a larger --vocabulary")
        # covered default: whole rows over the public vocabulary, keywords read off the noisy values
        tm = topic_rows(tw, prev, vocab, run.m) if noisy else extract_topic_matrix(tw, prev, vocab, run.m, run.n)
        if not noisy:
            print_info(MODEL_KEYWORDS_LINE)
        source, sens_value, sampled_gamma, private = _sensitivity(o, run, data, model, sampler_seed, fit_seconds)
        _release_matrix(o, run, data, model, tm, noisy=noisy, source=source, sens_value=sens_value,
                        sampled_gamma=sampled_gamma, private=private, release_seed=release_seed,
                        fit_seconds=fit_seconds, t0=t0)


def _check_cache_dir(folder: Path) -> None:
    """Refuse a ``--cache-dir`` that is not private (every folder on its path checked), before any data is read."""
    from .._cache import open_private_dir

    open_private_dir(folder, what="--cache-dir", create=True).close()


def _release_matrix(o: _TopicsOptions, run: _TopicsRun, data: UserCorpus, model: TopicModel, tm: TopicMatrix, *,
                    noisy: bool, source: str, sens_value: float | str | None, sampled_gamma: float | None,
                    private: dict[str, object], release_seed: object, fit_seconds: float, t0: float) -> None:
    """The fitted matrix ``tm`` released by the registered mechanism, through the one driver (its notes printed)."""
    from ..release import release
    from ..topics.family import topics_mechanism
    from ..topics.vocabulary import vocabulary_note

    # the registered mechanism (one base for every family); its calibration gives the private sigma below
    family = topics_mechanism(o.mechanism, epsilon=o.epsilon, delta=o.delta, gamma=sampled_gamma,
                              sensitivity=sens_value, grid=run.grid, seed=release_seed,
                              vocabulary_note=vocabulary_note(data.settings, source),
                              keywords_from=o.keywords_from, keywords=run.n if noisy else None, **run.params)
    mech = family.fit().noise_for(tm.shape)
    details = None
    if o.private_report is not None:
        private.update(fit_seconds=round(fit_seconds, 3), seconds=round(time.perf_counter() - t0, 3))
        details = _private_report(o, run, data, mech, sens_value, private, tm.shape)
    # the one driver: charge --ledger, privatize, then the private report, the settings and the release (last)
    summary = release(family, [tm], run.output, ids=["topics"], fmt="json", command="topics",
                      settings=_release_settings(o, run, data.settings, model.settings(), source),
                      private_report=o.private_report, private_details=details, force=o.force,
                      inputs=[o.corpus], seeded=o.seed is not None, ledger=o.ledger, budget=check_budget(o.budget, o.delta_budget), new_ledger=o.new_ledger)
    if summary.ledger_note:
        print_warning(summary.ledger_note)
    if run.output is not None:
        g = summary.guarantee
        print_info(f"wrote {run.output} ({g.mechanism}, epsilon {g.epsilon:g})")


def _release_from_corpus(o: _TopicsOptions, run: _TopicsRun, data: UserCorpus, release_seed: object,
                         t0: float) -> None:
    """Release with a mechanism whose unit is the corpus (no model fit, no sensitivity: its clip is public)."""
    from ..release import release
    from ..topics.family import topics_mechanism
    from ..topics.vocabulary import vocabulary_note

    family = topics_mechanism(o.mechanism, epsilon=o.epsilon, delta=o.delta, topics=run.K, released_topics=run.m,
                              keywords=run.n, grid=run.grid, seed=release_seed,
                              vocabulary_note=vocabulary_note(data.settings, "global"))
    family.fit()
    if not o.quiet:
        print_info(f"{o.mechanism}: noise on a per-user clipped statistic of the corpus, then {run.K} topics "
                   "fitted to it (one pass; no sensitivity sampling)")
    details = None
    if o.private_report is not None:
        details = {"warning": "PRIVATE: describes the private corpus; never publish this file", "command": "topics",
                   "corpus": str(o.corpus), "release": None if run.output is None else str(run.output),
                   "n_users": data.n_users, "n_docs": data.n_docs,
                   "sensitivity_source": "the mechanism's public clip (deterministic)",
                   "load_seconds": round(time.perf_counter() - t0, 3)}
    settings = _release_settings(o, run, data.settings, {"fitted_by": o.mechanism, "topics": run.K}, "global")
    for key in ("neighbours", "per_db_users"):  # the sensitivity sampler's: not part of this release
        settings.pop(key, None)
    summary = release(family, [data], run.output, ids=["topics"], fmt="json", command="topics", settings=settings,
                      private_report=o.private_report, private_details=details, force=o.force, inputs=[o.corpus],
                      seeded=o.seed is not None, ledger=o.ledger, budget=o.budget, new_ledger=o.new_ledger)
    if summary.ledger_note:
        print_warning(summary.ledger_note)
    if run.output is not None:
        g = summary.guarantee
        print_info(f"wrote {run.output} ({g.mechanism}, epsilon {g.epsilon:g})")


def _check_topics_options(o: _TopicsOptions) -> _TopicsRun:
    """Check every option before any data is read (one-line errors)."""
    from .._validation import check_choice, check_epsilon, check_positive_int, check_probability

    check_epsilon(o.epsilon)
    check_probability(o.delta, "delta")
    check_probability(o.gamma, "gamma")
    check_choice(o.mechanism, "mechanism", MECHANISMS)
    params = parse_param_options(o.mechanism, o.param, options=TOPICS_OPTIONS)  # from the index: no import
    engine, workers = _engine_options(o.engine, o.workers, o.scheduler)
    m = check_positive_int(o.n_topics, "--topics")
    n = check_positive_int(o.n_keywords, "--keywords")
    K = _check_topic_counts(m, o.model_topics)
    sens_choice = _sensitivity_option(o.sensitivity)
    check_choice(o.keywords_from, "--keywords-from", KEYWORD_SOURCES)
    if o.keywords_from == "noisy" and o.vocabulary.strip() == "corpus":
        from ..errors import ParameterError

        raise ParameterError("--vocabulary corpus is built from the private corpus, so its words cannot name the "
                             "covered keywords: give a public --vocabulary (glove:K or FILE), or --keywords-from "
                             "model (keywords NOT covered)")
    grid = 2.0 ** -check_positive_int(o.grid_bits, "--grid-bits", minimum=0)
    output = None if is_stdout(o.output) else o.output  # "-", /dev/stdout: standard output
    _check_paths(o.corpus, output, o.private_report, o.force)
    from ..release import check_ledger_options

    check_ledger_options(o.ledger, budget=check_budget(o.budget, o.delta_budget), new_ledger=o.new_ledger,
                         output=output, inputs=[o.corpus])
    from ..topics.family import takes_corpus  # imports numpy: after the checks that need none

    corpus_unit = takes_corpus(o.mechanism)
    if corpus_unit and o.keywords_from != "noisy":
        from ..errors import ParameterError

        raise ParameterError(f"--mechanism {o.mechanism} fits its topics to a noisy statistic and reads every keyword "
                             "off them (covered): --keywords-from model does not apply; drop it or choose topicdp")
    if corpus_unit and sens_choice != "sampled":
        from ..errors import ParameterError

        raise ParameterError(f"--mechanism {o.mechanism} is calibrated to its public clip: --sensitivity applies to "
                             "topicdp and its variants; drop it or add --mechanism topicdp")
    if o.cache_dir is not None and not o.no_cache:
        _check_cache_dir(o.cache_dir)
    return _TopicsRun(m=m, n=n, K=K, sensitivity=sens_choice, grid=grid, engine=engine, workers=workers,
                      output=output, topic_model=o.topic_model, corpus_unit=corpus_unit, params=params)


def _sensitivity(o: _TopicsOptions, run: _TopicsRun, data: UserCorpus, model: TopicModel,
                 sampler_seed: np.random.Generator,
                 fit_seconds: float = 0.0) -> tuple[str, float | str | None, float | None, dict[str, object]]:
    """The sensitivity the mechanism is calibrated to: its source, value, sampled gamma, and private notes."""
    from ..topics import SensitivitySampler, default_cache_dir
    from ..topics.family import needs_sensitivity, sensitivity_note

    private: dict[str, object] = {"sensitivity_source": sensitivity_note(o.mechanism)}
    if not needs_sensitivity(o.mechanism):
        return "global", None, None, private
    if run.sensitivity == "worst-case":
        private["sensitivity_source"] = "worst case sqrt(2m) (public)"
        return "worst-case", "worst-case", None, private
    if not isinstance(run.sensitivity, str):
        private["sensitivity_source"] = "supplied by the user"
        return "supplied", float(run.sensitivity), None, private
    backend = _backend(run.engine, run.workers, o.scheduler)
    try:
        rows = o.keywords_from == "noisy"  # whole rows over the public vocabulary
        size = (run.m, len(data.vocabulary)) if rows else (run.m, run.n)
        sizes = [size] if rows else sorted({(k, k) for k in range(2, min(run.K, 10) + 1)} | {size})
        cache = None if o.no_cache else (o.cache_dir or default_cache_dir())
        sampler = SensitivitySampler(corpus=data, model=model, sizes=sizes, backend=backend,
                                     n_users=o.per_db_users or None, neighbours=o.neighbours, cache_dir=cache,
                                     rows=rows)
        sampled = _sample(sampler, o.gamma, sampler_seed, o.quiet, fit_seconds)[size]
    finally:
        if backend is not None:
            backend.close()
    private.update(sensitivity_source="sampled", sensitivity_sampling=sampled.to_dict(),
                   cache_dir=None if cache is None else str(cache))
    return run.sensitivity, sampled.value, sampled.gamma, private


def _release_settings(o: _TopicsOptions, run: _TopicsRun, corpus_settings: object, model_settings: object,
                      source: str) -> dict[str, object]:
    """The public ``OUTPUT.settings.json``: parameters only, never the seed (it would undo the noise)."""
    from ..topics.family import needs_sensitivity

    return {
        "textdp_version": __version__, "command": "topics", "user_field": o.user_field, "text_field": o.text_field,
        "corpus_settings": corpus_settings, "model": model_settings, "mechanism": o.mechanism,
        "epsilon": o.epsilon, "delta": o.delta, "gamma": o.gamma if source == "sampled" else None,
        "topics": run.m, "keywords": run.n, "keywords_from": o.keywords_from, "grid": run.grid,
        "neighbours": o.neighbours,
        "per_db_users": o.per_db_users or "all users of the corpus (count in the private report)",
        "sensitivity": (None if not needs_sensitivity(o.mechanism) else
                        "supplied (value in the private report)" if source == "supplied" else source),
        "engine": run.engine, "seeded": o.seed is not None,
    }


def _private_report(o: _TopicsOptions, run: _TopicsRun, data: UserCorpus, mech: GridNoise,
                    sens_value: float | str | None, private: dict[str, object],
                    shape: tuple[int, int] | None = None) -> dict[str, object]:
    """The PRIVATE report: counts, the sensitivity and the noise scale, timings, paths."""
    from ..topics.sensitivity import worst_case_sensitivity

    sigma = mech.private_scale(shape or (run.m, run.n))  # PRIVATE: the noise scale reveals a sampled sensitivity
    timings = {k: private.pop(k) for k in ("fit_seconds", "seconds")}
    return {
        "warning": "PRIVATE: describes the private corpus; never publish this file",
        "command": "topics", "corpus": str(o.corpus), "release": None if run.output is None else str(run.output),
        "n_users": data.n_users, "n_docs": data.n_docs, "per_db_users": o.per_db_users or data.n_users,
        "sensitivity": worst_case_sensitivity(run.m) if sens_value == "worst-case" else sens_value,
        **private, **sigma, **timings,
    }


def topics_report(
    corpus: Corpus,
    output: Annotated[Path, typer.Option("--output", "-o", help="Report folder (figures, results.json, "
                                         "report.md).")] = Path("reports/topics"),
    name: Annotated[str | None, typer.Option(help="Corpus name in titles (default: file stem).")] = None,
    user_field: UserField = "author",
    text_field: TextField = "text",
    delta: Delta = 1e-4,
    gamma: Annotated[float, typer.Option(help="gamma of the epsilon and size sweeps. " + GAMMA_HELP)] = 0.1,
    epsilon: Annotated[float, typer.Option(help="epsilon of the gamma sweep and bar charts. " + EPS_HELP)] = 3.0,
    repeats: Annotated[int, typer.Option(help="Noise draws averaged per point.")] = 20,
    max_samples: Annotated[int, typer.Option(help="Largest sensitivity sample to draw; gammas needing more "
                                             "are reported as skipped (gamma=0.02 needs 9498).")] = 700,
    topic_model: TopicModelOption = "sklearn",
    max_iter: Annotated[int, typer.Option(help="LDA passes.")] = 10,
    max_docs_per_user: Annotated[int, typer.Option(help="Contribution bound per user (0 = none).")] = 30,
    min_user_docs: MinUserDocs = 1,
    max_features: Annotated[int, typer.Option(help="Vocabulary size.")] = 2000,
    strip_quotes: StripQuotes = False,
    engine: EngineOption = "local",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    cache_dir: CacheDir = None,
    seed: SeedOption = None,
    quiet: QuietOption = False,
    force: ReportForceOption = False,
) -> None:
    """Sweep TopicDP, MVG and Laplace and draw the thesis's figures: an experiment, not a release.

    Sweeps epsilon in [1, 10], gamma in [0.02, 0.22] and m = n in [2, 10], and writes the figures
    with a report.md. The report holds the true matrix and private statistics of the corpus;
    never publish it."""
    with cli_errors():
        from .._validation import check_epsilon, check_positive_int, check_probability
        from ..topics import default_cache_dir, make_topic_model
        from ..topics.report import ReportConfig, run_report

        check_epsilon(epsilon)
        check_probability(delta, "delta")
        check_probability(gamma, "gamma")
        check_report_folder(output, force)  # before minutes of work, not after
        engine, workers = _engine_options(engine, workers, scheduler)
        if cache_dir is not None:
            _check_cache_dir(cache_dir)
        data = _load(corpus, user_field, text_field, max_docs_per_user, min_user_docs, max_features, strip_quotes)
        model = make_topic_model(topic_model, n_topics=10, max_iter=max_iter, seed=0)
        cfg = ReportConfig(delta=delta, gamma=gamma, epsilon=epsilon,
                           repeats=check_positive_int(repeats, "--repeats"),
                           max_samples=check_positive_int(max_samples, "--max-samples"))
        label = name or corpus.name.split(".")[0]
        cache = cache_dir or default_cache_dir()
        backend = _backend(engine, workers, scheduler)
        try:
            with progress_bar(disable=quiet) as bar:
                task = bar.add_task("sampling sensitivity", total=None)
                res = run_report(data, model, output, name=label, config=cfg, backend=backend,
                                 cache_dir=cache, seed=seed,
                                 progress=lambda d, t: bar.update(task, completed=d, total=t),
                                 log=print_info)
        except (KeyboardInterrupt, Interrupted) as exc:
            status = exc.status if isinstance(exc, Interrupted) else 130
            left = "is incomplete" if output.is_dir() and any(output.iterdir()) else "was not written"
            raise InterruptedRun(f"the report in {output} {left}; the sensitivity samples drawn so far are kept in "
                                 f"the cache {cache}: run the same command again (with --force) to resume from them",
                                 status) from None
        finally:
            if backend is not None:
                backend.close()
        write_json(output / "report.settings.json", {
            "textdp_version": __version__, "command": "topics-report", "corpus": str(corpus),
            "user_field": user_field, "corpus_settings": data.settings, "model": model.settings(),
            "delta": delta, "gamma": gamma, "epsilon": epsilon, "repeats": repeats,
            "max_samples": max_samples, "seeded": seed is not None, "engine": engine,  # never the seed
            "sampling_seconds": res["sampling_seconds"]})
        print_info(f"wrote {output / 'report.md'}")


def register(app: typer.Typer) -> None:
    """Add ``topics`` and ``topics-report`` to ``app``."""
    app.command("topics", help=TOPICS_HELP)(topics)
    app.command("topics-report")(topics_report)


__all__ = ["register"]
