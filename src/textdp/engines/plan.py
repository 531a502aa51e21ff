"""The plan of a partitioned run: inputs read once, cut into partitions of (nearly) equal document counts.

**One input layer.** :func:`open_inputs` opens every input once, in the driver
(:class:`InputFile`: a file, a pipe or process substitution, ``-``); nothing reads an input
by its path after that. The documents, in input order, are cut into ``P`` ranges
(``P`` = ``partitions`` or one per :data:`DOCS_PER_PART` documents), so the plan reveals
the number of documents only, never byte sizes. A partition is a list of :class:`Segment` s,
each carrying the SHA-256 of its bytes as the driver read them:

* a regular JSONL file is read by **line-aligned byte ranges**: the driver scans it and
  hashes every range through the descriptor it opened, and reads it again (the id check, the
  ledger's charge) only through that descriptor, each time checking the hash; a worker opens
  the file through its own descriptor, reads its range once and refuses bytes whose hash
  differs, so a file renamed or linked over the input after the driver read it is never used;
* everything else (Parquet, gzip, plain text, a pipe, standard input) is read once, through the
  driver's descriptor, into a JSONL **spill** in the run's private work directory, and the
  spill's segments are hashed the same way; a worker opens the spill through its own checked
  descriptor (:func:`textdp._cache.open_private_dir`) and refuses bytes that differ.

:func:`read_partition` reads one partition's slices only.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import hmac
import io
import json
import math
import os
import stat
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from .._cache import open_private_dir
from ..errors import DocumentError, ParameterError
from ..io import (
    SourcedDocument,
    _decode,
    atomic_writer,
    is_jsonl,
    is_parquet,
    iter_jsonl_stream,
    iter_jsonl_text,
    iter_parquet_documents,
)

__all__ = ["DOCS_PER_PART", "InputFile", "Inputs", "Partition", "Segment", "Spiller", "iter_input_documents",
           "open_inputs", "partition_ids", "plan_partitions", "read_partition", "spill_documents", "write_spill"]

DOCS_PER_PART = 500  # documents per partition when ``partitions`` is not given


@dataclass(frozen=True)
class Segment:
    """A contiguous run of documents in one file, and the SHA-256 of its bytes.

    ``kind``: ``"jsonl-range"`` (byte range ``[start, stop)`` of a user's JSONL file whose
    first document is on line ``first_line``) or ``"spill"`` (the same, in a file the driver
    wrote to the private work directory). ``sha256``: the SHA-256 of bytes ``[start, stop)``
    as the driver read them; every reader (the driver again, each worker) refuses any other bytes.
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


# -- the inputs, opened once ---------------------------------------------------------------
#: how the driver opens an input (a named FIFO waits for its writer, as any reader would)
_INPUT_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
#: how a worker re-opens a JSONL input: O_NONBLOCK, so a FIFO swapped in for the file never makes it wait (it is
#: refused by fstat instead)
_READ_FLAGS = _INPUT_FLAGS | getattr(os, "O_NONBLOCK", 0)


class InputFile:
    """One input, opened once by the driver: a file, a pipe or process substitution, or ``-`` (standard input).

    ``ranges``: a regular JSONL file, read by hashed byte ranges through ``fd``; anything
    else is read once (:meth:`reader`) into the run's private spill. ``stream``: not a
    regular file (it can be read once only, so a run reading it cannot be resumed).
    """

    def __init__(self, path: Path, input_format: str) -> None:
        self.path = Path(path)
        self.stdin = str(path) == "-"
        self.source = "<stdin>" if self.stdin else str(path)
        try:
            self.fd = _stdin_fd() if self.stdin else os.open(self.path, _INPUT_FLAGS)
        except FileNotFoundError:
            raise DocumentError(f"{path}: no such file") from None
        except (OSError, ValueError, io.UnsupportedOperation) as exc:
            raise DocumentError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
        self.st = os.fstat(self.fd)
        if stat.S_ISDIR(self.st.st_mode):
            os.close(self.fd)
            raise DocumentError(f"{path}: is a directory, expected a file")
        self.stream = self.stdin or not stat.S_ISREG(self.st.st_mode)
        name = "" if self.stdin else self.path.name.lower()
        self.parquet = not self.stdin and is_parquet(self.path)
        self.gzip = name.endswith(".gz")
        self.jsonl = not self.parquet and (input_format == "jsonl" or (input_format == "auto" and not self.stdin
                                                                       and is_jsonl(self.path)))
        self.ranges = self.jsonl and not self.stream and not self.gzip
        self._read = False

    def identity(self) -> dict[str, object]:
        """What names this input in the run's identity: path, device, inode, size and modification time."""
        return {"path": self.source if self.stdin else os.path.abspath(self.path), "device": self.st.st_dev,
                "inode": self.st.st_ino, "bytes": self.st.st_size, "mtime_ns": self.st.st_mtime_ns}

    def reader(self) -> IO[bytes]:
        """The input's bytes from its start, through the driver's descriptor (a stream only once)."""
        if self.stream:
            if self._read:
                raise ParameterError(f"{self.source} is a pipe or stream, which can be read once only")
            self._read = True
        with contextlib.suppress(OSError):  # a pipe cannot seek: it is read from where it is, once
            os.lseek(self.fd, 0, os.SEEK_SET)
        return os.fdopen(os.dup(self.fd), "rb")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _stdin_fd() -> int:
    """A descriptor of standard input (its bytes in an anonymous memory file when it has none, e.g. under a test)."""
    try:
        return os.dup(sys.stdin.fileno())
    except (AttributeError, ValueError, io.UnsupportedOperation):
        data = sys.stdin.buffer.read()
    fd = os.memfd_create("textdp-stdin") if hasattr(os, "memfd_create") else os.dup(
        tempfile.TemporaryFile().fileno())
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return fd


class Inputs:
    """The inputs of a run, each opened once (:func:`open_inputs`), and the spills made from them.

    ``fd_for(path)``: the driver's descriptor of a segment's file (an input read by ranges,
    or a spill), so the driver never reads an input or a spill by its path again.
    """

    def __init__(self, files: list[InputFile]) -> None:
        self.files = files
        self._fds: dict[str, int] = {os.path.abspath(f.path): f.fd for f in files if f.ranges}
        self._spills: list[IO[bytes]] = []

    @property
    def resumable(self) -> bool:
        """Whether every input can be read again by a later run (no pipe, no standard input)."""
        return not any(f.stream for f in self.files)

    def identity(self) -> list[dict[str, object]]:
        return [f.identity() for f in self.files]

    def add_spill(self, path: Path, fh: IO[bytes]) -> None:
        self._spills.append(fh)
        self._fds[os.fspath(path)] = fh.fileno()

    def fd_for(self, path: str) -> int | None:
        return self._fds.get(path)

    def close(self) -> None:
        for fh in self._spills:
            fh.close()
        self._spills.clear()
        self._fds.clear()
        for f in self.files:
            f.close()

    def __enter__(self) -> Inputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_inputs(paths: Sequence[Path], input_format: str = "auto") -> Inputs:
    """Open every input once (``-``: standard input; no input at all: standard input too)."""
    files: list[InputFile] = []
    try:
        if sum(str(p) == "-" for p in paths) > 1:
            raise ParameterError("standard input (-) can be read once only; name it once")
        for p in paths or [Path("-")]:
            files.append(InputFile(Path(p), input_format))
    except BaseException:
        for f in files:
            f.close()
        raise
    return Inputs(files)


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    """Exactly ``n`` bytes at ``offset`` (fewer only at the end of the file)."""
    chunks, got = [], 0
    while got < n:
        chunk = os.pread(fd, n - got, offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- planning -----------------------------------------------------------------------------
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
    """One file seen as a sequence of documents that can be cut anywhere, scanned through the driver's descriptor.

    ``fd``: the driver's descriptor of the file (a user's JSONL input, or a spill it wrote
    and verified); it is scanned and its segments hashed through that descriptor.
    """

    def __init__(self, kind: str, path: str, fd: int) -> None:
        self.kind, self.path, self.fd = kind, path, fd
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(os.dup(fd), "rb") as fh:
            self.offsets, self.lines, self.size = _scan_jsonl(fh)
        self.n = len(self.offsets)

    def segment(self, a: int, b: int) -> Segment:
        """Documents ``[a, b)`` of this file, with the SHA-256 of their bytes."""
        stop = self.offsets[b] if b < self.n else self.size
        start = self.offsets[a]
        digest = hashlib.sha256(_pread_all(self.fd, stop - start, start)).hexdigest()
        return Segment(self.kind, self.path, start, stop, b - a, self.lines[a], digest)


def iter_input_documents(src: InputFile, text_field: str = "text", id_field: str = "id"
                         ) -> Iterator[SourcedDocument]:
    """The documents of ``src`` (Parquet, gzip, JSONL or plain text), read once through the driver's descriptor."""
    with src.reader() as raw:
        if src.parquet:  # a pipe is not seekable: Parquet's footer is at its end
            yield from iter_parquet_documents(raw if raw.seekable() else io.BytesIO(raw.read()), src.source,
                                              text_field, id_field)
            return
        try:
            with contextlib.ExitStack() as stack:
                body: IO[bytes] = raw
                if src.gzip:
                    body = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))  # type: ignore[arg-type]
                if src.jsonl:
                    yield from iter_jsonl_stream(body, src.source, text_field, id_field)
                else:
                    text = _decode(body.read(), src.source)
                    if text:  # an empty file holds no document (textdp.io.read_sourced_documents)
                        yield SourcedDocument(None, text, src.source)
        except (OSError, EOFError) as exc:  # e.g. a .gz that is not gzip, or is cut short
            raise DocumentError(f"{src.source}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def spill_documents(src: InputFile, fh: IO[str], text_field: str, id_field: str, input_format: str = "auto") -> None:
    """Write the documents of ``src`` to the text file ``fh`` as JSONL lines of id, text, origin (one pass)."""
    for d in iter_input_documents(src, text_field, id_field):
        fh.write(json.dumps({"id": d.id, "text": d.text, "source": d.source}, ensure_ascii=False) + "\n")


def write_spill(src: InputFile, target: Path, text_field: str, id_field: str, input_format: str = "auto") -> Path:
    """Write the documents of ``src`` to ``target`` (a private file) as JSONL lines of id, text, origin.

    Always writes: a file already at ``target`` is never trusted here (the run state
    decides whether a spill from an interrupted run verifies and can be reused).
    """
    with atomic_writer(target) as fh:
        spill_documents(src, fh, text_field, id_field, input_format)
    return target


#: ``spill(input, index) -> (spilled file, its descriptor)``: how the driver turns an input that is not a
#: regular JSONL file into a private JSONL spill; the file object is open (and verified) for reading
Spiller = Callable[[InputFile, int], "tuple[Path, io.BufferedReader]"]


def plan_partitions(
    paths: Sequence[Path] | Inputs,
    *,
    partitions: int | None = None,
    text_field: str = "text",
    id_field: str = "id",
    input_format: str = "auto",
    spill_dir: Path | None = None,
    spill: Spiller | None = None,
) -> list[Partition]:
    """Deterministic partitions of the inputs: ``P`` consecutive ranges of nearly equal document counts.

    Depends on the inputs' documents and ``partitions`` only. ``paths``: the inputs opened
    once (:func:`open_inputs`; the driver's id check and charge then read through them), or
    paths (opened here for the plan only). Inputs that are not regular JSONL files (Parquet,
    gzip, plain text, pipes) are converted once to a JSONL spill: by ``spill(input, index)``
    (the driver's, in its work directory, which verifies a spill kept from an interrupted run),
    else written afresh to ``spill_dir`` (a private folder).
    """
    if isinstance(paths, Inputs):
        return _plan(paths, partitions, text_field, id_field, spill_dir, spill)
    with open_inputs(list(paths), input_format) as inputs:
        return _plan(inputs, partitions, text_field, id_field, spill_dir, spill)


def _plan(inputs: Inputs, partitions: int | None, text_field: str, id_field: str, spill_dir: Path | None,
          spill: Spiller | None) -> list[Partition]:
    sources: list[_Source] = []
    for i, src in enumerate(inputs.files):
        if src.ranges:
            sources.append(_Source("jsonl-range", os.path.abspath(src.path), src.fd))
            continue
        if spill is None and spill_dir is None:
            raise ParameterError(f"{src.source}: Parquet, gzip, plain-text and streamed inputs need a private spill "
                                 "directory")
        if spill is not None:
            target, fh = spill(src, i)
        else:
            target = write_spill(src, Path(spill_dir or ".") / f"input-{i:05d}.jsonl", text_field, id_field)
            fh = open(target, "rb")
        inputs.add_spill(Path(os.path.abspath(target)), fh)
        sources.append(_Source("spill", os.path.abspath(target), fh.fileno()))
    total = sum(s.n for s in sources)
    if total == 0:
        raise ParameterError("input has no documents (an empty file holds none)")
    n_parts = min(partitions or max(1, math.ceil(total / DOCS_PER_PART)), total)
    plan: list[Partition] = []
    starts = [total * k // n_parts for k in range(n_parts + 1)]
    bounds = np.cumsum([0] + [s.n for s in sources])
    for k in range(n_parts):
        a, b = starts[k], starts[k + 1]
        segs = []
        for j, source in enumerate(sources):
            lo, hi = max(a, int(bounds[j])), min(b, int(bounds[j + 1]))
            if hi > lo:
                segs.append(source.segment(lo - int(bounds[j]), hi - int(bounds[j])))
        plan.append(Partition(k, a, tuple(segs)))
    return plan


# -- reading ------------------------------------------------------------------------------
def _verified(seg: Segment, raw: bytes, what: str) -> bytes:
    if seg.sha256 is None or not hmac.compare_digest(hashlib.sha256(raw).hexdigest(), seg.sha256):
        raise DocumentError(f"{what} {seg.path} is not the one the driver read (its bytes {seg.start}-{seg.stop} "
                            "differ): it was modified, replaced or renamed over during the run; run again, and keep "
                            "inputs where only you can change them")
    return raw


def _segment_bytes(seg: Segment, inputs: Inputs | None) -> bytes:
    """A segment's bytes, read once (through the driver's descriptor, else this process's own) and verified."""
    fd = None if inputs is None else inputs.fd_for(seg.path)
    if fd is not None:
        return _verified(seg, _pread_all(fd, seg.stop - seg.start, seg.start), "the input")
    if seg.kind == "spill":
        return _read_spill(seg)
    try:
        fd = os.open(seg.path, _READ_FLAGS)
    except OSError as exc:
        raise DocumentError(f"the input {seg.path} cannot be read again by a worker ({exc.strerror}); it was moved "
                            "or deleted during the run: run again") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DocumentError(f"the input {seg.path} is no longer a regular file (it was replaced during the run); "
                                "run again, and keep inputs where only you can change them")
        raw = _pread_all(fd, seg.stop - seg.start, seg.start)
    finally:
        os.close(fd)
    return _verified(seg, raw, "the input")


def _read_segment(seg: Segment, text_field: str, id_field: str, inputs: Inputs | None) -> list[SourcedDocument]:
    raw = _segment_bytes(seg, inputs)
    if seg.kind == "spill":
        out = []
        for line in _decode(raw, seg.path).split("\n"):
            if line.strip():
                obj = json.loads(line)
                out.append(SourcedDocument(obj["id"], obj["text"], obj["source"]))
        return out
    return list(iter_jsonl_text(_decode(raw, seg.path), seg.path, text_field, id_field, first_line=seg.first_line))


def _read_spill(seg: Segment) -> bytes:
    """A spill segment's bytes, read once through this process's own checked descriptor and verified."""
    path = Path(seg.path)
    with open_private_dir(path.parent, what="the spill folder") as d, d.open_read(path.name) as fh:
        raw = _pread_all(fh.fileno(), seg.stop - seg.start, seg.start)
    if seg.sha256 is None or not hmac.compare_digest(hashlib.sha256(raw).hexdigest(), seg.sha256):
        raise ParameterError(f"the spilled input {path} is not the one the driver checked (hash mismatch); it was "
                             "modified: rerun in a private --work-dir")
    return raw


def read_partition(part: Partition, text_field: str = "text", id_field: str = "id", *,
                   inputs: Inputs | None = None) -> list[SourcedDocument]:
    """The documents of one partition (reads only its slices, each verified), ids resolved (own id, else number).

    ``inputs``: the driver's open inputs (its own reads go through their descriptors); a
    worker passes none and opens each file through its own descriptor.
    """
    docs = [d for seg in part.segments for d in _read_segment(seg, text_field, id_field, inputs)]
    return [
        SourcedDocument(d.id if d.id is not None else str(part.first + k), d.text, d.source)
        for k, d in enumerate(docs)
    ]


def partition_ids(plan: Sequence[Partition], text_field: str = "text", id_field: str = "id", *,
                  inputs: Inputs | None = None) -> Iterator[str]:
    """The record ids of every document of ``plan``, in input order (reads one partition at a time)."""
    for part in plan:
        for d in read_partition(part, text_field, id_field, inputs=inputs):
            yield str(d.id)
