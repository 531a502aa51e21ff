"""Evaluating sentence rewriting: semantic similarity, authorship, stylometric change, and the ε sweep.

Metrics (for the paper's Table 1, Bo et al. NAACL 2021):

* **semantic similarity** — cosine of all-MiniLM-L6-v2 sentence embeddings
  (:func:`textdp.attacks.sentence.minilm_embed`) of each input sentence and its rewrite,
  averaged; a stand-in for the paper's Universal Sentence Encoder (not installable
  offline). Higher is better.
* **authorship** — the accuracy of an attribution classifier trained on the authors'
  *original* documents (character 2-4-gram TF-IDF + linear SVM,
  :class:`textdp.attacks.char_ngrams.CharNgramAttacker`) on the *rewritten* test
  documents, against chance (1 / number of authors). Lower is better.
* **stylometric change** — :func:`stylometric_features` of input and output (per
  document), each feature divided by its standard deviation over the original
  documents, and the Euclidean distance between the two vectors, averaged. The paper
  does not define its measure; this one is documented here. Higher means more change.

:func:`run_generation_sweep` rewrites the test documents of an evaluation corpus with
ER-AE, AE-DP, SynTF and Random-R over an ε grid, at **equal per-sentence bounds**:
each ER-AE nominal ε gives a per-sentence bound ``B`` (:func:`two_set_bound`), and the
other mechanisms are calibrated to the same ``B`` (AE-DP and Random-R: ``B / L_max`` per
token; SynTF: ``B`` per sentence). :func:`write_training_corpus` writes the rewriter's
training sentences from the corpora's *train* splits (disjoint from the evaluated test
documents), so the guarantee's model case is ``disjoint``.

An optional ``[lm]`` table adds the language-model rewriters (``dp-prompt``,
``dp-paraphrase``, ``dp-mlm``, ``dp-bart``): :func:`lm_rows` runs each configured one at
each ε of the grid (its own ε, not calibrated to ``B``) on the same test documents, with
the same document measures, in a table ``lm`` of the same report and plot.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from .._rng import make_rng, spawn
from .._validation import check_positive_int
from ..errors import ParameterError, ParameterTypeError
from ..io import atomic_writer, write_json
from ..progress import Counter as ProgressCounter
from ..progress import StageProgress
from ..text import split_sentences, tokenize
from .datasets import PRESETS, read_jsonl, resolve_data_dir, strip_quoted

if TYPE_CHECKING:
    from ..generation.rewriter import Rewriter

__all__ = [
    "FUNCTION_WORDS",
    "AuthorshipDocuments",
    "Condition",
    "GenerationConfig",
    "SweepResult",
    "SweepRow",
    "check_lm_models",
    "generation_config_from_dict",
    "lm_rows",
    "load_authorship_documents",
    "load_generation_config",
    "normalize_text",
    "plot_privacy_utility",
    "render_generation_markdown",
    "run_generation_sweep",
    "semantic_similarity",
    "stylometric_distance",
    "stylometric_features",
    "sweep_conditions",
    "write_generation_report",
    "write_training_corpus",
]

#: Function words of the stylometric profile (a short list of frequent English function words).
FUNCTION_WORDS: tuple[str, ...] = (
    "the", "of", "and", "a", "to", "in", "is", "that", "it", "for", "as", "with", "was", "on", "be", "by", "at",
    "this", "have", "from", "or", "but", "not", "are", "which", "an", "they", "he", "she", "we", "i", "you",
    "would", "will", "there", "their", "been", "has", "were", "can", "if", "so", "what", "all", "about", "more",
)
_PUNCT = (",", ".", ";", ":", "!", "?", '"', "'", "(", "-")


def stylometric_features(text: str) -> np.ndarray:
    """A documented stylometric profile of ``text`` (``8 + 10 + 46`` values).

    Mean word length (letters), mean sentence length (tokens), type-token ratio, share of
    capitalised words, share of digits tokens, share of punctuation tokens, share of
    words longer than 6 letters, share of hapax legomena; the rate per token of 10
    punctuation marks; the rate per token of the 46 :data:`FUNCTION_WORDS`.

    >>> f = stylometric_features("The cat sat. The dog, too!")
    >>> f.shape, round(float(f[1]), 2)
    ((64,), 4.5)
    """
    toks = tokenize(text, punctuation=True)
    n = max(len(toks), 1)
    words = [t for t in toks if t[0].isalpha()]
    nw = max(len(words), 1)
    raw_words = re.findall(r"[^\W\d_]+", text)
    sentences = max(len(split_sentences(text)), 1)
    counts = Counter(words)
    basic = [
        sum(len(w) for w in words) / nw,
        len(toks) / sentences,
        len(counts) / nw,
        sum(1 for w in raw_words if w[0].isupper()) / max(len(raw_words), 1),
        sum(1 for t in toks if t[0].isdigit()) / n,
        sum(1 for t in toks if not t[0].isalnum()) / n,
        sum(1 for w in words if len(w) > 6) / nw,
        sum(1 for c in counts.values() if c == 1) / nw,
    ]
    tc = Counter(toks)
    punct = [tc[p] / n for p in _PUNCT]
    fw = [tc[w] / n for w in FUNCTION_WORDS]
    return np.array(basic + punct + fw, dtype=np.float64)


def stylometric_distance(inputs: Sequence[str], outputs: Sequence[str], scale: np.ndarray | None = None) -> np.ndarray:
    """Per-pair Euclidean distance of :func:`stylometric_features`, features divided by ``scale``.

    ``scale`` defaults to the features' standard deviations over ``inputs`` (zeros -> 1).

    >>> d = stylometric_distance(["The cat sat.", "A dog ran far away!"], ["The cat sat.", "dog"])
    >>> float(d[0]), bool(d[1] > 0)
    (0.0, True)
    """
    a = np.stack([stylometric_features(t) for t in inputs])
    b = np.stack([stylometric_features(t) for t in outputs])
    if scale is None:
        scale = a.std(axis=0)
    s = np.where(np.asarray(scale) > 0, scale, 1.0)
    return np.linalg.norm((a - b) / s, axis=1)


def semantic_similarity(inputs: Sequence[str], outputs: Sequence[str]) -> np.ndarray:
    """Cosine of all-MiniLM-L6-v2 embeddings of each input and its output (extra ``minilm``).

    A stand-in for the Universal Sentence Encoder of the paper. Empty outputs score 0.
    """
    from ..attacks.sentence import minilm_embed

    if len(inputs) != len(outputs):
        raise ParameterError("inputs and outputs differ in length")
    a = minilm_embed(list(inputs))
    nonempty = [i for i, t in enumerate(outputs) if t.strip()]
    sims = np.zeros(len(inputs))
    if nonempty:
        b = minilm_embed([outputs[i] for i in nonempty])
        sims[nonempty] = np.sum(a[nonempty] * b, axis=1)
    return sims


# --------------------------------------------------------------------------------------------
# training corpus


def _rows(corpus: str, data_dir: str | Path | None) -> list[dict[str, object]]:
    if corpus not in PRESETS:
        raise ParameterError(f"unknown corpus {corpus!r}; choose one of: {', '.join(PRESETS)}")
    return list(read_jsonl(resolve_data_dir(data_dir) / PRESETS[corpus]["path"]))


def _clean(corpus: str, text: str) -> str:
    return strip_quoted(text) if PRESETS[corpus].get("strip_quotes") else text


#: The rewriter's training sentences: train splits of the three development corpora (60,000 sentences).
TRAINING_SOURCES: dict[str, int] = {"reuter_50_50": 30_000, "pan11_enron": 10_000, "20newsgroups": 20_000}


def write_training_corpus(
    path: str | Path,
    sources: dict[str, int],
    *,
    data_dir: str | Path | None = None,
    split: str = "train",
    seed: int = 0,
) -> dict[str, int]:
    """Write training sentences (JSONL, one sentence per line) from the ``split`` of each corpus.

    ``sources`` maps a corpus preset to the number of sentences sampled (uniformly, with
    ``seed``) from that corpus's ``split`` documents. Returns the counts written. The
    file holds corpus text: write it outside the repository.
    """
    out: list[dict[str, str]] = []
    counts: dict[str, int] = {}
    rngs = spawn(seed, len(sources))
    for (corpus, n), g in zip(sources.items(), rngs, strict=True):
        sents = [
            s for row in _rows(corpus, data_dir) if row.get("split") == split and isinstance(row.get("text"), str)
            for s in split_sentences(_clean(corpus, str(row["text"])))
        ]
        if not sents:
            raise ParameterError(f"{corpus}: no sentences in split {split!r}")
        pick = np.sort(g.choice(len(sents), size=min(int(n), len(sents)), replace=False))
        out.extend({"id": f"{corpus}-{i}", "text": sents[i]} for i in pick.tolist())
        counts[corpus] = int(pick.size)
    with atomic_writer(path) as fh:
        for rec in out:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return counts


# --------------------------------------------------------------------------------------------
# authorship documents


@dataclass
class AuthorshipDocuments:
    """Original training documents and test documents of a set of authors (raw text)."""

    name: str
    train_texts: list[str]
    train_labels: list[str]
    test_ids: list[str]
    test_texts: list[str]
    test_labels: list[str]
    construction: dict[str, object] = field(default_factory=dict)


def load_authorship_documents(
    corpus: str,
    *,
    data_dir: str | Path | None = None,
    authors: int = 50,
    train_docs: int = 50,
    test_docs: int = 4,
    min_words: int = 20,
    seed: int = 0,
) -> AuthorshipDocuments:
    """Training (``split == "train"``) and test documents of the authors with most documents.

    An author needs at least ``test_docs`` test documents and 5 training documents of at
    least ``min_words`` words (20NG quotes stripped); the ``authors`` authors with most
    training documents are kept (ties: by name); per author at most ``train_docs``
    training and exactly ``test_docs`` test documents are drawn with ``seed``.
    """
    authors = check_positive_int(authors, "authors")
    train_n, test_n = check_positive_int(train_docs, "train_docs"), check_positive_int(test_docs, "test_docs")
    by_author: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: {"train": [], "test": []})
    filt = PRESETS.get(corpus, {}).get("filter_field")
    for row in _rows(corpus, data_dir):
        a, text, split = row.get("author"), row.get("text"), row.get("split")
        if a is None or not isinstance(text, str) or split not in ("train", "test"):
            continue
        if filt and not row.get(filt):
            continue
        text = _clean(corpus, text)
        if len(text.split()) >= min_words:
            by_author[str(a)][split].append((str(row.get("id")), text))
    eligible = [a for a, d in by_author.items() if len(d["test"]) >= test_n and len(d["train"]) >= 5]
    eligible.sort(key=lambda a: (-len(by_author[a]["train"]), a))
    chosen = sorted(eligible[:authors])
    if len(chosen) < 2:
        raise ParameterError(f"{corpus}: fewer than 2 authors with {test_n} test and 5 training documents")
    g = make_rng(seed)
    out = AuthorshipDocuments(corpus, [], [], [], [], [])
    for a in chosen:
        tr, te = by_author[a]["train"], by_author[a]["test"]
        for i in np.sort(g.choice(len(tr), size=min(train_n, len(tr)), replace=False)):
            out.train_texts.append(tr[i][1])
            out.train_labels.append(a)
        for i in np.sort(g.choice(len(te), size=test_n, replace=False)):
            out.test_ids.append(te[i][0])
            out.test_texts.append(te[i][1])
            out.test_labels.append(a)
    out.construction = {"authors": len(chosen), "train_documents": len(out.train_texts),
                        "test_documents": len(out.test_texts), "eligible_authors": len(eligible), "seed": seed}
    return out


def normalize_text(text: str) -> str:
    """The form every compared text takes: the one tokenizer (punctuation kept, lower case), detokenised.

    >>> normalize_text('The U.S. said "no," then (sadly) left.')
    'the u.s. said "no," then (sadly) left.'
    """
    from ..generation.vocab import detokenize

    return detokenize(tokenize(text, punctuation=True))


# --------------------------------------------------------------------------------------------
# the sweep

@dataclass
class GenerationConfig:
    """The resolved settings of a generation sweep (``textdp evaluate-generation CONFIG.toml``)."""

    corpus: str
    er_ae_model: str
    ae_model: str
    epsilons: list[float]
    data_dir: str | None = None
    authors: int = 50
    train_docs: int = 50
    test_docs: int = 4
    similarity_sentences: int = 1000
    model_data: str = "disjoint"
    variants: list[str] = field(default_factory=lambda: ["autoregressive", "teacher-forced"])
    nominal_table: bool = True
    earth_movers_epsilons: list[float] = field(default_factory=list)
    earth_movers_size: int = 50
    seed: int = 0
    bootstrap: int = 1000
    output: str | None = None
    lm_models: dict[str, str] = field(default_factory=dict)
    lm_clip: list[float] | None = None
    lm_clip_public: str | None = None
    lm_delta: float = 1e-5
    lm_max_new_tokens: int = 32

    def to_dict(self) -> dict[str, object]:
        """Plain-data form (``settings.json``)."""
        return asdict(self)


def generation_config_from_dict(d: dict[str, Any], *, base_dir: Path | None = None) -> GenerationConfig:
    """Validate a parsed TOML config (``[corpus]``, ``[models]``, ``[sweep]``, ``[earth_movers]``, ``[run]``, ``[lm]``).

    >>> cfg = generation_config_from_dict({"corpus": {"name": "reuter_50_50"},
    ...     "models": {"er_ae": "m1", "ae": "m2"}, "sweep": {"epsilons": [1, 5]}})
    >>> cfg.epsilons, cfg.model_data
    ([1.0, 5.0], 'disjoint')
    """
    from .._validation import check_choice, check_epsilon

    if not isinstance(d, dict):
        raise ParameterTypeError("config must be a TOML table")
    allowed = {"corpus": {"name", "data_dir", "authors", "train_docs", "test_docs", "similarity_sentences"},
               "models": {"er_ae", "ae", "model_data"}, "sweep": {"epsilons", "variants", "nominal_table"},
               "earth_movers": {"epsilons", "size"}, "run": {"seed", "bootstrap", "output"},
               "lm": {"models", "clip", "clip_public", "delta", "max_new_tokens"}}
    unknown = set(d) - set(allowed)
    if unknown:
        raise ParameterError(f"unknown config section(s): {', '.join(sorted(unknown))}")
    for sec, keys in allowed.items():
        bad = set(d.get(sec, {})) - keys
        if bad:
            raise ParameterError(f"unknown key(s) in [{sec}]: {', '.join(sorted(bad))}")
    c, m, sw, em, run = (d.get(k, {}) for k in ("corpus", "models", "sweep", "earth_movers", "run"))
    if "name" not in c:
        raise ParameterError("config [corpus] needs name = a corpus preset (reuter_50_50, pan11_enron, 20newsgroups)")
    check_choice(str(c["name"]), "corpus", tuple(PRESETS))
    for key in ("er_ae", "ae"):
        if key not in m:
            raise ParameterError(f"config [models] needs {key} = a model directory from textdp train-rewriter")

    def path(v: object) -> str:
        p = Path(str(v)).expanduser()
        return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)

    eps = sw.get("epsilons")
    if not isinstance(eps, list) or not eps:
        raise ParameterError("config [sweep] needs epsilons = a non-empty list of ER-AE nominal epsilons")
    variants = list(sw.get("variants", ["autoregressive", "teacher-forced"]))
    for v in variants:
        check_choice(v, "variant", ("autoregressive", "teacher-forced"))
    data_dir = c.get("data_dir")
    lm_models, lm_clip, lm_clip_public = _lm_config(d.get("lm", {}), path)
    return GenerationConfig(
        corpus=str(c["name"]), er_ae_model=path(m["er_ae"]), ae_model=path(m["ae"]),
        epsilons=[check_epsilon(e) for e in eps], data_dir=None if data_dir is None else path(data_dir),
        authors=check_positive_int(c.get("authors", 50), "authors"),
        train_docs=check_positive_int(c.get("train_docs", 50), "train_docs"),
        test_docs=check_positive_int(c.get("test_docs", 4), "test_docs"),
        similarity_sentences=check_positive_int(c.get("similarity_sentences", 1000), "similarity_sentences"),
        model_data=check_choice(str(m.get("model_data", "disjoint")), "model data case",
                                ("public", "disjoint", "same", "unknown")),
        variants=variants, nominal_table=bool(sw.get("nominal_table", True)),
        earth_movers_epsilons=[check_epsilon(e) for e in em.get("epsilons", [])],
        earth_movers_size=check_positive_int(em.get("size", 50), "size"),
        seed=check_positive_int(run.get("seed", 0), "seed", minimum=0),
        bootstrap=check_positive_int(run.get("bootstrap", 1000), "bootstrap"),
        output=run.get("output"),
        lm_models=lm_models, lm_clip=lm_clip, lm_clip_public=lm_clip_public,
        lm_delta=float(check_epsilon(d.get("lm", {}).get("delta", 1e-5))),
        lm_max_new_tokens=check_positive_int(d.get("lm", {}).get("max_new_tokens", 32), "max_new_tokens"),
    )


def _lm_config(lm: dict[str, Any], path: Any) -> tuple[dict[str, str], list[float] | None, str | None]:
    """The ``[lm]`` table: ``models = {name = DIR}`` (sentence-family LM rewriters) and ``clip`` or ``clip_public``."""
    from ..generation.lm_family import LMRewriter
    from ..mechanisms.registry import mechanism_class, names

    if not lm:
        return {}, None, None
    models = lm.get("models")
    if not isinstance(models, dict) or not models:
        raise ParameterError('config [lm] needs models = { "dp-prompt" = "DIR", ... } (local model directories)')
    allowed = tuple(n for n in names("sentence") if issubclass(mechanism_class(n), LMRewriter))
    for name in models:
        if name not in allowed:
            raise ParameterError(f"config [lm]: unknown language-model rewriter {name!r}; choose from: "
                                 f"{', '.join(allowed)}")
    if ("clip" in lm) == ("clip_public" in lm):
        raise ParameterError("config [lm] needs the public clipping bounds: clip = [low, high], or clip_public = "
                             "FILE (public text); see docs/lm-rewriting.md")
    clip = None
    if "clip" in lm:
        c = lm["clip"]
        if not (isinstance(c, list) and len(c) == 2 and all(isinstance(x, (int, float)) for x in c)
                and float(c[0]) < float(c[1])):
            raise ParameterError(f"config [lm] clip must be [low, high] with low < high, got {c!r}")
        clip = [float(c[0]), float(c[1])]
    return ({str(k): path(v) for k, v in models.items()}, clip,
            None if "clip_public" not in lm else path(lm["clip_public"]))


def load_generation_config(path: str | Path) -> GenerationConfig:
    """Read and validate a TOML config file."""
    p = Path(path)
    try:
        d = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParameterError(f"{p}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"{p}: not valid TOML ({exc})") from None
    return generation_config_from_dict(d, base_dir=p.parent)


@dataclass(frozen=True)
class Condition:
    """One row of the sweep: a mechanism at a parameter, in a table."""

    table: str
    mechanism: str
    epsilon: float
    variant: str
    er_ae_epsilon: float | None
    bound: float


def sweep_conditions(cfg: GenerationConfig, vocab_output_size: int, vocab_words: int, max_length: int) -> list[Condition]:
    """The conditions of the two tables.

    ``equal-bound``: for each ER-AE nominal ε, its per-sentence bound ``B``; AE-DP and
    Random-R at ``B / L_max`` per token, SynTF at ``B`` per sentence. ``nominal``: every
    mechanism at the same per-step ε (SynTF at ``L_max · ε`` per sentence, i.e. ε per term).
    """
    from ..generation.bounds import random_r_epsilon, random_r_rate, two_set_bound

    out: list[Condition] = []
    for e in cfg.epsilons:
        b = two_set_bound(e, vocab_output_size, max_length).per_sentence
        for v in cfg.variants:
            out.append(Condition("equal-bound", "er-ae", e, v, e, b))
        for v in cfg.variants:
            out.append(Condition("equal-bound", "ae-dp", b / max_length, v, e, b))
        out.append(Condition("equal-bound", "syntf-sentence", b, "-", e, b))
        r_eps = random_r_epsilon(random_r_rate(b / max_length, vocab_words), vocab_words)
        out.append(Condition("equal-bound", "random-sentence", r_eps, "-", e, r_eps * max_length))
    if cfg.nominal_table:
        for e in cfg.epsilons:
            out.append(Condition("nominal", "ae-dp", e, cfg.variants[0], e, e * max_length))
            out.append(Condition("nominal", "syntf-sentence", e * max_length, "-", e, e * max_length))
            out.append(Condition("nominal", "random-sentence", e, "-", e, e * max_length))
    return out


class Measures(TypedDict, total=False):
    """What :class:`_Measurer` gives a set of rewritten documents (every key; Earth Mover's rows lack the CI)."""

    authorship: float
    authorship_ci: list[float]
    chance: float
    semantic_similarity: float | None
    document_similarity: float
    stylometric: float


class SweepRow(Measures, total=False):
    """One row of a sweep's ``results.json``: a condition (or the original text) and its measures."""

    table: str
    mechanism: str
    epsilon: float | None
    variant: str
    er_ae_epsilon: float | None
    bound: float | None
    per_token: float
    seconds: float
    rewrite_seconds: float
    sentences: int
    guarantee: str


class SweepResult(TypedDict):
    """What :func:`run_generation_sweep` returns (``results.json``)."""

    settings: dict[str, object]
    construction: dict[str, object]
    max_length: int
    vocab_output_size: int
    rows: list[SweepRow]
    timings: dict[str, float]
    note: str


class _Measurer:
    """The metrics of the sweep against the original test documents (attacker fitted once on the originals)."""

    def __init__(self, cfg: GenerationConfig, docs: AuthorshipDocuments, original_docs: list[str],
                 seg_texts: list[str], sample: np.ndarray) -> None:
        from ..attacks.char_ngrams import CharNgramAttacker
        from ..attacks.sentence import SentenceEmbeddingAttacker
        from .stats import chance_accuracy

        self.cfg, self.original_docs, self.seg_texts, self.sample = cfg, original_docs, seg_texts, sample
        self.attacker = CharNgramAttacker().fit([normalize_text(t) for t in docs.train_texts], docs.train_labels)
        self.chance = chance_accuracy(docs.train_labels)
        self.embedder = SentenceEmbeddingAttacker()
        self.orig_doc_emb = self.embedder.embed(original_docs)
        self.labels = np.array(docs.test_labels, dtype=object)

    def __call__(self, outputs_docs: list[str], outputs_sents: list[str] | None,
                 boot: np.random.Generator) -> Measures:
        from .stats import bootstrap_ci

        correct = self.attacker.predict(outputs_docs) == self.labels
        lo, hi = bootstrap_ci(correct, boot, n_boot=self.cfg.bootstrap)
        emb = self.embedder.embed([t if t.strip() else "." for t in outputs_docs])
        doc_sim = float(np.mean(np.sum(emb * self.orig_doc_emb, axis=1)))
        sent_sim = None
        if outputs_sents is not None:
            sent_sim = float(np.mean(semantic_similarity([self.seg_texts[i] for i in self.sample],
                                                         [outputs_sents[i] for i in self.sample])))
        style = float(np.mean(stylometric_distance(self.original_docs, outputs_docs)))
        return Measures(authorship=float(correct.mean()), authorship_ci=[lo, hi], chance=self.chance,
                        semantic_similarity=sent_sim, document_similarity=doc_sim, stylometric=style)


def _condition_row(cond: Condition, rw: Rewriter, cfg: GenerationConfig, doc_list: list[tuple[str, str]],
                   test_segments: list[list[list[str]]], measure: _Measurer, rng: np.random.Generator,
                   boot: np.random.Generator) -> SweepRow:
    """Rewrite the test documents under ``cond`` and measure them (one row of the sweep)."""
    from ..generation.rewriter import SentenceMechanism, rewrite_documents
    from ..mechanisms import mechanism_class

    t1 = time.perf_counter()
    n_sent = sum(len(segs) for segs in test_segments)
    cls = mechanism_class(cond.mechanism)
    assert issubclass(cls, SentenceMechanism)
    own: dict[str, Any] = {"variant": cond.variant if cond.variant != "-" else "autoregressive"}
    mech = cls(epsilon=cond.epsilon, model=rw, model_data=cfg.model_data,
               **{k: v for k, v in own.items() if k in cls.param_names()})
    records, _ = rewrite_documents(mech, doc_list, rng, record_unit="sentence", seeded=True)
    out_sents = [r["text"] for r in records]
    if len(out_sents) != n_sent:
        raise RuntimeError("rewrite returned a different number of sentences")  # pragma: no cover
    per_doc: list[str] = []
    pos = 0
    for segs in test_segments:
        per_doc.append(" ".join(t for t in out_sents[pos : pos + len(segs)] if t))
        pos += len(segs)
    rewrite_seconds = time.perf_counter() - t1
    m = measure(per_doc, out_sents, boot)
    g = records[0]["guarantee"]
    return SweepRow(table=cond.table, mechanism=cond.mechanism, epsilon=cond.epsilon, variant=cond.variant,
                    er_ae_epsilon=cond.er_ae_epsilon, bound=g["epsilon"], per_token=g["parameters"]["per_token"],
                    **m, seconds=round(time.perf_counter() - t1, 1), rewrite_seconds=round(rewrite_seconds, 1),
                    sentences=n_sent)


def _rewriters(cfg: GenerationConfig) -> tuple[Rewriter, Rewriter]:
    from ..generation.rewriter import Rewriter

    er, ae = Rewriter(cfg.er_ae_model), Rewriter(cfg.ae_model)
    if er.vocab.tokens != ae.vocab.tokens or er.max_length != ae.max_length:
        raise ParameterError("the ER-AE and AE models must share the vocabulary and max length (train both on one corpus)")
    return er, ae


def run_generation_sweep(
    cfg: GenerationConfig, *, progress: StageProgress | None = None
) -> SweepResult:
    """Rewrite the test documents under every condition and measure them (see the module docstring).

    Returns a JSON-ready dict: ``rows`` (one per condition plus the original text),
    ``settings``, ``construction``, ``timings``.
    """
    from ..generation.vocab import detokenize
    from ..mechanisms import mechanism_class

    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    check_lm_models(cfg)  # a missing or wrong model folder fails now, not after hours of sweep
    docs = load_authorship_documents(cfg.corpus, data_dir=cfg.data_dir, authors=cfg.authors,
                                     train_docs=cfg.train_docs, test_docs=cfg.test_docs, seed=cfg.seed)
    er, ae = _rewriters(cfg)
    trained = {"er-ae": er, "reconstruction": ae}  # by training objective (the mechanism's ``objective``)
    L = er.max_length
    conds = sweep_conditions(cfg, er.vocab.output_size, len(er.vocab.words), L)
    seqs = np.random.SeedSequence(cfg.seed).spawn(4)  # rewriting, sentence sample, bootstrap, attacker
    cond_rngs = spawn(seqs[0], len(conds))
    boot_rngs = spawn(seqs[2], len(conds) + 1)

    # inputs in the common normal form; sentence pairs for similarity
    test_segments = [er.segments(t) for t in docs.test_texts]
    seg_texts = [detokenize(s) for segs in test_segments for s in segs]
    original_docs = [" ".join(detokenize(s) for s in segs) for segs in test_segments]
    n_sent = len(seg_texts)
    sample = np.sort(make_rng(seqs[1]).choice(n_sent, size=min(cfg.similarity_sentences, n_sent), replace=False))
    t0 = time.perf_counter()
    measure = _Measurer(cfg, docs, original_docs, seg_texts, sample)
    timings["setup"] = time.perf_counter() - t0

    rows = [SweepRow(table="reference", mechanism="original", epsilon=None, variant="-", bound=0.0,
                     **measure(original_docs, seg_texts, boot_rngs[-1]), seconds=0.0)]
    doc_list = list(zip(docs.test_ids, docs.test_texts, strict=True))
    done_task = ProgressCounter(progress("conditions", len(conds)) if progress else None, len(conds))
    for ci, cond in enumerate(conds):
        objective = getattr(mechanism_class(cond.mechanism), "objective", None)
        rw = trained[objective] if objective in trained else ae
        rows.append(_condition_row(cond, rw, cfg, doc_list, test_segments, measure, cond_rngs[ci], boot_rngs[ci]))
        done_task(1)
    rows += _earth_movers_rows(cfg, docs, measure, spawn(seqs[3], max(len(cfg.earth_movers_epsilons), 1)))
    n_lm = len(cfg.lm_models) * len(cfg.epsilons)
    rows += lm_rows(cfg, doc_list, measure, spawn(np.random.SeedSequence([cfg.seed, 1]), max(n_lm, 1)),
                    spawn(np.random.SeedSequence([cfg.seed, 2]), max(n_lm, 1)))
    timings["total"] = time.perf_counter() - t_start
    return SweepResult(settings=cfg.to_dict(), construction=docs.construction, max_length=L,
                       vocab_output_size=er.vocab.output_size, rows=rows, timings=timings,
                       note="semantic similarity: all-MiniLM-L6-v2 cosine, a stand-in for the Universal Sentence "
                            "Encoder")


def _earth_movers_rows(cfg: GenerationConfig, docs: AuthorshipDocuments, measure: _Measurer,
                       rngs: list[np.random.Generator]) -> list[SweepRow]:
    if not cfg.earth_movers_epsilons:
        return []
    from ..mechanisms import EarthMoversPrivacy

    rows: list[SweepRow] = []
    for e, g in zip(cfg.earth_movers_epsilons, rngs, strict=False):
        t0 = time.perf_counter()
        mech = EarthMoversPrivacy(epsilon=e, size=cfg.earth_movers_size, bag="sample", seed=g).fit()
        outs = [" ".join(d.words) for d in mech.privatize_batch(docs.test_texts)]  # one release, no ledger
        pred = measure.attacker.predict(outs)
        emb = measure.embedder.embed(outs)
        rows.append(SweepRow(
            table="earth-movers", mechanism="earth-movers", epsilon=e, variant="-", bound=None,
            authorship=float(np.mean(pred == measure.labels)), chance=measure.chance, semantic_similarity=None,
            document_similarity=float(np.mean(np.sum(emb * measure.orig_doc_emb, 1))),
            stylometric=float(np.mean(stylometric_distance(measure.original_docs, outs))),
            seconds=round(time.perf_counter() - t0, 1),
            guarantee=f"epsilon*N*E_d-privacy, epsilon={e:g}, N={cfg.earth_movers_size} (not comparable to the "
                      "per-sentence bounds)"))
    return rows


def check_lm_models(cfg: GenerationConfig) -> None:
    """Load every ``[lm]`` model folder as its rewriter's kind (the loader's one-line error otherwise)."""
    if not cfg.lm_models:
        return
    from ..generation.hf import load_language_model
    from ..mechanisms import mechanism_class

    for name, model_dir in cfg.lm_models.items():
        load_language_model(str(Path(model_dir).resolve()), getattr(mechanism_class(name), "kind", ""))


def lm_rows(cfg: GenerationConfig, doc_list: Sequence[tuple[str, str]],
            measure: Callable[[list[str], list[str] | None, np.random.Generator], Measures],
            rngs: Sequence[np.random.Generator], boots: Sequence[np.random.Generator]) -> list[SweepRow]:
    """The ``[lm]`` rows: each configured language-model rewriter at each ε of the grid, on the same documents.

    ``ε`` is the rewriter's own parameter (per token for dp-prompt, dp-paraphrase and
    dp-mlm; per sentence for dp-bart, with ``cfg.lm_delta``); the row's ``bound`` is the
    record's guarantee per unit (composed over the tokens), not calibrated to the ER-AE
    bound ``B`` of the equal-bound table. Sentence similarity is not computed (dp-prompt rewrites whole
    documents, so sentences do not pair up); the document measures are the sweep's.
    The bounds are public: ``cfg.lm_clip`` for every model, or quantiles on
    ``cfg.lm_clip_public`` computed per model (:func:`textdp.generation.lm.public_bounds`).
    """
    if not cfg.lm_models:
        return []
    from ..generation.decoding import ClipBounds
    from ..generation.lm import public_bounds
    from ..generation.lm_family import LMRewriter
    from ..generation.rewriter import rewrite_documents
    from ..io import read_documents
    from ..mechanisms import mechanism_class

    public = None if cfg.lm_clip_public is None else [t for _, t in read_documents([Path(cfg.lm_clip_public)])]
    rows: list[SweepRow] = []
    k = 0
    for name, model_dir in cfg.lm_models.items():
        where = str(Path(model_dir).resolve())
        cls = mechanism_class(name)
        assert issubclass(cls, LMRewriter)
        if public is not None:
            bounds = public_bounds(where, cls, public, source=f"public text {cfg.lm_clip_public} (config [lm])")
        else:
            assert cfg.lm_clip is not None
            bounds = ClipBounds(cfg.lm_clip[0], cfg.lm_clip[1], "fixed", "given in the config ([lm] clip)")
        for e in cfg.epsilons:
            t0 = time.perf_counter()
            own: dict[str, Any] = {"delta": cfg.lm_delta}  # dp-bart's (the Gaussian rewriter's) own parameter
            mech = cls(epsilon=e, model=where, clip=bounds, max_new_tokens=cfg.lm_max_new_tokens,
                       **{p: v for p, v in own.items() if p in cls.param_names()})
            mech.fit()
            records, _ = rewrite_documents(mech, list(doc_list), rngs[k], record_unit="document", seeded=True)
            outs = [str(r["text"]) for r in records]
            rewrite_seconds = time.perf_counter() - t0
            m = measure(outs, None, boots[k])
            g = records[0]["guarantee"]
            rows.append(SweepRow(table="lm", mechanism=name, epsilon=e, variant="-", er_ae_epsilon=None,
                                 bound=g["epsilon"], per_token=g["parameters"].get("per_token"), **m,
                                 seconds=round(time.perf_counter() - t0, 1),
                                 rewrite_seconds=round(rewrite_seconds, 1),
                                 guarantee=f"{name}: epsilon={g['epsilon']:g} per {g['unit']} (see the records' "
                                           "adjacency; not the ER-AE bound)"))
            k += 1
    return rows


#: the sweep's tables drawn in the plot (table names, not mechanism names)
_PLOTTED_TABLES = ("equal-bound", "earth-movers", "lm", "reference")


def _fmt(x: object, nd: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def render_generation_markdown(result: SweepResult) -> str:
    """Table-1-style markdown of a sweep result (one table per ``table`` kind)."""
    rows = result["rows"]
    lines = []
    header = ("| mechanism | variant | ε parameter | bound per sentence | semantic sim. ↑ | authorship ↓ (chance) | "
              "stylometric ↑ | doc. sim. | s |")
    sep = "|" + "---|" * 9
    for table, title in (("equal-bound", "Equal per-sentence bound (ER-AE's ε sets B; others calibrated to B)"),
                         ("nominal", "Equal nominal ε per step (the authors' framing; SynTF at ε per term)"),
                         ("earth-movers", "Earth Mover's privacy on the same documents (bags of words)"),
                         ("lm", "Language-model rewriters on the same documents (ε: each rewriter's own, per unit)")):
        sel = [r for r in rows if r["table"] in (table, "reference")]
        if len(sel) <= 1:
            continue
        lines += [f"### {title}", "", header, sep]
        for r in sel:
            auth = f"{r['authorship']:.3f} ({r['chance']:.3f})"
            lines.append(
                f"| {r['mechanism']} | {r['variant']} | {_fmt(r['epsilon'], 4)} | {_fmt(r.get('bound'), 1)} | "
                f"{_fmt(r.get('semantic_similarity'))} | {auth} | {_fmt(r['stylometric'], 2)} | "
                f"{_fmt(r['document_similarity'])} | {_fmt(r.get('seconds'), 1)} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot_privacy_utility(result: SweepResult, path: str | Path, title: str) -> Path:
    """PNG: authorship accuracy against document similarity, one line per mechanism (extra ``eval``)."""
    from ..errors import require

    mpl = require("matplotlib", "eval")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r["table"] in _PLOTTED_TABLES]
    fig, ax = plt.subplots(figsize=(7, 4.8), dpi=110)
    groups: dict[str, list[SweepRow]] = defaultdict(list)
    for r in rows:
        key = r["mechanism"] if r["variant"] in ("-", "autoregressive") else f"{r['mechanism']} ({r['variant']})"
        groups[key].append(r)
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["document_similarity"])
        xs = [r["document_similarity"] for r in rs]
        ys = [r["authorship"] for r in rs]
        ax.plot(xs, ys, marker="o" if key != "original" else "*", ms=9 if key == "original" else 5, label=key)
        for r, x, y in zip(rs, xs, ys, strict=True):
            if r["epsilon"] is not None:
                lab = f"{r['er_ae_epsilon']:g}" if r.get("er_ae_epsilon") is not None else f"{r['epsilon']:g}"
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6)
    chance = rows[0]["chance"]
    ax.axhline(chance, color="grey", ls=":", label=f"chance ({chance:.2f})")
    ax.set_xlabel("semantic utility: MiniLM cosine, rewritten vs original document")
    ax.set_ylabel("authorship attack accuracy (char n-gram SVM)")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def write_generation_report(result: SweepResult, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """``results.json``, ``report.md`` and (optionally) ``privacy_utility.png`` in ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "results.json", result)
    md = render_generation_markdown(result)
    with atomic_writer(d / "report.md") as fh:
        fh.write(f"# Generation sweep: {result['settings']['corpus']}\n\n{md}\n")
    files = [d / "results.json", d / "report.md"]
    if plots:
        files.append(plot_privacy_utility(result, d / "privacy_utility.png", f"{result['settings']['corpus']}: "
                                          "privacy-utility (labels: ER-AE nominal epsilon / EM epsilon)"))
    return files

