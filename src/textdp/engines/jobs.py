"""The jobs of a partitioned run: what a worker does with one partition.

A job is a pure function of its partition, the small :class:`JobSettings` and its
own generator. The vocabulary travels by path and is memory-mapped by each worker
(one copy per machine), after checking it has the SHA-256 the driver computed from
its own verified embeddings (:func:`textdp.engines.workdir.load_verified_vocabulary`).

**Spark recipe.** Keep the same pure job: ``rdd = sc.parallelize(plan, len(plan))``, put the
work directory on shared storage (private to the user), then
``rdd.map(lambda p: run_partition((p, settings, gens[p.index])))`` with
``gens = spawn(seed, len(plan))``; the part files and the manifest work unchanged, so resuming
is re-submitting the job.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..embeddings import Embeddings
from ..io import atomic_writer
from ..mechanisms import TextMechanism, entry
from ..pipeline import build_mechanism, iter_privatize_documents, write_private_report, write_records
from .plan import Partition, read_partition
from .workdir import file_sha256, load_verified_vocabulary

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
    piece = None if s.report_dir is None else Path(s.report_dir) / part_name(part.index, "jsonl")
    with atomic_writer(target, private=False) as fh:
        for result in iter_privatize_documents(
            _mechanism(s), docs, first=part.first, size=s.size if bag else None, seed=gen, seeded=s.seeded,
            size_from_data=s.size_from_data and bag, empty=s.empty, private_report=report is not None,
        ):
            write_records(fh, result.records, s.fmt)
            n += len(result.records)
            if report is not None and result.report is not None:
                report.extend(result.report)
        if piece is not None and report is not None:
            write_private_report(piece, report)
    return PartResult(n, file_sha256(target), None if piece is None else file_sha256(piece))
