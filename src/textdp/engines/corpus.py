"""Partitioned, resumable Earth Mover's privacy over a large corpus.

The driver (:func:`obfuscate_corpus`) plans partitions from the inputs alone (so a
seeded run is reproducible whatever the cluster), writes the vocabulary once as
``.npy`` + words under the output directory, and maps :func:`run_partition` over the
partitions with a :class:`~textdp.engines.Backend`. Each job memory-maps the
vocabulary by path, reads only its own slice of the input (a line-aligned byte
range of a JSONL file, rows of a Parquet file, or inline documents for gzip/text
inputs), draws from its own ``SeedSequence(seed).spawn(n)[i]`` generator, and
writes ``part-NNNNN.jsonl`` atomically. ``manifest.json`` records the plan and the
settings; a restarted run with the same settings skips finished parts, so a killed
run finishes without losing or duplicating a document.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..guarantees import EarthMoversGuarantee
from ..errors import DocumentError, ParameterError

INLINE_DOCS = 500  # documents per partition for inputs read by the driver (gzip, text)
JSONL_BYTES = 2 << 20  # bytes per partition of an uncompressed JSONL file
MANIFEST = "manifest.json"
DECODER_NAMES = {"approximate": "approximate-hnsw", "hnsw": "approximate-hnsw", "ivf": "approximate-ivf"}


@dataclass(frozen=True)
class Partition:
    """One unit of work: where its documents are and how to privatise them."""

    index: int
    kind: str  # "jsonl-range" | "parquet-rows" | "inline"
    path: str = ""
    start: int = 0
    stop: int = 0
    docs: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    n_docs: int = 0

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("docs")
        if self.kind == "inline":
            d["docs_sha"] = hashlib.sha256(json.dumps(self.docs).encode()).hexdigest()[:16]
        return d


@dataclass(frozen=True)
class JobSettings:
    """Everything a worker needs besides its partition (small; embeddings travel by path)."""

    vocab_dir: str
    vocab_name: str
    epsilon: float
    size: int | None
    bag: str
    stop_words: str | None
    decoder: str
    text_field: str
    id_field: str
    fmt: str
    report: bool
    out_dir: str
    threads: int | None = None


# -- planning -----------------------------------------------------------------------------
def _is_parquet(p: Path) -> bool:
    return p.name.lower().endswith((".parquet", ".pq"))


def _jsonl_ranges(path: Path, parts: int | None) -> list[tuple[int, int, int]]:
    """Line-aligned byte ranges ``(start, stop, n_lines)`` of an uncompressed JSONL file."""
    size = path.stat().st_size
    n = parts or max(1, math.ceil(size / JSONL_BYTES))
    cuts = [0]
    with open(path, "rb") as fh:
        for k in range(1, n):
            fh.seek(max(cuts[-1], size * k // n))
            fh.readline()  # move to the next line start
            pos = fh.tell()
            if pos < size and pos > cuts[-1]:
                cuts.append(pos)
        cuts.append(size)
        out = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            fh.seek(a)
            chunk = fh.read(b - a)
            out.append((a, b, sum(1 for line in chunk.split(b"\n") if line.strip())))
    return out


def plan_partitions(
    paths: Sequence[Path], *, partitions: int | None = None, text_field: str = "text", id_field: str = "id",
    input_format: str = "auto",
) -> list[Partition]:
    """Deterministic partitions of the inputs (depends on the inputs and ``partitions`` only)."""
    from ..io import is_jsonl, read_documents

    plan: list[Partition] = []
    inline: list[tuple[str, str]] = []
    per_file = None if partitions is None else max(1, math.ceil(partitions / max(len(paths), 1)))
    for p in paths:
        if str(p) != "-" and _is_parquet(p):
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(p).metadata
            bounds = [0]
            for g in range(meta.num_row_groups):
                bounds.append(bounds[-1] + meta.row_group(g).num_rows)
            if per_file is not None:
                total = bounds[-1]
                bounds = sorted({total * k // per_file for k in range(per_file + 1)})
            for a, b in zip(bounds[:-1], bounds[1:]):
                if b > a:
                    plan.append(Partition(len(plan), "parquet-rows", str(p), a, b, n_docs=b - a))
        elif (
            str(p) != "-"
            and not p.name.lower().endswith(".gz")
            and (input_format == "jsonl" or (input_format == "auto" and is_jsonl(p)))
        ):
            if not p.exists():
                raise DocumentError(f"{p}: no such file")
            for a, b, n in _jsonl_ranges(p, per_file):
                if n:
                    plan.append(Partition(len(plan), "jsonl-range", str(p), a, b, n_docs=n))
        else:
            inline.extend(read_documents([p], text_field=text_field, id_field=id_field, input_format=input_format))
    if inline:
        n = partitions or max(1, math.ceil(len(inline) / INLINE_DOCS))
        n = min(n, len(inline))
        for k in range(n):
            docs = tuple(inline[len(inline) * k // n : len(inline) * (k + 1) // n])
            plan.append(Partition(len(plan), "inline", docs=docs, n_docs=len(docs)))
    if not plan:
        raise ParameterError("no documents in the input")
    return plan


def read_partition(part: Partition, text_field: str = "text", id_field: str = "id") -> list[tuple[str, str]]:
    """The ``(id, text)`` documents of one partition (reads only its slice of the file)."""
    from ..io import _decode, iter_jsonl_text

    if part.kind == "inline":
        return list(part.docs)
    if part.kind == "jsonl-range":
        with open(part.path, "rb") as fh:
            fh.seek(part.start)
            raw = fh.read(part.stop - part.start)
        source = f"{part.path}[bytes {part.start}-{part.stop}]"
        return list(iter_jsonl_text(_decode(raw, source), source, text_field, id_field))
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(part.path)
    names = pf.schema_arrow.names
    if text_field not in names:
        raise DocumentError(f"{part.path}: no column {text_field!r} (choose it with --text-field)")
    cols = [text_field] + ([id_field] if id_field in names else [])
    groups, first, row = [], None, 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        if row + n > part.start and row < part.stop:
            groups.append(g)
            first = row if first is None else first
        row += n
    table = pf.read_row_groups(groups, columns=cols).slice(part.start - (first or 0), part.stop - part.start)
    texts = table.column(text_field).to_pylist()
    ids = table.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
    out = []
    for k, (i, t) in enumerate(zip(ids, texts)):
        if not isinstance(t, str):
            raise DocumentError(f"{part.path}: row {part.start + k}: {text_field!r} is not a string")
        out.append((str(i) if i is not None else f"{part.path}:{part.start + k}", t))
    return out


# -- vocabulary by path ------------------------------------------------------------------------
def save_vocabulary(emb: Any, directory: Path, fingerprint: str) -> Path:
    """Write the vocabulary once as ``vectors.npy`` + ``words.txt`` (skipped when already there)."""
    from ..io import atomic_writer

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
def _load_vocabulary(vocab_dir: str, name: str) -> Any:
    from ..embeddings import Embeddings

    words = Path(vocab_dir, "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(Path(vocab_dir, "vectors.npy"), mmap_mode="r")  # one copy per machine
    return Embeddings(words, vectors, name=name)


_MECH_LOCK = threading.Lock()


def _mechanism(s: JobSettings) -> Any:
    """The fitted mechanism of this process for ``s`` (built once; size set per call)."""
    mech = _fitted(replace(s, size=None, out_dir="", fmt="", report=False))
    mech.size = s.size
    return mech


@functools.lru_cache(maxsize=4)
def _fitted(s: JobSettings) -> Any:
    from ..mechanisms import EarthMoversPrivacy

    emb = _load_vocabulary(s.vocab_dir, s.vocab_name)
    mech = EarthMoversPrivacy(
        epsilon=s.epsilon, size=s.size, embeddings=emb, bag=s.bag, stop_words=s.stop_words, decoder=s.decoder, rng=0
    ).fit()  # the generator is replaced per partition
    if s.threads and hasattr(mech.decoder_, "threads"):
        mech.decoder_.threads = s.threads
    if s.threads and s.decoder != "exact":
        try:
            import faiss

            faiss.omp_set_num_threads(s.threads)  # one share of the cores per worker process
        except ImportError:
            pass
    return mech


def part_name(index: int, fmt: str) -> str:
    return f"part-{index:05d}.{'txt' if fmt == 'text' else 'jsonl'}"


# -- the jobs ------------------------------------------------------------------------------------
def min_length(job: tuple[Partition, JobSettings]) -> int:
    """Shortest in-vocabulary length of the documents of a partition (for ``size=None``)."""
    part, s = job
    mech = _mechanism(s)
    docs = read_partition(part, s.text_field, s.id_field)
    rows, _, _ = mech.prepare([t for _, t in docs], [i for i, _ in docs])
    return min(r.size for r in rows)


def run_partition(job: tuple[Partition, JobSettings, np.random.SeedSequence]) -> int:
    """Privatise one partition and write its part file atomically; returns the number of documents."""
    from ..io import atomic_writer

    part, s, seq = job
    docs = read_partition(part, s.text_field, s.id_field)
    with _MECH_LOCK:
        mech = _mechanism(s)
        mech.rng_ = np.random.Generator(np.random.PCG64(seq))
        private = mech.privatize_batch([t for _, t in docs], [i for i, _ in docs])
    report = None
    if s.report:
        from ..cli.obfuscate import _report_fields as report  # the same fields as the single-file path
    with atomic_writer(Path(s.out_dir) / part_name(part.index, s.fmt)) as fh:
        for doc in private:
            if s.fmt == "text":
                fh.write(" ".join(doc.words) + "\n")
                continue
            rec = doc.to_record()
            if report is not None:
                rec.update(report(doc, mech))
            fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")
    return len(private)


def _spill(part: Partition, out_dir: Path, text_field: str, id_field: str) -> Partition:
    """An inline partition written once to ``<out>/input/`` and replaced by a JSONL byte range."""
    from ..io import atomic_writer

    if part.kind != "inline":
        return part
    path = out_dir / "input" / f"input-{part.index:05d}.jsonl"
    if not path.exists():
        with atomic_writer(path) as fh:
            for doc_id, text in part.docs:
                fh.write(json.dumps({id_field: doc_id, text_field: text}, ensure_ascii=False) + "\n")
    return Partition(part.index, "jsonl-range", str(path), 0, path.stat().st_size, n_docs=part.n_docs)


# -- the driver ------------------------------------------------------------------------------------
def obfuscate_corpus(
    paths: Sequence[Path],
    out_dir: Path,
    *,
    embeddings: Any,
    epsilon: float,
    size: int | None,
    bag: str,
    stop_words: str | None,
    decoder: str,
    seed: int | None,
    backend: Any,
    partitions: int | None = None,
    text_field: str = "text",
    id_field: str = "id",
    input_format: str = "auto",
    fmt: str = "jsonl",
    report: bool = False,
    extra_settings: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run Earth Mover's privacy over ``paths`` into ``out_dir`` (partitioned, resumable).

    ``progress(done_docs, total_docs)`` is called as partitions finish. Returns the
    summary written to ``<out_dir>/settings.json``.
    """
    from .. import __version__
    from ..embeddings import vocabulary_fingerprint
    from ..io import write_json

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError(f"{out_dir}: partitioned output needs a directory, and this is a file")
    plan = plan_partitions(paths, partitions=partitions, text_field=text_field, id_field=id_field,
                           input_format=input_format)
    fp = vocabulary_fingerprint(embeddings.vectors)
    inputs = []
    for p in paths:
        st = Path(p).stat()
        inputs.append({"path": str(p), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    key = {
        "inputs": inputs, "plan": [p.describe() for p in plan], "vocabulary": fp, "embeddings": embeddings.name,
        "epsilon": epsilon, "size": size, "bag": bag, "stop_words": stop_words, "decoder": decoder,
        "seeded": seed is not None, "seed_sha": None if seed is None else hashlib.sha256(str(seed).encode()).hexdigest(),
        "format": fmt, "report": report, "text_field": text_field, "id_field": id_field,
    }
    manifest_path = out_dir / MANIFEST
    manifest: dict[str, Any] | None = None
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("key") != key:
            raise ParameterError(
                f"{out_dir} holds the output of a different run (inputs or settings differ); "
                "use a new output directory, or delete this one"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".part-*.tmp"):  # left by a killed run (never published)
        stale.unlink(missing_ok=True)
    vocab_dir = save_vocabulary(embeddings, out_dir, fp)
    # inline documents (gzip/text inputs) travel by path, not through the scheduler
    plan = [_spill(p, out_dir, text_field, id_field) for p in plan]
    n_workers = getattr(backend, "n_workers", lambda: 1)()
    threads = max(1, (os.cpu_count() or 1) // n_workers) if backend.name == "dask" else None
    settings = JobSettings(
        vocab_dir=str(vocab_dir), vocab_name=embeddings.name, epsilon=float(epsilon), size=size, bag=bag,
        stop_words=stop_words, decoder=decoder, text_field=text_field, id_field=id_field, fmt=fmt,
        report=report, out_dir=str(out_dir), threads=threads,
    )
    if manifest is None:
        if size is None:  # the paper's protocol: the shortest document of the whole input
            lengths: list[int] = [0] * len(plan)
            backend.map(min_length, [(p, settings) for p in plan], lambda i, r: lengths.__setitem__(i, r))
            size = min(lengths)
        manifest = {"key": key, "resolved_size": size, "partitions": len(plan)}
        write_json(manifest_path, manifest)
    size = int(manifest["resolved_size"])
    settings = JobSettings(**{**asdict(settings), "size": size})
    # seeded: SeedSequence(seed).spawn(n)[i] for partition i; unseeded: fresh entropy, never recorded
    seqs = np.random.SeedSequence(seed).spawn(len(plan))
    total = sum(p.n_docs for p in plan)
    done_docs = 0
    todo = []
    for p, sq in zip(plan, seqs):
        if (out_dir / part_name(p.index, fmt)).exists():
            done_docs += p.n_docs
        else:
            todo.append((p, settings, sq))
    if progress is not None:
        progress(done_docs, total)

    def finished(i: int, n: int) -> None:
        nonlocal done_docs
        done_docs += todo[i][0].n_docs
        if progress is not None:
            progress(done_docs, total)

    backend.map(run_partition, todo, finished)
    guarantee = EarthMoversGuarantee(
        epsilon=float(epsilon), size=size, dim=embeddings.dim, vocab_size=embeddings.vocab_size,
        embeddings=embeddings.name, bag=bag,
    )
    summary = {
        "textdp_version": __version__,
        "command": "obfuscate",
        "engine": backend.name,
        "inputs": [str(p) for p in paths],
        "documents": total,
        "partitions": len(plan),
        "parts": [part_name(p.index, fmt) for p in plan],
        "seed": seed,
        "seed_note": None if seed is not None else "fresh OS entropy per run (not recorded)",
        "stop_words": stop_words,
        "decoder": DECODER_NAMES.get(decoder, decoder),
        "report_fields_are_private": report,
        **(extra_settings or {}),
        **guarantee.to_dict(),
    }
    write_json(out_dir / "settings.json", summary)
    return summary
