"""``textdp ledger show FILE``: what a privacy ledger says was spent, per document id.

The ledger (written by ``textdp rewrite --ledger FILE``) is private-side state: document ids next
to their spend. This command reads it, verifies its hash chain (a modified ledger is refused with
a one-line error) and prints the spend; print it only where the private input may be seen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._common import Group, cli_errors

ledger_app = typer.Typer(name="ledger", help="Read a privacy ledger (private: document ids and their spend).",
                         no_args_is_help=True, cls=Group)


@ledger_app.command("show")
def show_command(
    ledger: Annotated[Path, typer.Argument(help="Ledger file written by `textdp rewrite --ledger`.",
                                           show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of a table.")] = False,
) -> None:
    """Print the epsilon (and delta) spent on each document id, summed over its releases.

    The chain of hashes is verified first: an edited, reordered or partly deleted ledger is refused. The head
    hash printed last identifies the ledger's current state: keep a copy where only you can change it, to
    detect a truncated ledger later.
    """
    with cli_errors():
        from ..accounting.ledger import PrivacyLedger
        from ..errors import ParameterError

        led = PrivacyLedger(ledger)
        if not ledger.is_file():
            raise ParameterError(f"{ledger}: no such ledger file")
        events = led.events()
        spent = led.spent(events)
        head = led.head()
        if as_json:
            typer.echo(json.dumps({"events": len(events), "head": head, "documents": {
                k: {"releases": v.releases, "epsilon": v.epsilon, "delta": v.delta} for k, v in spent.items()}}))
            return
        width = max([len("document"), *(len(k) for k in spent)])
        typer.echo(f"{'document':<{width}}  releases  {'epsilon':>10}  {'delta':>9}")
        for k, v in spent.items():
            typer.echo(f"{k:<{width}}  {v.releases:>8}  {v.epsilon:>10.4g}  {v.delta:>9.3g}")
        typer.echo(f"{len(events)} events, {len(spent)} documents; hash chain verified; head {head}")


def register(app: typer.Typer) -> None:
    """Add the ``ledger`` command group to ``app``."""
    app.add_typer(ledger_app)
