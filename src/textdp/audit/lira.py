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

Sensitivity of the private releases: the *global* L2 bound ``sqrt(2m)`` of ``m`` probability rows
(each row moves by at most ``sqrt(2)`` when a user's documents are added or removed), so the
guarantee is plain (ε, δ)-DP with no sampled γ; TopicDP's sampled sensitivity is smaller (less
noise) and is not what is attacked here. The keyword identities are chosen by the non-private
model and are not covered by any of the guarantees (``KEYWORD_NOTE``); the statistic uses them,
as a real attacker would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import beta as _beta

from .._rng import make_rng, spawn
from .._validation import check_positive_int
from ..errors import ParameterError
from ..progress import ProgressCallback

if TYPE_CHECKING:
    from ..topics import UserCorpus

__all__ = ["FPRS", "KEYWORD_MODES", "LiraRow", "lira_scores", "membership_matrix", "run_lira", "tpr_at_fpr"]

#: False-positive rates the table reports.
FPRS = (0.001, 0.01)
#: ``model``: the textdp release (top-n keywords of each topic, chosen by the non-private model and not
#: covered by the guarantee); ``fixed``: the same topics' values at n fixed columns (the corpus' most
#: frequent words, the same for every model), so the guarantee covers every value the attack sees.
KEYWORD_MODES = ("model", "fixed")


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

    def to_dict(self) -> dict[str, str | float | list[float] | None]:
        return {"mechanism": self.mechanism, "keywords": self.keywords, "epsilon": self.epsilon, "delta": self.delta,
                "trials_in": self.trials_in, "trials_out": self.trials_out, "auc": self.auc,
                "fpr": list(FPRS), "tpr": list(self.tpr), "tpr_low": list(self.tpr_low),
                "tpr_high": list(self.tpr_high), "dp_bound": list(self.dp_bound)}


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


def _shadow_releases(corpus: UserCorpus, member: np.ndarray, keywords: Sequence[str], *, n_topics: int,
                     max_iter: int, m: int, n: int, vocab_index: dict[str, int], fixed_words: list[str],
                     progress: ProgressCallback | None, total: int) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """The non-private release ``(values, global columns)`` of every shadow database, per keyword mode."""
    from ..topics import SklearnLDA, extract_topic_matrix
    from ..topics.models import fit_database

    fixed = np.array([vocab_index[w] for w in fixed_words], dtype=np.int64)
    raw: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in keywords}
    for j in range(member.shape[0]):
        # the initialisation seed is part of the released function (SklearnLDA): the same for every model
        model = SklearnLDA(n_topics=n_topics, max_iter=max_iter, seed=0)
        tw, prev, vocab = fit_database(corpus, model, np.flatnonzero(member[j]))
        if "model" in raw:
            tm = extract_topic_matrix(tw, prev, vocab, m, n)
            cols = np.array([[vocab_index[w] for w in row] for row in tm.keywords], dtype=np.int64)
            raw["model"].append((tm.matrix, cols))
        if "fixed" in raw:  # the same public columns in every release (a word this database lacks weighs 0)
            top = np.argsort(-prev, kind="stable")[:m]
            local = {w: i for i, w in enumerate(vocab)}
            padded = np.concatenate([tw[top], np.zeros((m, 1))], axis=1)
            idx = np.array([local.get(w, len(vocab)) for w in fixed_words], dtype=np.int64)
            raw["fixed"].append((padded[:, idx], np.broadcast_to(fixed, (m, n))))
        if progress is not None:
            progress(j + 1, total)
    return raw


def _lira_row(name: str, mode: str, eps: float | None, delta: float, scores: np.ndarray,
              member: np.ndarray) -> LiraRow:
    """The table row of one ``(mechanism, keywords)``; ``eps`` is ``None`` for a non-private release."""
    results = [tpr_at_fpr(scores, member, f) for f in FPRS]
    is_dp = eps is not None
    d = 0.0 if name == "topicdp-laplace" else delta
    return LiraRow(
        mechanism=name, keywords=mode, epsilon=float(eps) if eps is not None else None,
        delta=d if is_dp else None, trials_in=int(member.sum()), trials_out=int((~member).sum()),
        auc=_auc(scores, member), tpr=tuple(r[0] for r in results), tpr_low=tuple(r[1] for r in results),
        tpr_high=tuple(r[2] for r in results),
        dp_bound=tuple(min(1.0, math.exp(min(float(eps), 700.0)) * f + d) if eps is not None
                       else 1.0 for f in FPRS))


def run_lira(
    corpus: UserCorpus,
    *,
    models: int = 64,
    n_topics: int = 5,
    m: int = 5,
    n: int = 20,
    max_iter: int = 5,
    mechanisms: Sequence[tuple[str, float | None]] = (("none", None),),
    keywords: Sequence[str] = KEYWORD_MODES,
    delta: float = 1e-5,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[list[LiraRow], dict[str, int | float | str]]:
    """Run LiRA on ``corpus`` (a :class:`~textdp.topics.UserCorpus`) for each ``(mechanism, ε)``.

    ``mechanism`` is ``none`` (the non-private release) or a name of
    :data:`textdp.topics.MECHANISMS`. The ``models`` LDA fits are shared by every mechanism (the
    noise is drawn per release); ``keywords`` picks the release variants (:data:`KEYWORD_MODES`). Returns the table rows and the public settings of the run
    (sizes, seconds); the corpus itself is never echoed.
    """
    from ..topics import build_mechanism

    n_models = check_positive_int(models, "models", minimum=8)
    users = corpus.n_users
    if users < 4:
        raise ParameterError("LiRA needs at least 4 users")
    gen = make_rng(seed)
    member_rng, noise_rng = spawn(gen, 2)
    member = membership_matrix(n_models, users, member_rng)
    freqs = _user_frequencies(corpus)
    # every word any database can hold (each shadow database builds its own vocabulary by the public rule)
    all_words = corpus.columns if corpus.counts is not None else corpus.vocabulary
    vocab_index = {w: i for i, w in enumerate(all_words)}
    t0 = time.perf_counter()
    top_n = np.argsort(-np.asarray(corpus.X.sum(axis=0)).reshape(-1), kind="stable")[:n]
    fixed_words = [corpus.vocabulary[i] for i in top_n]
    total = n_models + len(mechanisms) * len(keywords)
    raw = _shadow_releases(corpus, member, keywords, n_topics=n_topics, max_iter=max_iter, m=m, n=n,
                           vocab_index=vocab_index, fixed_words=fixed_words, progress=progress, total=total)
    fit_seconds = time.perf_counter() - t0
    rows: list[LiraRow] = []
    sens = math.sqrt(2.0 * m)
    done = n_models
    for mode in keywords:
        for name, eps in mechanisms:
            mech = None if name == "none" else build_mechanism(name, epsilon=float(eps or 1.0), delta=delta, m=m,
                                                                sensitivity=sens)
            stats = np.empty((n_models, users))
            for j, (values, cols) in enumerate(raw[mode]):
                released = values if mech is None else mech.randomize(values, seed=noise_rng)
                stats[j] = _statistic(freqs, released, cols, len(all_words))
            scores = lira_scores(stats, member)
            rows.append(_lira_row(name, mode, eps if mech is not None else None, delta, scores, member))
            done += 1
            if progress is not None:
                progress(done, total)
    settings: dict[str, int | float | str] = {"models": n_models, "users": users, "n_topics": n_topics, "m": m, "n": n, "max_iter": max_iter,
                "sensitivity": f"global L2 sqrt(2m) = {sens:.4g}", "delta": delta,
                "fit_seconds": round(fit_seconds, 1), "seconds": round(time.perf_counter() - t0, 1)}
    return rows, settings
