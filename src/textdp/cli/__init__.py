"""The ``textdp`` command line (Typer + rich).

Each command lives in its own module exposing ``register(app)``. The modules are imported
lazily: ``COMMANDS`` names each command's module, and a command's module is imported only
when that command runs (or when a listing needs them all: ``textdp --help``, completion of
a command name). ``textdp --version``, ``textdp -h`` of one command and its argument errors
therefore never import the mechanisms, numpy or scipy they do not use.
``tests/test_cli_first_contact.py`` checks that ``COMMANDS`` is exactly what the modules register.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from typing import Any, TypeVar, overload

import typer
from typer._click.core import Command as ClickCommand
from typer._click.core import Context
from typer.core import TyperCommand

from ._common import EPSILON_HELP_TEXT, EXIT_SIGINT, Command, Group

#: Every command, in the order ``textdp --help`` lists them, and the module (``textdp.cli.<module>``) that
#: registers it.
COMMANDS: dict[str, str] = {
    "obfuscate": "obfuscate",
    "guarantee": "guarantee",
    "calibrate": "guarantee",
    "topics": "topics",
    "topics-report": "topics",
    "evaluate": "evaluate",
    "audit": "audit",
    "train-rewriter": "train_rewriter",
    "rewrite": "rewrite",
    "evaluate-generation": "rewrite",
    "runs": "runs",
    "serve": "serve",
    "ledger": "ledger",
}
#: The command modules, each once, in the order of ``COMMANDS``.
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))

#: ``-h`` and ``--help`` everywhere (child contexts inherit the names).
CONTEXT_SETTINGS: dict[str, list[str]] = {"help_option_names": ["-h", "--help"]}


def load_module_commands(module: str) -> dict[str, ClickCommand]:
    """The click commands that ``textdp.cli.<module>`` registers, by name (their help in plain text)."""
    sub = typer.Typer(cls=Group, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode="rich")
    importlib.import_module(f"{__name__}.{module}").register(sub)
    for info in sub.registered_commands:  # plain-text help and no <bool> for flags, in every command
        if info.cls in (None, TyperCommand):
            info.cls = Command
    return dict(typer.main.get_group(sub).commands)


_Default = TypeVar("_Default")


class _LazyCommands(dict[str, ClickCommand]):
    """The root group's commands: one is imported when it is looked up, all when all are asked for
    (``items``, ``values``); the names alone (``keys``, iteration, ``in``) import nothing."""

    def _load(self, name: str) -> None:
        if not dict.__contains__(self, name) and name in COMMANDS:
            for cmd_name, cmd in load_module_commands(COMMANDS[name]).items():
                dict.__setitem__(self, cmd_name, cmd)

    def _load_all(self) -> None:
        for name in COMMANDS:
            self._load(name)

    @overload
    def get(self, name: str, default: None = None, /) -> ClickCommand | None: ...

    @overload
    def get(self, name: str, default: ClickCommand, /) -> ClickCommand: ...

    @overload
    def get(self, name: str, default: _Default, /) -> ClickCommand | _Default: ...

    def get(self, name: str, default: object = None, /) -> object:
        self._load(name)
        return dict.get(self, name, default)

    def __getitem__(self, name: str) -> ClickCommand:
        self._load(name)
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or dict.__contains__(self, name)

    def _names(self) -> list[str]:
        return [*COMMANDS, *(n for n in dict.keys(self) if n not in COMMANDS)]

    def __iter__(self) -> Iterator[str]:  # names only: nothing is imported
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return dict.fromkeys(self._names()).keys()

    def items(self) -> ItemsView[str, ClickCommand]:  # type: ignore[override]
        self._load_all()
        return {n: dict.__getitem__(self, n) for n in self._names()}.items()

    def values(self) -> ValuesView[ClickCommand]:  # type: ignore[override]
        self._load_all()
        return {n: dict.__getitem__(self, n) for n in self._names()}.values()


class RootGroup(Group):
    """The ``textdp`` group: its commands are imported on first use (:class:`_LazyCommands`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lazy = _LazyCommands()
        for name, cmd in self.commands.items():
            dict.__setitem__(lazy, name, cmd)
        self.commands = lazy

    def list_commands(self, ctx: Context) -> list[str]:
        """The command names, without importing the commands (a typo's suggestions need only the names)."""
        return list(self.commands)


app = typer.Typer(
    name="textdp",
    help="Differential privacy for text: release documents and topic models with a guarantee you can state.\n\n"
    + EPSILON_HELP_TEXT,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",  # with every help string escaped (Command, Group): plain text, nothing eaten
    context_settings=CONTEXT_SETTINGS,
    cls=RootGroup,
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"textdp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print the version."),
) -> None:
    """Differential privacy for text."""


def main() -> None:
    """Run the command line (``textdp``, ``python -m textdp``: see :func:`textdp.__main__.main`).

    From its first line to the process's end, SIGINT and SIGTERM raise :class:`~textdp.cli._common.Interrupted`
    wherever they land (typer's own handling of ``KeyboardInterrupt`` never sees them): a command's
    ``cli_errors`` says what it left, and anywhere else (parsing, importing a command's module, after the
    command) the run ends here, in one line and exit 130 (143).
    """
    import signal

    from ._common import Interrupted, print_interrupted, raise_interrupted

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, raise_interrupted)
    try:
        app()
    except (KeyboardInterrupt, Interrupted) as exc:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl+C cannot cut the line short
        print_interrupted("no output was written (outputs are written whole or not at all)")
        sys.exit(exc.status if isinstance(exc, Interrupted) else EXIT_SIGINT)
