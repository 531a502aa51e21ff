"""Calibrating epsilon by what it does to words, not by its value.

Epsilon is a rate per unit of embedding distance, and the noise length grows
with the dimension (mean ``n / epsilon``), so the same epsilon keeps about 74% of
words on GloVe 50d but far fewer at 300d. This module measures, for given
embeddings, the fraction of words the mechanism maps to themselves and the
neighbour rank of the words it picks, and inverts the curve: *which epsilon
keeps half of the words?*

Method (exact and vectorised). A sample of words ``w`` (default: 300 distinct
non-stop-words of frequency rank 1,000-6,000, as in the reference figures) gets
``R`` draws of base noise ``g`` = :func:`~textdp.mechanisms.laplace_noise` at
epsilon 1 (radius ~ Gamma(n, 1), uniform direction). At any epsilon the
mechanism's noise is ``g / epsilon`` (common random numbers: the same draws for
every epsilon). The noisy vector ``e_w + g / epsilon`` decodes back to ``w`` iff
it is closer to ``e_w`` than to every other ``e_v``, i.e. iff

``epsilon > eps*(w, g) = max(0, max_{v != w} 2 g . (e_v - e_w) / ||e_v - e_w||^2)``

(the Voronoi cell of ``w`` is convex and contains ``e_w``, so along the ray the
word is kept up to one exit point). One pass over the vocabulary (a blocked
matrix product, like the decoder's) gives every draw's threshold, hence the
whole curve ``F(eps) = mean[eps* < eps]`` at once: it is exactly monotone in
epsilon, and the inverse is a quantile of the thresholds, smoothed by linear
interpolation of the empirical CDF in ``log epsilon``. Confidence intervals come
from a cluster bootstrap over words (draws of one word are resampled together,
so word-to-word variation is included). The diagnostic table decodes the same
draws with the mechanism's own :func:`~textdp.mechanisms.noisy_vectors` and
:class:`~textdp.embeddings.ExactDecoder` and checks the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

import numpy as np

from .._rng import make_rng
from .._validation import check_epsilon, check_positive_int, check_probability
from ..embeddings import Decoder, Embeddings, EmbeddingsSource, ExactDecoder, load_embeddings
from ..errors import DocumentError, ParameterError
from ..mechanisms import laplace_noise, noisy_vectors
from ..progress import ProgressCallback
from ..text import normalize
from .diagnostics import neighbour_ranks, rank_summary

__all__ = [
    "DEFAULT_RANKS",
    "Calibration",
    "DiagnosticRow",
    "SurvivalCurve",
    "SurvivalOptions",
    "calibrate_epsilon",
    "calibration_words",
    "diagnose",
    "survival_curve",
    "survival_thresholds",
    "wilson_interval",
]

#: Frequency ranks (1-based, inclusive) of the default calibration words.
DEFAULT_RANKS = (1000, 6000)


def calibration_words(
    embeddings: Embeddings,
    n_words: int = 300,
    ranks: tuple[int, int] = DEFAULT_RANKS,
    stop_words: str | Iterable[str] | None = "english",
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Rows of ``n_words`` distinct words drawn at random from frequency ranks ``ranks``.

    Only words the mechanism could see are eligible: the word is a single token
    that survives :func:`textdp.text.normalize` (letters only, not a stop word,
    at least two letters). Rank ``r`` is row ``r - 1`` (GloVe and word2vec files
    list words by decreasing frequency).

    >>> from textdp.embeddings import Embeddings
    >>> emb = Embeddings(["the", "cat", "dog", "2019", "car"], np.eye(5), name="toy")
    >>> sorted(calibration_words(emb, 3, ranks=(1, 5), seed=0).tolist())
    [1, 2, 4]
    """
    n_words = check_positive_int(n_words, "number of calibration words")
    lo, hi = (int(ranks[0]), int(ranks[1]))
    if lo < 1 or hi < lo:
        raise ParameterError(f"rank range must satisfy 1 <= low <= high, got {lo}-{hi}")
    hi = min(hi, embeddings.vocab_size)
    words = embeddings.words
    eligible = np.array([r for r in range(lo - 1, hi) if normalize(words[r], stop_words) == [words[r]]], dtype=np.int64)
    if eligible.size < n_words:
        raise ParameterError(
            f"only {eligible.size} eligible words in frequency ranks {lo}-{hi} of {embeddings.name}; "
            f"ask for fewer than {n_words} words or widen the rank range"
        )
    gen = make_rng(seed)
    return np.sort(gen.choice(eligible, size=n_words, replace=False))


def survival_thresholds(
    rows: np.ndarray, vectors: np.ndarray, base_noise: np.ndarray, *, vocab_block: int = 4096,
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """For each draw ``i``: the epsilon above which ``rows[i] + base_noise[i] / eps`` decodes to ``rows[i]``.

    ``eps*_i = max(0, max_{v != w} 2 g_i . (e_v - e_w) / ||e_v - e_w||^2)`` over the
    whole vocabulary (``w = rows[i]``, ``g_i = base_noise[i]``); ``inf`` when an
    identical vector sits at a lower row (the decoder breaks ties towards it,
    so ``w`` is never output). Blocked float32 products locate the maximising
    word; its ratio is then recomputed in float64. ``progress(done, total)`` is
    called after each vocabulary block (in vocabulary rows).

    >>> vec = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    >>> survival_thresholds(np.array([0, 0]), vec, np.array([[1.0, 0.0], [-1.0, 0.0]])).tolist()
    [1.0, 0.0]
    """
    w = np.asarray(rows, dtype=np.int64).reshape(-1)
    g = np.asarray(base_noise, dtype=np.float64)
    vec = np.asarray(vectors)
    if g.shape != (w.size, vec.shape[1]):
        raise ParameterError(f"base_noise must have shape ({w.size}, {vec.shape[1]}), got {g.shape}")
    uniq, inv = np.unique(w, return_inverse=True)
    v = vec.shape[0]
    ew = np.asarray(vec[uniq], dtype=np.float32)
    sq_w = np.einsum("ij,ij->i", ew, ew, dtype=np.float64).astype(np.float32)
    g32 = g.astype(np.float32)
    gw = np.einsum("ij,ij->i", g, np.asarray(vec[w], dtype=np.float64)).astype(np.float32)  # g_i . e_w
    best = np.zeros(w.size, dtype=np.float32)
    best_v = np.full(w.size, -1, dtype=np.int64)
    never = np.zeros(w.size, dtype=bool)
    rows_idx = np.arange(w.size)
    for vs in range(0, v, vocab_block):
        if progress is not None and vs:
            progress(vs, v)
        blk = np.asarray(vec[vs : vs + vocab_block], dtype=np.float32)
        sq_b = np.einsum("ij,ij->i", blk, blk, dtype=np.float64).astype(np.float32)
        d2 = sq_w[:, None] + sq_b[None, :] - 2.0 * (ew @ blk.T)  # (W, B) squared distances, float32
        tiny = d2 <= 1e-6 * (sq_w[:, None] + sq_b[None, :] + 1.0)
        if tiny.any():  # the word itself, or a (near-)duplicate vector: decide exactly below
            for a, b in zip(*np.nonzero(tiny)):
                row = vs + int(b)
                if row == uniq[a]:
                    continue
                diff = np.asarray(vec[row], dtype=np.float64) - np.asarray(vec[uniq[a]], dtype=np.float64)
                dd = float(diff @ diff)
                if dd == 0.0:
                    if row < uniq[a]:
                        never |= inv == a
                    continue
                tiny[a, b] = False
                d2[a, b] = dd
        inv_d2 = np.where(tiny, np.float32(0.0), np.float32(2.0) / np.where(tiny, np.float32(1.0), d2))
        ratio = g32 @ blk.T
        ratio -= gw[:, None]
        ratio *= inv_d2[inv]
        arg = np.argmax(ratio, axis=1)
        top = ratio[rows_idx, arg]
        better = top > best
        best = np.where(better, top, best)
        best_v = np.where(better, vs + arg, best_v)
    out = np.zeros(w.size, dtype=np.float64)
    has = best_v >= 0
    if has.any():
        ev = np.asarray(vec[best_v[has]], dtype=np.float64)
        diff = ev - np.asarray(vec[w[has]], dtype=np.float64)
        out[has] = np.maximum(2.0 * np.einsum("ij,ij->i", g[has], diff) / np.einsum("ij,ij->i", diff, diff), 0.0)
    out[never] = np.inf
    return out


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    >>> lo, hi = wilson_interval(50, 100)
    >>> round(lo, 3), round(hi, 3)
    (0.404, 0.596)
    """
    from scipy.stats import norm

    trials = check_positive_int(trials, "trials")
    conf = check_probability(confidence, "confidence")
    z = float(norm.ppf(0.5 + conf / 2))
    p = successes / trials
    den = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / den
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, eq=False)
class SurvivalCurve:
    """Per-draw survival thresholds: the unchanged-word fraction at every epsilon.

    Attributes
    ----------
    words : numpy.ndarray
        ``(W,)`` vocabulary rows of the calibration words.
    thresholds : numpy.ndarray
        ``(W, R)``: draw ``r`` of word ``w`` is kept iff ``epsilon > thresholds[w, r]``.
    noise_entropy : int
        Seed of the base noise (so :func:`diagnose` can decode the very same draws).
    """

    words: np.ndarray
    thresholds: np.ndarray
    noise_entropy: int = field(repr=False)
    embeddings: str = "custom"
    dim: int = 0
    vocab_size: int = 0

    @property
    def repeats(self) -> int:
        return int(self.thresholds.shape[1])

    @property
    def n_draws(self) -> int:
        return int(self.thresholds.size)

    def unchanged_fraction(self, epsilon: float) -> float:
        """Estimated fraction of words mapped to themselves at ``epsilon``."""
        eps = check_epsilon(epsilon)
        return float(np.mean(self.thresholds < eps))

    def per_word(self, epsilon: float) -> np.ndarray:
        """``(W,)`` fraction of each word's draws kept at ``epsilon``."""
        eps = check_epsilon(epsilon)
        return np.mean(self.thresholds < eps, axis=1)

    def _boot_counts(self, n_boot: int, rng: np.random.Generator) -> np.ndarray:
        w = self.thresholds.shape[0]
        return rng.multinomial(w, np.full(w, 1.0 / w), size=n_boot).astype(np.float64)

    def interval(
        self, epsilon: float, confidence: float = 0.95, n_boot: int = 2000, seed: int | np.random.Generator | None = None
    ) -> tuple[float, float]:
        """Cluster-bootstrap (over words) percentile interval of the unchanged fraction at ``epsilon``."""
        conf = check_probability(confidence, "confidence")
        counts = self._boot_counts(check_positive_int(n_boot, "n_boot"), make_rng(seed))
        est = counts @ self.per_word(epsilon) / self.thresholds.shape[0]
        lo, hi = np.quantile(est, [(1 - conf) / 2, (1 + conf) / 2])
        return float(lo), float(hi)

    def _inverse(self, target: float, weights: np.ndarray | None = None) -> float:
        """Smoothed inverse: interpolate the (weighted) empirical CDF of log thresholds."""
        t = self.thresholds.reshape(-1)
        w = np.ones(t.size) if weights is None else np.repeat(weights, self.repeats)
        order = np.argsort(t, kind="stable")
        t, w = t[order], w[order]
        total = w.sum()
        cdf = (np.cumsum(w) - 0.5 * w) / total  # Hazen plotting positions
        low = t <= 0.0
        fin = np.isfinite(t) & ~low & (w > 0)
        always = w[low].sum() / total
        never = w[~np.isfinite(t)].sum() / total
        if target <= always:
            raise ParameterError(
                f"target {target:g} is reached at any epsilon: {always:.1%} of the sampled draws are always kept"
            )
        if target >= 1.0 - never or not fin.any():
            raise ParameterError(
                f"target {target:g} is not reachable: {never:.1%} of the sampled draws are never kept "
                "(their word has a duplicate vector)"
            )
        return float(np.exp(np.interp(target, cdf[fin], np.log(t[fin]))))

    def epsilon_for(self, target_unchanged: float) -> float:
        """The epsilon whose estimated unchanged fraction equals ``target_unchanged``."""
        return self._inverse(check_probability(target_unchanged, "target unchanged fraction"))

    def epsilon_interval(
        self,
        target_unchanged: float,
        confidence: float = 0.95,
        n_boot: int = 1000,
        seed: int | np.random.Generator | None = None,
    ) -> tuple[float, float]:
        """Cluster-bootstrap percentile interval of :meth:`epsilon_for`."""
        target = check_probability(target_unchanged, "target unchanged fraction")
        conf = check_probability(confidence, "confidence")
        counts = self._boot_counts(check_positive_int(n_boot, "n_boot"), make_rng(seed))
        est = []
        for c in counts:
            try:
                est.append(self._inverse(target, c))
            except ParameterError:
                continue
        if not est:
            raise ParameterError(f"target {target:g} is not reachable in any bootstrap sample")
        lo, hi = np.quantile(np.asarray(est), [(1 - conf) / 2, (1 + conf) / 2])
        return float(lo), float(hi)

    def base_noise(self) -> np.ndarray:
        """The ``(W*R, d)`` base noise (epsilon 1) the thresholds were computed for."""
        return laplace_noise(self.n_draws, self.dim, 1.0, make_rng(np.random.SeedSequence(self.noise_entropy)))

    def draw_rows(self) -> np.ndarray:
        """``(W*R,)`` input row of each draw (word-major)."""
        return np.repeat(self.words, self.repeats)


def _load(embeddings: EmbeddingsSource, vocab_size: int | None) -> Embeddings:
    if isinstance(embeddings, Embeddings):
        return embeddings.restrict(top_k=vocab_size) if vocab_size is not None else embeddings
    return load_embeddings(embeddings, vocab_size=vocab_size)


#: Most noise draws (words x repeats) one survival curve may decode (memory and time grow with it).
MAX_DRAWS = 1_000_000


class SurvivalOptions(TypedDict, total=False):
    """The options of :func:`survival_curve` that :func:`calibrate_epsilon` passes on (``curve_kwargs``)."""

    words: Sequence[str] | np.ndarray | None
    n_words: int
    ranks: tuple[int, int]
    repeats: int
    vocab_size: int | None
    stop_words: str | Iterable[str] | None
    progress: ProgressCallback | None


def survival_curve(
    embeddings: EmbeddingsSource = None,
    *,
    words: Sequence[str] | np.ndarray | None = None,
    n_words: int = 300,
    ranks: tuple[int, int] = DEFAULT_RANKS,
    repeats: int = 5,
    vocab_size: int | None = None,
    stop_words: str | Iterable[str] | None = "english",
    seed: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> SurvivalCurve:
    """Compute survival thresholds for a word sample (see the module notes).

    Parameters
    ----------
    embeddings : Embeddings, path or None
        ``None``: GloVe 6B 50d.
    words : sequence of str or array of rows, optional
        Calibration words; default :func:`calibration_words` (``n_words`` from ``ranks``).
    repeats : int
        Noise draws per word (R).
    seed : int or Generator, optional
        Source of the word sample and the base noise.
    progress : callable, optional
        ``progress(done, total)`` over the vocabulary rows scanned (:mod:`textdp.progress`): the
        scan takes minutes at 400,000 words.
    """
    emb = _load(embeddings, vocab_size)
    gen = make_rng(seed)
    repeats = check_positive_int(repeats, "repeats")
    if words is None:
        rows = calibration_words(emb, n_words, ranks, stop_words, gen)
    else:
        arr = np.asarray(words)
        if arr.dtype.kind in "iu":
            rows = arr.astype(np.int64).reshape(-1)
            if rows.size and (rows.min() < 0 or rows.max() >= emb.vocab_size):
                raise ParameterError("calibration word rows out of range of the vocabulary")
        else:
            missing = [w for w in arr.tolist() if w not in emb.index]
            if missing:
                raise DocumentError(f"calibration words not in the vocabulary: {', '.join(map(str, missing[:5]))}")
            rows = np.array([emb.index[w] for w in arr.tolist()], dtype=np.int64)
        if rows.size == 0:
            raise ParameterError("no calibration words given")
    if rows.size * repeats > MAX_DRAWS:
        raise ParameterError(
            f"{rows.size} words x {repeats} repeats = {rows.size * repeats} noise draws; at most {MAX_DRAWS} "
            "(each draw is decoded exactly, at a few thousand per second); use fewer words or repeats"
        )
    entropy = int(gen.integers(0, 2**63 - 1))
    curve = SurvivalCurve(
        words=rows,
        thresholds=np.empty((rows.size, repeats)),
        noise_entropy=entropy,
        embeddings=emb.name,
        dim=emb.dim,
        vocab_size=emb.vocab_size,
    )
    thr = survival_thresholds(curve.draw_rows(), emb.vectors, curve.base_noise(), progress=progress)
    if progress is not None:
        progress(emb.vectors.shape[0], emb.vectors.shape[0])
    object.__setattr__(curve, "thresholds", thr.reshape(rows.size, repeats))
    return curve


@dataclass(frozen=True)
class Calibration:
    """The epsilon for a target unchanged-word fraction, with its bootstrap interval."""

    target_unchanged: float
    epsilon: float
    epsilon_low: float
    epsilon_high: float
    confidence: float
    n_words: int
    repeats: int
    embeddings: str
    dim: int
    vocab_size: int

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return asdict(self)


def calibrate_epsilon(
    target_unchanged: float,
    embeddings: EmbeddingsSource = None,
    *,
    curve: SurvivalCurve | None = None,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
    **curve_kwargs: Unpack[SurvivalOptions],
) -> tuple[Calibration, SurvivalCurve]:
    """The epsilon at which the mechanism keeps ``target_unchanged`` of the words.

    Returns the calibration and the :class:`SurvivalCurve` it was read from
    (pass ``curve`` to reuse one). ``curve_kwargs`` go to :func:`survival_curve`.

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> from textdp._rng import make_rng
    >>> g = make_rng(0)
    >>> emb = Embeddings([f"w{i}" for i in range(200)], g.normal(size=(200, 5)), name="toy")
    >>> cal, curve = calibrate_epsilon(0.5, emb, words=np.arange(50), repeats=20, seed=1)
    >>> abs(curve.unchanged_fraction(cal.epsilon) - 0.5) < 0.01
    True
    """
    target = check_probability(target_unchanged, "target unchanged fraction")
    gen = make_rng(seed)
    if curve is None:
        curve = survival_curve(embeddings, seed=gen, **curve_kwargs)
    eps = curve.epsilon_for(target)
    lo, hi = curve.epsilon_interval(target, confidence, seed=gen)
    cal = Calibration(
        target_unchanged=target,
        epsilon=eps,
        epsilon_low=lo,
        epsilon_high=hi,
        confidence=float(confidence),
        n_words=int(curve.words.size),
        repeats=curve.repeats,
        embeddings=curve.embeddings,
        dim=curve.dim,
        vocab_size=curve.vocab_size,
    )
    return cal, curve


@dataclass(frozen=True)
class DiagnosticRow:
    """Mechanism run on the calibration draws at one epsilon (decoded exactly)."""

    epsilon: float
    mean_noise_length: float
    unchanged_fraction: float
    unchanged_low: float
    unchanged_high: float
    threshold_agreement: float
    mean_neighbour_rank: float
    median_neighbour_rank: float
    p90_neighbour_rank: float
    within_10_neighbours: float

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return asdict(self)


def diagnose(
    curve: SurvivalCurve,
    epsilons: Iterable[float],
    embeddings: EmbeddingsSource = None,
    *,
    decoder: Decoder | None = None,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> list[DiagnosticRow]:
    """Run the mechanism on the curve's draws at each epsilon and summarise.

    Uses :func:`~textdp.mechanisms.noisy_vectors` with the curve's noise seed (so
    every epsilon sees the same draws scaled by ``1/epsilon``) and the exact
    decoder. ``threshold_agreement`` is the share of draws where the decoded
    result agrees with the survival threshold (1.0 up to float rounding).
    ``embeddings`` must be the ones the curve was computed on.
    """
    emb = _load(embeddings, None)
    if emb.name != curve.embeddings or emb.vocab_size != curve.vocab_size:
        raise ParameterError(f"the curve was computed on {curve.embeddings}, not on {emb.name}")
    dec = decoder if decoder is not None else ExactDecoder(emb.vectors)
    rows = curve.draw_rows()
    thr = curve.thresholds.reshape(-1)
    gen = make_rng(seed)
    out = []
    epsilons = list(epsilons)
    for eps in epsilons:
        eps = check_epsilon(eps)
        noise_rng = make_rng(np.random.SeedSequence(curve.noise_entropy))
        z = noisy_vectors(rows, emb.vectors, eps, noise_rng)
        got = dec.decode(z)
        kept = got == rows
        per_word = kept.reshape(curve.words.size, curve.repeats).mean(axis=1)
        counts = curve._boot_counts(2000, gen)
        boot = counts @ per_word / curve.words.size
        lo, hi = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
        summary = rank_summary(neighbour_ranks(rows, got, emb.vectors))
        out.append(
            DiagnosticRow(
                epsilon=eps,
                mean_noise_length=curve.dim / eps,
                unchanged_fraction=float(kept.mean()),
                unchanged_low=float(lo),
                unchanged_high=float(hi),
                threshold_agreement=float(np.mean(kept == (thr < eps))),
                mean_neighbour_rank=summary["mean"],
                median_neighbour_rank=summary["median"],
                p90_neighbour_rank=summary["p90"],
                within_10_neighbours=summary["within_10"],
            )
        )
        if progress is not None:
            progress(len(out), len(epsilons))
    return out
