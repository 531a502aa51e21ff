"""The jobs of a partitioned run: what a worker does with one partition.

A job is a pure function of its partition, the small :class:`JobSettings` and its
own generator. The vocabulary travels by path: each worker opens the folder through
its own checked descriptor (every folder on the path checked), reads the files once
into its own memory and uses them only if their SHA-256 is the one the driver computed
from its own verified embeddings (:func:`textdp.engines.workdir.load_verified_vocabulary`);
nothing is re-opened by path or memory-mapped. Spill segments are verified the same way
(:func:`textdp.engines.plan.read_partition`), and the private-report piece is written
through the worker's own descriptor of the report folder.

**Spark recipe.** Keep the same pure job: ``rdd = sc.parallelize(plan, len(plan))``, put the
work directory on shared storage (private to the user), then
``rdd.map(lambda p: run_partition((p, settings, gens[p.index])))`` with
``gens = spawn(seed, len(plan))``; the part files and the manifest work unchanged, so resuming
is re-submitting the job.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from .._cache import open_private_dir
from ..embeddings import Embeddings
from ..io import atomic_writer
from ..mechanisms import TextMechanism, entry
from ..pipeline import build_mechanism, iter_privatize_documents, write_records
from .plan import Partition, read_partition
from .workdir import load_verified_vocabulary

__all__ = ["JobSettings", "PartResult", "min_length", "part_name", "run_partition"]


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
    vectors_sha256: str  # the driver's hashes of the vocabulary: a worker refuses any other
    words_sha256: str
    threads: int | None = None
    mechanism: str = "earth-movers"
    postprocess: str | None = None
    params: str = "{}"  # JSON of the mechanism's own parameters (hashable)
    empty: str = "error"  # the policy for a document with no in-vocabulary word (stated in the guarantee)


@functools.lru_cache(maxsize=4)
def _load_vocabulary(vocab_dir: str, name: str, vectors_sha256: str, words_sha256: str) -> Embeddings:
    return load_verified_vocabulary(vocab_dir, name, vectors_sha256, words_sha256)


@dataclass(frozen=True)
class _MechKey:
    vocab_dir: str
    vocab_name: str
    vectors_sha256: str
    words_sha256: str
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
def _fitted(k: _MechKey) -> TextMechanism:
    """The fitted mechanism of this process for ``k`` (read-only afterwards: size and generator are per call)."""
    emb = _load_vocabulary(k.vocab_dir, k.vocab_name, k.vectors_sha256, k.words_sha256)
    mech = build_mechanism(
        k.mechanism, epsilon=k.epsilon, embeddings=emb, bag=k.bag, stop_words=k.stop_words, decoder=k.decoder,
        known_source=k.known_source, postprocess=k.postprocess, params=json.loads(k.params),
    )
    if k.threads:
        mech.limit_threads(k.threads)
    if k.threads and k.decoder != "exact":
        try:
            import faiss

            faiss.omp_set_num_threads(k.threads)  # one share of the cores per worker process
        except ImportError:
            pass
    return mech


def _mechanism(s: JobSettings) -> TextMechanism:
    return _fitted(_MechKey(s.vocab_dir, s.vocab_name, s.vectors_sha256, s.words_sha256, s.epsilon, s.bag, s.stop_words, s.decoder, s.known_source,
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


@dataclass(frozen=True)
class PartResult:
    """What a job reports to the driver: records written, and the SHA-256 of its part and report piece."""

    records: int
    part_sha256: str
    report_sha256: str | None


class _HashingWriter:
    """A text file that hashes (SHA-256, UTF-8) exactly what is written through it."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh, self.sha = fh, hashlib.sha256()

    def write(self, text: str) -> int:
        self.sha.update(text.encode("utf-8"))
        return self.fh.write(text)

    def hexdigest(self) -> str:
        return self.sha.hexdigest()


def _write_report_piece(report_dir: str, name: str, rows: list[dict[str, object]]) -> str:
    """Write a private-report piece through this worker's own checked descriptor; its SHA-256."""
    data = "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows).encode("utf-8")
    with open_private_dir(Path(report_dir), what="the report folder") as d:
        d.write_bytes(name, data)
    return hashlib.sha256(data).hexdigest()


def run_partition(job: tuple[Partition, JobSettings, np.random.Generator]) -> PartResult:
    """Privatize one partition; write its private-report piece (if asked) and then its part file, atomically.

    Records are written as they are made (bounded memory, whatever N); the part
    file appears only once it is complete, after its private-report piece. The
    hashes returned let the driver record, in its authenticated run state, what
    this run wrote (a restarted run reuses only files that match).
    """
    part, s, gen = job
    docs = read_partition(part, s.text_field, s.id_field)
    bag = entry(s.mechanism).releases == "bag"
    report: list[dict[str, object]] | None = [] if s.report_dir is not None else None
    n = 0
    target = Path(s.out_dir) / part_name(part.index, s.fmt)
    piece_sha = None
    with atomic_writer(target, private=False) as fh:
        out = _HashingWriter(fh)  # the part's hash is that of the bytes written, never of a re-read file
        for result in iter_privatize_documents(
            _mechanism(s), docs, first=part.first, size=s.size if bag else None, seed=gen, seeded=s.seeded,
            size_from_data=s.size_from_data and bag, empty=s.empty, private_report=report is not None,
        ):
            write_records(out, result.records, s.fmt)  # type: ignore[arg-type]  # a text file's write()
            n += len(result.records)
            if report is not None and result.report is not None:
                report.extend(result.report)
        if s.report_dir is not None and report is not None:
            piece_sha = _write_report_piece(s.report_dir, part_name(part.index, "jsonl"), report)
    return PartResult(n, out.hexdigest(), piece_sha)
