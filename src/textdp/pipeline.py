"""The document job: read -> privatize -> release records, plus an optional private report.

This is the one place that turns input documents into what ``textdp obfuscate``
writes. The single-file command and the partitioned engine
(:func:`textdp.engines.corpus.run_partition`) both call
:func:`privatize_documents`, so a record looks the same whichever path made it.
It sits above :mod:`textdp.mechanisms`, :mod:`textdp.accounting` and
:mod:`textdp.io` and below :mod:`textdp.cli` and :mod:`textdp.engines`.

What goes where:

* **Release records** (:meth:`PrivateDocument.to_record`): the record id (the
  input's id field, else the sequence number), the private words, and public
  parameters with the guarantee sentence. Nothing else about the input.
* **Private report** (``private_report=True``; written with
  :func:`write_private_report` to a path the user names): per record id, where
  the document came from (``path:line``), its token and out-of-vocabulary counts,
  and diagnostics of the noise (unchanged fraction, mean neighbour rank). It
  describes the private input: never publish it.
* **Settings** (:func:`release_settings`): public parameters only (no input
  paths, no seed; ``seeded`` says whether a seed was used).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .accounting.diagnostics import report_fields
from .errors import ParameterError
from .io import SourcedDocument, atomic_writer, sequence_ids, settings_path
from .mechanisms import DocumentDiagnostics, EarthMoversPrivacy, PrivateDocument

__all__ = [
    "JobResult",
    "check_private_report_path",
    "iter_privatize_documents",
    "privatize_documents",
    "release_settings",
    "write_private_report",
    "write_records",
]

OUTPUT_FORMATS = ("jsonl", "text")


@dataclass(frozen=True)
class JobResult:
    """What one document job produced.

    ``documents`` and ``records`` are for release; ``report`` (or ``None``) is
    the PRIVATE report, one dict per record, keyed by ``id``.
    """

    documents: list[PrivateDocument]
    records: list[dict[str, Any]]
    report: list[dict[str, Any]] | None


def privatize_documents(
    mech: EarthMoversPrivacy,
    docs: Sequence[SourcedDocument],
    *,
    first: int = 0,
    size: int | None = None,
    seed: int | np.random.Generator | None = None,
    seeded: bool | None = None,
    size_from_data: bool = False,
    private_report: bool = False,
    progress: Callable[[int], None] | None = None,
) -> JobResult:
    """Privatize ``docs`` with ``mech``: release records and, on request, the private report.

    Parameters
    ----------
    mech : EarthMoversPrivacy
        A (fitted or not) estimator; it is not modified.
    docs : sequence of SourcedDocument
        The input documents (own id or ``None``, text, origin).
    first : int
        Sequence number of ``docs[0]`` in the whole input (ids of documents without one).
    size, seed, seeded, size_from_data
        As for :meth:`EarthMoversPrivacy.privatize_batch`.
    private_report : bool
        Also return the private report (see the module notes).

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = EarthMoversPrivacy(epsilon=1e6, embeddings=emb, stop_words=None)
    >>> job = privatize_documents(mech, [SourcedDocument(None, "dog car zebra", "/home/a/notes.txt")],
    ...                           size=2, private_report=True)
    >>> job.records[0]["id"], job.records[0]["words"], "n_tokens" in job.records[0]
    ('0', ['dog', 'car'], False)
    >>> job.report[0]["source"], job.report[0]["dropped_oov"]
    ('/home/a/notes.txt', 1)
    """
    documents: list[PrivateDocument] = []
    records: list[dict[str, Any]] = []
    report: list[dict[str, Any]] | None = [] if private_report else None
    for part in iter_privatize_documents(
        mech, docs, first=first, size=size, seed=seed, seeded=seeded, size_from_data=size_from_data,
        private_report=private_report, progress=progress,
    ):
        documents.extend(part.documents)
        records.extend(part.records)
        if report is not None and part.report is not None:
            report.extend(part.report)
    return JobResult(documents, records, report)


def iter_privatize_documents(
    mech: EarthMoversPrivacy,
    docs: Sequence[SourcedDocument],
    *,
    first: int = 0,
    size: int | None = None,
    seed: int | np.random.Generator | None = None,
    seeded: bool | None = None,
    size_from_data: bool = False,
    private_report: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Iterator[JobResult]:
    """:func:`privatize_documents`, one chunk of documents at a time (same arguments).

    Every document is validated before the first chunk is noised; write each
    chunk's records as it comes (:func:`write_records`) and the memory stays
    bounded whatever the number of documents and N
    (:meth:`EarthMoversPrivacy.iter_privatize_batch`).
    """
    docs = list(docs)
    ids = sequence_ids(docs, first)
    diags: list[DocumentDiagnostics] | None = [] if private_report else None
    pos = 0
    for part in mech.iter_privatize_batch(
        [d.text for d in docs], ids, size=size, seed=seed, seeded=seeded, size_from_data=size_from_data,
        private_report=diags, progress=progress,
    ):
        report = None
        if diags is not None:
            report = [
                {"id": diag.id, "source": doc.source, **report_fields(diag, mech.embeddings_)}
                for diag, doc in zip(diags, docs[pos : pos + len(part)])
            ]
            diags.clear()
        pos += len(part)
        yield JobResult(part, [d.to_record() for d in part], report)


def write_records(fh: IO[str], records: Iterable[dict[str, Any]], fmt: str = "jsonl") -> None:
    """Write release records as JSONL, or only their words (``fmt="text"``, one bag per line)."""
    if fmt not in OUTPUT_FORMATS:
        raise ParameterError(f"unknown output format {fmt!r}; choose one of: {', '.join(OUTPUT_FORMATS)}")
    for rec in records:
        if fmt == "text":
            fh.write(" ".join(rec["words"]) + "\n")
        else:
            fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


def write_private_report(
    path: str | os.PathLike[str], rows: Iterable[dict[str, Any]], *, overwrite: bool = True
) -> None:
    """Write the PRIVATE report as JSONL (one object per record id), atomically and owner-only (mode 0600)."""
    with atomic_writer(path, overwrite=overwrite, private=True) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve() == folder.resolve() or path.resolve().is_relative_to(folder.resolve())


def check_private_report_path(
    report: Path, *, output: Path | None, inputs: Sequence[Path] = (), partitioned: bool = False
) -> None:
    """Refuse a private-report path that would end up in the release or overwrite an input.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> check_private_report_path(out / "report.jsonl", output=out, partitioned=True)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --private-report ... is inside the output folder ...
    """
    if output is not None:
        if partitioned and _inside(report, output):
            raise ParameterError(
                f"--private-report {report} is inside the output folder {output}, which is meant for release; "
                "write it somewhere private"
            )
        if not partitioned and report.resolve() in (output.resolve(), settings_path(output).resolve()):
            raise ParameterError(f"--private-report {report} would overwrite the output; choose another path")
    for p in inputs:
        if str(p) != "-" and Path(p).exists() and Path(p).resolve() == report.resolve():
            raise ParameterError(f"--private-report {report} is an input file; choose another path")


def release_settings(
    guarantee_dict: dict[str, Any],
    *,
    engine: str,
    documents: int,
    decoder: str,
    known_source: bool,
    stop_words: str | None,
    fmt: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The public settings of a release (written beside it): parameters and the guarantee, nothing private.

    >>> s = release_settings({"seeded": False, "guarantee": "..."}, engine="single", documents=3,
    ...                      decoder="exact", known_source=False, stop_words="english", fmt="jsonl")
    >>> s["seeded"], "inputs" in s, "seed" in s
    (False, False, False)
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        textdp_version = version("textdp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        textdp_version = "unknown"
    return {
        "textdp_version": textdp_version,
        "command": "obfuscate",
        "engine": engine,
        "documents": int(documents),
        "format": fmt,
        "stop_words": stop_words,
        "decoder": decoder,
        "known_source": bool(known_source),
        "seed_note": (
            "seeded: anyone who knows the seed can undo the noise (experiments only); the seed is not recorded"
            if guarantee_dict.get("seeded")
            else "fresh OS entropy (not recorded)"
        ),
        **(extra or {}),
        **guarantee_dict,
    }
