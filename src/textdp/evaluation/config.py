"""The evaluation config: the TOML schema of ``textdp evaluate``, validated and resolved.

:func:`load_config` reads a file, :func:`config_from_dict` validates a parsed
table section by section (``[corpus]``, ``[mechanism]`` and its
``[mechanism.<label>]`` tables, ``[attackers]``, ``[utility]``, ``[run]``) and
returns an :class:`ExperimentConfig` whose ``mechanisms`` are resolved
:class:`MechanismSpec` objects. Every error is a one-line
:class:`~textdp.errors.ParameterError` naming the section and key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict, TypeVar, cast

from .._validation import check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError, ParameterTypeError

__all__ = ["ATTACKERS", "DEFAULT_ATTACKERS", "NOISE_AWARE_PREFIX", "UTILITY_MODELS", "CorpusOptions", "CorpusSettings",
           "ExperimentConfig", "MechanismSpec", "config_from_dict", "load_config"]

#: A TOML table as :mod:`tomllib` parses it.
Table = dict[str, object]
T = TypeVar("T")
D = TypeVar("D")


class CorpusOptions(TypedDict, total=False):
    """``[corpus]`` but its name: the keyword arguments of :func:`~textdp.evaluation.datasets.build_evaluation_set`."""

    data_dir: str
    author_field: str
    text_field: str
    topic_field: str
    filter_field: str
    strip_quotes: bool
    known_words: int
    unknown_words: int
    cut: str
    max_authors: int
    n_topics: int
    authors_per_topic: int
    max_topic_train: int
    split_field: str
    known_split: list[str]
    unknown_split: list[str]


class CorpusSettings(CorpusOptions, total=False):
    """``[corpus]``: ``name`` (a preset or a JSON-lines path) and the options."""

    name: str


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
_ATTACKER_KEYS = {"models", "koppel_trials", "koppel_features", "nn_distance", "truncate_known", "reference_rows"}
#: constructor parameters that a config sets through its own keys, never as a mechanism parameter
_NOT_PARAMS = {"epsilon", "embeddings", "seed", "stop_words", "vocab_size", "size", "size_from_data",
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
    params: dict[str, object] = field(default_factory=dict)
    postprocess: str | None = None
    decoder: str = "exact"
    bag: str = "truncate"
    size: int | None = None
    output_vocab: str = "full"
    topic_features: int = 0
    topic_feature_method: str = "chi2"

    @property
    def release(self) -> str:
        """``"bag"`` or ``"text"``: what the registry says the mechanism releases."""
        from ..mechanisms import entry

        return entry(self.name).releases

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

    corpus: CorpusSettings
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

    def to_dict(self) -> dict[str, object]:
        """Plain-data form (for ``settings.json``)."""
        return asdict(self)


def _get(section: Mapping[str, object], key: str, kind: type[T], default: D, where: str) -> T | D:
    """``section[key]`` if it has the TOML type ``kind`` (a bool is no number), ``default`` if absent."""
    if key not in section:
        return default
    val = section[key]
    if not isinstance(val, kind) or (isinstance(val, bool) and kind in (int, float)):
        raise ParameterTypeError(f"config [{where}] {key} has the wrong type ({type(val).__name__})")
    return val


def _epsilons(raw: object, where: str) -> list[float]:
    if not isinstance(raw, list) or not raw:
        raise ParameterError(f"config [{where}] needs epsilons = a non-empty list of numbers > 0")
    eps = [check_epsilon(e) for e in raw]
    if len(set(eps)) != len(eps):
        raise ParameterError(f"config [{where}] epsilons has repeated values")
    return eps


def _mechanism_labels(mech: Table) -> list[str]:
    """The labels of ``[mechanism]``: ``mechanism = NAME``, ``mechanisms = [LABELS]`` or the default."""
    if "mechanism" in mech and "mechanisms" in mech:
        raise ParameterError("config [mechanism]: give mechanism = NAME or mechanisms = [...], not both")
    if "mechanisms" in mech:
        given = mech["mechanisms"]
        if not isinstance(given, list) or not given or not all(isinstance(x, str) for x in given):
            raise ParameterError("config [mechanism] mechanisms must be a non-empty list of names")
        labels = [str(x) for x in given]
    elif "mechanism" in mech:
        name = mech["mechanism"]
        if not isinstance(name, str):
            raise ParameterTypeError("config [mechanism] mechanism must be a name (a string)")
        labels = [name]
    else:
        labels = ["earth-movers"]
    if len(set(labels)) != len(labels):
        raise ParameterError("config [mechanism] mechanisms has repeated names")
    tables = {k for k, v in mech.items() if isinstance(v, dict)}
    stray = sorted(tables - set(labels))
    if stray:
        raise ParameterError(f"config [mechanism.{stray[0]}] is not listed in mechanisms = [...]")
    return labels


def _check_spec(spec: MechanismSpec, where: str, accepted: tuple[str, ...]) -> None:
    """Refuse the options of ``spec`` that do not apply to its mechanism (one-line errors)."""
    from ..mechanisms.perturbation import POSTPROCESSORS

    name = spec.name
    for key in spec.params:
        if key in _NOT_PARAMS or key not in accepted:
            own = [p for p in accepted if p not in _NOT_PARAMS]
            raise ParameterError(f"config [{where}]: {name} has no parameter {key!r}; its parameters: "
                                 f"{', '.join(own) or 'none'}")
    if spec.postprocess is not None:
        check_choice(spec.postprocess, "postprocess", POSTPROCESSORS)
        if "postprocess" not in accepted:
            raise ParameterError(f"config [{where}]: postprocess applies to earth-movers and cmp, not {name}")
    if spec.decoder != "exact" and "decoder" not in accepted:
        raise ParameterError(f"config [{where}]: decoder applies to earth-movers, cmp, mahalanobis, not {name}")
    if spec.release == "text" and spec.bag != "truncate":
        raise ParameterError(f"config [{where}]: bag = {spec.bag!r} applies to bag mechanisms; {name} releases text")
    if spec.release == "bag" and spec.bag != "truncate" and "bag" not in accepted:
        raise ParameterError(f"config [{where}]: bag = {spec.bag!r} applies to earth-movers; {name} draws its bag "
                             "from the whole vocabulary")


def _mechanism_spec(label: str, table: Table, default_eps: list[float] | None, shared: Table) -> MechanismSpec:
    """The spec of ``[mechanism.<label>]`` (``table``, a copy) over the shared ``[mechanism]`` options."""
    from ..embeddings import DECODERS, OUTPUT_VOCABULARIES
    from ..mechanisms import MECHANISM_NAMES, mechanism_class
    from ..text import BAG_MODES
    from ..text.feature_selection import SELECTION_METHODS

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
    merged = {**shared, **opts}
    spec = MechanismSpec(
        label=label, name=name, epsilons=list(eps), params=table,
        postprocess=_get(merged, "postprocess", str, None, where),
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
    _check_spec(spec, where, mechanism_class(name).param_names())
    return spec


def _mechanism_specs(mech: Table, default_eps: list[float] | None, shared: Table) -> list[MechanismSpec]:
    """The ``[mechanism]`` section's specs: ``mechanism = NAME`` or ``mechanisms = [LABELS]`` plus sub-tables."""
    tables: dict[str, Table] = {k: v for k, v in mech.items() if isinstance(v, dict)}
    return [_mechanism_spec(label, dict(tables.get(label, {})), default_eps, shared)
            for label in _mechanism_labels(mech)]


def _sections(d: object) -> dict[str, Table]:
    """The five sections of a config (absent ones empty), each checked to be a table."""
    if not isinstance(d, dict):
        raise ParameterTypeError("config must be a TOML table")
    unknown = set(d) - {"corpus", "mechanism", "attackers", "utility", "run"}
    if unknown:
        raise ParameterError(f"unknown config section(s): {', '.join(sorted(unknown))}")
    out: dict[str, Table] = {}
    for section in ("corpus", "mechanism", "attackers", "utility", "run"):
        value = d.get(section, {})
        if not isinstance(value, dict):
            raise ParameterTypeError(f"config [{section}] must be a table, got {type(value).__name__}")
        out[section] = value
    return out


def _check_keys(section: Mapping[str, object], allowed: set[str] | frozenset[str], where: str) -> None:
    bad = set(section) - set(allowed)
    if bad:
        raise ParameterError(f"unknown key(s) in [{where}]: {', '.join(sorted(bad))}")


def _resolve(path: str | None, base_dir: Path | None) -> str | None:
    """``path`` made absolute against the config's folder (``None`` and absolute paths unchanged)."""
    if path is None or base_dir is None or Path(path).is_absolute():
        return path
    return str((base_dir / path).resolve())


def _corpus_section(section: Table, base_dir: Path | None) -> CorpusSettings:
    corpus = dict(section)
    if "name" not in corpus:
        raise ParameterError("config [corpus] needs name = a corpus name or a JSON-lines path")
    _check_keys(corpus, set(_CORPUS_KEYS), "corpus")
    for key in corpus:
        _get(corpus, key, _CORPUS_KEYS[key], None, "corpus")
    for key in ("known_split", "unknown_split"):
        value = corpus.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ParameterTypeError(f"config [corpus] {key} must be a list of split values (strings)")
    if "data_dir" in corpus:
        corpus["data_dir"] = _resolve(str(corpus["data_dir"]), base_dir)
    name = str(corpus["name"])
    if name.endswith((".jsonl", ".jsonl.gz", ".json")):
        corpus["name"] = _resolve(name, base_dir)
    return cast(CorpusSettings, corpus)


def _models(section: Table, where: str, default: list[str], known: dict[str, str], what: str) -> list[str]:
    return [check_choice(m, what, tuple(known)) for m in _get(section, "models", list, default, where)]


def config_from_dict(d: Mapping[str, object], *, base_dir: Path | None = None) -> ExperimentConfig:
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
    sections = _sections(d)
    corpus = _corpus_section(sections["corpus"], base_dir)
    mech = sections["mechanism"]
    _get(mech, "embeddings", str, None, "mechanism")
    _check_keys({k: v for k, v in mech.items() if not isinstance(v, dict)}, _SHARED_MECH_KEYS, "mechanism")
    default_eps = _epsilons(mech["epsilons"], "mechanism") if "epsilons" in mech else None
    shared: Table = {k: mech[k] for k in ("bag", "size", "decoder", "postprocess", "output_vocab", "topic_features",
                                   "topic_feature_method") if k in mech}
    specs = _mechanism_specs(mech, default_eps, shared)
    att, util, run = sections["attackers"], sections["utility"], sections["run"]
    _check_keys(att, _ATTACKER_KEYS, "attackers")
    _check_keys(util, {"models"}, "utility")
    _check_keys(run, {"seed", "bootstrap", "output"}, "run")
    domain = _get(mech, "domain_vocab", str, None, "mechanism")
    na_words = _get(mech, "noise_aware_known_words", int, None, "mechanism")
    return ExperimentConfig(
        corpus=corpus,
        epsilons=default_eps if default_eps is not None else specs[0].epsilons,
        attackers=_models(att, "attackers", DEFAULT_ATTACKERS, ATTACKERS, "attacker"),
        utility=_models(util, "utility", [], UTILITY_MODELS, "utility model"),
        embeddings=_resolve(None if mech.get("embeddings") is None else str(mech["embeddings"]), base_dir),
        vocab_size=None if mech.get("vocab_size") is None else check_positive_int(mech["vocab_size"], "vocab_size"),
        domain_vocab=domain if domain == "topic-train" else _resolve(domain, base_dir),
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

