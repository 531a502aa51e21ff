"""Partitioned, resumable rewriting with the sentence family on a textdp model (``er-ae``, ``ae-dp``, ...).

:func:`textdp.release.release` runs a :class:`~textdp.generation.rewriter.SentenceMechanism` here when it is
given ``engine="local"`` or ``"dask"``: the documents (already read and validated by the driver) are cut
into partitions of ``partition_size`` documents, in input order; partition ``i`` is rewritten by the pure
job :func:`rewrite_partition` with its own generator (``textdp._rng.spawn(seed, P)[i]``: the same output
for a seed and partition size whatever the engine or the scheduling). A job rebuilds the mechanism from
its registered name and public parameters (the model as its folder, loaded once per worker process,
every file checked against its card).

The run's private state lives in a work directory (:class:`textdp.engines.workdir.RunState`: opened once,
authenticated, locked; default ``<textdp cache>/runs/<name>``): each finished partition's records and
PRIVATE diagnostics are kept there, hashed in the signed state, so that a killed run started again with
the same arguments redoes only the partitions it had not finished, and is not charged to the ledger again
(the state notes the charge). The release itself is one file with the same layout as the one-process
path (records, ``<output>.settings.json``, the private report): :func:`textdp.release.release` writes it
from :func:`rewrite_corpus`'s pieces, and only then is the whole private state deleted.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .._rng import spawn
from ..backend import Backend
from ..errors import ParameterError, TextDPError
from .workdir import RunState, default_work_dir

if TYPE_CHECKING:
    import numpy as np

    from ..generation.rewriter import RewrittenText, SentenceMechanism
    from ..guarantees import Guarantee
    from ..guarantees.events import Charge
    from ..progress import ProgressCallback

__all__ = ["SentencePiece", "piece_name", "rewrite_corpus", "rewrite_partition", "worker_params"]

T = TypeVar("T")
SAVE_EVERY_S = 1.0  # how often the run state records finished partitions (the rest are redone after a kill)

#: one job: (mechanism name, its public parameters, the partition's (id, text) pairs, its generator, seeded,
#: the empty policy)
RewriteJob = tuple[str, dict[str, object], list[tuple[str, str]], "np.random.Generator", bool, str]


@dataclass(frozen=True)
class SentencePiece:
    """One finished partition: its records (as written, one JSON object each) and its PRIVATE diagnostics."""

    records: list[dict[str, object]]
    diagnostics: list[object]


def piece_name(index: int) -> str:
    """The work-directory name of partition ``index``'s piece (under ``report/``: deleted at completion).

    >>> piece_name(3)
    'report/sentences-00003.json'
    """
    return f"report/sentences-{index:05d}.json"


def worker_params(mechanism: SentenceMechanism) -> dict[str, object]:
    """The public parameters a worker rebuilds ``mechanism`` from: its fields, the model as its folder, no seed."""
    params = {k: v for k, v in mechanism.get_params().items() if k != "seed"}
    model = params.get("model")
    folder = getattr(model, "model_dir", model)
    params["model"] = str(Path(str(folder)).resolve())
    for k, v in params.items():
        if not (v is None or isinstance(v, (str, int, float, bool))):
            raise ParameterError(f"a partitioned release rebuilds {mechanism.name} in its workers from public "
                                 f"parameters; {k}={type(v).__name__} is not one (give a plain value, or use "
                                 "engine='single')")
    return params


def rewrite_partition(job: RewriteJob) -> tuple[list[RewrittenText], list[object]]:
    """Engine job: rewrite one partition (pure given the mechanism's public parameters and the generator).

    Returns the released documents (:class:`~textdp.generation.rewriter.RewrittenText`; a document with
    nothing to rewrite follows the job's empty policy) and their PRIVATE diagnostics.
    """
    from ..mechanisms import get

    name, params, docs, rng, seeded, empty = job
    mech = get(name, **params)
    diagnostics: list[object] = []
    released = mech.privatize_batch([t for _, t in docs], [i for i, _ in docs], seed=rng, seeded=seeded,
                                    empty=empty, private_report=diagnostics)
    return released, diagnostics


def _identity(docs: Sequence[tuple[str, str]]) -> str:
    """SHA-256 of the documents and their ids (part of the run's private key; never stored)."""
    h = hashlib.sha256()
    for uid, text in docs:
        h.update(json.dumps([uid, text], ensure_ascii=False).encode("utf-8") + b"\n")
    return h.hexdigest()


def rewrite_corpus(
    mechanism: SentenceMechanism,
    docs: Sequence[tuple[str, str]],
    *,
    backend: Backend,
    partition_size: int,
    seed: int | None,
    charges: Callable[[], tuple[Mapping[str, Charge], Guarantee]],
    on_charge: Callable[[Mapping[str, Charge], Guarantee], None],
    to_records: Callable[[RewrittenText], list[dict[str, object]]],
    finish: Callable[[list[SentencePiece]], T],
    key: Mapping[str, object],
    work_dir: Path | None = None,
    progress: ProgressCallback | None = None,
    empty: str = "empty",
) -> T:
    """Rewrite ``docs`` (``(id, text)`` pairs) partition by partition on ``backend``, resumably (module notes).

    ``charges()`` says what the release costs each record id; ``on_charge`` is called with it once per run,
    before the first partition is rewritten (a resumed run that was charged is not charged again; a refused
    charge raises and nothing is rewritten). ``to_records`` turns a released document into the records
    written; ``finish(pieces)`` writes the release from every partition's piece, in input order, and its
    result is returned once the run's private state is deleted. ``key`` holds the release's public settings
    and its output (the run's identity, with the documents, the seed and ``partition_size``).
    """
    if isinstance(seed, bool) or not (seed is None or isinstance(seed, int)):
        raise ParameterError("a partitioned release takes an int seed or none (each partition's generator is "
                             "spawned from it); the generator given cannot be split reproducibly")
    params = worker_params(mechanism)
    run_key = {**dict(key), "mechanism": mechanism.name, "params": params, "partition_size": partition_size,
               "empty": empty,
               "documents_sha256": _identity(docs),
               "seed_sha256": None if seed is None else hashlib.sha256(str(seed).encode()).hexdigest()}
    work = Path(work_dir) if work_dir is not None else default_work_dir(run_key)
    parts = [list(docs[i : i + partition_size]) for i in range(0, len(docs), partition_size)]
    state = RunState.open(work, run_key)
    try:
        if not state.data.get("ledger_charged"):  # before any partition is rewritten
            try:
                on_charge(*charges())
            except TextDPError:  # refused (a bad unit, over budget): nothing to resume, no private state left
                if not state.resumed:
                    state.remove()
                raise
            state.data["ledger_charged"] = True
        state.save()
        todo = [i for i in range(len(parts)) if not state.verified(piece_name(i))]
        _run(state, backend, parts, todo, (mechanism.name, params, seed, empty), to_records, progress)
        pieces = []
        for i in range(len(parts)):
            data = state.verified_bytes(piece_name(i))  # read once, hashed, then used
            if data is None:
                raise ParameterError(f"the piece of partition {i} in {state.work} is missing or was modified; "
                                     "run the same release again to redo it")
            obj = json.loads(data.decode("utf-8"))
            pieces.append(SentencePiece(records=obj["records"], diagnostics=obj["diagnostics"]))
        result = finish(pieces)
        state.complete()  # nothing is left that names or fingerprints the inputs
        return result
    finally:
        state.close()


def _run(state: RunState, backend: Backend, parts: list[list[tuple[str, str]]], todo: list[int],
         how: tuple[str, dict[str, object], int | None, str],
         to_records: Callable[[RewrittenText], list[dict[str, object]]],
         progress: ProgressCallback | None) -> None:
    name, params, seed, empty = how
    gens = spawn(seed, len(parts))  # partition i always draws from stream i
    jobs: list[RewriteJob] = [(name, params, parts[i], gens[i], seed is not None, empty) for i in todo]
    total = sum(len(p) for p in parts)
    done = total - sum(len(parts[i]) for i in todo)
    if progress is not None:
        progress(done, total)
    last_save = time.monotonic()

    def finished(j: int, result: tuple[list[RewrittenText], list[object]]) -> None:
        nonlocal done, last_save
        released, diagnostics = result
        records = [r for doc in released for r in to_records(doc)]
        data = json.dumps({"records": records, "diagnostics": diagnostics}, ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
        name_j = piece_name(todo[j])
        state.dir.write_bytes(name_j, data)
        state.record(name_j, hashlib.sha256(data).hexdigest(), save=False)
        if time.monotonic() - last_save >= SAVE_EVERY_S:  # a piece not yet recorded is redone on resume
            state.save()
            last_save = time.monotonic()
        done += len(parts[todo[j]])
        if progress is not None:
            progress(done, total)

    try:
        backend.map(rewrite_partition, jobs, finished)
    finally:
        state.save()
