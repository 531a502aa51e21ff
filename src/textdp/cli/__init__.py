"""The ``textdp`` command line (Typer + rich).

Each command lives in its own module exposing ``register(app)``; the modules
listed in ``COMMAND_MODULES`` are registered in that order.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperCommand

from ._common import EPSILON_HELP_TEXT, Command, Group

COMMAND_MODULES: tuple[str, ...] = (
    "obfuscate",
    "guarantee",
    "topics",
    "evaluate",
    "audit",
    "train_rewriter",
    "rewrite",
    "runs",
    "serve",
)

app = typer.Typer(
    name="textdp",
    help="Differential privacy for text: release documents and topic models with a guarantee you can state.\n\n"
    + EPSILON_HELP_TEXT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",  # with every help string escaped (Command, Group): plain text, nothing eaten
    cls=Group,
)

def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"textdp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Differential privacy for text."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}").register(app)
for _info in app.registered_commands:  # plain-text help and no <bool> for flags, in every command
    if _info.cls in (None, TyperCommand):
        _info.cls = Command


def main() -> None:
    """Entry point of the ``textdp`` console script."""
    app()
