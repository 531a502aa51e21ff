"""The single-file engine: one process, one release file (or standard output).

:func:`obfuscate_file` is what ``textdp obfuscate FILE -o out.jsonl`` runs: the same
steps as the partitioned driver (:func:`textdp.engines.corpus.obfuscate_corpus`),
done once here and shared with it where they are the same step:

* the output paths are checked before any work (:func:`check_file_outputs`;
  the partitioned driver checks its folders the same way before it starts);
* repeated record ids are reported or refused before anything is written
  (:func:`check_duplicate_ids`, which the partitioned driver calls too);
* the release records are written as they come (memory stays bounded), then the
  private report and the public ``settings.json`` beside the output, and the
  release itself is moved into place last (atomic writers: nothing partial is
  left on an error).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from ..errors import DocumentError, ParameterError
from ..guarantees import ReleaseRecord
from ..io import (
    SourcedDocument,
    atomic_writer,
    check_output_paths,
    duplicate_ids_message,
    find_duplicate_ids,
    sequence_ids,
    settings_path,
    write_json,
)
from ..mechanisms import TextMechanism
from ..pipeline import (
    iter_privatize_documents,
    mechanism_guarantee,
    release_guarantee,
    release_settings,
    write_private_report,
    write_records,
)
from ..progress import ProgressCallback

__all__ = ["check_duplicate_ids", "check_file_outputs", "guarantee_decoder_name", "obfuscate_file", "open_release", "stdout_when_done",
           "write_release"]

#: ``on_duplicate_ids(count, first_id)``: told about repeated record ids (a warning, in the CLI)
DuplicateIdsCallback = Callable[[int, str], None]


def check_duplicate_ids(ids: Callable[[], Iterable[str]], *, strict: bool,
                        on_duplicate_ids: DuplicateIdsCallback | None) -> None:
    """Refuse (``strict``) or report (``on_duplicate_ids(count, first_id)``) repeated record ids.

    ``ids()`` yields the record ids in input order; it is not called when nobody asks.
    """
    if not (strict or on_duplicate_ids is not None):
        return
    n_dup, first_dup = find_duplicate_ids(ids)
    if n_dup and first_dup is not None:
        if strict:
            raise DocumentError(duplicate_ids_message(n_dup, first_dup) + "; make the ids unique")
        if on_duplicate_ids is not None:
            on_duplicate_ids(n_dup, first_dup)


def check_file_outputs(output: Path | None, private_report: Path | None, *, inputs: Sequence[Path | None],
                       force: bool) -> None:
    """Refuse outputs that exist (unless ``force``) or that are inputs: the release, its settings, the report."""
    check_output_paths(
        [("--output", output), ("--output's settings file", None if output is None else settings_path(output)),
         ("--private-report", private_report)],
        inputs=inputs, force=force,
    )


@contextlib.contextmanager
def stdout_when_done(stream: IO[str] | None = None) -> Iterator[IO[str]]:
    """A file that goes to ``stream`` (standard output) only once everything is written (nothing partial)."""
    with tempfile.SpooledTemporaryFile(max_size=32 << 20, mode="w+", encoding="utf-8", newline="\n") as tmp:
        yield tmp
        tmp.seek(0)
        out = sys.stdout if stream is None else stream
        shutil.copyfileobj(tmp, out)
        out.flush()


def open_release(output: Path | None, *, force: bool = False) -> contextlib.AbstractContextManager[IO[str]]:
    """The release file, written atomically (``None``: standard output, once everything is written)."""
    return stdout_when_done() if output is None else atomic_writer(output, overwrite=force, private=False)


def write_release(
    fh: IO[str], mech: TextMechanism, docs: Sequence[SourcedDocument], output: Path | None, *, fmt: str = "jsonl",
    known_source: bool = False, stop_words: str | None = "english", extra: dict[str, object] | None = None,
    private_report: Path | None = None, force: bool = False, strict_ids: bool = False,
    on_duplicate_ids: DuplicateIdsCallback | None = None, progress: ProgressCallback | None = None,
    empty: str = "error", size: int | None = None, seeded: bool = False,
) -> dict[str, object]:
    """The steps of :func:`obfuscate_file` inside the open release ``fh`` (see there)."""
    if not docs:
        raise ParameterError("no documents in the input")
    ids = sequence_ids(docs)
    check_duplicate_ids(lambda: ids, strict=strict_ids, on_duplicate_ids=on_duplicate_ids)
    report_rows: list[dict[str, object]] = []
    first: ReleaseRecord | None = None
    n_records = 0
    for job in iter_privatize_documents(mech, docs, private_report=private_report is not None, empty=empty,
                                        progress=progress):
        write_records(fh, job.records, fmt)  # as they come: memory stays bounded
        first = first if first is not None or not job.documents else job.documents[0]
        n_records += len(job.records)
        report_rows.extend(job.report or [])
    guarantee = (release_guarantee(first) if first is not None else  # every line skipped
                 mechanism_guarantee(mech, size=size if size is not None else 1, seeded=seeded, empty=empty))
    settings = release_settings(
        guarantee, engine="single", documents=n_records, decoder=guarantee_decoder_name(guarantee),
        known_source=known_source, stop_words=stop_words, fmt=fmt, extra=extra,
    )
    # the small files first; the release itself is moved into place last (when ``fh`` closes)
    if private_report is not None:
        write_private_report(private_report, report_rows, overwrite=force)
    if output is not None:
        write_json(settings_path(output), settings, overwrite=force, private=False)
    return dict(settings)


def guarantee_decoder_name(guarantee: Mapping[str, object]) -> str:
    """The decoder named in a guarantee dict's public parameters (``"none"``: the mechanism decodes nothing)."""
    params = guarantee.get("parameters", {})
    return str(params.get("decoder", "none")) if isinstance(params, Mapping) else "none"


def obfuscate_file(
    mech: TextMechanism, docs: Sequence[SourcedDocument], output: Path | None, *, fmt: str = "jsonl",
    known_source: bool = False, stop_words: str | None = "english", extra: dict[str, object] | None = None,
    private_report: Path | None = None, force: bool = False, strict_ids: bool = False,
    on_duplicate_ids: DuplicateIdsCallback | None = None, progress: ProgressCallback | None = None,
    empty: str = "error", size: int | None = None, seeded: bool = False,
) -> dict[str, object]:
    """Privatize ``docs`` with the fitted ``mech`` into ``output`` (``None``: standard output).

    Writes the release records (``fmt``: ``jsonl`` or ``text``), then ``private_report``
    (PRIVATE, JSONL, mode 0600) and, beside a file output, the public
    ``<output>.settings.json``; the release is moved into place last. Returns the
    public settings. ``force`` replaces existing outputs (never an input); repeated
    ids are refused with ``strict_ids`` or reported to ``on_duplicate_ids``. ``empty``: what a
    document with no in-vocabulary word becomes (``error``, ``skip``, ``empty``; ``size`` and
    ``seeded`` then state the guarantee if every document was skipped). The CLI
    runs the same two steps (:func:`open_release`, :func:`write_release`) with its
    progress bar in between.
    """
    with open_release(output, force=force) as fh:
        return write_release(fh, mech, docs, output, fmt=fmt, known_source=known_source, stop_words=stop_words,
                             extra=extra, private_report=private_report, force=force, strict_ids=strict_ids,
                             on_duplicate_ids=on_duplicate_ids, progress=progress, empty=empty, size=size,
                             seeded=seeded)
