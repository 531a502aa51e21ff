"""The document measures of the generation sweep: stylometric profile and distance, MiniLM similarity, and
the one normal form every compared text takes (:func:`normalize_text`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..errors import ParameterError
from ..text import split_sentences, tokenize

__all__ = ['FUNCTION_WORDS', 'normalize_text', 'semantic_similarity', 'stylometric_distance', 'stylometric_features']

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



def normalize_text(text: str) -> str:
    """The form every compared text takes: the one tokenizer (punctuation kept, lower case), detokenised.

    >>> normalize_text('The U.S. said "no," then (sadly) left.')
    'the u.s. said "no," then (sadly) left.'
    """
    from ..generation.vocab import detokenize

    return detokenize(tokenize(text, punctuation=True))


