"""Koppel, Schler & Argamon (2011) authorship attribution, vectorised.

The attacker that the Earth Mover's privacy paper (Fernandes, Dras & McIver,
POST 2019, Section 6 and Appendix B.2) uses for *different-representation*
author identification. Each text is a vector of character 4-gram counts; in
each of ``trials`` rounds a random subset of the feature list is kept, the
unknown text is compared with a random window of equal length from each
candidate's known text, and the most similar candidate wins the round. The
candidate with most wins is the answer and its share of wins the score.

Two readings are offered (:data:`VARIANTS`):

``"pan"`` (default)
    The PAN reproducibility study's replication (Potthast et al., "Who wrote
    the web?", ECIR 2016; code ``pan-webis-de/koppel11``), which the paper used:
    the feature list is the 20,000 most frequent *word-internal* grams of the
    known texts (tokens of at most 4 characters whole, all 4-character
    substrings of longer tokens), but texts under test are joined **without
    spaces** before counting (so grams run across word boundaries), similarity
    is min-max, and each trial keeps a random half of the features.
``"koppel2011"``
    The original paper's reading: grams counted within words (the same
    extraction as the feature list), cosine similarity, 40% of the features per
    trial.

Everything is seeded by one :class:`numpy.random.Generator`; counts come from
``numpy.bincount`` over precomputed gram ids, and all trials of one unknown
text are evaluated together as array operations. For each unknown text the
generator draws, in order, a ``(trials, n_features)`` array of uniform keys
(the kept features of trial ``t`` are the ``k`` smallest keys of row ``t``) and
a ``(trials, n_candidates)`` array of window starts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_positive_int, check_probability
from ..errors import DocumentError, ParameterError
from ._common import as_token_lists, check_labels, check_nonempty

__all__ = ["VARIANTS", "KoppelAttacker", "KoppelResult", "KoppelVariant", "token_grams"]


@dataclass(frozen=True)
class KoppelVariant:
    """A named reading of the Koppel et al. (2011) algorithm.

    Attributes
    ----------
    name : str
        ``"pan"`` or ``"koppel2011"``.
    joined : bool
        Count grams over the text joined without spaces (PAN replication) or
        within words.
    similarity : {"minmax", "cosine"}
        Similarity of the count vectors.
    feature_fraction : float
        Share of the feature list kept in each trial.
    """

    name: str
    joined: bool
    similarity: str
    feature_fraction: float
    description: str


#: The two readings, by name.
VARIANTS: dict[str, KoppelVariant] = {
    "pan": KoppelVariant(
        "pan", True, "minmax", 0.5,
        "PAN replication (Potthast et al. 2016, koppel11): grams over text joined without spaces, "
        "min-max similarity, half the features per trial",
    ),
    "koppel2011": KoppelVariant(
        "koppel2011", False, "cosine", 0.4,
        "Koppel et al. (2011) reading: word-internal grams, cosine similarity, 40% of the features per trial",
    ),
}


def token_grams(token: str, n: int = 4) -> list[str]:
    """Grams of one token: the token whole if it has at most ``n`` characters, else its ``n``-substrings.

    >>> token_grams("cat"), token_grams("house")
    (['cat'], ['hous', 'ouse'])
    """
    if len(token) <= n:
        return [token]
    return [token[i : i + n] for i in range(len(token) - n + 1)]


@dataclass(frozen=True)
class KoppelResult:
    """Answers of :meth:`KoppelAttacker.attribute`.

    Attributes
    ----------
    labels : numpy.ndarray
        Predicted candidate label per unknown text.
    indices : numpy.ndarray
        Index of the predicted candidate (into ``candidates``).
    scores : numpy.ndarray
        Share of trials the predicted candidate won (Koppel's confidence).
    wins : numpy.ndarray
        ``(n_unknown, n_candidates)`` trial wins.
    candidates : numpy.ndarray
        Candidate labels in column order.
    """

    labels: np.ndarray
    indices: np.ndarray
    scores: np.ndarray
    wins: np.ndarray
    candidates: np.ndarray


class _Stream:
    """Gram ids of one known text, with word offsets into the gram stream."""

    __slots__ = ("ids", "n_words", "tokens", "word_off")

    def __init__(self, ids: np.ndarray, word_off: np.ndarray, tokens: list[str]) -> None:
        self.ids = ids
        self.word_off = word_off
        self.n_words = len(tokens)
        self.tokens = tokens


class KoppelAttacker:
    """Koppel et al. (2011) authorship attribution ("authorship in the wild").

    Parameters
    ----------
    variant : {"pan", "koppel2011"}
        Which reading (see the module docstring and :data:`VARIANTS`).
    n : int
        Gram length (4).
    n_features : int
        Size of the feature list: the most frequent grams of the known texts
        (20,000).
    trials : int
        Random trials per unknown text (100).
    feature_fraction : float, optional
        Override the variant's share of features per trial.
    seed : int, numpy.random.Generator or None
        Seed or generator for the feature subsets and windows.

    References
    ----------
    M. Koppel, J. Schler, S. Argamon, "Authorship attribution in the wild",
    Language Resources and Evaluation 45(1), 2011. M. Potthast, S. Braun, T. Buz,
    F. Duffhauss, F. Friedrich, J. Gülzow, J. Köhler, W. Lötzsch, F. Müller,
    M. Müller, R. Paßmann, B. Reinke, L. Rettenmeier, T. Rometsch, T. Sommer,
    M. Träger, S. Wilhelm, B. Stein, E. Stamatatos, M. Hagen, "Who wrote the web?
    Revisiting influential author identification research applicable to
    information retrieval", ECIR 2016.

    Examples
    --------
    >>> known = ["alpha beta gamma " * 20, "delta epsilon zeta " * 20]
    >>> att = KoppelAttacker(trials=10, seed=0).fit(known, ["A", "B"])
    >>> att.predict(["gamma alpha beta " * 5, "zeta delta epsilon " * 5]).tolist()
    ['A', 'B']
    """

    def __init__(
        self,
        variant: str = "pan",
        *,
        n: int = 4,
        n_features: int = 20_000,
        trials: int = 100,
        feature_fraction: float | None = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        check_choice(variant, "Koppel variant", tuple(VARIANTS))
        self.variant = VARIANTS[variant]
        self.n = check_positive_int(n, "n")
        self.n_features = check_positive_int(n_features, "n_features")
        self.trials = check_positive_int(trials, "trials")
        frac = self.variant.feature_fraction if feature_fraction is None else feature_fraction
        self.feature_fraction = check_probability(frac, "feature_fraction", open_high=False)
        self._rng = make_rng(seed)
        self.features_: tuple[str, ...] | None = None

    # ------------------------------------------------------------------ fit
    def fit(self, known: Sequence[object], labels: Sequence[object]) -> KoppelAttacker:
        """Build the feature list and gram streams from one known text per candidate.

        Parameters
        ----------
        known : sequence of str or of token sequences
            Known-author texts (a string is split on whitespace).
        labels : sequence
            Candidate label of each known text (distinct).
        """
        tokens = as_token_lists(known, "known")
        check_nonempty(tokens, "known")
        labs = check_labels(labels, len(tokens))
        if len(set(labs.tolist())) != labs.size:
            raise ParameterError("Koppel needs exactly one known text per candidate (labels must be distinct)")
        counts: Counter[str] = Counter()
        for toks in tokens:
            for tok in toks:
                counts.update(token_grams(tok, self.n))
        # most frequent first; ties keep first-occurrence order (Python's stable sort, as koppel11)
        ranked = sorted(counts, key=counts.__getitem__, reverse=True)[: self.n_features]
        self.features_ = tuple(ranked)
        self._index = {g: i for i, g in enumerate(ranked)}
        self.candidates_ = labs
        self._streams = [self._stream(t) for t in tokens]
        self._min_words = min(s.n_words for s in self._streams)
        base = np.cumsum([0] + [s.ids.size for s in self._streams])
        self._base = base[:-1]
        self._all_ids = np.concatenate([s.ids for s in self._streams]).astype(np.int64)
        return self

    def _gram_id(self, gram: str) -> int:
        return self._index.get(gram, -1)

    def _stream(self, toks: list[str]) -> _Stream:
        n = self.n
        if self.variant.joined:
            joined = "".join(toks)
            lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
            char_off = np.concatenate([[0], np.cumsum(lens)])
            npos = max(len(joined) - n + 1, 0)
            ids = np.fromiter((self._gram_id(joined[p : p + n]) for p in range(npos)), dtype=np.int64, count=npos)
            return _Stream(ids, char_off, toks)
        per = [[self._gram_id(g) for g in token_grams(t, n)] for t in toks]
        word_off = np.concatenate([[0], np.cumsum([len(p) for p in per])]).astype(np.int64)
        ids = np.fromiter((i for p in per for i in p), dtype=np.int64, count=int(word_off[-1]))
        return _Stream(ids, word_off, toks)

    def _window_range(self, s: _Stream, start: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Gram-stream ranges ``[a, b)`` of the windows ``[start, start+length)``."""
        a = s.word_off[start]
        b = s.word_off[start + length]
        if self.variant.joined:
            b = np.maximum(b - self.n + 1, a)
        return a, b

    def _short_window_ids(self, s: _Stream, start: int, length: int) -> list[int]:
        """Grams of a joined window of fewer than ``n`` characters (the whole string)."""
        text = "".join(s.tokens[start : start + length])
        return [self._gram_id(text)] if text else []

    def _text_counts(self, toks: list[str]) -> np.ndarray:
        assert self.features_ is not None
        if self.variant.joined:
            grams = token_grams("".join(toks), self.n) if toks else []
        else:
            grams = [g for t in toks for g in token_grams(t, self.n)]
        ids = np.fromiter((self._gram_id(g) for g in grams), dtype=np.int64, count=len(grams))
        return np.bincount(ids[ids >= 0], minlength=len(self.features_)).astype(np.float64)

    # -------------------------------------------------------------- predict
    def attribute(
        self,
        unknown: Sequence[object],
        *,
        seed: int | np.random.Generator | None = None,
        chunk: int = 10,
        block: int = 256,
    ) -> KoppelResult:
        """Attribute each unknown text to a candidate.

        Parameters
        ----------
        unknown : sequence of str or of token sequences
            Texts to attribute; each is cut to its first
            ``L = min(len(text), shortest known text)`` words, as in koppel11.
        seed : int, numpy.random.Generator or None
            Use this seed/generator for the trials instead of the attacker's own
            stream (to score several conditions independently of their order).
        chunk : int
            Trials evaluated together (memory vs. speed).
        block : int
            Unknown texts evaluated together.

        Notes
        -----
        The trials (feature subsets and window starts) are drawn once for all
        unknown texts of the same length ``L`` (common random numbers, in
        increasing order of ``L``), so that the window counts are built once
        and every unknown text is scored by sparse matrix products. For each
        text the trials have the same distribution as in koppel11.
        """
        if self.features_ is None:
            raise ParameterError("call fit() before attribute()")
        toks_list = as_token_lists(unknown, "unknown")
        for u, toks in enumerate(toks_list):
            if not toks:
                raise DocumentError(f"unknown[{u}] has no tokens")
        gen = self._rng if seed is None else make_rng(seed)
        F = len(self.features_)
        C = len(self._streams)
        T = self.trials
        k = max(1, int(F * self.feature_fraction))
        lengths = np.array([min(len(t), self._min_words) for t in toks_list])
        wins = np.zeros((len(toks_list), C), dtype=np.int64)
        for L in np.unique(lengths):
            L = int(L)
            members = np.flatnonzero(lengths == L)
            keys = gen.random((T, F))
            highs = np.array([s.n_words - L for s in self._streams], dtype=np.int64)
            starts = gen.integers(0, highs + 1, size=(T, C))
            if k >= F:
                mask = np.ones((T, F), dtype=bool)
            else:
                kept = np.argpartition(keys, k - 1, axis=1)[:, :k]
                mask = np.zeros((T, F), dtype=bool)
                np.put_along_axis(mask, kept, True, axis=1)
            for t0 in range(0, T, chunk):
                W = self._window_counts(mask[t0 : t0 + chunk], starts[t0 : t0 + chunk], L)
                for b0 in range(0, members.size, block):
                    mem = members[b0 : b0 + block]
                    U = np.stack([self._text_counts(toks_list[i][:L]) for i in mem])
                    sims = self._similarities(W, U, mask[t0 : t0 + chunk].astype(np.float64), C)
                    best = np.argmax(sims, axis=1)  # (Tc, Um): first maximum, as list.index(max(...))
                    for j, i in enumerate(mem):
                        wins[i] += np.bincount(best[:, j], minlength=C)
        idx = np.argmax(wins, axis=1)
        return KoppelResult(
            labels=self.candidates_[idx],
            indices=idx,
            scores=wins[np.arange(len(toks_list)), idx] / T,
            wins=wins,
            candidates=self.candidates_,
        )

    def predict(self, unknown: Sequence[object], *, seed: int | np.random.Generator | None = None) -> np.ndarray:
        """Predicted candidate label per unknown text (see :meth:`attribute`)."""
        return self.attribute(unknown, seed=seed).labels

    def _window_counts(self, mask: np.ndarray, starts: np.ndarray, L: int) -> object:
        """Sparse ``(trials*candidates, F)`` counts of the kept features in each window."""
        from scipy import sparse

        Tc, C = starts.shape
        F = mask.shape[1]
        a = np.empty((Tc, C), dtype=np.int64)
        b = np.empty((Tc, C), dtype=np.int64)
        for c, s in enumerate(self._streams):
            a[:, c], b[:, c] = self._window_range(s, starts[:, c], L)
        a += self._base[None, :]
        b += self._base[None, :]
        lens = (b - a).ravel()
        seg = np.repeat(np.arange(Tc * C), lens)
        first = np.cumsum(lens) - lens
        pos = np.arange(lens.sum()) + np.repeat(a.ravel() - first, lens)
        g = self._all_ids[pos]
        if self.variant.joined:
            # windows of fewer than n characters count as one whole-string gram
            extra_seg: list[int] = []
            extra_ids: list[int] = []
            for c, s in enumerate(self._streams):
                nchar = s.word_off[starts[:, c] + L] - s.word_off[starts[:, c]]
                for t in np.flatnonzero(nchar < self.n):
                    for gid in self._short_window_ids(s, int(starts[t, c]), L):
                        extra_seg.append(t * C + c)
                        extra_ids.append(gid)
            if extra_seg:
                seg = np.concatenate([seg, np.array(extra_seg, dtype=np.int64)])
                g = np.concatenate([g, np.array(extra_ids, dtype=np.int64)])
        ok = g >= 0
        seg, g = seg[ok], g[ok]
        ok = mask[seg // C, g]
        seg, g = seg[ok], g[ok]
        W = sparse.csr_matrix((np.ones(seg.size), (seg, g)), shape=(Tc * C, F))
        W.sum_duplicates()
        return W

    def _similarities(self, W: object, U: np.ndarray, M: np.ndarray, C: int) -> np.ndarray:
        """``(trials, candidates, unknowns)`` similarities of windows ``W`` and unknown counts ``U``."""
        Tc = M.shape[0]
        Um = U.shape[0]
        if self.variant.similarity == "minmax":
            # min(a, b) = sum_j [a >= j][b >= j] for non-negative integers: one sparse product per level
            minsum = np.zeros((W.shape[0], Um))  # type: ignore[attr-defined]
            top = int(min(W.data.max(initial=0), U.max(initial=0)))  # type: ignore[attr-defined]
            cur = W
            for j in range(1, top + 1):
                ind = cur.copy()  # type: ignore[attr-defined]
                ind.data = np.ones_like(ind.data)
                minsum += np.asarray(ind @ np.ascontiguousarray((U >= j).T, dtype=np.float64))
                cur = cur.copy()  # type: ignore[attr-defined]
                cur.data = np.where(cur.data > j, cur.data, 0.0)
                cur.eliminate_zeros()
                if cur.nnz == 0:
                    break
            ksum = np.asarray(W.sum(axis=1)).reshape(Tc, C)  # type: ignore[attr-defined]
            usum = M @ U.T  # (Tc, Um)
            min3 = minsum.reshape(Tc, C, Um)
            maxsum = ksum[:, :, None] + usum[:, None, :] - min3
            return np.where(maxsum > 0, min3 / np.where(maxsum > 0, maxsum, 1.0), 0.0)
        dot = np.asarray(W @ U.T).reshape(Tc, C, Um)
        knorm = np.sqrt(np.asarray(W.multiply(W).sum(axis=1)).reshape(Tc, C))  # type: ignore[attr-defined]
        unorm = np.sqrt(M @ (U * U).T)  # (Tc, Um)
        denom = knorm[:, :, None] * unorm[:, None, :]
        return np.where(denom > 0, dot / np.where(denom > 0, denom, 1.0), 0.0)
