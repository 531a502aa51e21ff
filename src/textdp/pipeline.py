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

Every registered mechanism (:data:`textdp.mechanisms.MECHANISM_NAMES`) runs
through the same job; :func:`build_mechanism` configures one from the options the
CLI offers. Two kinds of release (:func:`release_kind`):

* **bag** mechanisms (``earth-movers``, ``syntf``): every document becomes exactly N words
  (``size``, public), released sorted by vocabulary row. Record (``earth-movers``):
  ``{"id", "words": [...], "mechanism", "epsilon", "delta", "unit": "document",
  "size", "bag", "dim", "vocab_size", "embeddings", "decoder", "seeded", "guarantee"}``;
  ``syntf`` (a synthetic bag drawn from the whole vocabulary,
  :class:`~textdp.mechanisms.syntf.SynTFPrivacy`): ``{"id", "words": [...], "mechanism",
  "epsilon", "delta", "unit": "document", "size", "vocab_size", "variant", "embeddings",
  "size_from_data", "seeded", "guarantee", "reference"}``.
* **text** mechanisms (``cmp``, ``mahalanobis``, ``vickrey``, ``tem``, ``santext``,
  ``santext+``, ``custext``, ``custext+``, ``random``): each protected word is
  replaced in place, so the output keeps the word order and has one word per
  protected input word. Record: ``{"id", "text", "mechanism", "epsilon", "delta",
  "unit": "word", "guarantee", "seeded", "params": {...}}`` (``params``: the public
  parameters the guarantee depends on: embeddings, vocabulary size, decoder, ...).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .accounting.diagnostics import report_fields
from .embeddings import Embeddings
from .errors import ParameterError
from .io import SourcedDocument, atomic_writer, sequence_ids, settings_path
from .mechanisms import (
    DocumentDiagnostics,
    EarthMoversPrivacy,
    PrivateDocument,
    mechanism_class,
)
from .progress import ProgressCallback

__all__ = [
    "DEFAULT_MECHANISM",
    "JobResult",
    "build_mechanism",
    "check_private_report_path",
    "check_size_options",
    "iter_privatize_documents",
    "mechanism_decoder",
    "mechanism_guarantee",
    "parse_params",
    "privatize_documents",
    "release_decoder",
    "release_guarantee",
    "release_kind",
    "release_settings",
    "write_private_report",
    "write_records",
]

DEFAULT_MECHANISM = "earth-movers"

OUTPUT_FORMATS = ("jsonl", "text")


def release_kind(mechanism: str | object) -> str:
    """``"bag"`` or ``"text"``: what a release of this mechanism (name, class or object) holds.

    >>> release_kind("earth-movers"), release_kind("cmp")
    ('bag', 'text')
    """
    if isinstance(mechanism, str):
        cls = mechanism_class(mechanism)
    else:
        cls = mechanism if isinstance(mechanism, type) else type(mechanism)
    kind = getattr(cls, "output", None)
    if kind in ("bag", "text"):
        return str(kind)
    params = inspect.signature(cls).parameters
    return "bag" if "size" in params else "text"


def check_size_options(mechanism: str, size: int | None, size_from_data: bool) -> None:
    """Bag mechanisms need a public bag size N (``size``) or ``size_from_data``; text mechanisms take neither.

    >>> check_size_options("cmp", 20, False)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --size applies to bag mechanisms (earth-movers, syntf); cmp releases text (one word per protected input word): drop --size
    """
    from ._validation import check_positive_int

    if release_kind(mechanism) == "text":
        if size is not None or size_from_data:
            flag = "--size" if size is not None else "--size-from-data"
            raise ParameterError(
                f"{flag} applies to bag mechanisms (earth-movers, syntf); {mechanism} releases text (one word per "
                f"protected input word): drop {flag}"
            )
        return
    if size is None and not size_from_data:
        raise ParameterError("--size N is required (N is public: it is written in every record); "
                             "--size-from-data uses the shortest document's length instead, and reveals it")
    if size is not None and size_from_data:
        raise ParameterError("--size and --size-from-data exclude each other; give one")
    if size is not None:
        check_positive_int(size, "size")


def parse_params(items: Sequence[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """Mechanism parameters from ``KEY=VALUE`` strings (CLI ``--param``): JSON values, else strings.

    >>> parse_params(["t=0.75", "top_k=20", "lambd=null", "p=0.3"])
    {'t': 0.75, 'top_k': 20, 'lambd': None, 'p': 0.3}
    >>> parse_params(["t"])
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --param t: write KEY=VALUE (e.g. --param t=0.75)
    """
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return dict(items)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = str(item).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ParameterError(f"--param {item}: write KEY=VALUE (e.g. --param t=0.75)")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


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
    params: Mapping[str, Any] | Sequence[str] | None = None,
) -> Any:
    """A fitted mechanism from the registry, configured from the options ``textdp obfuscate`` offers.

    Options that do not apply to the mechanism are refused with a one-line
    :class:`~textdp.errors.ParameterError` (never ignored): ``size``/``bag``/
    ``known_source`` are for bag mechanisms, ``decoder`` for the mechanisms that decode
    a noisy vector (``earth-movers``, ``cmp``, ``mahalanobis``), ``postprocess`` for
    ``earth-movers`` and ``cmp``. ``params`` are the mechanism's own parameters
    (``t``, ``lambd``, ``beta``, ``p``, ``top_k``, ``rate``, ``candidates``, ...).

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> mech = build_mechanism("vickrey", epsilon=1.0, embeddings=emb, stop_words=None, params=["t=0.25"])
    >>> type(mech).__name__, mech.t, release_kind(mech)
    ('Vickrey', 0.25, 'text')
    >>> build_mechanism("tem", epsilon=1.0, embeddings=emb, decoder="hnsw")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --decoder applies to earth-movers, cmp, mahalanobis (tem has no decoder)
    """
    cls = mechanism_class(name)
    sig = inspect.signature(cls).parameters
    kwargs: dict[str, Any] = parse_params(params)
    clash = sorted(set(kwargs) & {"epsilon", "embeddings", "seed", "rng", "stop_words"})
    if clash:
        raise ParameterError(f"--param {clash[0]}: give it with its own option, not as a mechanism parameter")
    if release_kind(cls) == "text":
        if bag != "truncate":
            raise ParameterError(f"--bag applies to bag mechanisms; {name} releases text")
        if size is not None or size_from_data:
            check_size_options(name, size, size_from_data)
        if known_source:
            raise ParameterError(f"--known-source applies to earth-movers only, not {name}")
    else:
        if bag != "truncate" and "bag" not in sig:
            raise ParameterError(f"--bag applies to earth-movers; {name} draws its bag from the whole vocabulary")
        if known_source and "known_source" not in sig:
            raise ParameterError(f"--known-source applies to earth-movers only, not {name}")
        for key, value in (("size", size), ("size_from_data", size_from_data), ("bag", bag),
                           ("known_source", known_source)):
            if key in sig:
                kwargs[key] = value
    if (decoder != "exact" or "decoder" in kwargs) and "decoder" not in sig:
        raise ParameterError(f"--decoder applies to earth-movers, cmp, mahalanobis ({name} has no decoder)")
    if "decoder" in sig:
        kwargs.setdefault("decoder", decoder)
    if postprocess is not None:
        if "postprocess" not in sig:
            raise ParameterError(f"--postprocess applies to earth-movers and cmp, not {name}")
        kwargs["postprocess"] = postprocess
    kwargs["stop_words"] = stop_words
    if "seed" in sig:
        kwargs["seed"] = seed
    elif "rng" in sig:
        kwargs["rng"] = seed
    kwargs["epsilon"] = epsilon
    kwargs["embeddings"] = embeddings
    unknown = [k for k in kwargs if k not in sig]
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values()):
        own = [p for p in sig if p not in ("self", "epsilon", "embeddings", "seed", "rng", "stop_words", "vocab_size",
                                           "size", "size_from_data", "bag", "known_source", "decoder", "postprocess")]
        raise ParameterError(
            f"mechanism {name!r} has no parameter {unknown[0]!r}; its parameters: {', '.join(own) or 'none'}"
        )
    return cls(**kwargs).fit()


def release_guarantee(doc: Any) -> dict[str, Any]:
    """The public guarantee of a released document as a dict, with ``seeded`` (for settings files)."""
    g = doc.guarantee.to_dict()
    g["seeded"] = bool(getattr(doc, "seeded", g.get("seeded", False)))
    return dict(g)


def mechanism_guarantee(mech: Any, *, size: int | None = None, seeded: bool, size_from_data: bool = False
                        ) -> dict[str, Any]:
    """The guarantee of a fitted mechanism's release as a dict with ``seeded`` (bag mechanisms need ``size``)."""
    g = mech.guarantee(size, seeded=seeded, size_from_data=size_from_data) if callable(mech.guarantee) else mech.guarantee
    out = dict(g.to_dict())
    out["seeded"] = bool(seeded)
    return out


def mechanism_decoder(mech: Any) -> str:
    """The decoder a fitted mechanism uses (``"none"`` for mechanisms that decode nothing)."""
    dec = getattr(mech, "decoder_", None)
    return str(getattr(dec, "name", "none")) if dec is not None else "none"


def release_decoder(doc: Any) -> str:
    """The decoder named by a released document (``"none"`` for mechanisms that decode nothing)."""
    dec = getattr(doc, "decoder", None)
    if dec is None:
        dec = dict(getattr(doc.guarantee, "params", ()) or ()).get("decoder")
    return str(dec) if dec is not None else "none"


def _batch_kwargs(mech: Any, **kw: Any) -> dict[str, Any]:
    """The keyword arguments ``mech.privatize_batch`` accepts; a given (non-default) one it lacks is refused."""
    params = inspect.signature(mech.privatize_batch).parameters
    out: dict[str, Any] = {}
    for key, value in kw.items():
        if key in params:
            out[key] = value
        elif value not in (None, False):
            raise ParameterError(f"{type(mech).__name__} does not take {key!r}")
    return out


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
    mech: EarthMoversPrivacy | Any,
    docs: Sequence[SourcedDocument],
    *,
    first: int = 0,
    size: int | None = None,
    seed: int | np.random.Generator | None = None,
    seeded: bool | None = None,
    size_from_data: bool = False,
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
    size, seed, seeded, size_from_data
        As for :meth:`EarthMoversPrivacy.privatize_batch` (``size``/``size_from_data``:
        bag mechanisms only).
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
    mech: EarthMoversPrivacy | Any,
    docs: Sequence[SourcedDocument],
    *,
    first: int = 0,
    size: int | None = None,
    seed: int | np.random.Generator | None = None,
    seeded: bool | None = None,
    size_from_data: bool = False,
    private_report: bool = False,
    progress: ProgressCallback | None = None,
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
    if not docs:
        return
    if release_kind(mech) == "text" and (size is not None or size_from_data):
        raise ParameterError(f"{type(mech).__name__} releases text: it takes no bag size")
    kwargs = _batch_kwargs(mech, size=size, seed=seed, seeded=seeded, size_from_data=size_from_data,
                           private_report=diags, progress=progress)
    texts = [d.text for d in docs]
    # bag mechanisms stream chunks (memory bounded whatever N); text mechanisms release in one batch
    parts = mech.iter_privatize_batch(texts, ids, **kwargs) if hasattr(mech, "iter_privatize_batch") else iter(
        [mech.privatize_batch(texts, ids, **kwargs)])
    pos = 0
    for part in parts:
        report = None
        if diags is not None:
            report = [
                {"id": diag.id, "source": doc.source, **report_fields(diag, mech.embeddings_)}
                for diag, doc in zip(diags, docs[pos : pos + len(part)], strict=True)
            ]
            diags.clear()
        pos += len(part)
        yield JobResult(part, [d.to_record() for d in part], report)


def write_records(fh: IO[str], records: Iterable[dict[str, Any]], fmt: str = "jsonl") -> None:
    """Write release records as JSONL, or only their words (``fmt="text"``, one bag or text per line)."""
    if fmt not in OUTPUT_FORMATS:
        raise ParameterError(f"unknown output format {fmt!r}; choose one of: {', '.join(OUTPUT_FORMATS)}")
    for rec in records:
        if fmt == "text":
            fh.write((rec["text"] if "text" in rec else " ".join(rec["words"])) + "\n")
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
