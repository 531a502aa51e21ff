"""``textdp obfuscate``: Earth Mover's privacy on documents."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .. import __version__
from ..embeddings import load_embeddings
from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from ..io import atomic_writer, read_documents, settings_path, write_json
from ..mechanisms import EarthMoversPrivacy
from ..text import normalise
from ._common import EPSILON_OPTION_HELP, cli_errors, progress_bar


class OutputFormat(str, Enum):
    jsonl = "jsonl"
    text = "text"


class BagMode(str, Enum):
    truncate = "truncate"
    sample = "sample"


class InputFormat(str, Enum):
    auto = "auto"
    text = "text"
    jsonl = "jsonl"


class DecoderName(str, Enum):
    exact = "exact"
    faiss_exact = "faiss-exact"
    torch = "torch"
    approximate = "approximate"
    hnsw = "hnsw"
    ivf = "ivf"


class EngineName(str, Enum):
    auto = "auto"
    single = "single"
    local = "local"
    dask = "dask"


LARGE_INPUT_BYTES = 64 << 20  # auto engine: partition inputs at least this large


def _partitioned(engine: EngineName, files: list[Path], scheduler: Optional[str], partitions: Optional[int]) -> bool:
    if engine is EngineName.single:
        if scheduler or partitions:
            raise ParameterError("--scheduler and --partitions need --engine local or dask")
        return False
    if engine is not EngineName.auto or scheduler or partitions:
        return True
    real = [f for f in files if str(f) != "-"]
    if any(f.name.lower().endswith((".parquet", ".pq")) for f in real):
        return True
    return sum(f.stat().st_size for f in real if f.is_file()) >= LARGE_INPUT_BYTES


def _domain_words(path: Path) -> set[str]:
    docs = read_documents([path], input_format="auto")
    words: set[str] = set()
    for _, text in docs:
        words.update(normalise(text, stop_words=None))
    if not words:
        raise ParameterError(f"--domain-vocab {path}: no words found")
    return words


def obfuscate(
    files: Annotated[
        Optional[list[Path]],
        typer.Argument(help="Text files (one document each) or JSONL files (one document per line). "
                       "None or '-' reads standard input.", show_default=False),
    ] = None,
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help=EPSILON_OPTION_HELP)] = ...,  # type: ignore[assignment]
    size: Annotated[
        Optional[int],
        typer.Option("--size", "-n", help="Bag size N: every document becomes exactly N words (the guarantee "
                     "compares bags of equal size). Default: the shortest document of the input."),
    ] = None,
    bag: Annotated[BagMode, typer.Option(help="truncate: first N words (paper's experiments); sample: N words "
                                         "drawn with replacement (works for short documents).")] = BagMode.truncate,
    embeddings: Annotated[
        Optional[Path], typer.Option(help="Embeddings file (GloVe/word2vec text, word2vec .bin, or .npy with "
                                     "--words). Default: GloVe 6B 50d.")
    ] = None,
    words: Annotated[Optional[Path], typer.Option(help="Words file (one per line) for a .npy matrix.")] = None,
    vocab_size: Annotated[
        Optional[int], typer.Option("--vocab-size", "-k", help="Keep only the K most frequent words.")
    ] = None,
    domain_vocab: Annotated[
        Optional[Path],
        typer.Option(help="Restrict the vocabulary to words of this PUBLIC text/JSONL corpus (avoids "
                     "out-of-domain outputs). Do not derive it from the private documents themselves."),
    ] = None,
    stop_words: Annotated[str, typer.Option(help="'english' (318 words) or 'none'.")] = "english",
    seed: Annotated[
        Optional[int], typer.Option(help="Seed for a reproducible experiment. Default: fresh OS entropy "
                                    "(use that for real releases).")
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Output file (written atomically). Default: stdout.")
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="jsonl records or the private words as text.")] = OutputFormat.jsonl,
    text_field: Annotated[str, typer.Option(help="Text field of JSONL input.")] = "text",
    id_field: Annotated[str, typer.Option(help="Id field of JSONL input.")] = "id",
    input_format: Annotated[InputFormat, typer.Option(help="auto: JSONL by file name, else plain text.")] = InputFormat.auto,
    report: Annotated[
        bool, typer.Option(help="Add diagnostics (unchanged fraction, mean neighbour rank) to each record. "
                           "They depend on the private input: for the data owner, not for release.")
    ] = False,
    decoder: Annotated[
        DecoderName, typer.Option(help="Nearest-word decoder. exact (default), faiss-exact, torch: identical "
                                  "results. approximate/hnsw, ivf: faster, opt-in; decoding is post-processing so "
                                  "the guarantee is unchanged, but some words differ from exact decoding.")
    ] = DecoderName.exact,
    engine: Annotated[
        EngineName, typer.Option(help="single: one process, one output file. local/dask: partitioned, resumable "
                                 "output directory (dask: a local cluster, or --scheduler). auto: dask for Parquet "
                                 "or inputs >= 64 MB or when --scheduler/--partitions is given, else single.")
    ] = EngineName.auto,
    scheduler: Annotated[
        Optional[str], typer.Option(help="Address of a running Dask scheduler (e.g. tcp://host:8786).")
    ] = None,
    partitions: Annotated[
        Optional[int], typer.Option(help="Number of partitions (default: from the input size). Part of the "
                                    "run's identity: the same seed and partitions give the same output.")
    ] = None,
    workers: Annotated[
        Optional[int], typer.Option(help="Worker processes of the local Dask cluster (default: one per core).")
    ] = None,
) -> None:
    """Obfuscate documents with Earth Mover's privacy (noisy word embeddings, nearest-word decoding).

    Each document is lower-cased, stripped of punctuation and stop words, reduced to a bag of N
    in-vocabulary words (unknown words are dropped, never copied), and every word is replaced by the
    word nearest to its embedding plus n-dimensional Laplace noise. Each output record states the
    guarantee: epsilon·N·E_d-privacy.

    Large inputs (Parquet, JSONL) run partitioned (--engine local/dask): the output is a directory of
    part files plus manifest.json and settings.json; re-running the same command after a crash
    finishes the missing parts only.
    """
    with cli_errors():
        stops = None if stop_words.lower() == "none" else stop_words.lower()
        domain = _domain_words(domain_vocab) if domain_vocab is not None else None
        emb = load_embeddings(embeddings, words_path=words, vocab_size=vocab_size, domain_words=domain)
        if _partitioned(engine, list(files or []), scheduler, partitions):
            _run_partitioned(
                list(files or []), output, emb, epsilon=epsilon, size=size, bag=bag.value, stops=stops,
                decoder=decoder.value, seed=seed, engine=engine, scheduler=scheduler, partitions=partitions,
                workers=workers, text_field=text_field, id_field=id_field, input_format=input_format.value,
                fmt=fmt.value, report=report,
                extra={"vocab_size_limit": vocab_size, "domain_vocab": str(domain_vocab) if domain_vocab else None},
            )
            return
        mech = EarthMoversPrivacy(
            epsilon=epsilon, size=size, embeddings=emb, bag=bag.value, stop_words=stops, rng=seed,
            decoder=decoder.value,
        ).fit()
        docs = read_documents(list(files or []), text_field=text_field, id_field=id_field,
                              input_format=input_format.value)
        if not docs:
            raise ParameterError("no documents in the input")
        ids = [d[0] for d in docs]
        texts = [d[1] for d in docs]
        with progress_bar(disable=len(docs) < 2) as bar:
            task = bar.add_task("obfuscating", total=len(docs))
            private = mech.privatize_batch(texts, ids, progress=lambda k: bar.advance(task, k))
        records: list[dict[str, Any]] = []
        for doc in private:
            rec = doc.to_record()
            if report:
                rec.update(_report_fields(doc, mech))
            records.append(rec)
        settings = {
            "textdp_version": __version__,
            "command": "obfuscate",
            "inputs": [str(f) for f in (files or ["-"])],
            "documents": len(records),
            "seed": seed,
            "seed_note": None if seed is not None else "fresh OS entropy (not recorded)",
            "stop_words": stops,
            "vocab_size_limit": vocab_size,
            "domain_vocab": str(domain_vocab) if domain_vocab else None,
            "report_fields_are_private": report,
            "decoder": private[0].decoder,
            **private[0].guarantee.to_dict(),
        }
        if output is None:
            _emit(sys.stdout, records, fmt)
        else:
            with atomic_writer(output) as fh:
                _emit(fh, records, fmt)
            write_json(settings_path(output), settings)


def _run_partitioned(files: list[Path], output: Optional[Path], emb: Any, *, engine: EngineName,
                     scheduler: Optional[str], workers: Optional[int], **kw: Any) -> None:
    from ..engines import get_backend
    from ..engines.corpus import obfuscate_corpus

    if output is None:
        raise ParameterError("partitioned runs need --output DIRECTORY (part files + manifest.json)")
    if not files or any(str(f) == "-" for f in files):
        raise ParameterError("partitioned runs read files, not standard input")
    if kw["input_format"] == "text" and any(f.name.lower().endswith((".parquet", ".pq")) for f in files):
        raise ParameterError("--input-format text cannot read Parquet")
    check_epsilon(kw["epsilon"])
    if kw["size"] is not None:
        check_positive_int(kw["size"], "size")
    if kw["partitions"] is not None:
        check_positive_int(kw["partitions"], "partitions")
    name = "local" if engine is EngineName.local else "dask"
    backend = get_backend(name, scheduler=scheduler, workers=workers)
    try:
        with progress_bar() as bar:
            task = bar.add_task("obfuscating (documents)", total=None)
            obfuscate_corpus(
                files, output, embeddings=emb, epsilon=kw["epsilon"], size=kw["size"], bag=kw["bag"],
                stop_words=kw["stops"], decoder=kw["decoder"], seed=kw["seed"], backend=backend,
                partitions=kw["partitions"], text_field=kw["text_field"], id_field=kw["id_field"],
                input_format=kw["input_format"], fmt=kw["fmt"], report=kw["report"],
                extra_settings=kw["extra"], progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    finally:
        backend.close()


def _report_fields(doc: Any, mech: EarthMoversPrivacy) -> dict[str, Any]:
    try:
        from ..accounting.diagnostics import report_fields
    except ImportError:
        return {"unchanged_fraction": doc.unchanged_fraction()}
    return report_fields(doc, mech.embeddings_)


def _emit(fh: Any, records: list[dict[str, Any]], fmt: OutputFormat) -> None:
    for rec in records:
        if fmt is OutputFormat.text:
            fh.write(" ".join(rec["words"]) + "\n")
        else:
            fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


def register(app: typer.Typer) -> None:
    """Add the ``obfuscate`` command to ``app``."""
    app.command("obfuscate")(obfuscate)
