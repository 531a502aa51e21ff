"""The HTTP server of ``textdp serve``: uvicorn's h11 protocol with a deadline on the request headers.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but cancels that timer as
soon as any byte arrives and has no deadline for the request headers: a client that opens connections and
sends a few bytes of headers ("slowloris") keeps them open for ever. :class:`HeaderDeadlineProtocol` arms a
timer when a connection opens and again after each response, and closes the connection when the complete
request headers have not arrived within :data:`HEADER_TIMEOUT` seconds; the request body has its own
deadline (:data:`textdp.serve.app.BODY_TIMEOUT`). ``limit_concurrency`` answers 503 beyond
:data:`MAX_CONNECTIONS` open connections. Ctrl+C cancels the requests still open after :data:`SHUTDOWN_TIMEOUT`
seconds (each gets a one-line 503; its computation, on a daemon thread, is abandoned), so the server stops in
seconds even during an audit or while a client holds a request open.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "MAX_CONNECTIONS", "SHUTDOWN_TIMEOUT", "HeaderDeadlineProtocol", "make_server"]

#: Seconds a client has to send the complete request headers (from connecting, or from the last response).
HEADER_TIMEOUT = 10.0
#: Open connections beyond which a request gets 503 (uvicorn's ``limit_concurrency``).
MAX_CONNECTIONS = 64
#: Seconds Ctrl+C waits for requests still running before it cancels them (uvicorn's ``timeout_graceful_shutdown``;
#: without it the server waited for every open request: a minute for an audit on a loaded machine, 30 s for a
#: client that never finishes its body).
SHUTDOWN_TIMEOUT = 3


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers are not complete in time."""

    header_timeout: float = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expire)

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

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def make_server(app: Any, *, header_timeout: float = HEADER_TIMEOUT) -> uvicorn.Server:
    """A uvicorn server for ``app``: no access log, no server/date headers, the header deadline above, and
    requests still running :data:`SHUTDOWN_TIMEOUT` seconds after Ctrl+C cancelled.

    Run it with ``server.run(sockets=[sock])`` on a socket bound by the caller.
    """
    protocol = type("HeaderDeadline", (HeaderDeadlineProtocol,), {"header_timeout": float(header_timeout)})
    config = uvicorn.Config(app, http=protocol, access_log=False, log_level="warning", server_header=False,
                            date_header=False, lifespan="off", limit_concurrency=MAX_CONNECTIONS,
                            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT)
    return uvicorn.Server(config)

