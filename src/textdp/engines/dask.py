"""The Dask engine (``dask.distributed``; extra ``[dask]``).

Without a scheduler address it starts a :class:`distributed.LocalCluster` with one
single-threaded worker process per core (the decoder threads inside a worker are
limited to its share of the cores). Embeddings are never shipped through the
scheduler: jobs carry a path, and each worker opens it through its own checked
descriptor, reads the matrix once into its own memory and verifies those bytes (one
copy per worker process; see :mod:`textdp.engines.jobs`).

**Security.** Workers hold the texts and the generator keys, and any client of a
Dask scheduler can run arbitrary code in them. So the local cluster:

* listens on ``127.0.0.1`` only, over TLS with credentials made for the run
  (:meth:`distributed.security.Security.temporary`, in memory, never written): a
  client without them cannot connect, let alone run code;
* serves no dashboard and no HTTP routes (health, metrics, worker pages) unless
  ``dashboard=True`` (``--dashboard``), and then on ``127.0.0.1`` only, where any
  local user can read its task counts and timings. Dask opens an HTTP listener on the
  scheduler and on every worker whatever the routes (it answers ``/sitemap.json``):
  without ``--dashboard`` those listeners are closed as soon as the cluster is up,
  before any job is sent (a worker plugin closes a restarted worker's too);
* keeps its scratch space (``dask-scratch-space``: spilled task data, worker files) in
  a folder made for the run, ``0700`` under the textdp cache (every folder above it
  checked, :func:`textdp._cache.private_dir`), deleted when the backend closes, never
  in the system temp folder where another user could create it first.

A remote cluster (``scheduler=``, ``--scheduler``) should be ``tls://``: the
client's certificates come from the Dask configuration
(``distributed.comm.tls.ca-file``, ``distributed.comm.tls.client.cert`` and
``.key``, e.g. the environment variables ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``,
``DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT`` and ``..._KEY``) or from
``security=``. A plain ``tcp://`` scheduler gets a
:class:`~textdp.errors.PrivacyWarning`, issued before connecting: anyone who can
reach it can run code in its workers, which hold the texts and the generator keys,
and the traffic (texts included) is not encrypted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._cache import cache_dir, open_private_dir, private_dir
from ..backend import R, T
from ..errors import PrivacyWarning, require

if TYPE_CHECKING:
    from distributed import Client, LocalCluster, Scheduler, Worker

try:  # this module is imported only when the Dask engine is asked for
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - without the [dask] extra, DaskBackend() says what to install
    _WorkerPlugin = object  # type: ignore[misc,assignment]

PLAIN_SCHEDULER_WARNING = (
    "--scheduler {address} is not TLS: anyone who can reach it can run code in its workers, which hold the "
    "texts and the generator keys, and the traffic is not encrypted; use a tls:// scheduler with certificates "
    "(Dask configuration distributed.comm.tls.*)"
)

#: no HTTP routes on the scheduler and the workers (the dashboard, /health, /metrics, worker pages)
_NO_HTTP: dict[str, list[str]] = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}


def is_tls(address: str) -> bool:
    """True for a TLS scheduler address (``tls://``, ``wss://``).

    >>> is_tls("tls://10.0.0.5:8786"), is_tls("tcp://10.0.0.5:8786"), is_tls("10.0.0.5:8786")
    (True, False, False)
    """
    return address.strip().lower().startswith(("tls://", "wss://"))


class DaskBackend:
    """Run partition jobs on a Dask cluster; results are handled as they complete."""

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        workers: int | None = None,
        processes: bool = True,
        client: Client | None = None,
        dashboard: bool = False,
        security: object = None,
    ) -> None:
        distributed = require("distributed", "dask")
        self._own_cluster = None
        self._dashboard = dashboard
        #: the local cluster's scratch folder (``0700``, deleted at close); ``None`` for a remote cluster
        self.scratch: Path | None = None
        if client is not None:
            self.client = client
            self._own_client = False
        elif scheduler:
            if not is_tls(scheduler):
                warnings.warn(PLAIN_SCHEDULER_WARNING.format(address=scheduler), PrivacyWarning, stacklevel=2)
            self.client = distributed.Client(scheduler, security=security)
            self._own_client = True
        else:
            self.scratch = scratch = _scratch_dir()
            try:
                self._own_cluster = _local_cluster(workers or os.cpu_count() or 1, processes, dashboard, scratch)
                self.client = distributed.Client(self._own_cluster, security=self._own_cluster.security)
            except BaseException:
                self._drop_scratch()
                raise
            self._own_client = True
            if not dashboard:
                _close_http_listeners(self.client)

    @property
    def dashboard_link(self) -> str | None:
        """The local cluster's dashboard (``dashboard=True`` only; on 127.0.0.1), else ``None``."""
        if self._own_cluster is None or not self._dashboard:
            return None
        return str(self._own_cluster.dashboard_link)

    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_result: Callable[[int, R], None]) -> None:
        distributed = require("distributed", "dask")
        if not items:
            return
        futures = self.client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut in distributed.as_completed(futures):
                on_result(index[fut.key], fut.result())
                fut.release()
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        if self._own_client:
            self.client.close()
        if self._own_cluster is not None:
            self._own_cluster.close()
            self._own_cluster = None
        self._drop_scratch()

    def _drop_scratch(self) -> None:
        """Delete the run's scratch folder (through its parent's checked descriptor)."""
        if self.scratch is None:
            return
        with contextlib.suppress(OSError), open_private_dir(self.scratch.parent, what="the Dask scratch folder") as d:
            d.remove(self.scratch.name)
        _forget_import_paths(self.scratch)
        self.scratch = None

    def __enter__(self) -> DaskBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _scratch_dir() -> Path:
    """A new ``0700`` folder for the local cluster's scratch space (``<cache>/dask/<random>``).

    Under the textdp cache (private, every folder above it checked); if the cache cannot be
    made, a fresh ``tempfile.mkdtemp`` folder (``0700``, created exclusively), checked the same way.
    """
    try:
        return private_dir(cache_dir("dask", create=True) / secrets.token_hex(8), what="the Dask scratch folder")
    except OSError:
        return private_dir(Path(tempfile.mkdtemp(prefix="textdp-dask-")), what="the Dask scratch folder")


class _NoHTTPPlugin(_WorkerPlugin):
    """A worker plugin that closes the worker's HTTP listener (also after a restart by its nanny)."""

    name = "textdp-no-http"
    idempotent = True

    def setup(self, worker: Worker) -> None:
        server = getattr(worker, "http_server", None)
        if server is not None:
            server.stop()

    def teardown(self, worker: Worker) -> None:
        pass


def _stop_scheduler_http(dask_scheduler: Scheduler) -> None:
    server = getattr(dask_scheduler, "http_server", None)
    if server is not None:
        server.stop()


def _close_http_listeners(client: Client) -> None:
    """Close the HTTP listeners Dask opens on the scheduler and workers whatever the routes (``/sitemap.json``)."""
    client.run_on_scheduler(_stop_scheduler_http)
    client.register_plugin(_NoHTTPPlugin())


def _forget_import_paths(scratch: Path) -> None:
    """Drop the import paths that in-process workers added inside ``scratch`` (``distributed`` puts each worker's
    folder on ``sys.path`` and never takes it off): once the folder is deleted, every later import of the process
    would probe those stale names."""
    root = str(scratch)
    inside = [p for p in sys.path if isinstance(p, str) and (p == root or p.startswith(root + os.sep))]
    for p in inside:
        while p in sys.path:
            sys.path.remove(p)
        sys.path_importer_cache.pop(p, None)


def _local_cluster(n_workers: int, processes: bool, dashboard: bool, scratch: Path) -> LocalCluster:
    """A loopback-only, TLS-authenticated local cluster with its scratch space in ``scratch`` (see the module notes)."""
    dask = require("dask", "dask")
    distributed = require("distributed", "dask")
    require("cryptography", "dask")  # Security.temporary() makes the run's certificates with it
    security = distributed.security.Security.temporary()
    config: dict[str, object] = {"temporary-directory": str(scratch)}
    if not dashboard:
        config.update(_NO_HTTP)
    # worker processes take the configuration at start: the routes stay off for the run
    with dask.config.set(config):
        return distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=processes, host="127.0.0.1",
            protocol="tls://" if processes else None, security=security,
            dashboard_address="127.0.0.1:0" if dashboard else None, worker_dashboard_address=None,
            local_directory=str(scratch),
            # the scheduler binds its HTTP server even without a dashboard, by default on 8787: a second run at the
            # same time found it taken ("Port 8787 is already in use" warning); a free loopback port instead
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )
