"""Choice options of the command line: one helper, fed the tuple of names the library validates with.

A choice option is declared once, where the library declares the names (``INPUT_FORMATS``,
``BAG_MODES``, ``names("sentence")``, ...); the command line reads that tuple, so it can never
offer a name the library refuses, or miss one it accepts::

    Bag = Annotated[str, choice(BAG_MODES, help="truncate: first N words; sample: ...")]

The option's value is the plain name (a ``str``), exactly what the library takes. ``--help``
lists the names (``<truncate|sample>``), a name outside them is a one-line usage error (exit 2),
and shell completion offers them.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from typer.models import OptionInfo

__all__ = ["choice"]


def _one_of(names: tuple[str, ...]) -> Callable[[str | None], str | None]:
    """Typer callback accepting ``None`` (an optional option left out) or one of ``names``."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in names:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, names))}.")
        return value

    return check


def _completion(names: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion: the names that start with what was typed."""

    def complete(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]

    return complete


def choice(names: tuple[str, ...], *param_decls: str, help: str, metavar: str | None = None,
           rich_help_panel: str | None = None) -> OptionInfo:
    """A :func:`typer.Option` whose value must be one of ``names`` (the library's own tuple).

    Parameters
    ----------
    names : tuple of str
        The accepted names, in the order ``--help`` lists them.
    *param_decls : str
        The option's spellings (default: from the parameter name, as :func:`typer.Option`).
    help : str
        The help text.
    metavar : str, optional
        Shown instead of the list of names (for long lists the help text describes, e.g. ``NAME``).
    rich_help_panel : str, optional
        The ``--help`` panel that lists the option (default: Options).

    Examples
    --------
    >>> info = choice(("truncate", "sample"), help="How to make a bag.")
    >>> info.metavar
    '<truncate|sample>'
    >>> info.callback("sample")
    'sample'
    """
    if not names:  # pragma: no cover - a developer error
        raise ValueError("a choice option needs at least one name")
    return typer.Option(*param_decls, help=help, metavar=metavar or f"<{'|'.join(names)}>",
                        rich_help_panel=rich_help_panel, callback=_one_of(tuple(names)),
                        autocompletion=_completion(tuple(names)))
