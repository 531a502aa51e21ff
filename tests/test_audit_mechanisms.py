"""Every registered mechanism has an audit case; each correct one passes, deliberately broken ones fail.

The broken variants are real violations of the claim: their exact worst-case loss (from the
mechanism's own ``probabilities``) exceeds the correct mechanism's bound, and the same audit that
passes the correct mechanism must flag them. Audits are seeded (deterministic) and use CI sample
sizes (10^4 per word).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from textdp.audit import audit, audit_case, audit_case_names, run_audit
from textdp.audit.bag_cases import earth_movers_noise_case
from textdp.audit.word_level import (
    DEFAULT_EPSILON,
    choose_mechanism_pair,
    group_pair,
    mechanism_case,
)
from textdp.errors import ParameterError
from textdp.mechanisms import MECHANISM_NAMES, entry, get, noisy_vectors

SAMPLES = 10_000
#: obfuscate's names whose registry line names an audit case (a line saying None is NOT AUDITED, listed by --all)
AUDITED = tuple(n for n in MECHANISM_NAMES if entry(n).audit is not None)


def test_every_registered_mechanism_has_an_audit_case():
    # a mechanism whose registry line claims an audit case without one fails here
    missing = sorted(set(AUDITED) - set(audit_case_names()))
    assert not missing, f"declare its claim (docs/new-mechanism.md §audit) or write None in its line: {missing}"


@pytest.mark.parametrize("name", AUDITED)
def test_each_correct_mechanism_passes(name):
    r = audit(name, samples=SAMPLES, seed=11)
    assert r.passed, (name, r)
    assert r.mechanism == name and r.claimed_delta == 0.0 and 1.0 < r.claimed_epsilon < 6.0  # resolvable claims


@pytest.fixture(scope="module")
def glove5k(glove):
    return glove.restrict(top_k=5_000)


def test_claims_are_the_mechanisms_own_bounds(glove5k):
    emb = glove5k
    cmp = audit_case("cmp", epsilon=10.0)
    a, b = cmp.input_a, cmp.input_b
    d = float(np.linalg.norm(emb.vectors[a].astype(np.float64) - emb.vectors[b].astype(np.float64)))
    assert cmp.claimed_epsilon == pytest.approx(10.0 * d)  # metric DP: epsilon * d
    assert audit_case("random", epsilon=2.5).claimed_epsilon == pytest.approx(2.5)  # epsilon-DP per word
    cus = get("custext", epsilon=3.0, embeddings=emb, stop_words=None).fit()
    case = audit_case("custext")
    assert cus.groups_[case.input_a] == cus.groups_[case.input_b] and case.claimed_epsilon == 3.0
    plus = audit_case("santext+")
    first_sensitive = get("santext+", epsilon=2.0, embeddings=emb, stop_words=None).fit().first_sensitive_
    assert min(plus.input_a, plus.input_b) >= first_sensitive  # both words sensitive: every output protected
    with pytest.raises(ParameterError, match="delta does not apply"):
        audit_case("santext", delta=0.1)


def _exact_loss(mech, a: int, b: int) -> float:
    pa, pb = mech.probabilities(a), mech.probabilities(b)
    keep = (pa > 0) | (pb > 0)
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(pa[keep]) - np.log(pb[keep]))))


@pytest.mark.parametrize(
    ("name", "factor"),
    [("random", 2.0), ("custext", 2.0), ("santext", 3.0)],
)
def test_broken_word_mechanisms_are_flagged(glove5k, name, factor):
    """epsilon multiplied inside the sampler, the claim unchanged (SanText x2 would not be a violation:
    its exponent eps*d/2 leaves half of the claim to the normaliser, so x3 is the smallest clear bug)."""
    eps = DEFAULT_EPSILON[name]
    ok = get(name, epsilon=eps, embeddings=glove5k, stop_words=None).fit()
    bad = get(name, epsilon=eps * factor, embeddings=glove5k, stop_words=None).fit()
    pair = group_pair(glove5k, epsilon=eps) if name == "custext" else choose_mechanism_pair(name, eps, glove5k)
    a, b = (glove5k.index[w] for w in pair)
    claim = ok.log_ratio_bound(a, b)
    assert _exact_loss(ok, a, b) <= claim + 1e-9 < _exact_loss(bad, a, b)  # a real violation, not a tighter claim
    # the event audit alone (curve=False): the curve audit is tested in test_audit_curve.py
    correct = run_audit(mechanism_case(name, ok, pair, epsilon=eps, curve=False), samples=SAMPLES, seed=12)
    broken = run_audit(mechanism_case(f"{name}-broken", bad, pair, epsilon=eps, claim_name=name, curve=False),
                       samples=SAMPLES, seed=12)
    assert correct.passed and not broken.passed, (correct, broken)
    assert broken.claimed_epsilon == correct.claimed_epsilon == pytest.approx(claim)


def _half_scale(ids, vectors, epsilon, rng):
    return noisy_vectors(ids, vectors, 2.0 * epsilon, rng)  # noise scale 1/(2 eps): halved


def test_earth_movers_half_noise_scale_is_flagged_in_two_dimensions():
    ok = run_audit(earth_movers_noise_case(dim=2), samples=SAMPLES, seed=13)
    bad = run_audit(earth_movers_noise_case(dim=2, noisy=_half_scale), samples=SAMPLES, seed=13)
    assert ok.passed and ok.lower_bound > 0.8 * ok.claimed_epsilon  # the likelihood-ratio tails are tight in 2-d
    assert not bad.passed and bad.lower_bound > 1.5 * bad.claimed_epsilon
    assert audit("earth-movers-2d", samples=SAMPLES, seed=13).passed


def test_earth_movers_half_noise_in_fifty_dimensions_doubles_the_measured_loss():
    """In 50-d the likelihood-ratio tails show the halved scale as twice the correct sampler's loss, but
    not above eps*d (the loss concentrates at ~eps*d/sqrt(50)); the privacy curve flags it (issue 21)."""
    ok = run_audit(earth_movers_noise_case(), samples=50_000, seed=14)
    bad = run_audit(earth_movers_noise_case(noisy=_half_scale), samples=50_000, seed=14)
    assert ok.passed and bad.lower_bound > 1.7 * ok.lower_bound
    assert bad.lower_bound <= bad.claimed_epsilon and not bad.curve.passed and not bad.passed
    assert math.isclose(ok.claimed_epsilon, bad.claimed_epsilon)
