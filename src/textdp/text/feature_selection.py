"""Topic-feature selection: keep only the words that matter for a topic task.

The workshop paper on author obfuscation with generalised DP (Fernandes, Dras &
McIver, §2.1 "Model") reduces a document "to the smallest set of words which
guarantee some usefulness", chosen "using a feature classifier to identify the most
significant features for topic classification". Words that carry no topic signal
(function words, an author's idiosyncratic vocabulary) are dropped *before* the
mechanism, so the privacy budget of a bag or text is spent on topical words, and
stylistic markers never reach the mechanism at all.

**Public data only.** The classifier is trained on a *public* labelled corpus with
:meth:`TopicFeatureSelector.fit_public`; the selected vocabulary is a function of that
public corpus alone, so using it is a public preprocessing choice and costs no
privacy budget. :meth:`TopicFeatureSelector.fit` deliberately learns nothing (so a
scikit-learn ``Pipeline.fit`` on private texts cannot leak them into the selection).
Selecting features on the private texts themselves would make the vocabulary depend
on them; textdp offers no way to do that.

Needs scikit-learn (``pip install '.[eval]'`` in the textdp source folder).

Examples
--------
>>> sel = TopicFeatureSelector(n_features=4).fit_public(
...     ["goal match striker goal", "match referee goal", "vote senate election", "senate vote ballot"],
...     ["sport", "sport", "politics", "politics"])
>>> sorted(sel.vocabulary_)
['goal', 'match', 'senate', 'vote']
>>> sel.transform(["The striker missed; the senate will vote on the goal"])
['senate vote goal']
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from .._validation import check_choice, check_positive_int
from ..errors import ParameterError, ParameterTypeError, require
from . import normalize

__all__ = ["SELECTION_METHODS", "TopicFeatureSelector"]

SELECTION_METHODS = ("chi2", "logistic")


class TopicFeatureSelector:
    """Select the ``n_features`` most topic-discriminative words on a public labelled corpus.

    Parameters
    ----------
    n_features : int
        Number of words kept.
    method : {"chi2", "logistic"}
        ``chi2``: chi-square statistic of word presence against the topic labels
        (scikit-learn ``chi2`` on binary document-word counts). ``logistic``: largest absolute
        weight of a word over the classes of a multinomial logistic regression on TF-IDF.
    stop_words : "english", iterable or None
        Removed before selection (they are never selected).
    min_df : int
        Ignore words in fewer public documents.

    Attributes
    ----------
    vocabulary_ : frozenset of str
        The selected words (public: derived from the public corpus only).
    scores_ : dict
        Word -> selection score, for the selected words.
    """

    def __init__(
        self,
        *,
        n_features: int = 2000,
        method: str = "chi2",
        stop_words: str | Iterable[str] | None = "english",
        min_df: int = 2,
    ) -> None:
        self.n_features = n_features
        self.method = method
        self.stop_words = stop_words
        self.min_df = min_df

    def get_params(self, deep: bool = True) -> dict[str, object]:
        """Constructor parameters (scikit-learn protocol)."""
        return {"n_features": self.n_features, "method": self.method, "stop_words": self.stop_words, "min_df": self.min_df}

    def set_params(self, **params: object) -> TopicFeatureSelector:
        """Set constructor parameters (call :meth:`fit_public` again)."""
        for k, v in params.items():
            if k not in self.get_params():
                raise ParameterTypeError(f"unknown parameter {k!r}; valid: {', '.join(self.get_params())}")
            setattr(self, k, v)
        self.__dict__.pop("vocabulary_", None)
        return self

    def fit_public(self, texts: Sequence[str], labels: Sequence[Hashable]) -> TopicFeatureSelector:
        """Choose the vocabulary on a *public* labelled corpus (never on the texts to protect)."""
        n = check_positive_int(self.n_features, "n_features")
        check_choice(self.method, "selection method", SELECTION_METHODS)
        min_df = check_positive_int(self.min_df, "min_df")
        texts = list(texts)
        labels = list(labels)
        if len(texts) != len(labels):
            raise ParameterError(f"got {len(texts)} public texts but {len(labels)} labels")
        if len(set(labels)) < 2:
            raise ParameterError("topic-feature selection needs a public corpus with at least 2 topic labels")
        fe = require("sklearn.feature_extraction.text", "eval")
        stops = self.stop_words

        def analyzer(doc: str) -> list[str]:
            return normalize(doc, stops)

        if self.method == "chi2":
            fs = require("sklearn.feature_selection", "eval")
            vec = fe.CountVectorizer(analyzer=analyzer, min_df=min_df, binary=True)
            x = vec.fit_transform(texts)
            score, _ = fs.chi2(x, labels)
            score = np.nan_to_num(np.asarray(score, dtype=np.float64), nan=0.0)
        else:
            lm = require("sklearn.linear_model", "eval")
            vec = fe.TfidfVectorizer(analyzer=analyzer, min_df=min_df, sublinear_tf=True)
            x = vec.fit_transform(texts)
            clf = lm.LogisticRegression(C=10.0, max_iter=1000)
            clf.fit(x, labels)
            score = np.abs(clf.coef_).max(axis=0)
        words = np.asarray(vec.get_feature_names_out())
        order = np.lexsort((words, -score))[: min(n, words.size)]
        self.scores_ = {str(words[i]): float(score[i]) for i in order}
        self.vocabulary_ = frozenset(self.scores_)
        return self

    def fit(self, X: object = None, y: object = None) -> TopicFeatureSelector:
        """Learns nothing (selection happens in :meth:`fit_public`, on public data only)."""
        self._check_fitted()
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "vocabulary_"):
            raise ParameterError(
                "TopicFeatureSelector is not fitted: call fit_public(public_texts, public_labels) first"
            )

    def filter_tokens(self, tokens: Iterable[str]) -> list[str]:
        """The tokens that are in the selected vocabulary, in order."""
        self._check_fitted()
        keep = self.vocabulary_
        return [t for t in tokens if t in keep]

    def transform(self, X: Iterable[str]) -> list[str]:
        """Texts reduced to their selected words (normalised tokens joined by spaces)."""
        self._check_fitted()
        return [" ".join(self.filter_tokens(normalize(t, self.stop_words))) for t in X]

    def fit_transform(self, X: Iterable[str], y: object = None) -> list[str]:
        """``transform`` (``fit`` learns nothing)."""
        return self.fit().transform(X)
