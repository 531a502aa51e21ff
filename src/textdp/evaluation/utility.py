"""Utility models: topic classification of (privatised) snippets.

* ``"tfidf"`` -- word TF-IDF + logistic regression (scikit-learn, extra ``eval``);
* ``"fasttext"`` -- fastText supervised classifier (Joulin et al., 2017) as in the
  paper (25 epochs, learning rate 1.0; extra ``fasttext``);
* ``"knn-topic"`` -- 5-NN over mean word vectors, the paper's same-representation
  topic classifier (:class:`textdp.attacks.NearestNeighbourAttacker`).

All are trained on texts of authors outside the evaluated set and take
normalised token lists.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence

import numpy as np

from ..attacks._common import as_token_lists, check_labels
from ..errors import ParameterError, require

__all__ = ["FastTextTopicClassifier", "TfidfTopicClassifier"]


class TfidfTopicClassifier:
    """Word unigram+bigram TF-IDF with multinomial logistic regression.

    Examples
    --------
    >>> clf = TfidfTopicClassifier().fit(["space rocket orbit", "hockey puck goal"] * 3, ["sci", "sport"] * 3)
    >>> clf.predict(["orbit rocket", "goal puck"]).tolist()
    ['sci', 'sport']
    """

    def __init__(self, C: float = 10.0, ngram_range: tuple[int, int] = (1, 2), min_df: int = 1) -> None:
        self.C = float(C)
        self.ngram_range = ngram_range
        self.min_df = min_df

    def fit(self, texts: Sequence[object], labels: Sequence[object]) -> TfidfTopicClassifier:
        """Train on normalised texts."""
        require("sklearn", "eval")
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        toks = as_token_lists(texts, "texts")
        y = check_labels(labels, len(toks))
        if len(set(y.tolist())) < 2:
            raise ParameterError("topic classification needs training texts of at least two topics")
        self._vec = TfidfVectorizer(
            tokenizer=str.split, token_pattern=None, lowercase=False, ngram_range=self.ngram_range,
            sublinear_tf=True, min_df=self.min_df, dtype=np.float64,
        )
        X = self._vec.fit_transform([" ".join(t) for t in toks])
        self._clf = LogisticRegression(C=self.C, max_iter=2000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self._clf.fit(X, y.astype(str))
        return self

    def predict(self, texts: Sequence[object]) -> np.ndarray:
        """Predicted topic per text."""
        toks = as_token_lists(texts, "texts")
        return np.asarray(self._clf.predict(self._vec.transform([" ".join(t) for t in toks])), dtype=object)


class FastTextTopicClassifier:
    """fastText supervised topic classifier (paper's DRtopic: 25 epochs, lr 1.0).

    Needs the ``fasttext`` extra (``fasttext-numpy2-wheel``). Training is
    multi-threaded inside fastText and therefore not bit-reproducible;
    ``thread=1`` (the default) with ``seed`` makes it so.
    """

    def __init__(self, epoch: int = 25, lr: float = 1.0, dim: int = 50, word_ngrams: int = 2, seed: int = 0, thread: int = 1) -> None:
        self.epoch, self.lr, self.dim, self.word_ngrams, self.seed, self.thread = epoch, lr, dim, word_ngrams, seed, thread

    def fit(self, texts: Sequence[object], labels: Sequence[object]) -> FastTextTopicClassifier:
        """Train on normalised texts."""
        fasttext = require("fasttext", "fasttext")
        toks = as_token_lists(texts, "texts")
        y = check_labels(labels, len(toks))
        fd, path = tempfile.mkstemp(suffix=".txt", prefix="textdp-fasttext-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for t, lab in zip(toks, y, strict=True):
                    fh.write(f"__label__{str(lab).replace(' ', '_')} {' '.join(t)}\n")
            self._model = fasttext.train_supervised(
                input=path, epoch=self.epoch, lr=self.lr, dim=self.dim, wordNgrams=self.word_ngrams,
                seed=self.seed, thread=self.thread, verbose=0,
            )
        finally:
            os.unlink(path)
        self._labels = {f"__label__{str(lab).replace(' ', '_')}": lab for lab in y.tolist()}
        return self

    def predict(self, texts: Sequence[object]) -> np.ndarray:
        """Predicted topic per text."""
        toks = as_token_lists(texts, "texts")
        out = np.empty(len(toks), dtype=object)
        for i, t in enumerate(toks):
            lab = self._model.predict(" ".join(t), k=1)[0][0]
            out[i] = self._labels.get(lab, lab)
        return out
