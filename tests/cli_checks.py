"""Helpers shared by the hostile-input tests: one-line CLI errors, the umask, a backend that dies mid-run."""

from __future__ import annotations

import os

from textdp.engines import LocalBackend


def one_error(res, *needles: str) -> str:  # type: ignore[no-untyped-def]
    """The run ended with exit 2 and exactly one ``error:`` line (containing ``needles``); returns it."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    for n in needles:
        assert n in errors[0], (n, errors[0])
    return errors[0]


def current_umask() -> int:
    """The process umask (read without changing it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class Crash(LocalBackend):
    """A backend that dies after ``after`` finished partitions (a killed run, in-process)."""

    def __init__(self, after: int) -> None:
        self.after = after

    def map(self, fn, items, on_result):  # type: ignore[no-untyped-def]
        def stop(i, r):  # type: ignore[no-untyped-def]
            on_result(i, r)
            self.after -= 1
            if self.after <= 0:
                raise KeyboardInterrupt

        super().map(fn, items, stop)
