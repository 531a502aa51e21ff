"""Helpers shared by the CLI commands: error handling, progress bars, epsilon help."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..errors import TextDPError

EPSILON_OPTION_HELP = (
    "Privacy parameter (> 0). Smaller = more noise = more privacy. Noise per word has mean length "
    "dimension/epsilon (5 for GloVe 50d at epsilon 10, where ~74% of words survive; ~5% survive at 4)."
)

EPSILON_HELP_TEXT = (
    "What epsilon means: it is a privacy dial. Every word is moved in embedding space by random noise "
    "whose typical size is (dimension / epsilon) and then replaced by the nearest real word. "
    "Small epsilon = big noise = words change a lot = strong privacy; large epsilon = little noise = "
    "the text survives = weak privacy. The guarantee: for two documents of N words at Earth Mover's "
    "distance E_d, any output is at most exp(epsilon·N·E_d) times more likely from one than from the other "
    "(e.g. epsilon=10, N=20 and documents 0.01 apart: factor exp(2) = 7.4)."
)

err_console = Console(stderr=True)


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn expected failures into a one-line ``error: ...`` on stderr and exit code 2."""
    try:
        yield
    except TextDPError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except UnicodeDecodeError as exc:
        err_console.print(f"[bold red]error:[/] input is not valid UTF-8 ({exc.reason})", highlight=False)
        raise typer.Exit(2) from None
    except OSError as exc:
        name = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        err_console.print(f"[bold red]error:[/] {name}{exc.strerror or exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/]; no partial output was written")
        raise typer.Exit(130) from None


def progress_bar(disable: bool = False) -> Progress:
    """A rich progress bar on stderr (hidden when stderr is not a terminal unless forced)."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=disable or not sys.stderr.isatty(),
        transient=False,
    )
