"""The evidence: privacy-utility experiments of Earth Mover's privacy.

Reproduces Section 6 / Table 1 / Appendix B of Fernandes, Dras & McIver
(POST 2019) on real corpora with the attackers of :mod:`textdp.attacks`:

* :func:`build_evaluation_set` -- deterministic known-text / snippet sets;
* :func:`run_experiment` -- privatise the snippets over an epsilon grid, attack
  and classify them;
* :func:`write_report` -- ``report.md``, ``results.json``, ``settings.json`` and
  PNG plots (``textdp evaluate CONFIG.toml`` does all three).
"""

from __future__ import annotations

from .datasets import (
    PRESETS,
    EvaluationSet,
    build_evaluation_set,
    resolve_data_dir,
    strip_quoted,
)
from .experiment import (
    ATTACKERS,
    UTILITY_MODELS,
    ExperimentConfig,
    ExperimentResult,
    config_from_dict,
    load_config,
    run_experiment,
)
from .report import frontier, render_markdown, write_report
from .stats import bootstrap_ci, chance_accuracy
from .utility import FastTextTopicClassifier, TfidfTopicClassifier

__all__ = [
    "ATTACKERS",
    "PRESETS",
    "UTILITY_MODELS",
    "EvaluationSet",
    "ExperimentConfig",
    "ExperimentResult",
    "FastTextTopicClassifier",
    "TfidfTopicClassifier",
    "bootstrap_ci",
    "build_evaluation_set",
    "chance_accuracy",
    "config_from_dict",
    "frontier",
    "load_config",
    "render_markdown",
    "resolve_data_dir",
    "run_experiment",
    "strip_quoted",
    "write_report",
]
