"""The Starlette application behind ``textdp serve`` (needs the ``[serve]`` extra).

Routes: ``GET /`` (the page: it holds no secret), ``GET /static/{app.js,style.css}``, and the JSON API under
``/api/`` (``mechanisms``, ``privatize``, ``curve``, ``audit``).

Defences, because a server on loopback is reachable from every web page the user opens and from every user
of the machine:

* **Token** (who may use the API): every ``/api/`` request must carry the random per-process token in the
  ``X-TextDP-Token`` header. The token is never served: the command prints it once, in the fragment of the
  URL it shows (``http://127.0.0.1:PORT/#token=...``); a browser never sends a fragment to the server, and
  the page moves it into the tab's ``sessionStorage`` and removes it from the address bar. So only whoever
  can read the starting terminal can use the API; another user of the machine (or, with
  ``--allow-remote``, of the network) gets the empty page and a 403 from the API.
* **Cross-site requests**: another site can neither read the page (same-origin policy) nor send the token
  header without a CORS preflight, which this server never grants; an ``Origin`` header, when present, must
  be exactly this server's origin (scheme ``http``, an allowed host and this server's port); POST bodies must
  be ``application/json``.
* **Host check** (DNS rebinding): the ``Host`` header must be ``NAME`` or ``NAME:PORT`` with an allowed name
  (a loopback name or the address given to ``--host``) and this server's port; userinfo
  (``evil@127.0.0.1``), other ports and malformed values get 403.
* **Limits**: bodies over :data:`MAX_BODY_BYTES` get 413, a body not received within
  :data:`BODY_TIMEOUT` seconds 408 (the request headers have their own deadline,
  :mod:`textdp.serve.server`); every error is a one-line JSON ``{"error": ...}``, never a stack trace.
* **Nothing leaves the machine**: a strict Content-Security-Policy (``default-src 'none'``; scripts, styles and
  requests to this origin only), no external fonts or scripts, ``Cache-Control: no-store``, ``Referrer-Policy:
  no-referrer``. Nothing is stored or logged (the command runs uvicorn without an access log).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import threading
from collections.abc import Awaitable, Callable
from importlib import resources

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import TextDPError
from .core import Workbench

__all__ = ["BODY_TIMEOUT", "CSP", "LOOPBACK_NAMES", "MAX_BODY_BYTES", "TOKEN_HEADER", "create_app", "on_daemon_thread",
           "page_url", "parse_host"]

#: Largest request body accepted (bytes); the text itself is capped at ``core.MAX_TEXT_CHARS`` characters.
MAX_BODY_BYTES = 100_000
#: Seconds a client has to send the whole request body once its headers are in (then 408).
BODY_TIMEOUT = 30.0
#: Header carrying the per-process token.
TOKEN_HEADER = "x-textdp-token"
#: Host names always accepted in the ``Host`` header.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
#: Content-Security-Policy of every response: nothing but this origin, no inline script, no frames.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
# NAME or NAME:PORT, NAME a DNS name / IPv4 address or a bracketed IPv6 address; nothing else (no userinfo)
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9.])?))"
                   r"(?::(?P<port>[0-9]{1,5}))?", re.ASCII)
_ORIGIN = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>[^/?#@]*)", re.ASCII | re.IGNORECASE)


#: The answer to a request that Ctrl+C cancelled (:data:`textdp.serve.server.SHUTDOWN_TIMEOUT`).
_STOPPED = "the textdp server was stopped (Ctrl+C) before this answer was ready; start it again"


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


async def on_daemon_thread(fn: Callable[..., object], *args: object) -> object:
    """``fn(*args)`` on a new daemon thread, awaited without holding up the event loop.

    Starlette's ``run_in_threadpool`` (anyio's worker threads) makes a cancelled request wait for its
    computation, and the interpreter joins those threads at exit: a Ctrl+C during an audit or a curve waited
    for it to finish (a minute on a loaded machine). Here a cancelled request stops waiting at once (the
    server cancels what is still running :data:`textdp.serve.server.SHUTDOWN_TIMEOUT` seconds after Ctrl+C),
    and the abandoned computation, which stores nothing, cannot keep the process alive.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[object] = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:
        if done.done():  # the request was cancelled meanwhile
            return
        if error is None:
            done.set_result(result)
        else:
            done.set_exception(error)

    def work() -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting request, which answers it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped, nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="textdp-serve-request", daemon=True).start()
    return await done


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=_HEADERS)


def parse_host(value: str, default_port: int = 80) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` header value, or ``None`` when it is not exactly ``NAME[:PORT]``.

    The name is lower-cased (brackets of an IPv6 address removed); a missing port is ``default_port``.
    Userinfo, paths, spaces and non-ASCII characters make the value malformed.

    >>> parse_host("[::1]:8765"), parse_host("LocalHost"), parse_host("127.0.0.1:99999")
    (('::1', 8765), ('localhost', 80), None)
    >>> parse_host("evil@127.0.0.1:8765") is None, parse_host("127.0.0.1:8765/x") is None
    (True, True)
    """
    m = _HOST.fullmatch(value)
    if m is None:
        return None
    port = int(m["port"]) if m["port"] is not None else default_port
    if not 0 < port < 65536:
        return None
    return (m["v6"] or m["name"]).lower(), port


class _Guard:
    """ASGI middleware: Host/Origin check, token check, body limit, security headers on refusals."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str]) -> None:
        self.app = app
        self.token = token.encode("ascii")
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refuse(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, value: str, port: int | None) -> bool:
        """Whether a ``Host`` (or an ``Origin``'s host) names this server: an allowed name and its port."""
        parsed = parse_host(value)
        return parsed is not None and parsed[0] in self.hosts and (port is None or parsed[1] == port)

    def _refuse(self, scope: Scope) -> Response | None:
        raw: dict[bytes, bytes] = {}
        for k, v in scope["headers"]:
            raw.setdefault(k.lower(), v)
        server = scope.get("server")
        port = int(server[1]) if server and server[1] is not None else None
        if not self._allowed(raw.get(b"host", b"").decode("latin-1"), port):
            return _error("refused: this server answers only requests addressed to it by its local name and port "
                          "(Host header not allowed; DNS rebinding protection)", 403)
        origin = raw.get(b"origin")
        if origin is not None:
            m = _ORIGIN.fullmatch(origin.decode("latin-1"))
            if m is None or m["scheme"].lower() != "http" or not self._allowed(m["host"], port):
                return _error("refused: cross-site request (Origin not allowed)", 403)
        path: str = scope.get("path", "")
        if path.startswith("/api/"):
            if not secrets.compare_digest(raw.get(TOKEN_HEADER.encode(), b""), self.token):
                return _error("refused: missing or wrong page token (open the address that textdp serve printed, "
                              "the part after # included)", 403)
            if scope.get("method") == "POST":
                ctype = raw.get(b"content-type", b"").decode("latin-1")
                if ctype.split(";")[0].strip().lower() != "application/json":
                    return _error("refused: the body must be application/json", 415)
                length = raw.get(b"content-length")
                if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
                    return _error(f"the request is larger than {MAX_BODY_BYTES:,} bytes; send a shorter text", 413)
        return None


async def _body(request: Request) -> dict[str, object]:
    """The JSON object of the request (up to :data:`MAX_BODY_BYTES`, within :data:`BODY_TIMEOUT`); else :class:`_BadRequest`."""
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(BODY_TIMEOUT):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _BadRequest(f"the request is larger than {MAX_BODY_BYTES:,} bytes; send a shorter text",
                                      413)
                chunks.append(chunk)
    except TimeoutError:
        raise _BadRequest(f"the request body did not arrive within {BODY_TIMEOUT:g} s", 408) from None
    except ClientDisconnect:
        raise _BadRequest("the client went away", 400) from None
    try:
        data = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _BadRequest("the body is not valid UTF-8 JSON", 400) from None
    if not isinstance(data, dict):
        raise _BadRequest("the body must be a JSON object", 400)
    return data


class _BadRequest(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def page_url(host: str, port: int, token: str) -> str:
    """The address to open: the token rides in the fragment, which a browser never sends to a server.

    >>> page_url("::1", 8765, "abc")
    'http://[::1]:8765/#token=abc'
    """
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/#token={token}"


async def _page(request: Request) -> Response:
    """``GET /``: the page."""
    return Response(_static("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


async def _static_route(request: Request) -> Response:
    """``GET /static/{name}``: one of the page's files."""
    name = request.path_params["name"]
    if name not in _STATIC:
        return _error("not found", 404)
    return Response(_static(name), media_type=_STATIC[name], headers=_HEADERS)


async def _call(fn: Callable[..., object], *args: object) -> JSONResponse:
    """``fn(*args)`` on a daemon thread as JSON; an error as one line (never a stack trace)."""
    try:
        return JSONResponse(await on_daemon_thread(fn, *args), headers=_HEADERS)
    except TextDPError as exc:
        return _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 400)
    except MemoryError:
        return _error("out of memory: try a shorter text or a smaller bag size", 503)
    except asyncio.CancelledError:  # Ctrl+C: the server stops without waiting for this computation
        return _error(_STOPPED, 503)
    except Exception as exc:  # noqa: BLE001 - the page gets one line, never a stack trace
        return _error(f"internal error ({type(exc).__name__}); nothing was stored", 500)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's HTTP errors as the API's one-line errors."""
    status = getattr(exc, "status_code", 500)
    return _error({404: "not found", 405: "method not allowed"}.get(status, "bad request"), status)


def create_app(workbench: Workbench | None = None, *, token: str | None = None,
               extra_hosts: tuple[str, ...] = ()) -> Starlette:
    """The ``textdp serve`` application.

    Parameters
    ----------
    workbench : Workbench, optional
        The computations (default: GloVe 6B 50d, loaded on first use).
    token : str, optional
        The API token, ASCII (default: 32 random bytes from the OS, new for each process). It is never served:
        give it to the user in the fragment of the URL (:func:`page_url`).
    extra_hosts : tuple of str
        Host names accepted besides the loopback names (the address given to ``--host``).
    """
    wb = workbench if workbench is not None else Workbench()
    tok = token if token is not None else secrets.token_urlsafe(32)
    hosts = LOOPBACK_NAMES | frozenset(h.strip("[]").lower() for h in extra_hosts)

    async def mechanisms(request: Request) -> JSONResponse:
        return await _call(lambda: {"mechanisms": wb.mechanisms(), "limits": wb.limits()})

    def endpoint(fn: Callable[..., object], fields: tuple[str, ...],
                 required: tuple[str, ...]) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                data = await _body(request)
            except _BadRequest as exc:
                return _error(str(exc), exc.status)
            except asyncio.CancelledError:  # Ctrl+C while the body was still arriving
                return _error(_STOPPED, 503)
            unknown = sorted(set(data) - set(fields))
            if unknown:
                return _error(f"unknown field {unknown[0]!r}; this endpoint takes {', '.join(fields)}", 400)
            missing = [f for f in required if f not in data]
            if missing:
                return _error(f"missing field {missing[0]!r}", 400)
            return await _call(lambda: fn(**data))

        return handler

    routes = [
        Route("/", _page),
        Route("/static/{name}", _static_route),
        Route("/api/mechanisms", mechanisms),
        Route("/api/privatize", endpoint(wb.privatize, ("text", "mechanism", "epsilon", "size", "clip", "delta",
                                                        "prior", "public_top_k"),
                                         ("text", "mechanism", "epsilon")), methods=["POST"]),
        Route("/api/curve", endpoint(wb.curve, ("text", "mechanism", "target", "size"),
                                              ("text", "mechanism")), methods=["POST"]),
        Route("/api/audit", endpoint(wb.audit, ("mechanism", "epsilon"), ("mechanism", "epsilon")),
              methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.add_middleware(_Guard, token=tok, hosts=hosts)
    app.state.token = tok
    app.state.hosts = hosts
    app.state.workbench = wb
    return app
