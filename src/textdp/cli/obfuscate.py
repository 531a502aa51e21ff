"""``textdp obfuscate``: Earth Mover's privacy on documents."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from .._validation import check_epsilon, check_positive_int, check_size
from ..embeddings import load_embeddings, output_vocabulary, vocabulary_fingerprint
from ..errors import DocumentError, ParameterError, PrivacyWarning
from ..io import (
    atomic_writer,
    check_output_paths,
    duplicate_ids_message,
    find_duplicate_ids,
    read_documents,
    read_sourced_documents,
    same_file,
    sequence_ids,
    settings_path,
    write_json,
)
from ..mechanisms.common import SIZE_FROM_DATA_WARNING
from ..pipeline import (
    build_mechanism,
    check_private_report_path,
    check_size_options,
    iter_privatize_documents,
    mechanism_guarantee,
    parse_params,
    release_guarantee,
    release_settings,
    write_private_report,
    write_records,
)
from ..text import normalize
from ._choices import BagMode, EmptyPolicy, InputFormat, OutputFormat, OutputVocab, PostProcess
from ._choices import Decoder as DecoderName
from ._choices import Mechanism as MechanismName
from ._choices import ObfuscateEngine as EngineName
from ._common import (
    EPSILON_OPTION_HELP,
    FORCE_HELP,
    Interrupted,
    InterruptedRun,
    bar_progress,
    cli_errors,
    parse_stop_words,
    print_info,
    print_warning,
    progress_bar,
)

LARGE_INPUT_BYTES = 64 << 20  # auto engine: partition inputs at least this large


def _partitioned(engine: EngineName, files: list[Path], scheduler: str | bool | None, partitions: int | None) -> bool:
    if engine is EngineName.single:
        if scheduler or partitions:
            raise ParameterError("--scheduler, --dashboard and --partitions need --engine local or dask")
        return False
    if engine is not EngineName.auto or scheduler or partitions:
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


@contextlib.contextmanager
def _stdout_when_done() -> Iterator[IO[str]]:
    """A file that goes to standard output only once everything is written (nothing partial on errors)."""
    with tempfile.SpooledTemporaryFile(max_size=32 << 20, mode="w+", encoding="utf-8", newline="\n") as tmp:
        yield tmp
        tmp.seek(0)
        shutil.copyfileobj(tmp, sys.stdout)
        sys.stdout.flush()


def _domain_words(path: Path, inputs: list[Path]) -> tuple[set[str], set[str]]:
    """The words of a public ``--domain-vocab`` corpus, and its documents' texts (to spot an input inside it).

    The file must not be an input: a vocabulary taken from the private documents themselves
    would make the output vocabulary describe them, which the guarantee does not cover.
    """
    for q in inputs:
        if str(q) != "-" and same_file(path, q):
            raise ParameterError(f"--domain-vocab {path} is the input file {q}; the vocabulary must come from "
                                 "PUBLIC text, never from the documents being privatized")
    docs = read_documents([path], input_format="auto")
    words: set[str] = set()
    for _, text in docs:
        words.update(normalize(text, stop_words=None))
    if not words:
        raise ParameterError(f"--domain-vocab {path}: no words found")
    return words, {text.strip() for _, text in docs if text.strip()}


def _check_epsilon_option(mechanism: str, epsilon: float | None) -> None:
    """``--epsilon`` is required unless the mechanism derives it from its own parameter (random: ``rate``)."""
    from ..mechanisms.registry import mechanism_class

    if epsilon is not None:
        check_epsilon(epsilon)
        return
    if "rate" not in mechanism_class(mechanism).param_names():
        hint = "" if mechanism != "earth-movers" else " (e.g. -e 10; see textdp obfuscate --help)"
        raise ParameterError(f"--epsilon is required for {mechanism}{hint}")


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


class _CountingDecoder:
    """A mechanism's nearest-word decoder that reports how many words it decoded.

    The mechanisms decode the noisy vectors of a long document block by block
    (``WORDS_PER_BLOCK`` words), so the count moves inside one document; the bar
    then shows progress where the documents bar cannot (one document of N = 300,000).
    Decoding is unchanged: every call and attribute goes to the wrapped decoder.
    """

    def __init__(self, inner: Any, on_words: Any) -> None:
        self._inner = inner
        self._on_words = on_words

    def decode(self, z: Any, *args: Any, **kwargs: Any) -> Any:
        out = self._inner.decode(z, *args, **kwargs)
        self._on_words(len(out))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _count_words(mech: Any, bar: Any, total: int | None) -> None:
    """Add a "words" task to ``bar`` that moves as ``mech`` decodes (mechanisms with a decoder)."""
    inner = getattr(mech, "decoder_", None)
    if inner is None or not hasattr(inner, "decode"):
        return
    task = bar.add_task("words decoded", total=total)
    mech.decoder_ = _CountingDecoder(inner, lambda n: bar.advance(task, n))


def obfuscate(
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="Text files (one document each) or JSONL files (one document per line). "
                       "None or '-' reads standard input.", show_default=False, metavar="FILES"),
    ] = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help=EPSILON_OPTION_HELP + " Required, except for random "
                                   "with --param rate=R (its epsilon then follows from the rate).",
                                   show_default=False)
    ] = None,
    mechanism: Annotated[
        MechanismName, typer.Option(metavar="NAME", help="Mechanism (README table). Bags of --size words: "
                                    "earth-movers and syntf. Text, each word replaced in place (no --size): cmp, "
                                    "mahalanobis, vickrey, tem, santext, santext+, custext, custext+ and random.")
    ] = "earth-movers",  # type: ignore[assignment]
    postprocess: Annotated[
        PostProcess | None, typer.Option(help="mbr: decode to the posterior medoid among the noisy vector's "
                                            "nearest words (semantic neighbours; earth-movers and cmp). "
                                            "Post-processing: the guarantee is unchanged.")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(metavar="KEY=VALUE", help="Mechanism parameter KEY=VALUE, repeatable (e.g. t=0.75 for "
                                          "vickrey, lambd=0.2, beta=0.001, p=0.3, top_k=20, rate=0.3).")
    ] = None,
    size: Annotated[
        int | None,
        typer.Option("--size", "-n", help="Bag size N, required by the bag mechanisms (earth-movers, syntf) "
                     "unless --size-from-data, refused by the text mechanisms: every document becomes exactly N "
                     "words (the guarantee compares bags of equal size). N is public: it is written in every "
                     "record."),
    ] = None,
    size_from_data: Annotated[
        bool, typer.Option("--size-from-data", help="Instead of --size, use the shortest document's in-vocabulary "
                           "length as N (the paper's protocol). N is published, so this REVEALS that length.")
    ] = False,
    bag: Annotated[BagMode, typer.Option(help="truncate: first N words (paper's experiments); sample: N words "
                                         "drawn with replacement (works for short documents; guarantee "
                                         "epsilon*N*W_inf between documents).")] = BagMode.truncate,
    embeddings: Annotated[
        Path | None, typer.Option(help="Embeddings file (GloVe/word2vec text, word2vec .bin, or .npy with "
                                     "--words). Default: GloVe 6B 50d.")
    ] = None,
    words: Annotated[Path | None, typer.Option(help="Words file (one per line) for a .npy matrix.")] = None,
    vocab_size: Annotated[
        int | None, typer.Option("--vocab-size", "-k", help="Keep only the K most frequent words.")
    ] = None,
    domain_vocab: Annotated[
        Path | None,
        typer.Option(help="Restrict the vocabulary to words of this PUBLIC text/JSONL corpus (avoids "
                     "out-of-domain outputs). Do not derive it from the private documents themselves."),
    ] = None,
    stop_words: Annotated[str, typer.Option(help="'english' (318 words) or 'none'.")] = "english",
    output_vocab: Annotated[
        OutputVocab, typer.Option(help="full: any vocabulary row may be released; words: only letter words that are "
                                  "not stop words (no punctuation tokens, numbers or stop words in the output).")
    ] = OutputVocab.full,
    seed: Annotated[
        int | None, typer.Option(help="Seed for a reproducible experiment (never recorded; anyone who knows it "
                                    "can undo the noise). Default: fresh OS entropy (use that for real releases).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Output file (written atomically), or the output "
                                     "folder of a partitioned run. Default: stdout.")
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="jsonl records or the private words as text.")] = OutputFormat.jsonl,
    text_field: Annotated[str, typer.Option(help="Text field of JSONL input.")] = "text",
    id_field: Annotated[str, typer.Option(help="Id field of JSONL input (copied to the record; without it, ids "
                                          "are sequence numbers 0, 1, 2, ...).")] = "id",
    input_format: Annotated[InputFormat, typer.Option(help="auto: JSONL by file name, else plain text.")] = InputFormat.auto,
    private_report: Annotated[
        Path | None, typer.Option(help="Write a PRIVATE report here (JSONL, one line per record id): where each "
                                     "document came from, its token and unknown-word counts, the unchanged "
                                     "fraction and mean neighbour rank. It describes the input: never publish it.")
    ] = None,
    report: Annotated[bool, typer.Option(hidden=True, help="Removed: use --private-report PATH.")] = False,
    decoder: Annotated[
        DecoderName, typer.Option(metavar="NAME", help="Nearest-word decoder. exact (default), faiss-exact, "
                                  "torch: identical "
                                  "results. approximate/hnsw, ivf: faster, opt-in; decoding is post-processing so "
                                  "the guarantee is unchanged, but some words differ from exact decoding.")
    ] = DecoderName.exact,
    known_source: Annotated[
        bool, typer.Option("--known-source", help="Let the decoder use the input words to skip work (same words; faster at "
                           "epsilon >= ~35). Its running time then depends on the private words, a timing side "
                           "channel the guarantee does not cover: for experiments only.")
    ] = False,
    engine: Annotated[
        EngineName, typer.Option(metavar="NAME", help="auto, single, local or dask. single: one process, one output file. local/dask: partitioned, resumable "
                                 "output directory (dask: a local cluster, or --scheduler). auto: dask for Parquet "
                                 "or inputs >= 64 MB or when --scheduler/--partitions is given, else single.")
    ] = EngineName.auto,
    scheduler: Annotated[
        str | None, typer.Option(help="Address of a running Dask scheduler: tls://host:8786, with the client "
                                 "certificates in the Dask configuration (distributed.comm.tls.*). A plain tcp:// "
                                 "scheduler lets anyone who reaches it run code in the workers, which hold the "
                                 "texts and the generator keys (warned).")
    ] = None,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="Serve the local Dask cluster's dashboard on 127.0.0.1 (off by "
                           "default: any local user could read it).")
    ] = False,
    partitions: Annotated[
        int | None, typer.Option(help="Number of partitions (default: one per 500 documents). Part of the "
                                    "run's identity: the same seed and partitions give the same output.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Worker processes of the local Dask cluster (default: one per core).")
    ] = None,
    work_dir: Annotated[
        Path | None, typer.Option(help="Private work directory of a partitioned run (resume key, spilled "
                                     "inputs, vocabulary; workers must be able to read it). Default: under the "
                                     "textdp cache, found again by the same command. Never inside the output.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
    strict_ids: Annotated[bool, typer.Option("--strict-ids", help=STRICT_IDS_HELP)] = False,
    empty: Annotated[EmptyPolicy, typer.Option(metavar="POLICY", help=EMPTY_HELP)] = EmptyPolicy.error,
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
    with cli_errors():
        if report:
            raise ParameterError("--report was removed: its fields describe the private input; "
                                 "use --private-report PATH (never publish that file)")
        check_size_options(MechanismName(mechanism).value, size, size_from_data)
        mech_name, post, params = MechanismName(mechanism).value, postprocess and postprocess.value, parse_params(param)
        _check_epsilon_option(mech_name, epsilon)
        if size is not None:
            check_size(size)
        stops = parse_stop_words(stop_words)
        inputs = list(files or [])
        partitioned = _partitioned(engine, inputs, scheduler or dashboard, partitions)
        if partitioned and epsilon is None:
            raise ParameterError("partitioned runs need --epsilon (--param rate=R runs with --engine single)")
        read_too = [*inputs, embeddings, words, domain_vocab]
        if partitioned:
            if private_report is not None:
                check_private_report_path(private_report, output=output, inputs=inputs, partitioned=True)
                check_output_paths([("--private-report", private_report)], inputs=read_too, force=force,
                                   existing=False)  # an existing one: refused by the run, unless it is complete
        else:
            check_output_paths(
                [("--output", output), ("--output's settings file", None if output is None else settings_path(output)),
                 ("--private-report", private_report)],
                inputs=read_too, force=force,
            )
        domain, domain_texts = _domain_words(domain_vocab, inputs) if domain_vocab is not None else (None, set())
        emb = load_embeddings(embeddings, words_path=words, vocab_size=vocab_size, domain_words=domain)
        emb = output_vocabulary(emb, output_vocab.value, stops)
        extra = {"vocab_size_limit": vocab_size, "domain_vocab": domain_vocab is not None,
                 "vocabulary_fingerprint": vocabulary_fingerprint(emb.vectors)}
        if partitioned:
            if empty is not EmptyPolicy.error:
                raise ParameterError("--empty skip|empty applies to --engine single for now; partitioned runs stop "
                                     "on a line with no in-vocabulary word")
            _run_partitioned(
                inputs, output, emb, epsilon=epsilon, size=size, size_from_data=size_from_data,
                bag=bag.value, stops=stops, decoder=decoder.value, known_source=known_source, seed=seed,
                engine=engine, scheduler=scheduler, partitions=partitions, workers=workers, dashboard=dashboard,
                text_field=text_field,
                id_field=id_field, input_format=input_format.value, fmt=fmt.value, work_dir=work_dir,
                private_report=private_report, extra=extra, force=force, strict_ids=strict_ids,
                mechanism=mech_name, postprocess=post, params=params,
            )
            return
        mech = build_mechanism(
            mech_name, epsilon=epsilon,  # type: ignore[arg-type]  # None: random derives it from its rate
            size=size, size_from_data=size_from_data, embeddings=emb, bag=bag.value,
            stop_words=stops, seed=seed, decoder=decoder.value, known_source=known_source, postprocess=post,
            params=params,
        )
        if all(str(f) == "-" for f in inputs) and _stdin_is_terminal():
            print_info("reading documents from standard input (type them, then Ctrl-D); give FILES to read files "
                       "(see: textdp obfuscate --help)")
        docs = read_sourced_documents(inputs, text_field=text_field, id_field=id_field,
                                      input_format=input_format.value)
        if not docs:
            raise ParameterError("no documents in the input")
        inside = sum(d.text.strip() in domain_texts for d in docs) if domain_texts else 0
        if inside:
            print_warning(f"{inside} input document(s) appear verbatim in --domain-vocab {domain_vocab}; the "
                          "vocabulary must come from PUBLIC text, not from the documents being privatized")
        ids = sequence_ids(docs)
        n_dup, first_dup = find_duplicate_ids(lambda: ids)
        if n_dup and first_dup is not None:
            if strict_ids:
                raise DocumentError(duplicate_ids_message(n_dup, first_dup) + "; make the ids unique")
            _warn_duplicates(n_dup, first_dup)
        report_rows: list[dict[str, Any]] = []
        first: Any = None
        n_records = 0
        sink = _stdout_when_done() if output is None else atomic_writer(output, overwrite=force, private=False)
        small = len(docs) < 2 and sum(len(d.text) for d in docs) < 200_000 and (size or 0) < 20_000
        with sink as fh, progress_bar(disable=small) as bar, \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PrivacyWarning)
            task = bar.add_task("obfuscating (documents)", total=len(docs))
            _count_words(mech, bar, size * len(docs) if size is not None else None)
            for job in iter_privatize_documents(mech, docs, private_report=private_report is not None,
                                                empty=empty.value, progress=bar_progress(bar, task)):
                write_records(fh, job.records, fmt.value)  # as they come: memory stays bounded
                first = first if first is not None or not job.documents else job.documents[0]
                n_records += len(job.records)
                report_rows.extend(job.report or [])
            guarantee = (release_guarantee(first) if first is not None else  # every line skipped
                         mechanism_guarantee(mech, size=size if size is not None else 1, seeded=seed is not None,
                                             empty=empty.value))
            settings = release_settings(
                guarantee, engine="single", documents=n_records, decoder=guarantee_decoder_name(guarantee),
                known_source=known_source, stop_words=stops, fmt=fmt.value, extra=extra,
            )
            # the small files first; the release itself is moved into place last
            if private_report is not None:
                write_private_report(private_report, report_rows, overwrite=force)
            if output is not None:
                write_json(settings_path(output), settings, overwrite=force, private=False)
        for w in caught:
            if issubclass(w.category, PrivacyWarning):
                print_warning(w.message)
            else:  # pragma: no cover - other warnings keep their usual route
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def guarantee_decoder_name(guarantee: dict[str, Any]) -> str:
    """The decoder named in a guarantee dict's public parameters (``"none"``: the mechanism decodes nothing)."""
    return str(guarantee.get("parameters", {}).get("decoder", "none"))


def _run_partitioned(files: list[Path], output: Path | None, emb: Any, *, engine: EngineName,
                     scheduler: str | None, workers: int | None, dashboard: bool, **kw: Any) -> None:
    from ..engines import get_backend
    from ..engines.corpus import MANIFEST, obfuscate_corpus

    if output is None:
        raise ParameterError("partitioned runs need --output DIRECTORY (part files + manifest.json)")
    if not files or any(str(f) == "-" for f in files):
        raise ParameterError("partitioned runs read files, not standard input")
    if kw["input_format"] == "text" and any(f.name.lower().endswith((".parquet", ".pq")) for f in files):
        raise ParameterError("--input-format text cannot read Parquet")
    if kw["partitions"] is not None:
        check_positive_int(kw["partitions"], "partitions")
    if workers is not None:
        check_positive_int(workers, "workers")
    name = "local" if engine is EngineName.local else "dask"

    def warn_size(n: int) -> None:
        print_warning(SIZE_FROM_DATA_WARNING.format(n=n))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        backend = get_backend(name, scheduler=scheduler, workers=workers, dashboard=dashboard)
    for w in caught:
        print_warning(w.message)
    link = getattr(backend, "dashboard_link", None)
    if link:
        print_info(f"dashboard: {link}")
    try:
        with progress_bar() as bar:
            task = bar.add_task("obfuscating (documents)", total=None)
            obfuscate_corpus(
                files, output, embeddings=emb, epsilon=kw["epsilon"], size=kw["size"],
                size_from_data=kw["size_from_data"], bag=kw["bag"], stop_words=kw["stops"], decoder=kw["decoder"],
                known_source=kw["known_source"], seed=kw["seed"], backend=backend, partitions=kw["partitions"],
                text_field=kw["text_field"], id_field=kw["id_field"], input_format=kw["input_format"],
                fmt=kw["fmt"], work_dir=kw["work_dir"], private_report=kw["private_report"],
                extra_settings=kw["extra"], on_size_from_data=warn_size, mechanism=kw["mechanism"],
                postprocess=kw["postprocess"], params=kw["params"],
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                force=kw["force"], strict_ids=kw["strict_ids"], on_duplicate_ids=_warn_duplicates,
            )
    except (KeyboardInterrupt, Interrupted) as exc:
        status = exc.status if isinstance(exc, Interrupted) else 130
        raise InterruptedRun(_interrupted_message(output, MANIFEST), status) from None
    finally:
        backend.close()


def _interrupted_message(output: Path, manifest_name: str) -> str:
    """What an interrupted partitioned run leaves behind, truthfully."""
    import json

    done = sorted(p.name for p in output.glob("part-*") if p.is_file()) if output.is_dir() else []
    total: Any = "?"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        total = len(json.loads((output / manifest_name).read_text(encoding="utf-8"))["parts"])
    if not (output / manifest_name).exists():
        return f"the run had not started writing {output}; nothing was released"
    return (f"{len(done)} of {total} part files are finished in {output} (each complete; the run is not); "
            "run the same command again to finish the rest, or delete the folder to start over")


def register(app: typer.Typer) -> None:
    """Add the ``obfuscate`` command to ``app``."""
    app.command("obfuscate")(obfuscate)
