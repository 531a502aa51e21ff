"""An interrupt that lands while :func:`textdp.io.atomic_writer` creates its hidden temporary file leaves nothing.

The race was seen in CI under load: SIGTERM arrived between ``mkstemp`` and the cleanup's ``try`` and the hidden
``.out.jsonl.*.tmp`` stayed behind (tests/test_hostile_cli_cases.py). Here the signal is sent from inside
``mkstemp`` itself, after the file exists, so the window is hit every time.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from textdp.io import atomic_writer


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_signal_while_the_temporary_file_is_created_leaves_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real = tempfile.mkstemp

    def mkstemp_then_interrupted(*args, **kwargs):
        made = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Python raises KeyboardInterrupt at its next check
        return made

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(tmp_path / "out.jsonl") as fh:
            fh.write("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
