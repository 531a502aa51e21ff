"""A hermetic test run: textdp's per-user state lives in a private folder made for this run (issue 38, item 9).

Everything textdp keeps per user (converted embeddings, approximate-decoder indexes, sampled
sensitivities, ledger anchors, the runs of partitioned and interrupted releases, the per-user
secret key) lives under one folder, :func:`textdp._cache.cache_dir`: ``$TEXTDP_CACHE_DIR``, else
``$XDG_CACHE_HOME/textdp``, else ``~/.cache/textdp``. This file sits at the repository root so
that it applies to every test, the doctests under ``src/textdp`` included, and it points
``TEXTDP_CACHE_DIR`` at a fresh ``0700`` folder under the system's temporary folder as pytest
starts, before any test module (or textdp) is imported; subprocesses inherit it. The folder is
removed when pytest ends. Tests that need a state folder of their own (a second user, a moved
cache) still set ``TEXTDP_CACHE_DIR`` with ``monkeypatch``, which restores this one afterwards.

The guard: the real state folders (``~/.cache/textdp``, and the folder ``$TEXTDP_CACHE_DIR`` or
``$XDG_CACHE_HOME`` named before pytest started) are listed with sizes and modification times at
the start and compared at the end; any change fails the run and names what changed. On a machine
where something else uses that cache while the tests run, ``TEXTDP_TEST_CACHE_GUARD=0`` turns the
check into a warning.

The ledgers' anchors live in textdp's STATE folder instead (:func:`textdp._cache.state_dir`:
``$TEXTDP_STATE_DIR``, else ``$XDG_STATE_HOME/textdp``, else ``~/.local/state/textdp``), which
no cache wipe removes (issue 39): ``TEXTDP_STATE_DIR`` points at a ``state`` folder beside the
private cache for the run, every test gets a fresh one of its own (``_private_textdp_state``),
and the real state folders are guarded like the cache.

Converting the default GloVe vectors into the fresh cache costs about 2 s once per run (the test
subprocesses share the same folder), so no shared cache is read. The slow tests that sample sensitivities
for minutes (``-m slow``) cache them there too; to keep that state between runs, name a folder of your own
in ``TEXTDP_TEST_STATE_DIR`` (made ``0700``; one of the real state folders is refused).

Two test workers (pytest-xdist): ``python -m pytest`` runs the tests in two worker processes when the
machine has two cores or more (many tests wait on ``textdp`` subprocesses rather than compute), one test module
per worker at a time (``--dist loadscope``: a module's tests run in order, its fixtures are built once).
``-n 0`` or ``-p no:xdist`` runs them in this one process (as do ``--pdb`` and ``-s``, for debugging); ``-n N``
or ``--dist MODE`` on the command line win. Each worker has state folders of its own (``gwN/cache`` and
``gwN/state`` in the run's private folder, or ``gwN`` in ``TEXTDP_TEST_STATE_DIR``), and the guard runs once,
in the process that started the workers, from before the first worker starts to after the last one ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

#: the state variable textdp reads (src/textdp/_cache.py); every per-user file lives under it
STATE_VAR = "TEXTDP_CACHE_DIR"
#: the variable of textdp's STATE folder (the ledgers' anchors: src/textdp/_cache.py ``state_dir``)
ANCHORS_VAR = "TEXTDP_STATE_DIR"
GUARD_VAR = "TEXTDP_TEST_CACHE_GUARD"
#: an optional folder that keeps the tests' state between runs (instead of a fresh one per run)
KEEP_VAR = "TEXTDP_TEST_STATE_DIR"

#: the most test workers a default run starts (two cores: more would only compete for them)
MAX_WORKERS = 2
#: the key of the workers' input that names the folder holding their state folders
ROOT_KEY = "textdp_state_root"

_root_key = pytest.StashKey[Path]()
_snapshot_key = pytest.StashKey[dict[Path, dict[str, tuple[int, int, int]]]]()
_private_key = pytest.StashKey[Path]()


def real_state_dirs(environ: os._Environ[str] | dict[str, str] | None = None) -> list[Path]:
    """The per-user textdp state folders a run outside the tests would use (``_cache.cache_dir``'s rule)."""
    env = os.environ if environ is None else environ
    dirs = [Path.home() / ".cache" / "textdp"]
    if env.get("XDG_CACHE_HOME"):
        dirs.append(Path(env["XDG_CACHE_HOME"]) / "textdp")
    if env.get(STATE_VAR):
        dirs.append(Path(env[STATE_VAR]))
    dirs.append(Path.home() / ".local" / "state" / "textdp")  # the ledgers' anchors (_cache.state_dir)
    if env.get("XDG_STATE_HOME"):
        dirs.append(Path(env["XDG_STATE_HOME"]) / "textdp")
    if env.get(ANCHORS_VAR):
        dirs.append(Path(env[ANCHORS_VAR]))
    return list(dict.fromkeys(dirs))


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` (not following links): relative path -> (mode, size, mtime_ns)."""
    out: dict[str, tuple[int, int, int]] = {}
    if not root.is_dir():
        return out
    for top, dirs, files in os.walk(root, onerror=lambda _e: None):
        for name in dirs + files:
            p = Path(top, name)
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> list[str]:
    """What differs between two :func:`listing` results, one line each (new, removed, modified)."""
    out = [f"new      {k}" for k in sorted(after.keys() - before.keys())]
    out += [f"removed  {k}" for k in sorted(before.keys() - after.keys())]
    out += [f"modified {k}" for k in sorted(before.keys() & after.keys()) if before[k] != after[k]]
    return out


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Two workers by default (pytest-xdist), unless the command line chose (``-n``, ``--dist``) or debugs."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return  # a worker itself, or xdist absent or disabled (-p no:xdist): one process
    opt = config.option
    if opt.numprocesses is not None or opt.dist != "no" or getattr(opt, "tx", None):
        return  # -n, --dist or --tx given: as asked
    if opt.usepdb or getattr(opt, "trace", False) or opt.capture == "no" or opt.collectonly:
        return  # --pdb, --trace, -s: debugging in this process; --collect-only: nothing to run
    workers = min(MAX_WORKERS, _cores())
    if workers > 1:
        opt.numprocesses, opt.dist = workers, "loadscope"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]  # xdist's WorkerController
    """Each worker learns the folder its own state folder goes in (this process made it)."""
    node.workerinput[ROOT_KEY] = str(node.config.stash[_root_key])


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    kept = os.environ.get(KEEP_VAR)
    if worker is not None and ROOT_KEY in worker:
        # an xdist worker: a folder of its own under the run's (or the kept one); the guard is the main process's
        state = Path(worker[ROOT_KEY]) / worker["workerid"]
        state.mkdir(mode=0o700, exist_ok=True)
        if not kept:
            state = state / "cache"
            state.mkdir(mode=0o700, exist_ok=True)
    elif kept:
        real = real_state_dirs()  # recorded under the environment pytest was started with, then replaced
        config.stash[_snapshot_key] = {d: listing(d) for d in real}
        state = Path(kept).expanduser().absolute()
        if any(state.resolve() == d.resolve() or d.resolve().is_relative_to(state.resolve()) for d in real):
            raise pytest.UsageError(f"{KEEP_VAR}={kept} is (or holds) a real textdp state folder; name a folder "
                                    "kept for the tests only")
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        config.stash[_root_key] = state
    else:
        config.stash[_snapshot_key] = {d: listing(d) for d in real_state_dirs()}
        private = Path(tempfile.mkdtemp(prefix="textdp-tests-"))  # 0700, made exclusively
        os.chmod(private, 0o700)
        state = private / "cache"
        state.mkdir(mode=0o700)
        config.stash[_private_key] = private
        config.stash[_root_key] = private
    os.environ[STATE_VAR] = str(state)
    # textdp makes it 0700 when first used; beside the run's private cache, or inside a kept test folder
    os.environ[ANCHORS_VAR] = str(state / "textdp-state" if kept else state.parent / "state")


@pytest.fixture(autouse=True)
def _private_textdp_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own STATE folder (ledger anchors), so no test sees another's anchors; a test that sets
    ``TEXTDP_STATE_DIR`` itself overrides it."""
    monkeypatch.setenv(ANCHORS_VAR, str(tmp_path_factory.mktemp("textdp-state")))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    snapshot = session.config.stash.get(_snapshot_key, {})
    found = []
    for d, before in snapshot.items():
        diff = changes(before, listing(d))
        if diff:
            found.append(f"{d}:\n  " + "\n  ".join(diff[:40]) + ("\n  ..." if len(diff) > 40 else ""))
    if not found:
        return
    message = ("the test run changed the real textdp state folder(s); every test must keep its state in the "
               f"private folder ${STATE_VAR} points at (conftest.py) or in its own tmp_path:\n" + "\n".join(found))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get(GUARD_VAR, "1") == "0":
        message = f"warning ({GUARD_VAR}=0): " + message
    elif session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if reporter is not None:
        reporter.write_sep("=", "textdp state guard", red=True, bold=True)
        reporter.write_line(message)
    else:  # pragma: no cover - without the terminal plugin
        print(message)


def pytest_unconfigure(config: pytest.Config) -> None:
    private = config.stash.get(_private_key, None)
    if private is not None:
        shutil.rmtree(private, ignore_errors=True)
