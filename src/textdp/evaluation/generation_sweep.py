"""The ER-AE sweep of ``textdp evaluate-generation``: its conditions (equal per-sentence bound and equal nominal
ε), the measurer, the rows of each mechanism, Earth Mover's privacy and the ``[lm]`` rewriters (see
:mod:`textdp.evaluation.generation`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from .._rng import make_rng, spawn
from ..errors import ParameterError
from ..progress import Counter as ProgressCounter
from ..progress import StageProgress
from .generation_config import GenerationConfig
from .generation_data import AuthorshipDocuments, load_authorship_documents
from .generation_metrics import normalize_text, semantic_similarity, stylometric_distance

if TYPE_CHECKING:
    from ..generation.rewriter import Rewriter

__all__ = ['Condition', 'Measures', 'SweepResult', 'SweepRow', 'check_lm_models', 'lm_rows', 'run_generation_sweep', 'sweep_conditions']

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
    own: dict[str, object] = {"variant": cond.variant if cond.variant != "-" else "autoregressive"}
    mech = cls(epsilon=cond.epsilon, model=rw, model_data=cfg.model_data).set_params(
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
            own: dict[str, object] = {"delta": cfg.lm_delta}  # dp-bart's (the Gaussian rewriter's) own parameter
            if cfg.lm_instruction is not None:
                own["instruction"] = cfg.lm_instruction  # dp-prompt's named public instruction
            mech = cls(epsilon=e, model=where, clip=bounds, max_new_tokens=cfg.lm_max_new_tokens).set_params(
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


