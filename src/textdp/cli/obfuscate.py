"""``textdp obfuscate``: Earth Mover's privacy on documents."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

# Only light modules here (no numpy, no torch): `textdp obfuscate -h` and its errors for bad option values are
# answered before the embeddings, the mechanisms and the pipeline are imported (tests/test_release_driver.py)
from .._options import (
    BAG_MODES,
    DECODER_PRECISIONS,
    DECODERS,
    OUTPUT_FORMATS,
    OUTPUT_VOCABULARIES,
    POSTPROCESSORS,
    SIZE_FROM_DATA_WARNING,
    check_size_options,
)
from .._validation import check_budget, check_epsilon, check_positive_int, check_size
from ..engines import ENGINES
from ..errors import DocumentError, ParameterError, PrivacyWarning
from ..guarantees import EMPTY_POLICIES
from ..io import (
    check_output_paths,
    check_public_file,
    check_writable_folder,
    documents_found_in,
    duplicate_ids_message,
    is_stdout,
    read_sourced_documents,
)
from ..mechanisms import MECHANISM_NAMES
from ..mechanisms.registry import REGISTRY, spoken_list
from ..release import check_file_outputs, check_ledger_options, check_private_report_path, stdout_when_done
from ._choices import choice
from ._common import (
    ENGINE_PANEL,
    EPSILON_OPTION_HELP,
    BudgetOption,
    DeltaBudgetOption,
    ForceOption,
    IdFieldOption,
    InputFormatOption,
    Interrupted,
    InterruptedRun,
    LedgerOption,
    NewLedgerOption,
    ParamOption,
    SchedulerOption,
    SeedOption,
    StopWordsOption,
    TextFieldOption,
    VocabSizeOption,
    WorkersOption,
    bar_progress,
    cli_errors,
    parse_param_options,
    parse_stop_words,
    print_info,
    print_warning,
    progress_bar,
)

if TYPE_CHECKING:
    import numpy as np
    from rich.progress import Progress

    from ..backend import Backend
    from ..embeddings import Embeddings

LARGE_INPUT_BYTES = 64 << 20  # auto engine: partition inputs at least this large


def _partitioned(engine: str, files: list[Path], scheduler: str | bool | None, partitions: int | None) -> bool:
    if engine == "single":
        if scheduler or partitions:
            raise ParameterError("--scheduler, --dashboard and --partitions need --engine local or dask")
        return False
    if engine != "auto" or scheduler or partitions:
        return True
    real = [f for f in files if str(f) != "-"]
    if any(f.name.lower().endswith((".parquet", ".pq")) for f in real):
        return True
    return sum(f.stat().st_size for f in real if f.is_file()) >= LARGE_INPUT_BYTES


EMPTY_HELP = ("A line with no in-vocabulary word (e.g. only stop words): error (stop before any noise; default), "
              "skip (no record) or empty (an empty record). With skip/empty, which lines these were is public: "
              "the guarantee says so; their count goes to --private-report.")
STRICT_IDS_HELP = ("Refuse input whose record ids repeat (default: warn on stderr, naming the first repeated id "
                   "and the count).")


def _warn_duplicates(count: int, first: str) -> None:
    print_warning(f"{duplicate_ids_message(count, first)}; give every document a unique id "
                  "(--strict-ids refuses such input)")


def public_file_digests(**files: Path | None) -> dict[str, str]:
    """``{"<name>_sha256": hex}`` for each user-named public file given (the public settings name them by content)."""
    from .._cache import public_sha256

    return {f"{name}_sha256": public_sha256(p, what=f"--{name.replace('_', '-')}")
            for name, p in files.items() if p is not None}


def _domain_words(path: Path, inputs: list[Path]) -> tuple[set[str], list[str], str]:
    """The words of a public ``--domain-vocab`` corpus, and its documents' texts (to spot an input inside it).

    The file must not be an input: a vocabulary taken from the private documents themselves
    would make the output vocabulary describe them, which the guarantee does not cover.
    """
    check_public_file(path, "--domain-vocab", inputs, why="the vocabulary must come from PUBLIC text, never from the "
                      "documents being privatized")
    from ..io import read_public_documents
    from ..text import normalize

    docs, sha = read_public_documents(path, what="--domain-vocab")  # read once, checked; its SHA-256 is public
    words: set[str] = set()
    for d in docs:
        words.update(normalize(d.text, stop_words=None))
    if not words:
        raise ParameterError(f"--domain-vocab {path}: no words found")
    return words, [d.text for d in docs], sha


def _check_epsilon_option(mechanism: str, epsilon: float | None) -> None:
    """``--epsilon`` is required unless the mechanism derives it from its own parameter (random: ``rate``).

    The class's ``epsilon_from`` is read from the generated registry index: nothing is imported to say so.
    """
    from ..mechanisms._index import EPSILON_FROM
    from ..mechanisms.registry import entry

    if epsilon is not None:
        check_epsilon(epsilon)
        return
    if EPSILON_FROM[entry(mechanism).name] is None:  # declared by the class (random: "rate")
        raise ParameterError(f"--epsilon is required for {mechanism} (e.g. -e 10; see textdp obfuscate --help)")


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


class _Decoder(Protocol):
    """What :class:`_CountingDecoder` needs of a nearest-word decoder."""

    def decode(self, z: np.ndarray, /, *args: object, **kwargs: object) -> Sized: ...


class _CountingDecoder:
    """A mechanism's nearest-word decoder that reports how many words it decoded.

    The mechanisms decode the noisy vectors of a long document block by block
    (``WORDS_PER_BLOCK`` words), so the count moves inside one document; the bar
    then shows progress where the documents bar cannot (one document of N = 300,000).
    Decoding is unchanged: every call and attribute goes to the wrapped decoder.
    """

    def __init__(self, inner: _Decoder, on_words: Callable[[int], object]) -> None:
        self._inner = inner
        self._on_words = on_words

    def decode(self, z: np.ndarray, /, *args: object, **kwargs: object) -> Sized:
        out = self._inner.decode(z, *args, **kwargs)
        self._on_words(len(out))
        return out

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def _count_words(mech: object, bar: Progress, total: int | None) -> None:
    """Add a "words" task to ``bar`` that moves as ``mech`` decodes (mechanisms with a decoder)."""
    inner = getattr(mech, "decoder_", None)
    if inner is None or not hasattr(inner, "decode"):
        return
    task = bar.add_task("words decoded", total=total)
    setattr(mech, "decoder_", _CountingDecoder(inner, lambda n: bar.advance(task, n)))  # noqa: B010 - any mechanism


# -- the options, declared once ---------------------------------------------------------------------------
Files = Annotated[list[Path] | None, typer.Argument(
    help="Text files (one document each), JSONL files (one document per line) or Parquet files (.parquet or .pq: "
    "one document per row, in the --text-field column). None or '-' reads standard input.",
    show_default=False, metavar="FILES")]
Epsilon = Annotated[float | None, typer.Option(
    "--epsilon", "-e", help=EPSILON_OPTION_HELP + " Required, except for random with --param rate=R (its epsilon "
    "then follows from the rate).", show_default=False)]
MechanismOption = Annotated[str, choice(  # the names from the registry's index (no numpy), grouped by what they release
    MECHANISM_NAMES, metavar="NAME", help="Mechanism (README table). Bags of --size words: "
    + spoken_list([n for n in MECHANISM_NAMES if REGISTRY[n].releases == "bag"]) + ". Text, each word replaced in "
    "place (no --size): " + spoken_list([n for n in MECHANISM_NAMES if REGISTRY[n].releases == "text"]) + ".")]
PostProcessOption = Annotated[str | None, choice(
    POSTPROCESSORS, help="mbr: decode to the posterior medoid among the noisy vector's nearest words (semantic "
    "neighbours; earth-movers and cmp). Post-processing: the guarantee is unchanged.")]
Size = Annotated[int | None, typer.Option(
    "--size", "-n", help="Bag size N, required by the bag mechanisms (earth-movers, syntf) unless --size-from-data, "
    "refused by the text mechanisms: every document becomes exactly N words (the guarantee compares bags of equal "
    "size). N is public: it is written in every record.")]
SizeFromData = Annotated[bool, typer.Option(
    "--size-from-data", help="Instead of --size, use the shortest document's in-vocabulary length as N (the "
    "paper's protocol). N is published, so this REVEALS that length.")]
Bag = Annotated[str, choice(
    BAG_MODES, help="truncate: first N words (paper's experiments); sample: N words drawn with replacement (works "
    "for short documents; guarantee epsilon*N*W_inf between documents).")]
EmbeddingsPath = Annotated[Path | None, typer.Option(
    help="Embeddings file (GloVe/word2vec text, word2vec .bin, or .npy with --words). Default: GloVe 6B 50d.")]
WordsPath = Annotated[Path | None, typer.Option(help="Words file (one per line) for a .npy matrix.")]
DomainVocab = Annotated[Path | None, typer.Option(
    help="Restrict the vocabulary to words of this PUBLIC text/JSONL corpus (avoids out-of-domain outputs). Do not "
    "derive it from the private documents themselves.")]
OutputVocabOption = Annotated[str, choice(
    OUTPUT_VOCABULARIES, help="full: any vocabulary row may be released; words: only letter words that are not "
    "stop words (no punctuation tokens, numbers or stop words in the output).")]
Output = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Output file (written atomically), or the output folder of a partitioned run. Default: "
    "stdout.")]
Format = Annotated[str, choice(OUTPUT_FORMATS, "--format", help="jsonl records or the private words as text.")]
PrivateReport = Annotated[Path | None, typer.Option(
    help="Write a PRIVATE report here (JSONL, one line per record id): where each document came from, its token "
    "and unknown-word counts, the unchanged fraction and mean neighbour rank. It describes the input: never "
    "publish it.")]
DecoderOption = Annotated[str, choice(
    DECODERS, metavar="NAME", help="Nearest-word decoder. exact (default), faiss-exact, torch: identical results. "
    "approximate/hnsw, ivf: faster, opt-in; decoding is post-processing so the guarantee is unchanged, but some "
    "words differ from exact decoding.")]
KnownSource = Annotated[bool, typer.Option(
    "--known-source", help="Let the decoder use the input words to skip work (same words; faster at epsilon >= "
    "~35). Its running time then depends on the private words, a timing side channel the guarantee does not "
    "cover: for experiments only.")]
EngineOption = Annotated[str, choice(
    ("auto", "single", *ENGINES), metavar="NAME", rich_help_panel=ENGINE_PANEL,
    help="auto, single, local or dask. single: one process, one output file. local/dask: partitioned, resumable "
    "output directory (dask: a local cluster, or --scheduler). auto: dask for Parquet or inputs >= 64 MB or "
    "when --scheduler/--partitions is given, else single.")]
Dashboard = Annotated[bool, typer.Option(
    "--dashboard", rich_help_panel=ENGINE_PANEL,
    help="Serve the local Dask cluster's dashboard on 127.0.0.1 (off by default: any local user could read it).")]
Partitions = Annotated[int | None, typer.Option(
    rich_help_panel=ENGINE_PANEL,
    help="Number of partitions (default: one per 500 documents). Part of the run's identity: the same seed and "
    "partitions give the same output.")]
WorkDir = Annotated[Path | None, typer.Option(
    rich_help_panel=ENGINE_PANEL,
    help="Private work directory of a partitioned run (resume key, spilled inputs, vocabulary; workers must be able "
    "to read it). Default: under the textdp cache, found again by the same command. Never inside the output.")]
StrictIds = Annotated[bool, typer.Option("--strict-ids", help=STRICT_IDS_HELP)]
ThreadsOption = Annotated[int | None, typer.Option(
    "--threads", help="Threads of the exact nearest-word decoder (default: one per CPU core; same words whatever "
    "the count). --engine single only: partitioned runs give each worker its share of the cores.")]
DecoderPrecision = Annotated[str, choice(
    DECODER_PRECISIONS, "--decoder-precision", metavar="PRECISION",
    help="Score precision of the exact decoder: auto (default: bfloat16 on a CPU with bfloat16 arithmetic when a "
    "one-off timing shows it faster, else float32), float32, bfloat16 (needs torch). The words are the same: "
    "candidates within a proven rounding margin are re-ranked in float64. --engine single only.")]
Empty = Annotated[str, choice(EMPTY_POLICIES, metavar="POLICY", help=EMPTY_HELP)]


@dataclass(frozen=True)
class _Options:
    """What ``textdp obfuscate`` was given (one field per option)."""

    files: list[Path] | None
    epsilon: float | None
    mechanism: str
    postprocess: str | None
    param: list[str] | None
    size: int | None
    size_from_data: bool
    bag: str
    embeddings: Path | None
    words: Path | None
    vocab_size: int | None
    domain_vocab: Path | None
    stop_words: str
    output_vocab: str
    seed: int | None
    output: Path | None
    fmt: str
    text_field: str
    id_field: str
    input_format: str
    private_report: Path | None
    decoder: str
    known_source: bool
    engine: str
    scheduler: str | None
    dashboard: bool
    partitions: int | None
    workers: int | None
    work_dir: Path | None
    force: bool
    strict_ids: bool
    empty: str
    threads: int | None = None
    decoder_precision: str = "auto"
    ledger: Path | None = None
    budget: float | None = None
    delta_budget: float | None = None
    new_ledger: bool = False

    @property
    def budget_pair(self) -> tuple[float, float] | None:
        """``--budget`` and ``--delta-budget`` as the ledger's ``(ε, δ)`` budget."""
        return check_budget(self.budget, self.delta_budget)

    @property
    def inputs(self) -> list[Path]:
        return list(self.files or [])

    @property
    def read_too(self) -> list[Path | None]:
        """Every file the command reads: no output may replace one."""
        return [*self.inputs, self.embeddings, self.words, self.domain_vocab]

    @property
    def ledger_options(self) -> dict[str, object]:
        """The ledger options as the release driver takes them (:func:`textdp.release.release`)."""
        return {"ledger": self.ledger, "budget": self.budget_pair, "new_ledger": self.new_ledger}


def obfuscate(
    files: Files = None,
    epsilon: Epsilon = None,
    mechanism: MechanismOption = "earth-movers",
    postprocess: PostProcessOption = None,
    param: ParamOption = None,
    size: Size = None,
    size_from_data: SizeFromData = False,
    bag: Bag = "truncate",
    embeddings: EmbeddingsPath = None,
    words: WordsPath = None,
    vocab_size: VocabSizeOption = None,
    domain_vocab: DomainVocab = None,
    stop_words: StopWordsOption = "english",
    output_vocab: OutputVocabOption = "full",
    seed: SeedOption = None,
    output: Output = None,
    fmt: Format = "jsonl",
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    input_format: InputFormatOption = "auto",
    private_report: PrivateReport = None,
    decoder: DecoderOption = "exact",
    known_source: KnownSource = False,
    engine: EngineOption = "auto",
    scheduler: SchedulerOption = None,
    dashboard: Dashboard = False,
    partitions: Partitions = None,
    workers: WorkersOption = None,
    work_dir: WorkDir = None,
    force: ForceOption = False,
    strict_ids: StrictIds = False,
    empty: Empty = "error",
    threads: ThreadsOption = None,
    decoder_precision: DecoderPrecision = "auto",
    ledger: LedgerOption = None,
    budget: BudgetOption = None,
    delta_budget: DeltaBudgetOption = None,
    new_ledger: NewLedgerOption = False,
) -> None:
    """Obfuscate documents with a privacy mechanism (default: Earth Mover's privacy).

    --mechanism picks any registered mechanism (see the README table); text mechanisms
    (cmp, mahalanobis, vickrey, tem, santext(+), custext(+), random) replace each word
    in place and write {"id", "text", ...} records without --size; bag mechanisms
    (earth-movers, syntf) release a bag of exactly --size words.

    Each document is lower-cased, stripped of punctuation and stop words, reduced to a bag of N
    in-vocabulary words (unknown words are dropped, never copied), and every word is replaced by the
    word nearest to its embedding plus n-dimensional Laplace noise. Each output record holds the id,
    the private words and the public parameters with the guarantee: epsilon·N·E_d-privacy.

    Large inputs (Parquet, JSONL) run partitioned (--engine local/dask): the output is a folder of
    part files plus manifest.json and settings.json (public); the run's private state lives in
    --work-dir; re-running the same command after a crash finishes the missing parts only.
    """
    if is_stdout(output):  # -o - and -o /dev/stdout: standard output, never a path to replace
        output = None
    o = _Options(**locals())  # the parameters, and nothing else yet
    with cli_errors():
        stops, partitioned = _check_options(o)
        from ..embeddings import load_embeddings, output_vocabulary, vocabulary_fingerprint  # after the checks

        domain, domain_texts, domain_sha = (_domain_words(o.domain_vocab, o.inputs) if o.domain_vocab is not None
                                            else (None, [], None))
        emb = load_embeddings(o.embeddings, words_path=o.words, vocab_size=o.vocab_size, domain_words=domain)
        emb = output_vocabulary(emb, o.output_vocab, stops)
        extra: dict[str, object] = {"vocab_size_limit": o.vocab_size, "domain_vocab": o.domain_vocab is not None,
                                    "vocabulary_fingerprint": vocabulary_fingerprint(emb.vectors),
                                    "decoder_precision": o.decoder_precision,
                                    **public_file_digests(embeddings=o.embeddings, words=o.words),
                                    **({"domain_vocab_sha256": domain_sha} if domain_sha else {})}
        if partitioned:
            _run_partitioned(o, emb, stops, extra)
        else:
            _run_single(o, emb, stops, extra, domain_texts)


def _check_options(o: _Options) -> tuple[str | None, bool]:
    """Validate the options before any work; return the stop-word list and whether the run is partitioned.

    No check imports the mechanism's class or numpy (fast errors): ``--param`` and a missing ``--epsilon`` are
    checked against the parameters the generated registry index records for the class.
    """
    from ..mechanisms.registry import entry

    check_size_options(o.mechanism, entry(o.mechanism).releases, o.size, o.size_from_data)
    if o.threads is not None:
        check_positive_int(o.threads, "threads")
    if o.size is not None:
        check_size(o.size)
    for f in o.inputs:  # a mistyped file name is said before the vocabulary is loaded
        if str(f) != "-" and not f.exists():
            raise DocumentError(f"{f}: no such file")
    stops = parse_stop_words(o.stop_words)
    partitioned = _partitioned(o.engine, o.inputs, o.scheduler or o.dashboard, o.partitions)
    if partitioned and o.epsilon is None:
        raise ParameterError("partitioned runs need --epsilon (--param rate=R runs with --engine single)")
    if partitioned and o.threads is not None:
        raise ParameterError("--threads applies to --engine single; partitioned runs give each worker its share "
                             "of the cores")
    if partitioned and o.decoder_precision != "auto":
        raise ParameterError("--decoder-precision applies to --engine single; partitioned runs use auto")
    check_ledger_options(o.ledger, budget=o.budget_pair, new_ledger=o.new_ledger, output=o.output, inputs=o.read_too)
    if not partitioned:
        check_file_outputs(o.output, o.private_report, inputs=o.read_too, force=o.force, new_folders=False)
    elif o.private_report is not None:
        check_private_report_path(o.private_report, output=o.output, inputs=o.inputs, partitioned=True)
        check_output_paths([("--private-report", o.private_report)], inputs=o.read_too, force=o.force,
                           existing=False, new_folders=False)  # an existing one: refused by the run, unless complete
    parse_param_options(o.mechanism, o.param)
    _check_epsilon_option(o.mechanism, o.epsilon)
    return stops, partitioned


def _run_single(o: _Options, emb: Embeddings, stops: str | None, extra: dict[str, object],
                domain_texts: list[str]) -> None:
    """One process, one output file (or standard output): the release driver, :func:`textdp.release.release`."""
    from ..engines.single import obfuscate_settings
    from ..pipeline import build_mechanism, parse_params
    from ..release import release

    mech = build_mechanism(
        o.mechanism, epsilon=o.epsilon,  # type: ignore[arg-type]  # None: random derives it from its rate
        size=o.size, size_from_data=o.size_from_data, embeddings=emb, bag=o.bag,
        stop_words=stops, seed=o.seed, decoder=o.decoder, known_source=o.known_source, postprocess=o.postprocess,
        params=parse_params(o.param),
    )
    if o.threads is not None:
        mech.limit_threads(o.threads)
    mech.set_decoder_precision(o.decoder_precision)
    if all(str(f) == "-" for f in o.inputs) and _stdin_is_terminal():
        print_info("reading documents from standard input (type them, then Ctrl-D); give FILES to read files "
                   "(see: textdp obfuscate --help)")
    docs = read_sourced_documents(o.inputs, text_field=o.text_field, id_field=o.id_field,
                                  input_format=o.input_format)
    inside = documents_found_in(domain_texts, (d.text for d in docs)) if domain_texts else 0
    if inside:
        print_warning(f"{inside} input document(s) appear verbatim in --domain-vocab {o.domain_vocab}; the "
                      "vocabulary must come from PUBLIC text, not from the documents being privatized")
    small = len(docs) < 2 and sum(len(d.text) for d in docs) < 200_000 and (o.size or 0) < 20_000
    if not docs:
        raise ParameterError("input has no documents (an empty file holds none)")
    stdout = stdout_when_done() if o.output is None else contextlib.nullcontext(None)
    with stdout as fh, progress_bar(disable=small) as bar, \
            _privacy_warnings_on_stderr():  # the release goes out last, after the bar and the small files
        task = bar.add_task("obfuscating (documents)", total=len(docs))
        _count_words(mech, bar, o.size * len(docs) if o.size is not None else None)
        summary = release(mech, docs, fh if fh is not None else o.output, private_report=o.private_report, force=o.force, fmt=o.fmt,
                          empty=o.empty, command="obfuscate", strict_ids=o.strict_ids,
                          on_duplicate_ids=_warn_duplicates, progress=bar_progress(bar, task), inputs=o.read_too,
                          settings=obfuscate_settings(mech, known_source=o.known_source, stop_words=stops,
                                                      extra=extra), **o.ledger_options)  # type: ignore[arg-type]
    if summary.ledger_note:
        print_warning(summary.ledger_note)
    if summary.skipped:  # the count only: ids describe the private input
        where = (f"their ids are in the private report {o.private_report}" if o.private_report is not None
                 else "give --private-report FILE to see which")
        print_warning(f"--empty skip left out {summary.skipped} of {len(docs)} document(s) with nothing to release "
                      f"({where})")


@contextlib.contextmanager
def _privacy_warnings_on_stderr() -> Iterator[None]:
    """Print the :class:`~textdp.errors.PrivacyWarning` raised inside as ``warning: ...`` lines, at the end."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        yield
    for w in caught:
        if issubclass(w.category, PrivacyWarning):
            print_warning(w.message)
        else:  # pragma: no cover - other warnings keep their usual route
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _run_partitioned(o: _Options, emb: Embeddings, stops: str | None, extra: dict[str, object]) -> None:
    """A partitioned, resumable run: :func:`textdp.engines.corpus.obfuscate_corpus` on a backend."""
    from ..engines.corpus import MANIFEST, obfuscate_corpus
    from ..pipeline import parse_params

    output, files = o.output, o.inputs
    if output is None:
        raise ParameterError(_no_output_message(o))
    check_writable_folder(output, "--output")  # refused here, it leaves no interrupted run in the cache
    # a pipe, a process substitution or standard input is read once into the run's private state
    streamed = not files or any(str(f) == "-" or (f.exists() and not f.is_file()) for f in files)
    if o.input_format == "text" and any(f.name.lower().endswith((".parquet", ".pq")) for f in files):
        raise ParameterError("--input-format text cannot read Parquet")
    if o.partitions is not None:
        check_positive_int(o.partitions, "partitions")
    if o.workers is not None:
        check_positive_int(o.workers, "workers")
    backend = _backend(o)
    work: list[Path] = []
    try:
        with progress_bar() as bar:
            task = bar.add_task("obfuscating (documents)", total=None)
            obfuscate_corpus(
                files, output, embeddings=emb, epsilon=o.epsilon,  # type: ignore[arg-type]  # checked: not None
                size=o.size, size_from_data=o.size_from_data, bag=o.bag, stop_words=stops,
                decoder=o.decoder, known_source=o.known_source, seed=o.seed, backend=backend,
                partitions=o.partitions, text_field=o.text_field, id_field=o.id_field,
                input_format=o.input_format, fmt=o.fmt, work_dir=o.work_dir,
                private_report=o.private_report, extra_settings=extra,
                on_size_from_data=lambda n: print_warning(SIZE_FROM_DATA_WARNING.format(n=n)),
                mechanism=o.mechanism, postprocess=o.postprocess, params=parse_params(o.param),
                progress=bar_progress(bar, task), force=o.force, strict_ids=o.strict_ids,
                on_duplicate_ids=_warn_duplicates, empty=o.empty, on_ledger=_ledger_note, on_work_dir=work.append,
                **o.ledger_options,  # type: ignore[arg-type]
            )
    except (KeyboardInterrupt, Interrupted) as exc:
        status = exc.status if isinstance(exc, Interrupted) else 130
        raise InterruptedRun(_interrupted_message(output, MANIFEST, work[0] if work else None, streamed=streamed),
                             status) from None
    finally:
        backend.close()


def _ledger_note(_events: int, note: str | None) -> None:
    """Print what ``--new-ledger`` forgot (a partitioned run's charge)."""
    if note:
        print_warning(note)


def _backend(o: _Options) -> Backend:
    """The engine's backend (its privacy warnings, e.g. a plain tcp:// scheduler, on stderr)."""
    from ..engines import get_backend

    name = "local" if o.engine == "local" else "dask"
    if o.engine == "auto" and not _dask_installed():
        raise ParameterError("--engine auto runs Parquet and inputs of 64 MB or more on Dask, whose extra [dask] is "
                             "not installed; add --engine local (the same partitioned run in local processes, no "
                             "extra needed), or --engine single for one output file")
    with warnings.catch_warnings():  # printed as issued: a tcp:// warning comes before the connection attempt
        warnings.simplefilter("always", PrivacyWarning)
        warnings.showwarning = lambda message, *_a, **_k: print_warning(message)
        backend = get_backend(name, scheduler=o.scheduler, workers=o.workers, dashboard=o.dashboard)
    link = getattr(backend, "dashboard_link", None)
    if link:
        print_info(f"dashboard: {link}")
    return backend


def _dask_installed() -> bool:
    """Whether the [dask] extra's ``distributed`` is importable (found without importing it: that takes a second)."""
    import importlib.util

    if "distributed" in sys.modules:
        return sys.modules["distributed"] is not None
    return importlib.util.find_spec("distributed") is not None


def _no_output_message(o: _Options) -> str:
    """What a partitioned run without ``-o`` says: how to give it a folder, or how to run it as one file."""
    if o.engine != "auto":
        return f"--engine {o.engine} runs partitioned and needs --output DIRECTORY (part files + manifest.json)"
    if o.scheduler or o.dashboard or o.partitions:
        return "--scheduler, --dashboard and --partitions run partitioned and need --output DIRECTORY"
    why = ("Parquet input" if any(f.name.lower().endswith((".parquet", ".pq")) for f in o.inputs) else
           "input of 64 MB or more")
    return (f"{why} runs partitioned by default (--engine auto), which writes a folder: give -o DIRECTORY"
            + ("" if _dask_installed() else " and --engine local (no extra needed)")
            + ", or --engine single to write one file or standard output")


def _start_over(work: Path | None) -> str:
    """How to delete an interrupted run's private state: ``textdp runs clean NAME`` (a work directory in the
    cache), or the ``--work-dir`` folder itself."""
    from ..engines.workdir import runs_dir

    if work is None:
        return "textdp runs clean (see textdp runs list)"
    if work.parent.absolute() == runs_dir().absolute():
        return f"textdp runs clean {work.name}"
    return f"delete the work directory {work}"


def _interrupted_message(output: Path, manifest_name: str, work: Path | None = None, *,
                         streamed: bool = False) -> str:
    """What an interrupted partitioned run leaves behind, truthfully, and how to start over (a run that read a
    stream cannot resume, and keeps nothing)."""
    import json

    done = sorted(p.name for p in output.glob("part-*") if p.is_file()) if output.is_dir() else []
    total: int | str = "?"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        total = len(json.loads((output / manifest_name).read_text(encoding="utf-8"))["parts"])
    clean = _start_over(work)
    if not (output / manifest_name).exists():
        kept = work is not None and work.exists()  # its private state was made: say how to delete it
        return f"the run had not started writing {output}; nothing was released" + (
            f"; run the same command again to resume, or delete its private state: {clean}" if kept else "")
    if streamed:
        return (f"{len(done)} of {total} part files are finished in {output}, but the run read a pipe or standard "
                "input, which cannot be read again, so it cannot resume: delete the folder and run again")
    return (f"{len(done)} of {total} part files are finished in {output} (each complete; the run is not); "
            f"run the same command again to finish the rest, or start over: delete the folder and {clean} (the "
            "run's private copy of the inputs; textdp runs list shows a run whose folder is gone as orphaned)")


def register(app: typer.Typer) -> None:
    """Add the ``obfuscate`` command to ``app``."""
    app.command("obfuscate")(obfuscate)
