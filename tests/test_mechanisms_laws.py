"""Output laws of the word-level mechanisms against the papers' formulas.

For every mechanism: on a tiny vocabulary the exact output distribution is computed
here, independently of the implementation (closed form, or fine numerical
integration for the continuous-noise mechanisms); sampled frequencies must pass a
chi-square test against it, and a deliberately wrong law (epsilon doubled, another
threshold, a peer's formula) must fail the same test. Then the guarantee: for
neighbouring inputs the log-ratio of output probabilities stays within the claimed
bound, exactly on the computed law and up to sampling error on the samples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from textdp._rng import make_rng
from textdp.embeddings import Embeddings
from textdp.mechanisms import (
    CMP,
    TEM,
    CusText,
    CusTextPlus,
    Mahalanobis,
    RandomReplacement,
    SanText,
    SanTextPlus,
    Vickrey,
)
from textdp.mechanisms.perturbation import regularized_sqrt

N = 20000
P_OK = 1e-3
P_WRONG = 1e-6


def chisq_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled."""
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    n = counts.sum()
    expected = probs * n
    if np.any((expected == 0) & (counts > 0)):
        return 0.0
    big = expected >= 5
    obs = list(counts[big])
    exp = list(expected[big])
    if (~big).any() and expected[~big].sum() > 0:
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
    exp_arr = np.array(exp)
    exp_arr *= sum(obs) / exp_arr.sum()
    if len(obs) < 2:
        return 1.0
    return float(stats.chisquare(obs, exp_arr).pvalue)


def sample_counts(mech, x: int, n: int = N, seed: int = 1) -> np.ndarray:
    out = mech.privatize_ids(np.full(n, x), rng=make_rng(seed))
    return np.bincount(out, minlength=mech.embeddings_.vocab_size)


def check_law(counts: np.ndarray, law: np.ndarray, wrong: np.ndarray) -> None:
    assert chisq_pvalue(counts, law) > P_OK
    assert chisq_pvalue(counts, wrong) < P_WRONG


def check_guarantee(mech, law_of, pairs, n: int = N, *, min_prob: float = 0.0, tol: float = 1e-9) -> None:
    """Computed law within the bound (``tol`` for quadrature error); sampled log-ratios within bound + 4 sigma."""
    for a, b in pairs:
        bound = mech.log_ratio_bound(a, b)
        pa, pb = law_of(a), law_of(b)
        if min_prob == 0.0:
            assert np.array_equal(pa > 0, pb > 0) or math.isinf(bound)
        both = (pa > min_prob) & (pb > min_prob)
        exact = np.abs(np.log(pa[both]) - np.log(pb[both])).max()
        assert exact <= bound + tol
        ca, cb = sample_counts(mech, a, n, seed=11), sample_counts(mech, b, n, seed=12)
        ok = (ca >= 50) & (cb >= 50)
        assert ok.any()
        ratio = np.abs(np.log(ca[ok] / cb[ok]))
        sigma = np.sqrt(1.0 / ca[ok] + 1.0 / cb[ok])
        assert np.all(ratio <= bound + 4.0 * sigma)


# -- a tiny real vocabulary (GloVe 6B 50d vectors) ----------------------------------------
WORDS = ["king", "queen", "prince", "man", "woman", "boy", "girl", "car", "truck", "apple", "banana", "river"]


@pytest.fixture(scope="module")
def small(glove):
    rows = [glove.index[w] for w in WORDS]
    return Embeddings(WORDS, np.asarray(glove.vectors)[rows], name="glove-12")


def distances(emb: Embeddings, x: int) -> np.ndarray:
    v = np.asarray(emb.vectors, dtype=np.float64)
    return np.sqrt(((v - v[x]) ** 2).sum(axis=1))


def softmax(logits: np.ndarray) -> np.ndarray:
    p = np.exp(logits - logits.max())
    return p / p.sum()


# -- SanText ----------------------------------------------------------------------------
def santext_law(emb, x, eps):
    return softmax(-eps * distances(emb, x) / 2)  # Yue et al. 2021: exp(-eps d / 2)


def test_santext_law(small):
    m = SanText(epsilon=1.0, embeddings=small, stop_words=None).fit()
    m._block = 5  # exercise the two-level sampler across blocks
    for x in (0, 7):
        law = santext_law(small, x, 1.0)
        np.testing.assert_allclose(m.probabilities(x), law, rtol=1e-9)
        check_law(sample_counts(m, x), law, santext_law(small, x, 2.0))


def test_santext_guarantee(small):
    m = SanText(epsilon=1.0, embeddings=small, stop_words=None).fit()
    check_guarantee(m, lambda x: santext_law(small, x, 1.0), [(0, 1), (3, 4), (7, 9)])


# -- TEM ----------------------------------------------------------------------------------
def tem_law(emb, x, eps, beta, bottom="paper"):
    """Carvalho et al. Algorithm 1: Gumbel(2/eps) race over L_x and the bottom element."""
    d = distances(emb, x)
    v = emb.vocab_size
    gamma = (2 / eps) * math.log((1 - beta) * (v - 1) / beta)
    inside = d <= gamma
    n_out = int((~inside).sum())
    if bottom == "paper":
        bot = -gamma + (2 / eps) * math.log(n_out)
    else:  # mldp-text's bottom score: -gamma + 2 ln(|V| / |L_x|) / eps
        bot = -gamma + 2 * math.log(v / inside.sum()) / eps
    p = softmax((eps / 2) * np.append(-d[inside], bot))
    out = np.zeros(v)
    out[inside] = p[:-1]
    out[~inside] = p[-1] / n_out
    return out


def test_tem_gamma_formula(small):
    m = TEM(epsilon=2.0, beta=0.2, embeddings=small, stop_words=None).fit()
    assert m.gamma_ == pytest.approx((2 / 2.0) * math.log(0.8 * 11 / 0.2))
    # with this gamma the output leaves L_x with probability at most beta, as the paper states
    for x in range(small.vocab_size):
        d = distances(small, x)
        assert m.probabilities(x)[d > m.gamma_].sum() <= 0.2 + 1e-12


def test_tem_law(small):
    m = TEM(epsilon=1.2, beta=0.3, embeddings=small, stop_words=None).fit()
    m._block = 5
    for x in (0, 9):
        law = tem_law(small, x, 1.2, 0.3)
        assert 0 < (distances(small, x) > m.gamma_).sum() < small.vocab_size - 1  # both parts non-trivial
        np.testing.assert_allclose(m.probabilities(x), law, rtol=1e-9)
        counts = sample_counts(m, x)
        check_law(counts, law, tem_law(small, x, 2.4, 0.3))
        # the untruncated exponential mechanism and mldp-text's bottom score are rejected too
        assert chisq_pvalue(counts, santext_law(small, x, 1.2)) < P_WRONG
        assert chisq_pvalue(counts, tem_law(small, x, 1.2, 0.3, bottom="mldp-text")) < P_WRONG


def test_tem_guarantee(small):
    m = TEM(epsilon=1.2, beta=0.3, embeddings=small, stop_words=None).fit()
    check_guarantee(m, lambda x: tem_law(small, x, 1.2, 0.3), [(0, 1), (7, 8), (0, 9)])


# -- SanText+ ---------------------------------------------------------------------------
def santext_plus_law(emb, x, eps, p, n_sens, direction="V_S"):
    v = emb.vocab_size
    fs = v - n_sens
    d = distances(emb, x)
    out = np.zeros(v)
    target = slice(fs, v) if direction == "V_S" else slice(0, fs)
    q = softmax(-eps * d[target] / 2)
    if x >= fs:
        out[target] = q
    else:
        out[target] = p * q
        out[x] += 1 - p
    return out


def test_santext_plus_law(small):
    m = SanTextPlus(epsilon=1.0, p=0.4, sensitive_fraction=0.5, embeddings=small, stop_words=None).fit()
    m._block = 4
    assert m.n_sensitive_ == 6 and m.first_sensitive_ == 6
    for x in (1, 8):  # one non-sensitive, one sensitive input
        law = santext_plus_law(small, x, 1.0, 0.4, 6)
        np.testing.assert_allclose(m.probabilities(x), law, rtol=1e-9, atol=1e-15)
        counts = sample_counts(m, x)
        check_law(counts, law, santext_plus_law(small, x, 2.0, 0.4, 6))
        # sampling replacements from the non-sensitive side (the inverted direction) is rejected
        assert chisq_pvalue(counts, santext_plus_law(small, x, 1.0, 0.4, 6, direction="V_N")) < P_WRONG


def test_santext_plus_guarantee(small):
    m = SanTextPlus(epsilon=1.0, p=0.4, sensitive_fraction=0.5, embeddings=small, stop_words=None).fit()
    fs = m.first_sensitive_
    for a, b in [(6, 8), (1, 7), (7, 1)]:
        bound = m.log_ratio_bound(a, b)
        pa = santext_plus_law(small, a, 1.0, 0.4, 6)[fs:]
        pb = santext_plus_law(small, b, 1.0, 0.4, 6)[fs:]
        assert np.abs(np.log(pa) - np.log(pb)).max() <= bound + 1e-9  # protected outputs only
    # the ln(1/p) term is needed: a sensitive and a non-sensitive word at (almost) the same place
    toy = Embeddings(["n0", "n1", "s0", "s1"], np.array([[0.0], [3.0], [0.01], [3.5]]), name="toy")
    t = SanTextPlus(epsilon=1.0, p=0.4, sensitive_fraction=0.5, embeddings=toy, stop_words=None).fit()
    ratio = np.abs(np.log(t.probabilities(2)[2:]) - np.log(t.probabilities(0)[2:])).max()
    assert ratio == pytest.approx(math.log(1 / 0.4), abs=0.02)
    assert ratio > 1.0 * 0.01 and ratio <= t.log_ratio_bound(2, 0) + 1e-12


# -- CusText ------------------------------------------------------------------------------
def custext_law(emb, groups, x, eps):
    members = np.flatnonzero(groups == groups[x])
    d = distances(emb, x)[members]
    u = -(d - d.min()) / (d.max() - d.min())  # Chen et al.: normalised utility in [-1, 0]
    out = np.zeros(emb.vocab_size)
    out[members] = softmax(eps * u / 2)
    return out


def brute_force_groups(emb, k):
    """The mapping function, literally: first unassigned word takes its k-1 nearest unassigned."""
    v = np.asarray(emb.vectors, dtype=np.float64)
    group = -np.ones(emb.vocab_size, dtype=int)
    g = 0
    for s in range(emb.vocab_size):
        if group[s] >= 0:
            continue
        free = np.flatnonzero(group < 0)
        if free.size < k:
            group[free] = g - 1
            break
        d = np.sqrt(((v[free] - v[s]) ** 2).sum(axis=1))
        group[free[np.lexsort((free, d))[:k]]] = g
        g += 1
    return group


def test_custext_mapping_matches_definition(small, glove):
    m = CusText(epsilon=1.0, top_k=3, embeddings=small, stop_words=None).fit()
    np.testing.assert_array_equal(m.groups_, brute_force_groups(small, 3))
    # a larger real vocabulary: the blocked construction equals the literal one
    big = glove.restrict(top_k=600)
    from textdp.mechanisms.exponential import custext_groups

    np.testing.assert_array_equal(custext_groups(big.vectors, 7, chunk=32), brute_force_groups(big, 7))
    counts = np.bincount(custext_groups(big.vectors, 7))
    assert counts.min() >= 7 and counts.sum() == 600


def test_custext_law(small):
    m = CusText(epsilon=3.0, top_k=4, embeddings=small, stop_words=None).fit()
    for x in (0, 7):
        law = custext_law(small, m.groups_, x, 3.0)
        np.testing.assert_allclose(m.probabilities(x), law, rtol=1e-9)
        check_law(sample_counts(m, x), law, custext_law(small, m.groups_, x, 6.0))


def test_custext_guarantee(small):
    m = CusText(epsilon=3.0, top_k=4, embeddings=small, stop_words=None).fit()
    g = m.groups_
    pairs = [(a, b) for a in range(12) for b in range(12) if a < b and g[a] == g[b]][:3]
    check_guarantee(m, lambda x: custext_law(small, g, x, 3.0), pairs)
    other = next(b for b in range(12) if g[b] != g[0])
    assert m.log_ratio_bound(0, other) == math.inf  # different output sets: no protection, and it says so


def test_custext_plus_keeps_stop_words(glove):
    m = CusTextPlus(epsilon=0.01, top_k=20, embeddings=glove.restrict(top_k=20000), seed=3).fit()
    out = m.privatize("the cat sat on the mat with a dog")
    assert len(out.words) == len(["the", "cat", "sat", "on", "the", "mat", "with", "dog"])  # 'a': one letter
    assert [out.words[i] for i in (0, 3, 4, 6)] == ["the", "on", "the", "with"]
    assert "stop words" in out.guarantee.statement and "no protection" in out.guarantee.statement


# -- random replacement ----------------------------------------------------------------
def test_random_law_and_epsilon(small):
    m = RandomReplacement(rate=0.3, embeddings=small, stop_words=None).fit()
    law = np.full(12, 0.3 / 12)
    law[2] += 0.7
    wrong = np.full(12, 0.4 / 12)
    wrong[2] += 0.6
    check_law(sample_counts(m, 2), law, wrong)
    assert m.epsilon_ == pytest.approx(math.log(law[2] / law[0]))
    back = RandomReplacement(epsilon=m.epsilon_, embeddings=small, stop_words=None).fit()
    assert back.rate_ == pytest.approx(0.3)
    check_guarantee(m, m.probabilities, [(0, 1), (2, 9)])


# -- continuous noise: CMP, Vickrey (1-D, exact integrals) and Mahalanobis (2-D) -----------
LINE = np.array([[0.0], [1.0], [2.5], [4.5], [5.0]])


@pytest.fixture(scope="module")
def line():
    return Embeddings(["w0", "w1", "w2", "w3", "w4"], LINE, name="line")


def laplace_cdf(t, eps):
    return np.where(t < 0, 0.5 * np.exp(eps * t), 1 - 0.5 * np.exp(-eps * np.abs(t)))


def cmp_law_1d(x, eps):
    pos = LINE[:, 0]
    mids = np.concatenate([[-np.inf], (pos[1:] + pos[:-1]) / 2, [np.inf]])
    cdf = laplace_cdf(mids - pos[x], eps)
    return np.diff(cdf)


def test_cmp_law(line):
    m = CMP(epsilon=1.5, embeddings=line, stop_words=None).fit()
    for x in (1, 3):
        check_law(sample_counts(m, x), cmp_law_1d(x, 1.5), cmp_law_1d(x, 3.0))


def test_cmp_guarantee(line):
    m = CMP(epsilon=1.5, embeddings=line, stop_words=None).fit()
    check_guarantee(m, lambda x: cmp_law_1d(x, 1.5), [(1, 2), (3, 4)])


def vickrey_law_1d(x, eps, t, grid=400001):
    """Integral over the 1-D Laplace noise (quantile grid) of the threshold rule."""
    u = (np.arange(grid) + 0.5) / grid
    noise = np.where(u < 0.5, np.log(2 * u) / eps, -np.log(2 * (1 - u)) / eps)
    z = LINE[x, 0] + noise
    d = np.abs(z[:, None] - LINE[None, :, 0])
    order = np.argsort(d, axis=1, kind="stable")
    d1 = np.take_along_axis(d, order[:, :1], 1)[:, 0]
    d2 = np.take_along_axis(d, order[:, 1:2], 1)[:, 0]
    p1 = (1 - t) * d2 / (t * d1 + (1 - t) * d2)
    law = np.bincount(order[:, 0], weights=p1, minlength=5) + np.bincount(order[:, 1], weights=1 - p1, minlength=5)
    return law / grid


def test_vickrey_law(line):
    m = Vickrey(epsilon=1.5, t=0.7, embeddings=line, stop_words=None).fit()
    for x in (1, 3):
        law = vickrey_law_1d(x, 1.5, 0.7)
        counts = sample_counts(m, x)
        check_law(counts, law, vickrey_law_1d(x, 1.5, 0.3))
        assert chisq_pvalue(counts, cmp_law_1d(x, 1.5)) < P_WRONG  # it is not CMP


def test_vickrey_guarantee(line):
    m = Vickrey(epsilon=1.5, t=0.7, embeddings=line, stop_words=None).fit()
    check_guarantee(m, lambda x: vickrey_law_1d(x, 1.5, 0.7), [(1, 2), (3, 4)], min_prob=1e-4, tol=1e-3)


PLANE = np.array([[0.0, 0.0], [1.0, 0.2], [0.3, 1.4], [2.0, 1.5], [-1.2, 0.8], [3.0, -0.5]])


@pytest.fixture(scope="module")
def plane():
    return Embeddings([f"p{i}" for i in range(6)], PLANE, name="plane")


def mahalanobis_law_2d(x, eps, root, grid=1000):
    """Polar quadrature: radius at Gamma(2, 1/eps) quantile midpoints, angle uniform."""
    r = stats.gamma(a=2, scale=1 / eps).ppf((np.arange(grid) + 0.5) / grid)
    th = 2 * np.pi * (np.arange(grid) + 0.5) / grid
    s = np.stack([np.outer(r, np.cos(th)).ravel(), np.outer(r, np.sin(th)).ravel()], axis=1)
    z = PLANE[x] + s @ root
    d2 = ((z[:, None, :] - PLANE[None, :, :]) ** 2).sum(axis=2)
    return np.bincount(d2.argmin(axis=1), minlength=6) / z.shape[0]


def test_mahalanobis_law(plane):
    m = Mahalanobis(epsilon=1.2, lambd=0.7, embeddings=plane, stop_words=None).fit()
    root, _ = regularized_sqrt(PLANE, 0.7)
    np.testing.assert_allclose(m.sqrt_cov_, root)
    # Sigma_lambda = lambda * cov(scaled to trace n) + (1 - lambda) I
    cov = np.cov(PLANE, rowvar=False)
    cov *= 2 / np.trace(cov)
    np.testing.assert_allclose(root @ root, 0.7 * cov + 0.3 * np.eye(2), atol=1e-12)
    spherical, _ = regularized_sqrt(PLANE, 0.0)
    for x in (0, 2):
        counts = sample_counts(m, x)
        check_law(counts, mahalanobis_law_2d(x, 1.2, root), mahalanobis_law_2d(x, 1.2, spherical))


def test_mahalanobis_guarantee(plane):
    m = Mahalanobis(epsilon=1.2, lambd=0.7, embeddings=plane, stop_words=None).fit()
    root, inv = regularized_sqrt(PLANE, 0.7)
    assert m.log_ratio_bound(0, 1) == pytest.approx(1.2 * np.linalg.norm((PLANE[0] - PLANE[1]) @ inv))
    check_guarantee(m, lambda x: mahalanobis_law_2d(x, 1.2, root, grid=700), [(0, 1), (1, 2)], min_prob=1e-3, tol=0.02)
