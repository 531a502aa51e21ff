"""Scoring: the attackers and utility models of an experiment, and the rows they produce.

:func:`make_attacker` and :func:`make_utility` build the models a config names
(:data:`~textdp.evaluation.config.ATTACKERS`,
:data:`~textdp.evaluation.config.UTILITY_MODELS`); :func:`fit_models` fits the
fixed ones once on the unmodified known texts; :class:`Scorer` scores every
:class:`~textdp.evaluation.conditions.Condition` (noise-aware attackers are
trained per condition on its privatised known texts) and the reference rows,
each with a 95% percentile-bootstrap interval.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from .._rng import make_rng
from ..embeddings import EmbeddingsLike
from ..errors import ParameterError, require
from ..progress import Counter
from .conditions import Condition, Inputs, condition_seed
from .config import NOISE_AWARE_PREFIX, ExperimentConfig
from .stats import bootstrap_ci, chance_accuracy

if TYPE_CHECKING:
    from ..attacks import CharNgramAttacker, KoppelAttacker, NearestNeighbourAttacker, SentenceEmbeddingAttacker
    from .utility import FastTextTopicClassifier, TfidfTopicClassifier

    Attacker = KoppelAttacker | NearestNeighbourAttacker | CharNgramAttacker | SentenceEmbeddingAttacker
    UtilityModel = TfidfTopicClassifier | FastTextTopicClassifier | NearestNeighbourAttacker

__all__ = ["Row", "Scorer", "fit_models", "make_attacker", "make_utility"]


class Row(TypedDict):
    """One row of ``results.json``: a model's accuracy on one condition, with its bootstrap interval."""

    mechanism: str | None
    epsilon: float | None
    model: str
    kind: str
    correct: int
    total: int
    accuracy: float
    chance: float
    ci_low: float
    ci_high: float
    unchanged: float
    text: str


def make_attacker(name: str, cfg: ExperimentConfig, emb: EmbeddingsLike, rng: np.random.Generator) -> Attacker:
    """The attacker ``name`` (``noise-aware-`` prefix ignored), configured from ``[attackers]``."""
    from ..attacks import CharNgramAttacker, KoppelAttacker, NearestNeighbourAttacker, SentenceEmbeddingAttacker

    name = name.removeprefix(NOISE_AWARE_PREFIX)
    if name == "koppel-pan":
        return KoppelAttacker("pan", trials=cfg.koppel_trials, n_features=cfg.koppel_features, seed=rng)
    if name == "koppel-2011":
        return KoppelAttacker("koppel2011", trials=cfg.koppel_trials, n_features=cfg.koppel_features, seed=rng)
    if name == "nn-author":
        return NearestNeighbourAttacker(emb, k=1, distance=cfg.nn_distance)
    if name == "char-ngram":
        require("sklearn", "eval")
        return CharNgramAttacker()
    if name == "minilm":
        require("onnxruntime", "minilm")
        return SentenceEmbeddingAttacker()
    raise ParameterError(f"unknown attacker {name!r}")  # pragma: no cover


def make_utility(name: str, cfg: ExperimentConfig, emb: EmbeddingsLike, seed: int) -> UtilityModel:
    """The utility (topic) model ``name``."""
    from ..attacks import NearestNeighbourAttacker
    from .utility import FastTextTopicClassifier, TfidfTopicClassifier

    if name == "tfidf-topic":
        require("sklearn", "eval")
        return TfidfTopicClassifier()
    if name == "fasttext-topic":
        require("fasttext", "fasttext")
        return FastTextTopicClassifier(seed=seed)
    if name == "knn-topic":
        return NearestNeighbourAttacker(emb, k=5, distance=cfg.nn_distance)
    raise ParameterError(f"unknown utility model {name!r}")  # pragma: no cover


def _predict(model: Attacker, texts: Sequence[Sequence[str]], rng: np.random.Generator) -> np.ndarray:
    from ..attacks import KoppelAttacker

    if isinstance(model, KoppelAttacker):
        return model.predict(texts, seed=rng)
    return model.predict(texts)


def fit_models(cfg: ExperimentConfig, inp: Inputs, fixed: list[str], utility: list[str],
               tick: Counter) -> tuple[dict[str, Attacker], dict[str, UtilityModel]]:
    """The fixed attackers (on the unmodified known texts) and the utility models, fitted once."""
    es = inp.eval_set
    attackers: dict[str, Attacker] = {}
    for name in fixed:
        gen = make_rng(condition_seed(cfg.seed, "attacker-fit", name, None))
        attackers[name] = make_attacker(name, cfg, inp.emb, gen).fit(inp.known, es.authors)
        tick(1)
    utilities: dict[str, UtilityModel] = {}
    for j, name in enumerate(utility):
        model = make_utility(name, cfg, inp.emb, int(np.random.SeedSequence(cfg.seed).generate_state(1)[0]) + j)
        if name == "knn-topic":
            model.fit(inp.known, es.topics or [])
        else:
            model.fit(es.topic_train_texts, es.topic_train_labels)
        utilities[name] = model
        tick(1)
    return attackers, utilities


class Scorer:
    """Scores conditions into :class:`Row` s (``rows``), timing each model (``seconds``)."""

    def __init__(self, cfg: ExperimentConfig, inp: Inputs) -> None:
        es = inp.eval_set
        self.cfg, self.inp = cfg, inp
        self.rows: list[Row] = []
        self.seconds: dict[str, float] = {}
        self.authors = np.array(es.authors, dtype=object)
        self.topics = None if es.topics is None else np.array(es.topics, dtype=object)
        self.author_chance = chance_accuracy(es.authors)
        self.topic_chance = None if es.topics is None else chance_accuracy(es.topics)

    def add_row(self, label: str | None, eps: float | None, model: str, kind: str, pred: np.ndarray,
                truth: np.ndarray, chance: float, unchanged: float, text: str) -> None:
        """One row: ``pred`` against ``truth`` with its bootstrap interval (seeded by the condition)."""
        ok = np.asarray(pred == truth, dtype=bool)
        boot = make_rng(condition_seed(self.cfg.seed, f"bootstrap:{model}:{text}", label, eps))
        lo, hi = bootstrap_ci(ok, boot, n_boot=self.cfg.bootstrap)
        self.rows.append(Row(
            mechanism=label, epsilon=eps, model=model, kind=kind, correct=int(ok.sum()), total=int(ok.size),
            accuracy=float(ok.mean()), chance=chance, ci_low=lo, ci_high=hi, unchanged=unchanged, text=text,
        ))

    def _attack(self, cond: Condition, name: str, model: Attacker, gen: np.random.Generator, start: float) -> None:
        pred = _predict(model, cond.texts, gen)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        self.add_row(cond.label, cond.eps, name, "attack", pred, self.authors, self.author_chance, cond.unchanged,
                     cond.release)

    def score(self, cond: Condition, attackers: dict[str, Attacker], noise_aware: list[str],
              utilities: dict[str, UtilityModel], tick: Counter) -> None:
        """Every model on ``cond``: the fixed attackers, the noise-aware ones (fitted here), the utility models."""
        seed, es = self.cfg.seed, self.inp.eval_set
        for name, model in attackers.items():
            s = time.perf_counter()
            self._attack(cond, name, model, make_rng(condition_seed(seed, f"attack:{name}", cond.label, cond.eps)), s)
            tick(1)
        for name in noise_aware:
            s = time.perf_counter()
            assert cond.known is not None
            gen = make_rng(condition_seed(seed, f"attack:{name}", cond.label, cond.eps))
            self._attack(cond, name, make_attacker(name, self.cfg, self.inp.emb, gen).fit(cond.known, es.authors),
                         gen, s)
            tick(1)
        for name, umodel in utilities.items():
            s = time.perf_counter()
            pred = umodel.predict(cond.texts)
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - s
            assert self.topics is not None and self.topic_chance is not None
            self.add_row(cond.label, cond.eps, name, "utility", pred, self.topics, self.topic_chance,
                         cond.unchanged, cond.release)
            tick(1)

    def reference(self, attackers: dict[str, Attacker], tick: Counter) -> None:
        """Koppel on the raw and on the normalised snippet, in word order (``text`` = ``raw`` / ``normalised``)."""
        from ..attacks import KoppelAttacker

        cfg, es, inp = self.cfg, self.inp.eval_set, self.inp
        kop = [a for a in attackers if a.startswith("koppel")]
        for text_kind, k_texts, u_texts in (
            ("raw", es.known_raw, es.unknown_raw), ("normalised", inp.known, [u[: inp.N] for u in es.unknown])
        ):
            for name in kop:
                model = attackers[name]
                if text_kind == "raw":
                    gen = make_rng(condition_seed(cfg.seed, "attacker-fit-raw", name, None))
                    model = make_attacker(name, cfg, inp.emb, gen).fit(k_texts, es.authors)
                assert isinstance(model, KoppelAttacker)
                seed = make_rng(condition_seed(cfg.seed, f"reference:{name}", text_kind, None))
                pred = model.predict(u_texts, seed=seed)
                self.add_row(None, None, name, "attack", pred, self.authors, self.author_chance, 1.0, text_kind)
                tick(1)
