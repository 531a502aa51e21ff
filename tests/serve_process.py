"""``textdp serve`` as a child process for the tests: started with a deadline, stopped with Ctrl+C, never left behind.

Issue 27's oldest-version run ended with a ``textdp serve`` child that had to be killed by hand: the tests sent
SIGINT, waited 20 s, then killed the server without saying so, and a fixture whose setup failed after the start
could leave the child running until the session ended. Here every start is a ``with`` block whose exit stops the
server and fails the test when Ctrl+C did not stop it in time, and :func:`assert_no_server_left` (run after each
serve test module) fails on any ``textdp serve`` child still running.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: seconds a server has to print its address (it loads no embeddings before that)
START_SECONDS = 120.0
#: seconds a server has to exit after Ctrl+C (it cancels what still runs after SHUTDOWN_TIMEOUT = 3 s)
STOP_SECONDS = 30.0
_URL = re.compile(r"textdp serve: (http://127\.0\.0\.1:(\d+)/)#token=([A-Za-z0-9_-]+)\n")


@dataclass
class Served:
    """A running ``textdp serve``: its printed address (with the token), the parts of it, the process."""

    address: str
    url: str
    port: int
    token: str
    proc: subprocess.Popen[str]
    rest: str = field(default="")  # what it printed on stdout after the address (set once it stopped)


def _first_line(proc: subprocess.Popen[str], seconds: float) -> str:
    """The first line of ``proc``'s stdout, or ``""`` when none came within ``seconds``."""
    box: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return box[0] if box else ""


def stop(proc: subprocess.Popen[str], seconds: float = STOP_SECONDS) -> float:
    """Ctrl+C, then wait: the seconds it took to exit. Kills it and fails when it did not exit in ``seconds``."""
    if proc.poll() is not None:
        return 0.0
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"textdp serve (pid {proc.pid}) did not stop within {seconds:.0f} s of Ctrl+C: "
                             "killed") from None
    return time.monotonic() - start


@contextlib.contextmanager
def serve_process(*args: str, stderr: int | IO[str] = subprocess.DEVNULL,
                  env: dict[str, str] | None = None) -> Iterator[Served]:
    """``textdp serve --port 0 ARGS`` in a child process until the block ends (then Ctrl+C, and it must exit)."""
    proc = subprocess.Popen([sys.executable, "-m", "textdp", "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env or {**os.environ, "PYTHONUNBUFFERED": "1"})
    served = None
    try:
        line = _first_line(proc, START_SECONDS)
        m = _URL.fullmatch(line)
        if m is None:
            proc.kill()
            raise AssertionError(f"textdp serve printed {line!r} first (exit status {proc.poll()}), not its address")
        served = Served(address=line.split(": ", 1)[1].strip(), url=m.group(1), port=int(m.group(2)),
                        token=m.group(3), proc=proc)
        yield served
    finally:
        try:
            stop(proc)
        finally:
            proc.wait()
            assert proc.stdout is not None
            if served is not None:
                served.rest = proc.stdout.read()
            proc.stdout.close()


def serve_children() -> list[str]:
    """The ``textdp serve`` processes (not yet reaped zombies excluded) whose parent is this process."""
    me = os.getpid()
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):  # it exited meanwhile
            continue
        if int(ppid) == me and state != "Z" and b"textdp" in argv and b"serve" in argv:
            found.append(f"{stat.parent.name}: {b' '.join(argv).decode(errors='replace').strip()}")
    return found


def assert_no_server_left() -> None:
    """Fails (and stops them) when ``textdp serve`` children of this test process are still running."""
    if not Path("/proc/self/stat").is_file():
        return  # no /proc: nothing to list (the ``with`` blocks above still stop every server)
    left = serve_children()
    for entry in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry.split(":")[0]), signal.SIGKILL)
    assert not left, f"textdp serve processes left running by the tests (now killed): {left}"
