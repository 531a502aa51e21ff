"""Nothing shared: a helper of the library planted with an error moves no claim of the audit (issue 41, finding 2).

On e24cd34 the audit's claimed profile (``grid_curves._differing``) and conformance rounded with the
release's own ``samplers.snap_to_grid``, and ``audit/claims.py`` read the library's
``text.resolve_stop_words`` and ``mechanisms.exponential.custext_groups``: a factor 2 planted in the
grid snapping moved the release (0.2 between the audit pair against a declared 0.1) *and* the claim, so
``textdp audit topicdp --conformance`` passed. Here each helper is planted (×2) in every library module
that binds it, and the claims, claimed laws and pairs are compared before and after; the planted grid
error is then flagged.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from textdp.audit import audit, audit_case

TOPICS = ("topicdp", "topicdp-thesis", "laplace", "mvg", "mvg-directional")


def _plant(monkeypatch, module: str, attr: str, make) -> None:
    """Replace ``module.attr`` in every loaded ``textdp`` module that binds it: a helper the audit shared would move."""
    import importlib

    real = getattr(importlib.import_module(module), attr)
    planted = make(real)
    for name, mod in list(sys.modules.items()):
        if name.startswith("textdp") and getattr(mod, attr, None) is real:
            monkeypatch.setattr(mod, attr, planted)


def _fingerprint(case) -> tuple:
    """What the audit claims about a case: the pair, the claim, the claimed curve and the conformance law."""
    rng = np.random.default_rng(0)
    curve = case.curve
    profile = None if curve is None else tuple(np.round(np.concatenate(
        [np.ravel(v) for v in curve.claimed(np.asarray(curve.grid), 0.95, rng)]), 12))
    conf = case.conformance
    kept = None
    if conf is not None and conf.kind == "uniform":  # topic noise in grid units of a fixed output
        out = np.stack([np.asarray(case.input_a, dtype=np.float64) + 0.25] * 2)
        kept = tuple(np.round(np.asarray(conf.keep(case.input_a, out)), 12))
    if conf is not None and conf.kind == "table":
        kept = tuple(np.round(np.asarray(conf.table(case.input_a)), 12))
    return (case.pair, case.claimed_epsilon, case.claimed_delta, None if curve is None else curve.grid, profile,
            None if conf is None else conf.description, kept)


@pytest.mark.parametrize("name", TOPICS)
def test_the_grid_snapping_planted_in_the_library_moves_no_topic_claim(monkeypatch, name):
    before = _fingerprint(audit_case(name))
    _plant(monkeypatch, "textdp.samplers", "snap_to_grid", lambda real: lambda v, g: 2 * real(v, g))
    assert _fingerprint(audit_case(name)) == before


def test_the_planted_grid_snapping_is_flagged(monkeypatch):
    # the release moves 2x the pair's distance (0.2 against the declared 0.1); the audit's own rounding sees it
    _plant(monkeypatch, "textdp.samplers", "snap_to_grid", lambda real: lambda v, g: 2 * real(v, g))
    bad = audit("topicdp", samples=2_000, seed=3, conformance=True)
    assert not bad.passed and not bad.conformance.passed, bad


@pytest.mark.parametrize("name", ["custext", "custext+"])
def test_the_custext_groups_planted_in_the_library_move_no_claim(monkeypatch, name):
    before = _fingerprint(audit_case(name))
    _plant(monkeypatch, "textdp.mechanisms.exponential", "custext_groups",
           lambda real: lambda v, k, **kw: real(v, 2 * k, **kw))
    assert _fingerprint(audit_case(name)) == before
    bad = audit(name, samples=2_000, seed=3, conformance=True)  # the release's sets are twice as large
    assert not bad.passed, bad


def test_the_stop_words_planted_in_the_library_move_no_claim(monkeypatch):
    before = _fingerprint(audit_case("custext+"))
    _plant(monkeypatch, "textdp.text", "resolve_stop_words",
           lambda real: lambda sw: frozenset(list(real(sw))[: len(real(sw)) // 2]))  # half the list lost
    assert _fingerprint(audit_case("custext+")) == before


def test_the_audits_own_lists_agree_with_the_library_when_nothing_is_planted():
    from textdp.audit.claims import custext_output_sets
    from textdp.audit.public_lists import AUDIT_ENGLISH_STOP_WORDS
    from textdp.embeddings import load_embeddings
    from textdp.mechanisms.exponential import custext_groups
    from textdp.text import resolve_stop_words

    assert AUDIT_ENGLISH_STOP_WORDS == resolve_stop_words("english")
    sk = pytest.importorskip("sklearn.feature_extraction.text")
    assert frozenset(sk.ENGLISH_STOP_WORDS) == AUDIT_ENGLISH_STOP_WORDS
    vec = load_embeddings(vocab_size=2_000).vectors
    assert np.array_equal(custext_output_sets(vec, 20), custext_groups(vec, 20))
