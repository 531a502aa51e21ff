"""TopicDP core: sampler parameters, calibrations, mechanisms, metrics (no corpora needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from record_schema import validate_record
from scipy import stats

from textdp._rng import make_rng
from textdp.accounting.gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
    mvg_precision_budget,
    thesis_gaussian_sigma,
)
from textdp.errors import ParameterError, ParameterTypeError
from textdp.guarantees import GUARANTEE_KEYS, Guarantee
from textdp.mechanisms import ReleaseContext, get, names
from textdp.topics import (
    MECHANISMS,
    GaussianNoise,
    LaplaceNoise,
    MatrixGaussianNoise,
    TopicGuarantee,
    TopicMatrix,
    TopicRelease,
    UserCorpus,
    align_topics,
    extract_topic_matrix,
    kendall_tau_distance,
    keyword_rank_distance,
    l1_distance,
    postprocess,
    rmse,
    row_euclidean_distance,
    sampler_parameters,
    topic_matrix_distance,
)
from textdp.topics.family import TopicDP, TopicDPLaplace, TopicDPThesis, TopicsMechanism

# --- sensitivity sampler parameters (Rubinstein & Alda 2017) -----------------------


@pytest.mark.parametrize(
    ("gamma", "m", "k"),
    [(0.1, 285, 285), (0.02, 9498, 9498), (0.05, 1305, 1305), (0.07, 625, 625),
     (0.12, 190, 190), (0.17, 87, 87), (0.22, 49, 49), (0.3, 24, 24)],
)
def test_sampler_sizes(gamma: float, m: int, k: int) -> None:
    p = sampler_parameters(gamma)
    assert (p.n_samples, p.order_statistic) == (m, k)


def test_sampler_rho_solves_lambert_equation() -> None:
    # rho = exp(W_-1(-g/(2 sqrt e)) + 1/2)  <=>  w e^w = -g/(2 sqrt e) with w = ln rho - 1/2
    for g in (0.02, 0.1, 0.22):
        p = sampler_parameters(g)
        w = math.log(p.rho) - 0.5
        assert w * math.exp(w) == pytest.approx(-g / (2 * math.sqrt(math.e)), rel=1e-10)
        assert w <= -1  # lower branch
        assert p.rho < g
        assert p.gamma_lo == pytest.approx(p.rho + math.sqrt(math.log(1 / p.rho) / (2 * p.n_samples)))
        assert p.order_statistic == math.ceil(p.n_samples * (1 - g + p.gamma_lo))


@pytest.mark.parametrize("bad", [0, 0.5, 1, -0.1])
def test_sampler_rejects_bad_gamma(bad: float) -> None:
    with pytest.raises(ParameterError):
        sampler_parameters(bad)


# --- Gaussian calibration ------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-4, 1e-6])
@pytest.mark.parametrize("sens", [0.05, 1.0])
def test_analytic_sigma_meets_and_is_tight(eps: float, delta: float, sens: float) -> None:
    s = analytic_gaussian_sigma(eps, delta, sens)
    # Balle & Wang (2018) Thm 8: Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta
    a, b = sens / (2 * s), eps * s / sens
    lhs = stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)
    assert lhs <= delta * (1 + 1e-9)
    assert gaussian_delta(s, eps, sens) <= delta
    assert gaussian_delta(s * (1 - 1e-6), eps, sens) > delta * (1 - 1e-4)  # (nearly) the smallest such sigma
    assert s / sens == pytest.approx(analytic_gaussian_sigma(eps, delta, 1.0), rel=1e-9)  # scales with sensitivity


def test_classic_sigma_is_not_valid_for_large_epsilon() -> None:
    # the reason for the analytic calibration: classic sigma under-noises at eps = 10
    s = classic_gaussian_sigma(10.0, 1e-4, 1.0)
    assert gaussian_delta(s, 10.0, 1.0) > 1e-4
    # and is valid (but loose) for eps < 1
    s = classic_gaussian_sigma(0.5, 1e-4, 1.0)
    assert gaussian_delta(s, 0.5, 1.0) <= 1e-4
    assert analytic_gaussian_sigma(0.5, 1e-4, 1.0) < s


def test_thesis_calibration_split_budget() -> None:
    s = thesis_gaussian_sigma(3.0, 1e-4, 0.2, 10, 10)
    assert s == pytest.approx(0.2 * math.sqrt(2 * math.log(1.25e4)) * 100 / 3)
    mech = GaussianNoise(epsilon=3, delta=1e-4, sensitivity=0.2, calibration="thesis")
    # the thesis's sigma, computed for the sensitivity of the grid-rounded matrix
    assert mech.sigma((10, 10)) == pytest.approx(thesis_gaussian_sigma(3.0, 1e-4, 0.2 + 2**-20 * 10, 10, 10),
                                                 rel=1e-9)
    g = TopicDPThesis(epsilon=3, delta=1e-4, sensitivity=0.2, gamma=0.1).guarantee(ReleaseContext(shape=(10, 10)))
    assert g.mechanism == "topicdp-thesis" and g.delta == 1e-4
    assert mech.proven_delta((10, 10)) < 1e-100  # CKS20's zCDP bound for this (huge) noise
    assert "composes to (3, 0.01)" in g.statement  # the thesis's own argument, reported


@pytest.mark.parametrize("calibration", ["analytic", "thesis"])
def test_gaussian_noise_statistics(calibration: str) -> None:
    mech = GaussianNoise(epsilon=2.0, delta=1e-5, sensitivity=0.3, calibration=calibration)
    shape = (20, 25)
    sigma = mech.sigma(shape)
    base = np.full(shape, 0.1)
    snapped = np.rint(base / mech.grid) * mech.grid
    gen = make_rng(5)
    noise = np.stack([mech.randomize(base, seed=gen) - snapped for _ in range(40)]).ravel()  # 20,000 draws
    n = noise.size
    assert abs(noise.mean()) < 5 * sigma / math.sqrt(n)
    assert noise.std(ddof=1) == pytest.approx(sigma, rel=5 * math.sqrt(2 / n))
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-4
    assert stats.kstest(noise / (1.1 * sigma), "norm").pvalue < 1e-6  # a wrong sigma fails the same test


def test_discrete_calibration_meets_delta_via_zcdp() -> None:
    from textdp.samplers import zcdp_delta

    for eps in (0.5, 3.0, 10.0):
        mech = GaussianNoise(epsilon=eps, delta=1e-4, sensitivity=0.33)
        shape = (10, 10)
        d_grid = (0.33 + 2**-20 * 10) / mech.grid  # sensitivity of the rounded matrix, grid units
        rho = d_grid**2 / (2 * float(mech.grid_variance(shape)))
        assert zcdp_delta(rho, eps) <= 1e-4
        # the noise is somewhat above the continuous analytic Gaussian's (which is not assumed to hold)
        assert 1.0 < mech.sigma(shape) / analytic_gaussian_sigma(eps, 1e-4, 0.33) < 1.15


def test_laplace_baseline_statistics_and_sensitivity() -> None:
    mech = LaplaceNoise(epsilon=4.0, m=10)
    assert mech.sensitivity == 20.0 and mech.scale == 5.0
    grid_scale = float(mech.grid_scale((10, 10))) * mech.grid
    assert grid_scale == pytest.approx((20 + 2**-20 * 100) / 4.0, rel=1e-9) and grid_scale >= 5.0
    base = np.zeros((10, 10))
    gen = make_rng(6)
    noise = np.stack([mech.randomize(base, seed=gen) for _ in range(200)]).ravel()
    assert abs(noise.mean()) < 5 * math.sqrt(2) * 5.0 / math.sqrt(noise.size)
    assert noise.var() == pytest.approx(2 * 25.0, rel=0.05)
    assert stats.kstest(noise / grid_scale, "laplace").pvalue > 1e-4
    assert stats.kstest(noise / (1.1 * grid_scale), "laplace").pvalue < 1e-6
    with pytest.raises(ParameterError):
        mech.randomize(np.zeros((3, 10)), seed=1)


def test_laplace_l1_bound_holds_for_probability_rows() -> None:
    gen = make_rng(7)
    for _ in range(200):
        a = gen.dirichlet(np.ones(30), size=4)
        b = gen.dirichlet(np.ones(30), size=4)
        ta = np.sort(a, axis=1)[:, ::-1][:, :5]
        tb = np.sort(b, axis=1)[:, ::-1][:, :5]
        assert np.abs(ta - tb).sum() <= 2 * 4


# --- MVG ------------------------------------------------------------------------------


def test_mvg_bound_hand_computed_1x1() -> None:
    # m = n = r = 1, delta = e^-1, gamma = s2 = 1, eps = 1:
    # zeta = 2 sqrt(1) + 2 + 1 = 5 ; H_1 = H_{1,1/2} = 1 ; alpha = 2 + 2 = 4 ; beta = 2 * 1 * 1 * 1 * 5 = 10
    # bound = (-10 + sqrt(100 + 32))^2 / (4 * 16) = (sqrt(132) - 10)^2 / 64
    expected = (math.sqrt(132) - 10) ** 2 / 64
    assert mvg_precision_budget(1.0, math.exp(-1), 1.0, 1.0, 1, 1) == pytest.approx(expected, rel=1e-12)


def test_mvg_bound_hand_computed_2x3() -> None:
    eps, delta, s2, g, m, n = 2.0, 1e-3, 0.5, 1.5, 2, 3
    r = 2
    hr, hh = 1 + 1 / 2, 1 + 1 / math.sqrt(2)
    zeta = 2 * math.sqrt(-6 * math.log(delta)) - 2 * math.log(delta) + 6
    alpha = (hr + hh) * g**2 + 2 * hr * g * s2
    beta = 2 * 6**0.25 * hr * s2 * zeta
    expected = (-beta + math.sqrt(beta**2 + 8 * alpha * eps)) ** 2 / (4 * alpha**2)
    assert r == min(m, n)
    assert mvg_precision_budget(eps, delta, s2, g, m, n) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("covariance", ["isotropic", "directional"])
def test_mvg_covariance_meets_sufficient_condition(covariance: str) -> None:
    mech = MatrixGaussianNoise(epsilon=3.0, delta=1e-4, sensitivity=0.2, covariance=covariance)
    shape = (10, 10)
    var = mech.column_variances(shape)
    # Sigma = I_m, Psi = diag(var): ||sigma(Sigma^-1)||_2 ||sigma(Psi^-1)||_2 == budget
    lhs = math.sqrt(shape[0]) * float(np.linalg.norm(1 / var))
    assert lhs == pytest.approx(mech.budget(shape), rel=1e-9)
    assert mech.budget(shape) == mvg_precision_budget(3.0, 1e-4, 0.2 + 2**-20 * 10, math.sqrt(10), 10, 10)
    if covariance == "directional":
        assert np.all(np.diff(var) > 0)  # more precision on top-ranked keyword positions
    big = (4000, 10)  # one tall release: 4,000 draws per column
    z = mech.randomize(np.zeros(big), seed=make_rng(8))
    assert z.var(axis=0) == pytest.approx(mech.column_variances(big), rel=0.1)
    assert np.all(z / mech.grid == np.rint(z / mech.grid))
    assert stats.kstest(z[:, 0] / math.sqrt(mech.column_variances(big)[0]), "norm").pvalue > 1e-4
    # the discretised MVG is proven with CKS20 (checked), not with the continuous MVG theorem
    g = get(f"mvg{'-directional' if covariance == 'directional' else ''}", epsilon=3.0, delta=1e-4, sensitivity=0.2,
            gamma=0.1).guarantee(ReleaseContext(shape=shape))
    assert mech.proven_delta(shape) <= 1e-4 and "CKS20" in g.statement


# --- post-processing, release record ------------------------------------------------------


def test_postprocess_bounds() -> None:
    out = postprocess(make_rng(9).normal(0.2, 1.0, size=(30, 8)))
    assert out.min() >= 0 and out.max() <= 1
    assert np.all(out.sum(axis=1) <= 1 + 1e-12)


PRIVATE_KEYS = {"sensitivity", "sensitivity_kind", "sigma", "noise_sigma", "corpus_users", "per_db_users",
                "n_users", "n_docs", "seconds", "fit_seconds", "cache_hit", "samples", "corpus", "path"}


def test_release_record_is_frozen_and_holds_only_public_fields() -> None:
    tm = TopicMatrix(np.array([[0.4, 0.2], [0.3, 0.1]]), (("a", "b"), ("c", "d")), (0, 1))
    sens = 0.123456789
    mech = TopicDP(epsilon=3, delta=1e-4, sensitivity=sens, gamma=0.1, seed=3)
    rel = mech.privatize(tm)
    d = validate_record(rel.to_record())  # the one record layout
    for key in ("guarantee", "keywords", "matrix", "raw_matrix", "seeded"):
        assert key in d
    assert {"gamma", "grid", "keyword_note"} <= set(d["guarantee"]["parameters"])
    assert set(GUARANTEE_KEYS) <= set(rel.guarantee.to_dict())
    assert not PRIVATE_KEYS & set(d) and not PRIVATE_KEYS & set(d["guarantee"]["parameters"])
    assert set(TopicRelease.__dataclass_fields__) == {"id", "guarantee", "seeded", "release", "content", "units",
                                                      "keywords", "raw_matrix"}
    text = repr(d) + repr(rel)
    for secret in (sens, mech.noise((2, 2)).sigma((2, 2))):  # neither the sensitivity nor sigma (which reveals it)
        assert f"{secret:.6g}" not in text and repr(secret) not in text
    assert "random differential privacy" in rel.guarantee.statement and "NOT covered" in rel.keyword_note
    assert rel.seeded is True and mech.set_params(seed=None).fit().privatize(tm).seeded is False
    with pytest.raises(AttributeError):
        rel.guarantee.epsilon = 5  # type: ignore[misc]


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_mechanism_has_a_frozen_guarantee_object_and_releases_on_the_grid(name: str) -> None:
    cls = type(get(name, epsilon=1.0))
    l2 = {"sensitivity": 0.2, "gamma": 0.1} if cls.takes_sensitivity else {"topics": 3} if cls.takes_corpus else {}
    mech = get(name, epsilon=2.0, delta=1e-4, grid=2.0**-16, seed=2, **l2)
    g = mech.guarantee(ReleaseContext(shape=(3, 4)))
    assert isinstance(g, TopicGuarantee) and isinstance(g, Guarantee)
    assert g.mechanism == name and g.unit == "user" and g.epsilon == 2.0
    assert set(GUARANTEE_KEYS) <= set(g.to_dict()) and g.to_dict()["statement"] == g.statement
    assert "Not covered" in g.statement or "not covered" in g.statement.lower()
    with pytest.raises(AttributeError):
        g.delta = 0.5  # type: ignore[misc]
    true = make_rng(1).dirichlet(np.ones(40), size=3)[:, :4]
    tm = TopicMatrix(true, tuple(("w",) * 4 for _ in range(3)), (0, 1, 2))
    if cls.takes_corpus:  # its unit is the user corpus over a public vocabulary (here 4 words)
        tm = UserCorpus.from_texts(["a b c d a", "b c d", "c a b d b", "a d"], ["u", "v", "w", "u"],
                                   vocabulary=["a", "b", "c", "d"])
    rel = mech.privatize(tm)
    raw = np.array(rel.raw_matrix)
    k = raw / rel.grid
    assert np.all(k == np.rint(k))  # every released value is an exact multiple of the public grid
    assert rel.grid == 2.0**-16 and rel.to_record()["guarantee"]["parameters"]["grid"] == 2.0**-16


def test_the_family_is_the_registry_and_chooses_its_noise_by_class() -> None:
    assert MECHANISMS == names("topics")
    for name in MECHANISMS:
        cls = type(get(name, epsilon=1.0))
        assert issubclass(cls, TopicsMechanism) and cls.name == name and cls.label
    laplace = TopicDPLaplace(epsilon=2).fit()
    assert not laplace.takes_sensitivity and laplace.noise((3, 4)).sensitivity == 6.0
    assert isinstance(laplace.noise((3, 4)), LaplaceNoise)
    assert TopicDPThesis(epsilon=1, delta=1e-4, sensitivity=0.1).fit().noise((2, 2)).calibration == "thesis"
    with pytest.raises(ParameterError, match="needs a sensitivity"):
        get("topicdp", epsilon=2, delta=1e-4).fit()
    with pytest.raises(ParameterError, match="choose one of"):
        get("gauss", epsilon=2, delta=1e-4, sensitivity=0.1)
    with pytest.raises(ParameterError, match="takes no sensitivity"):
        get("topicdp-laplace", epsilon=2, sensitivity=0.1).fit()
    plain = get("topicdp", epsilon=2, delta=1e-4, sensitivity=0.1).guarantee(ReleaseContext(shape=(3, 3)))
    assert plain.gamma is None and "vouches" in plain.statement  # supplied: plain DP


def test_the_old_second_api_is_gone() -> None:
    import importlib

    import textdp.topics as topics

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("textdp.topics.mechanisms")
    for old in ("build_mechanism", "release_topics", "TopicMechanism", "TopicDPGaussian", "LaplaceBaseline",
                "MVGMechanism"):
        assert not hasattr(topics, old), old


def test_parameter_checks() -> None:
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=0, delta=1e-4, sensitivity=0.1)
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=1, delta=1.5, sensitivity=0.1)
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=1, delta=1e-4, sensitivity=-1)
    with pytest.raises(ParameterTypeError):
        GaussianNoise(epsilon=1, delta=1e-4, sensitivity="big")
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=1, delta=1e-4, sensitivity=0.1, calibration="x")
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=1, delta=1e-4, sensitivity=0.1, grid=0.001)
    with pytest.raises(ParameterError):
        MatrixGaussianNoise(epsilon=1, delta=1e-4, sensitivity=0.1, covariance="diagonal")
    with pytest.raises(ParameterError):
        LaplaceNoise(epsilon=1, m=0)
    with pytest.raises(ParameterError):
        GaussianNoise(epsilon=1, delta=1e-4, sensitivity=0.1).randomize(np.zeros(3))


def test_noise_uses_generator_not_global_state() -> None:
    mech = GaussianNoise(epsilon=1, delta=1e-4, sensitivity=0.1)
    a = mech.randomize(np.zeros((2, 2)), seed=11)
    b = mech.randomize(np.zeros((2, 2)), seed=11)
    c = mech.randomize(np.zeros((2, 2)))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# --- metrics ---------------------------------------------------------------------------


def test_kendall_identical_and_reversed() -> None:
    rng = make_rng(10)
    for n in (2, 5, 10, 37):
        x = rng.permutation(n).astype(float)
        assert kendall_tau_distance(x, x) == 0.0
        assert kendall_tau_distance(x, -x) == 1.0
        y = rng.permutation(n).astype(float)
        tau = stats.kendalltau(x, y).statistic
        assert kendall_tau_distance(x, y) == pytest.approx((1 - tau) / 2)
    w = np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1]])
    assert keyword_rank_distance(w, w) == 0.0
    assert keyword_rank_distance(w, w[:, ::-1]) == 1.0


def test_distance_metrics() -> None:
    a = np.array([[0.5, 0.5], [0.2, 0.0]])
    b = np.array([[0.2, 0.9], [0.2, 0.0]])
    assert l1_distance(a, b) == pytest.approx(0.7)
    assert row_euclidean_distance(a, b) == pytest.approx(0.5)
    assert rmse(a, b) == pytest.approx(math.sqrt(0.25 / 4))
    with pytest.raises(ParameterError):
        l1_distance(a, b[:1])


# --- topic-matrix geometry ----------------------------------------------------------------


def test_extract_and_align() -> None:
    rng = make_rng(12)
    tw = rng.dirichlet(np.full(50, 0.1), size=6)
    prev = rng.dirichlet(np.ones(6))
    vocab = [f"w{i}" for i in range(50)]
    tm = extract_topic_matrix(tw, prev, vocab, 4, 5)
    assert tm.shape == (4, 5)
    assert np.all(tm.matrix.sum(axis=1) <= 1 + 1e-12)
    assert np.all(np.diff(tm.matrix, axis=1) <= 0)
    assert tm.topic_ids[0] == int(np.argmax(prev))
    perm = rng.permutation(6)
    shuffled = tw[perm]
    p = align_topics(tw, shuffled)
    assert np.array_equal(shuffled[p], tw)
    # permuting the topics of the neighbour does not change the distance
    assert topic_matrix_distance(tw, prev, shuffled, [(4, 5), (6, 10)]).tolist() == [0.0, 0.0]


def test_distance_charges_keyword_swaps() -> None:
    a = np.array([[0.5, 0.3, 0.2, 0.0], [0.0, 0.0, 0.1, 0.9]])
    b = np.array([[0.5, 0.2, 0.3, 0.0], [0.0, 0.0, 0.1, 0.9]])
    prev = np.array([0.5, 0.5])
    d = topic_matrix_distance(a, prev, b, [(2, 2)])[0]
    # top-2 of row 0: {w0, w1} vs {w0, w2}: w1 contributes 0.3, w2 contributes 0.3
    assert d == pytest.approx(math.sqrt(0.3**2 + 0.3**2))
