"""The empirical privacy auditor: sound bounds, correct mechanisms pass, broken ones are flagged.

Every broken variant below is a deliberately wrong law (too little noise for the claim). The same
test that passes the real mechanism must flag it. Seeds make every audit deterministic.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from textdp.accounting.gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)
from textdp.audit import (
    AuditCase,
    AuditResult,
    audit,
    audit_case,
    audit_case_names,
    clopper_pearson,
    register_audit_case,
    run_audit,
)
from textdp.audit import registry as audit_registry
from textdp.audit.topic_cases import TOPIC_SENSITIVITY, l1_matrix_case, matrix_case
from textdp.audit.word_cases import choose_word_pair, word_pair_case
from textdp.cli import app
from textdp.errors import ParameterError, TextDPError
from textdp.mechanisms.laplace import laplace_noise
from textdp.topics.noise import (
    GaussianNoise,
    MatrixGaussianNoise,
)

JSON_KEYS = {"mechanism", "claimed_epsilon", "claimed_delta", "estimated_epsilon", "lower_bound", "samples",
             "events", "passed", "seeded", "pair", "curve", "conformance", "privacy_passed"}


def randomized_response(epsilon: float) -> AuditCase:
    p = math.exp(epsilon) / (1 + math.exp(epsilon))

    def sample(bit: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(n) < p, bit, 1 - bit)

    return AuditCase("randomized-response", "bit 0 vs bit 1", 0, 1, sample, claimed_epsilon=epsilon)


# -- the estimator ---------------------------------------------------------------------------------
def test_clopper_pearson_matches_scipy_exact_interval():
    n = 137
    for k in (0, 1, 17, 136, 137):
        lo, hi = clopper_pearson(np.array([k]), n, 0.025)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert lo[0] == pytest.approx(ci.low, abs=1e-12)
        assert hi[0] == pytest.approx(ci.high, abs=1e-12)


def test_randomized_response_is_tight_and_half_claim_fails():
    r = run_audit(randomized_response(1.0), samples=40_000, seed=5)
    assert r.passed and 0.85 < r.lower_bound <= 1.0 and abs(r.estimated_epsilon - 1.0) < 0.1
    # the same outputs judged against a claim of 0.7 are a violation
    lying = AuditCase("rr", "bit 0 vs bit 1", 0, 1, randomized_response(1.0).sample, claimed_epsilon=0.7)
    assert not run_audit(lying, samples=40_000, seed=5).passed


def test_lower_bound_is_sound_across_seeds():
    # a correct mechanism at its exact epsilon: the 95% bound may exceed it in <= 5% of audits
    flagged = sum(not run_audit(randomized_response(0.5), samples=4_000, seed=s).passed for s in range(40))
    assert flagged <= 5


def test_delta_is_subtracted():
    # an event of probability 0.01 from a that never happens from b: pure DP fails, delta = 0.02 covers it
    def sample(x: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(n) < 0.01 * x, 2, rng.integers(0, 2, n))

    pure = AuditCase("leak", "x=1 vs x=0", 1, 0, sample, claimed_epsilon=1.0)
    assert not run_audit(pure, samples=40_000, seed=1).passed
    approx = AuditCase("leak", "x=1 vs x=0", 1, 0, sample, claimed_epsilon=1.0, claimed_delta=0.02)
    r = run_audit(approx, samples=40_000, seed=1)
    assert r.passed and r.claimed_delta == 0.02


def test_result_json_fields_and_determinism():
    a = audit("laplace", epsilon=1.0, samples=500, seed=11)
    b = audit("laplace", epsilon=1.0, samples=500, seed=11)
    assert isinstance(a, AuditResult) and a.to_dict() == b.to_dict()
    d = a.to_dict()
    assert set(d) == JSON_KEYS and d["seeded"] is True and d["samples"] == 500
    json.dumps(d, allow_nan=False)
    assert audit("laplace", epsilon=1.0, samples=200).seeded is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.passed = False  # type: ignore[misc]


def test_infinite_estimate_is_null_in_json():
    def sample(x: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, x)

    r = run_audit(AuditCase("identity", "0 vs 1", 0, 1, sample, claimed_epsilon=1.0), samples=1_000, seed=0)
    assert math.isinf(r.estimated_epsilon) and r.to_dict()["estimated_epsilon"] is None and not r.passed


@pytest.mark.parametrize("bad", [{"samples": 10}, {"samples": 10**9}, {"confidence": 1.0}])
def test_bad_audit_parameters(bad):
    with pytest.raises(TextDPError):
        run_audit(randomized_response(1.0), **{"samples": 1_000, **bad})


def test_registry():
    assert {"earth-movers", "earth-movers-noise", "topicdp", "laplace", "mvg"} <= set(audit_case_names())
    with pytest.raises(ParameterError, match="no audit case"):
        audit_case("no-such-mechanism")
    with pytest.raises(ParameterError, match="already registered"):
        register_audit_case("laplace", lambda **kw: randomized_response(1.0))
    with pytest.raises(ParameterError, match="delta does not apply"):
        audit_case("laplace", delta=0.1)


# -- Laplace baseline (pure epsilon-DP, L1 sensitivity 2m) ---------------------------------------------
class ScaledLaplace:
    """Lap(2m / epsilon * factor) per entry: factor 1 is the correct law, < 1 is broken."""

    def __init__(self, epsilon: float, m: int, factor: float) -> None:
        self.scale = 2.0 * m / epsilon * factor

    def randomize(self, matrix: np.ndarray, seed: np.random.Generator) -> np.ndarray:
        return matrix + seed.laplace(0.0, self.scale, size=np.shape(matrix))


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_laplace_baseline_passes(epsilon):
    # 10^4 releases per input through privatize_batch (about a second since a batch's noise is one draw; at 3,000 the
    # bound exceeded epsilon/2 for only ~60 % of seeds at epsilon 0.5, at 10^4 for 10 of 10)
    r = audit("laplace", epsilon=epsilon, samples=10_000, seed=1)
    assert r.passed and r.lower_bound > 0.5 * epsilon  # the pair and statistic are tight


@pytest.mark.parametrize(("factor", "flagged"), [(1.0, False), (0.5, True), (0.25, True)])
def test_broken_laplace_is_flagged(factor, flagged):
    case = l1_matrix_case("laplace-broken", ScaledLaplace(1.0, 1, factor), claimed_epsilon=1.0)
    assert run_audit(case, samples=20_000, seed=2).passed is not flagged


# -- TopicDP Gaussian ((epsilon, delta), analytic calibration) -------------------------------------------
def test_topicdp_gaussian_passes():
    r = audit("topicdp", epsilon=3.0, delta=1e-4, samples=3_000, seed=3)
    assert r.passed and r.claimed_delta == 1e-4 and r.curve is not None and r.curve.passed


def test_topicdp_sensitivity_underestimated_twice_is_flagged():
    # the mechanism is calibrated for half the true sensitivity: sigma is halved
    mech = GaussianNoise(epsilon=3.0, delta=1e-4, sensitivity=TOPIC_SENSITIVITY / 2)
    from textdp.audit.accountant import analytic_gaussian_sigma, rounded_l2

    least = analytic_gaussian_sigma(3.0, 1e-4, rounded_l2(TOPIC_SENSITIVITY, 2.0**-20, 4))
    case = matrix_case("topicdp-broken", mech, sensitivity=TOPIC_SENSITIVITY, claimed_epsilon=3.0,
                       claimed_delta=1e-4, noise_variance=least**2)
    r = run_audit(case, samples=3_000, seed=3)  # the curve flags it (the event test needed 2 x 10^4 releases)
    assert not r.passed and not r.curve.passed


def gaussian_case(sigma: float, epsilon: float, delta: float) -> AuditCase:
    a, b = np.array([0.0]), np.array([1.0])
    return AuditCase("gaussian", "0 vs 1 (sensitivity 1)", a, b,
                     lambda x, n, rng: x + rng.normal(0.0, sigma, (n, 1)),
                     claimed_epsilon=epsilon, claimed_delta=delta, events="histogram")


def test_classic_gaussian_at_large_epsilon_is_flagged():
    # Dwork & Roth's sigma is proven only for epsilon < 1; at (8, 0.2) it is too small and the
    # analytic sigma (Balle & Wang) is not
    eps, delta = 8.0, 0.2
    classic = run_audit(gaussian_case(classic_gaussian_sigma(eps, delta, 1.0), eps, delta), samples=1_000_000, seed=4)
    analytic = run_audit(gaussian_case(analytic_gaussian_sigma(eps, delta, 1.0), eps, delta), samples=1_000_000, seed=4)
    assert not classic.passed and analytic.passed


# -- MVG ---------------------------------------------------------------------------------------------------
class PrecisionAsVariance:
    """MVG with the bug 'precision used as variance' (sd = 1/sqrt(variance))."""

    def __init__(self, mech: MatrixGaussianNoise) -> None:
        self.mech = mech

    def randomize(self, matrix: np.ndarray, seed: np.random.Generator) -> np.ndarray:
        sd = 1.0 / np.sqrt(self.mech.column_variances(matrix.shape))
        return matrix + seed.standard_normal(matrix.shape) * sd[None, :]


def test_mvg_passes_and_precision_bug_is_flagged():
    assert audit("mvg", epsilon=1.0, delta=1e-4, samples=1_000, seed=5).passed
    mech = MatrixGaussianNoise(epsilon=1.0, delta=1e-4, sensitivity=TOPIC_SENSITIVITY)
    case = matrix_case("mvg-broken", PrecisionAsVariance(mech), sensitivity=TOPIC_SENSITIVITY,
                       claimed_epsilon=1.0, claimed_delta=1e-4)
    assert not run_audit(case, samples=10_000, seed=5).passed


# -- Earth Mover's privacy on real GloVe ----------------------------------------------------------------
@pytest.fixture(scope="module")
def glove5k(glove):
    return glove.restrict(top_k=5_000)


def test_word_pair_choice(glove5k):
    pair, d = choose_word_pair(glove5k, 10.0)
    assert pair == ("monday", "tuesday") and 0.3 < d < 0.4
    assert choose_word_pair(glove5k, 1.0)[0] == ("city", "town")
    with pytest.raises(ParameterError, match="not in the vocabulary"):
        choose_word_pair(glove5k, 1.0, pair=("monday", "zzzzqx"))


def _decoded(glove5k, noise):
    from textdp.embeddings import ExactDecoder

    vec = glove5k.vectors
    dec = ExactDecoder(vec)

    def privatize(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        z = vec[ids.reshape(-1)].astype(np.float64) + noise(ids.size, rng)
        return np.sort(dec.decode(z).reshape(ids.shape), axis=-1)

    return privatize


def test_earth_movers_passes_and_one_dimensional_radius_is_flagged(glove5k):
    r = audit("earth-movers", epsilon=10.0, samples=10_000, seed=6)
    assert r.passed and "monday" in r.pair and r.claimed_epsilon == pytest.approx(3.5136, abs=1e-3)
    # bug: radius ~ Gamma(1, 1/eps) (a 1-D Laplace radius) instead of Gamma(n, 1/eps)
    broken = word_pair_case("em-broken", _decoded(glove5k, lambda k, rng: laplace_noise(k, 50, 10.0, rng) / 50),
                            glove5k, 10.0)
    assert not run_audit(broken, samples=10_000, seed=6).passed


@pytest.mark.parametrize(
    ("label", "noise", "flagged"),
    [
        ("correct", lambda k, rng: laplace_noise(k, 50, 10.0, rng), False),
        ("scale / 4", lambda k, rng: laplace_noise(k, 50, 40.0, rng), True),
        ("coordinate-wise Laplace", lambda k, rng: rng.laplace(0.0, 0.1, (k, 50)), True),
    ],
)
def test_earth_movers_noise_sampler(glove5k, label, noise, flagged):
    vec = glove5k.vectors

    def noisy(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        base = vec[ids.reshape(-1)].astype(np.float64)
        return (base + noise(ids.size, rng)).reshape(ids.shape + (vec.shape[1],))

    case = word_pair_case("em-noise", noisy, glove5k, 10.0, observe="noise")
    assert run_audit(case, samples=100_000, seed=7).passed is not flagged, label


def test_word_pair_case_observes_words_or_noise_only(glove5k):
    def ids_out(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return ids

    words = word_pair_case("em", ids_out, glove5k, 10.0)
    noise = word_pair_case("em", ids_out, glove5k, 10.0, observe="noise")
    assert (words.events, words.chunk, words.curve) == ("discrete", 16_384, None)
    assert (noise.events, noise.chunk, noise.curve is not None) == ("histogram", 65_536, True)
    with pytest.raises(ParameterError, match="observe must be 'words' or 'noise'"):
        word_pair_case("em", ids_out, glove5k, 10.0, observe="vectors")  # type: ignore[arg-type]


def test_earth_movers_noise_registered_case_passes():
    r = audit("earth-movers-noise", epsilon=10.0, samples=50_000, seed=8)
    assert r.passed and r.lower_bound > 0.2 * r.claimed_epsilon


# -- the command line ------------------------------------------------------------------------------------
runner = CliRunner()


def test_cli_json_and_exit_codes(monkeypatch):
    res = runner.invoke(app, ["audit", "laplace", "-e", "1", "--samples", "5e2", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == JSON_KEYS and out["passed"] is True and out["samples"] == 500

    broken = l1_matrix_case("broken-laplace", ScaledLaplace(1.0, 1, 0.25), claimed_epsilon=1.0)
    monkeypatch.setitem(audit_registry._CASES, "broken-laplace",
                        audit_registry._Entry(lambda epsilon=None, delta=None: broken, "test"))
    res = runner.invoke(app, ["audit", "broken-laplace", "--samples", "4000", "--seed", "1"])
    assert res.exit_code == 1 and "VIOLATION" in res.stdout


@pytest.mark.parametrize(
    "args",
    [["audit", "nope"], ["audit"], ["audit", "laplace", "--delta", "0.1"], ["audit", "laplace", "-e", "1e300"],
     ["audit", "laplace", "-e", "-1"], ["audit", "laplace", "--samples", "12.5"], ["audit", "[/x]"],
     ["audit", "topicdp", "--delta", "2"], ["audit", "laplace", "--samples", "abc"]],
)
def test_cli_bad_input_exits_2_with_one_line(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert "Traceback" not in res.output


def test_cli_list():
    res = runner.invoke(app, ["audit", "--list", "--json"])
    assert res.exit_code == 0 and set(json.loads(res.stdout)) == set(audit_case_names())
    res = runner.invoke(app, ["audit", "--list"])
    assert res.exit_code == 0 and "earth-movers" in res.stdout


def test_no_event_beats_delta():
    # with delta close to 1 no event is likely enough: the bound is 0, the audit passes, nothing crashes
    r = run_audit(AuditCase("rr", "bit 0 vs bit 1", 0, 1, randomized_response(1.0).sample, claimed_epsilon=0.1,
                            claimed_delta=0.999), samples=1_000, seed=0)
    assert r.passed and r.lower_bound == 0.0 and r.estimated_epsilon == 0.0 and r.event.startswith("none")
    g = gaussian_case(1.0, 0.1, 0.999)
    assert run_audit(g, samples=1_000, seed=0).lower_bound == 0.0


def test_outputs_seen_only_in_the_evaluation_half_never_join_the_event():
    # a continuous output treated as discrete: every value is new, so no event can be formed
    def sample(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.random(n)

    r = run_audit(AuditCase("cont", "0 vs 0.5", 0.0, 0.5, sample, claimed_epsilon=0.1), samples=1_000, seed=0)
    assert r.lower_bound == 0.0  # the selected outputs never recur: no evidence
    assert r.events == 2 * 500  # only the 2 x 250 outputs of the ranking quarter, in both directions


def test_word_level_cases_take_the_mechanisms_own_parameters():
    """``--param`` builds the mechanism with its own parameters and computes the claim from them too."""
    import json as _json

    from textdp.audit.claims import word_claim
    from textdp.embeddings import load_embeddings

    res = runner.invoke(app, ["audit", "vickrey", "--param", "lambd=0.2", "--samples", "1e4", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = _json.loads(res.stdout)
    plain = audit_case("vickrey")
    emb = load_embeddings(vocab_size=5000)
    d_rm = word_claim("vickrey", 10.0, emb.vectors, plain.input_a, plain.input_b, lambd=0.2)
    assert out["claimed_epsilon"] == pytest.approx(d_rm) and d_rm != pytest.approx(plain.claimed_epsilon)
    assert out["passed"] and out["curve"]["passed"]
    for args, message in [(["laplace", "--param", "nope=0.5"], "takes grid as --param, not nope"),
                          (["earth-movers-noise", "--param", "size=2"], "takes no mechanism parameters"),
                          (["cmp", "--param", "epsilon=3"], "set epsilon with --epsilon"),
                          (["cmp", "--param", "nope=1"], "has no parameter 'nope'"),
                          (["cmp", "--param", "vocab_size=10"], "the audit sets vocab_size itself")]:
        res = runner.invoke(app, ["audit", *args, "--samples", "1e4", "--seed", "1"])
        assert res.exit_code == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.output
