"""A stronger modern attacker: character n-gram TF-IDF with a linear classifier.

The PAN 2019 cross-domain authorship attribution baseline family (Kestemont et
al., "Overview of the Cross-Domain Authorship Attribution Task at PAN 2019")
represents texts by character n-gram frequencies and trains a linear SVM on
the known texts. Here: TF-IDF over character 2-4-grams (sublinear tf) and a
:class:`sklearn.svm.LinearSVC`, trained on the known texts cut into chunks of
``chunk_words`` words so that each author has several training samples. Needs
the ``eval`` extra (scikit-learn).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .._validation import check_positive_int
from ..errors import ParameterError, require
from ._common import as_token_lists, check_labels

__all__ = ["CharNgramAttacker", "chunk_tokens"]


def chunk_tokens(tokens: list[str], chunk_words: int) -> list[list[str]]:
    """Cut a token list into consecutive chunks of ``chunk_words`` (the last may be shorter, never empty).

    >>> chunk_tokens(list("abcde"), 2)
    [['a', 'b'], ['c', 'd'], ['e']]
    """
    return [tokens[i : i + chunk_words] for i in range(0, len(tokens), chunk_words)] or [tokens]


class CharNgramAttacker:
    """Character n-gram TF-IDF + linear SVM authorship attribution.

    Parameters
    ----------
    ngram_range : tuple of int
        Character n-gram lengths (2, 4).
    chunk_words : int
        Known texts are cut into chunks of this many words for training (100).
    min_df : int
        Minimum number of training chunks a gram must occur in (2).
    max_features : int or None
        Keep the most frequent grams (100,000).
    C : float
        SVM regularisation (1.0).

    Examples
    --------
    >>> att = CharNgramAttacker(chunk_words=5, min_df=1)
    >>> att = att.fit(["red green blue " * 10, "cat dog cow " * 10], ["A", "B"])
    >>> att.predict(["blue red green", "cow cat dog"]).tolist()
    ['A', 'B']
    """

    def __init__(
        self,
        ngram_range: tuple[int, int] = (2, 4),
        *,
        chunk_words: int = 100,
        min_df: int = 2,
        max_features: int | None = 100_000,
        C: float = 1.0,
    ) -> None:
        lo, hi = (check_positive_int(v, "ngram_range") for v in ngram_range)
        if lo > hi:
            raise ParameterError(f"ngram_range must be (low, high) with low <= high, got {ngram_range}")
        self.ngram_range = (lo, hi)
        self.chunk_words = check_positive_int(chunk_words, "chunk_words")
        self.min_df = check_positive_int(min_df, "min_df")
        self.max_features = None if max_features is None else check_positive_int(max_features, "max_features")
        self.C = float(C)

    def fit(self, known: Sequence[object], labels: Sequence[object]) -> CharNgramAttacker:
        """Train on the known texts (one or more per label)."""
        require("sklearn", "eval")
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.svm import LinearSVC

        toks = as_token_lists(known, "known")
        labs = check_labels(labels, len(toks))
        docs: list[str] = []
        ys: list[object] = []
        for t, y in zip(toks, labs, strict=True):
            for ch in chunk_tokens(t, self.chunk_words):
                docs.append(" ".join(ch))
                ys.append(y)
        if len(set(ys)) < 2:
            raise ParameterError("the char n-gram attacker needs known texts of at least two authors")
        min_df = self.min_df if len(docs) >= self.min_df else 1
        self._vec = TfidfVectorizer(
            analyzer="char", ngram_range=self.ngram_range, sublinear_tf=True,
            min_df=min_df, max_features=self.max_features, dtype=np.float64,
        )
        X = self._vec.fit_transform(docs)
        self._clf = LinearSVC(C=self.C, max_iter=20_000)
        with warnings.catch_warnings():
            # a not fully converged SVM still ranks authors; do not fail the run on it
            warnings.simplefilter("ignore", ConvergenceWarning)
            self._clf.fit(X, np.array(ys, dtype=object))
        return self

    def predict(self, texts: Sequence[object]) -> np.ndarray:
        """Predicted author per text."""
        toks = as_token_lists(texts, "texts")
        X = self._vec.transform([" ".join(t) for t in toks])
        return np.asarray(self._clf.predict(X), dtype=object)
