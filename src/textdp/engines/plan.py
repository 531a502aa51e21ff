"""The plan of a partitioned run: inputs cut into partitions of (nearly) equal document counts.

The documents, in input order, are cut into ``P`` ranges (``P`` = ``partitions`` or
one per :data:`DOCS_PER_PART` documents), so the plan reveals the number of
documents only, never byte sizes. A partition is a list of :class:`Segment` s:
line-aligned byte ranges of JSONL files, row ranges of Parquet files, or byte
ranges of a JSONL *spill* (gzip and plain-text inputs, converted once into the
private work directory). :func:`read_partition` reads one partition's slices only.

A spill is scanned through the descriptor the driver verified it with, and each spill
segment carries the SHA-256 of its bytes: a worker opens the spill through its own
checked descriptor (:func:`textdp._cache.open_private_dir`), reads its range once and
refuses bytes that differ, so a spill renamed or rewritten after the driver's check is
never used.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import math
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from .._cache import open_private_dir
from ..errors import DocumentError, ParameterError
from ..io import SourcedDocument, _decode, atomic_writer, is_jsonl, iter_jsonl_text, read_sourced_documents

__all__ = ["DOCS_PER_PART", "Partition", "Segment", "Spiller", "partition_ids", "plan_partitions", "read_partition",
           "spill_documents",
           "write_spill"]

DOCS_PER_PART = 500  # documents per partition when ``partitions`` is not given


@dataclass(frozen=True)
class Segment:
    """A contiguous run of documents in one file.

    ``kind``: ``"jsonl-range"`` (byte range ``[start, stop)`` of a JSONL file whose
    first document is on line ``first_line``), ``"spill"`` (the same, in a file the
    driver wrote to the private work directory) or ``"parquet-rows"`` (rows
    ``[start, stop)``). ``sha256``: for a spill, the SHA-256 of its bytes ``[start, stop)``
    as the driver read them (a worker refuses any other bytes).
    """

    kind: str
    path: str
    start: int
    stop: int
    n_docs: int
    first_line: int = 1
    sha256: str | None = None


@dataclass(frozen=True)
class Partition:
    """One unit of work: documents ``first .. first + n_docs - 1`` of the input, in order."""

    index: int
    first: int
    segments: tuple[Segment, ...]

    @property
    def n_docs(self) -> int:
        return sum(s.n_docs for s in self.segments)


# -- planning -----------------------------------------------------------------------------
def _is_parquet(p: Path) -> bool:
    return p.name.lower().endswith((".parquet", ".pq"))


def _scan_jsonl(fh: IO[bytes]) -> tuple[array, array, int]:
    """Byte offsets and line numbers of the non-blank lines of a JSONL file (read from its start), and its size."""
    offsets, lines = array("q"), array("q")
    pos = 0
    fh.seek(0)
    for lineno, line in enumerate(fh, start=1):
        if line.strip():
            offsets.append(pos)
            lines.append(lineno)
        pos += len(line)
    return offsets, lines, pos


class _Source:
    """One input file seen as a sequence of documents that can be cut anywhere.

    ``fh``: a spill already opened (and verified) by the driver; it is scanned and its
    segments hashed through that same descriptor.
    """

    def __init__(self, kind: str, path: Path, fh: io.BufferedReader | None = None) -> None:
        self.kind = kind
        self.path = path
        self.fh = fh
        if kind == "parquet-rows":
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:
                self.n = int(pq.ParquetFile(path).metadata.num_rows)
            except (pa.ArrowException, OSError) as exc:
                raise DocumentError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        elif fh is not None:
            self.offsets, self.lines, self.size = _scan_jsonl(fh)
            self.n = len(self.offsets)
        else:
            with open(path, "rb") as own:
                self.offsets, self.lines, self.size = _scan_jsonl(own)
            self.n = len(self.offsets)

    def segment(self, a: int, b: int) -> Segment:
        """Documents ``[a, b)`` of this file."""
        if self.kind == "parquet-rows":
            return Segment(self.kind, str(self.path), a, b, b - a)
        stop = self.offsets[b] if b < self.n else self.size
        start = self.offsets[a]
        digest = None
        if self.kind == "spill":
            if self.fh is None:
                self.fh = open(self.path, "rb")
            digest = hashlib.sha256(os.pread(self.fh.fileno(), stop - start, start)).hexdigest()
        return Segment(self.kind, str(self.path), start, stop, b - a, self.lines[a], digest)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def spill_documents(path: Path, fh: IO[str], text_field: str, id_field: str, input_format: str) -> None:
    """Write a gzip/plain-text input to the text file ``fh`` as JSONL lines of id, text, origin."""
    docs = read_sourced_documents([path], text_field=text_field, id_field=id_field, input_format=input_format)
    for d in docs:
        fh.write(json.dumps({"id": d.id, "text": d.text, "source": d.source}, ensure_ascii=False) + "\n")


def write_spill(path: Path, target: Path, text_field: str, id_field: str, input_format: str) -> Path:
    """Write a gzip/plain-text input to ``target`` (a private file) as JSONL lines of id, text, origin.

    Always writes: a file already at ``target`` is never trusted here (the run state
    decides whether a spill from an interrupted run verifies and can be reused).
    """
    with atomic_writer(target) as fh:
        spill_documents(path, fh, text_field, id_field, input_format)
    return target


#: ``spill(path, index) -> spilled file``: how the driver turns an unsliceable input into JSONL; it may
#: return the spill's path with the file already open (and verified) for reading
Spiller = Callable[[Path, int], "Path | tuple[Path, io.BufferedReader]"]


def plan_partitions(
    paths: Sequence[Path],
    *,
    partitions: int | None = None,
    text_field: str = "text",
    id_field: str = "id",
    input_format: str = "auto",
    spill_dir: Path | None = None,
    spill: Spiller | None = None,
) -> list[Partition]:
    """Deterministic partitions of the inputs: ``P`` consecutive ranges of nearly equal document counts.

    Depends on the inputs and ``partitions`` only. Inputs the workers cannot
    slice (gzip, plain text) are converted to JSONL first: by ``spill(path, index)``
    (the driver's, which verifies a spill kept from an interrupted run), else
    written afresh to ``spill_dir`` (a private folder).
    """
    sources: list[_Source] = []
    try:
        return _plan(paths, sources, partitions, text_field, id_field, input_format, spill_dir, spill)
    finally:
        for src in sources:
            src.close()


def _plan(paths: Sequence[Path], sources: list[_Source], partitions: int | None, text_field: str, id_field: str,
          input_format: str, spill_dir: Path | None, spill: Spiller | None) -> list[Partition]:
    for i, p in enumerate(paths):
        p = Path(p)
        if str(p) == "-":
            raise ParameterError("partitioned runs read files, not standard input")
        if not p.exists():
            raise DocumentError(f"{p}: no such file")
        if _is_parquet(p):
            sources.append(_Source("parquet-rows", p))
        elif not p.name.lower().endswith(".gz") and (
            input_format == "jsonl" or (input_format == "auto" and is_jsonl(p))
        ):
            sources.append(_Source("jsonl-range", p))
        else:
            if spill is None and spill_dir is None:
                raise ParameterError(f"{p}: gzip and plain-text inputs need a private spill directory")
            target = spill(p, i) if spill is not None else write_spill(
                p, Path(spill_dir or ".") / f"input-{i:05d}.jsonl", text_field, id_field, input_format)
            if isinstance(target, tuple):
                sources.append(_Source("spill", target[0], target[1]))
            else:
                sources.append(_Source("spill", target))
    total = sum(s.n for s in sources)
    if total == 0:
        raise ParameterError("no documents in the input")
    n_parts = min(partitions or max(1, math.ceil(total / DOCS_PER_PART)), total)
    plan: list[Partition] = []
    starts = [total * k // n_parts for k in range(n_parts + 1)]
    bounds = np.cumsum([0] + [s.n for s in sources])
    for k in range(n_parts):
        a, b = starts[k], starts[k + 1]
        segs = []
        for j, src in enumerate(sources):
            lo, hi = max(a, int(bounds[j])), min(b, int(bounds[j + 1]))
            if hi > lo:
                segs.append(src.segment(lo - int(bounds[j]), hi - int(bounds[j])))
        plan.append(Partition(k, a, tuple(segs)))
    return plan


def _read_segment(seg: Segment, text_field: str, id_field: str) -> list[SourcedDocument]:
    if seg.kind in ("jsonl-range", "spill"):
        if seg.kind == "spill":
            raw = _read_spill(seg)
        else:
            with open(seg.path, "rb") as fh:
                fh.seek(seg.start)
                raw = fh.read(seg.stop - seg.start)
        if seg.kind == "spill":
            out = []
            for line in _decode(raw, seg.path).splitlines():
                if line.strip():
                    obj = json.loads(line)
                    out.append(SourcedDocument(obj["id"], obj["text"], obj["source"]))
            return out
        docs = list(iter_jsonl_text(_decode(raw, seg.path), seg.path, text_field, id_field,
                                    first_line=seg.first_line))
        return docs
    import pyarrow as pa

    try:
        return _read_parquet_rows(seg, text_field, id_field)
    except (pa.ArrowException, OSError) as exc:
        raise DocumentError(f"{seg.path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def _read_spill(seg: Segment) -> bytes:
    """A spill segment's bytes, read once through this process's own checked descriptor and verified."""
    path = Path(seg.path)
    with open_private_dir(path.parent, what="the spill folder") as d, d.open_read(path.name) as fh:
        raw = os.pread(fh.fileno(), seg.stop - seg.start, seg.start)
    if seg.sha256 is None or not hmac.compare_digest(hashlib.sha256(raw).hexdigest(), seg.sha256):
        raise ParameterError(f"the spilled input {path} is not the one the driver checked (hash mismatch); it was "
                             "modified: rerun in a private --work-dir")
    return raw


def _read_parquet_rows(seg: Segment, text_field: str, id_field: str) -> list[SourcedDocument]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(seg.path)
    names = pf.schema_arrow.names
    if text_field not in names:
        raise DocumentError(f"{seg.path}: no column {text_field!r} (choose it with --text-field)")
    cols = [text_field] + ([id_field] if id_field in names else [])
    groups, first, row = [], None, 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        if row + n > seg.start and row < seg.stop:
            groups.append(g)
            first = row if first is None else first
        row += n
    table = pf.read_row_groups(groups, columns=cols).slice(seg.start - (first or 0), seg.stop - seg.start)
    texts = table.column(text_field).to_pylist()
    ids = table.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
    out = []
    for k, (i, t) in enumerate(zip(ids, texts)):
        if not isinstance(t, str):
            raise DocumentError(f"{seg.path}: row {seg.start + k}: {text_field!r} is not a string")
        out.append(SourcedDocument(str(i) if i is not None else None, t, f"{seg.path}:row {seg.start + k}"))
    return out


def read_partition(part: Partition, text_field: str = "text", id_field: str = "id") -> list[SourcedDocument]:
    """The documents of one partition (reads only its slices), ids resolved (own id, else sequence number)."""
    docs = [d for seg in part.segments for d in _read_segment(seg, text_field, id_field)]
    return [
        SourcedDocument(d.id if d.id is not None else str(part.first + k), d.text, d.source)
        for k, d in enumerate(docs)
    ]


def partition_ids(plan: Sequence[Partition], text_field: str = "text", id_field: str = "id") -> Iterator[str]:
    """The record ids of every document of ``plan``, in input order (reads one partition at a time)."""
    for part in plan:
        for d in read_partition(part, text_field, id_field):
            yield str(d.id)
