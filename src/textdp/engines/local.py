"""The in-process engine: partitions run one after the other in the calling process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class LocalBackend:
    """Run partition jobs sequentially here (no workers, no serialisation).

    >>> out = []
    >>> LocalBackend().map(lambda x: x * x, [1, 2, 3], lambda i, r: out.append((i, r)))
    >>> out
    [(0, 1), (1, 4), (2, 9)]
    """

    name = "local"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], on_result: Callable[[int, Any], None]) -> None:
        for i, item in enumerate(items):
            on_result(i, fn(item))

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
