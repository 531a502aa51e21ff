"""Execution engines: run pure batch functions over partitions of a corpus.

The core of textdp is pure batch functions (``privatize_ids`` and the per-partition
job :func:`textdp.engines.corpus.run_partition`). An engine only decides *where*
they run. The interface is one method::

    backend.map(fn, items, on_result)   # calls on_result(i, fn(items[i])) as each finishes

* :class:`LocalBackend` — in this process, one item after the other (tests, small jobs).
* :class:`DaskBackend` — ``dask.distributed``: a local cluster by default, or a real
  cluster given its scheduler address (extra ``[dask]``).

Determinism does not depend on the engine: partition ``i`` draws from
``SeedSequence(seed).spawn(n)[i]``, so a seeded run writes the same output whatever
the scheduling. See ``ARCHITECTURE.md`` ("Corpus scale") and
:func:`textdp.engines.corpus.obfuscate_corpus`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import ParameterError
from .local import LocalBackend

ENGINES = ("local", "dask")


class Backend(Protocol):
    """Where partition jobs run."""

    name: str

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], on_result: Callable[[int, Any], None]) -> None:
        """Run ``fn`` on every item; call ``on_result(index, result)`` in the driver as each finishes."""
        ...

    def close(self) -> None:
        """Release workers and connections."""
        ...


def get_backend(name: str = "dask", *, scheduler: str | None = None, workers: int | None = None) -> Backend:
    """``local`` or ``dask`` (``scheduler``: address of a running cluster; default: a local cluster).

    >>> get_backend("local").name
    'local'
    """
    if name == "local":
        if scheduler:
            raise ParameterError("--scheduler needs the dask engine")
        return LocalBackend()
    if name == "dask":
        from .dask import DaskBackend

        return DaskBackend(scheduler=scheduler, workers=workers)
    raise ParameterError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}")


__all__ = ["ENGINES", "Backend", "LocalBackend", "get_backend"]
