"""``textdp runs list|clean``: the private state that interrupted partitioned runs left behind."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ._common import Command, Group, cli_errors, print_info

RUNS_HELP = (
    "Private state of partitioned runs (obfuscate --engine local/dask) in the textdp cache. A run that "
    "completes deletes its own; an interrupted run keeps its spilled inputs, vocabulary and private-report "
    "pieces so that the same command can resume it. List them, and delete the ones you abandon. Folders "
    "given with --work-dir are not listed: delete them yourself."
)

runs_app = typer.Typer(name="runs", help=RUNS_HELP, no_args_is_help=True, cls=Group, add_completion=False)


def _size(n: int) -> str:
    x = float(n)
    for unit in ("B", "KB", "MB"):
        if x < 1024:
            return f"{x:.0f} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} GB"


def _age(seconds: float) -> str:
    for unit, s in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= s:
            return f"{seconds / s:.1f} {unit}"
    return f"{seconds:.0f} s"


@runs_app.command("list", cls=Command)
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per run.")] = False,
) -> None:
    """List the run folders: name, age, size, status (never the inputs' names).

    status: running (a textdp process is working on it now; clean leaves it alone),
    interrupted (resumable by the same command), orphaned (its output folder is gone: nothing
    can resume it; textdp runs clean --orphaned deletes these), completing (finished; its
    cleanup was cut short), unverified (its state does not verify) or old-format (written by an
    older textdp: it holds input paths in plain text).
    """
    from ..engines.workdir import list_runs, runs_dir

    with cli_errors():
        runs = list_runs()
        if as_json:
            for r in runs:
                typer.echo(json.dumps(r.to_dict()))
            return
        if not runs:
            print_info(f"no run folders in {runs_dir()}")
            return
        typer.echo(f"{'RUN':<34} {'AGE':>9} {'SIZE':>9}  STATUS")
        for r in runs:
            typer.echo(f"{r.name:<34} {_age(r.age_s):>9} {_size(r.bytes):>9}  {r.status}")


@runs_app.command("clean", cls=Command)
def clean_command(
    run: Annotated[str | None, typer.Argument(help="The run to delete (a name from textdp runs list).",
                                              show_default=False)] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Delete every run folder.")] = False,
    orphaned: Annotated[bool, typer.Option("--orphaned", help="Delete the runs whose output folder is gone "
                                           "(status orphaned in textdp runs list).")] = False,
) -> None:
    """Delete a run's private state (spilled inputs, vocabulary, report pieces, keys).

    Give NAME (one run), --orphaned (the runs whose output folder is gone) or --all. The run
    can no longer be resumed: its output folder must then be deleted too. A running job is
    never deleted (naming it is an error; --all skips it).
    """
    from ..engines.workdir import clean_runs, list_runs, runs_dir

    with cli_errors():
        deleted = clean_runs(run, all_runs=all_runs, orphaned=orphaned)
        for r in deleted:
            print_info(f"deleted {r.name} ({r.status}, {_size(r.bytes)})")
        kept = [r for r in list_runs() if r.status == "running"] if run is None else []
        for r in kept:
            print_info(f"kept {r.name} (running: a textdp process is working on it)")
        if not deleted and not kept:
            print_info(f"nothing to clean: no {'orphaned ' if orphaned else ''}run folders in {runs_dir()}")


def register(app: typer.Typer) -> None:
    """Add the ``runs`` command group (``list``, ``clean``) to ``app``."""
    app.add_typer(runs_app, name="runs")


__all__ = ["register"]
