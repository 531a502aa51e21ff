"""Record and replay of TopicDP's sampled sensitivity (issue 29): the release on neighbouring databases, noise frozen.

A real scikit-learn LDA on a small synthetic corpus of 20 users (three documents each, mixtures of four themes);
the sensitivity is sampled by the real sampler and the release replayed through the mechanisms' own
``privatize_batch``. Each planted error makes the declared sensitivity too small and is flagged; the correct code
passes (seeds fixed: the tests are deterministic).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import textdp.topics.sensitivity as sensitivity_module
from textdp._rng import make_rng
from textdp.audit.replay import declared_bound, release_unit, replay_sensitivity
from textdp.mechanisms import get
from textdp.topics import SensitivitySampler, SklearnLDA, TopicMatrix, UserCorpus
from textdp.topics.models import fit_database

THEMES = [["gas", "power", "price", "market", "energy", "deal", "trade", "contract"],
          ["game", "team", "coach", "season", "player", "score", "win", "league"],
          ["music", "band", "concert", "guitar", "song", "album", "stage", "tour"],
          ["farm", "apple", "pear", "river", "harvest", "field", "crop", "barn"]]
M, N = 2, 4


@pytest.fixture(scope="module")
def corpus() -> UserCorpus:
    rng = make_rng(11)
    texts, users = [], []
    for u in range(20):
        fav = rng.choice(4, size=2, replace=False)
        for _ in range(3):
            texts.append(" ".join(THEMES[fav[0] if rng.random() < 0.7 else fav[1]][rng.integers(8)]
                                  for _ in range(12)))
            users.append(f"u{u}")
    return UserCorpus.from_texts(texts, users, min_df=1, max_df=1.0)


MODEL = SklearnLDA(n_topics=3, max_iter=3, seed=0)
_FITS: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = {}


def _fit(corpus: UserCorpus, model: object, users: object = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``fit_database``, each database fitted once for the whole module (the fits are deterministic)."""
    key = tuple(users) if users is not None else ()
    if key not in _FITS:
        _FITS[key] = fit_database(corpus, model, users)  # type: ignore[arg-type]
    return _FITS[key]


@pytest.fixture(autouse=True)
def _shared_fits(monkeypatch):
    monkeypatch.setattr(sensitivity_module, "fit_database", _fit)
    monkeypatch.setattr("textdp.audit.replay.fit_database", _fit)


def _sample(corpus: UserCorpus):
    return SensitivitySampler(corpus=corpus, model=MODEL, sizes=[(M, N)]).sample(0.3, seed=1)[(M, N)]


def _replay(corpus: UserCorpus, **params: object):
    return replay_sensitivity(corpus, MODEL, get("topicdp", epsilon=1.0, delta=1e-5, **params), m=M, n=N,
                              pairs=24, seed=2)


def test_the_real_release_moves_as_the_sampler_measured(corpus):
    sens = _sample(corpus)
    r = _replay(corpus, sensitivity=sens)
    assert r.passed and r.consistent and r.pairs == 24 and r.gamma == pytest.approx(0.3), r.summary()
    assert r.bound == pytest.approx(sens.value + 2.0**-20 * np.sqrt(M * N), rel=1e-12)
    # the distances are the released matrices' own change: frozen noise cancels, the grid rounding stays
    assert all(d >= 0 for d in r.distances) and max(r.distances) > 0
    assert r.to_dict()["max_distance"] == max(r.distances)


def test_a_sampler_measuring_half_the_change_is_flagged(corpus, monkeypatch):
    # the planted bug: the sampler's distance is half the released function's change (sampled sensitivity halved)
    real = sensitivity_module.released_matrix_distance
    monkeypatch.setattr(sensitivity_module, "released_matrix_distance", lambda *a, **k: real(*a, **k) / 2)
    sens = _sample(corpus)
    r = _replay(corpus, sensitivity=sens)
    assert r.consistent and not r.passed and r.shift_p_value < 0.01, r.summary()


def test_a_declared_sensitivity_halved_is_flagged(corpus):
    sens = _sample(corpus)
    half = dataclasses.replace(sens, value=sens.value / 2)
    r = _replay(corpus, sensitivity=half)
    assert not r.passed and not r.consistent, r.summary()


def test_a_global_bound_is_never_exceeded(corpus):
    assert _replay(corpus, sensitivity="worst-case").passed  # sqrt(2m): sub-probability rows
    lap = replay_sensitivity(corpus, MODEL, get("topicdp-laplace", epsilon=1.0), m=M, n=N, pairs=24, seed=2)
    assert lap.passed and lap.norm == "l1" and lap.bound == pytest.approx(2 * M + 2.0**-20 * M * N)
    # a supplied bound below what one user moves the release: no pair may exceed a global bound
    largest = max(_replay(corpus, sensitivity="worst-case").distances)
    small = _replay(corpus, sensitivity=largest / 2)
    assert small.gamma is None and small.exceedances >= 1 and not small.passed and small.p_value == 0.0


def test_a_release_function_other_than_the_sampled_one_is_flagged(corpus):
    # a release that scales the matrix it privatizes (e.g. counts instead of probabilities): not the sampled function
    sens = _sample(corpus)

    def other(c: UserCorpus, model: object, users: list[int]) -> TopicMatrix:
        unit = release_unit(c, MODEL, users, m=M, n=N)
        return dataclasses.replace(unit, matrix=unit.matrix * 3.0)

    r = replay_sensitivity(corpus, MODEL, get("topicdp", epsilon=1.0, delta=1e-5, sensitivity=sens), m=M, n=N,
                           pairs=24, seed=2, release=other)
    assert not r.passed and r.shift_p_value < 1e-3, r.summary()


def test_declared_bound_reads_the_parameters_not_the_calibration():
    norm, delta, bound, gamma = declared_bound(get("mvg", epsilon=1.0, delta=1e-5, sensitivity=0.2, gamma=0.1),
                                               (3, 5))
    assert (norm, delta, gamma) == ("l2", 0.2, 0.1) and bound == pytest.approx(0.2 + 2.0**-20 * np.sqrt(15))
    assert declared_bound(get("topicdp", epsilon=1.0, delta=1e-5, sensitivity="worst-case"), (3, 5))[1] == \
        pytest.approx(np.sqrt(6))
