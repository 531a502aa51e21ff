"""``syntf-sentence`` and ``random-sentence`` are audited through their own sentence release path (issue 29).

Before, both were checked only through the document/word cases ``syntf`` and ``random`` (their registry lines
named those cases). Now each has a case of its own (audit/sentence_release.py) that fits the registered class on a
tiny model's vocabulary and samples ``privatize_batch`` on neighbouring sentences; the claim comes from the audit's
accountant and the law from audit/claims.py. The real code passes at a fixed seed; no noise or ε×3 planted in the
release primitive is flagged; each reference law is checked against the library's own sampler with a wrong law
rejected.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch")

from textdp._rng import make_rng
from textdp.audit import audit_case, run_audit
from textdp.audit.conformance import chi2_goodness_of_fit
from textdp.audit.sentence_release import (
    RANDOM_SENTENCE_DEFAULT_EPSILON,
    RANDOM_SENTENCE_PAIR,
    SYNTF_SENTENCE_DEFAULT_EPSILON,
    SYNTF_SENTENCE_PAIR,
    output_index,
    random_sentence_case,
    random_sentence_logp,
    syntf_sentence_case,
    syntf_sentence_logp,
)

SEED = 29
NAMES = ("syntf-sentence", "random-sentence")
WORDS = ("cat", "dog", "bird", "fox", "sat", "ran", "slept", "hid")


@pytest.fixture(scope="module")
def cases():
    return {"syntf-sentence": syntf_sentence_case(), "random-sentence": random_sentence_case()}


def _plant(monkeypatch, name, factor):
    """Plant an error in the release primitive the sentence mechanism calls (``factor`` None: no noise at all)."""
    import textdp.generation.rewriter as rewriter
    from textdp.mechanisms.exponential import RandomReplacement

    if name == "syntf-sentence":  # rewriter.py's bound syntf(counts, epsilon, size, rng)
        real = rewriter.syntf

        def planted(counts, eps, size, rng):
            if factor is None:  # the sentence's likeliest word, size times
                c = np.atleast_2d(counts)
                out = np.zeros(c.shape, dtype=np.int64)
                out[np.arange(len(c)), c.argmax(1)] = size
                return out
            return real(counts, factor * eps, size, rng)

        monkeypatch.setattr(rewriter, "syntf", planted)
        return

    def core(self, ids, rng):  # RandomReplacement's release primitive: the rate at factor * epsilon
        ids = np.asarray(ids, dtype=np.int64)
        if factor is None:
            return ids
        v = self.embeddings_.vocab_size
        rate = v / (v + math.expm1(factor * self.epsilon_))
        replace = rng.random(ids.size) < rate
        return np.where(replace, rng.integers(0, v, size=ids.size), ids)

    monkeypatch.setattr(RandomReplacement, "core", core)


def test_the_registry_points_the_sentence_mechanisms_at_their_own_cases():
    from textdp.mechanisms.registry import entry

    assert {n: entry(n).audit for n in ("ae-dp", *NAMES)} == {"ae-dp": "ae-dp", "syntf-sentence": "syntf-sentence",
                                                               "random-sentence": "random-sentence"}


@pytest.mark.parametrize("name", NAMES)
def test_the_registered_case_draws_through_privatize_batch(cases, monkeypatch, name):
    from textdp.mechanisms.base import Mechanism

    registered = audit_case(name)
    assert registered.mechanism == name and "privatize_batch" in registered.pair
    assert registered.curve is not None and registered.conformance is not None
    calls = []
    real = Mechanism.privatize_batch

    def spy(self, units, *args, **kwargs):
        units = list(units)
        calls.append((self.name, units[0], len(units)))
        return real(self, units, *args, **kwargs)

    monkeypatch.setattr(Mechanism, "privatize_batch", spy)
    case = cases[name]
    out = case.sample(case.input_a, 7, make_rng(0))
    assert out.shape == (7,) and calls == [(name, case.input_a, 7)]


def test_the_claims_come_from_the_accountant_not_the_mechanisms_statement(cases, monkeypatch):
    import textdp.generation.rewriter as rewriter

    assert cases["syntf-sentence"].claimed_epsilon == pytest.approx(SYNTF_SENTENCE_DEFAULT_EPSILON)  # per sentence
    assert cases["random-sentence"].claimed_epsilon == pytest.approx(2 * RANDOM_SENTENCE_DEFAULT_EPSILON)  # 2 tokens
    from textdp.audit.generation import tiny_model
    from textdp.mechanisms import get

    folder = str(tiny_model())
    stated = {n: get(n, epsilon=2.0, model=folder).fit().guarantee().epsilon for n in NAMES}
    # the mechanisms' own statements, tripled, move no claim
    for attr in ("syntf_guarantee", "random_r_guarantee"):
        real = getattr(rewriter, attr)
        monkeypatch.setattr(rewriter, attr, lambda name, eps, _real=real, **kw: _real(name, 3.0 * eps, **kw))
    for n in NAMES:
        assert get(n, epsilon=2.0, model=folder).fit().guarantee().epsilon == pytest.approx(3.0 * stated[n])
    assert syntf_sentence_case().claimed_epsilon == cases["syntf-sentence"].claimed_epsilon
    assert random_sentence_case().claimed_epsilon == cases["random-sentence"].claimed_epsilon


def test_the_laws_are_probability_tables_over_every_output():
    bags = syntf_sentence_logp(3.0, WORDS, "cat", 2)
    seqs = random_sentence_logp(2.0, WORDS, "cat sat")
    assert len(bags) == len(output_index(WORDS, 2, bags=True)) == 36 and math.isclose(np.exp(bags).sum(), 1.0)
    assert len(seqs) == len(output_index(WORDS, 2, bags=False)) == 64 and math.isclose(np.exp(seqs).sum(), 1.0)
    # randomised response: the input sequence is the likeliest, at e^(2 eps) times the one that changes both tokens
    a, b = random_sentence_logp(2.0, WORDS, RANDOM_SENTENCE_PAIR[0]), random_sentence_logp(2.0, WORDS, RANDOM_SENTENCE_PAIR[1])
    assert float(np.max(a - b)) == pytest.approx(4.0)


def test_the_bag_law_matches_the_librarys_syntf_and_rejects_a_wrong_law():
    """Bags drawn by the library's ``syntf`` against the multinomial law written here; ε×2 rejected."""
    from textdp.mechanisms.syntf import syntf

    index = output_index(WORDS, 2, bags=True)
    counts = np.zeros((40_000, len(WORDS)))
    counts[:, WORDS.index("dog")] = counts[:, WORDS.index("ran")] = 1.0
    bags = syntf(counts, 3.0, 2, make_rng(5))
    ids = np.array([index[tuple(WORDS[j] for j in np.repeat(np.arange(len(WORDS)), row))] for row in bags])
    assert chi2_goodness_of_fit(ids, np.exp(syntf_sentence_logp(3.0, WORDS, "dog ran", 2)))[1] > 1e-3
    assert chi2_goodness_of_fit(ids, np.exp(syntf_sentence_logp(6.0, WORDS, "dog ran", 2)))[1] < 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_the_real_release_passes_every_test_at_a_fixed_seed(cases, name):
    r = run_audit(cases[name], seed=SEED, conformance=True)
    assert r.passed and r.curve is not None and r.curve.passed and r.conformance.passed, r.to_dict()


@pytest.mark.parametrize("name", NAMES)
def test_the_released_outputs_reject_a_wrong_law(cases, name):
    """Conformance has power: the real release against the law at ε×2 (a wrong reference) is rejected."""
    case = cases[name]
    out = case.sample(case.input_a, 10_000, make_rng(SEED))
    right = case.conformance.table(case.input_a)
    if name == "syntf-sentence":
        wrong = syntf_sentence_logp(2 * SYNTF_SENTENCE_DEFAULT_EPSILON, WORDS, SYNTF_SENTENCE_PAIR[0], 2)
    else:
        wrong = random_sentence_logp(2 * RANDOM_SENTENCE_DEFAULT_EPSILON, WORDS, RANDOM_SENTENCE_PAIR[0])
    assert chi2_goodness_of_fit(out, right)[1] > 1e-3
    assert chi2_goodness_of_fit(out, np.append(np.exp(wrong), 0.0))[1] < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("factor", [None, 3.0])
def test_a_planted_error_in_the_release_primitive_is_flagged(cases, monkeypatch, name, factor):
    _plant(monkeypatch, name, factor)
    r = run_audit(cases[name], samples=4_000, seed=SEED, conformance=True)
    assert not r.privacy_passed and not r.passed, r.to_dict()
    assert r.curve is not None and not r.curve.passed and not r.conformance.passed


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_epsilon_x1_25_in_the_release_primitive_is_flagged(cases, monkeypatch, name):
    _plant(monkeypatch, name, 1.25)
    r = run_audit(cases[name], seed=SEED, conformance=True)
    assert not r.passed and not r.curve.passed and not r.conformance.passed, r.to_dict()
