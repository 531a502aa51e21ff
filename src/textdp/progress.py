"""The one progress-callback signature of textdp: ``progress(done, total)``.

Every long-running function takes ``progress: ProgressCallback | None`` and calls it
with the cumulative number of finished units (documents, samples, steps, words) and
the total. A run of several stages (``textdp evaluate``) takes a
:data:`StageProgress`: it opens each stage with ``stage(name, total)`` and reports
inside the stage through the :data:`ProgressCallback` it gets back. A leaf module.

>>> seen = []
>>> tick = Counter(lambda done, total: seen.append((done, total)), 3)
>>> tick(); tick(2); seen
[(1, 3), (3, 3)]
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Counter", "ProgressCallback", "StageProgress", "offset"]

#: ``progress(done, total)``: cumulative units finished, out of ``total``.
ProgressCallback = Callable[[int, int], None]
#: ``stage(name, total) -> ProgressCallback``: opens a named stage of a multi-stage run.
StageProgress = Callable[[str, int], ProgressCallback]


class Counter:
    """Counts finished units and reports them to a :data:`ProgressCallback` (``None``: silent)."""

    def __init__(self, progress: ProgressCallback | None, total: int) -> None:
        self.progress = progress
        self.total = int(total)
        self.done = 0

    def __call__(self, n: int = 1) -> None:
        self.done += int(n)
        if self.progress is not None:
            self.progress(self.done, self.total)


def offset(counter: Counter) -> ProgressCallback:
    """A callback for a sub-task whose ``done`` counts from the counter's current position.

    >>> seen = []
    >>> c = Counter(lambda d, t: seen.append((d, t)), 10); c(4)
    >>> sub = offset(c); sub(3, 6); sub(6, 6); seen[-1]
    (10, 10)
    """
    base = counter.done

    def report(done: int, total: int) -> None:
        counter.done = base + int(done)
        if counter.progress is not None:
            counter.progress(counter.done, counter.total)

    return report
