"""``textdp evaluate CONFIG.toml``: the privacy-utility experiment as a command."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import cli_errors, err_console, progress_bar


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""

    @app.command("evaluate")
    def evaluate(
        config: Path = typer.Argument(..., help="TOML config: [corpus], [mechanism], [attackers], [utility], [run]."),
        output: Path | None = typer.Option(None, "--output", "-o", help="Report folder (default: [run] output, else report-<corpus>)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
        no_plots: bool = typer.Option(False, "--no-plots", help="Skip the PNG plots."),
    ) -> None:
        """Attack and classify privatised snippets over an epsilon grid; write a report folder.

        Writes report.md (Table-1-style counts and accuracies per epsilon), results.json
        (one row per epsilon and model), settings.json (the resolved settings) and PNG
        plots of attack accuracy and utility against epsilon. See examples/evaluate-*.toml.
        """
        with cli_errors():
            from ..evaluation import load_config, run_experiment, write_report

            cfg = load_config(config)
            out = output or (Path(cfg.output) if cfg.output else Path(f"report-{Path(str(cfg.corpus['name'])).name.split('.')[0]}"))
            with progress_bar(disable=quiet) as bar:

                def stage(name: str, total: int):  # type: ignore[no-untyped-def]
                    task = bar.add_task(name, total=max(total, 1))
                    return lambda n: bar.advance(task, n)

                res = run_experiment(cfg, progress=stage)
            files = write_report(res, out, plots=not no_plots)
            summary = {"report": str(out), "files": [f.name for f in files], "seconds": round(res.timings["total"], 1)}
            err_console.print(f"wrote {out}/report.md ({res.timings['total']:.0f} s)", highlight=False)
            typer.echo(json.dumps(summary))
