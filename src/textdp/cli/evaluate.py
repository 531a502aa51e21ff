"""``textdp evaluate CONFIG.toml``: the privacy-utility experiment as a command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._common import (
    QuietOption,
    ReportForceOption,
    bar_stages,
    check_report_folder,
    cli_errors,
    print_info,
    progress_bar,
)

if TYPE_CHECKING:
    from ..evaluation.config import ExperimentConfig


def _check_extras(cfg: ExperimentConfig, *, plots: bool) -> None:
    """Import every optional dependency the run of ``cfg`` will use, before any work.

    A missing one is a one-line :class:`~textdp.errors.MissingDependencyError` naming its
    extra, now rather than after the corpus, the embeddings and the privatisation.
    """
    from ..errors import require
    from ..evaluation.config import NOISE_AWARE_PREFIX

    attackers = {a.removeprefix(NOISE_AWARE_PREFIX) for a in cfg.attackers}
    needs: list[tuple[str, str]] = []
    if "char-ngram" in attackers or "tfidf-topic" in cfg.utility or any(m.topic_features for m in cfg.mechanisms):
        needs.append(("sklearn", "eval"))
    if "minilm" in attackers:
        needs.append(("onnxruntime", "minilm"))
    if "fasttext-topic" in cfg.utility:
        needs.append(("fasttext", "fasttext"))
    if plots:
        needs.append(("matplotlib", "eval"))
    for module, extra in needs:
        require(module, extra)


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""

    @app.command("evaluate")
    def evaluate(
        config: Annotated[Path, typer.Argument(help="TOML config: [corpus], [mechanism], [attackers], [utility], "
                                               "[run].")],
        output: Annotated[Path | None, typer.Option("--output", "-o", help="Report folder (default: [run] output, "
                                                    "else report-<corpus>).")] = None,
        quiet: QuietOption = False,
        no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots.")] = False,
        force: ReportForceOption = False,
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
            check_report_folder(out, force, (config,))  # before minutes of work, not after
            _check_extras(cfg, plots=not no_plots)  # likewise: a missing extra is said up front
            with progress_bar(disable=quiet) as bar:
                res = run_experiment(cfg, progress=bar_stages(bar))
            files = write_report(res, out, plots=not no_plots)
            summary = {"report": str(out), "files": [f.name for f in files], "seconds": round(res.timings["total"], 1)}
            print_info(f"wrote {out}/report.md ({res.timings['total']:.0f} s)")
            typer.echo(json.dumps(summary))
