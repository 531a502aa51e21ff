"""Exponential-mechanism word replacement over (restricted) vocabularies.

* :class:`TEM` - truncated exponential mechanism (Carvalho, Vasiloudis, Feyisetan &
  Wang, 2021/2023).
* :class:`SanText`, :class:`SanTextPlus` - Yue, Du, Wang, Li, Sun & Chow, Findings of ACL 2021.
* :class:`CusText`, :class:`CusTextPlus` - Chen, Mo, Wang, Chen, Nie, Wang & Cui, Findings of ACL 2023.
* :class:`RandomReplacement` - uniform random replacement (randomised response over the vocabulary).

All sampling is exact and in log space (Gumbel-max; see :mod:`textdp.mechanisms.kernels`).
Mechanisms over the whole vocabulary never build a ``V x V`` (or ``B x V``) probability
matrix: scores are computed per vocabulary block with one float64 GEMM.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_epsilon, check_positive_int, check_probability
from ..embeddings import Embeddings
from ..errors import ParameterError
from ..guarantees.events import RandomizedResponseEvent
from ..text import resolve_stop_words
from .kernels import (
    augment,
    blas_threads,
    gumbel_argmax,
    pairwise_distances,
    sample_by_distance,
)
from .word_level import WordLevelMechanism, composition

__all__ = ["TEM", "CusText", "CusTextPlus", "RandomReplacement", "SanText", "SanTextPlus", "custext_groups"]

TEM_REFERENCE = (
    "Carvalho, Vasiloudis, Feyisetan & Wang, 'TEM: High Utility Metric Differential Privacy on Text', "
    "arXiv 2107.07928 (SDM 2023): Algorithm 1 (candidates within gamma plus the bottom element) and "
    "gamma = (2/epsilon) ln((1-beta)(|V|-1)/beta)"
)
SANTEXT_REFERENCE = (
    "Yue, Du, Wang, Li, Sun & Chow, 'Differential Privacy for Text Analytics via Natural Text Sanitization', "
    "Findings of ACL 2021 (SanText: P(y|x) proportional to exp(-epsilon d_euc(x,y)/2); SanText+: sensitive/"
    "non-sensitive split, UMLDP)"
)
CUSTEXT_REFERENCE = (
    "Chen, Mo, Wang, Chen, Nie, Wang & Cui, 'A Customized Text Sanitization Mechanism with Differential Privacy', "
    "Findings of ACL 2023 (customized output sets by the mapping function; exponential mechanism with "
    "normalised utility, sensitivity 1)"
)


class _VocabularyExponential(WordLevelMechanism):
    """Shared machinery: float64 embedding copy and the blocked exact sampler."""

    _block = 2048

    def _setup(self, emb: Embeddings) -> None:
        self._aug = augment(emb.vectors)  # the only float64 copy (V x (d+2))
        self._dim = emb.dim
        self._sq = self._aug[:, emb.dim + 1]

    def _vec(self, rows: np.ndarray | int | list[int] | slice) -> np.ndarray:
        """Float64 vectors of ``rows`` (exactly ``-0.5`` times the augmented matrix's first columns)."""
        return self._aug[rows, : self._dim] * -0.5

    def _sample(self, ids: np.ndarray, rng: np.random.Generator, cap: float = np.inf) -> np.ndarray:
        return sample_by_distance(
            self._vec(ids), None, 0.5 * self.epsilon_, rng, cap=cap, block=self._block, augmented=self._aug
        )

    def _public_params(self) -> dict[str, object]:
        return super()._public_params()

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon ||e_x - e_x2||_2`` (metric mechanisms)."""
        self._ensure_fitted()
        return float(self.epsilon_ * np.linalg.norm(self._vec(x) - self._vec(x2)))

    def probabilities(self, x: int) -> np.ndarray:
        """Exact output distribution ``P(. | x)`` over the vocabulary (for tests; ``O(V)``)."""
        raise NotImplementedError


class SanText(_VocabularyExponential):
    """SanText: every word replaced by a word drawn with ``P(y | x)`` proportional to ``exp(-epsilon d(x, y) / 2)``.

    ``d`` is the Euclidean distance between the (public) embeddings and ``y`` ranges over
    the whole vocabulary, the input word included (Yue et al. 2021, Section 4.2).

    Guarantee: epsilon*d_euc metric local DP per word (the paper's Theorem for SanText):
    ``P(y | x) <= exp(epsilon ||e_x - e_x'||) P(y | x')`` for all words ``x, x', y``. Over a document:
    the sum over positions.

    Examples
    --------
    >>> emb = Embeddings(["a1", "b2", "c3"], np.array([[0.0], [1.0], [100.0]]), name="toy")
    >>> m = SanText(epsilon=4.0, embeddings=emb, stop_words=None).fit()
    >>> np.round(m.probabilities(0), 4).tolist()
    [0.8808, 0.1192, 0.0]
    """

    name = "santext"
    reference = SANTEXT_REFERENCE

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One exponential-mechanism draw per row over the whole vocabulary."""
        return self._sample(ids, rng)

    def probabilities(self, x: int) -> np.ndarray:
        self._ensure_fitted()
        d = pairwise_distances(self._vec([x]), self._vec(slice(None)), self._sq)[0]
        lw = -0.5 * self.epsilon_ * d
        p = np.exp(lw - lw.max())
        return p / p.sum()

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        return (
            f"epsilon*d_euc metric local DP per word with epsilon={e:g} (SanText, Yue et al. 2021): each word is "
            f"replaced by a word of the public vocabulary ({emb.name}, {emb.vocab_size} words) drawn with probability "
            f"proportional to exp(-{e:g}*||e_x - e_y||_2/2), so for any words x, x', y the probability differs by a "
            f"factor <= exp({e:g}*||e_x - e_x'||_2). "
            + composition(f"{e:g}*||e_(w_i) - e_(w'_i)||_2")
            + " " + self._not_covered()
        )


class TEM(_VocabularyExponential):
    """Truncated exponential mechanism (TEM).

    For input ``x``, ``L_x = {w : d(x, w) <= gamma}``; every ``w`` in ``L_x`` gets the score
    ``-d(x, w)`` plus Gumbel noise of scale ``2/epsilon``, the bottom element gets
    ``-gamma + (2/epsilon) ln |V \\ L_x|`` plus Gumbel noise; the best score wins, and the
    bottom element is replaced by a uniform word of ``V \\ L_x`` (Carvalho et al., Algorithm 1).
    With ``gamma = (2/epsilon) ln((1-beta)(|V|-1)/beta)`` the output leaves ``L_x`` with
    probability at most ``beta`` (the input word alone has weight 1 against at most
    ``|V|-1`` words of weight ``exp(-epsilon gamma/2)``).

    Equivalently ``P(w | x)`` is proportional to ``exp(-(epsilon/2) min(d(x, w), gamma))``
    over the whole vocabulary: the bottom element carries exactly the mass of the
    words outside ``L_x``, each of weight ``exp(-epsilon gamma/2)``. textdp samples this
    form with the exact blocked sampler (same distribution, no ragged candidate lists).

    Guarantee: epsilon*d_euc-privacy per word: ``min(d, gamma)`` changes by at most
    ``min(d(x, x'), gamma)`` between ``x`` and ``x'``, so ``P(y | x) <= exp(epsilon min(d(x, x'), gamma)) P(y | x')``
    (hence also pure ``epsilon*gamma``-DP over the whole vocabulary).

    Parameters
    ----------
    beta : float
        Probability bound of leaving ``L_x`` (in (0, 1)); default 0.001 (pyPANTERA's default).

    Examples
    --------
    >>> emb = Embeddings(["a1", "b2", "c3", "d4"], np.array([[0.0], [0.5], [30.0], [40.0]]), name="toy")
    >>> m = TEM(epsilon=2.0, beta=0.25, embeddings=emb, stop_words=None).fit()
    >>> round(m.gamma_, 4), np.round(m.probabilities(0), 4).tolist()
    (2.1972, [0.5468, 0.3317, 0.0608, 0.0608])
    """

    name = "tem"
    reference = TEM_REFERENCE

    beta: float = 0.001

    def _setup(self, emb: Embeddings) -> None:
        super()._setup(emb)
        beta = check_probability(self.beta, "beta")
        v = emb.vocab_size
        self.gamma_ = tem_gamma(self.epsilon_, beta, v)

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One TEM draw per row."""
        return self._sample(ids, rng, cap=self.gamma_)

    def probabilities(self, x: int) -> np.ndarray:
        """``P(. | x)`` computed the paper's way: Gumbel race over ``L_x`` and the bottom element."""
        self._ensure_fitted()
        d = pairwise_distances(self._vec([x]), self._vec(slice(None)), self._sq)[0]
        inside = d <= self.gamma_
        scores = np.where(inside, -d, -np.inf)
        n_out = int((~inside).sum())
        bottom = -self.gamma_ + (2.0 / self.epsilon_) * math.log(n_out) if n_out else -np.inf
        # Gumbel scale 2/epsilon <=> softmax of (epsilon/2) * score
        logits = 0.5 * self.epsilon_ * np.append(scores, bottom)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        out = p[:-1].copy()
        if n_out:
            out[~inside] = float(p[-1]) / n_out
        return out

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon min(||e_x - e_x2||, gamma)``."""
        self._ensure_fitted()
        dist = float(np.linalg.norm(self._vec(x) - self._vec(x2)))
        return float(self.epsilon_ * min(dist, float(self.gamma_)))

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out.update(beta=float(self.beta), gamma=float(self.gamma_))
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        g = self.gamma_
        return (
            f"epsilon*d_euc-privacy per word with epsilon={e:g} (TEM, Carvalho et al.; gamma={g:.4g} from "
            f"beta={float(self.beta):g} and |V|={emb.vocab_size}, {emb.name}): for any words x, x', y the output "
            f"probability differs by a factor <= exp({e:g}*min(||e_x - e_x'||_2, {g:.4g})), so also by at most "
            f"exp({e * g:.4g}) for any two words. "
            + composition(f"{e:g}*min(||e_(w_i) - e_(w'_i)||_2, {g:.4g})")
            + " " + self._not_covered()
        )


def tem_gamma(epsilon: float, beta: float, vocab_size: int) -> float:
    """TEM's threshold ``gamma = (2/epsilon) ln((1-beta)(|V|-1)/beta)`` (at least 0).

    >>> round(tem_gamma(1.0, 0.001, 400000), 3)
    39.612
    """
    epsilon = check_epsilon(epsilon)
    beta = check_probability(beta, "beta")
    if vocab_size < 2:
        return 0.0
    return max(0.0, (2.0 / epsilon) * math.log((1.0 - beta) * (vocab_size - 1) / beta))


class SanTextPlus(_VocabularyExponential):
    """SanText+: sensitive words always replaced, non-sensitive words with probability ``p``.

    The public vocabulary is split by (public) frequency: the ``sensitive_fraction``
    least frequent words (the last rows of a frequency-ordered embedding file, such
    as GloVe) form ``V_S``, the others ``V_N``. A sensitive word is replaced by a word of
    ``V_S`` drawn with probability proportional to ``exp(-epsilon d(x, y)/2)``; a non-sensitive
    word is kept with probability ``1 - p`` and otherwise replaced the same way (Yue et al. 2021,
    Section 4.3). Outputs in ``V_S`` are the protected outputs of UMLDP, outputs in ``V_N``
    reveal their input (only the same non-sensitive word produces them).

    Direction of sampling: replacements are drawn from ``V_S``, the set every input can
    reach; this is the only direction under which the UMLDP conditions hold (a non-sensitive
    output that any input could produce would have to be protected too). It matches the
    authors' released code. The paper's text could not be consulted here; the bound below
    is derived from the mechanism as implemented.

    Guarantee (derived): for any words ``x, x'`` and any output ``y`` in ``V_S``:
    ``P(y | x) <= exp(epsilon d(x, x') + ln(1/p)) P(y | x')`` (the ``ln(1/p)`` only when ``x`` is sensitive
    and ``x'`` is not; ``epsilon d(x, x')`` otherwise). Non-sensitive words that are kept are
    released verbatim: no protection for them.

    Parameters
    ----------
    p : float
        Probability of replacing a non-sensitive word (0 < p <= 1); default 0.3.
    sensitive_fraction : float
        Fraction of the vocabulary treated as sensitive (least frequent rows); default 0.9.

    Examples
    --------
    >>> emb = Embeddings(["a1", "b2", "c3", "d4"], np.array([[0.0], [1.0], [2.0], [3.0]]), name="toy")
    >>> m = SanTextPlus(epsilon=2.0, p=0.5, sensitive_fraction=0.5, embeddings=emb, stop_words=None).fit()
    >>> m.n_sensitive_, np.round(m.probabilities(0), 4).tolist()
    (2, [0.5, 0.0, 0.3655, 0.1345])
    """

    name = "santext+"
    reference = SANTEXT_REFERENCE

    p: float = 0.3
    sensitive_fraction: float = 0.9

    def _setup(self, emb: Embeddings) -> None:
        super()._setup(emb)
        self.p_ = check_probability(self.p, "p", open_high=False)
        w = check_probability(self.sensitive_fraction, "sensitive_fraction", open_high=False)
        v = emb.vocab_size
        self.n_sensitive_ = max(1, round(w * v))
        self.first_sensitive_ = v - self.n_sensitive_

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Keep-or-replace per row, then one exponential draw over ``V_S`` for the replaced ones."""
        ids = np.asarray(ids, dtype=np.int64)
        out = ids.copy()
        sensitive = ids >= self.first_sensitive_
        replace = sensitive | (rng.random(ids.size) < self.p_)
        sel = np.flatnonzero(replace)
        if sel.size:
            fs = self.first_sensitive_
            pick = sample_by_distance(
                self._vec(ids[sel]), None, 0.5 * self.epsilon_, rng, block=self._block,
                augmented=self._aug[fs:],
            )
            out[sel] = fs + pick
        return out

    def probabilities(self, x: int) -> np.ndarray:
        self._ensure_fitted()
        fs = self.first_sensitive_
        d = pairwise_distances(self._vec([x]), self._vec(slice(fs, None)), self._sq[fs:])[0]
        lw = -0.5 * self.epsilon_ * d
        q = np.exp(lw - lw.max())
        q /= q.sum()
        out = np.zeros(self.embeddings_.vocab_size)
        if x >= fs:
            out[fs:] = q
        else:
            out[fs:] = self.p_ * q
            out[x] += 1.0 - self.p_
        return out

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """Bound over protected outputs ``y`` in ``V_S``: ``epsilon d(x, x') (+ ln(1/p)`` if ``x`` sensitive, ``x'`` not)."""
        self._ensure_fitted()
        b = float(self.epsilon_ * np.linalg.norm(self._vec(x) - self._vec(x2)))
        xs, x2s = x >= self.first_sensitive_, x2 >= self.first_sensitive_
        if xs != x2s:
            b += math.log(1.0 / self.p_)
        return b

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out.update(p=float(self.p_), sensitive_fraction=float(self.sensitive_fraction), n_sensitive=self.n_sensitive_)
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        p = self.p_
        return (
            f"Utility-optimised metric local DP per word with epsilon={e:g}, p={p:g} (SanText+, Yue et al. 2021; bound "
            f"derived for this implementation): the {self.n_sensitive_} least frequent words of {emb.name} are "
            "sensitive (V_S). Every replacement is drawn from V_S with probability proportional to "
            f"exp(-{e:g}*||e_x - e_y||_2/2). For any words x, x' and any output y in V_S the probability differs by a "
            f"factor <= exp({e:g}*||e_x - e_x'||_2 + ln(1/{p:g})) (the ln(1/p) term only between a sensitive and a "
            "non-sensitive input). Non-sensitive words are released unchanged with probability "
            f"{1 - p:g}: such an output reveals its input, and non-sensitive words have no protection. "
            + "Over a document: the per-position bounds add up (basic composition over the T positions of two "
            "documents of the same length). "
            + self._not_covered()
        )


def custext_groups(vectors: np.ndarray, k: int, *, chunk: int = 64) -> np.ndarray:
    """CusText's customized mapping: a partition of the vocabulary into groups of ``k`` neighbours.

    Rows are visited in order (most frequent first for GloVe); the first row not yet
    assigned takes itself and its ``k - 1`` nearest unassigned rows (Euclidean, ties to
    the lower row) as its group - the paper's mapping function (the authors'
    "conservative" strategy). Every word of a group shares the group as output set.
    A last group smaller than ``k`` is merged into the previous group, so every group
    has at least ``k`` members (a singleton would get no privacy at all).

    Blocked: the next ``chunk`` unassigned rows get their ``4k`` nearest unassigned rows in
    one float32 GEMM (re-ranked in float64); groups are then formed in order, and a
    seed whose list ran out (taken by earlier groups of the chunk) is searched again.

    Returns the group id of every row (``(V,)`` int64, groups numbered in creation order).

    >>> custext_groups(np.array([[0.0], [10.0], [0.1], [10.2], [0.3]]), 2).tolist()
    [0, 1, 0, 1, 1]
    """
    vec = np.ascontiguousarray(vectors, dtype=np.float64)
    v = vec.shape[0]
    k = check_positive_int(k, "top_k")
    if v < k:
        raise ParameterError(f"CusText needs at least top_k={k} vocabulary words, got {v}")
    v32 = vec.astype(np.float32)
    sq = np.einsum("ij,ij->i", vec, vec)
    half32 = (0.5 * sq).astype(np.float32)
    group = np.full(v, -1, dtype=np.int64)
    n_groups = 0
    free = np.arange(v)
    while free.size:
        if free.size < k:  # merge the remainder into the last group (n_groups >= 1 since v >= k)
            group[free] = n_groups - 1
            break
        seeds = free[:chunk]
        m = min(free.size, 4 * k)
        with blas_threads(1):  # one BLAS thread: much faster than two on a shared machine (BENCHMARKS.md)
            scores = v32[seeds] @ v32[free].T  # the nearest maximise e.q - |e|^2 / 2
        scores -= half32[free][None, :]
        if m < free.size:
            top = np.argpartition(scores, free.size - m, axis=1)[:, free.size - m :]
        else:
            top = np.broadcast_to(np.arange(free.size), (seeds.size, free.size))
        cand = free[top]
        diff = vec[cand] - vec[seeds][:, None, :]
        d2 = np.einsum("ijk,ijk->ij", diff, diff)
        cand = np.take_along_axis(cand, np.lexsort((cand, d2), axis=1), axis=1)
        for i, s in enumerate(seeds.tolist()):
            if group[s] >= 0:
                continue
            # cand[i]: the m nearest of `free` in order; its still unassigned members begin with the
            # k nearest unassigned rows whenever there are k of them
            avail = cand[i][group[cand[i]] < 0]
            if avail.size < k:
                still = free[group[free] < 0]
                if still.size < k:
                    group[still] = n_groups - 1
                    continue
                dd = ((vec[still] - vec[s]) ** 2).sum(axis=1)
                avail = still[np.lexsort((still, dd))[:k]]
            members = avail[:k]
            if s not in members:  # only with duplicated vectors: the seed belongs to its own group
                members = np.concatenate([[s], members[members != s][: k - 1]])
            group[members] = n_groups
            n_groups += 1
        free = free[group[free] < 0]
    return group


def cached_custext_groups(vectors: np.ndarray, k: int, *, min_cached: int = 100_000) -> np.ndarray:
    """:func:`custext_groups`, cached on disk for vocabularies of ``min_cached`` words or more.

    The mapping depends only on the public vectors and ``k``; it is stored under
    ``cache_dir("custext")`` keyed by a content hash of the float32 vectors, with a keyed
    digest (HMAC under the user's secret, :func:`textdp._cache.write_keyed`): a cached file
    is used only if this user's key made it, it is read once through the checked cache
    folder's descriptor, and it must still be a partition into groups of at least ``k``
    (planted singleton groups made CusText copy its input, issue 28); otherwise the groups
    are recomputed.
    """
    vec = np.asarray(vectors)
    if vec.shape[0] < min_cached:
        return custext_groups(vec, k)
    import hashlib
    import io

    from .._cache import cache_dir, load_keyed, open_private_dir, write_keyed

    h = hashlib.blake2b(digest_size=12)
    arr = np.ascontiguousarray(vec, dtype=np.float32)
    h.update(str(arr.shape).encode())
    h.update(arr.tobytes())
    name = f"groups-{h.hexdigest()}-k{int(k)}.npy"
    try:
        folder = open_private_dir(cache_dir() / "custext", what="the textdp cache directory", create=True)
    except OSError:  # a read-only or unusable cache only costs time
        return custext_groups(vec, k)
    with folder:
        data = load_keyed(folder, name, "custext-groups", what="CusText's cached groups")
        if data is not None:
            try:
                groups = np.load(io.BytesIO(data), allow_pickle=False)
            except (OSError, ValueError, EOFError):
                groups = None
            if (isinstance(groups, np.ndarray) and groups.shape == (vec.shape[0],) and groups.dtype == np.int64
                    and groups.min() == 0 and np.bincount(groups).min() >= min(int(k), vec.shape[0])):
                return groups
        groups = custext_groups(vec, k)
        try:
            buf = io.BytesIO()
            np.save(buf, groups)
            write_keyed(folder, name, buf.getvalue(), "custext-groups")
        except OSError:  # a full cache only costs time
            pass
    return groups


class CusText(WordLevelMechanism):
    """CusText: exponential mechanism inside a customized output set of ``top_k`` neighbours.

    The vocabulary is partitioned once (:func:`custext_groups`, public data only); a
    word ``x`` of group ``G`` is replaced by ``y`` in ``G`` with probability proportional to
    ``exp(epsilon u(x, y) / 2)``, ``u(x, y) = -(d(x, y) - min_G d(x, .)) / (max_G d(x, .) - min_G d(x, .))``
    in ``[-1, 0]`` (Euclidean ``d``; sensitivity 1; Chen et al. 2023).

    Guarantee: epsilon-DP per word between any two words of the same group:
    ``P(y | x) <= exp(epsilon) P(y | x')`` for ``x, x'`` in one group (each word is hidden among
    the at least ``top_k - 1`` others of its group). Words of different groups have
    disjoint outputs: they are *not* protected from each other. Over a document: ``k epsilon``
    for two documents of the same length differing in ``k`` positions, each pair in one group.

    Parameters
    ----------
    top_k : int
        Output-set size K (default 20).

    Examples
    --------
    >>> emb = Embeddings(list("abcd"), np.array([[0.0], [1.0], [10.0], [10.5]]), name="toy")
    >>> m = CusText(epsilon=2.0, top_k=2, embeddings=emb, stop_words=None).fit()
    >>> m.groups_.tolist(), np.round(m.probabilities(0), 4).tolist()
    ([0, 0, 1, 1], [0.7311, 0.2689, 0.0, 0.0])
    """

    name = "custext"
    reference = CUSTEXT_REFERENCE
    metric = "discrete"
    keeps_stop_words = False

    top_k: int = 20

    def _setup(self, emb: Embeddings) -> None:
        self._v64 = np.ascontiguousarray(emb.vectors, dtype=np.float64)
        k = check_positive_int(self.top_k, "top_k", minimum=2)
        self.groups_ = cached_custext_groups(self._v64, k)
        order = np.argsort(self.groups_, kind="stable")
        counts = np.bincount(self.groups_)
        self._members = order
        self._start = np.concatenate([[0], np.cumsum(counts)])
        self._size = counts

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw per row inside its group (Gumbel-max over the group's log-weights)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty_like(ids)
        g = self.groups_[ids]
        sizes = self._size[g]
        for size in np.unique(sizes):
            sel = np.flatnonzero(sizes == size)
            members = self._members[self._start[g[sel]][:, None] + np.arange(size)[None, :]]
            out[sel] = members[np.arange(sel.size), gumbel_argmax(self._log_weights(ids[sel], members), rng)]
        return out

    def _log_weights(self, x: np.ndarray, members: np.ndarray) -> np.ndarray:
        diff = self._v64[members] - self._v64[x][:, None, :]
        d = np.sqrt(np.einsum("bkd,bkd->bk", diff, diff))
        lo = d.min(axis=1, keepdims=True)
        span = d.max(axis=1, keepdims=True) - lo
        u = -(d - lo) / np.where(span > 0, span, 1.0)
        return 0.5 * self.epsilon_ * u

    def probabilities(self, x: int) -> np.ndarray:
        """Exact ``P(. | x)`` over the vocabulary."""
        self._ensure_fitted()
        g = self.groups_[x]
        members = self._members[self._start[g] : self._start[g + 1]]
        lw = self._log_weights(np.array([x]), members[None, :])[0]
        p = np.exp(lw - lw.max())
        out = np.zeros(self.embeddings_.vocab_size)
        out[members] = p / p.sum()
        return out

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon`` within a group, infinite across groups."""
        self._ensure_fitted()
        return float(self.epsilon_) if self.groups_[x] == self.groups_[x2] else math.inf

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out["top_k"] = int(self.top_k)
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        extra = ""
        if self.keeps_stop_words:
            extra = (
                " CusText+: stop words (the public list) are released unchanged, in place: they, and their positions, "
                "have no protection."
            )
        return (
            f"epsilon-DP per word with epsilon={e:g} between words of the same customized output set (CusText, Chen "
            f"et al. 2023; top_k={int(self.top_k)}, sets built from {emb.name} only): for x, x' in one set and any output "
            f"y, the probability differs by a factor <= exp({e:g}). Words of different sets have disjoint outputs and "
            f"are not protected from each other.{extra} Over a document: two documents of the same length that differ "
            f"in k positions, each pair within one set, differ by a factor <= exp(k*{e:g}). "
            + self._not_covered()
        )


class CusTextPlus(CusText):
    """CusText+: CusText that leaves stop words unchanged (Chen et al. 2023).

    Stop words (``stop_words``, default the English list) are *not* removed here: they
    stay in place, unchanged, and only the other words go through :class:`CusText`.
    The released stop words are not protected (the guarantee says so).

    Examples
    --------
    >>> emb = Embeddings(["the", "cat", "dog"], np.array([[5.0], [0.0], [0.1]]), name="toy")
    >>> CusTextPlus(epsilon=1e6, top_k=2, embeddings=emb, seed=0).privatize("the cat").text
    'the cat'
    """

    name = "custext+"
    keeps_stop_words = True

    def _setup(self, emb: Embeddings) -> None:
        super()._setup(emb)
        stops = resolve_stop_words(self.stop_words)
        self._is_stop = np.fromiter((w in stops for w in emb.words), dtype=bool, count=emb.vocab_size)

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stop-word rows unchanged, the others through CusText."""
        ids = np.asarray(ids, dtype=np.int64)
        out = ids.copy()
        sel = np.flatnonzero(~self._is_stop[ids])
        if sel.size:
            out[sel] = super().core(ids[sel], rng)
        return out

    def probabilities(self, x: int) -> np.ndarray:
        if self._is_stop[x]:
            out = np.zeros(self.embeddings_.vocab_size)
            out[x] = 1.0
            return out
        return super().probabilities(x)

    def log_ratio_bound(self, x: int, x2: int) -> float:
        if self._is_stop[x] or self._is_stop[x2]:
            return 0.0 if x == x2 else math.inf
        return super().log_ratio_bound(x, x2)


class RandomReplacement(WordLevelMechanism):
    """Uniform random replacement at a given rate (randomised response over the vocabulary).

    Each word is replaced, with probability ``rate``, by a word drawn uniformly from
    the whole vocabulary (possibly itself), and kept otherwise. So
    ``P(x | x) = 1 - rate + rate/|V|`` and ``P(y | x) = rate/|V|`` for ``y != x``: this is
    ``|V|``-ary randomised response, pure epsilon-DP per word with
    ``epsilon = ln(1 + (1 - rate) |V| / rate)`` for *any* two words. Give either ``rate``
    or ``epsilon`` (then ``rate = |V| / (|V| + e^epsilon - 1)``).

    Examples
    --------
    >>> emb = Embeddings(list("abcd"), np.eye(4), name="toy")
    >>> m = RandomReplacement(rate=0.5, embeddings=emb, stop_words=None).fit()
    >>> round(m.epsilon_, 4), np.round(m.probabilities(0), 3).tolist()
    (1.6094, [0.625, 0.125, 0.125, 0.125])
    """

    name = "random"
    epsilon_from = "rate"
    reference = "Warner 1965 randomised response; k-ary randomised response (Kairouz, Oh & Viswanath 2014)"
    metric = "discrete"

    epsilon: float | None = None
    rate: float | None = None

    def _calibrate_words(self, emb: Embeddings) -> None:
        """ε from ``rate`` or ``rate`` from ε (|V|-ary randomised response), in the one calibration."""
        if (self.epsilon is None) == (self.rate is None):
            raise ParameterError("random replacement needs exactly one of epsilon or rate")
        v = emb.vocab_size
        if self.rate is not None:
            rate = check_probability(self.rate, "rate", open_high=False)
            self._calibrate(math.log1p((1.0 - rate) * v / rate), derived_from="rate", rate=rate, buckets=v)
        else:
            eps = self._calibrate(self.epsilon).epsilon
            object.__setattr__(self, "calibration_", self.calibration_.with_noise(
                rate=v / (v + math.expm1(eps)), buckets=v))

    @property
    def rate_(self) -> float:
        """The replacement rate the core draws with (the calibration's)."""
        return float(self.calibration_.noise_params["rate"])  # type: ignore[arg-type]

    def _setup(self, emb: Embeddings) -> None:
        pass

    def _event(self) -> RandomizedResponseEvent:
        """|V|-ary randomised response at the calibration's rate (its exact loss distribution for the accountant)."""
        return RandomizedResponseEvent(noise_parameter=self.rate_, num_buckets=self.embeddings_.vocab_size)

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Replace each row with probability ``rate`` by a uniform vocabulary row."""
        ids = np.asarray(ids, dtype=np.int64)
        replace = rng.random(ids.size) < self.rate_
        draws = rng.integers(0, self.embeddings_.vocab_size, size=ids.size)
        return np.where(replace, draws, ids)

    def probabilities(self, x: int) -> np.ndarray:
        """Exact ``P(. | x)``."""
        self._ensure_fitted()
        v = self.embeddings_.vocab_size
        out = np.full(v, self.rate_ / v)
        out[x] += 1.0 - self.rate_
        return out

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon`` for any two different words."""
        self._ensure_fitted()
        return 0.0 if x == x2 else float(self.epsilon_)

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out["rate"] = float(self.rate_)
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        return (
            f"epsilon-DP per word with epsilon={e:.6g} (|V|-ary randomised response): each word is replaced with "
            f"probability rate={self.rate_:.6g} by a uniform word of {emb.name} ({emb.vocab_size} words), so for any two "
            f"words and any output the probability differs by a factor <= exp({e:.6g}) = 1 + (1-rate)|V|/rate. Over a "
            f"document: two documents of the same length that differ in k positions differ by a factor <= "
            f"exp(k*{e:.6g}). " + self._not_covered()
        )
