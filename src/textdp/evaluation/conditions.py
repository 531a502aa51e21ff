"""The conditions of an experiment: what the attackers and utility models score.

A :class:`Condition` is one (mechanism label, epsilon) cell: the snippets in the
form the mechanism releases them, the fraction of words left unchanged, and the
known texts of the noise-aware attackers privatised the same way.
:func:`snippet_inputs` turns an evaluation set into the mechanisms' input,
:func:`unmodified_conditions` gives the rows without noise and
:func:`privatized_conditions` runs one configured mechanism over its epsilon
grid. :func:`make_mechanism` is the one place a mechanism is built.

Seeds: every condition draws from ``SeedSequence(seed)`` children keyed by the
stream, the label and the epsilon (:func:`condition_seed`), so a condition's
result does not depend on which other conditions are in the run.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from .._rng import make_rng
from ..embeddings import Embeddings
from ..errors import ParameterError, TextDPError
from ..progress import Counter as ProgressCounter
from ..progress import offset
from .config import NOISE_AWARE_PREFIX, ExperimentConfig, MechanismSpec
from .datasets import EvaluationSet

if TYPE_CHECKING:
    from ..mechanisms import DocumentDiagnostics, TextMechanism

__all__ = [
    "Condition",
    "Inputs",
    "MechanismInfo",
    "condition_seed",
    "domain_vocabulary",
    "make_mechanism",
    "privatized_conditions",
    "snippet_inputs",
    "unmodified_conditions",
]


def _key(*parts: object) -> int:
    """A stable 32-bit key of a condition (label, epsilon, stream) for its SeedSequence."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def condition_seed(seed: int, stream: str, label: str | None, eps: float | None) -> np.random.SeedSequence:
    """The seed of one stream of one condition (independent of the other conditions of the run)."""
    return np.random.SeedSequence(seed, spawn_key=(_key(stream), _key(label, eps)))


@dataclass
class Condition:
    """One scored cell: ``texts`` released by ``label`` at ``eps`` (``None``: no noise)."""

    label: str | None
    release: str
    eps: float | None
    texts: list[list[str]]
    unchanged: float
    known: list[list[str]] | None  # training texts of the noise-aware attackers


@dataclass
class Inputs:
    """The mechanisms' input: the snippets' in-vocabulary words, the bag size N and the known texts."""

    eval_set: EvaluationSet
    emb: Embeddings
    words_iv: list[list[str]]
    N: int
    known: list[list[str]]
    known_iv: list[list[str]]
    noise_aware: bool
    na_cap: int | None
    order: dict[str, int]


class MechanismInfo(TypedDict):
    """Per label: the spec, release form, bag size, vocabulary size and measured words/s (``results.json``)."""

    spec: dict[str, object]
    release: str
    bag_size: int
    vocab_size: int
    seconds: float
    words: int
    words_per_second: float | None
    selected_features: int | None


def chunks(words: list[str], n: int) -> list[list[str]]:
    """Consecutive bags of exactly ``n`` words (the remainder is dropped; at least one bag if possible)."""
    if len(words) < n:
        return [words] if words else []
    return [words[i : i + n] for i in range(0, len(words) - n + 1, n)]


def release_form(words: list[str], release: str, order: dict[str, int]) -> list[str]:
    """Unmodified words in the form a mechanism releases them: sorted by vocabulary row (bag) or in order (text)."""
    return sorted(words, key=order.__getitem__) if release == "bag" else list(words)


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


def snippet_inputs(cfg: ExperimentConfig, eval_set: EvaluationSet, emb: Embeddings) -> Inputs:
    """The snippets' in-vocabulary words (first N; N = shortest unless ``size`` is set) and the known texts."""
    index = emb.index
    words_iv = [[w for w in u if w in index] for u in eval_set.unknown]
    if min(len(r) for r in words_iv) == 0:
        raise TextDPError("a snippet has no in-vocabulary word; use a larger vocabulary")
    shortest = min(len(r) for r in words_iv)
    N = cfg.size if cfg.size is not None else shortest
    for spec in cfg.mechanisms:
        n_spec = spec.size if spec.size is not None else N
        if spec.bag == "truncate" and n_spec > shortest and not spec.topic_features:
            raise ParameterError(f"[mechanism] size = {n_spec} but the shortest snippet has {shortest} in-vocabulary "
                                 "words; lower size or use bag = \"sample\"")
    known = [k[:N] for k in eval_set.known] if cfg.truncate_known else eval_set.known
    return Inputs(
        eval_set=eval_set, emb=emb, words_iv=words_iv, N=N, known=known,
        known_iv=[[w for w in k if w in index] for k in eval_set.known],
        noise_aware=any(a.startswith(NOISE_AWARE_PREFIX) for a in cfg.attackers),
        na_cap=cfg.noise_aware_known_words, order={w: i for i, w in enumerate(emb.words)},
    )


def unmodified_conditions(cfg: ExperimentConfig, inp: Inputs) -> list[Condition]:
    """The rows without noise, one per release form in the run (a bag sorted by vocabulary row, or the text)."""
    from ..text import make_bag

    emb, N, specs = inp.emb, inp.N, cfg.mechanisms
    out = []
    for release in dict.fromkeys(spec.release for spec in specs):
        bag_spec = next((s for s in specs if s.release == release), None)
        if release == "bag" and bag_spec is not None and bag_spec.bag == "sample":
            gen = make_rng(condition_seed(cfg.seed, "mechanism", None, None))
            none_texts = [[emb.words[j] for j in np.sort(make_bag(np.array([emb.index[w] for w in r]), N, "sample",
                                                                  gen))] for r in inp.words_iv]
        else:
            none_texts = [release_form(r[:N], release, inp.order) for r in inp.words_iv]
        na_known = None
        if inp.noise_aware:
            capped = [k[: inp.na_cap] if inp.na_cap else k for k in inp.known_iv]
            if release == "bag":
                na_known = [[w for c in chunks(k, N) for w in release_form(c, "bag", inp.order)] for k in capped]
            else:
                na_known = capped
        out.append(Condition(None, release, None, none_texts, 1.0, na_known))
    return out


class TopicSelections:
    """The topic-discriminative vocabularies of ``topic_features``, fitted once per (K, method) on public texts."""

    def __init__(self, eval_set: EvaluationSet) -> None:
        self.eval_set = eval_set
        self._cache: dict[tuple[int, str], frozenset[str]] = {}

    def __call__(self, spec: MechanismSpec) -> frozenset[str] | None:
        from ..text.feature_selection import TopicFeatureSelector

        if not spec.topic_features:
            return None
        key = (spec.topic_features, spec.topic_feature_method)
        if key not in self._cache:
            es = self.eval_set
            if not es.topic_train_texts:
                raise ParameterError(
                    f"topic_features needs a corpus with public topic-training texts ({es.name} has none)"
                )
            sel = TopicFeatureSelector(n_features=spec.topic_features, method=spec.topic_feature_method)
            self._cache[key] = sel.fit_public([" ".join(t) for t in es.topic_train_texts],
                                              es.topic_train_labels).vocabulary_
        return self._cache[key]


def make_mechanism(spec: MechanismSpec, epsilon: float, vocab: Embeddings, size: int) -> TextMechanism:
    """The fitted mechanism of ``spec`` at ``epsilon`` over ``vocab`` (bag mechanisms draw bags of ``size``)."""
    from ..pipeline import build_mechanism

    if spec.release == "bag":
        return build_mechanism(spec.name, epsilon=epsilon, embeddings=vocab, stop_words="english",
                               decoder=spec.decoder, postprocess=spec.postprocess, params=spec.params,
                               size=size, bag=spec.bag)
    return build_mechanism(spec.name, epsilon=epsilon, embeddings=vocab, stop_words="english",
                           decoder=spec.decoder, postprocess=spec.postprocess, params=spec.params)


@dataclass
class _SpecInput:
    inputs: list[list[str]]  # the snippets' words this mechanism may read
    n_spec: int  # its bag size N
    snippets: list[str]  # what it privatises
    known: list[list[str]]  # per author, the known texts it privatises for the noise-aware attackers


def _spec_input(inp: Inputs, spec: MechanismSpec, vocab: Embeddings, keep: frozenset[str] | None) -> _SpecInput:
    v_index, na_cap = vocab.index, inp.na_cap
    inputs = [[w for w in r if w in v_index and (keep is None or w in keep)] for r in inp.words_iv]
    if min(len(r) for r in inputs) == 0:
        raise TextDPError(f"[mechanism.{spec.label}]: a snippet has no word left after topic-feature selection; "
                          "raise topic_features")
    n_spec = spec.size if spec.size is not None else (inp.N if keep is None else min(len(r) for r in inputs))
    if spec.bag == "truncate" and n_spec > min(len(r) for r in inputs):
        raise ParameterError(f"[mechanism.{spec.label}] size = {n_spec} exceeds the shortest selected snippet")
    if inp.noise_aware and na_cap and spec.release == "bag" and spec.bag == "truncate" and na_cap < n_spec:
        raise ParameterError(f"[mechanism.{spec.label}]: noise_aware_known_words = {na_cap} is smaller than its "
                             f"bag size N = {n_spec}; raise noise_aware_known_words to at least {n_spec} or lower "
                             "size")
    sample = spec.release == "bag" and spec.bag == "sample"
    known: list[list[str]] = []
    if inp.noise_aware:
        k_words = [[w for w in k if w in v_index and (keep is None or w in keep)] for k in inp.known_iv]
        k_words = [k[:na_cap] if na_cap else k for k in k_words]
        known = [[" ".join(c) for c in chunks(k, n_spec)] if spec.release == "bag" else [" ".join(k)]
                 for k in k_words]
    return _SpecInput(inputs, n_spec, [" ".join(r if sample else r[:n_spec]) for r in inputs], known)


def _privatise_known(mech: TextMechanism, known: list[list[str]], rng: np.random.Generator) -> list[list[str]]:
    """The noise-aware attackers' training texts: every author's known chunks privatised, joined per author."""
    flat = [c for k in known for c in k]
    owner = [i for i, k in enumerate(known) for _ in k]
    out: list[list[str]] = [[] for _ in known]
    for i, d in zip(owner, mech.privatize_batch(flat, seed=rng, seeded=True), strict=True):
        out[i].extend(d.words)
    return out


def _condition(cfg: ExperimentConfig, spec: MechanismSpec, eps: float, mech: TextMechanism, si: _SpecInput,
               tick: ProgressCounter) -> Condition:
    diags: list[DocumentDiagnostics] = []  # private diagnostics (the experiment knows its inputs anyway)
    docs = mech.privatize_batch(si.snippets, seed=make_rng(condition_seed(cfg.seed, "mechanism", spec.label, eps)),
                                seeded=True, private_report=diags, progress=offset(tick))
    na_texts = None
    if si.known:
        na_texts = _privatise_known(mech, si.known, make_rng(condition_seed(cfg.seed, "known", spec.label, eps)))
    unchanged = float(np.mean([d.unchanged_fraction() for d in diags]))
    return Condition(spec.label, spec.release, eps, [list(d.words) for d in docs], unchanged, na_texts)


def privatized_conditions(cfg: ExperimentConfig, inp: Inputs, spec: MechanismSpec, selections: TopicSelections,
                          tick: ProgressCounter) -> tuple[list[Condition], MechanismInfo]:
    """``spec`` run at every epsilon of its grid (and its topic selection alone, without noise, if any)."""
    from ..embeddings import output_vocabulary

    keep = selections(spec)
    vocab = output_vocabulary(inp.emb, spec.output_vocab, "english")
    si = _spec_input(inp, spec, vocab, keep)
    out = []
    if keep is not None:  # the selection alone, without noise
        known = [[w for c in k for w in release_form(c.split(), spec.release, inp.order)] for k in si.known]
        out.append(Condition(spec.label, spec.release, None,
                             [release_form(r[: si.n_spec], spec.release, inp.order) for r in si.inputs], 1.0,
                             known if inp.noise_aware else None))
    seconds, n_words = 0.0, 0
    for eps in spec.epsilons:
        mech = make_mechanism(spec, eps, vocab, si.n_spec)
        s = time.perf_counter()
        cond = _condition(cfg, spec, eps, mech, si, tick)
        seconds += time.perf_counter() - s
        n_words += sum(len(r) for r in cond.texts) + sum(len(r) for r in cond.known or [])
        out.append(cond)
    info = MechanismInfo(
        spec=asdict(spec), release=spec.release, bag_size=si.n_spec, vocab_size=vocab.vocab_size,
        seconds=seconds, words=n_words, words_per_second=n_words / seconds if seconds > 0 else None,
        selected_features=None if keep is None else len(keep),
    )
    return out, info
