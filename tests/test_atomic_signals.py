"""An interrupt that lands while :func:`textdp.io.atomic_writer` creates its hidden temporary file leaves nothing.

The race was seen in CI under load: SIGTERM arrived between ``mkstemp`` and the cleanup's ``try`` and the hidden
``.out.jsonl.*.tmp`` stayed behind (tests/test_hostile_cli_cases.py). Holding the signals with the main thread's
mask did not close it: with another thread alive, the process-directed signal went to that thread and Python raised
it in the main thread before the ``try`` (failed in CI again). Here the signal is sent right after the file is
created, with and without another thread alive, so the window is hit every time.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import textdp.io as tio
from textdp.io import atomic_writer


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("other_thread", [False, True])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_right_after_the_temporary_file_is_created_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_thread: bool, sig: int) -> None:
    real = tio._create_temporary

    class Interrupted(BaseException):
        pass

    def raise_interrupted(signum: int, frame: object) -> None:
        raise Interrupted

    def create_then_signalled(name: str) -> int:
        fd = real(name)
        assert os.path.exists(name)
        os.kill(os.getpid(), sig)  # Python raises at its next check
        return fd

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=True)
    if other_thread:
        worker.start()
    previous = signal.signal(sig, raise_interrupted)
    monkeypatch.setattr(tio, "_create_temporary", create_then_signalled)
    try:
        with pytest.raises(Interrupted):
            with atomic_writer(tmp_path / "out.jsonl") as fh:
                fh.write("x")
                for _ in range(1000):  # the interrupt must land before the body finishes
                    pass
    finally:
        signal.signal(sig, previous)
        stop.set()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_hidden_file_is_private_and_never_followed_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    name = tio._temporary_name(target)
    assert Path(name).parent == tmp_path and Path(name).name.startswith(".out.jsonl.") and name.endswith(".tmp")
    fd = tio._create_temporary(name)
    os.close(fd)
    assert os.stat(name).st_mode & 0o777 == 0o600
    link = tmp_path / ".link.tmp"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        tio._create_temporary(str(link))
    assert not (tmp_path / "elsewhere").exists()
