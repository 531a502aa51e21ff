"""``textdp guarantee`` and ``textdp calibrate``: the numbers behind a release."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from .._validation import check_epsilon, check_size
from ..accounting.emd import METRICS
from ..errors import DocumentError, ParameterError
from ..text import BAG_MODES
from ._choices import choice
from ._common import (
    EPSILON_HELP_TEXT,
    EPSILON_OPTION_HELP,
    InputFormatOption,
    StopWordsOption,
    TextFieldOption,
    VocabSizeOption,
    bar_and_lines,
    cli_errors,
    parse_stop_words,
    progress_bar,
)

if TYPE_CHECKING:
    from ..accounting.bounds import DocumentGuarantee
    from ..accounting.calibration import Calibration, DiagnosticRow
    from ..embeddings import Embeddings


def _load(embeddings: Path | None, words: Path | None, vocab_size: int | None) -> Embeddings:
    from ..embeddings import load_embeddings

    return load_embeddings(embeddings, words_path=words, vocab_size=vocab_size)


def _read(path: Path) -> str:
    """A plain-text file (calibration words)."""
    from ..io import read_documents

    docs = read_documents([path], input_format="text")
    return docs[0][1]


def _read_document(path: Path, *, text_field: str, input_format: str) -> str:
    """The one document of ``path``, read exactly as ``textdp obfuscate`` reads its inputs."""
    from ..io import read_documents

    docs = read_documents([path], text_field=text_field, input_format=input_format)
    if len(docs) != 1:
        raise DocumentError(
            f"{path}: holds {len(docs)} documents; guarantee compares two single documents (give a text file, "
            "or a JSONL file with one line)"
        )
    return docs[0][1]


def _dump(obj: dict[str, object]) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=2)


DocA = Annotated[Path, typer.Argument(
    help="First document: a text file, or a JSONL file holding one document ('-': standard input).",
    show_default=False)]
DocB = Annotated[Path, typer.Argument(help="Second document, likewise.", show_default=False)]
Epsilon = Annotated[float, typer.Option("--epsilon", "-e", help=EPSILON_OPTION_HELP)]
Size = Annotated[int | None, typer.Option(
    "--size", "-n", help="Bag size N of the release. Default: the shorter document's in-vocabulary length.")]
Bag = Annotated[str, choice(
    BAG_MODES, help="How the release forms bags: truncate (first N words; bound exp(epsilon*N*E_d) between the "
    "bags) or sample (N words drawn from the document; bound exp(epsilon*N*W_inf) between the documents' word "
    "distributions).")]
MetricOption = Annotated[str, choice(
    METRICS, help="Ground metric between word vectors. The theorem uses euclidean; manhattan gives a larger, still "
    "valid loss.")]
EmbeddingsPath = Annotated[Path | None, typer.Option(help="Embeddings file. Default: GloVe 6B 50d.")]
WordsPath = Annotated[Path | None, typer.Option(help="Words file for a .npy matrix.")]
TargetUnchanged = Annotated[float, typer.Option(
    "--target-unchanged", "-t", help="Fraction of words the release should keep unchanged (0-1). 0.5 = about half "
    "of the words survive.")]
NWords = Annotated[int, typer.Option("--n-words", help="Number of calibration words.")]
RankMin = Annotated[int, typer.Option(help="Lowest frequency rank of the calibration words.")]
RankMax = Annotated[int, typer.Option(help="Highest frequency rank of the calibration words.")]
CalibrationWords = Annotated[Path | None, typer.Option(
    help="Use these words (one per line) instead of a random sample.")]
Repeats = Annotated[int, typer.Option(help="Noise draws per word.")]
Epsilons = Annotated[str, typer.Option(
    help="Comma-separated epsilons for the diagnostic table (the calibrated one is added). Empty: no table.")]
Confidence = Annotated[float, typer.Option(help="Confidence level of the intervals.")]
Seed = Annotated[int | None, typer.Option(help="Seed (word sample and noise). Default: fresh entropy.")]


def guarantee(
    doc_a: DocA,
    doc_b: DocB,
    epsilon: Epsilon = ...,  # type: ignore[assignment]
    size: Size = None,
    bag: Bag = "truncate",
    metric: MetricOption = "euclidean",
    embeddings: EmbeddingsPath = None,
    words: WordsPath = None,
    vocab_size: VocabSizeOption = None,
    stop_words: StopWordsOption = "english",
    text_field: TextFieldOption = "text",
    input_format: InputFormatOption = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Emit a JSON object instead of a table.")] = False,
) -> None:
    """How distinguishable two documents stay after Earth Mover's privacy.

    Both documents are read and prepared exactly as `textdp obfuscate` would (the same reader and
    --text-field/--input-format options; lower-case, stop words and unknown words removed). With --bag truncate (bags of the first N words) any output is at most
    exp(epsilon·N·E_d) times more likely from one document than from the other (Theorem 5.1); E_d is
    the Earth Mover's distance between the bags (mean distance of the best word-to-word matching). With
    --bag sample the bound is exp(epsilon·N·W_inf), W_inf being the infinity-Wasserstein (bottleneck)
    distance between the two documents' word distributions. A privacy loss below ~1 means the two are
    hard to tell apart; the command also prints the epsilon that would give a loss of 1. The numbers
    describe the two private documents: they are for the data owner, not for release.
    """
    from ..accounting.bounds import document_guarantee

    with cli_errors():
        check_epsilon(epsilon)
        if size is not None:
            check_size(size)
        stops = parse_stop_words(stop_words)
        if str(doc_a) == "-" and str(doc_b) == "-":
            raise ParameterError("only one of the two documents can be standard input ('-')")
        text_a = _read_document(doc_a, text_field=text_field, input_format=input_format)
        text_b = _read_document(doc_b, text_field=text_field, input_format=input_format)
        emb = _load(embeddings, words, vocab_size)
        g = document_guarantee(
            text_a,
            text_b,
            epsilon=epsilon,
            size=size,
            embeddings=emb,
            bag=bag,
            stop_words=stops,
            metric=metric,
            names=(doc_a.name, doc_b.name),
        )
        if as_json:
            out = g.to_dict()
            out["documents"] = [str(doc_a), str(doc_b)]
            typer.echo(_dump(out))
            return
        _print_guarantee(g, (doc_a.name, doc_b.name))


def _print_guarantee(g: DocumentGuarantee, names: tuple[str, str]) -> None:
    """The guarantee of two documents as a table."""
    console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
    for name, tokens, oov, inv in (
        (names[0], g.n_tokens_a, g.dropped_oov_a, g.words_a),
        (names[1], g.n_tokens_b, g.dropped_oov_b, g.words_b),
    ):
        what = f"-> bag of {g.size}" if g.bag == "truncate" else f"-> {g.size} words drawn from them"
        console.print(f"{name}: {tokens} words after normalisation, {oov} unknown, {inv} in vocabulary {what}")
    d = g.distance_name
    table = Table(title=f"Earth Mover's privacy guarantee (epsilon={g.epsilon:g}, N={g.size}, bag={g.bag})",
                  show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    if g.bag == "sample":
        table.add_row(f"W_inf of the word distributions ({g.metric}, {g.embeddings})", f"{g.distance:.4f}")
    else:
        table.add_row(f"E_d ({g.metric}, {g.embeddings})", f"{g.distance:.4f}")
        table.add_row("N * E_d (matched distance)", f"{g.total_distance:.3f}")
    table.add_row(f"privacy loss epsilon*N*{d}", f"{g.privacy_loss:.3f} nats")
    table.add_row(f"multiplier exp(epsilon*N*{d})", g.multiplier_text)
    if g.epsilon_for_unit_loss is not None:
        table.add_row("epsilon giving a loss of 1", f"{g.epsilon_for_unit_loss:.3g}")
    console.print(table)


def calibrate(
    target_unchanged: TargetUnchanged = 0.5,
    embeddings: EmbeddingsPath = None,
    words: WordsPath = None,
    vocab_size: VocabSizeOption = None,
    n_words: NWords = 300,
    rank_min: RankMin = 1000,
    rank_max: RankMax = 6000,
    calibration_words: CalibrationWords = None,
    repeats: Repeats = 3,
    epsilons: Epsilons = "4,7,10,20,40",
    stop_words: StopWordsOption = "english",
    confidence: Confidence = 0.95,
    seed: Seed = None,
    as_json: Annotated[bool, typer.Option("--json", help="Emit a JSON object instead of tables.")] = False,
) -> None:
    """Find the epsilon that keeps a target fraction of words unchanged, and show what epsilons do.

    Epsilon's effect depends on the embeddings (the noise length is dimension/epsilon), so choose it
    by its effect: the share of words the mechanism maps back to themselves, and how far (in
    neighbour rank: 0 = kept, 1 = nearest other word) the others move. Monte Carlo on a sample of
    words with exact decoding; intervals by bootstrap over words.
    """
    from ..accounting.calibration import calibrate_epsilon, diagnose

    with cli_errors():
        try:
            table_eps = [float(x) for x in epsilons.split(",") if x.strip()]
        except ValueError:
            raise ParameterError(f"--epsilons must be comma-separated numbers, got {epsilons!r}") from None
        emb = _load(embeddings, words, vocab_size)
        word_list = None
        if calibration_words is not None:
            word_list = [w.strip() for w in _read(calibration_words).split() if w.strip()]
        with progress_bar(disable=as_json) as bar:  # minutes at 400,000 words: a bar, or lines in a log
            task = bar.add_task("calibrating (vocabulary scanned)", total=None)
            cal, curve = calibrate_epsilon(
                target_unchanged,
                emb,
                confidence=confidence,
                seed=seed,
                words=word_list,
                n_words=n_words,
                ranks=(rank_min, rank_max),
                repeats=repeats,
                stop_words=parse_stop_words(stop_words),
                progress=bar_and_lines(bar, task, "calibrate: vocabulary scanned", quiet=as_json),
            )
        eps_list = sorted(set(table_eps) | {cal.epsilon}) if table_eps else []
        rows = []
        if eps_list:
            with progress_bar(disable=as_json) as bar:
                task = bar.add_task("decoding", total=len(eps_list))
                rows = diagnose(curve, eps_list, emb, confidence=confidence, seed=seed,
                                progress=bar_and_lines(bar, task, "calibrate: epsilons decoded", quiet=as_json))
        if as_json:
            out = cal.to_dict()
            out["diagnostics"] = [r.to_dict() for r in rows]
            typer.echo(_dump(out))
            return
        _print_calibration(cal, rows, confidence)


def _print_calibration(cal: Calibration, rows: Sequence[DiagnosticRow], confidence: float) -> None:
    """The calibrated epsilon, and the table of what each epsilon does to words."""
    console = Console(highlight=False, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(highlight=False, markup=False, emoji=False, width=110)
    pct = f"{confidence:.0%}"
    console.print(
        f"epsilon = {cal.epsilon:.3g} keeps {cal.target_unchanged:.0%} of words unchanged "
        f"({pct} interval {cal.epsilon_low:.3g}-{cal.epsilon_high:.3g}; {cal.n_words} words x {cal.repeats} draws, "
        f"{cal.embeddings}, n={cal.dim}, V={cal.vocab_size})"
    )
    if not rows:
        return
    table = Table(title="What epsilon does to words")
    for col in ("epsilon", "noise length", "unchanged", f"{pct} CI", "mean rank", "median rank",
                "p90 rank", "rank<=10"):
        table.add_column(col, justify="right")
    for r in rows:
        mark = " *" if math.isclose(r.epsilon, cal.epsilon) else ""
        table.add_row(
            f"{r.epsilon:.3g}{mark}", f"{r.mean_noise_length:.2f}", f"{r.unchanged_fraction:.3f}",
            f"{r.unchanged_low:.3f}-{r.unchanged_high:.3f}", f"{r.mean_neighbour_rank:.1f}",
            f"{r.median_neighbour_rank:.0f}", f"{r.p90_neighbour_rank:.0f}", f"{r.within_10_neighbours:.3f}",
        )
    console.print(table)
    console.print("rank = position of the output word among the input word's nearest neighbours "
                  "(0 = unchanged); * = calibrated epsilon")


def register(app: typer.Typer) -> None:
    """Add the ``guarantee`` and ``calibrate`` commands to ``app``."""
    app.command("guarantee", help=(guarantee.__doc__ or "") + "\n\n" + EPSILON_HELP_TEXT)(guarantee)
    app.command("calibrate", help=(calibrate.__doc__ or "") + "\n\n" + EPSILON_HELP_TEXT)(calibrate)
