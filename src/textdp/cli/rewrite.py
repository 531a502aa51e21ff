"""``textdp rewrite``: differentially private sentence rewriting (ER-AE, AE-DP, SynTF, Random-R)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Only light modules here (no numpy, no torch): `textdp rewrite -h` and its errors for bad option values, a bad
# --param or a missing file are answered before the mechanism's class is imported (tests/test_rewrite_startup.py)
from .._options import MODEL_DATA_CASES, UNITS, VARIANTS
from .._validation import check_budget, check_positive_int
from ..engines import ENGINES
from ..errors import DocumentError, ParameterError
from ..mechanisms import names
from ..mechanisms.registry import spoken_list
from ._choices import choice
from ._common import (
    ENGINE_PANEL,
    ForceOption,
    IdFieldOption,
    InputFormatOption,
    QuietOption,
    SchedulerOption,
    SeedOption,
    TextFieldOption,
    ThreadsOption,
    WorkersOption,
    bar_stages,
    check_report_folder,
    cli_errors,
    parse_param_options,
    print_info,
    progress_bar,
)
from .rewrite_lm import LM_HELP, MAX_NEW_TOKENS, LMOptions, check_other_options, run_lm_rewrite

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..backend import Backend
    from ..evaluation.lm_frontier_config import FrontierConfig

REWRITE_EPSILON_HELP = (
    "Privacy parameter (> 0). er-ae: nominal epsilon per generation step (split 90/10 between the set choice and "
    "the word draw); ae-dp and random-sentence: epsilon per token; syntf-sentence: epsilon per sentence. Every "
    "record states the resulting bound per sentence (for er-ae it is dominated by ln|V| per step, whatever "
    "epsilon), its number of sentences and their total. dp-prompt, dp-paraphrase, dp-mlm: epsilon per token; "
    "dp-bart: epsilon per sentence."
)


ModelDirArgument = Annotated[Path, typer.Argument(help="Model directory from `textdp train-rewriter`, or for dp-* a "
                                                "local Hugging Face directory, a .gguf file or its folder.",
                                                show_default=False)]
InputsArgument = Annotated[list[Path], typer.Argument(help="Text files (one document each), JSONL files (one "
                                                      "document per line) or Parquet files (.parquet or .pq: one "
                                                      "document per row); '-' reads standard input.",
                                                      show_default=False)]
EpsilonOption = Annotated[float, typer.Option("--epsilon", "-e", help=REWRITE_EPSILON_HELP)]
MechanismOption = Annotated[str, choice(
    names("sentence"), metavar="NAME", help=spoken_list(names("sentence")) + ". er-ae "
    "(two-set exponential mechanism; a model trained with --objective er-ae), ae-dp (one exponential mechanism over "
    "the vocabulary; a model trained with --objective reconstruction), syntf-sentence (a bag of words), "
    "random-sentence (uniform random replacement); the dp-* rewriters run a language model (docs/lm-rewriting.md).")]
OutputOption = Annotated[Path, typer.Option("--output", "-o", help="Output JSONL (written atomically; an existing "
                                            "file is refused unless --force).")]
UnitOption = Annotated[str, choice(
    UNITS, help="Records per sentence segment or per document (segments joined). The guarantee's unit is always "
    "the sentence.")]
VariantOption = Annotated[str, choice(
    VARIANTS, metavar="MODE", help="er-ae/ae-dp: autoregressive (fed its own draws) or teacher-forced (fed the "
    "private input, the authors' code).")]
ModelDataOption = Annotated[str, choice(
    ("auto", *MODEL_DATA_CASES), metavar="KIND", help="Which data the model saw. public/disjoint: the guarantee "
    "covers the rewriting step. same/unknown: it does not cover what the model memorised. auto: public if the "
    "model card says so, else unknown.")]
WordFractionOption = Annotated[float, typer.Option(help="er-ae: share of epsilon for the draw inside the chosen set "
                                                   "(counted).")]
PrivateReportOption = Annotated[Path | None, typer.Option(help="Write per-document diagnostics (segments, tokens, "
                                                          "out-of-vocabulary tokens) here. They describe the private "
                                                          "input: keep this file private.")]
EngineOption = Annotated[str, choice(
    ENGINES, rich_help_panel=ENGINE_PANEL, help="Where partitions run: local (this process) or dask.")]
PartitionSizeOption = Annotated[int, typer.Option(
    rich_help_panel=ENGINE_PANEL, help="Documents per partition (part of the run's identity: the same seed and "
    "partition size give the same output).")]
BatchSizeOption = Annotated[int, typer.Option(help="Sentences generated together.")]
WorkDirOption = Annotated[Path | None, typer.Option(
    rich_help_panel=ENGINE_PANEL,
    help="Private work directory of the run (its signed state and finished partitions, so that the same command "
    "started again after a kill resumes, not charged again). Default: under the textdp cache, found again by the "
    "same command; deleted when the run completes.")]

ParamOption = Annotated[list[str] | None, typer.Option(
    metavar="KEY=VALUE", help="A parameter of the mechanism that has no option here, repeatable (e.g. k=3 for "
    "er-ae: the lexical set's size); checked against the mechanism's own parameters.")]

#: The mechanisms' parameters that ``textdp rewrite`` sets with its own options (never with ``--param``).
REWRITE_OPTIONS = {"epsilon": "--epsilon", "model": "MODEL_DIR (the argument)", "model_data": "--model-data",
                   "seed": "--seed", "variant": "--variant", "word_fraction": "--word-fraction",
                   "batch_size": "--batch-size", "clip": "--clip or --clip-public", "delta": "--delta",
                   "max_new_tokens": "--max-new-tokens", "max_tokens": "--max-tokens",
                   "max_input_tokens": "--max-input-tokens", "copy_stopwords": "--copy-stopwords",
                   "top_k": "--top-k", "top_p": "--top-p", "prompt": "--prompt or --prompt-file",
                   "prompt_format": "--prompt-format", "prior": "--prior", "public_top_k": "--public-top-k",
                   "batch_tokens": "--batch-tokens"}


@dataclass(frozen=True)
class _Run:
    """The options both paths read (the ER-AE family path reads the rest as arguments)."""

    model_dir: Path
    inputs: list[Path]
    mechanism: str
    epsilon: float
    output: Path
    unit: str
    seed: int | None
    private_report: Path | None
    batch_size: int
    text_field: str
    id_field: str
    input_format: str
    force: bool
    quiet: bool
    opts: LMOptions
    params: dict[str, object]


def rewrite_command(
    model_dir: ModelDirArgument,
    inputs: InputsArgument,
    epsilon: EpsilonOption = ...,  # type: ignore[assignment]
    mechanism: MechanismOption = "er-ae",
    output: OutputOption = ...,  # type: ignore[assignment]
    unit: UnitOption = "document",
    seed: SeedOption = None,
    variant: VariantOption = "autoregressive",
    model_data: ModelDataOption = "auto",
    word_fraction: WordFractionOption = 0.1,
    private_report: PrivateReportOption = None,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    partition_size: PartitionSizeOption = 256,
    work_dir: WorkDirOption = None,
    batch_size: BatchSizeOption = 256,
    threads: ThreadsOption = None,
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    input_format: InputFormatOption = "auto",
    force: ForceOption = False,
    quiet: QuietOption = False,
    clip: Annotated[str | None, LM_HELP["clip"]] = None,
    clip_public: Annotated[Path | None, LM_HELP["clip_public"]] = None,
    delta: Annotated[float, LM_HELP["delta"]] = 1e-5,
    max_new_tokens: Annotated[int, LM_HELP["max_new_tokens"]] = MAX_NEW_TOKENS,
    max_tokens: Annotated[int, LM_HELP["max_tokens"]] = 32,
    max_input_tokens: Annotated[int, LM_HELP["max_input_tokens"]] = 256,
    copy_stopwords: Annotated[bool, LM_HELP["copy_stopwords"]] = True,
    top_k: Annotated[int | None, LM_HELP["top_k"]] = None,
    top_p: Annotated[float | None, LM_HELP["top_p"]] = None,
    ledger: Annotated[Path | None, LM_HELP["ledger"]] = None,
    budget: Annotated[float | None, LM_HELP["budget"]] = None,
    delta_budget: Annotated[float | None, LM_HELP["delta_budget"]] = None,
    new_ledger: Annotated[bool, LM_HELP["new_ledger"]] = False,
    clip_quantiles: Annotated[str, LM_HELP["clip_quantiles"]] = "0.01,0.99",
    clip_rule: Annotated[str, LM_HELP["clip_rule"]] = "auto",
    prompt: Annotated[str | None, LM_HELP["prompt"]] = None,
    prompt_file: Annotated[Path | None, LM_HELP["prompt_file"]] = None,
    prompt_format: Annotated[str, LM_HELP["prompt_format"]] = "auto",
    prior: Annotated[bool, LM_HELP["prior"]] = False,
    public_top_k: Annotated[int | None, LM_HELP["public_top_k"]] = None,
    batch_tokens: Annotated[int, LM_HELP["batch_tokens"]] = 16384,
    param: ParamOption = None,
) -> None:
    """Rewrite sentences with a differential-privacy guarantee stated on every record.

    Each document is split into sentences (segments of at most L_max tokens, the model's max length). Each record
    holds id, text, the per-sentence bound (epsilon, delta, unit: sentence), units (the line's number of
    sentences) and total (their sum), the compact guarantee (what is NOT covered: the number of sentences, and for
    --model-data same/unknown what the model memorised) and seeded. The full statement is written once, to the
    settings file.
    """
    with cli_errors():
        # the mechanism's own parameters without an option of this command (e.g. er-ae's k), checked against the
        # class's fields as the registry index records them: a bad one is refused before anything is loaded
        params = parse_param_options(mechanism, param, options=REWRITE_OPTIONS)
        lm_opts = LMOptions(clip, clip_public, delta, max_new_tokens, max_tokens, max_input_tokens, copy_stopwords, top_k,
                            top_p, ledger, check_budget(budget, delta_budget), new_ledger, clip_quantiles=clip_quantiles, clip_rule=clip_rule,
                            prompt=prompt, prompt_file=prompt_file, prompt_format=prompt_format, prior=prior,
                            public_top_k=public_top_k, batch_tokens=batch_tokens)
        run = _Run(model_dir, list(inputs), mechanism, epsilon, output, unit, seed, private_report,
                   batch_size, text_field, id_field, input_format, force, quiet, lm_opts, params)
        _check_files(run)
        from ..generation.lm_family import LMRewriter
        from ..mechanisms import mechanism_class

        if issubclass(mechanism_class(run.mechanism), LMRewriter):  # the language-model rewriters (cli/rewrite_lm.py)
            if work_dir is not None:
                raise ParameterError(f"--work-dir applies to the partitioned mechanisms; {mechanism} runs in this "
                                     "process")
            _rewrite_lm(run, engine=engine, scheduler=scheduler, workers=workers, threads=threads)
        else:
            _rewrite_family(run, variant=variant, model_data=model_data, word_fraction=word_fraction,
                            engine=engine, scheduler=scheduler, workers=workers, partition_size=partition_size,
                            threads=threads, work_dir=work_dir)


def _check_files(run: _Run) -> None:
    """A mistyped input file or model folder is said before the mechanism's class (numpy, torch) is imported and
    the model loaded; each path says what it must hold later (the model folder's files, the outputs)."""
    for f in run.inputs:
        if str(f) != "-" and not f.exists():
            raise DocumentError(f"{f}: no such file")
    gguf = run.model_dir.suffix.lower() == ".gguf" and run.model_dir.is_file()  # docs: "the .gguf file or its folder"
    if not (run.model_dir.is_dir() or gguf):
        raise ParameterError(f"MODEL_DIR {run.model_dir}: no such folder or .gguf file (a model from `textdp "
                             "train-rewriter`, or for the dp-* mechanisms a local Hugging Face directory, a .gguf "
                             "file or its folder)")


def _set_threads(threads: int | None) -> None:
    """--threads: torch's intra-op threads (checked, then set; nothing when not given)."""
    if threads is not None:
        from ..generation.sampling import torch_module

        check_positive_int(threads, "--threads")
        torch_module().set_num_threads(threads)


def _rewrite_lm(run: _Run, *, engine: str, scheduler: str | None, workers: int | None,
                threads: int | None) -> None:
    """The dp-* path: one process (no engine), then :func:`textdp.cli.rewrite_lm.run_lm_rewrite`."""
    if engine != "local" or scheduler or workers:
        raise ParameterError(f"{run.mechanism} runs in this process (--engine local); use --threads")
    _set_threads(threads)
    run_lm_rewrite(run.model_dir, run.inputs, mechanism=run.mechanism, epsilon=run.epsilon, output=run.output,
                   unit=run.unit, seed=run.seed, private_report=run.private_report, batch_size=run.batch_size,
                   text_field=run.text_field, id_field=run.id_field, input_format=run.input_format,
                   force=run.force, quiet=run.quiet, opts=run.opts, params=run.params)


def _rewrite_family(run: _Run, *, variant: str, model_data: str, word_fraction: float, engine: str,
                    scheduler: str | None, workers: int | None, partition_size: int, threads: int | None,
                    work_dir: Path | None = None) -> None:
    """The ER-AE family (er-ae, ae-dp, syntf-sentence, random-sentence): build the mechanism from the options,
    then :func:`textdp.release.release` on the engine (the one driver: read, charge the ledger once before
    anything is generated, rewrite the partitions, write records, settings and the private report; a killed
    run started again resumes, uncharged); this function only prints."""
    from ..generation.folders import check_model_folder
    from ..generation.rewriter import RewrittenText, SentenceMechanism
    from ..guarantees import ReleaseRecord
    from ..mechanisms import mechanism_class
    from ..release import check_file_outputs, release
    from ._common import print_warning

    check_other_options(run.mechanism, run.opts, run.output, run.inputs)
    _set_threads(threads)
    check_positive_int(partition_size, "--partition-size")
    model_files = [run.model_dir / name for name in ("card.json", "model.pt", "vocab.txt", "config.json")]
    # every path is checked before the model is loaded (the driver checks again)
    check_file_outputs(run.output, run.private_report, inputs=[*run.inputs, *model_files, run.opts.ledger],
                       force=run.force, new_folders=False)
    cls = mechanism_class(run.mechanism)
    assert issubclass(cls, SentenceMechanism)
    where = str(check_model_folder(run.model_dir))  # links may not leave the folder
    options: dict[str, object] = {"variant": variant, "word_fraction": word_fraction, "batch_size": run.batch_size}
    build: Callable[..., SentenceMechanism] = cls  # the keyword values are checked by the class itself
    # the mechanism's own public parameters: what its workers rebuild it from (the model as its folder)
    mech = build(epsilon=run.epsilon, model=where, model_data=model_data,
                 **{k: v for k, v in options.items() if k in cls.param_names()}, **run.params).fit()
    _check_objective(run.model_dir, mech.model_.card, cls.objective, run.mechanism)

    def sentences(rec: ReleaseRecord) -> list[ReleaseRecord]:
        """``--unit sentence``: one record per sentence of a rewritten document."""
        assert isinstance(rec, RewrittenText)
        return rec.sentence_records()

    public = {k: v for k, v in mech.get_params().items() if k not in ("model", "seed")}
    model_data_case = mech.guarantee().model_data
    backend = _backend(engine, scheduler, workers)
    with progress_bar(disable=run.quiet) as bar, contextlib.closing(backend):
        task = bar.add_task(f"rewriting ({run.mechanism})", total=None)
        done = release(
            mech, list(run.inputs), run.output, ledger=run.opts.ledger, budget=run.opts.budget,
            new_ledger=run.opts.new_ledger, private_report=run.private_report, private_details={},
            command="rewrite", seed=run.seed, empty="empty", force=run.force, text_field=run.text_field,
            id_field=run.id_field, input_format=run.input_format, inputs=model_files,
            settings={"model": mech.model_.card.get("model_id"),  # random: no path, no data fingerprint
                      "settings": {"mechanism": run.mechanism, **public, "model_data": model_data_case},
                      "record_unit": run.unit},
            records_of=sentences if run.unit == "sentence" else None, engine=engine,
            backend=backend, partition_size=partition_size, work_dir=work_dir,
            progress=lambda n, total: bar.update(task, completed=n, total=total))
    if done.ledger_note is not None:
        print_warning(done.ledger_note)
    g = done.guarantee
    print_info(
        f"wrote {done.records} records to {run.output}; guarantee: epsilon = {g.epsilon:.4g} per sentence "
        f"({g.max_length} steps x {g.per_token:.4g} per step)"  # type: ignore[attr-defined]
        + ("" if g.covered else "; NOT covering what the model memorised (--model-data "  # type: ignore[attr-defined]
           f"{g.model_data})"))  # type: ignore[attr-defined]


def _check_objective(model_dir: Path, card: Mapping[str, object], need: str | None, mechanism: str) -> None:
    """ER-AE runs on a model trained for ER-AE, AE-DP on the reconstruction-only auto-encoder (the card says which;
    ``need``: the mechanism's ``objective``)."""
    training = card.get("training")
    have = training.get("objective") if isinstance(training, dict) else None
    if need is not None and have != need:
        raise ParameterError(f"--mechanism {mechanism} needs a model trained with --objective {need}; {model_dir} was "
                             f"trained with --objective {have} (train one: textdp train-rewriter --objective {need})")


def _backend(engine: str, scheduler: str | None, workers: int | None) -> Backend:
    from ..engines import get_backend

    if engine == "local" and (scheduler or workers):
        raise ParameterError("--scheduler and --workers need --engine dask")
    return get_backend(engine, scheduler=scheduler, workers=workers)


def evaluate_generation_command(
    config: Annotated[Path, typer.Argument(help="TOML config: [corpus], [models], [sweep], [earth_movers], [run]; "
                                           "without [models], the LM-only frontier of dp-prompt's instructions "
                                           "([corpus], [lm], [run]).",
                                           show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Report folder (default: [run] output, "
                                                   "else report-generation-<corpus>).")] = None,
    write_training_corpus: Annotated[Path | None, typer.Option(help="Instead of the sweep, write the rewriter's "
                                                                  "training sentences (train splits of the three "
                                                                  "development corpora) to this JSONL file.")] = None,
    threads: ThreadsOption = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plot.")] = False,
    quiet: QuietOption = False,
) -> None:
    """The epsilon sweep of ER-AE, AE-DP, SynTF and Random-R (and Earth Mover's privacy) on an evaluation corpus.

    Rewrites the test documents of the corpus's authors at equal per-sentence bounds and at equal nominal
    epsilon, and measures semantic similarity (MiniLM cosine, a stand-in for the Universal Sentence Encoder),
    authorship attribution accuracy (char n-gram SVM trained on the authors' original documents) and a
    stylometric distance. Writes report.md, results.json and privacy_utility.png.

    A config without [models] runs dp-prompt's named instructions against privacy settings on sentences of the
    corpus (similarity and chunk attribution at each epsilon per document; no trained ER-AE needed): see
    examples/evaluate-lm-frontier-c50.toml and docs/lm-rewriting.md.
    """
    with cli_errors():
        from ..evaluation.generation_config import GenerationConfig, load_evaluation_config
        from ..evaluation.generation_data import TRAINING_SOURCES
        from ..evaluation.generation_data import write_training_corpus as write_corpus
        from ..evaluation.generation_report import render_generation_markdown, write_generation_report
        from ..evaluation.generation_sweep import run_generation_sweep
        from ..generation.sampling import torch_module
        from ..io import check_output_paths

        if threads is not None:
            check_positive_int(threads, "--threads")
            torch_module().set_num_threads(threads)
        cfg = load_evaluation_config(config)
        if not isinstance(cfg, GenerationConfig):
            if write_training_corpus is not None:
                raise ParameterError("--write-training-corpus needs an ER-AE config ([models]); this one is LM-only")
            _frontier(cfg, config, output, quiet=quiet, plots=not no_plots)
            return
        if write_training_corpus is not None:
            check_output_paths([("--write-training-corpus", write_training_corpus)], inputs=[config], new_folders=False)
            counts = write_corpus(write_training_corpus, TRAINING_SOURCES, data_dir=cfg.data_dir, seed=cfg.seed)
            typer.echo(json.dumps({"training_corpus": str(write_training_corpus), "sentences": counts}))
            return
        out = output or Path(cfg.output or f"report-generation-{cfg.corpus}")
        # before minutes of work: a file, or a device or FIFO in the folder, is refused now (its report files are
        # replaced, as before: the command has no --force)
        check_report_folder(out, True, (config,))
        with progress_bar(disable=quiet) as bar:
            result = run_generation_sweep(cfg, progress=bar_stages(bar))
        write_generation_report(result, out, plots=not no_plots)
        if not quiet:
            typer.echo(render_generation_markdown(result))
        print_info(f"wrote {out}/report.md ({result['timings']['total']:.0f} s)")


def _frontier(cfg: FrontierConfig, config: Path, output: Path | None, *, quiet: bool, plots: bool) -> None:
    """The LM-only config: dp-prompt's instructions x settings (:func:`textdp.evaluation.lm_frontier.run_lm_frontier`)."""
    from ..evaluation.lm_frontier import run_lm_frontier
    from ..evaluation.lm_frontier_report import render_frontier_markdown, write_frontier_report

    out = output or Path(cfg.output or f"report-lm-frontier-{cfg.corpus}")
    check_report_folder(out, True, (config,))
    out.mkdir(parents=True, exist_ok=True)
    with (out / "rows.jsonl").open("w", encoding="utf-8") as rows, progress_bar(disable=quiet) as bar:
        def row_done(row: object) -> None:  # each row as it is done: a long run's partial results
            rows.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows.flush()

        result = run_lm_frontier(cfg, progress=bar_stages(bar), on_row=row_done)
    write_frontier_report(result, out, plots=plots)
    if not quiet:
        typer.echo(render_frontier_markdown(result))
    print_info(f"wrote {out}/report.md ({result['timings']['total']:.0f} s)")


def register(app: typer.Typer) -> None:
    """Add the ``rewrite`` and ``evaluate-generation`` commands to ``app``."""
    app.command("rewrite")(rewrite_command)
    app.command("evaluate-generation")(evaluate_generation_command)
