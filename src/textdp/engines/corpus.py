"""Partitioned, resumable privatization of a large corpus: the driver.

Three parts, one module each:

* :mod:`textdp.engines.plan`: the **plan**. The documents, in input order, are cut
  into ``P`` ranges of (nearly) equal counts, so the plan and the part files reveal
  the number of documents only, never byte sizes;
* :mod:`textdp.engines.workdir`: the **run state**. The private work directory
  (``work_dir``; default ``<textdp cache>/runs/<name>``, outside the output) must
  be owned by the user and writable by nobody else; it holds an authenticated
  record of the run (a keyed hash of its identity, the hashes of every file the run
  wrote), the inputs spilled to JSONL (Parquet, gzip, plain text, pipes), the vocabulary the
  workers load (each verifies the bytes it reads) and the pieces of the private report;
  it is opened once and used through its descriptor. All of it is deleted
  when the run completes: nothing is left that names or fingerprints the inputs;
* :mod:`textdp.engines.jobs`: the **jobs**. :func:`run_partition` privatizes one
  partition through the library's document job
  (:func:`textdp.pipeline.iter_privatize_documents`) with its own generator
  (``textdp._rng.spawn(seed, P)[i]``: the same output for a seed whatever the
  scheduling) and writes its part atomically.

This module is the **driver** (:func:`obfuscate_corpus`). The **output folder**
(what you release) holds ``part-NNNNN.jsonl`` files of release records,
``manifest.json`` (public parameters, the part names and a random run token) and,
once complete, ``settings.json`` (public parameters and the guarantee). A restarted
run with the same command reuses the finished parts whose hashes the run state
recorded, so a killed run finishes with every document exactly once; a different
run into the same output folder is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .._rng import spawn
from .._validation import BudgetLike, check_choice
from ..backend import Backend
from ..embeddings import Embeddings, vocabulary_fingerprint
from ..errors import OutputExistsError, ParameterError, TextDPError
from ..guarantees import EMPTY_POLICIES
from ..io import atomic_writer, write_json
from ..mechanisms import ReleaseContext, TextMechanism, entry
from ..pipeline import (
    DEFAULT_MECHANISM,
    build_mechanism,
    check_size_options,
    mechanism_decoder,
    mechanism_guarantee,
    parse_params,
    release_settings,
)
from ..progress import ProgressCallback
from .jobs import JobSettings, PartResult, _mechanism, min_length, part_name, run_partition
from .plan import (
    DOCS_PER_PART,
    InputFile,
    Inputs,
    Partition,
    Segment,
    Spiller,
    open_inputs,
    partition_ids,
    plan_partitions,
    read_partition,
    spill_documents,
)
from .single import check_duplicate_ids
from .workdir import RunState, default_work_dir, fh_sha256, save_vocabulary, vocabulary_digests

if TYPE_CHECKING:
    from ..accounting.ledger import PrivacyLedger

    Ledger = str | os.PathLike[str] | PrivacyLedger

__all__ = [
    "DOCS_PER_PART",
    "MANIFEST",
    "SETTINGS",
    "JobSettings",
    "PartResult",
    "Partition",
    "Segment",
    "default_work_dir",
    "min_length",
    "obfuscate_corpus",
    "part_name",
    "partition_ids",
    "plan_partitions",
    "read_partition",
    "run_partition",
    "save_vocabulary",
]

MANIFEST = "manifest.json"
SETTINGS = "settings.json"
SAVE_EVERY_S = 1.0  # how often the run state records finished parts (the rest are redone after a kill)
_ = _mechanism  # re-exported for tests that inspect a worker's cached mechanism


class PublicSettings(TypedDict):
    """The public parameters of a partitioned run (``manifest.json``'s ``settings``; part of its identity)."""

    mechanism: str
    postprocess: str | None
    params: dict[str, object]
    epsilon: float
    size: int | None
    size_from_data: bool
    bag: str
    stop_words: str | None
    decoder: str
    known_source: bool
    embeddings: str
    vocabulary_fingerprint: str
    format: str
    partitions: int | None
    text_field: str
    id_field: str
    input_format: str
    seeded: bool
    empty: str


class Manifest(TypedDict):
    """``manifest.json`` of a partitioned release (public: the settings, the part names, a random run token)."""

    run: str
    settings: PublicSettings
    size: int | None
    documents: int
    parts: list[str]


#: A JSON object read back from a file this run wrote (``manifest.json``, ``settings.json``)
JSONObject = dict[str, object]


def _inside(path: Path, folder: Path) -> bool:
    p, f = path.resolve(), folder.resolve()
    return p == f or p.is_relative_to(f)


# -- before any work: options, folders, the run's identity ----------------------------------------
def _check_size(mechanism: str, size: int | None, size_from_data: bool) -> bool:
    """Validate the size options; return whether ``size_from_data`` is in effect."""
    if entry(mechanism).releases == "bag":
        if size is None and not size_from_data:
            raise ParameterError(
                "the bag size N must be public: pass --size N (size=N), or --size-from-data to use the shortest "
                "document's length, which that reveals"
            )
    else:
        check_size_options(mechanism, size, size_from_data)
    return size_from_data and size is None


def _check_folders(out_dir: Path, work: Path | None, private_report: Path | None, *, force: bool = False) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError(f"{out_dir}: partitioned output needs a directory, and this is a file")
    if private_report is not None and _inside(Path(private_report), out_dir):
        raise ParameterError(
            f"--private-report {private_report} is inside the output folder {out_dir}, which is meant for release; "
            "write it somewhere private"
        )
    if private_report is not None and not force and (Path(private_report).exists() or Path(private_report).is_symlink()):
        raise OutputExistsError(f"--private-report {private_report} exists; choose another path, or pass --force "
                                "to replace it")
    if work is not None and _inside(work, out_dir):
        raise ParameterError(f"--work-dir {work} is inside the output folder {out_dir}; it holds private data")
    if work is not None and out_dir.exists() and _inside(out_dir, work):
        raise ParameterError(f"the output folder {out_dir} is inside the work directory {work}")


def _run_key(inputs: Inputs, out_dir: Path, public: PublicSettings, seed: int | None,
             private_report: bool) -> dict[str, object]:
    """The run's private identity: never stored, only keyed hashes of it (see :mod:`textdp.engines.workdir`).

    The inputs are named by what their open descriptors are (path, device, inode, size,
    modification time). A run that reads a pipe or standard input gets a fresh random
    identity: the stream cannot be read again, so the run cannot be resumed.
    """
    return {
        "output": str(out_dir.resolve()), "inputs": inputs.identity(), "public": public,
        "stream": None if inputs.resumable else secrets.token_hex(16),
        "seed_sha256": None if seed is None else hashlib.sha256(str(seed).encode()).hexdigest(),
        "private_report": private_report,
    }


def _drop_release_files(out_dir: Path) -> None:
    """Remove a partitioned release (manifest, settings, part files) that ``--force`` replaces."""
    for p in [out_dir / MANIFEST, out_dir / SETTINGS, *out_dir.glob("part-*")]:
        p.unlink(missing_ok=True)


def _check_output(out_dir: Path, state: RunState, public: PublicSettings, force: bool) -> Manifest | None:
    """The manifest of the run being resumed (or ``None``); refuse an output folder of another run.

    With ``force`` the release files of another run (a failed or completed one) are removed and
    the folder is reused; without it the folder is refused with a message that names ``--force``.
    """
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        manifest: Manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if state.resumed and manifest.get("run") == state.run and manifest.get("settings") == public:
            return manifest
        if force:
            _drop_release_files(out_dir)  # --force: the other run's release is replaced
            return None
        if not state.resumed and (out_dir / SETTINGS).exists():
            raise ParameterError(
                f"{out_dir} holds a completed run, refused like a different run (its private state was deleted "
                "at completion, so textdp cannot tell which inputs it came from); use a new output directory, or "
                "pass --force to replace it"
            )
        raise ParameterError(
            f"{out_dir} holds the output of a different run (inputs or settings differ, or its private work "
            "directory is gone); use a new output directory, delete this one, or pass --force to replace it"
        )
    if out_dir.exists() and any(out_dir.glob("part-*")):
        if not force:
            raise ParameterError(f"{out_dir} holds part files but no manifest; use a new output directory, or pass "
                                 "--force to replace them")
        _drop_release_files(out_dir)
    if out_dir.exists() and not force and any(out_dir.iterdir()):
        raise OutputExistsError(
            f"{out_dir} exists and is not empty (nor the output of this run); choose a new output directory, "
            "or pass --force to write into it"
        )
    return None


@contextmanager
def _open_run(work: Path, key: dict[str, object], out_dir: Path, public: PublicSettings,
              force: bool, *, resumable: bool = True) -> Iterator[tuple[RunState, Manifest | None]]:
    """The run state (created, or resumed and verified) and the manifest of the run being resumed.

    The run's lock is held while the ``with`` block runs and released however it ends. A new
    run refused with a one-line error (a :class:`~textdp.errors.TextDPError`: bad input,
    options or output folder) leaves no private state behind: there is nothing to resume,
    since the same command fails the same way. An interrupted one (Ctrl-C, a crash, a lost
    worker) keeps it, so that the same command resumes, unless the run cannot be resumed
    (``resumable=False``: it reads a pipe or standard input), which keeps nothing.
    """
    state = RunState.open(work, key, output=out_dir)
    try:
        manifest = _check_output(out_dir, state, public, force)
        yield state, manifest
    except TextDPError:
        if not state.resumed:
            state.remove()
        raise
    except BaseException:
        if not resumable:
            state.remove()
        raise
    finally:
        state.close()


# -- the work ----------------------------------------------------------------------------------------
def _spiller(state: RunState, text_field: str, id_field: str, input_format: str) -> Spiller:
    """Spill an input once; reuse a spill only if it matches the hash this run recorded.

    The spill is written and read back through the work directory's descriptor, and
    hashed through the very file object the planner then scans (which hashes each
    segment for the workers).
    """

    def spill(src: InputFile, index: int) -> tuple[Path, io.BufferedReader]:
        name = f"input/input-{index:05d}.jsonl"
        fh = state.open_verified(name)
        if fh is None:
            with state.dir.writer(name, "w") as out:
                spill_documents(src, out, text_field, id_field, input_format)
            fh = state.dir.open_read(name)
            state.record(name, fh_sha256(fh))
        return state.work / name, fh

    return spill


def _finish_cleanup(state: RunState, out_dir: Path, manifest: Manifest,
                    progress: ProgressCallback | None) -> JSONObject | None:
    """The summary of a completed run whose cleanup was interrupted (after finishing it), else ``None``."""
    if not (out_dir / SETTINGS).exists() or not all((out_dir / name).exists() for name in manifest["parts"]):
        return None
    state.remove()
    if progress is not None:
        progress(manifest["documents"], manifest["documents"])
    return dict(json.loads((out_dir / SETTINGS).read_text(encoding="utf-8")))


def _part_done(state: RunState, out_dir: Path, index: int, fmt: str, report: bool) -> bool:
    """A part is finished if it and its report piece match the hashes this run recorded."""
    name, piece = part_name(index, fmt), part_name(index, "jsonl")
    if not state.verified(f"out:{name}", out_dir / name):
        return False
    return not report or state.verified(f"report/{piece}")


def _resolve_size(state: RunState, backend: Backend, plan: Sequence[Partition], settings: JobSettings,
                  on_size_from_data: Callable[[int], None] | None) -> int:
    """The shortest document of the whole input (published as N), measured once per run."""
    resolved = state.data["resolved_size"]
    if resolved is None:
        lengths: list[int] = [0] * len(plan)
        backend.map(min_length, [(p, settings) for p in plan], lambda i, r: lengths.__setitem__(i, r))
        resolved = state.data["resolved_size"] = min(lengths)
        state.save()
    size = int(resolved)
    if on_size_from_data is not None:
        on_size_from_data(size)
    return size


def _run_parts(backend: Backend, plan: Sequence[Partition], todo_idx: Sequence[int], settings: JobSettings,
               seed: int | None, state: RunState, progress: ProgressCallback | None) -> None:
    gens = spawn(seed, len(plan))  # partition i always draws from stream i
    todo = [(plan[i], settings, gens[i]) for i in todo_idx]
    total = sum(p.n_docs for p in plan)
    done_docs = total - sum(p.n_docs for p, _, _ in todo)
    if progress is not None:
        progress(done_docs, total)

    last_save = time.monotonic()

    def finished(i: int, result: PartResult) -> None:
        nonlocal done_docs, last_save
        index = todo[i][0].index
        state.record(f"out:{part_name(index, settings.fmt)}", result.part_sha256, save=False)
        if result.report_sha256 is not None:
            state.record(f"report/{part_name(index, 'jsonl')}", result.report_sha256, save=False)
        if time.monotonic() - last_save >= SAVE_EVERY_S:  # a part not yet recorded is redone on resume
            state.save()
            last_save = time.monotonic()
        done_docs += todo[i][0].n_docs
        if progress is not None:
            progress(done_docs, total)

    try:
        backend.map(run_partition, todo, finished)
    finally:
        state.save()


def _join_private_report(state: RunState, plan: Sequence[Partition], target: Path, force: bool) -> None:
    pieces = [part_name(p.index, "jsonl") for p in plan]
    data = {q: state.verified_bytes(f"report/{q}") for q in pieces}  # read once, hashed, then used
    bad = [q for q in pieces if data[q] is None]
    if bad:
        raise ParameterError(
            f"the private report pieces {', '.join(bad[:3])} are missing from {state.work / 'report'} or were "
            "modified; rerun into a new output directory to get a complete private report"
        )
    with atomic_writer(target, "wb", overwrite=force, private=True) as fh:
        for q in pieces:
            fh.write(data[q] or b"")


def obfuscate_corpus(
    paths: Sequence[Path], out_dir: Path, *, embeddings: Embeddings, epsilon: float, size: int | None, bag: str,
    stop_words: str | None, decoder: str, seed: int | None, backend: Backend, size_from_data: bool = False,
    known_source: bool = False, partitions: int | None = None, text_field: str = "text", id_field: str = "id",
    input_format: str = "auto", fmt: str = "jsonl", work_dir: Path | None = None, private_report: Path | None = None,
    extra_settings: dict[str, object] | None = None, progress: ProgressCallback | None = None,
    on_size_from_data: Callable[[int], None] | None = None, force: bool = False, strict_ids: bool = False,
    on_duplicate_ids: Callable[[int, str], None] | None = None, mechanism: str = DEFAULT_MECHANISM,
    postprocess: str | None = None, params: dict[str, object] | Sequence[str] | None = None, empty: str = "error",
    ledger: Ledger | None = None, budget: BudgetLike | None = None, new_ledger: bool = False,
    on_ledger: Callable[[int, str | None], None] | None = None,
    on_work_dir: Callable[[Path], None] | None = None,
) -> JSONObject:
    """Run a registered mechanism over ``paths`` into ``out_dir`` (partitioned, resumable).

    ``paths``: files (JSONL, Parquet, gzip, plain text), pipes or ``-`` (standard input), each
    opened once (:func:`textdp.engines.plan.open_inputs`): every later read uses the bytes the
    driver hashed (a run that reads a pipe cannot resume, and keeps nothing when interrupted).

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

    The work directory must be owned by this user and writable by nobody else;
    nothing found in it is used unless it matches a hash this run recorded, and all
    of it is deleted at completion (:mod:`textdp.engines.workdir`). An existing
    ``out_dir`` must be empty or the output of this same unfinished run (then
    resumed); ``force=True`` writes into any folder and replaces an existing
    ``private_report``. Repeated record ids are reported before any part is written
    (``on_duplicate_ids(count, first_id)``), or refused with ``strict_ids=True``.
    ``ledger`` (a path or a :class:`~textdp.accounting.ledger.PrivacyLedger`): every record id is charged
    its units of the guarantee once, before the first part is written (refused whole past ``budget``, nothing
    written; a resumed run is not charged again), as :func:`textdp.release.release` does;
    ``on_ledger(events, note)`` is told how many events were recorded and what ``new_ledger`` forgot (or None);
    ``on_work_dir(path)`` is told the run's work directory before the run starts (to name it if it is interrupted).
    """
    out_dir, paths = Path(out_dir), [Path(p) for p in paths]
    size_from_data = _check_size(mechanism, size, size_from_data)
    mech_params = parse_params(params)
    # the driver builds the mechanism once: options are checked before any work, and it states the guarantee
    driver_mech = build_mechanism(
        mechanism, epsilon=epsilon, embeddings=embeddings, bag=bag, stop_words=stop_words, decoder=decoder,
        known_source=known_source, postprocess=postprocess, params=mech_params, seed=seed,
    )
    _check_folders(out_dir, None if work_dir is None else Path(work_dir), private_report, force=force)
    fp = vocabulary_fingerprint(embeddings.vectors)
    public: PublicSettings = {
        "mechanism": mechanism, "postprocess": postprocess, "params": mech_params,
        "epsilon": float(epsilon), "size": size, "size_from_data": bool(size_from_data), "bag": bag,
        "stop_words": stop_words, "decoder": decoder, "known_source": bool(known_source),
        "embeddings": embeddings.name, "vocabulary_fingerprint": fp, "format": fmt, "partitions": partitions,
        "text_field": text_field, "id_field": id_field, "input_format": input_format, "seeded": seed is not None,
        "empty": check_choice(empty, "empty policy", EMPTY_POLICIES),
    }
    with open_inputs(paths, input_format) as inputs:  # every input opened once: nothing reads it by path again
        return _run_corpus(inputs, out_dir, driver_mech, public, work_dir=work_dir, seed=seed, size=size,
                           size_from_data=size_from_data, mechanism=mechanism, embeddings=embeddings,
                           backend=backend, partitions=partitions, private_report=private_report, force=force,
                           progress=progress, on_size_from_data=on_size_from_data, strict_ids=strict_ids,
                           on_duplicate_ids=on_duplicate_ids, ledger=ledger, budget=budget, new_ledger=new_ledger,
                           on_ledger=on_ledger, extra_settings=extra_settings, on_work_dir=on_work_dir)


def _run_corpus(inputs: Inputs, out_dir: Path, driver_mech: TextMechanism, public: PublicSettings, *,
                work_dir: Path | None, seed: int | None, size: int | None, size_from_data: bool, mechanism: str,
                embeddings: Embeddings, backend: Backend, partitions: int | None, private_report: Path | None,
                force: bool, progress: ProgressCallback | None, on_size_from_data: Callable[[int], None] | None,
                strict_ids: bool, on_duplicate_ids: Callable[[int, str], None] | None, ledger: Ledger | None,
                budget: BudgetLike | None, new_ledger: bool, on_ledger: Callable[[int, str | None], None] | None,
                extra_settings: dict[str, object] | None,
                on_work_dir: Callable[[Path], None] | None = None) -> JSONObject:
    """:func:`obfuscate_corpus` once its inputs are open: every read of them goes through ``inputs``."""
    text_field, id_field, input_format, fmt = (public["text_field"], public["id_field"], public["input_format"],
                                               public["format"])
    key = _run_key(inputs, out_dir, public, seed, private_report is not None)
    work = Path(work_dir) if work_dir is not None else default_work_dir(key)
    _check_folders(out_dir, work, None)
    if on_work_dir is not None:  # what an interruption leaves there: the caller can name it
        on_work_dir(work)
    with _open_run(work, key, out_dir, public, force, resumable=inputs.resumable) as (state, manifest):
        if state.data["complete"] and manifest is not None:  # killed while cleaning up: only that is left
            done = _finish_cleanup(state, out_dir, manifest, progress)
            if done is not None:
                return done
        state.save()
        plan = plan_partitions(inputs, partitions=partitions, text_field=text_field, id_field=id_field,
                               input_format=input_format, spill=_spiller(state, text_field, id_field, input_format))
        check_duplicate_ids(lambda: partition_ids(plan, text_field, id_field, inputs=inputs), strict=strict_ids,
                            on_duplicate_ids=on_duplicate_ids)
        settings = _prepare_jobs(state, out_dir, embeddings, backend, public, report=private_report is not None)
        if size is None and entry(mechanism).releases == "bag":
            size = _resolve_size(state, backend, plan, settings, on_size_from_data)
        settings = replace(settings, size=int(size or 0))
        if ledger is not None and not state.data.get("ledger_charged"):  # before the first part is written
            events, note = _charge_ledger(driver_mech, plan, public, size, ledger, budget=budget,
                                          new_ledger=new_ledger, inputs=inputs)
            state.data["ledger_charged"] = True
            state.save()
            if on_ledger is not None:
                on_ledger(events, note)
        parts = [part_name(p.index, fmt) for p in plan]
        if manifest is None:
            write_json(out_dir / MANIFEST, Manifest(run=state.run, settings=public, size=size,
                                                    documents=sum(p.n_docs for p in plan), parts=parts), private=False)
        todo_idx = [p.index for p in plan if not _part_done(state, out_dir, p.index, fmt, private_report is not None)]
        _run_parts(backend, plan, todo_idx, settings, seed, state, progress)
        if private_report is not None:
            _join_private_report(state, plan, Path(private_report), force)
        summary = _summary(driver_mech, backend, plan, public, size, extra_settings)
        write_json(out_dir / SETTINGS, summary, private=False)
        # complete: delete every private copy and the run's key, so nothing names or fingerprints the inputs
        state.complete()
        return summary


def _charge_ledger(driver_mech: TextMechanism, plan: Sequence[Partition], public: PublicSettings,
                   size: int | None, ledger: Ledger, *, budget: BudgetLike | None,
                   new_ledger: bool, inputs: Inputs | None = None) -> tuple[int, str | None]:
    """Charge every record id of ``plan`` its units of the release's guarantee (reads one partition at a time)."""
    from ..accounting.ledger import charge_ledger

    is_bag = entry(public["mechanism"]).releases == "bag"
    context = ReleaseContext(size=int(size) if is_bag and size is not None else None,
                             size_from_data=bool(public["size_from_data"]) and is_bag, seeded=public["seeded"],
                             empty=public["empty"])
    counts: dict[str, int] = {}
    for part in plan:
        docs = read_partition(part, public["text_field"], public["id_field"], inputs=inputs)
        for uid, n in driver_mech.charge_counts([d.text for d in docs], [str(d.id) for d in docs],
                                                context=context).items():
            counts[uid] = counts.get(uid, 0) + n
    guarantee = driver_mech.guarantee(context)
    return charge_ledger(ledger, {uid: guarantee.charge(n) for uid, n in counts.items()},
                         mechanism=public["mechanism"], unit=guarantee.unit, budget=budget, new_ledger=new_ledger,
                         command="obfuscate")


def _summary(driver_mech: TextMechanism, backend: Backend, plan: Sequence[Partition], public: PublicSettings,
             size: int | None, extra_settings: dict[str, object] | None) -> JSONObject:
    """The public ``settings.json`` of the completed run."""
    is_bag = entry(public["mechanism"]).releases == "bag"
    guarantee = mechanism_guarantee(
        driver_mech, size=int(size) if is_bag and size is not None else None, seeded=public["seeded"],
        size_from_data=bool(public["size_from_data"]) and is_bag, empty=public["empty"],
    )
    parts = [part_name(p.index, public["format"]) for p in plan]
    return release_settings(
        guarantee, command="obfuscate", engine=backend.name, documents=sum(p.n_docs for p in plan),
        fmt=public["format"],
        extra={"stop_words": public["stop_words"], "decoder": mechanism_decoder(driver_mech),
               "known_source": bool(public["known_source"]), "partitions": len(plan), "parts": parts,
               "vocabulary_fingerprint": public["vocabulary_fingerprint"], **(extra_settings or {})},
    )


def _prepare_jobs(state: RunState, out_dir: Path, embeddings: Embeddings, backend: Backend, public: PublicSettings,
                  *, report: bool) -> JobSettings:
    """Ready the output folder and the private files the jobs read; return the jobs' settings."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".part-*.tmp"):  # left by a killed run (never published)
        stale.unlink(missing_ok=True)
    vectors_sha256, words_sha256 = digests = vocabulary_digests(embeddings)
    vocab_dir = save_vocabulary(embeddings, state.dir, public["vocabulary_fingerprint"], digests)  # if it verifies
    report_dir = None
    if report:
        with state.dir.sub("report", create=True) as d:
            report_dir = d.path
    n_workers = getattr(backend, "n_workers", lambda: 1)()
    threads = max(1, (os.cpu_count() or 1) // n_workers) if backend.name == "dask" else None
    return JobSettings(
        vocab_dir=str(vocab_dir), vocab_name=embeddings.name, epsilon=float(public["epsilon"]), size=0,
        bag=public["bag"], stop_words=public["stop_words"], decoder=public["decoder"],
        known_source=public["known_source"], text_field=public["text_field"], id_field=public["id_field"],
        fmt=public["format"],
        out_dir=str(out_dir), report_dir=None if report_dir is None else str(report_dir), seeded=public["seeded"],
        size_from_data=public["size_from_data"], vectors_sha256=vectors_sha256, words_sha256=words_sha256,
        threads=threads, mechanism=public["mechanism"], postprocess=public["postprocess"],
        params=json.dumps(public["params"], sort_keys=True), empty=public["empty"],
    )
