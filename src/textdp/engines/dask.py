"""The Dask engine (``dask.distributed``; extra ``[dask]``).

Without a scheduler address it starts a :class:`distributed.LocalCluster` with one
single-threaded worker process per core (the decoder threads inside a worker are
limited to its share of the cores). With ``scheduler="tcp://host:8786"`` it joins a
running cluster. Embeddings are never shipped through the scheduler: jobs carry a
path, and each worker memory-maps the matrix (one copy per machine in the page cache).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import require


class DaskBackend:
    """Run partition jobs on a Dask cluster; results are handled as they complete."""

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        workers: int | None = None,
        processes: bool = True,
        client: Any = None,
    ) -> None:
        distributed = require("distributed", "dask")
        self._own_cluster = None
        if client is not None:
            self.client = client
            self._own_client = False
        elif scheduler:
            self.client = distributed.Client(scheduler)
            self._own_client = True
        else:
            n = workers or os.cpu_count() or 1
            self._own_cluster = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=":0"
            )
            self.client = distributed.Client(self._own_cluster)
            self._own_client = True

    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], on_result: Callable[[int, Any], None]) -> None:
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

    def __enter__(self) -> DaskBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
