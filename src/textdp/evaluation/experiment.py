"""The privacy-utility experiment of Fernandes, Dras & McIver (POST 2019, Section 6).

For every author of an :class:`~textdp.evaluation.datasets.EvaluationSet` the
attackers get the (unmodified) known texts and try to attribute the snippets;
the utility models try to recover the snippet's topic. Snippets are first
turned into the mechanism's input bag (in-vocabulary words, truncated to the
shortest length N in the set) and scored

* unmodified (``epsilon = None``): the input bag itself, in the same order the
  mechanism writes its output (by vocabulary row), so that the only difference
  between the rows is the noise;
* after :class:`textdp.mechanisms.EarthMoversPrivacy` at each epsilon of the grid.

Two reference rows (``epsilon = None``, field ``text``) score the Koppel
attackers on the raw and on the normalised snippet in its original word order,
the numbers of the independent replication.

Seeds: one integer seeds everything. ``SeedSequence(seed)`` is split into
streams for the mechanism, the attackers, the utility models and the bootstrap,
and each of these into one child per condition, so a condition's result does
not depend on which other conditions are in the grid.
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError, ParameterTypeError, TextDPError, require
from .datasets import EvaluationSet, build_evaluation_set
from .stats import bootstrap_ci, chance_accuracy

__all__ = [
    "ATTACKERS",
    "UTILITY_MODELS",
    "ExperimentConfig",
    "ExperimentResult",
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
}


@dataclass
class ExperimentConfig:
    """Settings of one evaluation run (the TOML config, resolved).

    See ``examples/evaluate-*.toml`` for every key with a comment.
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


def config_from_dict(d: dict[str, Any], *, base_dir: Path | None = None) -> ExperimentConfig:
    """Validate a parsed TOML config and resolve defaults.

    >>> cfg = config_from_dict({"corpus": {"name": "reuter_50_50"}, "mechanism": {"epsilons": [10, 5]},
    ...                         "attackers": {"models": ["koppel-pan"]}})
    >>> cfg.epsilons, cfg.attackers, cfg.seed
    ([10.0, 5.0], ['koppel-pan'], 0)
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
    if base_dir is not None:
        for key in ("data_dir",):
            if key in corpus and not Path(str(corpus[key])).is_absolute():
                corpus[key] = str((base_dir / str(corpus[key])).resolve())
        name = str(corpus["name"])
        if name.endswith((".jsonl", ".jsonl.gz", ".json")) and not Path(name).is_absolute():
            corpus["name"] = str((base_dir / name).resolve())
    mech = d.get("mechanism", {})
    _get(mech, "embeddings", str, None, "mechanism")
    bad = set(mech) - {"epsilons", "embeddings", "vocab_size", "domain_vocab", "domain_min_count", "bag", "size",
                       "decoder"}
    if bad:
        raise ParameterError(f"unknown key(s) in [mechanism]: {', '.join(sorted(bad))}")
    eps_raw = mech.get("epsilons")
    if not isinstance(eps_raw, list) or not eps_raw:
        raise ParameterError("config [mechanism] needs epsilons = a non-empty list of numbers > 0")
    epsilons = [check_epsilon(e) for e in eps_raw]
    if len(set(epsilons)) != len(epsilons):
        raise ParameterError("config [mechanism] epsilons has repeated values")
    att = d.get("attackers", {})
    bad = set(att) - {"models", "koppel_trials", "koppel_features", "nn_distance", "truncate_known", "reference_rows"}
    if bad:
        raise ParameterError(f"unknown key(s) in [attackers]: {', '.join(sorted(bad))}")
    attackers = list(_get(att, "models", list, ["koppel-pan", "koppel-2011", "nn-author", "char-ngram"], "attackers"))
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
    from ..embeddings import DECODERS
    from ..text import BAG_MODES
    return ExperimentConfig(
        corpus=corpus,
        epsilons=epsilons,
        attackers=attackers,
        utility=utility,
        embeddings=emb,
        vocab_size=None if mech.get("vocab_size") is None else check_positive_int(mech["vocab_size"], "vocab_size"),
        domain_vocab=domain,
        domain_min_count=check_positive_int(_get(mech, "domain_min_count", int, 1, "mechanism"), "domain_min_count"),
        bag=check_choice(_get(mech, "bag", str, "truncate", "mechanism"), "bag", BAG_MODES),
        size=None if mech.get("size") is None else check_positive_int(mech["size"], "size"),
        decoder=check_choice(_get(mech, "decoder", str, "exact", "mechanism"), "decoder", DECODERS),
        seed=check_positive_int(_get(run, "seed", int, 0, "run"), "seed", minimum=0),
        bootstrap=check_positive_int(_get(run, "bootstrap", int, 1000, "run"), "bootstrap"),
        koppel_trials=check_positive_int(_get(att, "koppel_trials", int, 100, "attackers"), "koppel_trials"),
        koppel_features=check_positive_int(_get(att, "koppel_features", int, 20_000, "attackers"), "koppel_features"),
        nn_distance=check_choice(_get(att, "nn_distance", str, "mean", "attackers"), "nn_distance", ("mean", "emd")),
        truncate_known=bool(_get(att, "truncate_known", bool, False, "attackers")),
        reference_rows=bool(_get(att, "reference_rows", bool, True, "attackers")),
        output=_get(run, "output", str, None, "run"),
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
    (epsilon, model) with ``epsilon`` (``None`` = unmodified), ``model``,
    ``kind`` (``attack`` / ``utility``), ``correct``, ``total``, ``accuracy``,
    ``chance``, ``ci_low``, ``ci_high`` (95% percentile bootstrap),
    ``unchanged`` (fraction of snippet words the mechanism left unchanged) and
    ``text`` (``bag``; ``raw`` / ``normalised`` for the reference rows).
    """

    rows: list[dict[str, Any]]
    config: ExperimentConfig
    construction: dict[str, Any]
    bag_size: int
    timings: dict[str, float]
    n_authors: int
    n_topics: int | None


StageCallback = Callable[[str, int], Callable[[int], None]]


def _no_progress(name: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def _make_attacker(name: str, cfg: ExperimentConfig, emb: object, rng: np.random.Generator) -> Any:
    from ..attacks import CharNgramAttacker, KoppelAttacker, NearestNeighbourAttacker, SentenceEmbeddingAttacker

    if name == "koppel-pan":
        return KoppelAttacker("pan", trials=cfg.koppel_trials, n_features=cfg.koppel_features, rng=rng)
    if name == "koppel-2011":
        return KoppelAttacker("koppel2011", trials=cfg.koppel_trials, n_features=cfg.koppel_features, rng=rng)
    if name == "nn-author":
        return NearestNeighbourAttacker(emb, k=1, distance=cfg.nn_distance)
    if name == "char-ngram":
        require("sklearn", "eval")
        return CharNgramAttacker()
    if name == "minilm":
        require("onnxruntime", "minilm")
        return SentenceEmbeddingAttacker()
    raise ParameterError(f"unknown attacker {name!r}")  # pragma: no cover


def _make_utility(name: str, cfg: ExperimentConfig, emb: object, seed: int) -> Any:
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
        return model.predict(texts, rng=rng)
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


def run_experiment(
    cfg: ExperimentConfig,
    *,
    progress: StageCallback | None = None,
    eval_set: EvaluationSet | None = None,
    embeddings: object | None = None,
) -> ExperimentResult:
    """Run the experiment of ``cfg`` and return its rows (see :class:`ExperimentResult`).

    ``progress(stage, total)`` is called at the start of each stage and returns
    a function called with the number of steps done.
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import EarthMoversPrivacy

    stage = progress or _no_progress
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if "minilm" in cfg.attackers:
        require("onnxruntime", "minilm")
    if "fasttext-topic" in cfg.utility:
        require("fasttext", "fasttext")

    tick = stage("load corpus", 1)
    if eval_set is None:
        kwargs = {k: v for k, v in cfg.corpus.items() if k != "name"}
        eval_set = build_evaluation_set(str(cfg.corpus["name"]), **kwargs)
    tick(1)
    timings["corpus"] = time.perf_counter() - t0

    t = time.perf_counter()
    tick = stage("load embeddings", 1)
    emb = embeddings if embeddings is not None else load_embeddings(cfg.embeddings, vocab_size=cfg.vocab_size)
    tick(1)
    timings["embeddings"] = time.perf_counter() - t

    if cfg.domain_vocab is not None:
        emb = emb.restrict(words=domain_vocabulary(cfg, eval_set))  # type: ignore[attr-defined]

    # the mechanism's input bags: in-vocabulary words, truncated to the shortest length N
    index = emb.index  # type: ignore[attr-defined]
    words = emb.words  # type: ignore[attr-defined]
    rows_iv = [[index[w] for w in u if w in index] for u in eval_set.unknown]
    if min(len(r) for r in rows_iv) == 0:
        raise TextDPError("a snippet has no in-vocabulary word; use a larger vocabulary")
    shortest = min(len(r) for r in rows_iv)
    N = cfg.size if cfg.size is not None else shortest
    if cfg.bag == "truncate" and N > shortest:
        raise ParameterError(f"[mechanism] size = {N} but the shortest snippet has {shortest} in-vocabulary words; "
                             "lower size or use bag = \"sample\"")
    snippets = [" ".join(u) for u in eval_set.unknown]
    known = eval_set.known
    if cfg.truncate_known:
        known = [k[:N] for k in known]
    authors = np.array(eval_set.authors, dtype=object)
    topics = None if eval_set.topics is None else np.array(eval_set.topics, dtype=object)
    utility = cfg.utility if topics is not None else []
    n_topics = None if topics is None else len(set(eval_set.topics or []))

    root = np.random.SeedSequence(cfg.seed)
    mech_ss, att_ss, boot_ss, util_ss = root.spawn(4)
    n_cond = len(cfg.epsilons) + 1
    mech_seeds = mech_ss.spawn(n_cond)
    att_seeds = att_ss.spawn(n_cond + 2)
    boot_seeds = boot_ss.spawn(n_cond + 2)
    if cfg.bag == "truncate":
        bag_none = [[words[j] for j in sorted(r[:N])] for r in rows_iv]
    else:  # the unmodified row gets its own sampled bag (stream 0 of the mechanism seeds)
        from ..text import make_bag

        gen = make_rng(mech_seeds[0])
        bag_none = [[words[j] for j in np.sort(make_bag(np.array(r), N, cfg.bag, gen))] for r in rows_iv]

    # ---- privatise the snippets at every epsilon
    t = time.perf_counter()
    conditions: list[tuple[float | None, list[list[str]], float]] = [(None, bag_none, 1.0)]
    tick = stage("privatise snippets", len(cfg.epsilons) * len(snippets))
    for i, eps in enumerate(cfg.epsilons):
        mech = EarthMoversPrivacy(epsilon=eps, size=N, embeddings=emb, bag=cfg.bag, decoder=cfg.decoder,
                                  rng=make_rng(mech_seeds[i + 1]))
        diags: list[Any] = []  # private diagnostics (the experiment knows its inputs anyway)
        docs = mech.privatize_batch(snippets, progress=tick, private_report=diags)
        unchanged = float(np.mean([d.unchanged_fraction() for d in diags]))
        conditions.append((eps, [list(d.words) for d in docs], unchanged))
    timings["mechanism"] = time.perf_counter() - t

    # ---- fit the attackers and utility models (once)
    t = time.perf_counter()
    tick = stage("fit models", len(cfg.attackers) + len(utility))
    attackers: dict[str, Any] = {}
    for name in cfg.attackers:
        attackers[name] = _make_attacker(name, cfg, emb, make_rng(att_ss.spawn(1)[0])).fit(known, eval_set.authors)
        tick(1)
    utilities: dict[str, Any] = {}
    for j, name in enumerate(utility):
        model = _make_utility(name, cfg, emb, int(util_ss.generate_state(1)[0]) + j)
        if name == "knn-topic":
            model.fit(known, eval_set.topics)
        else:
            model.fit(eval_set.topic_train_texts, eval_set.topic_train_labels)
        utilities[name] = model
        tick(1)
    timings["fit"] = time.perf_counter() - t

    rows: list[dict[str, Any]] = []

    def add_row(eps: float | None, model: str, kind: str, pred: np.ndarray, truth: np.ndarray, chance: float,
                unchanged: float, text: str, boot: np.random.SeedSequence) -> None:
        ok = np.asarray(pred == truth, dtype=bool)
        lo, hi = bootstrap_ci(ok, make_rng(boot), n_boot=cfg.bootstrap)
        rows.append({
            "epsilon": eps, "model": model, "kind": kind, "correct": int(ok.sum()), "total": int(ok.size),
            "accuracy": float(ok.mean()), "chance": chance, "ci_low": lo, "ci_high": hi,
            "unchanged": unchanged, "text": text,
        })

    # ---- score every condition
    t = time.perf_counter()
    tick = stage("attack and classify", n_cond * (len(attackers) + len(utilities)))
    att_chance = chance_accuracy(eval_set.authors)
    top_chance = None if topics is None else chance_accuracy(eval_set.topics or [])
    stage_time: dict[str, float] = {}
    for ci, (eps, texts, unchanged) in enumerate(conditions):
        boot_children = boot_seeds[ci].spawn(len(attackers) + len(utilities))
        att_children = att_seeds[ci].spawn(len(attackers))
        for ai, (name, model) in enumerate(attackers.items()):
            s = time.perf_counter()
            pred = _predict(model, texts, make_rng(att_children[ai]))
            stage_time[name] = stage_time.get(name, 0.0) + time.perf_counter() - s
            add_row(eps, name, "attack", pred, authors, att_chance, unchanged, "bag", boot_children[ai])
            tick(1)
        for ui, (name, model) in enumerate(utilities.items()):
            s = time.perf_counter()
            pred = model.predict(texts)
            stage_time[name] = stage_time.get(name, 0.0) + time.perf_counter() - s
            assert topics is not None and top_chance is not None
            add_row(eps, name, "utility", pred, topics, top_chance, unchanged, "bag", boot_children[len(attackers) + ui])
            tick(1)
    # ---- reference rows: Koppel on the raw and the normalised snippet, in word order
    if cfg.reference_rows:
        kop = [a for a in cfg.attackers if a.startswith("koppel")]
        tick = stage("reference rows", 2 * len(kop))
        for ri, (text_kind, k_texts, u_texts) in enumerate(
            (("raw", eval_set.known_raw, eval_set.unknown_raw), ("normalised", known, [u[:N] for u in eval_set.unknown]))
        ):
            for ki, name in enumerate(kop):
                if text_kind == "normalised":
                    model = attackers[name]
                else:
                    model = _make_attacker(name, cfg, emb, make_rng(att_ss.spawn(1)[0])).fit(k_texts, eval_set.authors)
                gen = make_rng(att_seeds[n_cond + ri].spawn(len(kop))[ki])
                pred = model.predict(u_texts, rng=gen)
                boot = boot_seeds[n_cond + ri].spawn(len(kop))[ki]
                add_row(None, name, "attack", pred, authors, att_chance, 1.0, text_kind, boot)
                tick(1)
    timings["score"] = time.perf_counter() - t
    timings.update({f"model:{k}": v for k, v in stage_time.items()})
    timings["total"] = time.perf_counter() - t0
    return ExperimentResult(
        rows=rows,
        config=cfg,
        construction=eval_set.construction,
        bag_size=N,
        timings=timings,
        n_authors=len(eval_set.authors),
        n_topics=n_topics,
    )
