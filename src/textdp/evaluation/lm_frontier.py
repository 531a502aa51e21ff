"""dp-prompt's frontier of public instructions: meaning kept against authorship removed, at stated ε per document.

The language-model-only form of ``textdp evaluate-generation`` (a config without ``[models]``: no trained ER-AE is
needed). Inputs are **sentences** (``min_words``–``max_words`` words) drawn from the test split of an evaluation
corpus, ``sentences`` per author for the ``authors`` authors with most training documents; each sentence is
rewritten by dp-prompt as one document (its privacy unit), under every pair of a named instruction
(:data:`~textdp.generation.lm_family.INSTRUCTIONS`) and a setting (the public prior on or off, ε per token, the
public bounds), plus two references: the inputs themselves (``identity``) and the model's own non-private sampling
at temperature 1 with the same prompt (``generate``, the ceiling of what an instruction keeps).

Measures of each row:

* **similarity**: the MiniLM cosine (:func:`textdp.attacks.sentence.minilm_embed`) of each input and its output,
  averaged (an empty output scores 0);
* **attribution**: each attacker of ``attackers`` (:data:`~textdp.evaluation.lm_frontier_config.ATTACKERS`: char
  n-grams, MiniLM nearest neighbour, Koppel et al. 2011), trained once per run on the authors' original *training*
  documents, attributes **chunks**: one author's rewritten sentences concatenated, ``chunk`` at a time; each
  attacker's accuracy against chance (1 / authors), with a 95% bootstrap interval over the chunks (the same
  resampling for every row and attacker; few chunks: a wide interval), in ``attacks``; ``attribution`` is the
  strongest attacker's (the highest accuracy of the row, named by ``strongest``). Lower is better;
* **ε per document**: the records' own bound, ``max_new_tokens x`` ε per token (the end token is drawn, so a
  shorter output has the same bound);
* counts of outputs that are empty, that start like a chat reply or preamble (:data:`REPLY`), or that copy the
  input verbatim (normalised), all public functions of the released texts.

The public text of ``clip_public`` settings (the step-max bounds, :func:`textdp.generation.lm.public_bounds`) is
``public_sentences`` sentences of *another* corpus (``public_corpus``; the config refuses the private corpus).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from .._rng import make_rng, spawn
from .._validation import check_positive_int
from ..errors import ParameterError
from ..progress import Counter as ProgressCounter
from ..progress import StageProgress
from ..text import split_sentences
from .datasets import PRESETS
from .generation_data import corpus_rows
from .generation_metrics import normalize_text
from .lm_frontier_config import FrontierConfig

__all__ = ["REPLY", "AttackScore", "AuthorSentences", "FrontierResult", "FrontierRow", "load_author_sentences", "public_sentences",
           "run_lm_frontier"]

#: the start of a chat reply or preamble instead of a rewrite (public text; counted, not removed)
REPLY = re.compile(r"^\s*(?:here(?:'s| is| are)\b|sure\b|certainly\b|of course\b|i'?m sorry|i am sorry|i'?m "
                   r"(?:happy|glad)|i can(?:not|'t)?\b|as an ai\b|thank you\b|the (?:original|paraphrased?|rewritten) "
                   r"(?:text|document|version)\b)", re.IGNORECASE)
_NOISY = re.compile(r"[<>@|]|https?:|\.com\b|-{3,}|_{3,}|={3,}")


# --------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class AuthorSentences:
    """The attacker's training documents (originals) and the sentences to rewrite, by author (raw text)."""

    train_texts: list[str]
    train_labels: list[str]
    sentences: list[str]
    labels: list[str]
    construction: dict[str, object]


def _clean_sentences(text: str, lo: int, hi: int) -> list[str]:
    out = []
    for s in split_sentences(text):
        s = " ".join(s.split())
        if lo <= len(s.split()) <= hi and not _NOISY.search(s) and any(ch.isalpha() for ch in s):
            out.append(s)
    return out


def load_author_sentences(corpus: str, *, data_dir: str | Path | None = None, authors: int = 20, sentences: int = 3,
                          min_words: int = 8, max_words: int = 40, train_docs: int = 50,
                          seed: int = 0) -> AuthorSentences:
    """``sentences`` test-split sentences (``min_words``–``max_words`` words, without markup, addresses or links) of
    each of the ``authors`` authors with most training documents (of 20 words or more; ties by name) among those
    with 5 such documents and enough sentences, and at most ``train_docs`` training documents per author, drawn
    with ``seed``. 20NG quotes are stripped; Enron is limited to its candidate set."""
    authors, sentences = check_positive_int(authors, "authors"), check_positive_int(sentences, "sentences")
    filt = PRESETS[corpus].get("filter_field") if corpus in PRESETS else None
    train: dict[str, list[str]] = defaultdict(list)
    test: dict[str, list[str]] = defaultdict(list)
    for row, text in corpus_rows(corpus, data_dir):
        a, split = row.get("author"), row.get("split")
        if a is None or (filt and not row.get(filt)):
            continue
        if split == "train" and len(text.split()) >= 20:
            train[str(a)].append(text)
        elif split == "test":
            test[str(a)].extend(s for s in _clean_sentences(text, min_words, max_words) if s not in test[str(a)])
    eligible = sorted((a for a in train if len(train[a]) >= 5 and len(test[a]) >= sentences),
                      key=lambda a: (-len(train[a]), a))
    chosen = sorted(eligible[:authors])
    if len(chosen) < 2:
        raise ParameterError(f"{corpus}: fewer than 2 authors with 5 training documents and {sentences} test "
                             f"sentences of {min_words}-{max_words} words")
    g = make_rng(seed)
    tr_t, tr_l, se, la = [], [], [], []
    for a in chosen:
        for i in np.sort(g.choice(len(train[a]), size=min(train_docs, len(train[a])), replace=False)):
            tr_t.append(train[a][i])
            tr_l.append(a)
        for i in np.sort(g.choice(len(test[a]), size=sentences, replace=False)):
            se.append(test[a][i])
            la.append(a)
    return AuthorSentences(tr_t, tr_l, se, la, {"corpus": corpus, "authors": len(chosen), "eligible_authors":
                                                len(eligible), "sentences": len(se), "train_documents": len(tr_t),
                                                "words": [min_words, max_words], "seed": seed})


def public_sentences(corpus: str, n: int, *, data_dir: str | Path | None = None, seed: int = 0) -> list[str]:
    """``n`` sentences (8–40 words, clean as :func:`load_author_sentences`'s) of the *train* split of ``corpus``,
    drawn with ``seed``: the public text of the step-max bounds."""
    pool = [s for row, text in corpus_rows(corpus, data_dir) if row.get("split") == "train"
            for s in _clean_sentences(text, 8, 40)]
    if not pool:
        raise ParameterError(f"{corpus}: no public sentences")
    pick = np.sort(make_rng(seed).choice(len(pool), size=min(n, len(pool)), replace=False))
    return [pool[i] for i in pick]


# --------------------------------------------------------------------------------------------
# the sweep


class AttackScore(TypedDict):
    """One attacker's chunk accuracy on one row, with its 95% bootstrap interval."""

    accuracy: float
    ci: list[float]


class FrontierRow(TypedDict, total=False):
    """One row of the frontier (``results.json``)."""

    instruction: str
    setting: str
    prior: bool | None
    epsilon_token: float | None
    epsilon_document: float | None
    similarity: float
    attribution: float
    attribution_ci: list[float]
    strongest: str
    attacks: dict[str, AttackScore]
    chance: float
    chunks: int
    empty: int
    replies: int
    copies: int
    outputs: int
    seconds: float
    example: str


class FrontierResult(TypedDict):
    """What :func:`run_lm_frontier` returns."""

    settings: dict[str, object]
    construction: dict[str, object]
    bounds: dict[str, object]
    rows: list[FrontierRow]
    timings: dict[str, float]


class _Attacker:
    """One attacker of the config, trained once on the originals; ``predict`` labels the chunks."""

    def __init__(self, name: str, data: AuthorSentences, seed: int) -> None:
        self.name, self.seed = name, seed
        known = [normalize_text(t) for t in data.train_texts]
        if name == "char-ngrams":
            from ..attacks.char_ngrams import CharNgramAttacker

            self._model: object = CharNgramAttacker().fit(known, data.train_labels)
        elif name == "minilm":
            from ..attacks.sentence import SentenceEmbeddingAttacker

            self._model = SentenceEmbeddingAttacker().fit(known, data.train_labels)
        else:  # koppel: one known text per candidate, the author's training documents joined
            from ..attacks.koppel import KoppelAttacker

            by: dict[str, list[str]] = defaultdict(list)
            for t, a in zip(known, data.train_labels, strict=True):
                by[a].append(t)
            self._model = KoppelAttacker(seed=seed).fit([" ".join(by[a]) for a in by], list(by))

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        from ..attacks.koppel import KoppelAttacker

        normal = [normalize_text(t) for t in texts]
        if isinstance(self._model, KoppelAttacker):  # the same trials for every row
            return self._model.predict(normal, seed=make_rng(self.seed))
        return self._model.predict(normal)  # type: ignore[attr-defined]


class _Scorer:
    """Similarity to the inputs and chunk attribution by each attacker trained on the originals."""

    def __init__(self, data: AuthorSentences, chunk: int, seed: int, attackers: Sequence[str],
                 timings: dict[str, float] | None = None) -> None:
        from ..attacks.sentence import minilm_embed
        from .stats import chance_accuracy

        self.data, self.chunk, self.seed = data, chunk, seed
        self.attackers: list[_Attacker] = []
        for name in attackers:
            t0 = time.perf_counter()
            self.attackers.append(_Attacker(name, data, seed))
            if timings is not None:
                timings[f"fit {name}"] = round(time.perf_counter() - t0, 1)
        self.timings = timings
        self.chance = chance_accuracy(data.train_labels)
        self.inputs = minilm_embed(data.sentences)
        self.normal = [normalize_text(t) for t in data.sentences]

    def chunks(self, outs: Sequence[str]) -> tuple[list[str], list[str]]:
        by: dict[str, list[str]] = defaultdict(list)
        for t, a in zip(outs, self.data.labels, strict=True):
            by[a].append(t)
        texts, labels = [], []
        for a, ts in by.items():
            for i in range(0, len(ts), self.chunk):
                texts.append(" ".join(t for t in ts[i : i + self.chunk] if t.strip()) or ".")
                labels.append(a)
        return texts, labels

    def __call__(self, outs: Sequence[str]) -> FrontierRow:
        from ..attacks.sentence import minilm_embed
        from .stats import bootstrap_ci

        sims = np.zeros(len(outs))
        nonempty = [i for i, t in enumerate(outs) if t.strip()]
        if nonempty:
            sims[nonempty] = np.sum(self.inputs[nonempty] * minilm_embed([outs[i] for i in nonempty]), axis=1)
        texts, labels = self.chunks(outs)
        truth = np.array(labels, dtype=object)
        attacks: dict[str, AttackScore] = {}
        for att in self.attackers:
            t0 = time.perf_counter()
            correct = att.predict(texts) == truth
            lo, hi = bootstrap_ci(correct, make_rng(self.seed), n_boot=1000)  # the same resampling for every row
            attacks[att.name] = AttackScore(accuracy=round(float(correct.mean()), 4), ci=[round(lo, 4), round(hi, 4)])
            if self.timings is not None:
                key = f"predict {att.name}"
                self.timings[key] = round(self.timings.get(key, 0.0) + time.perf_counter() - t0, 1)
        strongest = max(attacks, key=lambda a: attacks[a]["accuracy"])  # first named wins a tie
        return FrontierRow(similarity=round(float(sims.mean()), 4), attribution=attacks[strongest]["accuracy"],
                           attribution_ci=attacks[strongest]["ci"], strongest=strongest, attacks=attacks,
                           chance=round(self.chance, 4), chunks=len(texts), outputs=len(outs),
                           empty=len(outs) - len(nonempty), replies=sum(bool(REPLY.match(t)) for t in outs),
                           copies=sum(normalize_text(t) == n for t, n in zip(outs, self.normal, strict=True)),
                           example=outs[0][:160] if outs else "")


def _generate(model: str, prompt: str, texts: Sequence[str], cfg: FrontierConfig, seed: int) -> list[str]:
    """The non-private ceiling: the model's own sampling at temperature 1, same prompt, cap and post-processing."""
    from ..generation import lm_decode
    from ..generation.hf import load_language_model
    from ..generation.lm_family import DPPrompt
    from ..generation.sampling import torch_module

    torch = torch_module()
    lm = load_language_model(model, "causal")
    s = DPPrompt(epsilon=1.0, model=model, clip=(-1.0, 1.0), instruction=prompt, max_new_tokens=cfg.max_new_tokens)
    s.resolve(lm)
    frame = lm_decode.prompt_frame(lm, s)
    tok = lm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else frame.stops[0]
    prompts = lm_decode.prompt_ids(lm, s, list(texts))
    out: list[str] = []
    torch.manual_seed(seed)  # the non-private baseline's sampling, not a privacy noise
    for b in range(0, len(prompts), cfg.batch_size):
        rows = prompts[b : b + cfg.batch_size]
        width = max(len(r) for r in rows)
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
        with torch.inference_mode():
            gen = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=0, top_p=1.0,
                                    temperature=1.0, max_new_tokens=cfg.max_new_tokens, eos_token_id=list(frame.stops),
                                    pad_token_id=pad)
        for r in gen[:, width:].tolist():
            body = [t for t in r if t not in frame.stops]
            capped = len(body) == cfg.max_new_tokens
            cut = body[: lm_decode.repeated_at(body, s.repeat_ngram)]
            out.append(lm_decode.tidy_output(tok.decode(cut, skip_special_tokens=True), stop=s.stop, capped=capped))
    return out


def run_lm_frontier(cfg: FrontierConfig, *, progress: StageProgress | None = None,
                    on_row: Callable[[FrontierRow], None] | None = None) -> FrontierResult:
    """Rewrite the sentences under every (instruction, setting) pair, then the ``generate`` references; measure each
    row (``on_row`` is called with each as it is done: the CLI writes them to ``rows.jsonl`` as they come)."""
    from ..generation.decoding import ClipBounds
    from ..generation.hf import load_language_model
    from ..generation.lm import public_bounds
    from ..generation.lm_family import DPPrompt
    from ..generation.rewriter import rewrite_documents

    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    load_language_model(cfg.model, "causal")  # a wrong folder fails now, before the data is read
    timings["load"] = round(time.perf_counter() - t_start, 1)
    data = load_author_sentences(cfg.corpus, data_dir=cfg.data_dir, authors=cfg.authors, sentences=cfg.sentences,
                                 min_words=cfg.min_words, max_words=cfg.max_words, train_docs=cfg.train_docs,
                                 seed=cfg.seed)
    t0 = time.perf_counter()
    score = _Scorer(data, cfg.chunk, cfg.seed, cfg.attackers, timings)
    timings["attackers"] = round(time.perf_counter() - t0, 1)
    bounds_info: dict[str, object] = {}
    step_max = None
    if any(s.clip_public for s in cfg.settings):
        assert cfg.public_corpus is not None
        t0 = time.perf_counter()
        public = public_sentences(cfg.public_corpus, cfg.public_sentences, data_dir=cfg.data_dir, seed=cfg.seed)
        step_max = public_bounds(cfg.model, DPPrompt, public, source=f"{len(public)} sentences of {cfg.public_corpus} "
                                 "(public: another corpus than the private one)")
        bounds_info = {"step_max": [step_max.low, step_max.high], "public_corpus": cfg.public_corpus,
                       "public_sentences": len(public), "seconds": round(time.perf_counter() - t0, 1)}
    docs = [(f"s{i}", t) for i, t in enumerate(data.sentences)]
    n_rows = len(cfg.instructions) * len(cfg.settings) + len(cfg.generate)
    rngs = spawn(np.random.SeedSequence([cfg.seed, 43]), max(n_rows, 1))
    done = ProgressCounter(progress("rows", n_rows) if progress else None, n_rows)
    rows = [FrontierRow(instruction="-", setting="identity (the inputs)", prior=None, epsilon_token=None,
                        epsilon_document=None, **score(data.sentences), seconds=0.0)]
    emit = on_row or (lambda row: None)
    emit(rows[0])
    k = 0
    for st in cfg.settings:
        clip = step_max if st.clip_public else ClipBounds(*st.clip, "fixed", "given in the config") \
            if st.clip else None
        for p in cfg.instructions:
            t0 = time.perf_counter()
            mech = DPPrompt(epsilon=st.epsilon, model=cfg.model, clip=clip, instruction=p, prior=st.prior,
                       public_top_k=st.public_top_k, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size)
            mech.fit()
            records, _ = rewrite_documents(mech, docs, rngs[k], record_unit="document", seeded=True)
            outs = [str(r["text"]) for r in records]
            g = records[0]["guarantee"]
            rows.append(FrontierRow(instruction=p, setting=st.label(), prior=st.prior, epsilon_token=st.epsilon,
                                    epsilon_document=float(g["epsilon"]), **score(outs),
                                    seconds=round(time.perf_counter() - t0, 1)))
            emit(rows[-1])
            k += 1
            done(1)
    for p in cfg.generate:
        t0 = time.perf_counter()
        outs = _generate(cfg.model, p, data.sentences, cfg, cfg.seed + k)
        rows.append(FrontierRow(instruction=p, setting="generate (non-private, temperature 1)", prior=None,
                                epsilon_token=None, epsilon_document=None, **score(outs),
                                seconds=round(time.perf_counter() - t0, 1)))
        emit(rows[-1])
        k += 1
        done(1)
    timings["total"] = round(time.perf_counter() - t_start, 1)
    return FrontierResult(settings=cfg.to_dict(), construction=data.construction, bounds=bounds_info, rows=rows,
                          timings=timings)
