"""Issue 28, section 3: the local Dask cluster opens no HTTP listener, keeps its scratch space in a
private folder made for the run, and the ``tcp://`` warning comes before the connection attempt.

On a779fc6 the scheduler and each worker still answered ``GET /sitemap.json`` on a loopback port
(no routes, but a listener), scratch went to ``<system temp>/dask-scratch-space`` (0755, which
another user can create first), and the CLI printed the ``tcp://`` PrivacyWarning only after the
scheduler answered (never, if it did not).
"""

from __future__ import annotations

import os
import stat
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")

from textdp.cli import app
from textdp.engines.dask import DaskBackend


def _listeners() -> list[tuple[str, int]]:
    me = psutil.Process()
    out = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:  # pragma: no cover - a child that just exited
            continue
        out += [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def _answers_http(ip: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{ip}:{port}/sitemap.json", timeout=3) as r:
            r.read()
        return True
    except urllib.error.HTTPError:
        return True  # an HTTP server answered, even if with an error page
    except OSError:  # a TLS listener resets a plain HTTP request
        return False


def test_no_http_listener_and_a_private_scratch_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    before = set(_listeners())
    with DaskBackend(workers=1, processes=True) as be:
        ours = [addr for addr in _listeners() if addr not in before]
        assert ours and all(ip == "127.0.0.1" for ip, _ in ours)
        assert [addr for addr in ours if _answers_http(*addr)] == []
        scratch = be.scratch
        assert scratch is not None and scratch.parent == (tmp_path / "cache" / "dask").resolve()
        assert stat.S_IMODE(scratch.stat().st_mode) == 0o700 and scratch.stat().st_uid == os.geteuid()
        dirs = be.client.run(lambda dask_worker: dask_worker.local_directory)
        assert dirs and all(Path(d).is_relative_to(scratch / "dask-scratch-space") for d in dirs.values())
    assert not scratch.exists()  # deleted with the cluster


def test_the_tcp_warning_is_printed_before_connecting(tmp_path):
    import dask

    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "the cat sat on the mat"}\n')
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = CliRunner().invoke(app, ["obfuscate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"),
                                       "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9", "-n", "3",
                                       "-e", "1"])
    assert res.exit_code != 0  # nothing listens there
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith("warning: --scheduler tcp://127.0.0.1:9 is not TLS"), res.stderr
