"""The rewriter's vocabulary, sentence segments and detokenisation.

Text is cut into sentences (:func:`textdp.text.split_sentences`) and tokenised with the
one tokenizer, keeping punctuation (:func:`textdp.text.tokenize` with
``punctuation=True``). A sentence longer than ``max_length`` tokens is cut into
``ceil(n / max_length)`` segments of near-equal length; each segment is one privacy
unit. Ids 0-3 are ``<pad>``, ``<start>``, ``<unk>`` and ``<end>`` (the authors' order);
out-of-vocabulary tokens become ``<unk>`` on the input side, and ``<pad>``, ``<start>``
and ``<unk>`` are never emitted, so no out-of-vocabulary token can reach an output.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._validation import check_choice, check_positive_int
from ..errors import DocumentError, ParameterError
from ..io import atomic_writer
from ..text import split_sentences, tokenize

__all__ = [
    "END",
    "PAD",
    "SPECIALS",
    "START",
    "UNK",
    "Vocabulary",
    "build_vocabulary",
    "detokenize",
    "segment_text",
    "split_tokens",
]

SPECIALS = ("<pad>", "<start>", "<unk>", "<end>")
PAD, START, UNK, END = 0, 1, 2, 3


@dataclass(frozen=True)
class Vocabulary:
    """An immutable token list: the four special tokens, then the words.

    >>> v = Vocabulary.from_words(["the", "cat", "."])
    >>> v.size, v.encode(["the", "dog", "."]).tolist(), v.decode([4, 5, 3, 6])
    (7, [4, 2, 6], ['the', 'cat'])
    >>> v.output_mask().tolist()
    [False, False, False, True, True, True, True]
    """

    tokens: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tokens[:4] != SPECIALS:
            raise ParameterError("a vocabulary starts with the special tokens <pad> <start> <unk> <end>")
        index = {w: i for i, w in enumerate(self.tokens)}
        if len(index) != len(self.tokens):
            raise ParameterError("vocabulary has duplicate tokens")
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_words(cls, words: Iterable[str]) -> Vocabulary:
        """Special tokens followed by ``words``."""
        return cls(SPECIALS + tuple(words))

    @property
    def size(self) -> int:
        """Number of ids (special tokens included)."""
        return len(self.tokens)

    @property
    def words(self) -> tuple[str, ...]:
        """The words (without the special tokens)."""
        return self.tokens[4:]

    @property
    def output_size(self) -> int:
        """Size of the output alphabet: the words plus ``<end>``."""
        return len(self.tokens) - 3

    def __contains__(self, word: object) -> bool:
        return word in self._index and self._index[word] >= 4

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Ids of ``tokens``; out-of-vocabulary tokens become ``<unk>``."""
        get = self._index.get
        return np.fromiter((get(t, UNK) if get(t, UNK) >= 4 else UNK for t in tokens), dtype=np.int64, count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids`` up to the first ``<end>``; special tokens are skipped."""
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i == END:
                break
            if i >= 4:
                out.append(self.tokens[i])
        return out

    def output_mask(self) -> np.ndarray:
        """True for the tokens a rewrite may emit (the words and ``<end>``)."""
        m = np.ones(self.size, dtype=bool)
        m[[PAD, START, UNK]] = False
        return m

    def save(self, path: str | Path) -> None:
        """One token per line, atomically."""
        with atomic_writer(path) as fh:
            fh.write("\n".join(self.tokens) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        """Read a file written by :meth:`save`."""
        try:
            lines = Path(path).read_text(encoding="utf-8").split("\n")
        except FileNotFoundError:
            raise ParameterError(f"{path}: no vocabulary file (is this a model directory?)") from None
        return cls(tuple(w for w in lines if w))


def build_vocabulary(
    token_lists: Iterable[Sequence[str]], embedding_words: Sequence[str], size: int, *, source: str = "corpus"
) -> Vocabulary:
    """The ``size`` most frequent corpus words that have an embedding (``source="corpus"``).

    ``source="glove"`` ignores the corpus counts and takes the first ``size`` words of
    ``embedding_words`` (GloVe lists words by decreasing frequency in its public
    training corpus): a vocabulary that reveals nothing about the training data. Ties
    in corpus counts are broken by the embedding order.

    >>> build_vocabulary([["b", "a", "b", "zz"]], ["a", "b", "c"], 2).words
    ('b', 'a')
    >>> build_vocabulary([], ["a", "b", "c"], 2, source="glove").words
    ('a', 'b')
    """
    size = check_positive_int(size, "vocab_size")
    check_choice(source, "vocabulary source", ("corpus", "glove"))
    rank = {w: i for i, w in enumerate(embedding_words)}
    if source == "glove":
        words = [w for w in embedding_words if w not in SPECIALS][:size]
    else:
        counts: Counter[str] = Counter()
        for toks in token_lists:
            counts.update(toks)
        known = [w for w in counts if w in rank and w not in SPECIALS]
        if not known:
            raise DocumentError("no training word has an embedding; is the corpus English text?")
        known.sort(key=lambda w: (-counts[w], rank[w]))
        words = known[:size]
    return Vocabulary.from_words(words)


def split_tokens(tokens: Sequence[str], max_length: int) -> list[list[str]]:
    """Cut ``tokens`` into ``ceil(n / max_length)`` consecutive pieces of near-equal length.

    >>> [len(p) for p in split_tokens(list("abcdefghij"), 4)]
    [4, 3, 3]
    """
    n = len(tokens)
    if n == 0:
        return []
    m = math.ceil(n / max_length)
    q, r = divmod(n, m)
    out: list[list[str]] = []
    start = 0
    for i in range(m):
        end = start + q + (1 if i < r else 0)
        out.append(list(tokens[start:end]))
        start = end
    return out


def segment_text(text: str, max_length: int) -> list[list[str]]:
    """Sentences of ``text`` as token lists of at most ``max_length`` tokens (the privacy units).

    >>> segment_text("It rained. The dog, a big one, barked loudly today.", 5)
    [['it', 'rained', '.'], ['the', 'dog', ',', 'a'], ['big', 'one', ',', 'barked'], ['loudly', 'today', '.']]
    """
    max_length = check_positive_int(max_length, "max_length")
    out: list[list[str]] = []
    for sentence in split_sentences(text):
        out.extend(split_tokens(tokenize(sentence, punctuation=True), max_length))
    return out


_NO_SPACE_BEFORE = frozenset(".,!?;:%)]}")
_NO_SPACE_AFTER = frozenset("([{$#")


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens into text: no space before closing punctuation or after opening brackets,
    hyphens and apostrophes between words glued, double quotes alternately opening and closing.

    >>> detokenize(["he", "said", '"', "e", "-", "mail", "isn", "'", "t", "dead", '"', ",", "(", "ok", ")", "."])
    'he said "e-mail isn\\'t dead", (ok).'
    """
    out: list[str] = []
    glue_next = False
    quote_open = False
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        between_words = prev[-1:].isalnum() and nxt[:1].isalnum()
        space = bool(out) and not glue_next
        if tok in _NO_SPACE_BEFORE or (tok in ("-", "'") and between_words):
            space = False
        glue_next = tok in _NO_SPACE_AFTER or (tok in ("-", "'") and between_words)
        if tok == '"':
            if quote_open:
                space = False
            else:
                glue_next = True
            quote_open = not quote_open
        out.append((" " if space else "") + tok)
    return "".join(out)
