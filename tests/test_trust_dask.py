"""Issue 19, item 2: the Dask engine listens on loopback only and refuses clients without the run's credentials.

Workers hold the texts and the generator keys, and any client of a scheduler can
run code in them (``Client(address).run(...)``). b4f2b11 started its local cluster
with a dashboard on every interface and a plain-TCP scheduler anyone could join.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import warnings
from pathlib import Path

import numpy as np
import psutil
import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")

from textdp.embeddings import Embeddings
from textdp.engines.corpus import obfuscate_corpus
from textdp.engines.dask import DaskBackend
from textdp.errors import PrivacyWarning

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    rng = np.random.default_rng(5)
    return Embeddings(WORDS, rng.standard_normal((300, 8)).astype(np.float32), name="toy")


def _corpus(path: Path, n: int) -> Path:
    rng = np.random.default_rng(1)
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(WORDS[j] for j in rng.integers(0, 300, 12))})
                            + "\n" for i in range(n)))
    return path


def _listeners() -> list[tuple[int, str, int]]:
    """(pid, address, port) of every listening socket of this process and its children (the workers)."""
    me = psutil.Process()
    out = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:  # pragma: no cover - a child that just exited
            continue
        out += [(proc.pid, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def _cannot_run_code(address: str) -> bool:
    """True if a client without the run's credentials fails to connect (so cannot run code in a worker)."""
    try:
        client = distributed.Client(address, timeout="3s")
    except (OSError, TypeError, ValueError):
        return True
    try:
        client.run(os.getpid)  # this is what an attacker would do: it must never be reached
        return False
    finally:
        client.close()


def test_local_cluster_listens_on_loopback_and_refuses_strangers(tmp_path, toy_emb):
    inp = _corpus(tmp_path / "c.jsonl", 40)
    seen: list[list[tuple[int, str, int]]] = []
    with DaskBackend(workers=1, processes=True) as be:
        address = be.client.scheduler.address

        def during_the_run(done: int, total: int) -> None:
            seen.append(_listeners())

        obfuscate_corpus([inp], tmp_path / "out", embeddings=toy_emb, epsilon=5.0, size=6, bag="truncate",
                         stop_words=None, decoder="exact", seed=3, backend=be, partitions=2,
                         work_dir=tmp_path / "w", progress=during_the_run)
        ports = {p for snapshot in seen for p in snapshot}
        assert len(seen) >= 2 and ports, "no listener seen during the run"
        outside = {(pid, ip, port) for pid, ip, port in ports if not ipaddress.ip_address(ip).is_loopback}
        assert not outside, f"listening outside loopback during the run: {sorted(outside)}"
        # without the run's certificates: plain TCP fails, and TLS fails
        assert _cannot_run_code(address.replace("tls://", "tcp://"))
        assert _cannot_run_code(address)
        assert address.startswith("tls://127.0.0.1:")
        assert be.client.run(lambda: 1)  # the run's own client, with its credentials, works
        assert be.dashboard_link is None
    assert len(list((tmp_path / "out").glob("part-*.jsonl"))) == 2


def test_dashboard_only_when_asked_and_on_loopback():
    with DaskBackend(workers=1, processes=False, dashboard=True) as be:
        link = be.dashboard_link
        assert link is not None and link.startswith("http://127.0.0.1:"), link
        assert all(ipaddress.ip_address(ip).is_loopback for _, ip, _ in _listeners())


def test_plain_tcp_scheduler_warns_and_tls_scheduler_uses_the_users_security(tmp_path):
    import dask
    from distributed.security import Security

    # the scheduler's HTTP server on a free loopback port: another test worker's cluster may hold 8787
    free = {"dashboard_address": "127.0.0.1:0"}
    with distributed.LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None, scheduler_kwargs=free) as plain:
        with pytest.warns(PrivacyWarning, match="run code in its workers"):
            be = DaskBackend(scheduler=plain.scheduler_address)
        be.close()
    sec = Security.temporary()  # stands for the cluster's own certificates
    pem = {}
    for name, text in (("ca", sec.tls_ca_file), ("cert", sec.tls_client_cert), ("key", sec.tls_client_key)):
        pem[name] = tmp_path / f"{name}.pem"
        pem[name].write_text(text)
    with distributed.LocalCluster(n_workers=1, processes=False, protocol="tls://", host="127.0.0.1",
                                  security=sec, dashboard_address=None, scheduler_kwargs=free) as tls:
        assert _cannot_run_code(tls.scheduler_address)
        # the user's certificates, named in the Dask configuration (as DASK_DISTRIBUTED__COMM__TLS__* would)
        user_config = {"distributed.comm.tls.ca-file": str(pem["ca"]),
                       "distributed.comm.tls.client.cert": str(pem["cert"]),
                       "distributed.comm.tls.client.key": str(pem["key"])}
        with warnings.catch_warnings(), dask.config.set(user_config):
            warnings.simplefilter("error", PrivacyWarning)
            with DaskBackend(scheduler=tls.scheduler_address) as be:
                assert list(be.client.run(lambda: 7).values()) == [7]


def test_cli_dashboard_needs_the_local_dask_cluster(tmp_path):
    from typer.testing import CliRunner

    from textdp.cli import app

    doc = tmp_path / "a.jsonl"
    doc.write_text(json.dumps({"text": "aaq abq"}) + "\n")
    np.save(tmp_path / "v.npy", np.eye(3, dtype=np.float32))
    (tmp_path / "w.txt").write_text("aaq\nabq\nacq\n")
    base = ["obfuscate", str(doc), "-e", "5", "-n", "2", "-o", str(tmp_path / "o"), "--embeddings",
            str(tmp_path / "v.npy"), "--words", str(tmp_path / "w.txt")]
    for extra, needle in ((["--engine", "local", "--dashboard"], "--dashboard needs the dask engine"),
                          (["--engine", "single", "--dashboard"], "--dashboard"),
                          (["--engine", "dask", "--scheduler", "tls://127.0.0.1:1", "--dashboard"],
                           "a remote cluster serves its own")):
        res = CliRunner().invoke(app, [*base, *extra])
        assert res.exit_code == 2 and needle in res.stderr, (extra, res.output)
        assert not (tmp_path / "o").exists()


def test_a_taken_port_8787_changes_nothing():
    """Dask's scheduler binds an HTTP server even without a dashboard, by default on port 8787: a second run on
    the Dask engine at the same time (or another test worker's) found it taken and warned (an error in the suite).
    Held here for the whole start: the local cluster takes a free loopback port and says nothing."""
    import socket

    held = socket.socket()
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # already taken by something else: as good
            held.bind(("127.0.0.1", 8787))
            held.listen()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with DaskBackend(workers=1, processes=False) as be:
                assert be.client.run(lambda: 1)
    finally:
        held.close()
