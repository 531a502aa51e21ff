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
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int
from ..embeddings import Embeddings, EmbeddingsLike
from ..errors import ParameterError, ParameterTypeError, TextDPError, require
from ..progress import Counter as ProgressCounter
from ..progress import ProgressCallback, StageProgress, offset
from .datasets import EvaluationSet, build_evaluation_set
from .stats import bootstrap_ci, chance_accuracy

__all__ = [
    "ATTACKERS",
    "NOISE_AWARE_PREFIX",
    "UTILITY_MODELS",
    "ExperimentConfig",
    "ExperimentResult",
    "MechanismSpec",
    "config_from_dict",
    "load_config",
    "run_experiment",
]

#: Attacker names accepted in a config, with what they are.
ATTACKERS: dict[str, str] = {
    "koppel-pan": "Koppel et al. (2011), PAN replication (joined text, min-max, 50% features)",
    "koppel-2011": "Koppel et al. (2011), original reading (word-internal grams, cosine, 40% features)",
    "nn-author": "1-NN authorship in the embedding space (same representation)",
    "char-ngram": "char 2-4-gram TF-IDF + linear SVM trained on the known texts (PAN 2019 baseline family)",
    "minilm": "1-NN on all-MiniLM-L6-v2 sentence embeddings (extra minilm)",
}
#: ``noise-aware-<attacker>``: the attacker trained on known texts privatised by the same mechanism and epsilon.
NOISE_AWARE_PREFIX = "noise-aware-"
for _base in list(ATTACKERS):
    ATTACKERS[NOISE_AWARE_PREFIX + _base] = (
        f"noise-aware {_base}: trained on the known texts privatised by the same mechanism at the same epsilon"
    )
#: The attackers of a config without ``[attackers] models``.
DEFAULT_ATTACKERS = ["koppel-pan", "koppel-2011", "nn-author", "char-ngram", "noise-aware-nn-author",
                     "noise-aware-char-ngram"]
#: Utility model names accepted in a config.
UTILITY_MODELS: dict[str, str] = {
    "tfidf-topic": "word 1-2-gram TF-IDF + logistic regression, trained on other authors' posts",
    "fasttext-topic": "fastText supervised (25 epochs, lr 1.0), trained on other authors' posts (extra fasttext)",
    "knn-topic": "5-NN topic over the known texts in the embedding space (same representation)",
}

#: The keys of [corpus] and their TOML types.
_CORPUS_KEYS: dict[str, type] = {
    "name": str, "data_dir": str, "author_field": str, "text_field": str, "topic_field": str,
    "filter_field": str, "strip_quotes": bool, "known_words": int, "unknown_words": int, "cut": str,
    "max_authors": int, "n_topics": int, "authors_per_topic": int, "max_topic_train": int,
    "split_field": str, "known_split": list, "unknown_split": list,
}
_SHARED_MECH_KEYS = {
    "epsilons", "embeddings", "vocab_size", "domain_vocab", "domain_min_count", "bag", "size", "decoder",
    "mechanism", "mechanisms", "output_vocab", "topic_features", "topic_feature_method", "postprocess",
    "noise_aware_known_words",
}
#: keys of a ``[mechanism.<label>]`` table besides the mechanism's own parameters
_SPEC_KEYS = {"mechanism", "epsilons", "bag", "size", "decoder", "postprocess", "output_vocab", "topic_features",
              "topic_feature_method"}
_NOT_PARAMS = {"self", "epsilon", "embeddings", "seed", "rng", "stop_words", "vocab_size", "size", "size_from_data",
               "bag", "known_source", "decoder", "postprocess"}


@dataclass
class MechanismSpec:
    """One mechanism of a run: a label, a registered name, its epsilon grid and options.

    ``label`` names the rows (``[mechanism.<label>]``; e.g. ``"cmp+mbr"`` for
    ``mechanism = "cmp"`` with ``postprocess = "mbr"``).
    """

    label: str
    name: str
    epsilons: list[float]
    params: dict[str, Any] = field(default_factory=dict)
    postprocess: str | None = None
    decoder: str = "exact"
    bag: str = "truncate"
    size: int | None = None
    output_vocab: str = "full"
    topic_features: int = 0
    topic_feature_method: str = "chi2"

    @property
    def release(self) -> str:
        """``"bag"`` or ``"text"`` (:func:`textdp.pipeline.release_kind`)."""
        from ..pipeline import release_kind

        return release_kind(self.name)

    def options(self) -> str:
        """The non-default options in one line (for the report)."""
        parts = [f"{k}={v}" for k, v in self.params.items()]
        if self.postprocess:
            parts.append(f"postprocess={self.postprocess}")
        if self.decoder != "exact":
            parts.append(f"decoder={self.decoder}")
        if self.release == "bag" and self.bag != "truncate":
            parts.append(f"bag={self.bag}")
        if self.size is not None:
            parts.append(f"size={self.size}")
        if self.output_vocab != "full":
            parts.append(f"output_vocab={self.output_vocab}")
        if self.topic_features:
            parts.append(f"topic_features={self.topic_features} ({self.topic_feature_method})")
        return ", ".join(parts) or "defaults"


@dataclass
class ExperimentConfig:
    """Settings of one evaluation run (the TOML config, resolved).

    See ``examples/evaluate-*.toml`` for every key with a comment. ``epsilons``,
    ``bag``, ``size``, ``decoder`` are the defaults of every mechanism;
    ``mechanisms`` holds the resolved per-mechanism specs.
    """

    corpus: dict[str, Any]
    epsilons: list[float]
    attackers: list[str]
    utility: list[str] = field(default_factory=list)
    embeddings: str | None = None
    vocab_size: int | None = None
    domain_vocab: str | None = None
    domain_min_count: int = 1
    bag: str = "truncate"
    size: int | None = None
    decoder: str = "exact"
    seed: int = 0
    bootstrap: int = 1000
    koppel_trials: int = 100
    koppel_features: int = 20_000
    nn_distance: str = "mean"
    truncate_known: bool = False
    reference_rows: bool = True
    output: str | None = None
    config_path: str | None = None
    mechanisms: list[MechanismSpec] = field(default_factory=list)
    noise_aware_known_words: int | None = None

    def __post_init__(self) -> None:
        if not self.mechanisms:
            self.mechanisms = [MechanismSpec("earth-movers", "earth-movers", list(self.epsilons), bag=self.bag,
                                             size=self.size, decoder=self.decoder)]

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for ``settings.json``)."""
        return asdict(self)


def _get(section: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str) -> Any:
    if key not in section:
        return default
    val = section[key]
    if not isinstance(val, kind) or (isinstance(val, bool) and kind in (int, float, (int, float))):
        raise ParameterTypeError(f"config [{where}] {key} has the wrong type ({type(val).__name__})")
    return val


def _epsilons(raw: object, where: str) -> list[float]:
    if not isinstance(raw, list) or not raw:
        raise ParameterError(f"config [{where}] needs epsilons = a non-empty list of numbers > 0")
    eps = [check_epsilon(e) for e in raw]
    if len(set(eps)) != len(eps):
        raise ParameterError(f"config [{where}] epsilons has repeated values")
    return eps


def _mechanism_specs(mech: dict[str, Any], default_eps: list[float] | None, shared: dict[str, Any]) -> list[MechanismSpec]:
    """The ``[mechanism]`` section's specs: ``mechanism = NAME`` or ``mechanisms = [LABELS]`` plus sub-tables."""
    from ..embeddings import DECODERS, OUTPUT_VOCABULARIES
    from ..mechanisms import MECHANISM_NAMES, mechanism_class
    from ..mechanisms.perturbation import POSTPROCESSORS
    from ..text import BAG_MODES
    from ..text.feature_selection import SELECTION_METHODS

    if "mechanism" in mech and "mechanisms" in mech:
        raise ParameterError("config [mechanism]: give mechanism = NAME or mechanisms = [...], not both")
    tables = {k: v for k, v in mech.items() if isinstance(v, dict)}
    if "mechanisms" in mech:
        labels = mech["mechanisms"]
        if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
            raise ParameterError("config [mechanism] mechanisms must be a non-empty list of names")
    elif "mechanism" in mech:
        if not isinstance(mech["mechanism"], str):
            raise ParameterTypeError("config [mechanism] mechanism must be a name (a string)")
        labels = [mech["mechanism"]]
    else:
        labels = ["earth-movers"]
    if len(set(labels)) != len(labels):
        raise ParameterError("config [mechanism] mechanisms has repeated names")
    stray = sorted(set(tables) - set(labels))
    if stray:
        raise ParameterError(f"config [mechanism.{stray[0]}] is not listed in mechanisms = [...]")
    specs = []
    for label in labels:
        table = dict(tables.get(label, {}))
        where = f"mechanism.{label}"
        name = table.pop("mechanism", label)
        if not isinstance(name, str) or name not in MECHANISM_NAMES:
            raise ParameterError(
                f"config [{where}]: unknown mechanism {name!r}; choose one of: {', '.join(MECHANISM_NAMES)}"
                + ("" if label == name else " (set mechanism = NAME in the table)")
            )
        eps = _epsilons(table.pop("epsilons"), where) if "epsilons" in table else default_eps
        if eps is None:
            raise ParameterError(f"config [{where}] needs epsilons (or [mechanism] epsilons for every mechanism)")
        opts = {k: table.pop(k) for k in list(table) if k in _SPEC_KEYS}
        cls = mechanism_class(name)
        sig = inspect.signature(cls).parameters
        for key in table:
            if key in _NOT_PARAMS or key not in sig:
                own = [p for p in sig if p not in _NOT_PARAMS]
                raise ParameterError(f"config [{where}]: {name} has no parameter {key!r}; its parameters: "
                                     f"{', '.join(own) or 'none'}")
        merged = {**shared, **opts}
        spec = MechanismSpec(
            label=label, name=name, epsilons=list(eps), params=table,
            postprocess=merged.get("postprocess"),
            decoder=check_choice(_get(merged, "decoder", str, "exact", where), "decoder", DECODERS),
            bag=check_choice(_get(merged, "bag", str, "truncate", where), "bag", BAG_MODES),
            size=None if merged.get("size") is None else check_positive_int(merged["size"], "size"),
            output_vocab=check_choice(_get(merged, "output_vocab", str, "full", where), "output_vocab",
                                      OUTPUT_VOCABULARIES),
            topic_features=check_positive_int(_get(merged, "topic_features", int, 0, where), "topic_features",
                                              minimum=0),
            topic_feature_method=check_choice(_get(merged, "topic_feature_method", str, "chi2", where),
                                              "topic_feature_method", SELECTION_METHODS),
        )
        if spec.postprocess is not None:
            check_choice(spec.postprocess, "postprocess", POSTPROCESSORS)
            if "postprocess" not in sig:
                raise ParameterError(f"config [{where}]: postprocess applies to earth-movers and cmp, not {name}")
        if spec.decoder != "exact" and "decoder" not in sig:
            raise ParameterError(f"config [{where}]: decoder applies to earth-movers, cmp, mahalanobis, not {name}")
        if spec.release == "text" and spec.bag != "truncate":
            raise ParameterError(f"config [{where}]: bag = {spec.bag!r} applies to bag mechanisms; {name} releases text")
        if spec.release == "bag" and spec.bag != "truncate" and "bag" not in sig:
            raise ParameterError(f"config [{where}]: bag = {spec.bag!r} applies to earth-movers; {name} draws its bag "
                                 "from the whole vocabulary")
        specs.append(spec)
    return specs


def config_from_dict(d: dict[str, Any], *, base_dir: Path | None = None) -> ExperimentConfig:
    """Validate a parsed TOML config and resolve defaults.

    >>> cfg = config_from_dict({"corpus": {"name": "reuter_50_50"}, "mechanism": {"epsilons": [10, 5]},
    ...                         "attackers": {"models": ["koppel-pan"]}})
    >>> cfg.epsilons, cfg.attackers, cfg.seed, [m.label for m in cfg.mechanisms]
    ([10.0, 5.0], ['koppel-pan'], 0, ['earth-movers'])
    >>> cfg = config_from_dict({"corpus": {"name": "reuter_50_50"}, "mechanism": {
    ...     "mechanisms": ["cmp", "cmp+mbr", "vickrey"], "epsilons": [5, 4],
    ...     "cmp+mbr": {"mechanism": "cmp", "postprocess": "mbr"}, "vickrey": {"t": 0.75, "epsilons": [8]}}})
    >>> [(m.label, m.name, m.epsilons, m.postprocess, m.params) for m in cfg.mechanisms]  # doctest: +NORMALIZE_WHITESPACE
    [('cmp', 'cmp', [5.0, 4.0], None, {}), ('cmp+mbr', 'cmp', [5.0, 4.0], 'mbr', {}),
     ('vickrey', 'vickrey', [8.0], None, {'t': 0.75})]
    """
    if not isinstance(d, dict):
        raise ParameterTypeError("config must be a TOML table")
    unknown = set(d) - {"corpus", "mechanism", "attackers", "utility", "run"}
    if unknown:
        raise ParameterError(f"unknown config section(s): {', '.join(sorted(unknown))}")
    for section in ("corpus", "mechanism", "attackers", "utility", "run"):
        if not isinstance(d.get(section, {}), dict):
            raise ParameterTypeError(f"config [{section}] must be a table, got {type(d[section]).__name__}")
    corpus = dict(d.get("corpus", {}))
    if "name" not in corpus:
        raise ParameterError("config [corpus] needs name = a corpus name or a JSON-lines path")
    bad = set(corpus) - set(_CORPUS_KEYS)
    if bad:
        raise ParameterError(f"unknown key(s) in [corpus]: {', '.join(sorted(bad))}")
    for key in corpus:
        _get(corpus, key, _CORPUS_KEYS[key], None, "corpus")
    for key in ("known_split", "unknown_split"):
        if key in corpus and not all(isinstance(v, str) for v in corpus[key]):
            raise ParameterTypeError(f"config [corpus] {key} must be a list of split values (strings)")
    if base_dir is not None:
        for key in ("data_dir",):
            if key in corpus and not Path(str(corpus[key])).is_absolute():
                corpus[key] = str((base_dir / str(corpus[key])).resolve())
        name = str(corpus["name"])
        if name.endswith((".jsonl", ".jsonl.gz", ".json")) and not Path(name).is_absolute():
            corpus["name"] = str((base_dir / name).resolve())
    mech = d.get("mechanism", {})
    _get(mech, "embeddings", str, None, "mechanism")
    bad = {k for k, v in mech.items() if not isinstance(v, dict)} - _SHARED_MECH_KEYS
    if bad:
        raise ParameterError(f"unknown key(s) in [mechanism]: {', '.join(sorted(bad))}")
    default_eps = _epsilons(mech["epsilons"], "mechanism") if "epsilons" in mech else None
    shared = {k: mech[k] for k in ("bag", "size", "decoder", "postprocess", "output_vocab", "topic_features",
                                   "topic_feature_method") if k in mech}
    specs = _mechanism_specs(mech, default_eps, shared)
    if default_eps is None:
        default_eps = specs[0].epsilons
    att = d.get("attackers", {})
    bad = set(att) - {"models", "koppel_trials", "koppel_features", "nn_distance", "truncate_known", "reference_rows"}
    if bad:
        raise ParameterError(f"unknown key(s) in [attackers]: {', '.join(sorted(bad))}")
    attackers = list(_get(att, "models", list, DEFAULT_ATTACKERS, "attackers"))
    for a in attackers:
        check_choice(a, "attacker", tuple(ATTACKERS))
    util = d.get("utility", {})
    bad = set(util) - {"models"}
    if bad:
        raise ParameterError(f"unknown key(s) in [utility]: {', '.join(sorted(bad))}")
    utility = list(_get(util, "models", list, [], "utility"))
    for u in utility:
        check_choice(u, "utility model", tuple(UTILITY_MODELS))
    run = d.get("run", {})
    bad = set(run) - {"seed", "bootstrap", "output"}
    if bad:
        raise ParameterError(f"unknown key(s) in [run]: {', '.join(sorted(bad))}")
    emb = mech.get("embeddings")
    if emb is not None and base_dir is not None and not Path(str(emb)).is_absolute():
        emb = str((base_dir / str(emb)).resolve())
    domain = _get(mech, "domain_vocab", str, None, "mechanism")
    if domain is not None and domain != "topic-train" and base_dir is not None and not Path(domain).is_absolute():
        domain = str((base_dir / domain).resolve())
    na_words = _get(mech, "noise_aware_known_words", int, None, "mechanism")
    return ExperimentConfig(
        corpus=corpus,
        epsilons=default_eps,
        attackers=attackers,
        utility=utility,
        embeddings=emb,
        vocab_size=None if mech.get("vocab_size") is None else check_positive_int(mech["vocab_size"], "vocab_size"),
        domain_vocab=domain,
        domain_min_count=check_positive_int(_get(mech, "domain_min_count", int, 1, "mechanism"), "domain_min_count"),
        bag=specs[0].bag,
        size=None if mech.get("size") is None else check_positive_int(mech["size"], "size"),
        decoder=specs[0].decoder,
        seed=check_positive_int(_get(run, "seed", int, 0, "run"), "seed", minimum=0),
        bootstrap=check_positive_int(_get(run, "bootstrap", int, 1000, "run"), "bootstrap"),
        koppel_trials=check_positive_int(_get(att, "koppel_trials", int, 100, "attackers"), "koppel_trials"),
        koppel_features=check_positive_int(_get(att, "koppel_features", int, 20_000, "attackers"), "koppel_features"),
        nn_distance=check_choice(_get(att, "nn_distance", str, "mean", "attackers"), "nn_distance", ("mean", "emd")),
        truncate_known=bool(_get(att, "truncate_known", bool, False, "attackers")),
        reference_rows=bool(_get(att, "reference_rows", bool, True, "attackers")),
        output=_get(run, "output", str, None, "run"),
        mechanisms=specs,
        noise_aware_known_words=None if na_words is None else check_positive_int(na_words, "noise_aware_known_words"),
    )


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a TOML config file."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"config file not found: {p}")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ParameterError(f"{p}: not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{p}: not valid UTF-8 (byte offset {exc.start}); save the config as UTF-8") from None
    except OSError as exc:
        raise ParameterError(f"{p}: cannot read ({exc.strerror or exc})") from None
    cfg = config_from_dict(data, base_dir=p.resolve().parent)
    cfg.config_path = str(p)
    if cfg.output is not None and not Path(cfg.output).is_absolute():
        cfg.output = str(Path(cfg.output))
    return cfg


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

    rows: list[dict[str, Any]]
    config: ExperimentConfig
    construction: dict[str, Any]
    bag_size: int
    timings: dict[str, float]
    n_authors: int
    n_topics: int | None
    mechanisms: dict[str, dict[str, Any]] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)


#: Deprecated name of :data:`textdp.progress.StageProgress`.
StageCallback = StageProgress


def _no_progress(name: str, total: int) -> ProgressCallback | None:
    return None


def _make_attacker(name: str, cfg: ExperimentConfig, emb: EmbeddingsLike, rng: np.random.Generator) -> Any:
    from ..attacks import (
        CharNgramAttacker,
        KoppelAttacker,
        NearestNeighbourAttacker,
        SentenceEmbeddingAttacker,
    )

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


def _make_utility(name: str, cfg: ExperimentConfig, emb: EmbeddingsLike, seed: int) -> Any:
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


def _predict(model: Any, texts: list[list[str]], rng: np.random.Generator) -> np.ndarray:
    from ..attacks import KoppelAttacker

    if isinstance(model, KoppelAttacker):
        return model.predict(texts, seed=rng)
    return model.predict(texts)


def domain_vocabulary(cfg: ExperimentConfig, eval_set: EvaluationSet) -> list[str]:
    """The public domain vocabulary of ``[mechanism] domain_vocab`` (words seen >= ``domain_min_count`` times).

    ``"topic-train"``: the words of the topic-training posts, which are written by
    posters *outside* the evaluation set (never the private snippets); otherwise a
    UTF-8 text file whose whitespace-separated tokens (lower-cased) are counted,
    e.g. a word list with one word per line.

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(domain_vocab="topic-train", domain_min_count=2)
    >>> es = SimpleNamespace(topic_train_texts=[["puck", "goal"], ["goal", "orbit"]], name="toy")
    >>> domain_vocabulary(cfg, es)
    ['goal']
    """
    from collections import Counter

    if cfg.domain_vocab == "topic-train":
        if not eval_set.topic_train_texts:
            raise ParameterError(
                f"domain_vocab = \"topic-train\" needs a corpus with topic-training texts ({eval_set.name} has none)"
            )
        counts = Counter(w for t in eval_set.topic_train_texts for w in t)
    else:
        path = Path(str(cfg.domain_vocab))
        if not path.is_file():
            raise ParameterError(f"domain_vocab file not found: {path}")
        counts = Counter(path.read_text(encoding="utf-8").lower().split())
    keep = sorted(w for w, c in counts.items() if c >= cfg.domain_min_count)
    if not keep:
        raise ParameterError("domain_vocab has no word seen domain_min_count times")
    return keep


def _key(*parts: object) -> int:
    """A stable 32-bit key of a condition (label, epsilon, stream) for its SeedSequence."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def _condition_seed(seed: int, stream: str, label: str | None, eps: float | None) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(_key(stream), _key(label, eps)))


def _load() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):  # pragma: no cover - platforms without getloadavg
        return float("nan")


@dataclass
class _Condition:
    label: str | None
    release: str
    eps: float | None
    texts: list[list[str]]
    unchanged: float
    known: list[list[str]] | None  # training texts of the noise-aware attackers


def _chunks(words: list[str], n: int) -> list[list[str]]:
    """Consecutive bags of exactly ``n`` words (the remainder is dropped; at least one bag if possible)."""
    if len(words) < n:
        return [words] if words else []
    return [words[i : i + n] for i in range(0, len(words) - n + 1, n)]


def _release_form(words: list[str], release: str, order: dict[str, int]) -> list[str]:
    """Unmodified words in the form a mechanism releases them: sorted by vocabulary row (bag) or in order (text)."""
    return sorted(words, key=order.__getitem__) if release == "bag" else list(words)


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
    from ..embeddings import load_embeddings, output_vocabulary
    from ..pipeline import build_mechanism

    stage = progress or _no_progress
    timings: dict[str, float] = {}
    load = {"start": _load()}
    t0 = time.perf_counter()
    if any(a.removeprefix(NOISE_AWARE_PREFIX) == "minilm" for a in cfg.attackers):
        require("onnxruntime", "minilm")
    if "fasttext-topic" in cfg.utility:
        require("fasttext", "fasttext")

    tick = ProgressCounter(stage("load corpus", 1), 1)
    if eval_set is None:
        kwargs = {k: v for k, v in cfg.corpus.items() if k != "name"}
        eval_set = build_evaluation_set(str(cfg.corpus["name"]), **kwargs)
    tick(1)
    timings["corpus"] = time.perf_counter() - t0

    t = time.perf_counter()
    tick = ProgressCounter(stage("load embeddings", 1), 1)
    emb = embeddings if embeddings is not None else load_embeddings(cfg.embeddings, vocab_size=cfg.vocab_size)
    tick(1)
    timings["embeddings"] = time.perf_counter() - t

    if cfg.domain_vocab is not None:
        emb = emb.restrict(words=domain_vocabulary(cfg, eval_set))

    index = emb.index
    specs = cfg.mechanisms
    # the mechanisms' input: the snippets' in-vocabulary words (first N; N = shortest unless size is set)
    words_iv = [[w for w in u if w in index] for u in eval_set.unknown]
    if min(len(r) for r in words_iv) == 0:
        raise TextDPError("a snippet has no in-vocabulary word; use a larger vocabulary")
    shortest = min(len(r) for r in words_iv)
    N = cfg.size if cfg.size is not None else shortest
    for spec in specs:
        n_spec = spec.size if spec.size is not None else N
        if spec.bag == "truncate" and n_spec > shortest and not spec.topic_features:
            raise ParameterError(f"[mechanism] size = {n_spec} but the shortest snippet has {shortest} in-vocabulary "
                                 "words; lower size or use bag = \"sample\"")
    known = eval_set.known
    if cfg.truncate_known:
        known = [k[:N] for k in known]
    known_iv = [[w for w in k if w in index] for k in eval_set.known]
    authors = np.array(eval_set.authors, dtype=object)
    topics = None if eval_set.topics is None else np.array(eval_set.topics, dtype=object)
    utility = cfg.utility if topics is not None else []
    n_topics = None if topics is None else len(set(eval_set.topics or []))
    noise_aware = [a for a in cfg.attackers if a.startswith(NOISE_AWARE_PREFIX)]
    fixed = [a for a in cfg.attackers if not a.startswith(NOISE_AWARE_PREFIX)]
    na_cap = cfg.noise_aware_known_words

    selectors: dict[tuple[int, str], Any] = {}

    def selected(spec: MechanismSpec) -> frozenset[str] | None:
        if not spec.topic_features:
            return None
        key = (spec.topic_features, spec.topic_feature_method)
        if key not in selectors:
            from ..text.feature_selection import TopicFeatureSelector

            if not eval_set.topic_train_texts:
                raise ParameterError(
                    f"topic_features needs a corpus with public topic-training texts ({eval_set.name} has none)"
                )
            sel = TopicFeatureSelector(n_features=spec.topic_features, method=spec.topic_feature_method)
            selectors[key] = sel.fit_public([" ".join(t) for t in eval_set.topic_train_texts],
                                            eval_set.topic_train_labels).vocabulary_
        return selectors[key]

    conditions: list[_Condition] = []
    # ---- unmodified rows, one per release form in the run
    order = {w: i for i, w in enumerate(emb.words)}
    for release in dict.fromkeys(spec.release for spec in specs):
        bag_spec = next((s for s in specs if s.release == release), None)
        if release == "bag" and bag_spec is not None and bag_spec.bag == "sample":
            from ..text import make_bag

            gen = make_rng(_condition_seed(cfg.seed, "mechanism", None, None))
            none_texts = [[emb.words[j] for j in np.sort(make_bag(np.array([index[w] for w in r]), N, "sample", gen))]
                          for r in words_iv]
        else:
            none_texts = [_release_form(r[:N], release, order) for r in words_iv]
        na_known = None
        if noise_aware:
            capped = [k[:na_cap] if na_cap else k for k in known_iv]
            if release == "bag":
                na_known = [[w for c in _chunks(k, N) for w in _release_form(c, "bag", order)] for k in capped]
            else:
                na_known = capped
        conditions.append(_Condition(None, release, None, none_texts, 1.0, na_known))

    # ---- privatise the snippets (and the known texts of the noise-aware attackers) at every epsilon
    t = time.perf_counter()
    total_steps = sum(len(s.epsilons) for s in specs) * len(eval_set.unknown)
    tick = ProgressCounter(stage("privatise", total_steps), total_steps)
    mech_info: dict[str, dict[str, Any]] = {}
    for spec in specs:
        keep = selected(spec)
        vocab = output_vocabulary(emb, spec.output_vocab, "english")
        v_index = vocab.index
        inputs = [[w for w in r if w in v_index and (keep is None or w in keep)] for r in words_iv]
        if min(len(r) for r in inputs) == 0:
            raise TextDPError(f"[mechanism.{spec.label}]: a snippet has no word left after topic-feature selection; "
                              "raise topic_features")
        n_spec = spec.size if spec.size is not None else (N if keep is None else min(len(r) for r in inputs))
        if spec.bag == "truncate" and n_spec > min(len(r) for r in inputs):
            raise ParameterError(f"[mechanism.{spec.label}] size = {n_spec} exceeds the shortest selected snippet")
        if noise_aware and na_cap and spec.release == "bag" and spec.bag == "truncate" and na_cap < n_spec:
            raise ParameterError(f"[mechanism.{spec.label}]: noise_aware_known_words = {na_cap} is smaller than its "
                                 f"bag size N = {n_spec}; raise noise_aware_known_words to at least {n_spec} or lower "
                                 "size")
        sample = spec.release == "bag" and spec.bag == "sample"
        snippet_in = [" ".join(r if sample else r[:n_spec]) for r in inputs]
        known_in: list[list[str]] = []
        if noise_aware:
            k_words = [[w for w in k if w in v_index and (keep is None or w in keep)] for k in known_iv]
            k_words = [k[:na_cap] if na_cap else k for k in k_words]
            known_in = [[" ".join(c) for c in _chunks(k, n_spec)] if spec.release == "bag" else [" ".join(k)]
                        for k in k_words]
        if keep is not None:  # the selection alone, without noise
            conditions.append(_Condition(spec.label, spec.release, None,
                                         [_release_form(r[:n_spec], spec.release, order) for r in inputs], 1.0,
                                         [[w for c in k for w in _release_form(c.split(), spec.release, order)]
                                          for k in known_in] if noise_aware else None))
        seconds, n_words = 0.0, 0
        for eps in spec.epsilons:
            bag_kw: dict[str, Any] = {"size": n_spec, "bag": spec.bag} if spec.release == "bag" else {}
            mech = build_mechanism(spec.name, epsilon=eps, embeddings=vocab, stop_words="english",
                                   decoder=spec.decoder, postprocess=spec.postprocess, params=spec.params, **bag_kw)
            s = time.perf_counter()
            diags: list[Any] = []  # private diagnostics (the experiment knows its inputs anyway)
            docs = mech.privatize_batch(snippet_in, seed=make_rng(_condition_seed(cfg.seed, "mechanism", spec.label, eps)),
                                        seeded=True, private_report=diags, progress=offset(tick))
            released = [list(d.words) for d in docs]
            n_words += sum(len(r) for r in released)
            na_texts: list[list[str]] | None = None
            if noise_aware:
                flat = [c for k in known_in for c in k]
                owner = [i for i, k in enumerate(known_in) for _ in k]
                kdocs = mech.privatize_batch(flat, seed=make_rng(_condition_seed(cfg.seed, "known", spec.label, eps)),
                                             seeded=True)
                na_texts = [[] for _ in known_in]
                for i, d in zip(owner, kdocs, strict=True):
                    na_texts[i].extend(d.words)
                n_words += sum(len(d.words) for d in kdocs)
            seconds += time.perf_counter() - s
            unchanged = float(np.mean([d.unchanged_fraction() for d in diags]))
            conditions.append(_Condition(spec.label, spec.release, eps, released, unchanged, na_texts))
        mech_info[spec.label] = {
            "spec": asdict(spec), "release": spec.release, "bag_size": n_spec, "vocab_size": vocab.vocab_size,
            "seconds": seconds, "words": n_words, "words_per_second": n_words / seconds if seconds > 0 else None,
            "selected_features": None if keep is None else len(keep),
        }
        timings[f"mechanism:{spec.label}"] = seconds
    timings["mechanism"] = time.perf_counter() - t

    # ---- fit the fixed attackers and utility models (once)
    t = time.perf_counter()
    tick = ProgressCounter(stage("fit models", len(fixed) + len(utility)), len(fixed) + len(utility))
    attackers: dict[str, Any] = {}
    for name in fixed:
        gen = make_rng(_condition_seed(cfg.seed, "attacker-fit", name, None))
        attackers[name] = _make_attacker(name, cfg, emb, gen).fit(known, eval_set.authors)
        tick(1)
    utilities: dict[str, Any] = {}
    for j, name in enumerate(utility):
        model = _make_utility(name, cfg, emb, int(np.random.SeedSequence(cfg.seed).generate_state(1)[0]) + j)
        if name == "knn-topic":
            model.fit(known, eval_set.topics)
        else:
            model.fit(eval_set.topic_train_texts, eval_set.topic_train_labels)
        utilities[name] = model
        tick(1)
    timings["fit"] = time.perf_counter() - t

    rows: list[dict[str, Any]] = []

    def add_row(label: str | None, eps: float | None, model: str, kind: str, pred: np.ndarray, truth: np.ndarray,
                chance: float, unchanged: float, text: str) -> None:
        ok = np.asarray(pred == truth, dtype=bool)
        boot = make_rng(_condition_seed(cfg.seed, f"bootstrap:{model}:{text}", label, eps))
        lo, hi = bootstrap_ci(ok, boot, n_boot=cfg.bootstrap)
        rows.append({
            "mechanism": label, "epsilon": eps, "model": model, "kind": kind, "correct": int(ok.sum()),
            "total": int(ok.size), "accuracy": float(ok.mean()), "chance": chance, "ci_low": lo, "ci_high": hi,
            "unchanged": unchanged, "text": text,
        })

    # ---- score every condition
    t = time.perf_counter()
    n_models = len(attackers) + len(noise_aware) + len(utilities)
    tick = ProgressCounter(stage("attack and classify", len(conditions) * n_models), len(conditions) * n_models)
    att_chance = chance_accuracy(eval_set.authors)
    top_chance = None if topics is None else chance_accuracy(eval_set.topics or [])
    stage_time: dict[str, float] = {}
    for cond in conditions:
        for name, model in attackers.items():
            s = time.perf_counter()
            pred = _predict(model, cond.texts, make_rng(_condition_seed(cfg.seed, f"attack:{name}", cond.label,
                                                                       cond.eps)))
            stage_time[name] = stage_time.get(name, 0.0) + time.perf_counter() - s
            add_row(cond.label, cond.eps, name, "attack", pred, authors, att_chance, cond.unchanged, cond.release)
            tick(1)
        for name in noise_aware:
            s = time.perf_counter()
            assert cond.known is not None
            gen = make_rng(_condition_seed(cfg.seed, f"attack:{name}", cond.label, cond.eps))
            model = _make_attacker(name, cfg, emb, gen).fit(cond.known, eval_set.authors)
            pred = _predict(model, cond.texts, gen)
            stage_time[name] = stage_time.get(name, 0.0) + time.perf_counter() - s
            add_row(cond.label, cond.eps, name, "attack", pred, authors, att_chance, cond.unchanged, cond.release)
            tick(1)
        for name, model in utilities.items():
            s = time.perf_counter()
            pred = model.predict(cond.texts)
            stage_time[name] = stage_time.get(name, 0.0) + time.perf_counter() - s
            assert topics is not None and top_chance is not None
            add_row(cond.label, cond.eps, name, "utility", pred, topics, top_chance, cond.unchanged, cond.release)
            tick(1)
    # ---- reference rows: Koppel on the raw and the normalised snippet, in word order
    if cfg.reference_rows:
        kop = [a for a in fixed if a.startswith("koppel")]
        tick = ProgressCounter(stage("reference rows", 2 * len(kop)), 2 * len(kop))
        for text_kind, k_texts, u_texts in (
            ("raw", eval_set.known_raw, eval_set.unknown_raw), ("normalised", known, [u[:N] for u in eval_set.unknown])
        ):
            for name in kop:
                if text_kind == "normalised":
                    model = attackers[name]
                else:
                    gen = make_rng(_condition_seed(cfg.seed, "attacker-fit-raw", name, None))
                    model = _make_attacker(name, cfg, emb, gen).fit(k_texts, eval_set.authors)
                pred = model.predict(u_texts, seed=make_rng(_condition_seed(cfg.seed, f"reference:{name}", text_kind,
                                                                          None)))
                add_row(None, None, name, "attack", pred, authors, att_chance, 1.0, text_kind)
                tick(1)
    timings["score"] = time.perf_counter() - t
    timings.update({f"model:{k}": v for k, v in stage_time.items()})
    timings["total"] = time.perf_counter() - t0
    load["end"] = _load()
    return ExperimentResult(
        rows=rows,
        config=cfg,
        construction=eval_set.construction,
        bag_size=N,
        timings=timings,
        n_authors=len(eval_set.authors),
        n_topics=n_topics,
        mechanisms=mech_info,
        load=load,
    )
