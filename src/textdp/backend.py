"""Where batch jobs run: the ``Backend`` protocol and the in-process backend (a leaf module).

Heavy batch work in textdp is a pure job function mapped over a list of items.
A backend only decides *where* the calls run; it never changes their results::

    backend.map(fn, items, on_result)   # calls on_result(i, fn(items[i])) as each finishes

This module imports nothing from the rest of textdp, so lower layers (``topics``,
``mechanisms``) can accept any backend without importing :mod:`textdp.engines`,
which re-exports these names and adds the Dask backend
(:class:`textdp.engines.dask.DaskBackend`: a local cluster or ``--scheduler``).

Determinism never depends on the backend: each item carries (or derives from its
index) its own random stream, so results are identical under any scheduling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, Self, TypeVar, runtime_checkable

__all__ = ["Backend", "LocalBackend"]

T = TypeVar("T")  # an item
R = TypeVar("R")  # the job's result for it


@runtime_checkable
class Backend(Protocol):
    """Where jobs run (``LocalBackend`` here, ``DaskBackend`` in :mod:`textdp.engines`)."""

    name: str

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_result: Callable[[int, R], None]) -> None:
        """Run ``fn`` on every item; call ``on_result(index, result)`` in the driver as each finishes."""
        ...

    def close(self) -> None:
        """Release workers and connections."""
        ...


class LocalBackend:
    """Run jobs sequentially in this process (no workers, no serialisation).

    >>> out = []
    >>> LocalBackend().map(lambda x: x * x, [1, 2, 3], lambda i, r: out.append((i, r)))
    >>> out
    [(0, 1), (1, 4), (2, 9)]
    >>> isinstance(LocalBackend(), Backend)
    True
    """

    name = "local"

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_result: Callable[[int, R], None]) -> None:
        for i, item in enumerate(items):
            on_result(i, fn(item))

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
