"""The document job: read -> privatize -> release records, plus an optional private report.

The steps of a document-family or word-family release that the release driver
(:func:`textdp.release.release`, every command and Python caller) and the partitioned
engine's jobs (:func:`textdp.engines.jobs.run_partition`) share: :func:`build_mechanism`
(the CLI's options to a fitted mechanism), :func:`iter_privatize_documents` (records and
private report rows a chunk at a time), :func:`write_records`, :func:`write_private_report`
and :func:`release_settings` (the one layout of a release's public settings file, for every
command), so a record and a settings file look the same whichever path made them. It sits
above :mod:`textdp.mechanisms`, :mod:`textdp.accounting` and :mod:`textdp.io` and below
:mod:`textdp.release`, :mod:`textdp.cli` and :mod:`textdp.engines`.

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

Every mechanism ``textdp obfuscate`` takes (:data:`textdp.mechanisms.MECHANISM_NAMES`: the
document and word families) runs through the same job; :func:`build_mechanism` configures one
from the options the CLI offers. Records have the one layout of
:class:`textdp.guarantees.ReleaseRecord` (schema: ``textdp/schemas/record.schema.json``):
``{"id", "release", "words" | "text", "mechanism", "epsilon", "delta", "unit", "guarantee":
{compact}, "seeded"}``; a ``bag`` release (``earth-movers``, ``syntf``) holds exactly N words
(``size``, public) sorted by vocabulary row, a ``text`` release one word per protected input
word in input order. The settings file holds the full guarantee (statement and reference) once.
Units with nothing to privatize follow the ``empty`` policy (``error``/``skip``/``empty``); the
private report marks them ``"emptied": true``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TypedDict, Unpack

import numpy as np

from ._options import OUTPUT_FORMATS, parse_params
from ._options import check_size_options as _check_size_options
from .accounting.diagnostics import report_fields
from .embeddings import Embeddings
from .errors import ParameterError
from .guarantees import ReleaseRecord
from .io import SourcedDocument, atomic_writer, sequence_ids
from .mechanisms import DocumentDiagnostics, ReleaseContext, TextMechanism, entry, get
from .progress import ProgressCallback

__all__ = [
    "DEFAULT_MECHANISM",
    "JobOptions",
    "JobResult",
    "build_mechanism",
    "check_size_options",
    "iter_privatize_documents",
    "mechanism_decoder",
    "mechanism_guarantee",
    "parse_params",
    "privatize_documents",
    "release_settings",
    "write_private_report",
    "write_records",
]

DEFAULT_MECHANISM = "earth-movers"


def check_size_options(mechanism: str, size: int | None, size_from_data: bool) -> None:
    """Bag mechanisms need a public bag size N (``size``) or ``size_from_data``; text mechanisms take neither.

    :func:`textdp._options.check_size_options` for the registered mechanism ``mechanism``.

    >>> check_size_options("cmp", 20, False)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --size applies to bag mechanisms (earth-movers, syntf); cmp releases text (one word per protected input word): drop --size
    """
    _check_size_options(mechanism, entry(mechanism).releases, size, size_from_data)


def build_mechanism(
    name: str = DEFAULT_MECHANISM,
    *,
    epsilon: float,
    embeddings: Embeddings | str | os.PathLike[str] | None = None,
    stop_words: str | Iterable[str] | None = "english",
    seed: int | np.random.Generator | None = None,
    size: int | None = None,
    size_from_data: bool = False,
    bag: str = "truncate",
    decoder: str = "exact",
    known_source: bool = False,
    postprocess: str | None = None,
    params: Mapping[str, object] | Sequence[str] | None = None,
) -> TextMechanism:
    """A fitted mechanism from the registry, configured from the options ``textdp obfuscate`` offers.

    Options that do not apply to the mechanism are refused with a one-line
    :class:`~textdp.errors.ParameterError` (never ignored): ``size``/``bag``/
    ``known_source`` are for bag mechanisms, ``decoder`` for the mechanisms that decode
    a noisy vector (``earth-movers``, ``cmp``, ``mahalanobis``), ``postprocess`` for
    ``earth-movers`` and ``cmp``. ``params`` are the mechanism's own parameters
    (``t``, ``lambd``, ``beta``, ``p``, ``top_k``, ``rate``, ``candidates``, ...).
    Which options a mechanism takes is read from its declared parameters
    (:meth:`~textdp.mechanisms.Mechanism.param_names`) and its release form.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = build_mechanism("vickrey", epsilon=1.0, embeddings=emb, stop_words=None, params=["t=0.25"])
    >>> type(mech).__name__, mech.t, mech.releases
    ('Vickrey', 0.25, 'text')
    >>> build_mechanism("tem", epsilon=1.0, embeddings=emb, decoder="hnsw")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --decoder applies to earth-movers, cmp, mahalanobis (tem has no decoder)
    """
    e = entry(name)
    if e.family not in ("document", "word"):
        raise ParameterError(f"{name} is a {e.family} mechanism: use textdp "
                             f"{'rewrite' if e.family == 'sentence' else 'topics'}, not obfuscate")
    own = e.load().param_names()
    kwargs: dict[str, object] = parse_params(params)
    rate_given = kwargs.get("rate") is not None
    clash = sorted(set(kwargs) & {"epsilon", "embeddings", "seed", "stop_words"})
    if clash:
        raise ParameterError(f"--param {clash[0]}: give it with its own option, not as a mechanism parameter")
    if e.releases != "bag":
        if bag != "truncate":
            raise ParameterError(f"--bag applies to bag mechanisms; {name} releases text")
        if size is not None or size_from_data:
            check_size_options(name, size, size_from_data)
    if known_source and "known_source" not in own:
        raise ParameterError(f"--known-source applies to earth-movers only, not {name}")
    if bag != "truncate" and "bag" not in own:
        raise ParameterError(f"--bag applies to earth-movers; {name} draws its bag from the whole vocabulary")
    for key, value in (("size", size), ("size_from_data", size_from_data), ("bag", bag),
                       ("known_source", known_source)):
        if key in own:
            kwargs[key] = value
    if (decoder != "exact" or "decoder" in kwargs) and "decoder" not in own:
        raise ParameterError(f"--decoder applies to earth-movers, cmp, mahalanobis ({name} has no decoder)")
    if "decoder" in own:
        kwargs.setdefault("decoder", decoder)
    if postprocess is not None:
        if "postprocess" not in own:
            raise ParameterError(f"--postprocess applies to earth-movers and cmp, not {name}")
        kwargs["postprocess"] = postprocess
    # ``random`` takes a replacement rate instead of epsilon (--param rate=0.3 with no --epsilon)
    mech = get(name, **kwargs, stop_words=stop_words, seed=seed, embeddings=embeddings,
               epsilon=None if rate_given and epsilon is None else epsilon)
    assert isinstance(mech, TextMechanism)
    return mech.fit()


def mechanism_guarantee(mech: TextMechanism, *, size: int | None = None, seeded: bool,
                        size_from_data: bool = False, empty: str = "error") -> dict[str, object]:
    """The full guarantee of a fitted mechanism's release as a dict (bag mechanisms need ``size``)."""
    ctx = ReleaseContext(size=size, size_from_data=size_from_data, seeded=seeded, empty=empty)
    return mech.guarantee(ctx).to_dict()


def mechanism_decoder(mech: TextMechanism) -> str:
    """The decoder a fitted mechanism uses, from its guarantee's public parameters (``"none"`` if it decodes nothing)."""
    return str(mech.guarantee(ReleaseContext(size=1)).params.get("decoder", "none"))


@dataclass(frozen=True)
class JobResult:
    """What one document job produced.

    ``documents`` and ``records`` are for release; ``report`` (or ``None``) is
    the PRIVATE report, one dict per record, keyed by ``id``.
    """

    documents: list[ReleaseRecord]
    records: list[dict[str, object]]
    report: list[dict[str, object]] | None


def privatize_documents(
    mech: TextMechanism,
    docs: Sequence[SourcedDocument],
    *,
    first: int = 0,
    size: int | None = None,
    seed: int | np.random.Generator | None = None,
    seeded: bool | None = None,
    size_from_data: bool = False,
    empty: str = "error",
    private_report: bool = False,
    progress: ProgressCallback | None = None,
) -> JobResult:
    """Privatize ``docs`` with ``mech``: release records and, on request, the private report.

    Parameters
    ----------
    mech : a registered mechanism object
        A (fitted or not) mechanism (:func:`build_mechanism`); it is not modified.
    docs : sequence of SourcedDocument
        The input documents (own id or ``None``, text, origin).
    first : int
        Sequence number of ``docs[0]`` in the whole input (ids of documents without one).
    size, seed, seeded, size_from_data, empty
        As for :meth:`textdp.mechanisms.Mechanism.privatize_batch` (``size``/``size_from_data``:
        bag mechanisms only; ``empty``: ``error``, ``skip`` or ``empty``).
    private_report : bool
        Also return the private report (see the module notes).

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> from textdp.mechanisms import EarthMoversPrivacy
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = EarthMoversPrivacy(epsilon=1e6, embeddings=emb, stop_words=None)
    >>> job = privatize_documents(mech, [SourcedDocument(None, "dog car zebra", "/home/a/notes.txt")],
    ...                           size=2, private_report=True)
    >>> job.records[0]["id"], job.records[0]["words"], "n_tokens" in job.records[0]
    ('0', ['dog', 'car'], False)
    >>> job.report[0]["source"], job.report[0]["dropped_oov"]
    ('/home/a/notes.txt', 1)
    """
    documents: list[ReleaseRecord] = []
    records: list[dict[str, object]] = []
    report: list[dict[str, object]] | None = [] if private_report else None
    for part in iter_privatize_documents(
        mech, docs, first=first, size=size, seed=seed, seeded=seeded, size_from_data=size_from_data,
        empty=empty, private_report=private_report, progress=progress,
    ):
        documents.extend(part.documents)
        records.extend(part.records)
        if report is not None and part.report is not None:
            report.extend(part.report)
    return JobResult(documents, records, report)


class JobOptions(TypedDict, total=False):
    """The keyword options of the document job (:func:`privatize_documents` documents each)."""

    first: int
    size: int | None
    seed: int | np.random.Generator | None
    seeded: bool | None
    size_from_data: bool
    empty: str
    private_report: bool
    progress: ProgressCallback | None


def iter_privatize_documents(mech: TextMechanism, docs: Sequence[SourcedDocument],
                             **options: Unpack[JobOptions]) -> Iterator[JobResult]:
    """:func:`privatize_documents`, one chunk of documents at a time (same arguments).

    Every document is validated before the first chunk is noised; write each
    chunk's records as it comes (:func:`write_records`) and the memory stays
    bounded whatever the number of documents and N
    (:meth:`textdp.mechanisms.Mechanism.iter_privatize_batch`).
    """
    docs = list(docs)
    ids = sequence_ids(docs, options.get("first", 0))
    diags: list[DocumentDiagnostics] | None = [] if options.get("private_report") else None
    if not docs:
        return
    pos = 0
    for part in mech.iter_privatize_batch(
        [d.text for d in docs], ids, size=options.get("size"), seed=options.get("seed"), seeded=options.get("seeded"),
        size_from_data=options.get("size_from_data", False), empty=options.get("empty", "error"),
        private_report=diags, progress=options.get("progress"),
    ):
        report = None
        if diags is not None:
            report = [_report_row(diag, doc.source, mech)
                      for diag, doc in zip(diags, docs[pos : pos + len(diags)], strict=True)]
            pos += len(diags)
            diags.clear()
        yield JobResult(part, [d.to_record() for d in part], report)


def _report_row(diag: DocumentDiagnostics, source: str | None, mech: TextMechanism
                ) -> dict[str, object]:
    """One PRIVATE report row; an emptied (or skipped) document is marked ``"emptied": true``."""
    if diag.emptied:
        return {"id": diag.id, "source": source, "n_tokens": diag.n_tokens, "dropped_oov": diag.dropped_oov,
                "n_in_vocabulary": 0, "emptied": True}
    return {"id": diag.id, "source": source, **report_fields(diag, mech.embeddings_)}


def write_records(fh: IO[str], records: Iterable[Mapping[str, object]], fmt: str = "jsonl") -> None:
    """Write release records as JSONL, or only their words (``fmt="text"``, one bag or text per line)."""
    if fmt not in OUTPUT_FORMATS:
        raise ParameterError(f"unknown output format {fmt!r}; choose one of: {', '.join(OUTPUT_FORMATS)}")
    for rec in records:
        if fmt == "text":
            fh.write(_text_line(rec) + "\n")
        else:
            fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


def _text_line(rec: Mapping[str, object]) -> str:
    """A record's words as one line: its ``text``, or its bag's ``words`` joined by spaces."""
    if "text" in rec:
        text = rec["text"]
        assert isinstance(text, str), "a record's text is a string"
        return text
    words = rec["words"]
    assert isinstance(words, (list, tuple)), "a record's words are a list"
    return " ".join(words)


def write_private_report(
    path: str | os.PathLike[str], rows: Iterable[Mapping[str, object]], *, overwrite: bool = True
) -> None:
    """Write the PRIVATE report as JSONL (one object per record id), atomically and owner-only (mode 0600)."""
    with atomic_writer(path, overwrite=overwrite, private=True) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


def _parameters(guarantee: Mapping[str, object]) -> dict[str, object]:
    """The guarantee's public ``parameters`` (none when it states none)."""
    params = guarantee.get("parameters", {})
    assert isinstance(params, Mapping), "a guarantee's parameters are a mapping"
    return dict(params)


def release_settings(
    guarantee_dict: Mapping[str, object],
    *,
    command: str,
    engine: str,
    documents: int,
    fmt: str,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The public settings of a release (written beside it by every command): parameters and the guarantee.

    The one layout of ``<output>.settings.json`` (:func:`textdp.release.release` writes it for every
    family; the partitioned engine writes it as ``settings.json``): the textdp version, the
    ``command``, the ``engine``, the number of records (``documents``), the ``format``, whether a
    seed was used (``seeded``; never the seed), the caller's ``extra`` public settings, the
    guarantee's public parameters and bound at the top level, and the full guarantee
    (``guarantee_dict``, :meth:`~textdp.guarantees.Guarantee.to_dict`: statement and reference
    included) once, under ``guarantee``; records carry its compact form. Nothing private: no input
    path, no seed.

    >>> s = release_settings({"seeded": False, "statement": "..."}, command="obfuscate", engine="single",
    ...                      documents=3, fmt="jsonl", extra={"stop_words": "english"})
    >>> s["seeded"], s["stop_words"], "inputs" in s, "seed" in s
    (False, 'english', False, False)
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        textdp_version = version("textdp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        textdp_version = "unknown"
    g = dict(guarantee_dict)
    return {
        "textdp_version": textdp_version,
        "command": command,
        "engine": engine,
        "documents": int(documents),
        "format": fmt,
        "seed_note": (
            "seeded: anyone who knows the seed can undo the noise (experiments only); the seed is not recorded"
            if g.get("seeded")
            else "fresh OS entropy (not recorded)"
        ),
        **dict(extra or {}),
        **_parameters(g),
        **{k: g[k] for k in ("mechanism", "epsilon", "delta", "unit", "seeded") if k in g},
        "guarantee": g,
    }
