"""The vocabulary of a topic release: public, or built from the corpus inside the released function.

The columns of the document-term matrix a topic model is fitted to are part of
the released function. TopicDP's thesis (Sharma 2021, Sec. 2.1) says only that
"the vocabulary is defined from the keywords in the data set", i.e. from the
private corpus; textdp up to 0.2 built it once from the whole corpus
(``min_df``, ``max_df``, ``max_features``) and then held it *fixed* while the
sensitivity sampler fitted neighbouring databases. That measured a different
function from the one released: removing one Enron user changed 12 vocabulary
words (median of 40) and moved the released 5 x 5 matrix up to 0.069 with the
vocabulary rebuilt against 0.051 with it fixed (issue 19). The correct reading
is that the vocabulary is computed *by* the released function from its input
database, so a neighbouring database gets its own vocabulary.

textdp offers two vocabularies, both covered by the guarantee:

* ``"corpus"`` (default): built from the database by a fixed rule
  (:func:`select_vocabulary`: document frequency in ``[min_df, max_df * docs]``,
  then the ``max_features`` most frequent words, ties broken alphabetically,
  columns in alphabetical order). The rule is applied to *every* database the
  function sees -- the real corpus and every sampled neighbour
  (:meth:`textdp.topics.models.UserCorpus.database`) -- so the sampled
  sensitivity measures exactly the released function, vocabulary included.
  This is the "rebuild the neighbour's vocabulary inside the sampler" reading;
  a DP vocabulary selection (DP set union, Gopi et al. 2020; Carvalho et al.
  2022; used for topic models by Manzonelli, Zhang & Vadhan 2024) would also
  hide *which* words are in the vocabulary, but the vocabulary itself is never
  released here except through the keywords, which no guarantee covers
  (``keyword_note``), so the rebuild is the cheaper correct choice.
* a **public** vocabulary: a word list the user names (``--vocabulary FILE``,
  one word per line) or the ``K`` most frequent words of GloVe 6B
  (``--vocabulary glove:K``). The columns are then fixed before any private data
  is read (words the corpus never uses stay as all-zero columns: dropping them
  would be data-dependent), so every database is fitted on the same columns.

With ``--sensitivity worst-case`` the bound ``sqrt(2m)``
(:func:`textdp.topics.sensitivity.worst_case_sensitivity`) holds for every
vocabulary, since it uses only that each released row is a sub-probability
vector.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from .._validation import check_positive_int
from ..errors import DocumentError, ParameterError
from ..text import normalize

__all__ = [
    "CORPUS_VOCABULARY",
    "GLOVE_PREFIX",
    "PublicVocabulary",
    "glove_vocabulary",
    "public_vocabulary",
    "read_vocabulary",
    "select_vocabulary",
    "vocabulary_note",
]

#: ``--vocabulary`` value of the data-built vocabulary (rebuilt for every database).
CORPUS_VOCABULARY = "corpus"
#: ``--vocabulary glove:K``: the K most frequent words of GloVe 6B (public).
GLOVE_PREFIX = "glove:"


class VocabularyRule(TypedDict):
    """The corpus-vocabulary rule's thresholds (the keywords of :func:`select_vocabulary`)."""

    min_df: int
    max_df: float
    max_features: int | None


def select_vocabulary(df: np.ndarray, tf: np.ndarray, n_docs: int, *, min_df: int, max_df: float,
                      max_features: int | None) -> np.ndarray:
    """Column indices kept by the corpus-vocabulary rule, in increasing order.

    ``df``/``tf`` are the document and term frequencies of the columns (in
    alphabetical order) over the database's ``n_docs`` documents. A column is
    kept when ``min_df <= df <= max_df_count`` (``max_df`` a fraction of the
    documents when it is a float, a count when it is an int, as scikit-learn's
    ``CountVectorizer``), then the ``max_features`` with the largest ``tf`` are
    kept, ties broken by column index (alphabetical order), so the selection of
    a word depends only on the database and the word, never on other words'
    positions. A column with ``df = 0`` is never kept (``min_df >= 1``), so the
    result does not depend on which words other databases contain.

    >>> select_vocabulary(np.array([1, 3, 2, 3]), np.array([1, 5, 2, 5]), 4, min_df=2, max_df=1.0,
    ...                   max_features=2).tolist()
    [1, 3]
    """
    min_count = check_positive_int(min_df, "min_df")
    max_count = max_df if isinstance(max_df, numbers.Integral) else float(max_df) * n_docs
    if max_count < min_count:
        raise ParameterError(f"max_df ({max_df!r}) keeps fewer documents than min_df ({min_df}) on this corpus")
    keep = np.flatnonzero((df >= min_count) & (df <= max_count))
    if max_features is not None and keep.size > max_features:
        order = np.lexsort((keep, -np.asarray(tf, dtype=np.float64)[keep]))  # by -tf, then index
        keep = np.sort(keep[order[:max_features]])
    if keep.size == 0:
        raise DocumentError("cannot build a vocabulary: no word is in at least min_df and at most max_df documents; "
                            "lower --min-df or give a public --vocabulary")
    return keep


@dataclass(frozen=True)
class PublicVocabulary:
    """A public word list (fixed columns, in this order) with a public description for records.

    ``name`` describes its source without naming private data: ``glove-6B-50d
    top K`` or ``word list (N words, sha256 ...)``.

    >>> PublicVocabulary(("gas", "power"), "toy").words
    ('gas', 'power')
    """

    words: tuple[str, ...]
    name: str

    def __len__(self) -> int:
        return len(self.words)


def _clean(words: Iterable[str]) -> list[str]:
    """Words as the tokenizer produces them (lower-case, stop words and one-letter tokens dropped), deduplicated."""
    seen: dict[str, None] = {}
    for w in words:
        for tok in normalize(str(w)):
            seen.setdefault(tok, None)
    return list(seen)


def read_vocabulary(path: str | Path) -> PublicVocabulary:
    """A public vocabulary from a UTF-8 file with one word per line (order kept, duplicates dropped).

    Each line goes through :func:`textdp.text.normalize`, so the words match the
    corpus's tokens; a line that normalises to nothing (a stop word) is dropped.
    The file must be public data: never the private corpus. It is checked and read once
    (:func:`textdp._cache.read_public_file`: refused if another user could change it, unless
    ``--allow-shared-files``); the public description gives the SHA-256 of the file's bytes.
    """
    from .._cache import read_public_file

    p = Path(path)
    try:
        pub = read_public_file(p, what="--vocabulary")
        text = pub.data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"cannot read the vocabulary file {p}: {exc}") from None
    words = _clean(text.splitlines())
    if len(words) < 2:
        raise ParameterError(f"the vocabulary file {p} holds {len(words)} usable words; give at least 2 "
                             "(one per line, not stop words)")
    return PublicVocabulary(tuple(words), f"word list ({len(words)} words, file sha256 {pub.sha256})")


def glove_vocabulary(k: int) -> PublicVocabulary:
    """The first ``k`` words of GloVe 6B 50d (frequency order) that the tokenizer keeps.

    Public: GloVe's vocabulary is ordered by frequency in Wikipedia 2014 +
    Gigaword 5, independent of any private corpus.
    """
    from ..embeddings import load_default_embeddings

    k = check_positive_int(k, "K of glove:K", minimum=2)
    emb = load_default_embeddings()
    words: list[str] = []
    seen: set[str] = set()
    for w in emb.words:
        toks = normalize(w)
        if len(toks) == 1 and toks[0] == w and w not in seen:
            seen.add(w)
            words.append(w)
            if len(words) == k:
                break
    return PublicVocabulary(tuple(words), f"glove-6B-50d top {len(words)}")


def public_vocabulary(spec: str, inputs: Sequence[str | Path] = ()) -> PublicVocabulary | None:
    """Resolve a ``--vocabulary`` value: ``"corpus"`` (None), ``"glove:K"`` or a word-list file.

    A file that is one of ``inputs`` (the private corpus) is refused: a
    vocabulary read from the private data is not public.
    """
    s = str(spec).strip()
    if s == CORPUS_VOCABULARY:
        return None
    if s.startswith(GLOVE_PREFIX):
        k = s[len(GLOVE_PREFIX):]
        if not k.isdigit():
            raise ParameterError(f"--vocabulary {s!r}: write glove:K with K a number of words, e.g. glove:20000")
        return glove_vocabulary(int(k))
    p = Path(s)
    if not p.is_file():
        raise ParameterError(f"--vocabulary {s!r} is neither 'corpus', 'glove:K' nor a readable word-list file")
    for inp in inputs:
        try:
            if Path(inp).is_file() and p.samefile(inp):
                raise ParameterError(f"--vocabulary {s} is the private input itself; a public vocabulary must come "
                                     "from public data (or use --vocabulary corpus)")
        except OSError:
            continue
    return read_vocabulary(p)


def vocabulary_note(corpus_settings: dict[str, object], sensitivity_source: str) -> str:
    """The record's sentence on the vocabulary (public: the rule or the public list's name, never the words).

    ``sensitivity_source``: ``"sampled"``, ``"worst-case"``, ``"supplied"`` or
    ``"global"`` (the Laplace baseline's L1 bound ``2m``).

    >>> vocabulary_note({"vocabulary": "public: glove-6B-50d top 100"}, "sampled")[:44]
    'The vocabulary is public (glove-6B-50d top 1'
    """
    described = str(corpus_settings.get("vocabulary", ""))
    if described.startswith("public: "):
        return (f"The vocabulary is public ({described[len('public: '):]}): fixed before any private data is read, "
                "the same columns for every database.")
    rule = (f"words in at least min_df={corpus_settings.get('min_df')} documents and at most "
            f"max_df={corpus_settings.get('max_df')} of them, the max_features={corpus_settings.get('max_features')} "
            "most frequent")
    how = {
        "sampled": "the sampled sensitivity rebuilds it for every sampled database, so the guarantee on the "
                   "matrix values covers it",
        "worst-case": "the worst-case sensitivity sqrt(2m) holds whatever the vocabulary, so the guarantee on the "
                      "matrix values covers it",
        "global": "the global L1 sensitivity 2m holds whatever the vocabulary, so the guarantee on the matrix "
                  "values covers it",
    }.get(sensitivity_source, "the supplied sensitivity must bound the change it causes too")
    return (f"The vocabulary is built from the private corpus by a public rule ({rule}) as part of the released "
            f"function: {how}. Its words are visible only through the keywords (not covered, see keyword_note).")
