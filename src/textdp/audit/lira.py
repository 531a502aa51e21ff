"""User-level membership inference on topic-model releases: LiRA with shadow models.

The empirical side of TopicDP's user-level guarantee. Following Manzonelli, Zhang & Vadhan
("Membership inference attacks and privacy in topic modeling", arXiv 2403.04451, 2024), which
adapts Carlini et al.'s likelihood-ratio attack (LiRA, IEEE S&P 2022) to LDA:

1. the *released function* is fitted ``models`` times, each time on a random half of the users
   (each user in with probability 1/2, independently): LDA on that database exactly as the release
   builds it (:func:`~textdp.topics.models.fit_database`: its vocabulary rebuilt from its users by the
   corpus's public rule, or the public vocabulary), top ``m`` topics by prevalence and their top ``n``
   keywords (:func:`~textdp.topics.extract_topic_matrix`), then the mechanism's noise
   (non-private: none; ``topicdp``, ``laplace``, ``mvg``: a fresh release per model);
2. the attack statistic of user ``u`` on a release ``R`` with keywords ``kw`` is the user's mean
   log-likelihood under the released topics, ``s(u, R) = Σ_w f_u(w) log(c + q_R(w))`` with ``f_u``
   the user's word frequencies and ``q_R(w)`` the released mass of ``w`` averaged over the topics
   (Manzonelli et al. score a target by its likelihood under the released model);
3. **online LiRA, leave-one-out**: every (model ``t``, user ``u``) pair is one trial. The other
   ``models − 1`` releases are the shadows: Gaussians fitted to ``s(u, ·)`` over the shadows with
   ``u`` in and with ``u`` out give the score ``log N(s_t; μ_in, σ_in²) − log N(s_t; μ_out, σ_out²)``
   (per-user means, variances pooled over users within the in and the out sets when a user has
   fewer than 2 shadows of a kind);
4. the score threshold is the ``1 − FPR`` quantile of the non-member trials' scores; TPR is the
   fraction of member trials above it, with a two-sided 95% Clopper–Pearson interval.

What this measures: how far an attacker who knows the corpus except the membership of one user,
and can rerun the released function, tells the user's presence from one release. A DP release at
ε bounds ``TPR <= e^ε FPR + δ`` for every test; the table shows how close the attack comes.
Sizes are honest limits: the FPR of 0.1% needs >= 1,000 non-member trials to resolve at all, and
the interval shows what the trials support.

Three releases (``keywords``, :data:`KEYWORD_MODES`):

* ``noisy`` -- the covered default of ``textdp topics``: the top ``m`` topics as whole rows over a
  public vocabulary (:func:`~textdp.topics.models.topic_rows`), noise on every entry, each topic's
  ``n`` keywords read off the noisy values (:func:`~textdp.topics.release.noisy_keywords`). The
  public list is the corpus's own ``V`` most frequent words by its rule, fixed for every shadow (a
  stand-in for a public list: it fits the corpus better than any public list would, so the attack
  is, if anything, stronger);
* ``model`` -- the thesis's release (``--keywords-from model``): the keyword identities are chosen
  by the non-private model and are not covered (``KEYWORD_NOTE``); the statistic uses them, as a
  real attacker would;
* ``fixed`` -- the model's topics' values at ``n`` fixed columns (the corpus's most frequent words).

Sensitivity of the Gaussian releases (``sensitivity=``): ``"worst-case"``, the global L2 bound
``sqrt(2m)`` of ``m`` probability rows (plain (ε, δ)-DP), or ``"sampled"``, TopicDP as users run it:
Rubinstein & Aldà's sampler (:class:`~textdp.topics.sensitivity.SensitivitySampler`, ``gamma``)
on the whole corpus, for the function each release adds noise to (whole rows for ``noisy``, the
``m x n`` values for ``model``), the guarantee then (ε, δ, γ)-random DP. Reduced size, stated in
the settings: the sampler runs once, on the whole corpus, and its ``Δ`` calibrates every shadow's
noise (a user running the release on a shadow's half would sample a ``Δ`` of their own, hundreds
of fits per shadow). The Laplace baseline always uses its global L1 bound ``2m``.

The fast shadow path: each shadow database is fitted once per vocabulary kind; every keyword count
``n`` (``n`` may be a list), release, mechanism and ε is read from those fits, only the noise is
drawn again. A row is *consistent with the DP bound* when the lower end of its TPR interval is at
most ``e^ε FPR + δ`` (:attr:`LiraRow.consistent`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import beta as _beta

from .._rng import make_rng, spawn
from .._validation import check_choice, check_positive_int
from ..accounting.gaussian import check_sensitivity
from ..errors import ParameterError
from ..progress import ProgressCallback

if TYPE_CHECKING:
    from ..topics import UserCorpus
    from ..topics.family import TopicsMechanism
    from ..topics.vocabulary import PublicVocabulary

__all__ = ["FPRS", "KEYWORD_MODES", "LiraRow", "lira_scores", "membership_matrix", "run_lira", "stand_in_vocabulary",
           "tpr_at_fpr"]

#: False-positive rates the table reports.
FPRS = (0.001, 0.01)
#: ``noisy``: the covered default (whole rows over a public vocabulary, keywords read off the noisy values);
#: ``model``: the thesis's release (top-n keywords of each topic, chosen by the non-private model and not
#: covered by the guarantee); ``fixed``: the same topics' values at n fixed columns (the corpus' most
#: frequent words, the same for every model), so the guarantee covers every value the attack sees.
KEYWORD_MODES = ("noisy", "model", "fixed")


@dataclass(frozen=True)
class LiraRow:
    """One line of the LiRA table (frozen; ``to_dict`` for JSON)."""

    mechanism: str
    keywords: str
    epsilon: float | None
    delta: float | None
    trials_in: int
    trials_out: int
    auc: float
    tpr: tuple[float, ...]
    tpr_low: tuple[float, ...]
    tpr_high: tuple[float, ...]
    dp_bound: tuple[float, ...]
    n: int = 0
    sensitivity: str = "worst-case"

    @property
    def consistent(self) -> tuple[bool, ...] | None:
        """Per FPR: the TPR interval includes or lies below the DP bound (``None`` for a non-private row)."""
        if self.epsilon is None:
            return None
        return tuple(lo <= b for lo, b in zip(self.tpr_low, self.dp_bound, strict=True))

    def to_dict(self) -> dict[str, str | float | list[float] | list[bool] | None]:
        c = self.consistent
        return {"mechanism": self.mechanism, "keywords": self.keywords, "n": self.n, "sensitivity": self.sensitivity,
                "epsilon": self.epsilon, "delta": self.delta,
                "trials_in": self.trials_in, "trials_out": self.trials_out, "auc": self.auc,
                "fpr": list(FPRS), "tpr": list(self.tpr), "tpr_low": list(self.tpr_low),
                "tpr_high": list(self.tpr_high), "dp_bound": list(self.dp_bound),
                "consistent_with_dp_bound": None if c is None else list(c)}


def membership_matrix(models: int, users: int, rng: np.random.Generator) -> np.ndarray:
    """``(models, users)`` booleans: user ``u`` is in model ``j``'s training set (probability 1/2 each).

    Every user is in at least one and out of at least one model (redrawn otherwise).
    """
    while True:
        member = rng.random((models, users)) < 0.5
        if np.all(member.any(axis=0)) and np.all((~member).any(axis=0)):
            return member


def lira_scores(stats: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Leave-one-out online LiRA scores for every (model, user) trial.

    ``stats[j, u]``: the statistic of user ``u`` on release ``j``; ``member[j, u]``: whether ``u``
    was in release ``j``'s training set. Returns ``scores[j, u]`` (larger: more likely a member).

    >>> rng = make_rng(0)
    >>> member = membership_matrix(40, 30, rng)
    >>> stats = rng.normal(size=(40, 30)) + 3.0 * member
    >>> s = lira_scores(stats, member)
    >>> bool(s[member].mean() > s[~member].mean())
    True
    """
    st = np.asarray(stats, dtype=np.float64)
    mem = np.asarray(member, dtype=bool)
    if st.shape != mem.shape or st.ndim != 2 or st.shape[0] < 3:
        raise ParameterError("LiRA needs stats and member of the same (models >= 3, users) shape")
    min_var = 1e-12 * max(float(st.var()), 1e-300)

    def fit(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # sums over all models, then remove the target model t (leave-one-out)
        cnt = mask.sum(axis=0)[None, :] - mask
        s1 = (st * mask).sum(axis=0)[None, :] - st * mask
        s2 = (st * st * mask).sum(axis=0)[None, :] - st * st * mask
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = s1 / np.maximum(cnt, 1)
            var = (s2 - cnt * mu * mu) / np.maximum(cnt - 1, 1)
        pooled = float(np.nanmean(np.where(cnt >= 2, var, np.nan))) if np.any(cnt >= 2) else 1.0
        var = np.where(cnt >= 2, var, pooled)
        mu = np.where(cnt >= 1, mu, np.nanmean(st))
        return mu, np.maximum(var, min_var)

    mu_in, var_in = fit(mem)
    mu_out, var_out = fit(~mem)
    return np.asarray(-0.5 * (np.log(var_in) + (st - mu_in) ** 2 / var_in)
                      + 0.5 * (np.log(var_out) + (st - mu_out) ** 2 / var_out))


def tpr_at_fpr(scores: np.ndarray, member: np.ndarray, fpr: float) -> tuple[float, float, float]:
    """``(TPR, low, high)`` at the threshold whose empirical FPR is at most ``fpr`` (95% Clopper–Pearson).

    >>> tpr_at_fpr(np.array([0.0, 1.0, 2.0, 3.0]), np.array([False, False, True, True]), 0.5)[0]
    1.0
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    mem = np.asarray(member, dtype=bool).reshape(-1)
    neg = np.sort(s[~mem])
    pos = s[mem]
    k_allowed = math.floor(fpr * neg.size)  # at most this many negatives strictly above the threshold
    thr = neg[neg.size - k_allowed - 1] if k_allowed < neg.size else -np.inf
    k = int((pos > thr).sum())
    n = pos.size
    lo = float(_beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    hi = float(_beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return k / n, lo, hi


def _auc(scores: np.ndarray, member: np.ndarray) -> float:
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    mem = np.asarray(member, dtype=bool).reshape(-1)
    r = rankdata(s)
    n1, n0 = int(mem.sum()), int((~mem).sum())
    return float((r[mem].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _statistic(freqs: np.ndarray, released: np.ndarray, cols: np.ndarray, vocab: int) -> np.ndarray:
    """``s(u, R) = Σ_w f_u(w) log(c + q(w))``: the user's mean log-likelihood under the released topics.

    ``q(w)`` is the released mass of word ``w`` averaged over the ``m`` released topics (clipped at 0:
    post-processing), ``c = 1/(10 V)`` smooths words the release does not name.
    """
    q = np.zeros(vocab)
    np.add.at(q, cols.reshape(-1), np.maximum(released, 0.0).reshape(-1) / released.shape[0])
    return np.asarray(freqs @ np.log(1.0 / (10.0 * vocab) + q))


def _user_frequencies(corpus: UserCorpus) -> np.ndarray:
    """``(users, V)`` dense word frequencies of each user (row-normalised counts) over every word any database
    can hold (the corpus's counted columns; a single user's own database would rebuild its own vocabulary)."""
    counts = corpus.counts if corpus.counts is not None else corpus.X
    rows = []
    for u in range(corpus.n_users):
        c = np.asarray(counts[corpus._rows([u])].sum(axis=0)).reshape(-1)
        rows.append(c / max(c.sum(), 1.0))
    return np.vstack(rows)


def stand_in_vocabulary(corpus: UserCorpus) -> PublicVocabulary:
    """The public list the ``noisy`` release is attacked with: the corpus's own vocabulary, fixed.

    Its ``V`` words are what the corpus's rule keeps on all users; holding them fixed for every
    shadow stands in for a public list (a real one, e.g. ``glove:K``, fits the corpus less well).
    """
    from ..topics.vocabulary import PublicVocabulary

    return PublicVocabulary(tuple(corpus.vocabulary),
                            f"the corpus's {len(corpus.vocabulary)} most frequent words, fixed (LiRA stand-in)")


@dataclass(frozen=True)
class _Fit:
    """One shadow database's fit: topic-word matrix, prevalence, and global column ids of its vocabulary."""

    topic_word: np.ndarray
    prevalence: np.ndarray
    columns: np.ndarray


def _fits(corpus: UserCorpus, member: np.ndarray, vocab_index: dict[str, int], *, n_topics: int, max_iter: int,
          progress: ProgressCallback | None, done: int, total: int) -> list[_Fit]:
    """Fit the released function on every shadow database once (the fast shadow path: fits are shared)."""
    from ..topics import SklearnLDA
    from ..topics.models import fit_database

    out = []
    for j in range(member.shape[0]):
        # the initialisation seed is part of the released function (SklearnLDA): the same for every model
        tw, prev, vocab = fit_database(corpus, SklearnLDA(n_topics=n_topics, max_iter=max_iter, seed=0),
                                       np.flatnonzero(member[j]))
        out.append(_Fit(tw, prev, np.array([vocab_index[w] for w in vocab], dtype=np.int64)))
        if progress is not None:
            progress(done + j + 1, total)
    return out


def _non_private(mode: str, fit: _Fit, m: int, n: int, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values the mechanism adds noise to and their global columns (``m x n``, or ``m x V`` for ``noisy``)."""
    top = np.argsort(-fit.prevalence, kind="stable")[:m]
    rows = fit.topic_word[top]
    if mode == "noisy":  # whole rows over the public vocabulary (topic_rows)
        return rows, np.broadcast_to(fit.columns, rows.shape)
    if mode == "model":  # each topic's top n words of the non-private model (extract_topic_matrix)
        order = np.argsort(-rows, axis=1, kind="stable")[:, :n]
        return np.take_along_axis(rows, order, axis=1), fit.columns[order]
    # fixed: the same public columns in every release (a word this database lacks weighs 0)
    local = {int(c): i for i, c in enumerate(fit.columns)}
    padded = np.concatenate([rows, np.zeros((m, 1))], axis=1)
    idx = np.array([local.get(int(c), rows.shape[1]) for c in fixed], dtype=np.int64)
    return padded[:, idx], np.broadcast_to(fixed, (m, n))


def _released(mode: str, values: np.ndarray, cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """What the attacker sees: ``noisy`` keeps each topic's ``n`` largest (noisy) values; others as they are."""
    if mode != "noisy":
        return values, cols
    from ..topics.release import noisy_keywords

    keep = noisy_keywords(values, n)
    return np.take_along_axis(values, keep, axis=1), np.take_along_axis(np.asarray(cols), keep, axis=1)


def _lira_row(name: str, mode: str, eps: float | None, delta: float, scores: np.ndarray,
              member: np.ndarray, n: int = 0, sensitivity: str = "worst-case") -> LiraRow:
    """The table row of one ``(mechanism, keywords)``; ``eps`` is ``None`` for a non-private release."""
    from ..topics.family import needs_sensitivity

    results = [tpr_at_fpr(scores, member, f) for f in FPRS]
    is_dp = eps is not None
    l2 = not is_dp or needs_sensitivity(name)  # the Laplace baseline: pure epsilon, global L1 sensitivity 2m
    d = delta if l2 else 0.0
    return LiraRow(
        mechanism=name, keywords=mode, epsilon=float(eps) if eps is not None else None,
        delta=d if is_dp else None, trials_in=int(member.sum()), trials_out=int((~member).sum()),
        auc=_auc(scores, member), tpr=tuple(r[0] for r in results), tpr_low=tuple(r[1] for r in results),
        tpr_high=tuple(r[2] for r in results),
        dp_bound=tuple(min(1.0, math.exp(min(float(eps), 700.0)) * f + d) if eps is not None
                       else 1.0 for f in FPRS), n=n,
        sensitivity=(sensitivity if l2 else "global L1 2m") if is_dp else "-")


def _shadow_statistics(fits: list[_Fit], mode: str, mech: TopicsMechanism | None, m: int, k: int, fixed: np.ndarray,
                       noise_rng: np.random.Generator, freqs: np.ndarray, n_words: int, n_models: int,
                       users: int) -> np.ndarray:
    """Each shadow model's release (noised by ``mech`` unless ``None``) scored against every user: models x users."""
    stats = np.empty((n_models, users))
    for j, fit in enumerate(fits):
        values, cols = _non_private(mode, fit, m, k, fixed)
        shape = (values.shape[0], values.shape[1])  # numpy 2.0's stubs: tuple[int, ...]
        noisy = values if mech is None else mech.noise(shape).randomize(values, seed=noise_rng)
        released, released_cols = _released(mode, noisy, cols, k)
        stats[j] = _statistic(freqs, released, released_cols, n_words)
    return stats


def run_lira(
        corpus: UserCorpus, *, models: int = 64, n_topics: int = 5, m: int = 5, n: int | Sequence[int] = 20,
        max_iter: int = 5, mechanisms: Sequence[tuple[str, float | None]] = (("none", None),),
        keywords: Sequence[str] = ("model", "fixed"), delta: float = 1e-5, sensitivity: str | float = "worst-case",
        gamma: float = 0.1, cache_dir: str | Path | None = None,
        seed: int | np.random.Generator | np.random.SeedSequence | None = None, progress: ProgressCallback | None = None,
) -> tuple[list[LiraRow], dict[str, int | float | str]]:
    """Run LiRA on ``corpus`` (a :class:`~textdp.topics.UserCorpus`) for each ``(mechanism, ε)``.

    ``mechanism`` is ``none`` (the non-private release) or a name of
    :data:`textdp.topics.MECHANISMS`. The ``models`` LDA fits are shared by every keyword count,
    mechanism and ε (the noise is drawn per release; ``noisy`` has its own fits over the public
    stand-in, :func:`stand_in_vocabulary`); ``keywords`` picks the releases (:data:`KEYWORD_MODES`);
    ``n`` is one keyword count or several. ``sensitivity``: ``"worst-case"`` (``sqrt(2m)``),
    ``"sampled"`` (the sampler at ``gamma`` on the whole corpus, cached in ``cache_dir``; see the
    module docstring) or a number (supplied: every Gaussian release is calibrated to it, stated as
    such; e.g. a value below the sampled one, for a stronger attack). Returns the table rows and the public settings of the run (sizes, seconds);
    the corpus itself is never echoed.
    """
    from ..topics.family import needs_sensitivity, topics_mechanism

    n_models = check_positive_int(models, "models", minimum=8)
    ns = [check_positive_int(k, "n (keywords)") for k in ([n] if isinstance(n, int) else n)]
    modes = [check_choice(k, "keywords", KEYWORD_MODES) for k in keywords]
    if isinstance(sensitivity, str):
        check_choice(sensitivity, "sensitivity", ("worst-case", "sampled"))
    else:
        sensitivity = check_sensitivity(sensitivity)
    users = corpus.n_users
    if users < 4:
        raise ParameterError("LiRA needs at least 4 users")
    gen = make_rng(seed)
    member_rng, noise_rng, sampler_rng = spawn(gen, 3)  # the first two as before: old tables reproduce
    member = membership_matrix(n_models, users, member_rng)
    # every word any database can hold (each shadow database builds its own vocabulary by the public rule)
    all_words = corpus.columns if corpus.counts is not None else corpus.vocabulary
    vocab_index = {w: i for i, w in enumerate(all_words)}
    kinds = sorted({"public" if k == "noisy" else "rule" for k in modes}, reverse=True)  # rule fits first
    corpora = {"rule": corpus}
    if "public" in kinds:
        corpora["public"] = corpus.with_public_vocabulary(stand_in_vocabulary(corpus))
    t0 = time.perf_counter()
    fixed = np.array([vocab_index[corpus.vocabulary[i]] for i in
                      np.argsort(-np.asarray(corpus.X.sum(axis=0)).reshape(-1), kind="stable")[:max(ns)]])
    total = n_models * len(kinds) + len(mechanisms) * len(modes) * len(ns)
    fits = {kind: _fits(corpora[kind], member, vocab_index, n_topics=n_topics, max_iter=max_iter, progress=progress,
                        done=i * n_models, total=total) for i, kind in enumerate(kinds)}  # in order: rule fits first
    fit_seconds = time.perf_counter() - t0
    deltas = _sensitivities(sensitivity, modes, ns, corpora, m=m, n_topics=n_topics, max_iter=max_iter,
                            gamma=gamma, cache_dir=cache_dir, seed=sampler_rng)
    sampling_seconds = time.perf_counter() - t0 - fit_seconds
    rows: list[LiraRow] = []
    done = n_models * len(kinds)
    freqs = _user_frequencies(corpus)
    for k in ns:
        for mode in modes:
            sens, label = deltas[(mode, k)]
            for name, eps in mechanisms:
                mech = None if name == "none" else topics_mechanism(
                    name, epsilon=float(eps or 1.0), delta=delta,
                    **({"sensitivity": sens, "gamma": gamma if sensitivity == "sampled" else None}
                       if needs_sensitivity(name) else {})).fit()
                stats = _shadow_statistics(fits["public" if mode == "noisy" else "rule"], mode, mech, m, k, fixed[:k],
                                           noise_rng, freqs, len(all_words), n_models, users)
                scores = lira_scores(stats, member)
                rows.append(_lira_row(name, mode, eps if mech is not None else None, delta, scores, member, n=k,
                                      sensitivity=label))
                done += 1
                if progress is not None:
                    progress(done, total)
    settings: dict[str, int | float | str] = {
        "models": n_models, "users": users, "n_topics": n_topics, "m": m, "n": ",".join(map(str, ns)),
        "vocabulary": len(corpus.vocabulary), "max_iter": max_iter,
        "sensitivity": (f"global L2 sqrt(2m) = {math.sqrt(2.0 * m):.4g}" if sensitivity == "worst-case" else
                        f"sampled once on the whole corpus at gamma={gamma:g} (its value calibrates every shadow)"
                        if sensitivity == "sampled" else f"supplied L2 {sensitivity:.6g} for every Gaussian release"),
        "delta": delta, "fit_seconds": round(fit_seconds, 1), "sampling_seconds": round(sampling_seconds, 1),
        "seconds": round(time.perf_counter() - t0, 1)}
    return rows, settings


def _sensitivities(sensitivity: str | float, modes: Sequence[str], ns: Sequence[int], corpora: dict[str, UserCorpus], *,
                   m: int, n_topics: int, max_iter: int, gamma: float, cache_dir: str | Path | None,
                   seed: np.random.Generator) -> dict[tuple[str, int], tuple[float | str, str]]:
    """The L2 sensitivity (value or ``"worst-case"``) and its label for every ``(release, n)``.

    Sampled: one sampler per release kind on the whole corpus (``noisy``: whole rows, one value for
    every ``n``; ``model``: the ``m x n`` values, one per ``n``); ``fixed`` keeps the worst case
    (no sampler measures its function).
    """
    from ..topics import SensitivitySampler, SklearnLDA

    if not isinstance(sensitivity, str):
        return {(mode, k): (sensitivity, f"supplied {sensitivity:.4g}") for mode in modes for k in ns}
    out: dict[tuple[str, int], tuple[float | str, str]] = {
        (mode, k): ("worst-case", "worst-case sqrt(2m)") for mode in modes for k in ns}
    if sensitivity != "sampled":
        return out
    model = SklearnLDA(n_topics=n_topics, max_iter=max_iter, seed=0)
    label = f"sampled, gamma {gamma:g}"
    if "noisy" in modes:
        pub = corpora["public"]
        s = SensitivitySampler(corpus=pub, model=model, sizes=[(m, len(pub.vocabulary))], rows=True,
                               cache_dir=cache_dir).sample(gamma, seed=seed)
        for k in ns:
            out[("noisy", k)] = (next(iter(s.values())).value, label)
    if "model" in modes:
        sizes = [(m, k) for k in ns]
        s = SensitivitySampler(corpus=corpora["rule"], model=model, sizes=sizes,
                               cache_dir=cache_dir).sample(gamma, seed=seed)
        for k in ns:
            out[("model", k)] = (s[(m, k)].value, label)
    return out
