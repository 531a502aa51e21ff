"""Audit cases of the corpus topic mechanisms: ``noisy-cooccurrence`` and ``spectral-lda`` (issue 42).

Both release post-processing (an eigen-truncation and NMF, or the tensor power method, then keywords) of
Gaussian-noised statistics of the corpus; the released topics have no tractable law, the noisy statistics do.
So each case samples the noisy statistic through the **public, documented method the release itself runs**:
``NoisyCooccurrence.noisy_statistic`` (``topic_word``, hence ``privatize_batch``, calls it and
post-processes) and ``SpectralLDA.noisy_moments`` (the two noisy releases and the public whitening between
them), of the registered class built by :func:`textdp.mechanisms.get` with the user's parameters; a spy test
(``tests/test_audit_topic_moments.py``) checks that ``privatize_batch`` goes through that very function
object. Post-processing cannot raise the privacy loss, so the noisy statistics' profile bounds the release's.

The pair (public words written here, :data:`AUDIT_WORDS`): database ``b`` has two users (one three-word
document each), database ``a`` adds the target user, whose one document ``gas gas gas power`` has a pair
distribution of Frobenius norm 0.61 (above the default clip 0.02, so its clipped contribution has norm
exactly ``C``) and, for spectral LDA, a whitened triple moment far above the tensor clip ``C3``.

The claim, derived here and sharing no code with the mechanisms' calibration (nothing from
:mod:`textdp.accounting` or the topics modules' helpers):

* the Gaussian mechanism's privacy profile at ``mu = Delta / sigma``,
  ``delta(eps') = Phi(mu/2 - eps'/mu) - e^eps' Phi(-mu/2 - eps'/mu)`` (:func:`gaussian_profile`), and the
  largest ``mu`` with ``delta(eps) <= delta`` (:func:`least_noise_mu`, bisection): an ``(eps, delta)`` claim
  allows no less noise than ``sigma = C / mu``;
* the pair's statistics from the documents themselves (:func:`pair_distribution`, :func:`triple_counts`:
  every ordered pair / triple of distinct token positions enumerated), each user's clipped to the public
  norm, so the sensitivity of the pair is computed, not read: ``Delta_1 = min(||Q_u||, C)``;
* ``noisy-cooccurrence``: the privacy-loss statistic ``L(o) = <o - (S_a + S_b)/2, Delta>/sigma^2`` with
  ``sigma = C / mu``, ``L ~ N(+-mu_pair^2/2, mu_pair^2)`` under the claimed law, ``mu_pair = ||Delta||/sigma``;
* ``spectral-lda``: the two releases with the paper's split (``mu_1 = mu sqrt(share)``, ``mu_2 = mu
  sqrt(1 - share)``, ``sigma_2 = C/mu_1``, ``sigma_3 = C3/mu_2``, ``C3 = clip3 sqrt(K (alpha0 + 1))``,
  DeCarolis et al. with Dong, Roth & Su's composition), ``L = L_1 + L_2`` with ``L_2`` computed from the
  whitening ``W`` of each sample (public, post-processing of release 1) and the audit's own whitened triple
  moments of the pair; the claimed profile is the Gaussian one at ``mu`` (exact when both clips bind);
* conformance: the probability integral transform of every noisy entry's residual (the released statistic
  minus the audit's own ``S_x``) under ``N(0, sigma^2)`` of the paper, Kolmogorov–Smirnov against U(0, 1).

References: Balle & Wang, ICML 2018, Thm. 8; Dong, Roth & Su, JRSS-B 2022, Cor. 2.13 and 3.3;
DeCarolis et al., AISTATS 2020; Anandkumar et al., NeurIPS 2012.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._validation import check_epsilon, check_probability
from ..errors import ParameterError
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve

if TYPE_CHECKING:
    from ..topics.cooccurrence import CorpusTopicsMechanism, NoisyCooccurrence
    from ..topics.spectral import SpectralLDA, SpectralMoments

#: The registered class a moment case builds (its release is sampled through ``privatize_batch``).
M = TypeVar("M", bound="CorpusTopicsMechanism")

__all__ = [
    "AUDIT_WORDS",
    "MOMENT_SAMPLES",
    "OTHER_DOCUMENTS",
    "TARGET_DOCUMENT",
    "MomentClaim",
    "gaussian_profile",
    "least_noise_mu",
    "noisy_cooccurrence_case",
    "pair_distribution",
    "register_topic_moment_cases",
    "released_statistics",
    "spectral_lda_case",
    "triple_counts",
]

#: The public vocabulary of the audit's corpora (ten words; the mechanisms keep its first ``words`` columns).
AUDIT_WORDS = ("gas", "power", "price", "market", "energy", "deal", "trade", "contract", "oil", "pipeline")
#: The target user's one document (database ``a`` = the others + this user).
TARGET_DOCUMENT = "gas gas gas power"
#: The other users' documents (database ``b``; ``textdp`` needs two users in a corpus).
OTHER_DOCUMENTS = ("price market trade", "oil pipeline contract")
#: The defaults of ``textdp topics``.
DEFAULT_EPSILON = 3.0
DEFAULT_DELTA = 1e-4
#: Noisy statistics drawn per input by default (each one a call of the release's method, ~2-10 ms here).
MOMENT_SAMPLES = 2_000


# -- the claim: the Gaussian mechanism's profile, written again ---------------------------------------------------
def gaussian_profile(eps_prime: float | np.ndarray, mu: float) -> np.ndarray:
    """``Phi(mu/2 - e/mu) - e^e Phi(-mu/2 - e/mu)``: the exact ``delta(e)`` of the Gaussian mechanism at ``mu``.

    ``mu = Delta / sigma`` (Balle & Wang 2018, Thm. 8; the second term in log space, no overflow).

    >>> round(float(gaussian_profile(0.0, 1.0)), 6)  # 2 Phi(1/2) - 1
    0.382925
    """
    e = np.asarray(eps_prime, dtype=np.float64)
    if not mu > 0:
        return np.zeros_like(e)
    first = ndtr(mu / 2.0 - e / mu)
    second = np.exp(np.minimum(e + log_ndtr(-mu / 2.0 - e / mu), 700.0))
    return np.asarray(np.maximum(first - second, 0.0))


def least_noise_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu = Delta/sigma`` whose Gaussian profile has ``delta(epsilon) <= delta`` (bisection).

    The profile increases with ``mu``, so ``sigma = Delta / mu`` is the least noise an ``(epsilon, delta)`` claim
    allows (Balle & Wang's σ ≈ 3.73 at (1, 1e-5) for Δ = 1).

    >>> round(1.0 / least_noise_mu(1.0, 1e-5), 2)
    3.73
    """
    eps = check_epsilon(epsilon)
    dlt = check_probability(delta, "delta")
    if not 0.0 < dlt < 1.0:
        raise ParameterError(f"delta must be in (0, 1) for a Gaussian claim, got {delta!r}")
    lo, hi = 0.0, 1.0
    while float(gaussian_profile(eps, hi)) <= dlt:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            raise ParameterError(f"no Gaussian noise is needed at epsilon={epsilon!r}, delta={delta!r}")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(gaussian_profile(eps, mid)) <= dlt:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return lo


@dataclass(frozen=True)
class MomentClaim:
    """What a case claims, from public parameters only (frozen; tests compare it under planted calibrations).

    ``mu``: the least-noise ``mu`` of ``(epsilon, delta)``; ``sigmas``: the paper's noise of each release
    (``noisy-cooccurrence``: one; ``spectral-lda``: release 1 and release 2); ``clips``: their L2 sensitivities.
    """

    epsilon: float
    delta: float
    mu: float
    sigmas: tuple[float, ...]
    clips: tuple[float, ...]


# -- the pair's statistics, from the documents ------------------------------------------------------------------
def _tokens(doc: str, columns: Sequence[str]) -> list[int]:
    index = {w: i for i, w in enumerate(columns)}
    return [index[w] for w in doc.split() if w in index]


def pair_distribution(doc: str, columns: Sequence[str]) -> np.ndarray:
    """The distribution of the words of an ordered pair of distinct token positions (``V x V``; zeros if < 2).

    Enumerated pair by pair (the definition, not the mechanism's vectorised form).

    >>> pair_distribution("a a b", ["a", "b"]).tolist()
    [[0.3333333333333333, 0.3333333333333333], [0.3333333333333333, 0.0]]
    """
    t = _tokens(doc, columns)
    q = np.zeros((len(columns), len(columns)))
    pairs = list(itertools.permutations(range(len(t)), 2))
    for i, j in pairs:
        q[t[i], t[j]] += 1.0
    return q / len(pairs) if pairs else q


def triple_counts(doc: str, columns: Sequence[str]) -> list[tuple[int, int, int, float]]:
    """``(i, j, k, share)`` of the word triples of ordered triples of distinct token positions (empty if < 3)."""
    t = _tokens(doc, columns)
    triples = list(itertools.permutations(range(len(t)), 3))
    counts: dict[tuple[int, int, int], int] = {}
    for p in triples:
        key = (t[p[0]], t[p[1]], t[p[2]])
        counts[key] = counts.get(key, 0) + 1
    return [(i, j, k, c / len(triples)) for (i, j, k), c in sorted(counts.items())]


def _clipped(x: np.ndarray, bound: float) -> np.ndarray:
    norm = float(np.linalg.norm(x))
    return x * (bound / norm) if norm > bound else x


def _whitened(triples: list[tuple[int, int, int, float]], W: np.ndarray) -> np.ndarray:
    """``sum share W[i] (x) W[j] (x) W[k]`` for a batch of whitenings ``W`` (``n x V x K``): ``n x K^3``."""
    n, _, K = W.shape
    out = np.zeros((n, K, K, K))
    for i, j, k, share in triples:
        out += share * np.einsum("na,nb,nc->nabc", W[:, i], W[:, j], W[:, k])
    return out.reshape(n, K ** 3)


# -- the corpora ----------------------------------------------------------------------------------------------
def _corpora() -> tuple[object, object]:
    """``(a, b)``: the user corpora over :data:`AUDIT_WORDS` with and without the target user."""
    from ..topics.models import UserCorpus

    others = [f"other{i}" for i in range(len(OTHER_DOCUMENTS))]
    a = UserCorpus.from_texts([TARGET_DOCUMENT, *OTHER_DOCUMENTS], ["target", *others], vocabulary=AUDIT_WORDS)
    b = UserCorpus.from_texts(list(OTHER_DOCUMENTS), others, vocabulary=AUDIT_WORDS)
    return a, b


def _mechanism(name: str, eps: float, dlt: float, params: Mapping[str, object], kind: type[M]) -> M:
    from ..mechanisms.registry import get

    for key in ("sensitivity", "gamma"):
        if key in params:
            raise ParameterError(f"{name} is calibrated to its public clip: --param {key} does not apply")
    mech = get(name, epsilon=eps, delta=dlt, **params)
    if not isinstance(mech, kind):
        raise ParameterError(f"{name} is registered as {type(mech).__name__}, not the {kind.__name__} this case audits")
    mech.fit()
    return mech


def _cooccurrence(eps: float, dlt: float, params: Mapping[str, object]) -> NoisyCooccurrence:
    from ..topics.cooccurrence import NoisyCooccurrence

    return _mechanism("noisy-cooccurrence", eps, dlt, params, NoisyCooccurrence)


def _spectral(eps: float, dlt: float, params: Mapping[str, object]) -> SpectralLDA:
    from ..topics.spectral import SpectralLDA

    return _mechanism("spectral-lda", eps, dlt, params, SpectralLDA)


def released_statistics(mech: CorpusTopicsMechanism, corpus: object, n: int,
                        rng: np.random.Generator) -> list[np.ndarray | SpectralMoments]:
    """``n`` releases of ``corpus`` through the registered class's ``privatize_batch``; each one's noisy statistic.

    The release runs ``topic_word`` = ``fit_topics(noisy step(corpus, rng))`` (``noisy_statistic`` or
    ``noisy_moments``): on the audit's own instance the post-processing ``fit_topics`` is replaced by a recorder
    that keeps its input and returns uniform topics (post-processing reads no data; replacing it cannot change the
    law of what it is given, and it saves the NMF / tensor power method of every draw). Everything before it --
    ``privatize_batch``, ``_privatize``, the noisy step -- is the release's own code.
    """
    got: list[np.ndarray | SpectralMoments] = []

    def recorder(stat: np.ndarray | SpectralMoments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got.append(stat)
        V = int(np.shape(stat[0] if isinstance(stat, tuple) else stat)[0])
        K = int(mech.topics)
        return np.full((K, V), 1.0 / V), np.full(K, 1.0 / K), np.full(V, 1.0 / V)

    object.__setattr__(mech, "fit_topics", recorder)
    try:
        mech.privatize_batch([corpus] * n, seed=rng)
    finally:
        object.__delattr__(mech, "fit_topics")
    if len(got) != n:
        raise ParameterError(f"{mech.name}: {n} releases recorded {len(got)} noisy statistics; the release no longer "
                             "calls fit_topics once per corpus (textdp.audit.topic_moments)")
    return got


def _grid(mu: float) -> tuple[float, ...]:
    eta = mu * mu / 2.0  # the mean of L under a
    return tuple(float(x) for x in np.linspace(0.0, eta + 2.0 * mu, CURVE_POINTS))


def _claimed(mu: float) -> Callable[[np.ndarray, float, np.random.Generator], tuple[np.ndarray, np.ndarray]]:
    def claimed(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        pt = gaussian_profile(np.asarray(grid, dtype=np.float64), mu)
        return pt, pt + 1e-12

    return claimed


def _params(epsilon: float | None, delta: float | None) -> tuple[float, float]:
    return (check_epsilon(DEFAULT_EPSILON if epsilon is None else epsilon),
            check_probability(DEFAULT_DELTA if delta is None else delta, "delta"))


def _columns(mech: CorpusTopicsMechanism) -> tuple[str, ...]:
    return AUDIT_WORDS[: min(int(mech.words), len(AUDIT_WORDS))]


# -- noisy-cooccurrence -----------------------------------------------------------------------------------------
def noisy_cooccurrence_case(epsilon: float | None = None, delta: float | None = None, *,
                            mechanism: NoisyCooccurrence | None = None, **params: object) -> AuditCase:
    """``noisy-cooccurrence`` through ``NoisyCooccurrence.noisy_statistic`` (what its release post-processes).

    ``params``: the mechanism's own parameters (``clip``, ``words``, ...), as ``textdp topics`` takes them.
    ``mechanism``: sample this object instead (tests and power studies pass broken variants); the claim
    stays the one of ``epsilon``, ``delta`` and the public parameters.
    """
    eps, dlt = _params(epsilon, delta)
    built = _cooccurrence(eps, dlt, params)
    mech = built if mechanism is None else mechanism
    C = float(built.clip)
    cols = _columns(built)
    mu = least_noise_mu(eps, dlt)
    sigma = C / mu
    q_target = _clipped(pair_distribution(TARGET_DOCUMENT, cols), C)
    S_b = sum((_clipped(pair_distribution(d, cols), C) for d in OTHER_DOCUMENTS), np.zeros((len(cols),) * 2))
    S_a = S_b + q_target
    mid = (S_a + S_b) / 2.0
    dist = float(np.linalg.norm(q_target))
    mu_pair = dist / sigma
    corpus_a, corpus_b = _corpora()
    means = {id(corpus_a): S_a, id(corpus_b): S_b}

    def sample(corpus: object, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([np.asarray(s, dtype=np.float64) for s in released_statistics(mech, corpus, n, rng)])

    def loss(out: np.ndarray) -> np.ndarray:
        o = np.asarray(out, dtype=np.float64).reshape(len(out), -1)
        return np.asarray((o - mid.reshape(-1)) @ q_target.reshape(-1) / (sigma * sigma))

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        z = (np.asarray(out, dtype=np.float64) - means[id(x)][None]) / sigma
        return np.asarray(ndtr(z)).reshape(-1)

    V = len(cols)
    law = f"N(0, {sigma:.6g}^2) on each of the {V}x{V} entries (analytic Gaussian at clip C={C:g}, audit's own)"
    curve = PrivacyCurve(sample, loss, _claimed(mu_pair), _grid(mu_pair), reuse_outputs=True,
                         description=f"noisy-cooccurrence's noisy statistic vs the Gaussian with the least noise "
                                     f"(epsilon, delta) allows, mu={mu_pair:.6g}")
    return AuditCase(
        mechanism="noisy-cooccurrence",
        pair=(f"user corpora over {V} public words, one user ('{TARGET_DOCUMENT}') added: the sum of clipped "
              f"co-occurrence distributions moves by {dist:.6g} (clip C={C:g})"),
        input_a=corpus_a, input_b=corpus_b, sample=sample, claimed_epsilon=eps, claimed_delta=dlt,
        events="histogram", statistic=loss, chunk=500, curve=curve,
        conformance=Conformance(description=f"residual of every noisy entry vs {law}", kind="uniform", keep=keep),
        default_samples=MOMENT_SAMPLES,
    )


def noisy_cooccurrence_claim(epsilon: float | None = None, delta: float | None = None,
                             **params: object) -> MomentClaim:
    """The :class:`MomentClaim` of :func:`noisy_cooccurrence_case` at these parameters."""
    eps, dlt = _params(epsilon, delta)
    C = float(_cooccurrence(eps, dlt, params).clip)
    mu = least_noise_mu(eps, dlt)
    return MomentClaim(eps, dlt, mu, (C / mu,), (C,))


# -- spectral-lda -------------------------------------------------------------------------------------------------
def spectral_claim(epsilon: float | None = None, delta: float | None = None, **params: object) -> MomentClaim:
    """The :class:`MomentClaim` of :func:`spectral_lda_case`: ``mu`` split by ``share`` over the two releases."""
    eps, dlt = _params(epsilon, delta)
    return _spectral_claim(_spectral(eps, dlt, params), eps, dlt)


def _released_moments(mech: SpectralLDA, corpus: object, n: int, rng: np.random.Generator) -> list[SpectralMoments]:
    """:func:`released_statistics` of spectral-lda: each release's two noisy moments and its whitening."""
    out = []
    for m in released_statistics(mech, corpus, n, rng):
        if isinstance(m, np.ndarray):
            raise ParameterError(f"{mech.name}: the release recorded one matrix, not spectral-lda's two moments")
        out.append(m)
    return out


def _spectral_claim(mech: SpectralLDA, eps: float, dlt: float) -> MomentClaim:
    share = float(mech.share)
    K, a0 = int(mech.topics), float(mech.alpha0)
    C2, C3 = float(mech.clip), float(mech.clip3) * math.sqrt(K * (a0 + 1.0))
    mu = least_noise_mu(eps, dlt)
    return MomentClaim(eps, dlt, mu, (C2 / (mu * math.sqrt(share)), C3 / (mu * math.sqrt(1.0 - share))), (C2, C3))


def spectral_lda_case(epsilon: float | None = None, delta: float | None = None, *,
                      mechanism: SpectralLDA | None = None, **params: object) -> AuditCase:
    """``spectral-lda`` through ``SpectralLDA.noisy_moments`` (its two noisy releases and the whitening).

    Each output is one sample's ``(S2~, W, S3~)`` flattened; the loss of release 2 is computed from that
    sample's whitening ``W`` (public: post-processing of release 1) with the audit's own triple moments.
    """
    eps, dlt = _params(epsilon, delta)
    built = _spectral(eps, dlt, params)
    mech = built if mechanism is None else mechanism
    cols = _columns(built)
    V, K = len(cols), int(built.topics)
    if K > V:
        raise ParameterError(f"the spectral-lda audit's corpus has {V} public words: give --param topics <= {V}")
    claim = _spectral_claim(built, eps, dlt)
    s2, s3 = claim.sigmas
    C2, C3 = claim.clips
    kappa = float(built.clip3)
    q_target = _clipped(pair_distribution(TARGET_DOCUMENT, cols), C2)
    S2_b = sum((_clipped(pair_distribution(d, cols), C2) for d in OTHER_DOCUMENTS), np.zeros((V, V)))
    S2 = {"a": S2_b + q_target, "b": S2_b}
    mid2 = (S2["a"] + S2["b"]).reshape(-1) / 2.0
    t_target = triple_counts(TARGET_DOCUMENT, cols)
    t_others = [triple_counts(d, cols) for d in OTHER_DOCUMENTS]
    corpus_a, corpus_b = _corpora()
    which = {id(corpus_a): "a", id(corpus_b): "b"}
    width = V * V + V * K + K ** 3 + 1

    def user_rows(triples: list[tuple[int, int, int, float]], W: np.ndarray) -> np.ndarray:
        """``d_u r_u`` per sample: ``(R_u(W), kappa)`` scaled to norm at most ``C3`` (zeros: no 3-token document)."""
        if not triples:
            return np.zeros((W.shape[0], K ** 3 + 1))
        r = np.hstack([_whitened(triples, W), np.full((W.shape[0], 1), kappa)])
        norms = np.linalg.norm(r, axis=1, keepdims=True)
        return r * np.where(norms > C3, C3 / np.where(norms > 0, norms, 1.0), 1.0)

    def unpack(out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        o = np.asarray(out, dtype=np.float64).reshape(len(out), width)
        return o[:, : V * V], o[:, V * V: V * V + V * K].reshape(-1, V, K), o[:, V * V + V * K:]

    def triples_b(W: np.ndarray) -> np.ndarray:
        return sum((user_rows(t, W) for t in t_others), np.zeros((W.shape[0], K ** 3 + 1)))

    def sample(corpus: object, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty((n, width))
        for k, m in enumerate(_released_moments(mech, corpus, n, rng)):
            out[k] = np.concatenate([np.ravel(m.pairs), np.ravel(m.W), np.ravel(m.triples)])
        return out

    def loss(out: np.ndarray) -> np.ndarray:
        pairs, W, triples = unpack(out)
        l1 = (pairs - mid2) @ q_target.reshape(-1) / (s2 * s2)
        d2 = user_rows(t_target, W)
        base = triples_b(W)
        l2 = np.einsum("ni,ni->n", triples - base - d2 / 2.0, d2) / (s3 * s3)
        return np.asarray(l1 + l2)

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        pairs, W, triples = unpack(out)
        side = which[id(x)]
        mean3 = triples_b(W) + (user_rows(t_target, W) if side == "a" else 0.0)
        z = np.hstack([(pairs - S2[side].reshape(-1)) / s2, (triples - mean3) / s3])
        return np.asarray(ndtr(z)).reshape(-1)

    mu = claim.mu
    law = (f"N(0, {s2:.6g}^2) on the {V}x{V} pair entries and N(0, {s3:.6g}^2) on the {K}^3+1 whitened triple "
           f"entries (mu={mu:.6g} split by share={float(built.share):g}; C2={C2:g}, C3={C3:.6g})")
    curve = PrivacyCurve(sample, loss, _claimed(mu), _grid(mu), reuse_outputs=True,
                         description=f"spectral-lda's two noisy releases vs the mu={mu:.6g}-GDP profile (the least "
                                     "noise (epsilon, delta) allows)")
    return AuditCase(
        mechanism="spectral-lda",
        pair=(f"user corpora over {V} public words, one user ('{TARGET_DOCUMENT}') added: release 1 moves by "
              f"{float(np.linalg.norm(q_target)):.6g} (C2={C2:g}), release 2 by its clip C3={C3:.6g} where it binds"),
        input_a=corpus_a, input_b=corpus_b, sample=sample, claimed_epsilon=eps, claimed_delta=dlt,
        events="histogram", statistic=loss, chunk=250, curve=curve,
        conformance=Conformance(description=f"residual of every noisy entry vs {law}", kind="uniform", keep=keep),
        default_samples=MOMENT_SAMPLES,
    )


def register_topic_moment_cases() -> None:
    """Register ``noisy-cooccurrence`` and ``spectral-lda`` (idempotent; they take the mechanism's parameters)."""
    from .registry import register_audit_case

    register_audit_case("noisy-cooccurrence", noisy_cooccurrence_case, replace=True, takes_params=True,
                        description="noisy-cooccurrence's noisy statistic (the method its release post-processes), "
                                    "one user added to a 10-word public corpus (claim (epsilon, delta) at the clip; "
                                    "default 3, 1e-4)")
    register_audit_case("spectral-lda", spectral_lda_case, replace=True, takes_params=True,
                        description="spectral-lda's two noisy moments (the method its release post-processes), one "
                                    "user added to a 10-word public corpus (claim (epsilon, delta) as mu-GDP; "
                                    "default 3, 1e-4)")
