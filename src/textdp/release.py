"""The one release driver: read, charge, privatize, write (records, settings, private report).

:func:`release` is what every command runs (``textdp obfuscate``, ``textdp topics``, ``textdp
rewrite``) and what a Python caller runs to publish a release with the same guarantees as the
command line. It works for every family through the one mechanism base
(:class:`textdp.mechanisms.Mechanism`): the mechanism's own methods say how many of its
guarantee's units each input spends (:meth:`~textdp.mechanisms.Mechanism.charge_units`); nothing
here depends on a mechanism's name or family.

The order of the steps is the privacy order:

1. **check** every path before any work: the release, its settings file, the private report and
   the ledger must differ from each other and from the inputs; existing outputs are refused unless
   ``force``; the ledger (private) may not sit in the release's folder;
2. **read** the inputs: files (:class:`os.PathLike` objects: text, JSONL or Parquet, as the CLI
   reads them) or the units themselves (strings, or a family's own units such as a
   :class:`~textdp.topics.models.TopicMatrix`);
3. **charge** the ledger, once, after every unit is validated and before any noise is drawn
   (the mechanism's ``charge=`` hook): each record id is charged
   :meth:`Guarantee.charge(units) <textdp.guarantees.Guarantee.charge>`; a charge that would take an
   id past ``budget`` (composed by the accountant, :mod:`textdp.accounting.accountant`) raises a
   one-line :class:`~textdp.errors.ParameterError` and nothing is written or recorded;
4. **privatize** a chunk at a time (:meth:`~textdp.mechanisms.Mechanism.iter_privatize_batch`) and
   write the records as they come into an atomic temporary file (memory stays bounded);
5. **write** the PRIVATE report (mode 0600, to the path the caller names), then the public
   settings file ``<output>.settings.json`` (:func:`textdp.pipeline.release_settings`: public
   parameters and the full guarantee, never the seed nor an input path), then move the release
   into place last. On an error nothing partial is left (a crash after the charge over-counts the
   spend, never under-counts it).

Engines
-------
``engine``: ``single`` (the default: one process) or a partitioned, resumable run (``local``, ``dask``) on
``backend`` (default: the engine's), charged to the ledger once before the first partition and not again
when a killed run is started again with the same arguments (its private state is kept in ``work_dir``,
default under the textdp cache, and deleted at completion). The document and word families (files in)
run on the corpus engine (:func:`textdp.engines.corpus.obfuscate_corpus`: ``partitions`` parts into the
folder ``output``); the sentence family on a textdp model (``er-ae``, ``ae-dp``, ``syntf-sentence``,
``random-sentence``) on :func:`textdp.engines.sentences.rewrite_corpus` (``partition_size`` documents
each, default 256, or ``partitions`` parts), into the same files as ``single``: records, settings (with
``partition_size``, which with the seed fixes the output) and private report. ``records_of``: how one
released unit is written: as its own record (default), or as the records it splits into (``textdp rewrite
--unit sentence``: :meth:`~textdp.generation.rewriter.RewrittenText.sentence_records`); the ledger is
charged per unit all the same.

Examples
--------
>>> import json, os, pathlib, tempfile
>>> from unittest import mock
>>> import numpy as np
>>> from textdp.embeddings import Embeddings
>>> from textdp.mechanisms import get
>>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> mech = get("cmp", epsilon=2.0, embeddings=emb, stop_words=None)
>>> led = d / "private" / "ledger.jsonl"  # a private file; its anchor goes to the (here temporary) textdp state
>>> with mock.patch.dict(os.environ, {"TEXTDP_CACHE_DIR": str(d / "state")}):
...     s = release(mech, ["cat dog", "car"], d / "out.jsonl", ids=["a", "b"], ledger=led, budget=5.0, seed=0)
...     release(mech, ["cat dog car"], d / "again.jsonl", ids=["a"], ledger=led, budget=5.0)
Traceback (most recent call last):
...
textdp.errors.ParameterError: the privacy budget 5 would be exceeded for 1 document(s) (first: 'a' has spent 4 and would reach 10 with this release, composed by the accountant); nothing was released or recorded
>>> s.records, s.charged, s.guarantee.unit, json.loads((d / "out.jsonl").read_text().splitlines()[0])["id"]
(2, 2, 'word', 'a')
>>> (d / "again.jsonl").exists()
False
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, TypeAlias, TypeGuard, TypeVar

from ._validation import BudgetLike, check_budget
from .engines.single import (
    DuplicateIdsCallback,
    check_duplicate_ids,
    check_file_outputs,
    open_release,
    stdout_when_done,
)
from .errors import ParameterError, ParameterTypeError
from .io import (
    SourcedDocument,
    is_stdout,
    read_sourced_documents,
    same_file,
    sequence_ids,
    settings_path,
    write_json,
)

if TYPE_CHECKING:  # the module imports no numpy: the CLI checks its options with it before any heavy import
    from ._rng import SeedLike
    from .accounting.ledger import PrivacyLedger
    from .backend import Backend
    from .guarantees import Guarantee, ReleaseRecord
    from .guarantees.events import Charge
    from .mechanisms import Mechanism
    from .progress import ProgressCallback

__all__ = ["FORMATS", "PRIVATE_NOTE", "DuplicateIdsCallback", "Ledger", "ReleaseSummary", "charge_ledger",
           "check_duplicate_ids", "check_file_outputs", "check_ledger_options", "check_private_report_path",
           "open_release", "release", "stdout_when_done"]

#: the release's file formats: ``jsonl`` (one record a line), ``text`` (the released words or text only), ``json``
#: (the one record of a matrix release as one JSON object)
FORMATS = ("jsonl", "text", "json")

#: a ledger: its path, or an open :class:`~textdp.accounting.ledger.PrivacyLedger`
Ledger: TypeAlias = "str | os.PathLike[str] | PrivacyLedger"

PRIVATE_NOTE = "PRIVATE: this report describes the private input; never publish it."

# the driver works for every mechanism: whatever its prepared input, core output and release record
P = TypeVar("P")
O = TypeVar("O")  # noqa: E741
R = TypeVar("R", bound="ReleaseRecord")


@dataclass
class _Charged:
    """What charging the ledger recorded during a release: events, the ``new_ledger`` note, the guarantee charged."""

    events: int = 0
    note: str | None = None
    guarantee: Guarantee | None = None


@dataclass(frozen=True)
class ReleaseSummary:
    """What :func:`release` wrote (public, except ``ledger_note``, which names a private file).

    Attributes
    ----------
    output : Path or None
        The release (``None``: standard output).
    records : int
        Records written.
    guarantee : Guarantee
        The guarantee every record carries.
    settings : Mapping
        The public settings file's content (also written to ``<output>.settings.json``).
    charged : int
        Ledger events recorded (one per record id; 0 without a ledger).
    ledger_note : str or None
        With ``new_ledger``: what accepting the ledger as it was forgot (print it to the user).
    skipped : int
        Units left out by ``empty="skip"`` (nothing to release; their ids are in the private report).
    """

    output: Path | None
    records: int
    guarantee: Guarantee
    settings: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    charged: int = 0
    ledger_note: str | None = None
    skipped: int = 0


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


def check_ledger_options(ledger: Ledger | None, *, budget: BudgetLike | None = None, new_ledger: bool = False,
                         output: str | os.PathLike[str] | None = None,
                         inputs: Sequence[str | os.PathLike[str] | None] = ()) -> None:
    """Refuse ledger options that cannot work, before any work (one-line errors naming the CLI options).

    >>> check_ledger_options(None, budget=3.0)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --budget needs --ledger FILE (where the spend of earlier runs is kept)
    """
    if budget is not None and ledger is None:
        raise ParameterError("--budget needs --ledger FILE (where the spend of earlier runs is kept)")
    if new_ledger and ledger is None:
        raise ParameterError("--new-ledger needs --ledger FILE (the ledger to accept as it is now)")
    check_budget(budget)
    if ledger is None:
        return
    path = _ledger_path(ledger)
    for given in inputs:
        if given is not None and str(given) != "-" and same_file(path, given):
            raise ParameterError(f"--ledger {path} is the input file {given}: the ledger is a separate private "
                                 "file where the spend is recorded; give another path (a new file is created)")
    if output is not None and str(output) != "-" and path.resolve().parent == Path(output).resolve().parent:
        raise ParameterError("--ledger is private (document ids and their spend): keep it out of the output's "
                             "folder, which is meant to be published")


def charge_ledger(ledger: Ledger, charges: Mapping[str, Charge], *, mechanism: str, unit: str,
                  budget: BudgetLike | None = None, new_ledger: bool = False,
                  command: str = "release") -> tuple[int, str | None]:
    """:func:`textdp.accounting.ledger.charge_ledger` (imported on first use: this module imports no numpy)."""
    from .accounting.ledger import charge_ledger as charge

    return charge(ledger, charges, mechanism=mechanism, unit=unit, budget=budget, new_ledger=new_ledger,
                  command=command)


def _ledger_path(ledger: Ledger) -> Path:
    return Path(ledger) if isinstance(ledger, (str, os.PathLike)) else ledger.path


def _is_path(x: object) -> TypeGuard[os.PathLike[str]]:
    return isinstance(x, os.PathLike)


def _read(documents: object, ids: Sequence[object] | None, *, text_field: str, id_field: str,
          input_format: str) -> tuple[list[object], list[str], list[str | None], list[Path]]:
    """The units, their record ids, their sources (PRIVATE, for the report) and the input files read."""
    if isinstance(documents, (str, bytes)):
        raise ParameterTypeError("documents must be a list of texts, or of files as pathlib.Path objects; a single "
                                 'str is ambiguous: write [text] for one document or [Path("FILE")] for a file')
    items = [documents] if _is_path(documents) else list(documents)  # type: ignore[call-overload]
    if items and all(_is_path(x) for x in items):
        paths = [Path(x) for x in items]
        docs = read_sourced_documents(paths, text_field=text_field, id_field=id_field, input_format=input_format)
        if ids is not None:
            raise ParameterError("ids= applies to documents given as texts; files carry their ids (--id-field)")
        return [d.text for d in docs], sequence_ids(docs), [d.source for d in docs], paths
    if any(_is_path(x) for x in items):
        raise ParameterTypeError("documents mixes files (Path) and texts: give one kind")
    if items and all(isinstance(x, SourcedDocument) for x in items):
        docs = [x for x in items if isinstance(x, SourcedDocument)]
        return [d.text for d in docs], sequence_ids(docs), [d.source for d in docs], []
    if ids is not None and len(ids) != len(items):
        raise ParameterTypeError(f"got {len(ids)} ids for {len(items)} documents")
    uids = [str(i) for i in range(len(items))] if ids is None else [str(x) for x in ids]
    return items, uids, [None] * len(items), []


def _report_row(diag: object, source: str | None, mech: object) -> dict[str, object]:
    """One PRIVATE report row from a mechanism's diagnostics object (any family)."""
    from .mechanisms import DocumentDiagnostics

    if isinstance(diag, DocumentDiagnostics):
        from .pipeline import _report_row as text_row

        return text_row(diag, source, mech)  # type: ignore[arg-type]
    if isinstance(diag, Mapping):
        row = dict(diag)
    elif dataclasses.is_dataclass(diag) and not isinstance(diag, type):
        row = dataclasses.asdict(diag)
    else:
        row = {"diagnostics": str(diag)}
    return {"id": row.pop("id", None), "source": source, **row} if source is not None else row



def _check_paths(out: Path | None, report: Path | None, documents: object, *,
                 inputs: Sequence[str | os.PathLike[str] | None], ledger: Ledger | None, budget: BudgetLike | None,
                 new_ledger: bool, force: bool) -> None:
    """Before any work: the ledger options, and no output (release, settings, report, ledger) is another file."""
    files = [*(None if x is None else Path(x) for x in inputs), *_paths_in(documents)]
    check_ledger_options(ledger, budget=budget, new_ledger=new_ledger, output=out, inputs=files)
    check_file_outputs(out, report, inputs=files, force=force)
    if ledger is not None:
        led_path = _ledger_path(ledger)
        for what, path in (("--output", out), ("--private-report", report)):
            if path is not None and same_file(path, led_path):
                raise ParameterError(f"{what} {path} is the ledger {led_path}; give another path")


def _sources_by_id(uids: Sequence[str], sources: Sequence[str | None]) -> dict[str, list[str | None]]:
    """PRIVATE: each id's sources, in input order (ids may repeat)."""
    by_id: dict[str, list[str | None]] = {}
    for uid, src in zip(uids, sources, strict=True):
        by_id.setdefault(uid, []).append(src)
    return by_id


@contextlib.contextmanager
def _removed_on_failure() -> Iterator[list[Path]]:
    """A list for the files a release writes; if the release fails or is interrupted, they are removed.

    Entered before the release's own file is opened, so its cleanup runs after that file's: nothing partial is left.
    """
    written: list[Path] = []
    try:
        yield written
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def _mark_skipped(rows: list[dict[str, object]], skipped: Sequence[str]) -> list[dict[str, object]]:
    """The report rows with every unit ``empty="skip"`` left out marked ``"skipped": true`` (a row of its own
    where the mechanism reports none), in input order: the report then says how many and which ids."""
    if not skipped:
        return rows
    left = dict.fromkeys(skipped, 0)
    for u in skipped:
        left[u] += 1
    marked = []
    for row in rows:
        uid = str(row.get("id"))
        if left.get(uid) and row.get("emptied"):
            row = {**row, "skipped": True}
            left[uid] -= 1
        marked.append(row)
    marked.extend({"id": u, "skipped": True} for u, n in left.items() for _ in range(n))
    return marked


def _skipped_ids(uids: Sequence[str], released: Sequence[str]) -> list[str]:
    """The ids of ``uids`` (input order, repeats counted) that no released record carries."""
    count: dict[str, int] = {}
    for r in released:
        count[r] = count.get(r, 0) + 1
    out = []
    for u in uids:
        if count.get(u):
            count[u] -= 1
        else:
            out.append(u)
    return out


def _write_small_files(out: Path | None, public: Mapping[str, object], report: Path | None,
                       rows: list[dict[str, object]], private_details: Mapping[str, object] | None, *, force: bool,
                       written: list[Path], skipped: Sequence[str] = ()) -> None:
    """The PRIVATE report (JSONL rows, or one object with ``private_details``), then the public settings file.

    ``skipped``: the ids ``empty="skip"`` left out, marked in the rows (and counted in the object form)."""
    from .pipeline import write_private_report

    if report is not None:
        rows = _mark_skipped(rows, skipped)
        if private_details is None:
            write_private_report(report, rows, overwrite=force)
        else:
            extra = {"skipped": {"count": len(skipped), "ids": list(skipped)}} if skipped else {}
            write_json(report, {"note": PRIVATE_NOTE, **private_details, **extra,
                                **({"documents": rows} if rows else {})}, overwrite=force, private=True)
        written.append(report)
    if out is not None:
        write_json(settings_path(out), public, overwrite=force, private=False)
        written.append(settings_path(out))


def _write_records(fh: IO[str], records: Iterable[dict[str, object]], fmt: str) -> None:
    if fmt == "json":
        for rec in records:
            fh.write(json.dumps(rec, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        return
    from .pipeline import write_records

    write_records(fh, records, fmt)


def _check_no_partition_size(partition_size: int | None) -> None:
    """``partition_size`` is the sentence engine's alone."""
    if partition_size is not None:
        raise ParameterError("partition_size applies to the sentence family on engine local or dask; the corpus "
                             "engine takes partitions=")


def release(
        mechanism: Mechanism[P, O, R], documents: object, output: str | os.PathLike[str] | IO[str] | None = None,
        *, ids: Sequence[object] | None = None, ledger: Ledger | None = None, budget: BudgetLike | None = None,
        new_ledger: bool = False, private_report: str | os.PathLike[str] | None = None,
        private_details: Mapping[str, object] | None = None, settings: Mapping[str, object] | None = None,
        command: str = "release", fmt: str | None = None, seed: SeedLike = None, seeded: bool | None = None,
        size: int | None = None, size_from_data: bool = False, empty: str = "error", force: bool = False,
        text_field: str = "text", id_field: str = "id", input_format: str = "auto",
        inputs: Sequence[str | os.PathLike[str] | None] = (), on_duplicate_ids: Callable[[int, str], None] | None = None,
        strict_ids: bool = False, progress: ProgressCallback | None = None,
        records_of: Callable[[ReleaseRecord], Iterable[ReleaseRecord]] | None = None, engine: str = "single",
        backend: Backend | None = None, partitions: int | None = None, partition_size: int | None = None,
        work_dir: str | os.PathLike[str] | None = None) -> ReleaseSummary:
    """Release ``documents`` with ``mechanism`` into ``output``: charge, privatize, write (see the module notes).

    Parameters
    ----------
    mechanism : Mechanism
        Any registered mechanism (:func:`textdp.mechanisms.get`), fitted or not.
    documents : list of str, list of pathlib.Path, or a family's units
        Texts (ids from ``ids``, else ``"0"``, ``"1"``, ...), files (``os.PathLike``; ids from ``id_field``, else
        their sequence number) or units such as topic matrices. A bare ``str`` is refused (text or file name?).
    output : path, text stream or None
        The release (written atomically; ``None``: standard output once everything is written; an open text stream:
        written into it, the caller closes it). ``<output>.settings.json`` (public) is written beside a path.
    ids : sequence, optional
        Record ids of texts or units given directly (one per unit; also the ledger's keys).
    ledger, budget, new_ledger
        PRIVATE ledger (:class:`~textdp.accounting.ledger.PrivacyLedger` or path): each record id is charged its
        :meth:`~textdp.guarantees.Guarantee.charge` before any noise is drawn; an id's composed ε past ``budget``
        refuses the whole release (nothing written or recorded); ``new_ledger``: ``textdp ledger reset`` first.
    private_report, private_details
        The PRIVATE report's path (mode 0600): one row per record id (source, counts, noise diagnostics), as JSONL
        rows, or with ``private_details`` (further private facts) one object ``{**private_details, "documents": rows}``.
    settings, command, fmt
        Further PUBLIC settings for the settings file (the caller vouches they are public); the command named in
        it and the ledger; ``jsonl`` (default), ``text`` (released words only) or ``json`` (one record as an
        object; the default for matrix releases).
    seed, seeded, size, size_from_data, empty
        As for :meth:`~textdp.mechanisms.Mechanism.privatize_batch` (``seeded``: whether the randomness came from a
        user seed, when ``seed`` or the mechanism's ``seed`` is a generator that cannot say).
    force, inputs, text_field, id_field, input_format, on_duplicate_ids, strict_ids
        Replace existing outputs (never an input, nor one of ``inputs``: further files read, e.g. embeddings); how
        files are read (:func:`textdp.io.read_sourced_documents`); repeated record ids reported
        (``on_duplicate_ids(count, first)``) or refused.
    progress, records_of, engine, backend, partitions, partition_size, work_dir
        ``progress(done, total)`` after each chunk; the others: module notes, "Engines" (``engine``: ``single``, the
        default, runs in one process).

    Returns
    -------
    ReleaseSummary
        What was written; the guarantee every record carries.

    Raises
    ------
    textdp.errors.TextDPError
        A one-line error saying how to fix it; nothing is written then.
    """
    if engine != "single" and _rewrites_on_engine(mechanism):
        return _release_sentences(
            mechanism, documents, output, ids=ids, engine=engine, backend=backend, partitions=partitions,
            partition_size=partition_size, work_dir=work_dir, ledger=ledger, budget=budget, new_ledger=new_ledger,
            private_report=private_report, private_details=private_details, settings=settings, command=command,
            fmt=fmt or "jsonl", seed=seed, force=force, text_field=text_field, id_field=id_field,
            input_format=input_format, inputs=inputs, on_duplicate_ids=on_duplicate_ids, strict_ids=strict_ids,
            progress=progress, records_of=records_of, empty=empty)
    _check_no_partition_size(partition_size)
    if engine != "single":
        return _release_partitioned(
            mechanism, documents, output, engine=engine, backend=backend, partitions=partitions, work_dir=work_dir,
            ledger=ledger, budget=budget, new_ledger=new_ledger, private_report=private_report, settings=settings,
            fmt=fmt or "jsonl", empty=empty, force=force, text_field=text_field, id_field=id_field,
            input_format=input_format, on_duplicate_ids=on_duplicate_ids, strict_ids=strict_ids, progress=progress)
    return _release_single(
        mechanism, documents, output, ids=ids, ledger=ledger, budget=budget, new_ledger=new_ledger,
        private_report=private_report, private_details=private_details, settings=settings, command=command, fmt=fmt,
        seed=seed, seeded=seeded, size=size, size_from_data=size_from_data, empty=empty, force=force,
        text_field=text_field, id_field=id_field, input_format=input_format, inputs=inputs,
        on_duplicate_ids=on_duplicate_ids, strict_ids=strict_ids, progress=progress, records_of=records_of)

def _release_single(
        mechanism: Mechanism[P, O, R], documents: object, output: str | os.PathLike[str] | IO[str] | None, *,
        ids: Sequence[object] | None, ledger: Ledger | None, budget: BudgetLike | None, new_ledger: bool,
        private_report: str | os.PathLike[str] | None, private_details: Mapping[str, object] | None,
        settings: Mapping[str, object] | None, command: str, fmt: str | None, seed: SeedLike, seeded: bool | None,
        size: int | None, size_from_data: bool, empty: str, force: bool, text_field: str, id_field: str,
        input_format: str, inputs: Sequence[str | os.PathLike[str] | None],
        on_duplicate_ids: Callable[[int, str], None] | None, strict_ids: bool, progress: ProgressCallback | None,
        records_of: Callable[[ReleaseRecord], Iterable[ReleaseRecord]] | None) -> ReleaseSummary:
    """:func:`release` on engine ``single``: one process, the release written as it is drawn."""
    from .pipeline import release_settings

    fmt = fmt if fmt is not None else ("json" if mechanism.releases == "matrix" else "jsonl")
    if fmt not in FORMATS:
        raise ParameterError(f"unknown output format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    stream = output if output is not None and not isinstance(output, (str, os.PathLike)) else None
    out = None if output is None or stream is not None or is_stdout(output) else Path(output)  # type: ignore[arg-type]
    report = None if private_report is None else Path(private_report)
    _check_paths(out, report, documents, inputs=inputs, ledger=ledger, budget=budget, new_ledger=new_ledger,
                 force=force)
    units, uids, sources, _ = _read(documents, ids, text_field=text_field, id_field=id_field,
                                    input_format=input_format)
    if not units:
        raise ParameterError("input has no documents (an empty file holds none)")
    check_duplicate_ids(lambda: uids, strict=strict_ids, on_duplicate_ids=on_duplicate_ids)
    if fmt == "json" and len(units) != 1:
        raise ParameterError(f"format json writes one record; got {len(units)} units: use jsonl")

    state = _Charged()

    def on_charge(charges: dict[str, Charge], guarantee: Guarantee) -> None:
        state.guarantee = guarantee
        if ledger is not None:
            state.events, state.note = charge_ledger(
                ledger, charges, mechanism=mechanism.name, unit=guarantee.unit, budget=budget,
                new_ledger=new_ledger, command=command)

    diags: list[object] = []
    rows: list[dict[str, object]] = []
    n_records = 0
    released: list[str] = []
    by_id = _sources_by_id(uids, sources)
    with _removed_on_failure() as written, \
            (open_release(out, force=force) if stream is None else contextlib.nullcontext(stream)) as fh:
        for part in mechanism.iter_privatize_batch(
                units, uids, seed=seed, seeded=seeded, size=size, size_from_data=size_from_data, empty=empty,
                private_report=diags if report is not None else None, progress=progress, charge=on_charge):
            released.extend(str(getattr(rec, "id", "")) for rec in part)
            out_records = part if records_of is None else [r for rec in part for r in records_of(rec)]
            _write_records(fh, (rec.to_record() for rec in out_records), fmt)
            n_records += len(out_records)
            rows.extend(_report_row(dg, _source(by_id, dg), mechanism) for dg in diags)
            diags.clear()
        from ._rng import is_seeded
        from .mechanisms import ReleaseContext

        guarantee: Guarantee = state.guarantee or mechanism.guarantee(
            ReleaseContext(seeded=bool(seeded) if seeded is not None else bool(is_seeded(seed)) if seed is not None
                       else mechanism.seeded_, empty=empty))
        public = release_settings(guarantee.to_dict(), command=command, engine="single", documents=n_records,
                                  fmt=fmt, extra=dict(settings or {}))
        skipped = _skipped_ids(uids, released) if empty == "skip" else []
        # the small files first; the release itself is moved into place last (when ``fh`` closes)
        _write_small_files(out, public, report, rows, private_details, force=force, written=written,
                           skipped=skipped)
    return ReleaseSummary(output=out, records=n_records, guarantee=guarantee, settings=MappingProxyType(public),
                          charged=state.events, ledger_note=state.note, skipped=len(skipped))



#: the corpus engine's own options; every other declared parameter goes to it as a mechanism parameter
_CORPUS_OPTIONS = ("epsilon", "embeddings", "vocab_size", "stop_words", "seed", "size", "size_from_data", "bag",
                   "decoder", "known_source", "postprocess")


def _release_partitioned(mechanism: Mechanism[P, O, R], documents: object, output: object, *, engine: str,
                         backend: Backend | None, partitions: int | None, work_dir: str | os.PathLike[str] | None,
                         ledger: Ledger | None, budget: BudgetLike | None, new_ledger: bool,
                         private_report: str | os.PathLike[str] | None, settings: Mapping[str, object] | None,
                         fmt: str, empty: str, force: bool, text_field: str, id_field: str, input_format: str,
                         on_duplicate_ids: Callable[[int, str], None] | None, strict_ids: bool,
                         progress: ProgressCallback | None) -> ReleaseSummary:
    """:func:`release` on the corpus engine: files in, a folder of parts out (see its ``engine``)."""
    from .engines import ENGINES, get_backend
    from .engines.corpus import obfuscate_corpus
    from .mechanisms import BagMechanism, ReleaseContext, TextMechanism

    if engine not in ENGINES:
        raise ParameterError(f"unknown engine {engine!r}; choose single or one of: {', '.join(ENGINES)}")
    if not isinstance(mechanism, TextMechanism):
        raise ParameterError(f"engine {engine} runs the document and word families; {mechanism.name} is a "
                             f"{mechanism.family} mechanism: use engine='single'")
    paths = _paths_in(documents)
    if not paths or (isinstance(documents, (list, tuple)) and len(paths) != len(documents)):
        raise ParameterError(f"engine {engine} reads files: give documents as a list of pathlib.Path")
    if output is None or not isinstance(output, (str, os.PathLike)):
        raise ParameterError(f"engine {engine} writes a folder: give output as its path")
    p = mechanism.get_params()
    seed, stop_words, epsilon = mechanism.seed, mechanism.stop_words, mechanism.epsilon
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ParameterError("a partitioned release takes an int seed or none (each partition's generator is "
                             "spawned from it); the generator given cannot be split reproducibly")
    if stop_words is not None and not isinstance(stop_words, str):
        raise ParameterError("a partitioned release takes stop_words='english' or None (the workers rebuild it)")
    if epsilon is None:
        raise ParameterError("a partitioned release needs epsilon (rate= runs with engine='single')")
    mechanism.fit()
    size = mechanism.size if isinstance(mechanism, BagMechanism) else None  # only the bag family has one
    postprocess = p.get("postprocess")  # a name or None (fit checked it), where the mechanism has one
    check_ledger_options(ledger, budget=budget, new_ledger=new_ledger, output=Path(output) / "x", inputs=paths)
    counted = _Charged()

    def on_ledger(events: int, note: str | None) -> None:
        counted.events, counted.note = events, note

    own = backend or get_backend(engine)
    try:
        summary = obfuscate_corpus(
            paths, Path(output), embeddings=mechanism.embeddings_, epsilon=float(epsilon), size=size,
            bag=str(p.get("bag", "truncate")), stop_words=stop_words, decoder=str(p.get("decoder", "exact")),
            seed=seed, backend=own, size_from_data=bool(p.get("size_from_data", False)),
            known_source=bool(p.get("known_source", False)), partitions=partitions, text_field=text_field,
            id_field=id_field, input_format=input_format, fmt=fmt,
            work_dir=None if work_dir is None else Path(work_dir),
            private_report=None if private_report is None else Path(private_report),
            extra_settings=dict(settings or {}), progress=progress, force=force, strict_ids=strict_ids,
            on_duplicate_ids=on_duplicate_ids, mechanism=mechanism.name,
            postprocess=postprocess if isinstance(postprocess, str) else None,
            params={k: v for k, v in p.items() if k not in _CORPUS_OPTIONS}, empty=empty, ledger=ledger,
            budget=budget, new_ledger=new_ledger, on_ledger=on_ledger)
    finally:
        if backend is None:
            own.close()
    bag = mechanism.releases == "bag"
    released_size = summary.get("size")
    context = ReleaseContext(size=int(released_size) if bag and isinstance(released_size, int) else None,
                             size_from_data=bool(p.get("size_from_data")) and bag, seeded=p.get("seed") is not None,
                             empty=empty)
    return ReleaseSummary(output=Path(output), records=int(str(summary.get("documents", 0))),
                          guarantee=mechanism.guarantee(context), settings=MappingProxyType(dict(summary)),
                          charged=counted.events, ledger_note=counted.note)


def _rewrites_on_engine(mechanism: object) -> bool:
    """The mechanism is a sentence mechanism on a textdp model (:func:`textdp.engines.sentences.rewrite_corpus`).

    Its class's module is loaded if it is one, so nothing is imported to ask (this module imports no numpy).
    """
    rewriter = sys.modules.get("textdp.generation.rewriter")
    return rewriter is not None and isinstance(mechanism, rewriter.SentenceMechanism)


#: documents per partition of a partitioned sentence release, unless given
PARTITION_SIZE = 256


def _sentence_inputs(
        name: str, documents: object, output: object, *, ids: Sequence[object] | None,
        engine: str, fmt: str, empty: str, private_report: str | os.PathLike[str] | None,
        inputs: Sequence[str | os.PathLike[str] | None], ledger: Ledger | None, budget: BudgetLike | None,
        new_ledger: bool, force: bool, text_field: str, id_field: str, input_format: str,
        on_duplicate_ids: Callable[[int, str], None] | None, strict_ids: bool,
) -> tuple[Path, Path | None, list[object], list[str], list[str | None], list[str]]:
    """:func:`_release_sentences`'s checks, in order, and its input: output, report, units, ids, sources, texts.

    ``name``: the mechanism's, for the error messages.
    """
    from ._validation import check_choice
    from .engines import ENGINES
    from .guarantees import EMPTY_POLICIES

    if engine not in ENGINES:
        raise ParameterError(f"unknown engine {engine!r}; choose single or one of: {', '.join(ENGINES)}")
    if fmt not in ("jsonl", "text"):
        raise ParameterError(f"unknown output format {fmt!r} for a partitioned release; choose jsonl or text")
    check_choice(empty, "empty policy", EMPTY_POLICIES)
    if output is None or not isinstance(output, (str, os.PathLike)) or is_stdout(output):
        raise ParameterError(f"engine {engine} writes a file it can resume: give output as its path")
    out, report = Path(output), None if private_report is None else Path(private_report)
    _check_paths(out, report, documents, inputs=inputs, ledger=ledger, budget=budget, new_ledger=new_ledger,
                 force=force)
    units, uids, sources, _ = _read(documents, ids, text_field=text_field, id_field=id_field,
                                    input_format=input_format)
    if not units:
        raise ParameterError("input has no documents (an empty file holds none)")
    texts = [u for u in units if isinstance(u, str)]
    if len(texts) != len(units):
        raise ParameterTypeError(f"{name} rewrites texts: give documents as str (or files)")
    if not any(t.strip() for t in texts):
        raise ParameterError("every input document is empty")
    check_duplicate_ids(lambda: uids, strict=strict_ids, on_duplicate_ids=on_duplicate_ids)
    return out, report, units, uids, sources, texts


def _resume_key(out: Path, *, command: str, fmt: str, empty: str, settings: Mapping[str, object] | None,
                report: Path | None, ledger: Ledger | None,
                records_of: Callable[[ReleaseRecord], Iterable[ReleaseRecord]] | None) -> dict[str, object]:
    """What a resumed sentence run must share with the run it resumes."""
    return {"output": str(out.resolve()), "command": command, "format": fmt, "empty": empty,
            "settings": json.dumps(dict(settings or {}), sort_keys=True, default=str),
            "private_report": report is not None,
            "ledger": None if ledger is None else str(_ledger_path(ledger).resolve()),
            "records_of": None if records_of is None else getattr(records_of, "__qualname__", repr(records_of))}


def _release_sentences(mechanism: Mechanism[P, O, R], documents: object, output: object, *,
                       ids: Sequence[object] | None, engine: str, backend: Backend | None, partitions: int | None,
                       partition_size: int | None, work_dir: str | os.PathLike[str] | None, ledger: Ledger | None,
                       budget: BudgetLike | None, new_ledger: bool, private_report: str | os.PathLike[str] | None,
                       private_details: Mapping[str, object] | None, settings: Mapping[str, object] | None,
                       command: str, fmt: str, seed: SeedLike, force: bool, text_field: str, id_field: str,
                       input_format: str, inputs: Sequence[str | os.PathLike[str] | None],
                       on_duplicate_ids: Callable[[int, str], None] | None, strict_ids: bool,
                       progress: ProgressCallback | None,
                       records_of: Callable[[ReleaseRecord], Iterable[ReleaseRecord]] | None,
                       empty: str) -> ReleaseSummary:
    """:func:`release` of a sentence mechanism on the engine: the same files as ``single``, partitioned, resumable."""
    from ._validation import check_positive_int
    from .engines import get_backend
    from .engines.sentences import SentencePiece, rewrite_corpus
    from .mechanisms import ReleaseContext
    from .pipeline import release_settings

    out, report, units, uids, sources, texts = _sentence_inputs(
        mechanism.name, documents, output, ids=ids, engine=engine, fmt=fmt, empty=empty, private_report=private_report,
        inputs=inputs, ledger=ledger, budget=budget, new_ledger=new_ledger, force=force, text_field=text_field,
        id_field=id_field, input_format=input_format, on_duplicate_ids=on_duplicate_ids, strict_ids=strict_ids)
    if partition_size is None:
        partition_size = PARTITION_SIZE if partitions is None else -(-len(units) // check_positive_int(
            partitions, "partitions"))
    size = check_positive_int(partition_size, "partition_size")
    run_seed = seed if seed is not None else mechanism.get_params().get("seed")
    mechanism._ensure_fitted()
    context = ReleaseContext(seeded=run_seed is not None, empty=empty)
    guarantee = mechanism.guarantee(context)
    state = _Charged()

    def charges() -> tuple[dict[str, Charge], Guarantee]:
        counts = mechanism.charge_counts(units, uids, context=context)  # every unit validated first
        return {uid: guarantee.charge(n) for uid, n in counts.items()}, guarantee

    def on_charge(owed: Mapping[str, Charge], g: Guarantee) -> None:
        if ledger is not None:
            state.events, state.note = charge_ledger(
                ledger, owed, mechanism=mechanism.name, unit=g.unit, budget=budget, new_ledger=new_ledger,
                command=command)

    def to_records(doc: ReleaseRecord) -> list[dict[str, object]]:
        return [r.to_record() for r in (records_of(doc) if records_of is not None else [doc])]

    def finish(pieces: list[SentencePiece]) -> ReleaseSummary:
        by_id = _sources_by_id(uids, sources)
        rows: list[dict[str, object]] = []
        n_records = 0
        with _removed_on_failure() as written, open_release(out, force=force) as fh:
            for piece in pieces:
                _write_records(fh, piece.records, fmt)
                n_records += len(piece.records)
                rows.extend(_report_row(dg, _source(by_id, dg), mechanism) for dg in piece.diagnostics)
            public = release_settings(guarantee.to_dict(), command=command, engine=engine, documents=n_records,
                                      fmt=fmt, extra={**dict(settings or {}), "partition_size": size})
            _write_small_files(out, public, report, rows, private_details, force=force, written=written)
        return ReleaseSummary(output=out, records=n_records, guarantee=guarantee, settings=MappingProxyType(public),
                              charged=state.events, ledger_note=state.note)

    key = _resume_key(out, command=command, fmt=fmt, empty=empty, settings=settings, report=report, ledger=ledger,
                      records_of=records_of)
    own = backend or get_backend(engine)
    try:
        return rewrite_corpus(mechanism, list(zip(uids, texts, strict=True)),  # type: ignore[arg-type]
                              backend=own, partition_size=size, seed=run_seed,  # type: ignore[arg-type]
                              charges=charges, on_charge=on_charge, to_records=to_records, finish=finish, key=key,
                              work_dir=None if work_dir is None else Path(work_dir), progress=progress, empty=empty)
    finally:
        if backend is None:
            own.close()


def _source(by_id: dict[str, list[str | None]], diag: object) -> str | None:
    """The next source of the diagnostics' record id (PRIVATE), or None."""
    uid = diag.get("id") if isinstance(diag, Mapping) else getattr(diag, "id", None)
    left = by_id.get(str(uid))
    return left.pop(0) if left else None


def _paths_in(documents: object) -> list[Path]:
    if _is_path(documents):
        return [Path(documents)]
    if isinstance(documents, (list, tuple)):
        return [Path(x) for x in documents if _is_path(x)]
    return []

