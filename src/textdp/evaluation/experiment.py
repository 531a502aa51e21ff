"""The privacy-utility experiment: every mechanism against the same attackers and topic models.

After Fernandes, Dras & McIver (POST 2019, Section 6). For every author of an
:class:`~textdp.evaluation.datasets.EvaluationSet` the attackers get the known
texts and try to attribute the snippets; the utility models try to recover the
snippet's topic. The snippets are turned into the mechanisms' input (their first
N in-vocabulary words, N = the shortest snippet unless ``size`` is set) and scored

* unmodified (``epsilon = None``, ``mechanism = None``): the input itself, in the
  form the mechanisms release it -- a bag (sorted by vocabulary row) for bag
  mechanisms, the words in order for text mechanisms -- so that the only
  difference between rows is the noise;
* after each configured mechanism (any registered name, :mod:`textdp.mechanisms`)
  at each epsilon of its grid.

Attackers: the fixed ones (Koppel, nearest neighbour, char n-grams, MiniLM) are
trained once on the unmodified known texts. The **noise-aware** ones
(``noise-aware-<attacker>``) are trained, for every mechanism and epsilon, on the
known texts privatised by the same mechanism at the same epsilon (in the same
release form, at most ``noise_aware_known_words`` words each), as an attacker
who knows the mechanism would; fixed attackers only give a lower bound on risk.

Options per mechanism (``[mechanism.<label>]``): the mechanism's own parameters,
``postprocess = "mbr"``, ``output_vocab = "words"`` (release only letter words that
are not stop words), ``topic_features = K`` (keep only the K most topic-
discriminative words, chosen on the public topic-training texts: other posters'
posts, never the snippets), ``bag``, ``size``, ``decoder`` and ``epsilons``.

Two reference rows (``epsilon = None``, field ``text``) score the Koppel
attackers on the raw and on the normalised snippet in its original word order.

Seeds: one integer seeds everything. Every (mechanism label, epsilon) condition
draws its noise, attacker and bootstrap randomness from ``SeedSequence(seed)``
children keyed by the label and the epsilon, so a condition's result does not
depend on which other conditions are in the run.

The parts: :mod:`~textdp.evaluation.config` (the TOML schema),
:mod:`~textdp.evaluation.conditions` (what is scored: the mechanisms' input and
output), :mod:`~textdp.evaluation.scoring` (attackers, utility models, rows);
this module runs them in order.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import cast

from ..embeddings import Embeddings
from ..errors import require
from ..progress import Counter, ProgressCallback, StageProgress
from .conditions import (
    Condition,
    Inputs,
    MechanismInfo,
    TopicSelections,
    domain_vocabulary,
    privatized_conditions,
    snippet_inputs,
    unmodified_conditions,
)
from .config import (
    ATTACKERS,
    NOISE_AWARE_PREFIX,
    UTILITY_MODELS,
    CorpusOptions,
    ExperimentConfig,
    MechanismSpec,
    config_from_dict,
    load_config,
)
from .datasets import Construction, EvaluationSet, build_evaluation_set
from .scoring import Row, Scorer, fit_models

__all__ = [
    "ATTACKERS",
    "NOISE_AWARE_PREFIX",
    "UTILITY_MODELS",
    "ExperimentConfig",
    "ExperimentResult",
    "MechanismSpec",
    "config_from_dict",
    "domain_vocabulary",
    "load_config",
    "run_experiment",
]

@dataclass
class ExperimentResult:
    """Rows and metadata of a run.

    ``rows`` is the flat list written to ``results.json``: one dict per
    (mechanism, epsilon, model) with ``mechanism`` (the label; ``None`` for the
    unmodified rows), ``epsilon`` (``None`` = no noise), ``model``, ``kind``
    (``attack`` / ``utility``), ``correct``, ``total``, ``accuracy``, ``chance``
    (a fraction), ``ci_low``, ``ci_high`` (95% percentile bootstrap), ``unchanged``
    (fraction of snippet words the mechanism left unchanged) and ``text`` (the
    release form, ``bag`` or ``text``; ``raw`` / ``normalised`` for the reference rows).
    ``mechanisms`` has per label the spec, the bag size N and the measured words/s.
    """

    rows: list[Row]
    config: ExperimentConfig
    construction: Construction
    bag_size: int
    timings: dict[str, float]
    n_authors: int
    n_topics: int | None
    mechanisms: dict[str, MechanismInfo] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)


def _no_progress(name: str, total: int) -> ProgressCallback | None:
    return None


def _load() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):  # pragma: no cover - platforms without getloadavg
        return float("nan")


class _Stages:
    """Opens the named stages of a run and times them (``timings``)."""

    def __init__(self, progress: StageProgress | None) -> None:
        self.progress = progress or _no_progress
        self.timings: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self._start = self.t0

    def open(self, name: str, total: int) -> Counter:
        self._start = time.perf_counter()
        return Counter(self.progress(name, total), total)

    def close(self, key: str) -> None:
        self.timings[key] = time.perf_counter() - self._start


def _load_data(cfg: ExperimentConfig, stages: _Stages, eval_set: EvaluationSet | None,
               embeddings: Embeddings | None) -> tuple[EvaluationSet, Embeddings]:
    """The evaluation set and the vocabulary (restricted to the domain vocabulary if configured)."""
    from ..embeddings import load_embeddings

    if any(a.removeprefix(NOISE_AWARE_PREFIX) == "minilm" for a in cfg.attackers):
        require("onnxruntime", "minilm")
    if "fasttext-topic" in cfg.utility:
        require("fasttext", "fasttext")
    tick = stages.open("load corpus", 1)
    if eval_set is None:
        options = cast(CorpusOptions, {k: v for k, v in cfg.corpus.items() if k != "name"})
        eval_set = build_evaluation_set(str(cfg.corpus["name"]), **options)
    tick(1)
    stages.close("corpus")
    tick = stages.open("load embeddings", 1)
    emb = embeddings if embeddings is not None else load_embeddings(cfg.embeddings, vocab_size=cfg.vocab_size)
    tick(1)
    stages.close("embeddings")
    if cfg.domain_vocab is not None:
        emb = emb.restrict(words=domain_vocabulary(cfg, eval_set))
    return eval_set, emb


def _privatise(cfg: ExperimentConfig, inp: Inputs, stages: _Stages) -> tuple[list[Condition], dict[str, MechanismInfo]]:
    """Every mechanism at every epsilon of its grid (snippets and the noise-aware attackers' known texts)."""
    total = sum(len(s.epsilons) for s in cfg.mechanisms) * len(inp.eval_set.unknown)
    tick = stages.open("privatise", total)
    selections = TopicSelections(inp.eval_set)
    conditions: list[Condition] = []
    info: dict[str, MechanismInfo] = {}
    for spec in cfg.mechanisms:
        conds, info[spec.label] = privatized_conditions(cfg, inp, spec, selections, tick)
        conditions += conds
        stages.timings[f"mechanism:{spec.label}"] = info[spec.label]["seconds"]
    stages.close("mechanism")
    return conditions, info


def _score(cfg: ExperimentConfig, inp: Inputs, conditions: list[Condition], stages: _Stages) -> Scorer:
    """Fit the fixed models once, then score every condition and the reference rows."""
    noise_aware = [a for a in cfg.attackers if a.startswith(NOISE_AWARE_PREFIX)]
    fixed = [a for a in cfg.attackers if not a.startswith(NOISE_AWARE_PREFIX)]
    utility = cfg.utility if inp.eval_set.topics is not None else []
    tick = stages.open("fit models", len(fixed) + len(utility))
    attackers, utilities = fit_models(cfg, inp, fixed, utility, tick)
    stages.close("fit")
    scorer = Scorer(cfg, inp)
    n_models = len(attackers) + len(noise_aware) + len(utilities)
    tick = stages.open("attack and classify", len(conditions) * n_models)
    for cond in conditions:
        scorer.score(cond, attackers, noise_aware, utilities, tick)
    if cfg.reference_rows:
        n_kop = sum(a.startswith("koppel") for a in fixed)
        scorer.reference(attackers, Counter(stages.progress("reference rows", 2 * n_kop), 2 * n_kop))
    stages.close("score")
    return scorer


def run_experiment(
    cfg: ExperimentConfig,
    *,
    progress: StageProgress | None = None,
    eval_set: EvaluationSet | None = None,
    embeddings: Embeddings | None = None,
) -> ExperimentResult:
    """Run the experiment of ``cfg`` and return its rows (see :class:`ExperimentResult`).

    ``progress(stage, total)`` (:data:`textdp.progress.StageProgress`) opens each
    stage and returns the ``progress(done, total)`` callback of that stage.
    """
    load = {"start": _load()}
    stages = _Stages(progress)
    eval_set, emb = _load_data(cfg, stages, eval_set, embeddings)
    inp = snippet_inputs(cfg, eval_set, emb)
    conditions = unmodified_conditions(cfg, inp)
    privatised, mech_info = _privatise(cfg, inp, stages)
    scorer = _score(cfg, inp, conditions + privatised, stages)
    stages.timings.update({f"model:{k}": v for k, v in scorer.seconds.items()})
    stages.timings["total"] = time.perf_counter() - stages.t0
    load["end"] = _load()
    return ExperimentResult(
        rows=scorer.rows,
        config=cfg,
        construction=eval_set.construction,
        bag_size=inp.N,
        timings=stages.timings,
        n_authors=len(eval_set.authors),
        n_topics=None if eval_set.topics is None else len(set(eval_set.topics)),
        mechanisms=mech_info,
        load=load,
    )
