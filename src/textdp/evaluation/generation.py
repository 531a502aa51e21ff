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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import spawn
from ..errors import ParameterError
from ..io import atomic_writer
from ..text import split_sentences, tokenize
from .datasets import PRESETS, read_jsonl, resolve_data_dir, strip_quoted

__all__ = [
    "FUNCTION_WORDS",
    "GenerationConfig",
    "generation_config_from_dict",
    "load_generation_config",
    "render_generation_markdown",
    "run_generation_sweep",
    "semantic_similarity",
    "stylometric_distance",
    "stylometric_features",
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
    ((64,), 4.0)
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


def _rows(corpus: str, data_dir: str | Path | None) -> list[dict[str, Any]]:
    if corpus not in PRESETS:
        raise ParameterError(f"unknown corpus {corpus!r}; choose one of: {', '.join(PRESETS)}")
    return list(read_jsonl(resolve_data_dir(data_dir) / PRESETS[corpus]["path"]))


def _clean(corpus: str, text: str) -> str:
    return strip_quoted(text) if PRESETS[corpus].get("strip_quotes") else text


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
            for s in split_sentences(_clean(corpus, row["text"]))
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
