"""``textdp ledger show|adopt|reset FILE``: read a privacy ledger, or accept it as it is.

The ledger (written by ``textdp obfuscate|rewrite|topics --ledger FILE``, by
:func:`textdp.release.release` and by ``Mechanism.transform`` after ``set_ledger``) is private-side state: document ids next
to their spend. ``show`` verifies its hash chain and its anchor (the head textdp recorded in the
user's private state at the last charge: a truncated, replaced or deleted ledger is refused with a
one-line error that says so) and prints the spend; print it only where the private input may be
seen. ``adopt`` anchors a ledger with events that has no anchor (the state folder was deleted, a copied
ledger): refused, never silently accepted, until then. ``reset`` is the user's word that the ledger as it is now (or a new, empty one when the file
is gone) is the one to trust: the spend the old anchor covered beyond it is forgotten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._common import Group, cli_errors

if TYPE_CHECKING:
    from ..accounting.ledger import LedgerState

ledger_app = typer.Typer(name="ledger", help="Read a privacy ledger (private: document ids and their spend).",
                         no_args_is_help=True, cls=Group)

_LEDGER_ARG = typer.Argument(help="Ledger file written by `textdp obfuscate|rewrite|topics --ledger`.", show_default=False)


@ledger_app.command("show")
def show_command(
    ledger: Annotated[Path, _LEDGER_ARG],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of a table.")] = False,
) -> None:
    """Print the epsilon (and delta) spent on each document id: summed over its releases, and composed tightly.

    The tight column composes a document's releases from what ran (a Gaussian release with its noise, a pure
    epsilon release, ...) with dp-accounting's accountants at the same delta: never above the sum, and below it
    when releases are Gaussian (dp-bart); for pure releases it is the sum, which is then tight. --budget is
    enforced on it, --delta-budget (default 1e-3) on the summed delta.

    The chain of hashes is verified first: an edited, reordered or partly deleted ledger is refused. So is a
    ledger that is shorter than, or different from, the one textdp last wrote (its head is anchored in your
    private textdp state at every charge), or one that is missing: `textdp ledger reset` accepts it as it is.
    """
    with cli_errors():
        from ..accounting.ledger import PrivacyLedger
        from ..errors import ParameterError

        led = PrivacyLedger(ledger)
        if not led.exists():
            raise ParameterError(f"{ledger}: no such ledger file")
        events = led.events()
        spent = led.spent(events)
        composed = led.composed(events)
        state = led.state()
        anchored = "anchored" if state.anchored_events is not None else "not anchored yet (empty)"
        if as_json:
            typer.echo(json.dumps({"events": len(events), "head": state.head,
                                   "anchored": state.anchored_events is not None, "enforced": "tight", "documents": {
                k: {"releases": v.releases, "epsilon": v.epsilon, "delta": v.delta,
                    "tight_epsilon": composed[k].tight[0], "method": composed[k].method}
                for k, v in spent.items()}}))
            return
        width = max([len("document"), *(len(k) for k in spent)])
        typer.echo(f"{'document':<{width}}  releases  {'epsilon':>10}  {'tight':>10}  {'delta':>9}")
        for k, v in spent.items():
            typer.echo(f"{k:<{width}}  {v.releases:>8}  {v.epsilon:>10.4g}  {composed[k].tight[0]:>10.4g}  "
                       f"{v.delta:>9.3g}")
        typer.echo(f"{len(events)} events, {len(spent)} documents; hash chain verified; {anchored}; head {state.head}")
        notes = {c.note for c in composed.values() if c.note and c.method != "pure"}
        typer.echo("epsilon: summed over the releases; tight: composed by dp-accounting at the same delta (the sum "
                   "for pure releases, where it is tight); --budget is enforced on tight, --delta-budget on delta"
                   + (f" ({notes.pop()})" if notes else ""))


@ledger_app.command("adopt")
def adopt_command(ledger: Annotated[Path, _LEDGER_ARG]) -> None:
    """Anchor a ledger that holds events but that textdp has no anchor for (your textdp state folder was deleted,
    or you copied the ledger from another account or machine).

    Only for a ledger you trust to hold every release: from now on an older copy of it is refused again. A
    ledger whose anchor disagrees with it (truncated, replaced) is refused here: that needs `textdp ledger reset`.
    """
    with cli_errors():
        from ..accounting.ledger import PrivacyLedger

        after = PrivacyLedger(ledger).adopt()
        typer.echo(f"ledger {ledger} adopted: anchored at {after.events} events (head {after.head})")


@ledger_app.command("reset")
def reset_command(ledger: Annotated[Path, _LEDGER_ARG]) -> None:
    """Accept the ledger as it is now (an empty one if the file is gone) after it was truncated, replaced or deleted.

    Only for a change you know about (a restored backup, a ledger you removed on purpose): the spend that the
    old anchor covered and the file no longer shows is forgotten, so those documents may be released again up to
    the full budget. A ledger whose hash chain is broken is still refused: move it away first.
    """
    with cli_errors():
        from ..accounting.ledger import PrivacyLedger, reset_message

        before, after = PrivacyLedger(ledger).reset()
        typer.echo(f"ledger {ledger} reset: {reset_message(before, after)}")


def reset_message(before: LedgerState, after: LedgerState) -> str:
    """:func:`textdp.accounting.ledger.reset_message` (kept here for the commands that import it from the CLI)."""
    from ..accounting.ledger import reset_message as message

    return message(before, after)


def register(app: typer.Typer) -> None:
    """Add the ``ledger`` command group to ``app``."""
    app.add_typer(ledger_app)
