"""The covered topic release's keywords are sampled (issue 41, finding 5).

``textdp topics`` releases, by default, whole rows over a public vocabulary and each topic's keywords
read off the *noisy* row. On e24cd34 the five topic cases released model-column units only: keywords
ranked by the private matrix (the private top-2 released every time) passed all of them. The covered
cases (``NAME-covered``) release one row over a public vocabulary through ``privatize_batch`` and audit
the released keywords; the planted ranking is flagged by each.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import textdp.topics.family as family
from textdp.audit import audit, audit_case_names
from textdp.audit.covered_topics import COVERED_MECHANISMS

COVERED = tuple(f"{k}-covered" for k in COVERED_MECHANISMS)


def _rank_by_the_private_row(monkeypatch) -> None:
    real = family.make_release

    def planted(uid, topics, raw, guarantee, seeded, *, keywords=None):
        rel = real(uid, topics, raw, guarantee, seeded, keywords=keywords)
        if topics.columns != "public":
            return rel
        cols = np.argsort(-np.asarray(topics.matrix), axis=1, kind="stable")[:, : len(rel.keywords[0])]
        kws = tuple(tuple(topics.keywords[i][c] for c in row) for i, row in enumerate(cols))
        return dataclasses.replace(rel, keywords=kws)

    monkeypatch.setattr(family, "make_release", planted)


def test_every_topic_mechanism_has_a_covered_case():
    assert set(COVERED) <= set(audit_case_names())


@pytest.mark.parametrize("name", COVERED)
def test_keywords_ranked_by_the_private_row_are_flagged(monkeypatch, name):
    ok = audit(name, samples=2_000, seed=12, conformance=True)
    assert ok.passed, ok
    _rank_by_the_private_row(monkeypatch)
    bad = audit(name, samples=2_000, seed=12, conformance=True)
    assert not bad.privacy_passed and not bad.conformance.passed, bad


@pytest.mark.parametrize("name", ["topicdp-covered", "laplace-covered"])
def test_a_covered_release_with_no_noise_is_flagged(monkeypatch, name):
    import textdp.topics.noise as noise

    monkeypatch.setattr(noise.GridNoise, "randomize", lambda self, matrix, seed=None: np.asarray(matrix, float))
    bad = audit(name, samples=2_000, seed=12, conformance=True)
    assert not bad.passed, bad
