"""The known-bad variants of the LM rewriters' laws are flagged (the rewriters themselves: test_audit_lm_release.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from textdp.audit import audit, audit_case, audit_case_names
from textdp.audit.lm import BART_LOOP_BAD, BART_RANGE_CLIP, KNOWN_BAD, RELEASE_LOOP_BAD, token_case
from textdp.cli import app

GOOD = ("dp-prompt", "dp-paraphrase", "dp-mlm", "dp-bart")


def test_every_rewriter_and_every_known_bad_variant_is_registered():
    assert set(GOOD) | set(KNOWN_BAD) <= set(audit_case_names())


@pytest.mark.parametrize("name", BART_LOOP_BAD)
def test_known_bad_dp_bart_variants_are_flagged_in_the_real_release_loop(name):
    """Planted in DP-BART's loop (privatize_batch on the probe model): the privacy tests flag each; put back after."""
    from textdp.generation import lm_decode, lm_family

    originals = (lm_decode.clip_and_noise, lm_family.DPBART.sigma)
    case = audit_case(name)
    assert "privatize_batch" in case.pair and "KNOWN-BAD" in case.pair and "probe BART model" in case.pair
    r = audit(name, samples=4000, seed=12)
    assert not r.passed and not r.privacy_passed and not r.curve.passed, r.to_dict()
    assert (lm_decode.clip_and_noise, lm_family.DPBART.sigma) == originals


@pytest.mark.parametrize(("design", "clip"), [("spread", (-1.0, 1.0)), ("mean", BART_RANGE_CLIP)])
def test_the_correct_dp_bart_loop_passes_where_its_known_bad_variants_are_audited(design, clip):
    from textdp.audit.lm_release import lm_release_case

    r = audit(lm_release_case("dp-bart", design=design, clip=clip), samples=4000, seed=12)
    assert r.passed, r.to_dict()


@pytest.mark.parametrize("name", RELEASE_LOOP_BAD)
def test_known_bad_token_variants_are_flagged_in_the_real_release_loop(name):
    """Planted in DP-Prompt's loop (privatize_batch on the tiny model): the privacy tests flag each at 10^4."""
    from textdp.generation import decoding, lm_decode

    originals = (decoding.clipped_log_weights, decoding.exponential_step, lm_decode.exponential_step)
    case = audit_case(name)
    assert "privatize_batch" in case.pair and "KNOWN-BAD" in case.pair
    r = audit(name, samples=10_000, seed=12)
    assert not r.passed and not r.privacy_passed and not r.curve.passed, r.to_dict()
    # the loop is put back after the draws (the same case unpatched passes: the test below, run after these)
    assert (decoding.clipped_log_weights, decoding.exponential_step, lm_decode.exponential_step) == originals


def test_the_real_release_loop_passes_after_the_known_bad_variants_were_planted():
    """Once, after the variants above (5 s of CPU each; it ran after every variant before, issue 38 item 9)."""
    assert audit("dp-prompt", samples=10_000, seed=12).passed


def test_the_correct_laws_pass_at_the_same_settings_as_the_bad_ones():
    assert audit(token_case("ok", 2.0), samples=40_000, seed=13).passed


def test_cli_flags_a_known_bad_variant_with_exit_1():
    # 10^4 samples, as the variants above: the lower bound found is 6.9 for the claimed 4 (was 2 x 10^4, issue 38)
    res = CliRunner().invoke(app, ["audit", "lm-topk-clipped", "--samples", "10000", "--seed", "1"])
    assert res.exit_code == 1, res.output


@pytest.mark.slow
@pytest.mark.parametrize("name", BART_LOOP_BAD)
def test_cli_flags_each_dp_bart_known_bad_variant_at_the_default_samples(name):
    res = CliRunner().invoke(app, ["audit", name, "--seed", "1"])
    assert res.exit_code == 1, res.output
