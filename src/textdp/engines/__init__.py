"""Execution engines: run pure batch functions over partitions of a corpus.

The ``Backend`` protocol and :class:`LocalBackend` live in the leaf module
:mod:`textdp.backend` (so lower layers can take a backend without importing the
engines); this package re-exports them and adds the Dask backend.

The core of textdp is pure batch functions (``privatize_ids`` and the per-partition
job :func:`textdp.engines.corpus.run_partition`). An engine only decides *where*
they run. The interface is one method::

    backend.map(fn, items, on_result)   # calls on_result(i, fn(items[i])) as each finishes

* :class:`LocalBackend` — in this process, one item after the other (tests, small jobs).
* :class:`DaskBackend` — ``dask.distributed``: a local cluster by default (loopback
  only, TLS with credentials made for the run, no dashboard unless asked), or a real
  cluster given its scheduler address (extra ``[dask]``).

Determinism does not depend on the engine: partition ``i`` draws from
``SeedSequence(seed).spawn(n)[i]``, so a seeded run writes the same output whatever
the scheduling. See ``ARCHITECTURE.md`` ("Corpus scale") and
:func:`textdp.engines.corpus.obfuscate_corpus`.
"""

from __future__ import annotations

from ..backend import Backend, LocalBackend
from ..errors import ParameterError

ENGINES = ("local", "dask")


def get_backend(
    name: str = "dask", *, scheduler: str | None = None, workers: int | None = None, dashboard: bool = False
) -> Backend:
    """``local`` or ``dask`` (``scheduler``: address of a running cluster; default: a local cluster).

    The local Dask cluster listens on 127.0.0.1 over TLS with credentials made for
    the run, and serves a dashboard (on 127.0.0.1) only with ``dashboard=True``;
    see :mod:`textdp.engines.dask` for what a plain ``tcp://`` scheduler exposes.

    >>> get_backend("local").name
    'local'
    """
    if name == "local":
        if scheduler or dashboard:
            raise ParameterError(f"{'--scheduler' if scheduler else '--dashboard'} needs the dask engine")
        return LocalBackend()
    if name == "dask":
        from .dask import DaskBackend

        if scheduler and dashboard:
            raise ParameterError("--dashboard is for the local cluster; a remote cluster serves its own")
        return DaskBackend(scheduler=scheduler, workers=workers, dashboard=dashboard)
    raise ParameterError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}")


__all__ = ["ENGINES", "Backend", "LocalBackend", "get_backend"]
