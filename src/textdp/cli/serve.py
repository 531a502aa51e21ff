"""``textdp serve``: the local page that shows what ε does to your own text (the ``[serve]`` extra)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ParameterError
from ._common import cli_errors, print_info, print_warning

SERVE_HELP = (
    "Start a local page that shows what epsilon does to your own text.\n\n"
    "Paste or drop a text, choose a mechanism and epsilon: the page shows the private output beside the input "
    "with the surviving words highlighted, the kept fraction, the guarantee of exactly that release (and what "
    "it does not cover), kept fraction against epsilon for this text, and the mechanism's audit. Nothing is "
    "stored or logged, and the page loads nothing from elsewhere. The server listens on 127.0.0.1 only; another "
    "address needs --allow-remote. Open the printed address as it is: the part after # is the page token that lets "
    "this page (and nobody else) use the server. Ctrl+C stops it.\n\n"
    "Examples: `textdp serve`; `textdp serve --port 0` (a free port; the URL is printed)."
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free port chosen by the OS)."""
    try:
        info = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ParameterError(f"cannot listen on {host} ({exc.strerror or exc}); give an address of this machine "
                             "as --host") from None
    family, _, _, _, address = info[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ParameterError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port, "
                             "or --port 0 for a free one") from None
    sock.listen(64)
    return sock


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback only unless --allow-remote).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; 0 picks a free port (the URL is printed).",
                                      min=0, max=65535)] = 8765,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow a --host that is not loopback: "
                                               "anyone who can reach it can then use the page.")] = False,
    embeddings: Annotated[Path | None, typer.Option(help="Embeddings file (default: GloVe 6B 50d).",
                                                    show_default=False)] = None,
    model: Annotated[Path | None, typer.Option(help="A model folder from `textdp train-rewriter`: the page then "
                                               "offers sentence rewriting too (er-ae or ae-dp, as the model was "
                                               "trained, syntf-sentence, random-sentence; needs [generation]).",
                                               show_default=False)] = None,
) -> None:
    """Start the local page (one command; Ctrl+C stops it)."""
    with cli_errors():
        from ..errors import require

        require("starlette", "serve")
        require("uvicorn", "serve")
        from ..serve.app import create_app, page_url
        from ..serve.core import Workbench
        from ..serve.server import make_server

        extra: tuple[str, ...] = ()
        if not is_loopback(host):
            if not allow_remote:
                raise ParameterError(f"refusing to listen on {host}: the page shows private text; it listens on "
                                     "127.0.0.1 only unless you pass --allow-remote")
            print_warning(f"listening on {host}: anyone who can reach this address can load the empty page; using "
                          "it needs the page token after # in the printed address, which every request carries in plain "
                          "HTTP: anyone who can watch the network between browser and server can read the page token "
                          "and every text")
            extra = (host,) if host not in ("0.0.0.0", "::") else (socket.gethostname(), socket.getfqdn())
        rewriter = None
        if model is not None:
            from ..generation.folders import check_model_folder
            from ..generation.rewriter import load_rewriter

            rewriter = load_rewriter(str(check_model_folder(model)))  # links may not leave the folder
        sock = _bind(host, port)
        bound = sock.getsockname()[1]
        app = create_app(Workbench(embeddings, rewriter=rewriter), extra_hosts=extra)
        shown = socket.gethostname() if host in ("0.0.0.0", "::") else host  # a name the Host check accepts
        typer.echo(f"textdp serve: {page_url(shown, bound, app.state.token)}", err=False)
        print_info("open this address as it is: the part after # is the page token (keep it to yourself). "
                   "Nothing you type is stored or logged; no text leaves this machine. Ctrl+C stops the server.")
        server = make_server(app)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover - uvicorn handles SIGINT itself
        pass
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""
    app.command("serve", help=SERVE_HELP)(serve)
