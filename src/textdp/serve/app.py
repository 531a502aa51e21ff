"""The Starlette application behind ``textdp serve`` (needs the ``[serve]`` extra).

Routes: ``GET /`` (the page, with this server's token in a ``<meta>`` tag), ``GET /static/{app.js,style.css}``,
and the JSON API under ``/api/`` (``mechanisms``, ``privatize``, ``curve``, ``audit``).

Defences, because a server on loopback is reachable from every web page the user opens:

* **Host check** (DNS rebinding): a request whose ``Host`` is not a loopback name (or the host the server was
  explicitly bound to) gets 403.
* **Token** (cross-site requests): every ``/api/`` request must carry the random per-process token in the
  ``X-TextDP-Token`` header; another site can neither read the page (same-origin policy) nor send that header
  without a CORS preflight, which this server never grants. An ``Origin`` header, when present, must name an
  allowed host too; POST bodies must be ``application/json``.
* **Limits**: bodies over :data:`MAX_BODY_BYTES` get 413; every error is a one-line JSON ``{"error": ...}``,
  never a stack trace.
* **Nothing leaves the machine**: a strict Content-Security-Policy (``default-src 'none'``; scripts, styles and
  requests to this origin only), no external fonts or scripts, ``Cache-Control: no-store``, ``Referrer-Policy:
  no-referrer``. Nothing is stored or logged (the command runs uvicorn without an access log).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import TextDPError
from .core import Workbench

__all__ = ["CSP", "LOOPBACK_NAMES", "MAX_BODY_BYTES", "TOKEN_HEADER", "create_app"]

#: Largest request body accepted (bytes); the text itself is capped at ``core.MAX_TEXT_CHARS`` characters.
MAX_BODY_BYTES = 100_000
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


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=_HEADERS)


def _hostname(value: str) -> str:
    """The host name of a ``Host`` header value (``[::1]:8000`` -> ``::1``); empty when malformed."""
    try:
        return (urlsplit(f"//{value}").hostname or "").lower()
    except ValueError:
        return ""


class _Guard:
    """ASGI middleware: Host/Origin check, token check, body limit, security headers on refusals."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refuse(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refuse(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        if _hostname(headers.get("host", "")) not in self.hosts:
            return _error("refused: this server answers only requests addressed to it by its local name "
                          "(Host header not allowed; DNS rebinding protection)", 403)
        origin = headers.get("origin")
        if origin is not None and _hostname(urlsplit(origin).netloc) not in self.hosts:
            return _error("refused: cross-site request (Origin not allowed)", 403)
        path: str = scope.get("path", "")
        if path.startswith("/api/"):
            if not secrets.compare_digest(headers.get(TOKEN_HEADER, ""), self.token):
                return _error("refused: missing or wrong page token (reload the page)", 403)
            if scope.get("method") == "POST":
                if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                    return _error("refused: the body must be application/json", 415)
                length = headers.get("content-length")
                if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
                    return _error(f"the request is larger than {MAX_BODY_BYTES:,} bytes; send a shorter text", 413)
        return None


async def _body(request: Request) -> dict[str, object]:
    """The JSON object of the request (read up to :data:`MAX_BODY_BYTES`); :class:`_BadRequest` otherwise."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BadRequest(f"the request is larger than {MAX_BODY_BYTES:,} bytes; send a shorter text", 413)
        chunks.append(chunk)
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


def create_app(workbench: Workbench | None = None, *, token: str | None = None,
               extra_hosts: tuple[str, ...] = ()) -> Starlette:
    """The ``textdp serve`` application.

    Parameters
    ----------
    workbench : Workbench, optional
        The computations (default: GloVe 6B 50d, loaded on first use).
    token : str, optional
        The page token (default: 32 random bytes from the OS, new for each process).
    extra_hosts : tuple of str
        Host names accepted besides the loopback names (the address given to ``--host``).
    """
    wb = workbench if workbench is not None else Workbench()
    tok = token if token is not None else secrets.token_urlsafe(32)
    hosts = LOOPBACK_NAMES | frozenset(h.strip("[]").lower() for h in extra_hosts)

    async def page(request: Request) -> Response:
        html = _static("index.html").replace("{{TOKEN}}", tok)
        return Response(html, media_type="text/html; charset=utf-8", headers=_HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return _error("not found", 404)
        return Response(_static(name), media_type=_STATIC[name], headers=_HEADERS)

    async def call(fn: Callable[..., object], *args: object) -> JSONResponse:
        try:
            return JSONResponse(await run_in_threadpool(fn, *args), headers=_HEADERS)
        except TextDPError as exc:
            return _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 400)
        except MemoryError:
            return _error("out of memory: try a shorter text or a smaller bag size", 503)
        except Exception as exc:  # noqa: BLE001 - the page gets one line, never a stack trace
            return _error(f"internal error ({type(exc).__name__}); nothing was stored", 500)

    async def mechanisms(request: Request) -> JSONResponse:
        return await call(lambda: {"mechanisms": wb.mechanisms(), "limits": wb.limits()})

    def endpoint(fn: Callable[..., object], fields: tuple[str, ...],
                 required: tuple[str, ...]) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                data = await _body(request)
            except _BadRequest as exc:
                return _error(str(exc), exc.status)
            unknown = sorted(set(data) - set(fields))
            if unknown:
                return _error(f"unknown field {unknown[0]!r}; this endpoint takes {', '.join(fields)}", 400)
            missing = [f for f in required if f not in data]
            if missing:
                return _error(f"missing field {missing[0]!r}", 400)
            return await call(lambda: fn(**data))

        return handler

    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/mechanisms", mechanisms),
        Route("/api/privatize", endpoint(wb.privatize, ("text", "mechanism", "epsilon", "size"),
                                                    ("text", "mechanism", "epsilon")), methods=["POST"]),
        Route("/api/curve", endpoint(wb.curve, ("text", "mechanism", "target", "size"),
                                              ("text", "mechanism")), methods=["POST"]),
        Route("/api/audit", endpoint(wb.audit, ("mechanism", "epsilon"), ("mechanism", "epsilon")),
              methods=["POST"]),
    ]
    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        return _error({404: "not found", 405: "method not allowed"}.get(status, "bad request"), status)

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.add_middleware(_Guard, token=tok, hosts=hosts)
    app.state.token = tok
    app.state.workbench = wb
    return app
