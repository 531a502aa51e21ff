"""Topic models, user-attributed corpora and the released topic-keyword matrix.

TopicDP (Sharma 2021, IIT MSc thesis) is *model-agnostic*: it perturbs the output
of any topic model, the ``m x n`` matrix ``W`` of the top ``m`` topics and the
probabilities of their ``n`` keywords. This module provides

* :class:`UserCorpus` -- documents grouped by user (the unit of privacy), with an
  optional per-user contribution bound and a vocabulary fixed once per corpus;
* :class:`TopicModel` -- the protocol a topic model implements (one method,
  ``fit(X) -> (topic_word, prevalence)``), so any model can be plugged in;
* :class:`SklearnLDA` (default, deterministic batch variational Bayes; its
  ``components_`` are the pseudo-counts normalised here) and :class:`TomotopyLDA`
  (optional collapsed-Gibbs backend);
* :func:`extract_topic_matrix`, :func:`align_topics` and
  :func:`topic_matrix_distance`, the pieces the sensitivity sampler uses.

The released matrix
-------------------
Row ``i`` is the ``i``-th most prevalent topic; its ``n`` entries are the
probabilities of that topic's ``n`` most probable words, in decreasing order, and
``keywords[i][j]`` names the word of entry ``(i, j)``. Each row is a truncated
probability vector, so it sums to at most 1. Two fits are compared as sparse
topic-by-vocabulary matrices: a word that is not among a topic's keywords has
probability 0 there (thesis, Sec. 2.1), so swapping a keyword costs its whole
probability in the distance.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment

from .._validation import check_positive_int
from ..errors import DocumentError, ParameterError, require
from ..io import iter_jsonl_records
from ..text import normalize
from ..text import strip_quoted as strip_quoted_text
from .names import MAX_MODEL_TOPICS, TOPIC_MODELS
from .vocabulary import PublicVocabulary, VocabularyRule, select_vocabulary

__all__ = [
    "SklearnLDA",
    "TomotopyLDA",
    "TopicMatrix",
    "TopicModel",
    "UserCorpus",
    "align_topics",
    "extract_topic_matrix",
    "fit_database",
    "make_topic_model",
    "released_matrix_distance",
    "topic_matrix_distance",
    "topic_rows",
    "topic_rows_distance",
]

#: Bumped when the text preparation changes, so cached sensitivity samples of older corpora are not reused.
CORPUS_VERSION = 3


@runtime_checkable
class TopicModel(Protocol):
    """What TopicDP needs from a topic model (anything with this method works).

    ``fit`` must be a *deterministic* function of the document-term matrix (fix
    the model's seed): the sampled sensitivity is a property of that function,
    and the release must apply the very same function to the real corpus.
    """

    def fit(self, X: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(topic_word, prevalence)``: a ``K x V`` row-stochastic matrix
        and a length-``K`` vector of topic weights (used to rank topics)."""
        ...

    def settings(self) -> dict[str, object]:
        """A JSON-able description of the model (used in cache keys and records)."""
        ...


def _check_topics(k: int) -> int:
    k = check_positive_int(k, "n_topics", minimum=2)
    if k > MAX_MODEL_TOPICS:
        raise ParameterError(f"n_topics={k} is above the limit of {MAX_MODEL_TOPICS} topics per model "
                             "(textdp.topics.names.MAX_MODEL_TOPICS); fit fewer topics")
    return k


def _normalise_rows(a: np.ndarray) -> np.ndarray:
    s = a.sum(axis=1, keepdims=True)
    s[s == 0] = 1.0
    return a / s


@dataclass(frozen=True)
class SklearnLDA:
    """scikit-learn's batch variational LDA with a fixed seed (deterministic).

    Parameters
    ----------
    n_topics : int
        Number of topics ``K`` fitted (the release keeps the top ``m <= K``).
    max_iter : int
        Batch EM passes.
    seed : int
        Seed of the data-independent initialisation of ``components_``; part of
        the definition of the released function, not a source of privacy noise
        (scikit-learn's ``random_state``).
    doc_topic_prior, topic_word_prior : float or None
        Dirichlet priors (scikit-learn's default ``1/K`` when None).

    The topic-word matrix is ``components_`` (variational pseudo-counts)
    normalised per row; prevalence is each topic's share of the pseudo-counts.
    """

    n_topics: int = 10
    max_iter: int = 10
    seed: int = 0
    doc_topic_prior: float | None = None
    topic_word_prior: float | None = None

    def __post_init__(self) -> None:
        _check_topics(self.n_topics)
        check_positive_int(self.max_iter, "max_iter")
        check_positive_int(self.seed, "seed", minimum=0)

    def fit(self, X: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """Fit on ``X`` and return ``(topic_word, prevalence)``."""
        decomposition = require("sklearn.decomposition", "topics")
        lda = decomposition.LatentDirichletAllocation(
            n_components=self.n_topics,
            max_iter=self.max_iter,
            learning_method="batch",
            random_state=self.seed,
            doc_topic_prior=self.doc_topic_prior,
            topic_word_prior=self.topic_word_prior,
            n_jobs=1,
        )
        # scikit-learn emits no warning for this configuration; anything it does
        # emit (e.g. a future deprecation) is turned into an error by the test
        # suite rather than silenced here.
        lda.fit(X)
        comp = np.asarray(lda.components_, dtype=float)
        return _normalise_rows(comp), comp.sum(axis=1) / comp.sum()

    def settings(self) -> dict[str, object]:
        return {"library": "sklearn", "n_topics": self.n_topics, "max_iter": self.max_iter,
                "seed": self.seed, "doc_topic_prior": self.doc_topic_prior,
                "topic_word_prior": self.topic_word_prior}


@dataclass(frozen=True)
class TomotopyLDA:
    """tomotopy's collapsed-Gibbs LDA (optional, faster on large corpora).

    Deterministic given ``seed`` because it is trained single-threaded
    (``ParallelScheme.NONE``). Needs ``pip install tomotopy``.
    """

    n_topics: int = 10
    iterations: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        _check_topics(self.n_topics)
        check_positive_int(self.iterations, "iterations")
        check_positive_int(self.seed, "seed", minimum=0)

    def fit(self, X: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """Fit on ``X`` (word ids become the tokens) and return ``(topic_word, prevalence)``."""
        tp = require("tomotopy", "topics-fast")
        X = sparse.csr_matrix(X)
        V = X.shape[1]
        mdl = tp.LDAModel(k=self.n_topics, seed=self.seed, min_cf=0, rm_top=0)
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            words = [str(j) for j, c in zip(X.indices[lo:hi], X.data[lo:hi]) for _ in range(int(c))]
            if words:
                mdl.add_doc(words)
        if len(mdl.docs) == 0:
            raise DocumentError("no document has an in-vocabulary word")
        mdl.train(self.iterations, workers=1, parallel=tp.ParallelScheme.NONE)
        vocab = [int(w) for w in mdl.used_vocabs]
        tw = np.zeros((self.n_topics, V))
        for k in range(self.n_topics):
            tw[k, vocab] = mdl.get_topic_word_dist(k)
        counts = np.asarray(mdl.get_count_by_topics(), dtype=float)
        return _normalise_rows(tw), counts / max(counts.sum(), 1.0)

    def settings(self) -> dict[str, object]:
        return {"library": "tomotopy", "n_topics": self.n_topics, "iterations": self.iterations,
                "seed": self.seed}


def make_topic_model(name: str = "sklearn", *, n_topics: int = 10, max_iter: int = 10,
                     seed: int = 0) -> TopicModel:
    """Build a model by library name (one of :data:`~textdp.topics.names.TOPIC_MODELS`).

    >>> make_topic_model("sklearn", n_topics=5).settings()["n_topics"]
    5
    """
    if name == "sklearn":
        return SklearnLDA(n_topics=n_topics, max_iter=max_iter, seed=seed)
    if name == "tomotopy":
        return TomotopyLDA(n_topics=n_topics, iterations=max(max_iter, 1) * 20, seed=seed)
    raise ParameterError(f"unknown topic model {name!r}; choose one of: {', '.join(TOPIC_MODELS)}")


def _user_rows(users: Sequence[object], min_user_docs: int, max_docs_per_user: int | None) -> dict[str, list[int]]:
    """Each kept user's document indices in input order: users with fewer than ``min_user_docs`` documents
    dropped, the first ``max_docs_per_user`` kept; at least two users, else a :class:`DocumentError`."""
    counts: dict[str, int] = {}
    for u in users:
        if u is not None:
            counts[str(u)] = counts.get(str(u), 0) + 1
    order: dict[str, list[int]] = {}
    for i, u in enumerate(users):
        if u is None or counts[str(u)] < min_user_docs:
            continue
        rows = order.setdefault(str(u), [])
        if max_docs_per_user is None or len(rows) < max_docs_per_user:
            rows.append(i)
    if len(order) < 2:
        raise DocumentError("the corpus needs at least two users with documents")
    return order


def _corpus_fingerprint(texts: Sequence[str], users: Sequence[object], keep: Sequence[int],
                        settings: dict[str, object], public: PublicVocabulary | None) -> str:
    """The cache key of a corpus: its kept (user, text) pairs, its settings and its public vocabulary."""
    h = hashlib.sha256()
    for i in keep:
        h.update(str(users[i]).encode("utf-8", "replace") + b"\0")
        h.update(str(texts[i]).encode("utf-8", "replace") + b"\1")
    h.update(json.dumps({**settings, "version": CORPUS_VERSION}, sort_keys=True).encode())
    if public is not None:
        h.update("\n".join(public.words).encode("utf-8"))
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class UserCorpus:
    """Documents grouped by user, vectorised once; each database gets its vocabulary by a fixed rule.

    A user-level neighbour adds or removes *all* of one user's documents. The
    vocabulary is part of the released function (:mod:`textdp.topics.vocabulary`):

    * **corpus vocabulary** (default): the documents are counted once over every
      word they use (``counts``, columns ``columns`` in alphabetical order), and
      :meth:`database` applies the rule (``min_df``, ``max_df``,
      ``max_features``; :func:`~textdp.topics.vocabulary.select_vocabulary`) to
      the documents of the users it is given. The release is
      ``database(all users)``; every sampled neighbour is ``database(its users)``
      with *its own* vocabulary, exactly what the release would build had that
      neighbour been the corpus (issue 19: holding the corpus's vocabulary fixed
      for the neighbours measured a different function);
    * **public vocabulary** (``vocabulary=`` a word list): the columns are that
      list, fixed before any private data is read, for every database.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix
        Document-term counts of the whole corpus (``database(all users)[0]``).
    vocabulary : tuple of str
        Its columns (``database(all users)[1]``).
    users : tuple of str
        Distinct users, in first-appearance order.
    user_rows : tuple of numpy arrays
        ``user_rows[u]`` are the rows of ``X`` belonging to ``users[u]``.
    max_docs_per_user : int or None
        Contribution bound: at most this many documents per user (the first
        ones in corpus order) are used, by the release *and* by the sampler.
    fingerprint : str
        Hash of the texts, users and settings (cache key component).
    settings : dict
        The public construction parameters (not the private counts).
    counts : scipy.sparse.csr_matrix or None
        Counts over ``columns`` (all corpus words, or the public list).
    columns : tuple of str
    rule : dict or None
        ``{"min_df", "max_df", "max_features"}`` of the corpus vocabulary; None
        for a public vocabulary (or a corpus built directly from ``X``, whose
        columns are then held fixed).

    Documents are tokenised by :func:`textdp.text.normalize` (the one tokenizer:
    Unicode letters, English stop words and one-letter tokens removed) and, with
    ``strip_quoted``, cleaned by :func:`textdp.text.strip_quoted`.
    """

    X: sparse.csr_matrix
    vocabulary: tuple[str, ...]
    users: tuple[str, ...]
    user_rows: tuple[np.ndarray, ...]
    max_docs_per_user: int | None
    fingerprint: str
    settings: dict[str, object] = field(default_factory=dict)
    counts: sparse.csr_matrix | None = None
    columns: tuple[str, ...] = ()
    rule: VocabularyRule | None = None

    @classmethod
    def from_texts(cls, texts: Sequence[str], users: Sequence[object], *,
                   max_docs_per_user: int | None = None, max_features: int = 2000,
                   min_df: int = 5, max_df: float = 0.5, min_user_docs: int = 1,
                   strip_quoted: bool = False,
                   vocabulary: PublicVocabulary | Sequence[str] | None = None) -> UserCorpus:
        """Vectorise ``texts`` (English stop words removed, alphabetic tokens).

        Users with fewer than ``min_user_docs`` documents are dropped (a
        population choice made before any release; documented in the record).
        ``strip_quoted`` removes quoted-reply lines (starting with ``>`` or ``|``)
        and "... writes:" attribution lines (:func:`textdp.text.strip_quoted`):
        in e-mail and Usenet they are *other* users' words, which removing the
        poster's documents would not remove. ``vocabulary``: a public word list
        (:class:`~textdp.topics.vocabulary.PublicVocabulary` or a sequence of
        words); ``max_features``, ``min_df`` and ``max_df`` then do not apply.
        Without it the corpus vocabulary rule applies to every database.

        >>> c = UserCorpus.from_texts(["apple banana", "banana cherry", "apple cherry"],
        ...                           ["u1", "u1", "u2"], min_df=1, max_df=1.0)
        >>> c.users, c.X.shape
        (('u1', 'u2'), (3, 3))
        >>> c.database([1])[1]
        ('apple', 'cherry')
        """
        if len(texts) != len(users):
            raise ParameterError(f"got {len(texts)} texts but {len(users)} users")
        check_positive_int(max_features, "max_features")
        check_positive_int(min_user_docs, "min_user_docs")
        check_positive_int(min_df, "min_df")
        if max_docs_per_user is not None:
            check_positive_int(max_docs_per_user, "max_docs_per_user")
        order = _user_rows(users, min_user_docs, max_docs_per_user)
        keep = [i for rows in order.values() for i in rows]
        kept_texts = [strip_quoted_text(str(texts[i])) if strip_quoted else str(texts[i]) for i in keep]
        fe = require("sklearn.feature_extraction.text", "topics")
        public = None
        if vocabulary is not None:
            public = (vocabulary if isinstance(vocabulary, PublicVocabulary)
                      else PublicVocabulary(tuple(dict.fromkeys(str(w) for w in vocabulary)), "public word list"))
            if len(public.words) < 2:
                raise ParameterError("a public vocabulary needs at least 2 words")
            cv = fe.CountVectorizer(analyzer=normalize, vocabulary=list(public.words))
        else:
            cv = fe.CountVectorizer(analyzer=normalize)
        try:
            full = sparse.csr_matrix(cv.fit_transform(kept_texts), dtype=np.float64)
        except ValueError as exc:  # no word at all
            raise DocumentError(f"cannot build a vocabulary: {exc}") from exc
        full.sum_duplicates()
        columns = tuple(str(w) for w in cv.get_feature_names_out().tolist())
        rule: VocabularyRule | None = (None if public is not None else
                                       {"min_df": min_df, "max_df": max_df, "max_features": max_features})
        pos = {i: r for r, i in enumerate(keep)}
        user_rows = tuple(np.array([pos[i] for i in rows], dtype=np.int64) for rows in order.values())
        settings: dict[str, object] = {"max_docs_per_user": max_docs_per_user, "min_user_docs": min_user_docs,
                                       "strip_quoted": strip_quoted}
        if public is None:
            settings.update(vocabulary="corpus (rebuilt for every database by the rule below)",
                            max_features=max_features, min_df=min_df, max_df=max_df)
        else:
            settings["vocabulary"] = f"public: {public.name}"
        fingerprint = _corpus_fingerprint(texts, users, keep, settings, public)
        base = cls(X=full, vocabulary=columns, users=tuple(order), user_rows=user_rows,
                   max_docs_per_user=max_docs_per_user, fingerprint=fingerprint, settings=settings,
                   counts=full, columns=columns, rule=rule)
        X, vocab = base.database(range(len(order)))
        return replace(base, X=X, vocabulary=vocab)

    @classmethod
    def from_jsonl(cls, path: str | Path, *, user_field: str = "author", text_field: str = "text",
                   **kwargs: object) -> UserCorpus:
        """Load a (optionally gzipped) JSON-lines corpus; rows without a user are skipped."""
        texts: list[str] = []
        users: list[object] = []
        for n, row in enumerate(iter_jsonl_records(path), 1):
            if user_field not in row:
                raise DocumentError(f"{path}: record {n} has no field {user_field!r} (choose it with --user-field)")
            if row[user_field] is None:
                continue
            texts.append(str(row.get(text_field) or ""))
            users.append(row[user_field])
        return cls.from_texts(texts, users, **kwargs)  # type: ignore[arg-type]

    @property
    def n_users(self) -> int:
        """Number of users (private: never put it in a release)."""
        return len(self.users)

    @property
    def n_docs(self) -> int:
        """Number of documents kept (private: never put it in a release)."""
        return int(self.X.shape[0])

    def _rows(self, user_indices: Iterable[int]) -> np.ndarray:
        idx = [self.user_rows[int(u)] for u in user_indices]
        return np.concatenate(idx) if idx else np.zeros(0, dtype=np.int64)

    def database(self, user_indices: Iterable[int]) -> tuple[sparse.csr_matrix, tuple[str, ...]]:
        """Document-term matrix and vocabulary of the database of users ``user_indices`` (a multiset).

        This is the first step of the released function: ``database(range(n_users))``
        is what the release fits, and the sensitivity sampler fits
        ``database(D)`` for each sampled database ``D``. With the corpus
        vocabulary the rule is re-applied to ``D``'s documents (a user drawn
        twice counts twice), so the result is, byte for byte, what
        :meth:`from_texts` builds from ``D``'s documents alone (in this order).
        """
        rows = self._rows(user_indices)
        if self.counts is None:  # built directly from X: columns fixed
            return self.X[rows], self.vocabulary
        sub = self.counts[rows]
        if self.rule is None:
            return sub, self.columns
        df = np.bincount(sub.indices, minlength=len(self.columns))
        tf = np.asarray(sub.sum(axis=0)).ravel()
        keep = select_vocabulary(df, tf, int(sub.shape[0]), **self.rule)
        return sub[:, keep], tuple(self.columns[i] for i in keep)

    def with_public_vocabulary(self, vocabulary: PublicVocabulary) -> UserCorpus:
        """The same users and documents over the public ``vocabulary`` (fixed columns, in its order).

        Byte for byte what :meth:`from_texts` builds with ``vocabulary=``: the counts are sliced
        from the corpus's own counts (a word the corpus never uses is an all-zero column).

        >>> c = UserCorpus.from_texts(["apple banana", "banana cherry", "apple cherry"],
        ...                           ["u1", "u1", "u2"], min_df=1, max_df=1.0)
        >>> p = c.with_public_vocabulary(PublicVocabulary(("cherry", "apple", "kiwi"), "toy"))
        >>> p.vocabulary, p.X.toarray().tolist(), p.rule is None
        (('cherry', 'apple', 'kiwi'), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], True)
        """
        if self.counts is None:
            raise ParameterError("this corpus was built from a matrix; build it from texts to change its vocabulary")
        if len(vocabulary.words) < 2:
            raise ParameterError("a public vocabulary needs at least 2 words")
        index = {w: i for i, w in enumerate(self.columns)}
        n = len(self.columns)
        padded = sparse.hstack([self.counts, sparse.csr_matrix((self.counts.shape[0], 1))], format="csr")
        X = sparse.csr_matrix(padded[:, [index.get(w, n) for w in vocabulary.words]], dtype=np.float64)
        settings = {k: v for k, v in self.settings.items() if k not in ("max_features", "min_df", "max_df")}
        settings["vocabulary"] = f"public: {vocabulary.name}"
        h = hashlib.sha256(self.fingerprint.encode() + b"\0" + "\n".join(vocabulary.words).encode("utf-8"))
        h.update(json.dumps(settings, sort_keys=True, default=str).encode())
        return replace(self, X=X, vocabulary=vocabulary.words, fingerprint=h.hexdigest()[:24], settings=settings,
                       counts=X, columns=vocabulary.words, rule=None)

    def rows_for(self, user_indices: Iterable[int]) -> sparse.csr_matrix:
        """Document-term matrix of the multiset of users ``user_indices`` (``database(...)[0]``)."""
        return self.database(user_indices)[0]


def fit_database(corpus: UserCorpus, model: TopicModel,
                 user_indices: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The released function up to the matrix: ``(topic_word, prevalence, vocabulary)`` of a database.

    ``user_indices`` default to every user of the corpus once, in corpus order:
    that is the release (``textdp topics`` calls exactly this). The sensitivity
    sampler calls it on each sampled database.
    """
    users = range(corpus.n_users) if user_indices is None else user_indices
    X, vocabulary = corpus.database(users)
    topic_word, prevalence = model.fit(X)
    return topic_word, prevalence, vocabulary


@dataclass(frozen=True)
class TopicMatrix:
    """The ``m x n`` topic-keyword matrix (non-private until a mechanism is applied).

    ``matrix[i, j]`` is the probability of ``keywords[i][j]`` in topic
    ``topic_ids[i]`` (model topic index), rows ordered by topic prevalence.
    """

    matrix: np.ndarray
    keywords: tuple[tuple[str, ...], ...]
    topic_ids: tuple[int, ...]
    #: How the columns were chosen: ``"model"`` (each topic's top ``n`` words of the non-private model,
    #: :func:`extract_topic_matrix`) or ``"public"`` (every row over the same public vocabulary, in its
    #: order, :func:`topic_rows`); only ``"public"`` rows can be released with keywords from noisy values.
    columns: str = "model"

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.matrix.shape[0]), int(self.matrix.shape[1]))


def _top_topics(prevalence: np.ndarray, m: int) -> np.ndarray:
    return np.argsort(-prevalence, kind="stable")[:m]


def extract_topic_matrix(topic_word: np.ndarray, prevalence: np.ndarray,
                         vocabulary: Sequence[str], m: int, n: int) -> TopicMatrix:
    """Top ``m`` topics (by prevalence) and their top ``n`` keywords.

    >>> tw = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    >>> t = extract_topic_matrix(tw, np.array([0.3, 0.7]), ["a", "b", "c"], 2, 2)
    >>> t.keywords, t.matrix.tolist()
    ((('c', 'a'), ('a', 'b')), [[0.8, 0.1], [0.5, 0.3]])
    """
    K, V = topic_word.shape
    check_positive_int(m, "m (topics)")
    check_positive_int(n, "n (keywords)")
    if m > K:
        raise ParameterError(f"cannot release {m} topics from a model with {K} topics")
    if n > V:
        raise ParameterError(f"cannot release {n} keywords from a vocabulary of {V} words")
    topics = _top_topics(prevalence, m)
    mat = np.empty((m, n))
    kws: list[tuple[str, ...]] = []
    for i, t in enumerate(topics):
        cols = np.argsort(-topic_word[t], kind="stable")[:n]
        mat[i] = topic_word[t, cols]
        kws.append(tuple(vocabulary[c] for c in cols))
    return TopicMatrix(matrix=mat, keywords=tuple(kws), topic_ids=tuple(int(t) for t in topics))


def topic_rows(topic_word: np.ndarray, prevalence: np.ndarray, vocabulary: Sequence[str], m: int) -> TopicMatrix:
    """The top ``m`` topics (by prevalence, in that order) as whole rows over the public vocabulary.

    The released function of the covered default (``keywords_from="noisy"``):
    every column of the vocabulary is kept in the vocabulary's own order, so the
    columns are the same for every database and no keyword is chosen before the
    noise; each topic's keywords are then read off the *noisy* row
    (:meth:`textdp.topics.family.TopicsMechanism` with ``keywords=n``).

    >>> tw = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    >>> t = topic_rows(tw, np.array([0.3, 0.7]), ["a", "b", "c"], 1)
    >>> t.matrix.tolist(), t.keywords, t.columns
    ([[0.1, 0.1, 0.8]], (('a', 'b', 'c'),), 'public')
    """
    K, _ = topic_word.shape
    check_positive_int(m, "m (topics)")
    if m > K:
        raise ParameterError(f"cannot release {m} topics from a model with {K} topics")
    topics = _top_topics(prevalence, m)
    words = tuple(str(w) for w in vocabulary)
    return TopicMatrix(matrix=np.array(topic_word[topics], dtype=float), keywords=(words,) * m,
                       topic_ids=tuple(int(t) for t in topics), columns="public")


def topic_rows_distance(tw_a: np.ndarray, prev_a: np.ndarray, tw_b: np.ndarray, prev_b: np.ndarray,
                        ms: Sequence[int]) -> np.ndarray:
    """Frobenius distance between the :func:`topic_rows` of two fits over the same columns, per ``m``.

    Row ``i`` of each is that fit's ``i``-th most prevalent topic, compared column by column
    (the columns are the public vocabulary, the same for both): the L2 distance of the function
    the covered release adds noise to, topic order included.

    >>> tw = np.array([[0.6, 0.4, 0.0], [0.0, 0.2, 0.8]])
    >>> float(topic_rows_distance(tw, np.array([0.6, 0.4]), tw[::-1], np.array([0.4, 0.6]), [2])[0])
    0.0
    >>> round(float(topic_rows_distance(tw, np.array([0.6, 0.4]), tw, np.array([0.4, 0.6]), [1])[0]), 4)
    1.0198
    """
    if tw_a.shape[1] != tw_b.shape[1]:
        raise ParameterError("topic rows are compared over the same public columns; the two fits have "
                             f"{tw_a.shape[1]} and {tw_b.shape[1]}")
    mm = max(check_positive_int(m, "m (topics)") for m in ms)
    d = ((tw_a[_top_topics(prev_a, mm)] - tw_b[_top_topics(prev_b, mm)]) ** 2).sum(axis=1)
    return np.array([math.sqrt(float(d[:m].sum())) for m in ms])


def align_topics(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Permutation ``p`` with ``other[p[i]]`` the topic matched to ``reference[i]``.

    Hungarian matching (``scipy.optimize.linear_sum_assignment``) minimising the
    total L1 distance between full topic-word distributions; topic labels of two
    LDA fits are arbitrary, so distances are only meaningful after alignment.

    >>> a = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> align_topics(a, a[::-1]).tolist()
    [1, 0]
    """
    cost = np.abs(reference[:, None, :] - other[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(reference.shape[0], dtype=np.int64)
    perm[rows] = cols
    return perm


def topic_matrix_distance(tw_a: np.ndarray, prev_a: np.ndarray, tw_b: np.ndarray,
                          sizes: Sequence[tuple[int, int]]) -> np.ndarray:
    """Frobenius distance between the released matrices of two fits, per size.

    For each ``(m, n)`` in ``sizes``: take fit A's top ``m`` topics, match fit
    B's topics to them (:func:`align_topics`), and for each matched pair compare
    the two truncated rows over the union of their keyword sets, where a word
    outside a topic's top ``n`` counts as probability 0. This is the L2 distance
    between the two releases viewed as sparse ``m x V`` matrices, so it also
    charges a change of keyword identity (it upper-bounds the distance on A's
    keyword positions whenever the dropped words' probabilities fall).

    >>> tw = np.array([[0.6, 0.4, 0.0], [0.0, 0.2, 0.8]])
    >>> float(topic_matrix_distance(tw, np.array([0.5, 0.5]), tw[::-1], [(2, 2)])[0])
    0.0
    """
    perm = align_topics(tw_a, tw_b)
    out = np.empty(len(sizes))
    for s, (m, n) in enumerate(sizes):
        topics = _top_topics(prev_a, m)
        total = 0.0
        for t in topics:
            a = tw_a[t]
            b = tw_b[perm[t]]
            ta = np.argsort(-a, kind="stable")[:n]
            tb = np.argsort(-b, kind="stable")[:n]
            va = np.zeros_like(a)
            vb = np.zeros_like(b)
            va[ta] = a[ta]
            vb[tb] = b[tb]
            union = np.union1d(ta, tb)
            total += float(np.sum((va[union] - vb[union]) ** 2))
        out[s] = np.sqrt(total)
    return out


def _released_values(topic_word: np.ndarray, prevalence: np.ndarray, m: int, n: int) -> np.ndarray:
    """The ``m x n`` values :func:`extract_topic_matrix` releases (without the keyword names)."""
    topics = _top_topics(prevalence, m)
    rows = topic_word[topics]
    order = np.argsort(-rows, axis=1, kind="stable")[:, :n]
    return np.take_along_axis(rows, order, axis=1)


def released_matrix_distance(tw_a: np.ndarray, prev_a: np.ndarray, tw_b: np.ndarray, prev_b: np.ndarray,
                             sizes: Sequence[tuple[int, int]]) -> np.ndarray:
    """Frobenius distance between the matrices that would be *released* from two fits, per size.

    For each ``(m, n)``: ``||extract_topic_matrix(A).matrix - extract_topic_matrix(B).matrix||_F``,
    position by position (row ``i`` = each fit's ``i``-th most prevalent topic,
    column ``j`` = its ``j``-th largest probability). This is the L2 distance of
    the function the mechanisms add noise to, so it is what the sensitivity
    sampler measures (keyword identities are not part of the protected values).

    >>> tw = np.array([[0.6, 0.4, 0.0], [0.0, 0.2, 0.8]])
    >>> float(released_matrix_distance(tw, np.array([0.6, 0.4]), tw[::-1], np.array([0.4, 0.6]), [(2, 2)])[0])
    0.0
    >>> round(float(released_matrix_distance(tw, np.array([0.6, 0.4]), tw, np.array([0.4, 0.6]), [(1, 2)])[0]), 4)
    0.2828
    """
    mm = max(m for m, _ in sizes)
    nn = max(n for _, n in sizes)
    for m, n in sizes:
        check_positive_int(m, "m (topics)")
        check_positive_int(n, "n (keywords)")
    a = _released_values(tw_a, prev_a, mm, nn)
    b = _released_values(tw_b, prev_b, mm, nn)
    d = (a - b) ** 2
    return np.array([math.sqrt(float(d[:m, :n].sum())) for m, n in sizes])
