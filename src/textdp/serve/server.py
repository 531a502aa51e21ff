"""The HTTP server of ``textdp serve``: uvicorn's h11 protocol with a deadline on the request headers.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but cancels that timer as
soon as any byte arrives and has no deadline for the request headers: a client that opens connections and
sends a few bytes of headers ("slowloris") keeps them open for ever. :class:`HeaderDeadlineProtocol` arms a
timer when a connection opens and again after each response, and closes the connection when the complete
request headers have not arrived within :data:`HEADER_TIMEOUT` seconds; the request body has its own
deadline (:data:`textdp.serve.app.BODY_TIMEOUT`).

Nobody without the token can lock its holder out (issue 39 §4: 66 half-open connections renewed every 8 s
got the owner 503 for ever). A connection is *trusted* once one of its requests carried the page token;
until then it has :data:`UNTRUSTED_HEADER_TIMEOUT` seconds for its headers, and at most
:data:`UNTRUSTED_WAITING` untrusted connections may wait for headers at once: a new connection beyond that
closes the oldest waiting one (the token holder's browser sends its headers as soon as it connects, so its
connection is the newest, never the oldest). Requests in progress are limited per kind
(:class:`RequestLimit`): :data:`MAX_CONNECTIONS` with the token, :data:`UNTRUSTED_REQUESTS` without (then
503). Every error the server itself writes (400 for a malformed request, 503) is one line of JSON
``{"error": ...}``, like the application's. Ctrl+C cancels the requests still open after :data:`SHUTDOWN_TIMEOUT`
seconds (each gets a one-line 503; its computation, on a daemon thread, is abandoned), so the server stops in
seconds even during an audit or while a client holds a request open.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import uvicorn
from uvicorn.protocols.http import h11_impl
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

h11 = h11_impl.h11  # the h11 that uvicorn's protocol speaks (not a dependency of textdp's own)

__all__ = ["HEADER_TIMEOUT", "MAX_CONNECTIONS", "SHUTDOWN_TIMEOUT", "UNTRUSTED_HEADER_TIMEOUT", "UNTRUSTED_REQUESTS",
           "UNTRUSTED_WAITING", "HeaderDeadlineProtocol", "RequestLimit", "make_server"]

#: Seconds a client has to send the complete request headers (from connecting, or from the last response).
HEADER_TIMEOUT = 10.0
#: Requests with the page token in progress at once, beyond which one gets 503.
MAX_CONNECTIONS = 64
#: Seconds a connection that has not yet shown the token has for its request headers.
UNTRUSTED_HEADER_TIMEOUT = 2.0
#: Connections without the token that may wait for their headers at once (a new one closes the oldest).
UNTRUSTED_WAITING = 8
#: Requests without the token (the page, its scripts, refusals) in progress at once, beyond which one gets 503.
UNTRUSTED_REQUESTS = 16
_TOKEN_HEADER = b"x-textdp-token"
#: Seconds Ctrl+C waits for requests still running before it cancels them (uvicorn's ``timeout_graceful_shutdown``;
#: without it the server waited for every open request: a minute for an audit on a loaded machine, 30 s for a
#: client that never finishes its body).
SHUTDOWN_TIMEOUT = 3


def _json_line(message: str) -> bytes:
    return json.dumps({"error": message}).encode("ascii")


def has_token(headers: Iterable[tuple[bytes, bytes]], token: bytes | None) -> bool:
    """Whether the request headers (``(name, value)`` byte pairs, names lower-case) carry ``token`` (constant time)."""
    if not token:
        return False
    for name, value in headers:
        if name == _TOKEN_HEADER:
            return hmac.compare_digest(bytes(value), token)
    return False


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol: a deadline on the request headers, short and few for connections without the token."""

    header_timeout: float = HEADER_TIMEOUT
    untrusted_header_timeout: float = UNTRUSTED_HEADER_TIMEOUT
    untrusted_waiting: int = UNTRUSTED_WAITING
    token: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._trusted = False
        self._waiting_since = 0.0
        self._arm()
        self._evict()

    def _evict(self) -> None:
        """Close the oldest untrusted connections waiting for headers beyond :attr:`untrusted_waiting`."""
        waiting = [c for c in self.connections if isinstance(c, HeaderDeadlineProtocol) and not c._trusted
                   and c._deadline is not None and not c.transport.is_closing()]
        if len(waiting) <= self.untrusted_waiting:
            return
        waiting.sort(key=lambda c: c._waiting_since)
        for c in waiting[:len(waiting) - self.untrusted_waiting]:
            c._expire()

    def _arm(self) -> None:
        self._disarm()
        self._waiting_since = time.monotonic()
        wait = self.header_timeout if self._trusted else min(self.header_timeout, self.untrusted_header_timeout)
        self._deadline = self.loop.call_later(wait, self._expire)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            assert self._deadline is not None
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers were parsed: the deadline is met
            self._disarm()
            if not self._trusted and has_token(self.headers, self.token):
                self._trusted = True

    def send_400_response(self, msg: str) -> None:
        """A malformed request: one line of JSON (uvicorn's own answer is plain text), then the connection closes."""
        body = _json_line("invalid HTTP request; this server speaks HTTP/1.1")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        try:
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"), h11.Data(data=body),
                          h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # a response was already under way: nothing more can be said
            pass
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class RequestLimit:
    """ASGI middleware: at most ``trusted`` requests with the token and ``untrusted`` without in progress (else 503).

    Requests without the token (anyone on the machine) can never take the token holder's share.
    """

    def __init__(self, app: ASGIApp, *, token: bytes | None, trusted: int = MAX_CONNECTIONS,
                 untrusted: int = UNTRUSTED_REQUESTS) -> None:
        self.app, self.token = app, token
        self.limits = {True: trusted, False: untrusted}
        self.running = {True: 0, False: 0}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        kind = has_token(scope.get("headers", ()), self.token)
        if self.running[kind] >= self.limits[kind]:
            body = _json_line("the server is busy; try again in a moment")
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        self.running[kind] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running[kind] -= 1


def make_server(app: ASGIApp, *, header_timeout: float = HEADER_TIMEOUT,
                untrusted_header_timeout: float = UNTRUSTED_HEADER_TIMEOUT,
                untrusted_waiting: int = UNTRUSTED_WAITING) -> uvicorn.Server:
    """A uvicorn server for ``app``: no access log, no server/date headers, the header deadlines above (short and
    few for connections that have not shown the token of ``app.state.token``), requests limited per kind
    (:class:`RequestLimit`), and requests still running :data:`SHUTDOWN_TIMEOUT` seconds after Ctrl+C cancelled.

    Run it with ``server.run(sockets=[sock])`` on a socket bound by the caller.
    """
    tok = getattr(getattr(app, "state", None), "token", None)
    token = tok.encode("ascii") if isinstance(tok, str) else None
    protocol = type("HeaderDeadline", (HeaderDeadlineProtocol,), {
        "header_timeout": float(header_timeout), "untrusted_header_timeout": float(untrusted_header_timeout),
        "untrusted_waiting": int(untrusted_waiting), "token": token})
    config = uvicorn.Config(RequestLimit(app, token=token), http=protocol, access_log=False, log_level="warning",
                            server_header=False, date_header=False, lifespan="off", limit_concurrency=None,
                            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT)
    return uvicorn.Server(config)

