"""Partitioned, resumable Earth Mover's privacy over a large corpus.

Two folders, kept apart:

* the **output folder** (what you release): ``part-NNNNN.jsonl`` files of release
  records, ``manifest.json`` (public: the run's public parameters, the part names
  and a random run token) and, when the run is complete, ``settings.json``
  (public parameters and the guarantee). Nothing in it describes the input beyond
  what the records themselves show (their number, their ids);
* the **private work directory** (``work_dir``; default
  ``<textdp cache>/runs/<key>``, outside the output, keyed by the output folder,
  the inputs and the settings so that the same command finds it again): the resume
  key (input paths, sizes and modification times, the seed's hash), the inline
  inputs spilled to JSONL (gzip and plain-text inputs), the vocabulary the workers
  memory-map, and the per-part pieces of the private report. When the run
  completes, everything but the resume key is deleted.

The driver (:func:`obfuscate_corpus`) plans partitions from the inputs alone: the
documents, in input order, are cut into ``P`` ranges of (nearly) equal counts
(``P`` = ``partitions`` or one per 500 documents), so the plan and the part
files reveal the number of documents only, never byte sizes. Each job
(:func:`run_partition`) reads only its slice (line-aligned byte ranges of JSONL
files, row ranges of Parquet files), privatizes it through the library's document
job (:func:`textdp.pipeline.privatize_documents`) with its own generator
(``textdp._rng.spawn(seed, P)[i]``: the same output for a seed whatever the
scheduling), and writes its part atomically. A restarted run with the same
command skips finished parts, so a killed run finishes with every document
exactly once; a different run into the same output folder is refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import secrets
import shutil
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._cache import cache_dir
from .._rng import spawn
from ..backend import Backend
from ..embeddings import Embeddings, vocabulary_fingerprint
from ..errors import DocumentError, OutputExistsError, ParameterError
from ..io import (
    SourcedDocument,
    _decode,
    atomic_writer,
    duplicate_ids_message,
    find_duplicate_ids,
    is_jsonl,
    iter_jsonl_text,
    read_sourced_documents,
    write_json,
)
from ..pipeline import (
    DEFAULT_MECHANISM,
    build_mechanism,
    check_size_options,
    iter_privatize_documents,
    mechanism_decoder,
    mechanism_guarantee,
    parse_params,
    release_kind,
    release_settings,
    write_private_report,
    write_records,
)
from ..progress import ProgressCallback

DOCS_PER_PART = 500  # documents per partition when ``partitions`` is not given
MANIFEST = "manifest.json"
SETTINGS = "settings.json"
KEY = "key.json"
DECODER_NAMES = {"approximate": "approximate-hnsw", "hnsw": "approximate-hnsw", "ivf": "approximate-ivf"}


@dataclass(frozen=True)
class Segment:
    """A contiguous run of documents in one file.

    ``kind``: ``"jsonl-range"`` (byte range ``[start, stop)`` of a JSONL file whose
    first document is on line ``first_line``), ``"spill"`` (the same, in a file the
    driver wrote to the private work directory) or ``"parquet-rows"`` (rows
    ``[start, stop)``).
    """

    kind: str
    path: str
    start: int
    stop: int
    n_docs: int
    first_line: int = 1


@dataclass(frozen=True)
class Partition:
    """One unit of work: documents ``first .. first + n_docs - 1`` of the input, in order."""

    index: int
    first: int
    segments: tuple[Segment, ...]

    @property
    def n_docs(self) -> int:
        return sum(s.n_docs for s in self.segments)


@dataclass(frozen=True)
class JobSettings:
    """Everything a worker needs besides its partition (small; the vocabulary travels by path)."""

    vocab_dir: str
    vocab_name: str
    epsilon: float
    size: int
    bag: str
    stop_words: str | None
    decoder: str
    known_source: bool
    text_field: str
    id_field: str
    fmt: str
    out_dir: str
    report_dir: str | None
    seeded: bool
    size_from_data: bool
    threads: int | None = None
    mechanism: str = "earth-movers"
    postprocess: str | None = None
    params: str = "{}"  # JSON of the mechanism's own parameters (hashable)


# -- planning -----------------------------------------------------------------------------
def _is_parquet(p: Path) -> bool:
    return p.name.lower().endswith((".parquet", ".pq"))


def _scan_jsonl(path: Path) -> tuple[array, array, int]:
    """Byte offsets and line numbers of the non-blank lines of a JSONL file, and its size."""
    offsets, lines = array("q"), array("q")
    pos = 0
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                offsets.append(pos)
                lines.append(lineno)
            pos += len(line)
    return offsets, lines, pos


class _Source:
    """One input file seen as a sequence of documents that can be cut anywhere."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self.path = path
        if kind == "parquet-rows":
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:
                self.n = int(pq.ParquetFile(path).metadata.num_rows)
            except (pa.ArrowException, OSError) as exc:
                raise DocumentError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        else:
            self.offsets, self.lines, self.size = _scan_jsonl(path)
            self.n = len(self.offsets)

    def segment(self, a: int, b: int) -> Segment:
        """Documents ``[a, b)`` of this file."""
        if self.kind == "parquet-rows":
            return Segment(self.kind, str(self.path), a, b, b - a)
        stop = self.offsets[b] if b < self.n else self.size
        return Segment(self.kind, str(self.path), self.offsets[a], stop, b - a, self.lines[a])


def _spill(path: Path, index: int, spill_dir: Path, text_field: str, id_field: str, input_format: str) -> Path:
    """Write a gzip/plain-text input once to the private work directory as JSONL (id, text, origin)."""
    target = spill_dir / f"input-{index:05d}.jsonl"
    if target.exists():
        return target
    docs = read_sourced_documents([path], text_field=text_field, id_field=id_field, input_format=input_format)
    with atomic_writer(target) as fh:
        for d in docs:
            fh.write(json.dumps({"id": d.id, "text": d.text, "source": d.source}, ensure_ascii=False) + "\n")
    return target


def plan_partitions(
    paths: Sequence[Path],
    *,
    partitions: int | None = None,
    text_field: str = "text",
    id_field: str = "id",
    input_format: str = "auto",
    spill_dir: Path | None = None,
) -> list[Partition]:
    """Deterministic partitions of the inputs: ``P`` consecutive ranges of nearly equal document counts.

    Depends on the inputs and ``partitions`` only. Inputs the workers cannot
    slice (gzip, plain text) are spilled to ``spill_dir`` (a private directory) first.
    """
    sources: list[_Source] = []
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
            if spill_dir is None:
                raise ParameterError(f"{p}: gzip and plain-text inputs need a private spill directory")
            sources.append(_Source("spill", _spill(p, i, spill_dir, text_field, id_field, input_format)))
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


# -- vocabulary by path ------------------------------------------------------------------------
def save_vocabulary(emb: Embeddings, directory: Path, fingerprint: str) -> Path:
    """Write the vocabulary once as ``vectors.npy`` + ``words.txt`` (skipped when already there)."""
    d = directory / f"vocabulary-{fingerprint}"
    if (d / "vectors.npy").exists() and (d / "words.txt").exists():
        return d
    if any("\n" in w for w in emb.words):
        raise ParameterError("a vocabulary word contains a newline; cannot store it for the workers")
    d.mkdir(parents=True, exist_ok=True)
    with atomic_writer(d / "words.txt") as fh:
        fh.write("\n".join(emb.words) + "\n")
    with atomic_writer(d / "vectors.npy", "wb") as fh:
        np.save(fh, np.ascontiguousarray(emb.vectors, dtype=np.float32))
    return d


@functools.lru_cache(maxsize=4)
def _load_vocabulary(vocab_dir: str, name: str) -> Embeddings:
    words = Path(vocab_dir, "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(Path(vocab_dir, "vectors.npy"), mmap_mode="r")  # one copy per machine
    return Embeddings(words, vectors, name=name)


@dataclass(frozen=True)
class _MechKey:
    vocab_dir: str
    vocab_name: str
    epsilon: float
    bag: str
    stop_words: str | None
    decoder: str
    known_source: bool
    threads: int | None
    mechanism: str = "earth-movers"
    postprocess: str | None = None
    params: str = "{}"


@functools.lru_cache(maxsize=4)
def _fitted(k: _MechKey) -> Any:
    """The fitted mechanism of this process for ``k`` (read-only afterwards: size and generator are per call)."""
    emb = _load_vocabulary(k.vocab_dir, k.vocab_name)
    mech: Any = build_mechanism(
        k.mechanism, epsilon=k.epsilon, embeddings=emb, bag=k.bag, stop_words=k.stop_words, decoder=k.decoder,
        known_source=k.known_source, postprocess=k.postprocess, params=json.loads(k.params),
    )
    if k.threads and hasattr(getattr(mech, "decoder_", None), "threads"):
        mech.decoder_.threads = k.threads
    if k.threads and k.decoder != "exact":
        try:
            import faiss

            faiss.omp_set_num_threads(k.threads)  # one share of the cores per worker process
        except ImportError:
            pass
    return mech


def _mechanism(s: JobSettings) -> Any:
    return _fitted(_MechKey(s.vocab_dir, s.vocab_name, s.epsilon, s.bag, s.stop_words, s.decoder, s.known_source,
                            s.threads, s.mechanism, s.postprocess, s.params))


def part_name(index: int, fmt: str) -> str:
    return f"part-{index:05d}.{'txt' if fmt == 'text' else 'jsonl'}"


# -- the jobs ------------------------------------------------------------------------------------
def min_length(job: tuple[Partition, JobSettings]) -> int:
    """Shortest in-vocabulary length of the documents of a partition (``size_from_data`` only)."""
    part, s = job
    docs = read_partition(part, s.text_field, s.id_field)
    rows, _, _ = _mechanism(s).prepare([d.text for d in docs], [str(d.id) for d in docs])
    return min(r.size for r in rows)


def run_partition(job: tuple[Partition, JobSettings, np.random.Generator]) -> int:
    """Privatize one partition; write its private-report piece (if asked) and then its part file, atomically.

    Records are written as they are made (bounded memory, whatever N); the part
    file appears only once it is complete, after its private-report piece.
    """
    part, s, gen = job
    docs = read_partition(part, s.text_field, s.id_field)
    bag = release_kind(s.mechanism) == "bag"
    report: list[dict[str, Any]] | None = [] if s.report_dir is not None else None
    n = 0
    with atomic_writer(Path(s.out_dir) / part_name(part.index, s.fmt), private=False) as fh:
        for result in iter_privatize_documents(
            _mechanism(s), docs, first=part.first, size=s.size if bag else None, seed=gen, seeded=s.seeded,
            size_from_data=s.size_from_data and bag, private_report=report is not None,
        ):
            write_records(fh, result.records, s.fmt)
            n += len(result.records)
            if report is not None and result.report is not None:
                report.extend(result.report)
        if s.report_dir is not None and report is not None:
            write_private_report(Path(s.report_dir) / part_name(part.index, "jsonl"), report)
    return n


def partition_ids(plan: Sequence[Partition], text_field: str = "text", id_field: str = "id") -> Iterator[str]:
    """The record ids of every document of ``plan``, in input order (reads one partition at a time)."""
    for part in plan:
        for d in read_partition(part, text_field, id_field):
            yield str(d.id)


# -- the driver ------------------------------------------------------------------------------------
def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def default_work_dir(key: dict[str, Any]) -> Path:
    """Where a run keeps its private state by default: ``<cache>/runs/<hash of the run's private key>``."""
    return cache_dir("runs") / _sha(key)[:32]


def _inside(path: Path, folder: Path) -> bool:
    p, f = path.resolve(), folder.resolve()
    return p == f or p.is_relative_to(f)


def obfuscate_corpus(
    paths: Sequence[Path],
    out_dir: Path,
    *,
    embeddings: Embeddings,
    epsilon: float,
    size: int | None,
    bag: str,
    stop_words: str | None,
    decoder: str,
    seed: int | None,
    backend: Backend,
    size_from_data: bool = False,
    known_source: bool = False,
    partitions: int | None = None,
    text_field: str = "text",
    id_field: str = "id",
    input_format: str = "auto",
    fmt: str = "jsonl",
    work_dir: Path | None = None,
    private_report: Path | None = None,
    extra_settings: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    on_size_from_data: Callable[[int], None] | None = None,
    force: bool = False,
    strict_ids: bool = False,
    on_duplicate_ids: Callable[[int, str], None] | None = None,
    mechanism: str = DEFAULT_MECHANISM,
    postprocess: str | None = None,
    params: dict[str, Any] | Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run a registered mechanism over ``paths`` into ``out_dir`` (partitioned, resumable).

    ``mechanism`` is a registered name (default ``earth-movers``); ``postprocess``
    and ``params`` are passed to :func:`textdp.pipeline.build_mechanism`. For bag
    mechanisms ``size`` (public) is required unless ``size_from_data=True`` (then the shortest
    document's in-vocabulary length is used and published; ``on_size_from_data(N)``
    is called); text mechanisms take neither. ``work_dir``: the private work directory (default: under the textdp
    cache, see the module notes); it must not be inside ``out_dir``, and workers on
    a cluster must be able to read it. ``private_report``: where to write the
    PRIVATE report (JSONL, one object per record id) when the run completes.
    ``progress(done_docs, total_docs)`` is called as partitions finish. Returns the
    public summary written to ``<out_dir>/settings.json``.

    An existing ``out_dir`` must be empty or the output of this same run (which is
    then resumed); ``force=True`` writes into any folder and replaces an existing
    ``private_report``. Record ids that repeat are reported before any part is
    written, through ``on_duplicate_ids(count, first_id)``, or refused with
    ``strict_ids=True``.
    """
    out_dir = Path(out_dir)
    paths = [Path(p) for p in paths]
    is_bag = release_kind(mechanism) == "bag"
    if is_bag and size is None and not size_from_data:
        raise ParameterError(
            "the bag size N must be public: pass --size N (size=N), or --size-from-data to use the shortest "
            "document's length, which that reveals"
        )
    if not is_bag:
        check_size_options(mechanism, size, size_from_data)
    if size is not None:
        size_from_data = False
    mech_params = parse_params(params)
    # the driver builds the mechanism once: options are checked before any work, and it states the guarantee
    driver_mech = build_mechanism(
        mechanism, epsilon=epsilon, embeddings=embeddings, bag=bag, stop_words=stop_words, decoder=decoder,
        known_source=known_source, postprocess=postprocess, params=mech_params, seed=seed,
    )
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError(f"{out_dir}: partitioned output needs a directory, and this is a file")
    if private_report is not None and _inside(Path(private_report), out_dir):
        raise ParameterError(
            f"--private-report {private_report} is inside the output folder {out_dir}, which is meant for release; "
            "write it somewhere private"
        )
    fp = vocabulary_fingerprint(embeddings.vectors)
    public = {
        "mechanism": mechanism, "postprocess": postprocess, "params": mech_params,
        "epsilon": float(epsilon), "size": size, "size_from_data": bool(size_from_data), "bag": bag,
        "stop_words": stop_words, "decoder": decoder, "known_source": bool(known_source),
        "embeddings": embeddings.name, "vocabulary_fingerprint": fp, "format": fmt, "partitions": partitions,
        "text_field": text_field, "id_field": id_field, "input_format": input_format, "seeded": seed is not None,
    }
    inputs = []
    for p in paths:
        if not p.exists():
            raise DocumentError(f"{p}: no such file")
        st = p.stat()
        inputs.append({"path": str(p.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    key = {
        "output": str(out_dir.resolve()), "inputs": inputs, "public": public,
        "seed_sha256": None if seed is None else hashlib.sha256(str(seed).encode()).hexdigest(),
        "private_report": private_report is not None,
    }
    work = Path(work_dir) if work_dir is not None else default_work_dir(key)
    if _inside(work, out_dir):
        raise ParameterError(f"--work-dir {work} is inside the output folder {out_dir}; it holds private data")
    if out_dir.exists() and _inside(out_dir, work):
        raise ParameterError(f"the output folder {out_dir} is inside the work directory {work}")

    # -- identify the run: the private key lives in the work directory, a random token in both places
    key_path = work / KEY
    state: dict[str, Any] | None = None
    if key_path.exists():
        state = json.loads(key_path.read_text(encoding="utf-8"))
        if state.get("key") != key:
            raise ParameterError(
                f"the work directory {work} belongs to a different run (inputs, output or settings differ); "
                "choose another --work-dir"
            )
    manifest_path = out_dir / MANIFEST
    manifest: dict[str, Any] | None = None
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if state is None or manifest.get("run") != state.get("run") or manifest.get("settings") != public:
            raise ParameterError(
                f"{out_dir} holds the output of a different run (inputs or settings differ, or its private work "
                "directory is gone); use a new output directory, or delete this one"
            )
    elif out_dir.exists() and any(out_dir.glob("part-*")):
        raise ParameterError(f"{out_dir} holds part files but no manifest; use a new output directory")
    elif out_dir.exists() and not force and any(out_dir.iterdir()):
        raise OutputExistsError(
            f"{out_dir} exists and is not empty (nor the output of this run); choose a new output directory, "
            "or pass --force to write into it"
        )
    if state is None:
        state = {"key": key, "run": secrets.token_hex(16), "resolved_size": None, "complete": False}
    elif state.get("complete") and manifest is not None and (out_dir / SETTINGS).exists() and all(
        (out_dir / name).exists() for name in manifest["parts"]
    ):
        if progress is not None:
            progress(manifest["documents"], manifest["documents"])
        return dict(json.loads((out_dir / SETTINGS).read_text(encoding="utf-8")))  # nothing left to do
    if private_report is not None and not force and (Path(private_report).exists() or Path(private_report).is_symlink()):
        raise OutputExistsError(f"--private-report {private_report} exists; choose another path, or pass --force "
                                "to replace it")
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json(key_path, state)

    plan = plan_partitions(paths, partitions=partitions, text_field=text_field, id_field=id_field,
                           input_format=input_format, spill_dir=work / "input")
    if strict_ids or on_duplicate_ids is not None:
        n_dup, first_dup = find_duplicate_ids(lambda: partition_ids(plan, text_field, id_field))
        if n_dup and first_dup is not None:
            if strict_ids:
                raise DocumentError(duplicate_ids_message(n_dup, first_dup) + "; make the ids unique")
            if on_duplicate_ids is not None:
                on_duplicate_ids(n_dup, first_dup)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".part-*.tmp"):  # left by a killed run (never published)
        stale.unlink(missing_ok=True)
    todo_idx = [p.index for p in plan if not (out_dir / part_name(p.index, fmt)).exists()]
    vocab_dir = save_vocabulary(embeddings, work, fp) if (todo_idx or state["resolved_size"] is None) else work
    report_dir = work / "report" if private_report is not None else None
    n_workers = getattr(backend, "n_workers", lambda: 1)()
    threads = max(1, (os.cpu_count() or 1) // n_workers) if backend.name == "dask" else None
    settings = JobSettings(
        vocab_dir=str(vocab_dir), vocab_name=embeddings.name, epsilon=float(epsilon), size=size or 0, bag=bag,
        stop_words=stop_words, decoder=decoder, known_source=bool(known_source), text_field=text_field,
        id_field=id_field, fmt=fmt, out_dir=str(out_dir), report_dir=None if report_dir is None else str(report_dir),
        seeded=seed is not None, size_from_data=bool(size_from_data), threads=threads,
        mechanism=mechanism, postprocess=postprocess, params=json.dumps(mech_params, sort_keys=True),
    )
    if size is None and is_bag:
        if state["resolved_size"] is None:  # the shortest document of the whole input (published as N)
            lengths: list[int] = [0] * len(plan)
            backend.map(min_length, [(p, settings) for p in plan], lambda i, r: lengths.__setitem__(i, r))
            state["resolved_size"] = min(lengths)
            write_json(key_path, state)
        size = int(state["resolved_size"])
        if on_size_from_data is not None:
            on_size_from_data(size)
    settings = JobSettings(**{**asdict(settings), "size": int(size or 0)})
    parts = [part_name(p.index, fmt) for p in plan]
    total = sum(p.n_docs for p in plan)
    if manifest is None:
        manifest = {"run": state["run"], "settings": public, "size": size, "documents": total, "parts": parts}
        write_json(manifest_path, manifest, private=False)

    gens = spawn(seed, len(plan))  # partition i always draws from stream i
    todo = [(plan[i], settings, gens[i]) for i in todo_idx]
    done_docs = total - sum(p.n_docs for p, _, _ in todo)
    if progress is not None:
        progress(done_docs, total)

    def finished(i: int, n: int) -> None:
        nonlocal done_docs
        done_docs += todo[i][0].n_docs
        if progress is not None:
            progress(done_docs, total)

    backend.map(run_partition, todo, finished)
    if private_report is not None and report_dir is not None:
        pieces = [report_dir / part_name(p.index, "jsonl") for p in plan]
        missing = [q.name for q in pieces if not q.exists()]
        if missing:
            raise ParameterError(
                f"the private report pieces {', '.join(missing[:3])} are missing from {report_dir}; "
                "rerun into a new output directory to get a complete private report"
            )
        with atomic_writer(private_report, overwrite=force, private=True) as fh:
            for q in pieces:
                fh.write(q.read_text(encoding="utf-8"))
    guarantee = mechanism_guarantee(
        driver_mech, size=int(size) if is_bag and size is not None else None, seeded=seed is not None,
        size_from_data=bool(size_from_data) and is_bag,
    )
    summary = release_settings(
        guarantee, engine=backend.name, documents=total, decoder=mechanism_decoder(driver_mech),
        known_source=known_source, stop_words=stop_words, fmt=fmt,
        extra={"partitions": len(plan), "parts": parts, "vocabulary_fingerprint": fp, **(extra_settings or {})},
    )
    write_json(out_dir / SETTINGS, summary, private=False)
    # the run is complete: keep only the resume key (paths, sizes, times), drop every private copy
    state["complete"] = True
    write_json(key_path, state)
    for sub in [work / "input", work / "report", *work.glob("vocabulary-*")]:
        shutil.rmtree(sub, ignore_errors=True)
    return summary
