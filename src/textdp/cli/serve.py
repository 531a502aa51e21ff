"""``textdp serve``: the local page that shows what ε does to your own text (the ``[serve]`` extra)."""

from __future__ import annotations

import ipaddress
import math
import socket
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ParameterError
from ._common import Interrupted, cli_errors, print_info, print_warning

SERVE_HELP = (
    "Start a local page that shows what epsilon does to your own text.\n\n"
    "Paste or drop a text, choose a mechanism and epsilon: the page shows the private output beside the input "
    "with the surviving words highlighted, the kept fraction, the guarantee of exactly that release (and what "
    "it does not cover), kept fraction against epsilon for this text, and the mechanism's audit. Nothing is "
    "stored or logged, and the page loads nothing from elsewhere. The server listens on 127.0.0.1 only; another "
    "address needs --allow-remote. Open the printed address as it is: the part after # is the page token that lets "
    "this page (and nobody else) use the server. Ctrl+C stops it.\n\n"
    "With --model DIR the page rewrites sentences too: a model folder from `textdp train-rewriter` (er-ae or ae-dp, "
    "syntf-sentence, random-sentence), or a language model as `textdp rewrite` takes it (dp-prompt on a causal "
    "model; dp-paraphrase and dp-bart on a sequence-to-sequence one; dp-mlm on a masked one), with public clipping "
    "bounds that the page shows and lets you change (--clip sets where they start); dp-prompt starts from the public "
    "prior with its top-k+ set of 20, bounds [-8, 8] on the difference to the prior and epsilon 64 per token.\n\n"
    "Examples: `textdp serve`; `textdp serve --port 0` (a free port; the URL is printed); "
    "`textdp serve --model models/masked --clip=-2,2`."
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


def parse_bounds(text: str) -> tuple[float, float]:
    """``--clip LOW,HIGH`` -> ``(low, high)``: two finite numbers, ``low < high`` (one-line error otherwise).

    >>> parse_bounds("-0.2,0.1")
    (-0.2, 0.1)
    >>> parse_bounds("2,-2")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --clip must be LOW,HIGH, two numbers with LOW < HIGH (e.g. --clip=-2,2), got '2,-2'
    """
    parts = text.split(",")
    try:
        low, high = (float(p) for p in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        low = high = math.nan
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"--clip must be LOW,HIGH, two numbers with LOW < HIGH (e.g. --clip=-2,2), got {text!r}")
    return low, high


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
    model: Annotated[Path | None, typer.Option(help="A model folder from `textdp train-rewriter` (the page then "
                                               "offers er-ae or ae-dp, as the model was trained, syntf-sentence, "
                                               "random-sentence), or a language model folder or GGUF file (dp-prompt, "
                                               "dp-paraphrase, dp-mlm, dp-bart, as its kind allows); needs "
                                               "[generation].", show_default=False)] = None,
    clip: Annotated[str | None, typer.Option(metavar="LOW,HIGH", help="With a language model: the public clipping "
                                             "bounds the page starts from (default -2,2 for logits; -0.2,0.1 for "
                                             "dp-bart's encoder output). Chosen without the private text.",
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
        bounds = None if clip is None else parse_bounds(clip)
        if clip is not None and model is None:
            raise ParameterError("--clip applies to a language model given with --model DIR")
        if model is None:
            workbench = Workbench(embeddings)
        else:
            from ..generation.folders import check_model_folder

            where = check_model_folder(model)  # links may not leave the folder
            if where.is_dir() and (where / "card.json").is_file():  # a model from textdp train-rewriter
                from ..generation.rewriter import load_rewriter

                if clip is not None:
                    raise ParameterError(f"--clip applies to a language model; {model} is a model from "
                                         "textdp train-rewriter (its scores are probabilities, clipped to [0, 1])")
                workbench = Workbench(embeddings, rewriter=load_rewriter(str(where)))
            else:
                print_info(f"loading {model} (a language model: this can take a minute or two; the address is "
                           "printed when it is ready)")
                workbench = Workbench(embeddings, lm_model=where, clip=bounds)
                print_info(f"{model}: the page offers {', '.join(workbench.lm_mechanisms)}")
        sock = _bind(host, port)
        bound = sock.getsockname()[1]
        app = create_app(workbench, extra_hosts=extra)
        shown = socket.gethostname() if host in ("0.0.0.0", "::") else host  # a name the Host check accepts
        typer.echo(f"textdp serve: {page_url(shown, bound, app.state.token)}", err=False)
        print_info("open this address as it is: the part after # is the page token (keep it to yourself). "
                   "Nothing you type is stored or logged; no text leaves this machine. Ctrl+C stops the server.")
        server = make_server(app)
    try:
        server.run(sockets=[sock])
    except (KeyboardInterrupt, Interrupted):  # pragma: no cover - uvicorn handles SIGINT itself, then raises it again
        pass
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""
    app.command("serve", help=SERVE_HELP)(serve)
