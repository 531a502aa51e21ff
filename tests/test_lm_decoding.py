"""The one decoding core: its law (χ² against the formula, a wrong law rejected), the factor 2, the refusals,
and that ER-AE's and AE-DP's steps run on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from textdp._rng import make_rng
from textdp.errors import ParameterError
from textdp.generation import decoding, sampling
from textdp.generation.decoding import (
    ClipBounds,
    clipped_log_weights,
    exponential_law,
    exponential_step,
    per_token_epsilon,
    quantile_bounds,
    refuse_truncation,
)

torch = pytest.importorskip("torch")

BOUNDS = ClipBounds(-2.0, 3.0)
SCORES = np.array([9.0, 2.5, 1.0, 0.0, -1.0, -7.0, 0.3, 2.9, -2.0, 1.7])


def _counts(method: str, n: int = 60_000, seed: int = 1, epsilon: float = 3.0) -> np.ndarray:
    s = torch.from_numpy(np.tile(SCORES, (n, 1)))
    ids = exponential_step(s, make_rng(seed), epsilon=epsilon, bounds=BOUNDS, method=method).numpy()
    return np.bincount(ids, minlength=SCORES.size)


@pytest.mark.parametrize("method", ["inverse-cdf", "gumbel"])
def test_sampling_law_matches_the_exponential_mechanism_and_a_wrong_law_is_rejected(method):
    counts = _counts(method)
    law = exponential_law(SCORES, epsilon=3.0, bounds=BOUNDS)
    assert chisquare(counts, law * counts.sum()).pvalue > 1e-3
    # wrong laws: no clipping (softmax(s / T)), and the factor 2 dropped (T = Δ/ε)
    unclipped = np.exp(SCORES * 3.0 / (2 * BOUNDS.width))
    for wrong in (unclipped / unclipped.sum(), exponential_law(SCORES, epsilon=6.0, bounds=BOUNDS)):
        assert chisquare(counts, wrong * counts.sum()).pvalue < 1e-6


def test_law_is_clipped_softmax_at_temperature_two_delta_over_epsilon():
    t = BOUNDS.temperature(3.0)
    assert t == pytest.approx(2 * 5.0 / 3.0) and per_token_epsilon(t, BOUNDS) == pytest.approx(3.0)
    clipped = np.clip(SCORES, -2.0, 3.0)
    expected = np.exp(clipped / t) / np.exp(clipped / t).sum()
    np.testing.assert_allclose(exponential_law(SCORES, epsilon=3.0, bounds=BOUNDS), expected, rtol=1e-12)


@pytest.mark.parametrize("vocab", [2, 50, 100_000])
def test_every_pair_is_within_e_epsilon_and_the_factor_two_is_needed(vocab):
    eps = 2.0
    a = np.full(vocab, BOUNDS.low)
    a[0] = BOUNDS.high
    b = np.full(vocab, BOUNDS.high)
    b[0] = BOUNDS.low
    ratio = exponential_law(a, epsilon=eps, bounds=BOUNDS)[0] / exponential_law(b, epsilon=eps, bounds=BOUNDS)[0]
    assert math.log(ratio) <= eps + 1e-9
    if vocab == 100_000:  # the bound is nearly attained: with T = Δ/ε the loss would be nearly 2ε
        assert math.log(ratio) > 0.99 * eps
        r1 = exponential_law(a, epsilon=2 * eps, bounds=BOUNDS)[0] / exponential_law(b, epsilon=2 * eps,
                                                                                      bounds=BOUNDS)[0]
        assert math.log(r1) > 1.9 * eps


def test_public_mask_nan_and_infinities():
    s = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0]]).repeat(2000, 1)
    allowed = torch.tensor([True, True, True, False])
    ids = exponential_step(s, make_rng(0), epsilon=1.0, bounds=BOUNDS, allowed=allowed).numpy()
    assert set(ids.tolist()) <= {0, 1, 2} and len(set(ids.tolist())) == 3
    lw = clipped_log_weights(s[:1], epsilon=1.0, bounds=BOUNDS, allowed=allowed)
    assert lw[0, 3] == -math.inf and float(lw[0, :3].min()) >= -0.5  # log-weights lie in [-ε/2, 0]


def test_randomness_is_the_numpy_generator_only():
    s = torch.from_numpy(np.tile(SCORES, (500, 1)))
    torch.manual_seed(1)
    state = torch.get_rng_state()
    a = exponential_step(s, make_rng(5), epsilon=3.0, bounds=BOUNDS, method="gumbel")
    assert torch.equal(torch.get_rng_state(), state)  # torch's global generator untouched
    torch.manual_seed(99)
    b = exponential_step(s, make_rng(5), epsilon=3.0, bounds=BOUNDS, method="gumbel")
    assert torch.equal(a, b)


def test_truncation_is_refused_with_one_line():
    for kw in ({"top_k": 50}, {"top_p": 0.9}):
        with pytest.raises(ParameterError, match="top-k/top-p sampling is refused") as exc:
            refuse_truncation(**kw)
        assert "\n" not in str(exc.value)
    refuse_truncation()


def test_bounds_validation_and_quantiles():
    for lo, hi in ((1.0, 1.0), (2.0, 1.0), (float("nan"), 1.0), (0.0, float("inf"))):
        with pytest.raises(ParameterError):
            ClipBounds(lo, hi)
    b = quantile_bounds(np.arange(1001.0), low_quantile=0.1, high_quantile=0.9, source="a public text")
    assert (b.low, b.high, b.procedure) == (100.0, 900.0, "public-quantiles") and "a public text" in b.source
    with pytest.raises(ParameterError):
        quantile_bounds([1.0])


def test_er_ae_and_ae_dp_run_on_the_core(monkeypatch):
    calls = []
    real = decoding.sample_log_weights

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sampling, "sample_log_weights", spy)
    logp = torch.log(torch.tensor([[0.6, 0.3, 0.1, 0.0]]).repeat(50, 1))
    sampling.em_step(logp, make_rng(0), epsilon=2.0)
    assert calls
    calls.clear()
    sampling.two_set_step(logp, make_rng(0), epsilon_set=1.0, epsilon_word=0.5, k=2)
    assert calls


def test_ae_dp_law_through_the_core_and_wrong_law_rejected():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    logp = torch.log(torch.from_numpy(np.tile(p, (40_000, 1))))
    counts = np.bincount(sampling.em_step(logp, make_rng(3), epsilon=4.0).numpy(), minlength=4)
    law = sampling.em_distribution(p, epsilon=4.0)
    np.testing.assert_allclose(law, exponential_law(p, epsilon=4.0, bounds=decoding.UNIT_BOUNDS), rtol=1e-12)
    assert chisquare(counts, law * counts.sum()).pvalue > 1e-3
    wrong = sampling.em_distribution(p, epsilon=8.0)
    assert chisquare(counts, wrong * counts.sum()).pvalue < 1e-6
