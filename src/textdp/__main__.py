"""``python -m textdp`` runs the command line; :func:`main` is also the ``textdp`` console script.

Ctrl+C (or SIGTERM) while the command line is still being imported ends as it does later, in one line and
exit 130 (143): :func:`textdp.cli.main` takes over the signals once it is imported.
"""

from __future__ import annotations

import signal
import sys
import types


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: types.FrameType | None) -> None:
    raise _Stopped(signum)


def main() -> None:
    """Import the command line and run it; a signal during the import ends in one line, 128 + its number."""
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        from textdp.cli import main as run_command_line

        run_command_line()  # its first step takes the signals over (and it never lets one escape)
    except (_Stopped, KeyboardInterrupt) as exc:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl+C cannot cut the line short
        signum = exc.signum if isinstance(exc, _Stopped) else signal.SIGINT
        sys.stderr.write("interrupted: nothing was done\n")
        sys.exit(128 + signum)


if __name__ == "__main__":
    main()
