"""Spectral LDA with Gaussian noise on its moments: user-level (ε, δ)-DP, deterministic sensitivity.

DeCarolis, Ram, Esmaeili, Wang & Huang, "An end-to-end differentially private Latent Dirichlet Allocation
using a spectral algorithm" (AISTATS 2020; arXiv 1805.10341) make the spectral algorithm of Anandkumar et
al. private by adding noise to one "configuration" of its edges; the configuration used here perturbs the
second moment ``M2`` and the whitened third moment ``M3(W, W, W)`` (their Sec. 4: noise on the input of the
whitening and on the whitened tensor, each with the Gaussian mechanism), everything after being
post-processing. Their sensitivities are per document; here the unit is the user and each user's
contribution to each moment is clipped to a public Frobenius norm, so both sensitivities hold by
construction (the Lemmas below) and the two Gaussian releases compose exactly.

The algorithm (Anandkumar, Foster, Hsu, Kakade & Liu, "A Spectral Algorithm for Latent Dirichlet
Allocation", NeurIPS 2012, Theorem 3.5; the tensor power method of Anandkumar, Ge, Hsu, Kakade & Telgarsky,
JMLR 2014, Alg. 1), with ``E2`` the pair and ``E3`` the triple word distribution and ``M1`` the word marginal::

    M2 = E2 - a0/(a0+1) M1 M1^T                               = sum_k w_k mu_k mu_k^T
    M3 = E3 - a0/(a0+2) sym(E2 (x) M1) + 2 a0^2/((a0+1)(a0+2)) M1^(x)3 = sum_k 2 w_k/(a0+2) mu_k^(x)3

with ``W`` (``V x K``) such that ``W^T M2 W = I``: ``M3(W, W, W) = sum_k lambda_k v_k^(x)3`` with orthonormal
``v_k`` (the tensor power method finds them), ``mu_k`` proportional to ``(W^T)^+ v_k`` and the topic weight
``alpha_k`` proportional to ``lambda_k^-2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import sparse

from .._rng import make_rng
from ..accounting.gaussian import analytic_gaussian_sigma, check_sensitivity, gaussian_delta
from ..errors import ParameterError
from ..guarantees.events import GaussianEvent
from .cooccurrence import BALLE_WANG, CorpusTopicsMechanism, gaussian_noise, user_pair_moments
from .models import UserCorpus
from .release import TopicGuarantee, grid_text

__all__ = ["DECAROLIS", "DONG_ROTH_SU", "SpectralLDA", "SpectralMoments", "gdp_mu", "tensor_power",
           "user_triple_moments"]

DECAROLIS = ("DeCarolis, Ram, Esmaeili, Wang & Huang, 'An end-to-end Differentially Private Latent Dirichlet "
             "Allocation Using a Spectral Algorithm', AISTATS 2020 (arXiv 1805.10341)")
DONG_ROTH_SU = "Dong, Roth & Su, 'Gaussian Differential Privacy', JRSS-B 2022, Thm. 2.7, Cor. 2.13 and Cor. 3.3"
ANANDKUMAR = ("Anandkumar, Foster, Hsu, Kakade & Liu, 'A Spectral Algorithm for Latent Dirichlet Allocation', "
              "NeurIPS 2012, Thm. 3.5")


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu`` for which ``mu``-GDP is ``(epsilon, delta)``-DP (Dong, Roth & Su, Cor. 2.13).

    ``mu``-GDP is the Gaussian mechanism with ``sensitivity / sigma = mu``, whose exact ``delta(epsilon)`` is
    Balle & Wang's Theorem 8, so ``mu = 1 / analytic_gaussian_sigma(epsilon, delta, 1)``.

    >>> round(gdp_mu(3.0, 1e-5), 4)
    0.7191
    """
    return 1.0 / analytic_gaussian_sigma(epsilon, delta, 1.0)


def user_triple_moments(X: sparse.csr_matrix, user_rows: Sequence[np.ndarray], W: np.ndarray) -> np.ndarray:
    """Per user, the mean over their documents (``n >= 3`` kept tokens) of the whitened triple estimator.

    For a document ``x`` with ``n`` tokens and ``y = W^T x`` (Anandkumar et al. 2012, Sec. 4.1)::

        T(x) = [y^(x)3 - sum_i x_i (w_i w_i y + w_i y w_i + y w_i w_i) + 2 sum_i x_i w_i^(x)3] / (n (n-1) (n-2))

    is unbiased for ``E3(W, W, W)``. Returns ``users x K^3`` (a user with no such document: zeros) and their
    document counts. PRIVATE.
    """
    X = sparse.csr_matrix(X, dtype=np.float64)
    K = W.shape[1]
    n = np.asarray(X.sum(axis=1)).ravel()
    Y = np.asarray(X @ W)  # docs x K
    G = np.asarray(X @ np.einsum("ia,ib->iab", W, W).reshape(W.shape[0], K * K)).reshape(-1, K, K)
    W3 = np.einsum("ia,ib,ic->iabc", W, W, W).reshape(W.shape[0], K ** 3)
    T = np.einsum("da,db,dc->dabc", Y, Y, Y)
    T -= np.einsum("dab,dc->dabc", G, Y) + np.einsum("dac,db->dabc", G, Y) + np.einsum("dbc,da->dabc", G, Y)
    T = T.reshape(-1, K ** 3) + 2.0 * np.asarray(X @ W3)
    ok = n >= 3
    den = np.where(ok, n * (n - 1.0) * (n - 2.0), 1.0)
    owner = np.full(X.shape[0], -1, dtype=np.int64)
    for u, rows in enumerate(user_rows):
        owner[np.asarray(rows, dtype=np.int64)] = u
    keep = np.flatnonzero(ok & (owner >= 0))
    counts = np.bincount(owner[keep], minlength=len(user_rows)).astype(float)
    weight = 1.0 / (den[keep] * counts[owner[keep]])
    agg = sparse.csr_matrix((weight, (owner[keep], keep)), shape=(len(user_rows), X.shape[0]))
    return np.asarray(agg @ T)


def tensor_power(T: np.ndarray, k: int, *, starts: int = 20, iters: int = 50,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(eigenvalues, eigenvectors)`` of a symmetric ``K x K x K`` tensor by the robust tensor power method.

    Anandkumar, Ge, Hsu, Kakade & Telgarsky (JMLR 2014, Alg. 1): ``starts`` public random starts, ``iters``
    power iterations ``v <- T(I, v, v) / ||T(I, v, v)||``, the start with the largest ``T(v, v, v)`` kept,
    deflation. The starts come from a fixed public seed: a deterministic function of ``T``.

    >>> e = np.eye(3); T = 2 * np.einsum("a,b,c->abc", e[0], e[0], e[0]) + np.einsum("a,b,c->abc", e[1], e[1], e[1])
    >>> lam, V = tensor_power(T, 2)
    >>> lam.round(3).tolist(), np.abs(V).round(3).tolist()
    ([2.0, 1.0], [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    """
    rng = make_rng(seed)  # public, fixed starts: post-processing of the noisy moments (the one factory)
    K = T.shape[0]
    T = T.copy()
    lams: list[float] = []
    vecs: list[np.ndarray] = []
    for _ in range(k):
        best: float = -np.inf
        best_v: np.ndarray = np.zeros(K)
        for _ in range(starts):
            v: np.ndarray = rng.standard_normal(size=(int(K),))
            v = v / float(np.linalg.norm(v))
            for _ in range(iters):
                w = np.einsum("abc,b,c->a", T, v, v)
                nw = float(np.linalg.norm(w))
                if nw == 0:
                    break
                v = w / nw
            val = float(np.einsum("abc,a,b,c->", T, v, v, v))
            if val > best:
                best, best_v = val, v
        lams.append(best)
        vecs.append(best_v)
        T = T - best * np.einsum("a,b,c->abc", best_v, best_v, best_v)
    return np.array(lams), np.array(vecs).T


class SpectralMoments(NamedTuple):
    """What :meth:`SpectralLDA.noisy_moments` returns (immutable).

    ``pairs``: release 1, ``S2~`` (``V x V``); ``W`` (``V x K``), ``unwhiten``, ``E2``, ``M1``: the whitening
    computed from it (post-processing, public from here on); ``triples``: release 2, ``S3~`` (``K^3 + 1``).
    """

    pairs: np.ndarray
    W: np.ndarray
    unwhiten: np.ndarray
    E2: np.ndarray
    M1: np.ndarray
    triples: np.ndarray


def _symmetrize3(T: np.ndarray) -> np.ndarray:
    """The mean of the six axis permutations of a ``K x K x K`` tensor (post-processing)."""
    perms = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
    out = np.zeros_like(T)
    for p in perms:
        out += np.transpose(T, p)
    return out / 6.0


class SpectralLDA(CorpusTopicsMechanism):
    """Spectral LDA with Gaussian noise on ``M2`` and the whitened ``M3`` (DeCarolis et al., AISTATS 2020).

    What runs, over the first ``words`` public columns (``V``) and ``K = topics``:

    1. ``S2 = sum_u c_u Q_u`` (:class:`~textdp.topics.cooccurrence.UserMoments`: each user's pair distribution,
       scaled to Frobenius norm at most ``C2 = clip``) plus i.i.d. ``N(0, sigma2^2)`` on its ``V^2`` entries;
       post-processing: symmetrize, clip at 0, ``E2 = S2~ / sum(S2~)``, ``M1`` its row sums, ``M2`` as in the module
       docstring, ``W = U_K diag(s_K)^(-1/2)`` from its ``K`` largest eigenvalues (public from here on);
    2. per user the vector ``r_u = (R_u, kappa)`` with ``R_u`` the mean whitened triple estimator of their
       documents (:func:`user_triple_moments`, ``K^3`` entries) and ``kappa = clip3`` a constant, scaled to
       norm at most ``C3 = clip3 * sqrt(K (a0 + 1))`` (the scale of the whitened tensor, public);
       ``S3 = sum_u d_u r_u`` plus i.i.d. ``N(0, sigma3^2)`` on its ``K^3 + 1`` entries; the last entry
       estimates ``kappa sum_u d_u``, the tensor's normaliser;
    3. post-processing: ``E3(W,W,W) = S3~[:K^3] / (S3~[-1] / kappa)``, symmetrised; ``M3(W,W,W)`` by the LDA
       correction with ``M1`` and ``E2``; tensor power method (:func:`tensor_power`); topics
       ``mu_k`` = ``(W^T)^+ v_k`` with the sign of the larger mass, negatives clipped, normalised; weights
       ``lambda_k^-2``; keywords as in the family base.

    Calibration (proof). **Lemma 1**: ``S2(D + u) - S2(D) = c_u Q_u`` has Frobenius norm at most ``C2`` (as for
    :class:`~textdp.topics.cooccurrence.NoisyCooccurrence`). **Lemma 2**: given the released ``S2~`` (hence
    ``W``), ``S3(D + u) - S3(D) = d_u r_u`` with ``||d_u r_u|| <= C3`` by the scaling, for every pair of
    add/remove neighbours. The Gaussian mechanism with L2 sensitivity ``C`` and noise ``sigma`` is
    ``C/sigma``-GDP (Dong, Roth & Su 2022, Thm. 2.7); the adaptive composition of ``mu1``- and ``mu2``-GDP is
    ``sqrt(mu1^2 + mu2^2)``-GDP (Cor. 3.3); ``mu``-GDP is ``(epsilon, delta)``-DP iff
    ``delta >= Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)`` (Cor. 2.13), Balle & Wang's bound
    with ``sensitivity/sigma = mu``. So ``mu = gdp_mu(epsilon, delta)`` (:func:`gdp_mu`), split as
    ``mu1 = mu sqrt(share)``, ``mu2 = mu sqrt(1 - share)`` (``share`` public), ``sigma2 = C2 / mu1`` and
    ``sigma3 = C3 / mu2``: the pair of releases is ``mu``-GDP, hence ``(epsilon, delta)``-DP for every user;
    everything else reads the noisy statistics and public parameters only (post-processing). The composition
    event is one Gaussian with noise multiplier ``1 / mu`` (exact: a ``mu``-GDP pair and that Gaussian have
    the same privacy profile).
    """

    name = "spectral-lda"
    label = "Spectral LDA (noisy moments)"
    reference = f"{DECAROLIS}; {ANANDKUMAR}; {DONG_ROTH_SU}"

    alpha0: float = 1.0
    clip3: float = 1.0
    share: float = 0.5

    def _fit(self) -> None:
        super()._fit()
        if not (isinstance(self.alpha0, (int, float)) and 0 < float(self.alpha0) < math.inf):
            raise ParameterError(f"alpha0 (the Dirichlet concentration sum alpha_k) must be > 0, got {self.alpha0!r}")
        check_sensitivity(self.clip3, "clip3")
        if not 0.0 < float(self.share) < 1.0:
            raise ParameterError(f"share (of mu^2 spent on M2) must be in (0, 1), got {self.share!r}")

    def sigmas(self) -> tuple[float, float, float]:
        """``(sigma2, sigma3, C3)``: the two noise scales and the tensor's clip (public)."""
        mu = gdp_mu(self.epsilon_, self.delta_)
        mu1, mu2 = mu * math.sqrt(float(self.share)), mu * math.sqrt(1.0 - float(self.share))
        C3 = float(self.clip3) * math.sqrt(self.topics * (float(self.alpha0) + 1.0))
        return float(self.clip) / mu1, C3 / mu2, C3

    def noisy_pairs(self, corpus: UserCorpus, rng: np.random.Generator) -> np.ndarray:
        """Release 1: ``S2~`` (``V x V``)."""
        S2 = user_pair_moments(corpus, self.words).clipped_sum(float(self.clip))
        return S2 + gaussian_noise(S2.shape, self.sigmas()[0], rng)

    def whitening(self, noisy_pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(W, unwhiten, E2, M1)`` from ``S2~`` (post-processing); ``unwhiten = (W^T)^+``."""
        a0, K = float(self.alpha0), self.topics
        S = np.maximum(0.5 * (noisy_pairs + noisy_pairs.T), 0.0)  # a distribution's estimate: non-negative
        total = float(S.sum())
        E2 = S / total if total > 0 else np.full(S.shape, 1.0 / S.size)
        M1 = E2.sum(axis=1)
        M2 = E2 - a0 / (a0 + 1.0) * np.outer(M1, M1)
        w, U = np.linalg.eigh(M2)
        top = np.argsort(-w, kind="stable")[:K]
        s = np.maximum(w[top], 1e-12 * max(float(w.max()), 1e-300))
        return U[:, top] / np.sqrt(s), U[:, top] * np.sqrt(s), E2, M1

    def noisy_triples(self, corpus: UserCorpus, W: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Release 2: ``S3~`` (``K^3 + 1`` entries), given the public whitening ``W``."""
        S3 = self.clipped_triples(corpus, W)
        return S3 + gaussian_noise(S3.shape, self.sigmas()[1], rng)

    def clipped_triples(self, corpus: UserCorpus, W: np.ndarray) -> np.ndarray:
        """``S3 = sum_u d_u r_u`` (``K^3 + 1`` entries): release 2 before its noise (PRIVATE)."""
        V = W.shape[0]
        R = user_triple_moments(corpus.X[:, :V], corpus.user_rows, W)
        kappa = float(self.clip3)
        has = np.abs(R).sum(axis=1) > 0
        r = np.hstack([R, np.where(has, kappa, 0.0)[:, None]])
        C3 = self.sigmas()[2]
        norms = np.linalg.norm(r, axis=1)
        d = np.where(norms > C3, C3 / np.where(norms > 0, norms, 1.0), 1.0)
        return (d[:, None] * r).sum(axis=0)

    def noisy_moments(self, corpus: UserCorpus, rng: np.random.Generator) -> SpectralMoments:
        """The two noisy releases and the public whitening between them: the only steps that read the corpus.

        The release (:meth:`topic_word`, hence ``privatize_batch``) calls this method and post-processes its
        result with :meth:`fit_topics`; ``textdp audit spectral-lda`` runs ``privatize_batch`` of the registered
        class and records what this method returns (on its own instance, it replaces the post-processing
        :meth:`fit_topics` by a recorder: ``tests/test_audit_topic_moments.py`` checks the release path goes
        through this very function).
        """
        pairs = self.noisy_pairs(corpus, rng)
        W, unwhiten, E2, M1 = self.whitening(pairs)
        return SpectralMoments(pairs, W, unwhiten, E2, M1, self.noisy_triples(corpus, W, rng))

    def topic_word(self, corpus: UserCorpus, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.fit_topics(self.noisy_moments(corpus, rng))

    def fit_topics(self, moments: SpectralMoments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(topic_word, prevalence, marginal)`` from the noisy moments: post-processing only (reads no data)."""
        a0, K = float(self.alpha0), self.topics
        _, W, unwhiten, E2, M1, S3 = moments
        users = max(float(S3[-1]) / float(self.clip3), 1.0)
        E3w = _symmetrize3(S3[:-1].reshape(K, K, K) / users)
        m1 = W.T @ M1
        E2w = W.T @ E2 @ W
        cross = (np.einsum("ab,c->abc", E2w, m1) + np.einsum("ac,b->abc", E2w, m1)
                 + np.einsum("bc,a->abc", E2w, m1))
        M3w = E3w - a0 / (a0 + 2.0) * cross + 2.0 * a0 ** 2 / ((a0 + 1.0) * (a0 + 2.0)) * np.einsum(
            "a,b,c->abc", m1, m1, m1)
        lam, vecs = tensor_power(M3w, K)
        mu = unwhiten @ vecs  # V x K
        flip = np.where(np.maximum(mu, 0).sum(axis=0) >= np.maximum(-mu, 0).sum(axis=0), 1.0, -1.0)
        mu = np.maximum(mu * flip, 0.0)
        tot = mu.sum(axis=0)
        tw = np.where(tot > 0, mu / np.where(tot > 0, tot, 1.0), 1.0 / mu.shape[0]).T
        weight = 1.0 / np.maximum(np.abs(lam), 1e-12) ** 2
        prev = weight / weight.sum()
        order = np.argsort(-prev, kind="stable")
        return tw[order], prev[order], M1 / max(float(M1.sum()), 1e-300)

    def _stated(self, shape: tuple[int, int], n: int) -> TopicGuarantee:  # type: ignore[override]
        eps, delta = self.epsilon_, self.delta_
        s2, s3, C3 = self.sigmas()
        mu = gdp_mu(eps, delta)
        V, K = shape[1], self.topics
        noise = (f"two Gaussian releases: N(0, {s2:.6g}^2) on each of the {V}x{V} entries of the sum of per-user "
                 f"word pair distributions over the first {V} public words (each scaled to Frobenius norm at most "
                 f"C2={float(self.clip):g}), then, given the whitening computed from it, N(0, {s3:.6g}^2) on each "
                 f"of the {K ** 3}+1 entries of the sum of per-user whitened triple moments with their constant "
                 f"{float(self.clip3):g} (each scaled to norm at most C3={C3:.6g}); then spectral LDA "
                 f"(alpha0={float(self.alpha0):g}, tensor power method), rows rounded to the grid "
                 f"g={grid_text(self.grid)}, keywords by relevance (lambda={float(self.relevance):g})")
        statement = (f"({eps:g}, {gaussian_delta(1.0, eps, mu):.4g})-differential privacy for user-level neighbours "
                     f"(one user's documents added or removed), for every pair of neighbours: {noise}. The two "
                     f"releases are C2/sigma2- and C3/sigma3-GDP, composed to mu={mu:.6g}-GDP (Dong, Roth & Su "
                     f"2022), which is ({eps:g}, delta <= {delta:g})-DP. " + self._covered(shape, n))
        return TopicGuarantee(mechanism=self.name, epsilon=eps, delta=delta, gamma=None,
                              event=GaussianEvent(1.0 / mu), shape=shape, grid=self.grid, noise=noise,
                              statement=statement, keywords_from="noisy", keywords=n,
                              keyword_text=self.keyword_text(),
                              reference=f"{DECAROLIS}; {DONG_ROTH_SU}; {BALLE_WANG}")

