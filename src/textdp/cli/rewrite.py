"""``textdp rewrite``: differentially private sentence rewriting (ER-AE, AE-DP, SynTF, Random-R)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import __version__
from .._validation import check_positive_int
from ..errors import ParameterError
from ._choices import Engine, InputFormat, ModelData, Unit, Variant
from ._choices import RewriteMechanism as Mechanism
from ._common import FORCE_HELP, bar_stages, cli_errors, print_info, progress_bar

REWRITE_EPSILON_HELP = (
    "Privacy parameter (> 0). er-ae: nominal epsilon per generation step (split 90/10 between the set choice and "
    "the word draw); ae-dp and random-sentence: epsilon per token; syntf-sentence: epsilon per sentence. Every "
    "record states the resulting bound per sentence (for er-ae it is dominated by ln|V| per step, whatever "
    "epsilon), its number of sentences and their total."
)


def rewrite_command(
    model_dir: Annotated[Path, typer.Argument(help="Model directory from `textdp train-rewriter`.", show_default=False)],
    inputs: Annotated[list[Path], typer.Argument(help="Text files (one document each) or JSONL files (one document "
                                                 "per line); '-' reads standard input.", show_default=False)],
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help=REWRITE_EPSILON_HELP)] = ...,  # type: ignore[assignment]
    mechanism: Annotated[Mechanism, typer.Option(metavar="NAME", help="er-ae (two-set exponential mechanism; a model trained with "
                                                 "--objective er-ae), ae-dp (one exponential mechanism over the "
                                                 "vocabulary; a model trained with --objective reconstruction), "
                                                 "syntf-sentence (a bag of words), random-sentence (uniform random "
                                                 "replacement).")] = Mechanism.er_ae,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output JSONL (written atomically; an existing file "
                                         "is refused unless --force).")] = ...,  # type: ignore[assignment]
    unit: Annotated[Unit, typer.Option(help="Records per sentence segment or per document (segments joined). The "
                                       "guarantee's unit is always the sentence.")] = Unit.document,
    seed: Annotated[int | None, typer.Option(help="Seed for a reproducible experiment. Default: fresh OS entropy "
                                                "(use that for real releases).")] = None,
    variant: Annotated[Variant, typer.Option(metavar="MODE", help="er-ae/ae-dp: autoregressive (fed its own draws) or teacher-forced "
                                             "(fed the private input, the authors' code).")] = Variant.autoregressive,
    model_data: Annotated[ModelData, typer.Option(metavar="KIND", help="Which data the model saw. public/disjoint: the guarantee "
                                                  "covers the rewriting step. same/unknown: it does not cover what "
                                                  "the model memorised. auto: public if the model card says so, else "
                                                  "unknown.")] = ModelData.auto,
    word_fraction: Annotated[float, typer.Option(help="er-ae: share of epsilon for the draw inside the chosen set "
                                                 "(counted).")] = 0.1,
    private_report: Annotated[Path | None, typer.Option(help="Write per-document diagnostics (segments, tokens, "
                                                           "out-of-vocabulary tokens) here. They describe the private "
                                                           "input: keep this file private.")] = None,
    engine: Annotated[Engine, typer.Option(help="Where partitions run: local (this process) or dask.")] = Engine.local,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
    workers: Annotated[int | None, typer.Option(help="Local Dask workers.")] = None,
    partition_size: Annotated[int, typer.Option(help="Documents per partition (part of the run's identity: the same "
                                                "seed and partition size give the same output).")] = 256,
    batch_size: Annotated[int, typer.Option(help="Sentences generated together.")] = 256,
    threads: Annotated[int | None, typer.Option(help="Torch threads (default: torch's choice).")] = None,
    text_field: Annotated[str, typer.Option(help="Text field of JSONL input.")] = "text",
    id_field: Annotated[str, typer.Option(help="Id field of JSONL input.")] = "id",
    input_format: Annotated[InputFormat, typer.Option(help="auto: JSONL by file name, else plain text.")] = InputFormat.auto,
    force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Rewrite sentences with a differential-privacy guarantee stated on every record.

    Each document is split into sentences (segments of at most L_max tokens, the model's max length). Each record
    holds id, text, the per-sentence bound (epsilon, delta, unit: sentence), units (the line's number of
    sentences) and total (their sum), the compact guarantee (what is NOT covered: the number of sentences, and for
    --model-data same/unknown what the model memorised) and seeded. The full statement is written once, to the
    settings file.
    """
    with cli_errors():
        from .._rng import spawn
        from ..generation.rewriter import RewriteSettings, load_rewriter
        from ..generation.sampling import torch_module
        from ..io import (
            atomic_writer,
            check_output_paths,
            read_documents,
            settings_path,
            write_json,
        )
        from ..mechanisms import ReleaseContext

        torch = torch_module()
        if threads is not None:
            check_positive_int(threads, "--threads")
            torch.set_num_threads(threads)
        check_positive_int(partition_size, "--partition-size")
        model_files = [model_dir / name for name in ("card.json", "model.pt", "vocab.txt", "config.json")]
        check_output_paths([("--output", output), ("settings", settings_path(output)),
                            ("--private-report", private_report)], inputs=[*inputs, *model_files], force=force)
        settings = RewriteSettings(mechanism=mechanism.value, epsilon=epsilon, variant=variant.value,
                                   word_fraction=word_fraction, model_data=model_data.value, unit=unit.value,
                                   batch_size=batch_size)
        rewriter = load_rewriter(str(model_dir.resolve()))
        _check_objective(model_dir, rewriter.card, mechanism.value)
        # the records' guarantee: lines with no words get an empty record (policy "empty", stated)
        guarantee = settings.mechanism_for(rewriter).guarantee(ReleaseContext(seeded=seed is not None, empty="empty"))
        docs = read_documents(list(inputs), text_field=text_field, id_field=id_field, input_format=input_format.value)
        if not docs:
            raise ParameterError("no documents in the input")
        if not any(d[1].strip() for d in docs):
            raise ParameterError("every input document is empty")
        parts = [docs[i : i + partition_size] for i in range(0, len(docs), partition_size)]
        rngs = spawn(seed, len(parts))
        items = [(str(model_dir.resolve()), settings.to_dict(), part, g, seed is not None) for part, g in zip(parts, rngs, strict=True)]
        results: list[Any] = [None] * len(items)
        backend = _backend(engine, scheduler, workers)
        try:
            with progress_bar(disable=quiet) as bar:
                task = bar.add_task(f"rewriting ({mechanism.value})", total=len(docs))

                def on_result(i: int, res: Any) -> None:
                    results[i] = res
                    bar.advance(task, len(items[i][2]))

                backend.map(rewrite_partition, items, on_result)
        finally:
            backend.close()
        records = [r for res in results for r in res[0]]
        with atomic_writer(output, overwrite=force, private=False) as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")
        write_json(settings_path(output), {
            "textdp_version": __version__, "command": "rewrite", "model": rewriter.card.get("model_id"),  # random: no path, no data fingerprint
            "settings": {**settings.to_dict(), "model_data": guarantee.model_data}, "records": len(records),
            "seeded": seed is not None,  # never the seed itself: it would let anyone undo the noise
            "engine": engine.value, "partition_size": partition_size, "mechanism": guarantee.mechanism,
            "epsilon": guarantee.epsilon, "delta": guarantee.delta, "unit": guarantee.unit,
            "guarantee": guarantee.to_dict(),
        }, overwrite=force, private=False)
        if private_report is not None:
            write_json(private_report, {"note": "PRIVATE: these counts describe the input; do not publish them.",
                                        "documents": [d for res in results for d in res[1]]}, overwrite=force)
        print_info(
            f"wrote {len(records)} records to {output}; guarantee: epsilon = {guarantee.epsilon:.4g} per sentence "
            f"({guarantee.max_length} steps x {guarantee.per_token:.4g} per step)"
            + ("" if guarantee.covered else "; NOT covering what the model memorised (--model-data "
               f"{guarantee.model_data})"))


#: The training objective each model-based mechanism is defined with (train-rewriter --objective).
MECHANISM_OBJECTIVE = {"er-ae": "er-ae", "ae-dp": "reconstruction"}


def _check_objective(model_dir: Path, card: dict[str, Any], mechanism: str) -> None:
    """ER-AE runs on a model trained for ER-AE, AE-DP on the reconstruction-only auto-encoder (the card says which)."""
    need = MECHANISM_OBJECTIVE.get(mechanism)
    have = card.get("training", {}).get("objective") if isinstance(card.get("training"), dict) else None
    if need is not None and have != need:
        raise ParameterError(f"--mechanism {mechanism} needs a model trained with --objective {need}; {model_dir} was "
                             f"trained with --objective {have} (train one: textdp train-rewriter --objective {need})")


def rewrite_partition(item: tuple[str, dict[str, Any], list[tuple[str, str]], Any, bool]) -> Any:
    """Engine job: rewrite one partition of documents (pure given the model directory and the generator)."""
    from ..generation.rewriter import RewriteSettings, load_rewriter, rewrite_documents

    model_dir, settings, docs, rng, seeded = item
    return rewrite_documents(load_rewriter(model_dir), docs, RewriteSettings(**settings), rng, seeded=seeded)


def _backend(engine: Engine, scheduler: str | None, workers: int | None) -> Any:
    from ..engines import get_backend

    if engine is Engine.local and (scheduler or workers):
        raise ParameterError("--scheduler and --workers need --engine dask")
    return get_backend(engine.value, scheduler=scheduler, workers=workers)


def evaluate_generation_command(
    config: Annotated[Path, typer.Argument(help="TOML config: [corpus], [models], [sweep], [earth_movers], [run].",
                                           show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Report folder (default: [run] output, "
                                                   "else report-generation-<corpus>).")] = None,
    write_training_corpus: Annotated[Path | None, typer.Option(help="Instead of the sweep, write the rewriter's "
                                                                  "training sentences (train splits of the three "
                                                                  "development corpora) to this JSONL file.")] = None,
    threads: Annotated[int | None, typer.Option(help="Torch threads (default: torch's choice).")] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plot.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """The epsilon sweep of ER-AE, AE-DP, SynTF and Random-R (and Earth Mover's privacy) on an evaluation corpus.

    Rewrites the test documents of the corpus's authors at equal per-sentence bounds and at equal nominal
    epsilon, and measures semantic similarity (MiniLM cosine, a stand-in for the Universal Sentence Encoder),
    authorship attribution accuracy (char n-gram SVM trained on the authors' original documents) and a
    stylometric distance. Writes report.md, results.json and privacy_utility.png.
    """
    with cli_errors():
        from ..evaluation.generation import (
            TRAINING_SOURCES,
            load_generation_config,
            render_generation_markdown,
            run_generation_sweep,
            write_generation_report,
        )
        from ..evaluation.generation import write_training_corpus as write_corpus
        from ..generation.sampling import torch_module
        from ..io import check_output_paths

        if threads is not None:
            check_positive_int(threads, "--threads")
            torch_module().set_num_threads(threads)
        cfg = load_generation_config(config)
        if write_training_corpus is not None:
            check_output_paths([("--write-training-corpus", write_training_corpus)], inputs=[config])
            counts = write_corpus(write_training_corpus, TRAINING_SOURCES, data_dir=cfg.data_dir, seed=cfg.seed)
            typer.echo(json.dumps({"training_corpus": str(write_training_corpus), "sentences": counts}))
            return
        out = output or Path(cfg.output or f"report-generation-{cfg.corpus}")
        with progress_bar(disable=quiet) as bar:
            result = run_generation_sweep(cfg, progress=bar_stages(bar))
        write_generation_report(result, out, plots=not no_plots)
        if not quiet:
            typer.echo(render_generation_markdown(result))
        print_info(f"wrote {out}/report.md ({result['timings']['total']:.0f} s)")


def register(app: typer.Typer) -> None:
    """Add the ``rewrite`` and ``evaluate-generation`` commands to ``app``."""
    app.command("rewrite")(rewrite_command)
    app.command("evaluate-generation")(evaluate_generation_command)
