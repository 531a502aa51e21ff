"""textdp serve: the HTTP API (Starlette test client) and the command (loopback default, refusals, no logs).

The browser test is tests/test_serve_browser.py (marked ``browser``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="textdp serve needs the [serve] extra (starlette)")
pytest.importorskip("httpx", reason="the Starlette test client needs httpx")
from starlette.testclient import TestClient

from textdp._validation import EPSILON_MAX
from textdp.mechanisms import MECHANISM_NAMES
from textdp.serve.app import CSP, MAX_BODY_BYTES, create_app
from textdp.serve.core import MAX_TEXT_CHARS, Workbench

TEXT = ("Dear Anna, the quarterly report for the Boston office is late again. Please send the revised budget "
        "figures to Michael before Friday, and remind the auditors about the pension fund review.")
BASE = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def app():
    return create_app(Workbench(), token="t0ken")


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def post(client, path, body, **headers):
    h = {"X-TextDP-Token": "t0ken", "Content-Type": "application/json", **headers}
    return client.post(path, content=json.dumps(body), headers=h)


def one_line_error(resp, status):
    assert resp.status_code == status, resp.text
    msg = resp.json()["error"]
    assert "\n" not in msg and "Traceback" not in msg and msg
    return msg


# -- the page ------------------------------------------------------------------------------------------------
def test_page_carries_token_csp_and_loads_nothing_from_elsewhere(client):
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["content-security-policy"] == CSP and "default-src 'none'" in CSP
    assert r.headers["cache-control"] == "no-store" and r.headers["referrer-policy"] == "no-referrer"
    assert '<meta name="textdp-token" content="t0ken">' in r.text
    assert "nothing you type is stored or logged" in r.text and "no text leaves this machine" in r.text
    # every resource is this origin's own (or a data: URL); no fonts, CDNs or analytics
    refs = re.findall(r'(?:src|href)="([^"]*)"', r.text)
    assert refs and all(u.startswith("/") or u.startswith("data:") for u in refs), refs
    for name in ("app.js", "style.css"):
        s = client.get(f"/static/{name}")
        assert s.status_code == 200 and s.headers["content-security-policy"] == CSP
        urls = set(re.findall(r"https?://[^\s\"')]+", s.text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, urls
        assert "@import" not in s.text and "url(" not in s.text.replace("data:", "")
    assert client.get("/static/../core.py").status_code == 404


def test_mechanism_list_is_the_registry(client):
    r = client.get("/api/mechanisms", headers={"X-TextDP-Token": "t0ken"})
    names = [m["name"] for m in r.json()["mechanisms"]]
    assert names == list(MECHANISM_NAMES)
    assert r.json()["limits"]["epsilon_max"] == EPSILON_MAX


# -- one release ----------------------------------------------------------------------------------------------
def test_release_shows_output_kept_fraction_and_the_guarantee_of_that_release(client):
    low = post(client, "/api/privatize", {"text": TEXT, "mechanism": "cmp", "epsilon": 0.5}).json()
    high = post(client, "/api/privatize", {"text": TEXT, "mechanism": "cmp", "epsilon": 1000}).json()
    assert high["kept_fraction"] == 1.0 and all(o["kept"] for o in high["output"])
    assert low["kept_fraction"] < 0.5
    assert high["kept"] == high["protected"] == len(high["output"]) == 18
    # the guarantee is the record's own sentence, for exactly this ε, with what it does not cover
    assert high["record"]["epsilon"] == 1000 and low["record"]["epsilon"] == 0.5
    assert "epsilon=1000" in high["guarantee"]["statement"] and "epsilon=0.5" in low["guarantee"]["statement"]
    assert high["guarantee"]["not_covered"] and "Not covered" not in high["guarantee"]["statement"]
    assert high["record"]["text"] == " ".join(o["word"] for o in high["output"])
    assert high["record"]["seeded"] is False
    # the input spans rebuild the text; stop words are marked as not released, kept words as kept
    assert "".join(s[0] for s in high["input"]) == TEXT
    classes = {s[0]: s[1] for s in high["input"] if s[1]}
    assert classes["the"] == "dropped" and classes["Boston"] == "kept"


def test_bag_release_marks_words_beyond_n(client):
    r = post(client, "/api/privatize", {"text": TEXT, "mechanism": "earth-movers", "epsilon": 1e6, "size": 5}).json()
    assert r["kind"] == "bag" and len(r["output"]) == 5 and r["kept_fraction"] == 1.0
    assert sorted(o["word"] for o in r["output"]) == sorted(["dear", "anna", "quarterly", "report", "boston"])
    classes = [s[1] for s in r["input"] if s[1] in ("kept", "replaced")]
    assert classes == ["kept"] * 5  # the first N protected words; the rest are shown as not released


def test_each_request_draws_fresh_entropy_and_no_seed_is_accepted(client):
    body = {"text": TEXT, "mechanism": "random", "epsilon": 0.01}
    a = post(client, "/api/privatize", body).json()["record"]["text"]
    b = post(client, "/api/privatize", body).json()["record"]["text"]
    assert a != b
    msg = one_line_error(post(client, "/api/privatize", {**body, "seed": 1}), 400)
    assert "unknown field 'seed'" in msg


# -- refusals: one clear line, never a stack trace -----------------------------------------------------------
@pytest.mark.parametrize("eps, needle", [(0, "> 0"), (1e-9, "outside the supported range"), (1e7, "outside the supported range"),
                                         (-1, "> 0"), ("abc", "must be a number"),
                                         (None, "must be a number"), (True, "must be a number")])
def test_epsilon_outside_the_supported_range_is_refused(client, eps, needle):
    msg = one_line_error(post(client, "/api/privatize", {"text": TEXT, "mechanism": "cmp", "epsilon": eps}), 400)
    assert needle in msg


def test_unknown_mechanism_missing_field_and_bad_json(client):
    msg = one_line_error(post(client, "/api/privatize", {"text": TEXT, "mechanism": "nope", "epsilon": 1}), 400)
    assert "unknown mechanism 'nope'" in msg and "earth-movers" in msg
    assert "missing field 'epsilon'" in one_line_error(post(client, "/api/privatize", {"text": TEXT,
                                                                                         "mechanism": "cmp"}), 400)
    bad = client.post("/api/privatize", content=b"{not json", headers={"X-TextDP-Token": "t0ken",
                                                                        "Content-Type": "application/json"})
    assert "not valid UTF-8 JSON" in one_line_error(bad, 400)
    assert "JSON object" in one_line_error(post(client, "/api/privatize", [1, 2]), 400)
    empty = post(client, "/api/privatize", {"text": "  ", "mechanism": "cmp", "epsilon": 1})
    assert "empty" in one_line_error(empty, 400)
    oov = post(client, "/api/privatize", {"text": "the of and 123", "mechanism": "cmp", "epsilon": 1})
    assert "no in-vocabulary word" in one_line_error(oov, 400)
    big = post(client, "/api/privatize", {"text": TEXT, "mechanism": "random", "epsilon": 1e6})
    assert "choose a smaller epsilon" in one_line_error(big, 400)  # an overflow, said in one line
    n = post(client, "/api/privatize", {"text": TEXT, "mechanism": "earth-movers", "epsilon": 1, "size": 10**6})
    assert "bag size N" in one_line_error(n, 400)


def test_size_limits(client):
    long_text = "word " * (MAX_TEXT_CHARS // 5 + 1)
    assert len(long_text.encode()) < MAX_BODY_BYTES
    msg = one_line_error(post(client, "/api/privatize", {"text": long_text, "mechanism": "cmp", "epsilon": 1}), 400)
    assert f"at most {MAX_TEXT_CHARS:,}" in msg
    huge = {"text": "x" * (MAX_BODY_BYTES + 10), "mechanism": "cmp", "epsilon": 1}
    assert "larger than" in one_line_error(post(client, "/api/privatize", huge), 413)


def test_body_limit_holds_without_content_length(app):
    """A chunked body (no Content-Length) is cut off while it is read."""
    with TestClient(app, base_url=BASE) as c:
        def chunks():
            for _ in range(MAX_BODY_BYTES // 1000 + 5):
                yield b" " * 1000

        r = c.post("/api/privatize", content=chunks(), headers={"X-TextDP-Token": "t0ken",
                                                               "Content-Type": "application/json"})
    assert "larger than" in one_line_error(r, 413)


@pytest.mark.parametrize("headers, status, needle", [
    ({"X-TextDP-Token": ""}, 403, "token"),
    ({"X-TextDP-Token": "wrong"}, 403, "token"),
    ({"Host": "evil.example:8765"}, 403, "Host"),             # DNS rebinding: the name resolves to 127.0.0.1
    ({"Origin": "http://evil.example"}, 403, "cross-site"),
    ({"Content-Type": "text/plain"}, 415, "application/json"),  # a plain form post cannot reach the API
])
def test_cross_site_requests_are_refused(client, headers, status, needle):
    r = post(client, "/api/privatize", {"text": TEXT, "mechanism": "cmp", "epsilon": 1}, **headers)
    assert needle in one_line_error(r, status)


def test_host_check_covers_the_page_too(client):
    assert client.get("/", headers={"Host": "attacker.test"}).status_code == 403
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200
    assert client.get("/", headers={"Host": "[::1]:8765"}).status_code == 200
    assert client.get("/api/mechanisms").status_code == 403  # no token


# -- the curve and the audit -------------------------------------------------------------------------------------
def test_curve_from_calibration_and_the_epsilon_for_a_target(client):
    c = post(client, "/api/curve", {"text": TEXT, "mechanism": "earth-movers", "target": 0.5, "size": 10}).json()
    fr = [p[1] for p in c["points"]]
    assert fr == sorted(fr) and fr[0] == 0.0 and fr[-1] == 1.0  # exact survival curve: monotone in ε
    assert 3 < c["epsilon_for_target"] < 30 and "survival curve" in c["method"]
    r = post(client, "/api/curve", {"text": TEXT, "mechanism": "random", "target": 0.5}).json()
    assert r["points"][0][1] < 0.2 and r["points"][-1][1] > 0.9 and r["epsilon_for_target"] > 1
    bad = post(client, "/api/curve", {"text": TEXT, "mechanism": "random", "target": 1.5})
    assert "(0, 1)" in one_line_error(bad, 400)


def test_audit_button_runs_the_registered_case(client):
    a = post(client, "/api/audit", {"mechanism": "random", "epsilon": 2.0}).json()
    assert a["mechanism"] == "random" and a["claimed_epsilon"] == 2.0 and a["passed"] is True
    assert 0 <= a["lower_bound"] <= a["claimed_epsilon"] and a["samples"] == 20_000 and a["seeded"] is False
    msg = one_line_error(post(client, "/api/audit", {"mechanism": "random", "epsilon": 500}), 400)
    assert "the audit runs for epsilon in" in msg


# -- the command ---------------------------------------------------------------------------------------------
def test_non_loopback_host_is_refused_without_the_flag():
    from typer.testing import CliRunner

    from textdp.cli import app as cli

    r = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0"])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "error: refusing to listen on 0.0.0.0" in lines[0] and "--allow-remote" in lines[0]


def test_allow_remote_warns_before_listening():
    """With --allow-remote a non-loopback host is accepted with a warning (here it cannot be resolved, so nothing
    listens: the run ends with one error line)."""
    from typer.testing import CliRunner

    from textdp.cli import app as cli

    r = CliRunner().invoke(cli, ["serve", "--host", "no-such-host.invalid", "--allow-remote", "--port", "0"])
    assert r.exit_code == 2
    out = " ".join(r.output.split())
    assert "warning: listening on no-such-host.invalid: anyone who can reach this address" in out
    assert out.count("error:") == 1 and "error: cannot listen on no-such-host.invalid" in out


def test_port_in_use_is_one_line():
    import socket

    from typer.testing import CliRunner

    from textdp.cli import app as cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and f"error: cannot listen on 127.0.0.1:{port}" in lines[0] and "--port 0" in lines[0]


def test_missing_extra_is_one_line(monkeypatch):
    from typer.testing import CliRunner

    from textdp.cli import app as cli

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    r = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "uvicorn" in lines[0] and "serve" in lines[0]


def _get(url, token=None, body=None):
    headers = {"X-TextDP-Token": token} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=60) as resp:
        return resp.read().decode()


def test_serve_listens_on_loopback_with_a_random_port_and_logs_nothing(tmp_path: Path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with (tmp_path / "stderr").open("w+") as err:
        logs = _run_server(err, env)
    assert "zanzibarian" not in logs and "POST" not in logs and "GET /" not in logs, logs


def _run_server(err, env):
    """Start ``textdp serve --port 0``, use it once, stop it with SIGINT; what it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "textdp", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=err, text=True, env=env)
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(r"textdp serve: (http://127\.0\.0\.1:(\d+)/)\n", line)
        assert m, line
        url = m.group(1)
        html = _get(url)
        token = re.search(r'name="textdp-token" content="([^"]+)"', html).group(1)
        marker = "zanzibarian"
        out = json.loads(_get(url + "api/privatize", token, {"text": f"{marker} report from Boston",
                                                               "mechanism": "tem", "epsilon": 1}))
        assert out["protected"] >= 2
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
    rest = proc.stdout.read()
    proc.stdout.close()
    err.seek(0)
    return err.read() + rest
