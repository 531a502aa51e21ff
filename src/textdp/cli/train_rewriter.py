"""``textdp train-rewriter``: train the ER-AE (or AE-DP's auto-encoder) rewriting model, resumably."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict, Unpack

import typer

from .._validation import check_positive_int
from ..errors import ParameterError
from ..generation.model import OUTPUT_LAYERS
from ..generation.training import OBJECTIVES, VOCAB_SOURCES
from ._choices import choice
from ._common import (
    EXIT_SIGINT,
    InputFormatOption,
    Interrupted,
    InterruptedRun,
    QuietOption,
    TextFieldOption,
    ThreadsOption,
    bar_progress,
    cli_errors,
    print_info,
    progress_bar,
)

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from ..generation.training import TrainingResult, TrainingSettings


Corpus = Annotated[list[Path], typer.Argument(
    help="Training text: text files (one document each), JSONL / JSONL.gz files (one document per line) or Parquet "
    "files (.parquet or .pq: one document per row).",
    show_default=False)]
ModelDir = Annotated[Path, typer.Option("--output", "-o", help="Model directory to write (or to resume).")]
MaxSentences = Annotated[int | None, typer.Option(
    help="Train on at most N sentence segments (a uniform sample, drawn with the training seed).")]
Epochs = Annotated[int, typer.Option(help="Passes over the training segments.")]
Seed = Annotated[int | None, typer.Option(
    help="Seed (initialisation, batch order, word dropout, reward words). Default: fresh OS entropy.")]
ObjectiveOption = Annotated[str, choice(
    OBJECTIVES, help="er-ae: reconstruction, then 10*L_embed + L_rec after the warm-up (the ER-AE model). "
    "reconstruction: L_rec only (AE-DP's model).")]
Public = Annotated[bool, typer.Option(
    "--public", help="Declare the training corpus PUBLIC. Rewrites then default to --model-data public. Without it "
    "the model card says the model is private (it was trained without privacy).")]
Description = Annotated[str | None, typer.Option(
    help="What the training data is, for the model card (default: not described; the card never names the "
    "training files unless --card-names-data).")]
CardNamesData = Annotated[bool, typer.Option(
    "--card-names-data", help="Write the training file names (as the default description) and the seed into the "
    "model card. Off by default: the card travels with the model.")]
MaxSteps = Annotated[int | None, typer.Option(
    help="Stop after S training steps in this run and still write a usable model; the same command continues it.")]
MaxMinutes = Annotated[float | None, typer.Option(
    help="Stop after the step that passes M minutes in this run and still write a usable model; the same command "
    "continues it.")]
VocabSize = Annotated[int, typer.Option(help="Vocabulary words K (plus 4 special tokens).")]
VocabSourceOption = Annotated[str, choice(
    VOCAB_SOURCES, help="corpus: the K most frequent training words with a GloVe vector. glove: GloVe's K first "
    "words (public, independent of the training data).")]
MaxLength = Annotated[int, typer.Option(
    help="L_max: tokens per sentence segment (longer sentences are cut) and steps per generated sentence.")]
BatchSize = Annotated[int, typer.Option(help="Segments per training step.")]
WarmupFraction = Annotated[float, typer.Option(help="er-ae: share of the steps trained on L_rec only.")]
DecoderHidden = Annotated[int, typer.Option(help="Generator GRU units.")]
EncoderHidden = Annotated[int, typer.Option(help="Encoder GRU units per direction.")]
Latent = Annotated[int, typer.Option(help="Size of the latent z.")]
OutputLayerOption = Annotated[str, choice(
    OUTPUT_LAYERS, help="dense: a dense layer over the vocabulary (the authors'). embedding: project to the 50-d "
    "embedding space and score every token by its frozen embedding (about 5x fewer operations; a CPU-sized "
    "choice).")]
Bf16 = Annotated[bool, typer.Option(
    "--bf16", help="bfloat16 autocast for the matrix products (faster on CPUs with AVX-512 BF16; slightly "
    "different numbers).")]
CheckpointEvery = Annotated[int, typer.Option(help="Steps between checkpoints.")]
InitFrom = Annotated[Path | None, typer.Option(
    help="Start from the checkpoint of another run in progress whose steps so far were all reconstruction-only "
    "(same seed, data and settings except --objective and --warmup-fraction): the AE-DP model can share the "
    "ER-AE run's warm-up.")]


def train_rewriter_command(
    corpus: Corpus,
    output: ModelDir = ...,  # type: ignore[assignment]
    max_sentences: MaxSentences = None,
    epochs: Epochs = 4,
    seed: Seed = None,
    objective: ObjectiveOption = "er-ae",
    public: Public = False,
    description: Description = None,
    card_names_data: CardNamesData = False,
    max_steps: MaxSteps = None,
    max_minutes: MaxMinutes = None,
    vocab_size: VocabSize = 10_000,
    vocab_source: VocabSourceOption = "corpus",
    max_length: MaxLength = 32,
    batch_size: BatchSize = 128,
    warmup_fraction: WarmupFraction = 0.25,
    decoder_hidden: DecoderHidden = 256,
    encoder_hidden: EncoderHidden = 128,
    latent: Latent = 128,
    output_layer: OutputLayerOption = "dense",
    bf16: Bf16 = False,
    threads: ThreadsOption = None,
    checkpoint_every: CheckpointEvery = 100,
    init_from: InitFrom = None,
    text_field: TextFieldOption = "text",
    input_format: InputFormatOption = "auto",
    quiet: QuietOption = False,
) -> None:
    """Train the sentence-rewriting model used by `textdp rewrite` (extra [generation]).

    The model is an auto-encoder (bidirectional GRU encoder, GRU generator fed [emb(prev); z], frozen GloVe
    6B 50d embeddings) trained as in the ER-AE authors' code. Checkpoints are written atomically; rerunning the
    same command after an interruption continues where it stopped. The model card (card.json) records the data
    description, the settings and the vocabulary, never the text. A model trained on private data is private.
    """
    with cli_errors():
        from ..embeddings import load_embeddings
        from ..generation.sampling import torch_module
        from ..generation.training import TrainingSettings

        torch = torch_module()
        if threads is not None:
            check_positive_int(threads, "--threads")
            torch.set_num_threads(threads)
        settings = TrainingSettings(
            objective=objective, vocab_size=vocab_size, vocab_source=vocab_source, max_length=max_length,
            encoder_hidden=encoder_hidden, latent=latent, decoder_hidden=decoder_hidden,
            output_layer=output_layer, epochs=epochs,
            batch_size=batch_size, warmup_fraction=warmup_fraction, bf16=bf16, seed=seed,
        )
        segments = _training_segments(corpus, output, text_field=text_field, input_format=input_format,
                                      max_length=max_length, max_sentences=max_sentences, seed=seed)
        if max_minutes is not None and not (0 < max_minutes < float("inf")):
            raise ParameterError(f"--max-minutes must be a positive number, got {max_minutes!r}")
        if max_steps is not None:
            check_positive_int(max_steps, "--max-steps")
        emb = load_embeddings()
        desc = description or (", ".join(p.name for p in corpus) if card_names_data else
                                "not described (the training files are named only with --card-names-data)")
        res = _train(segments, output, emb, settings, quiet=quiet, data_description=desc, declared_public=public,
                     checkpoint_every=checkpoint_every, init_from=init_from, max_steps=max_steps,
                     max_minutes=max_minutes, card_names_data=card_names_data)
        _say_result(res, output, len(segments))


def _training_segments(corpus: list[Path], output: Path, *, text_field: str, input_format: str, max_length: int,
                       max_sentences: int | None, seed: int | None) -> list[list[str]]:
    """The training sentence segments (a seeded uniform sample of ``max_sentences``), read after the path checks."""
    from .._rng import make_rng
    from ..generation.vocab import segment_text
    from ..io import check_output_paths, read_documents

    check_output_paths([("--output's " + name, output / name) for name in
                        ("card.json", "model.pt", "vocab.txt", "config.json", "checkpoint.pt")],
                       inputs=list(corpus), force=True)  # never replace a training file
    docs = read_documents(list(corpus), text_field=text_field, input_format=input_format)
    segments = [s for _, text in docs for s in segment_text(text, max_length)]
    if not segments:
        raise ParameterError("no sentences in the training corpus")
    if max_sentences is not None:
        check_positive_int(max_sentences, "--max-sentences")
        if len(segments) > max_sentences:
            pick = make_rng(seed).choice(len(segments), size=max_sentences, replace=False)
            segments = [segments[i] for i in sorted(pick.tolist())]
    return segments


def _train(segments: list[list[str]], output: Path, emb: Embeddings, settings: TrainingSettings, *, quiet: bool,
           **kw: Unpack[_TrainingOptions]) -> TrainingResult:
    """:func:`textdp.generation.training.train_rewriter` with a progress bar (or a log line every 50 steps)."""
    from ..generation.training import train_rewriter

    saved: dict[str, int | None] = {"step": None}  # the step of this run's last checkpoint (None: none yet)
    with progress_bar(disable=quiet) as bar:
        task = bar.add_task("training", total=None)
        log_lines = not quiet and not sys.stderr.isatty()
        t_start = time.perf_counter()

        def on_loss(step: int, loss: float) -> None:
            bar.update(task, description=f"training (loss {loss:.1f})")
            total = int(bar.tasks[0].total or 0)
            if log_lines and (step % 50 == 0 or step == total):  # no terminal: a line every 50 steps
                print_info(f"step {step}/{total} loss {loss:.2f} ({time.perf_counter() - t_start:.0f} s)")

        try:
            return train_rewriter(segments, output, emb, settings, progress=bar_progress(bar, task), on_loss=on_loss,
                                  on_checkpoint=lambda step: saved.update(step=step), **kw)
        except (KeyboardInterrupt, Interrupted) as exc:
            status = exc.status if isinstance(exc, Interrupted) else EXIT_SIGINT
            raise InterruptedRun(_interrupted_message(output, saved["step"]), status) from None


class _TrainingOptions(TypedDict):
    data_description: str
    declared_public: bool
    checkpoint_every: int
    init_from: Path | None
    max_steps: int | None
    max_minutes: float | None
    card_names_data: bool


def _say_result(res: TrainingResult, output: Path, n_segments: int) -> None:
    """What the run did: a line on stderr, and a JSON summary on stdout."""
    if res.already_trained:
        print_info(f"{output} already holds this trained model (its files match their hashes); nothing to do")
    elif res.stopped_early:
        print_info(f"stopped by the budget at step {res.steps} of {res.planned_steps}: {output} holds a usable "
                   "model (its card says stopped_early); run the same command again to continue training")
    elif res.resumed_from_step:
        print_info(f"resumed at step {res.resumed_from_step}; finished at step {res.steps}")
    typer.echo(json.dumps({"model_dir": str(output), "steps": res.steps, "resumed_from_step": res.resumed_from_step,
                           "seconds": round(res.seconds, 1), "already_trained": res.already_trained,
                           "stopped_early": res.stopped_early, "segments": n_segments}))


def _interrupted_message(output: Path, checkpoint_step: int | None) -> str:
    """What an interrupted training run left in ``output``, truthfully (``checkpoint_step``: that of this run's
    last checkpoint, ``None`` if it wrote none; step 0 is the checkpoint of its starting point)."""
    ckpt = output / "checkpoint.pt"
    usable = (output / "card.json").exists() and (output / "model.pt").exists()
    earlier = f"; {output / 'model.pt'} from an earlier budgeted run is unchanged and usable" if usable else ""
    if ckpt.exists():
        at = ("step 0 (the start of the run)" if checkpoint_step == 0 else
              f"step {checkpoint_step}" if checkpoint_step is not None else "an earlier step")
        return (f"training stopped; {ckpt} holds {at}{earlier}: run the same command again to resume from it "
                "(--max-steps/--max-minutes bound a run and end it with a usable model)")
    if usable:
        return f"training stopped before its first checkpoint{earlier}"
    return f"training stopped before its first checkpoint; nothing was kept in {output}"


def register(app: typer.Typer) -> None:
    """Add the ``train-rewriter`` command to ``app``."""
    app.command("train-rewriter")(train_rewriter_command)
