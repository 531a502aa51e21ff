"""Issue 42: topic mechanisms with noise on a per-user clipped statistic of the corpus (deterministic sensitivity).

``noisy-cooccurrence`` (Gaussian noise on the sum of per-user co-occurrence distributions, then NMF) and
``spectral-lda`` (DeCarolis et al. 2020: Gaussian noise on M2 and on the whitened M3). Checked here: the
clip bounds one user's change (the sensitivity lemma), the released noise follows its law (KS on the
residual of the noisy statistic, a wrong sigma rejected), the calibration meets (epsilon, delta), and the
whole ``textdp topics --mechanism NAME`` path on a tiny corpus.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import sparse
from scipy.stats import kstest
from typer.testing import CliRunner

from textdp.accounting.gaussian import gaussian_delta
from textdp.cli import app
from textdp.errors import ParameterError
from textdp.mechanisms import get
from textdp.topics import UserCorpus
from textdp.topics.cooccurrence import NoisyCooccurrence, user_pair_moments
from textdp.topics.spectral import SpectralLDA, gdp_mu, user_triple_moments

runner = CliRunner()

WORDS = ["gas", "power", "price", "market", "energy", "deal", "trade", "contract", "game", "team", "coach",
         "season", "player", "score", "win", "league"]


def _corpus(users: int = 24, docs: int = 3, seed: int = 0) -> UserCorpus:
    rng = np.random.default_rng(seed)
    texts, who = [], []
    for u in range(users):
        words = WORDS[:8] if u % 2 else WORDS[8:]
        for _ in range(docs):
            texts.append(" ".join(rng.choice(words, size=int(rng.integers(3, 12)))))
            who.append(f"u{u}")
    return UserCorpus.from_texts(texts, who, vocabulary=WORDS)


def test_one_user_moves_the_clipped_sum_by_at_most_the_clip():
    corpus = _corpus()
    full = user_pair_moments(corpus, len(WORDS))
    for clip in (0.01, 0.1, 10.0):
        S = full.clipped_sum(clip)
        for u in range(corpus.n_users):
            keep = [i for i in range(corpus.n_users) if i != u]
            sub = UserCorpus(X=corpus.X, vocabulary=corpus.vocabulary, users=tuple(corpus.users[i] for i in keep),
                             user_rows=tuple(corpus.user_rows[i] for i in keep), max_docs_per_user=None,
                             fingerprint="x", settings=corpus.settings, counts=corpus.X,
                             columns=corpus.vocabulary, rule=None)
            d = np.linalg.norm(S - user_pair_moments(sub, len(WORDS)).clipped_sum(clip))
            assert d <= clip * (1 + 1e-9)
    # unclipped, every user's statistic is a distribution (sums to 1); its norm, computed in the small space of
    # the user's documents, is the norm of the dense V x V statistic built from the definition
    assert abs(full.clipped_sum(1e9).sum() - corpus.n_users) < 1e-9
    X = corpus.X[corpus.user_rows[0]].toarray()
    Q = sum((np.outer(x, x) - np.diag(x)) / (x.sum() * (x.sum() - 1)) for x in X) / len(X)
    assert np.isclose(np.linalg.norm(Q), full.norms[0]) and np.isclose(Q.sum(), 1.0)


def test_noisy_cooccurrence_noise_has_its_law_and_a_wrong_sigma_is_rejected():
    corpus = _corpus()
    mech = NoisyCooccurrence(epsilon=2.0, delta=1e-5, clip=0.05, words=len(WORDS)).fit()
    S = user_pair_moments(corpus, len(WORDS)).clipped_sum(0.05)
    sigma = mech.sigma()
    resid = np.concatenate([(mech.noisy_statistic(corpus, np.random.default_rng(s)) - S).ravel()
                            for s in range(40)])  # 40 x 256 = 10,240 draws
    assert kstest(resid / sigma, "norm").pvalue > 1e-3
    assert kstest(resid / (0.9 * sigma), "norm").pvalue < 1e-6  # 10% too small a sigma is rejected
    # the calibration: exactly (epsilon, delta) for sensitivity = clip (Balle & Wang Thm. 8), not more noise
    assert gaussian_delta(sigma, 2.0, 0.05) <= 1e-5 < gaussian_delta(sigma * 0.99, 2.0, 0.05)


def test_spectral_lda_noise_has_its_law_and_the_pair_composes_to_epsilon_delta():
    corpus = _corpus()
    mech = SpectralLDA(epsilon=3.0, delta=1e-5, topics=2, words=len(WORDS), clip3=2.0).fit()
    s2, s3, C3 = mech.sigmas()
    mu = gdp_mu(3.0, 1e-5)
    assert np.isclose(np.hypot(mech.clip / s2, C3 / s3), mu)  # mu1^2 + mu2^2 = mu^2
    assert gaussian_delta(1.0 / mu, 3.0, 1.0) <= 1e-5 < gaussian_delta(0.99 / mu, 3.0, 1.0)
    S2 = user_pair_moments(corpus, len(WORDS)).clipped_sum(mech.clip)
    r2 = np.concatenate([(mech.noisy_pairs(corpus, np.random.default_rng(s)) - S2).ravel() for s in range(40)])
    assert kstest(r2 / s2, "norm").pvalue > 1e-3 and kstest(r2 / (0.9 * s2), "norm").pvalue < 1e-6
    W = mech.whitening(S2)[0]
    S3 = mech.clipped_triples(corpus, W)
    r3 = np.concatenate([mech.noisy_triples(corpus, W, np.random.default_rng(s)) - S3 for s in range(1200)])
    assert kstest(r3 / s3, "norm").pvalue > 1e-3 and kstest(r3 / (0.9 * s3), "norm").pvalue < 1e-6
    # one user moves the tensor statistic by at most C3 (Lemma 2)
    sub = UserCorpus(X=corpus.X, vocabulary=corpus.vocabulary, users=corpus.users[1:],
                     user_rows=corpus.user_rows[1:], max_docs_per_user=None, fingerprint="x",
                     settings=corpus.settings, counts=corpus.X, columns=corpus.vocabulary, rule=None)
    assert np.linalg.norm(S3 - mech.clipped_triples(sub, W)) <= C3 * (1 + 1e-9)


def test_triple_moment_is_the_unbiased_estimator():
    """The vectorised whitened estimator equals the definition on one document (three distinct positions)."""
    X = np.array([[2.0, 1.0, 1.0]])
    W = np.random.default_rng(1).standard_normal((3, 2))
    got = user_triple_moments(sparse.csr_matrix(X), [np.array([0])], W).reshape(2, 2, 2)
    tokens = [0, 0, 1, 2]
    want = np.zeros((2, 2, 2))
    count = 0
    for i in range(4):
        for j in range(4):
            for k in range(4):
                if len({i, j, k}) == 3:
                    want += np.einsum("a,b,c->abc", W[tokens[i]], W[tokens[j]], W[tokens[k]])
                    count += 1
    assert np.allclose(got, want / count)


@pytest.mark.parametrize("name", ["noisy-cooccurrence", "spectral-lda"])
def test_release_is_covered_and_recovers_planted_topics_with_little_noise(name):
    corpus = _corpus(users=40)
    rel = get(name, epsilon=1e4, delta=1e-5, topics=2, keywords=4, words=len(WORDS), seed=1).privatize(corpus)
    assert rel.guarantee.delta == 1e-5 and rel.guarantee.gamma is None and rel.guarantee.unit == "user"
    assert rel.guarantee.params["keywords_from"] == "noisy" and "Covered: every part" in rel.guarantee.statement
    assert "most relevant words" in rel.keyword_note and rel.guarantee.params["keyword_note"] == rel.keyword_note
    groups = [set(k) for k in rel.keywords]
    assert {frozenset(g <= set(WORDS[:8]) or g <= set(WORDS[8:]) for g in groups)} == {frozenset({True})}
    assert groups[0] != groups[1]
    assert rel.guarantee.event is not None and rel.guarantee.event.kind == "gaussian"


def test_corpus_mechanisms_refuse_what_does_not_apply():
    with pytest.raises(ParameterError, match="public clip"):
        NoisyCooccurrence(epsilon=1.0, delta=1e-5, sensitivity=0.3).fit()
    with pytest.raises(ParameterError, match="released_topics"):
        NoisyCooccurrence(epsilon=1.0, delta=1e-5, topics=3, released_topics=4).fit()
    private = UserCorpus.from_texts(["gas power", "power price"], ["a", "b"], min_df=1, max_df=1.0)
    with pytest.raises(ParameterError, match="public vocabulary"):
        NoisyCooccurrence(epsilon=1.0, delta=1e-5, topics=2).privatize(private)


def _write(tmp_path):
    rng = np.random.default_rng(6)
    path = tmp_path / "c.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(60):
            words = WORDS[:8] if i % 2 else WORDS[8:]
            fh.write(json.dumps({"author": f"u{i % 20}", "text": " ".join(rng.choice(words, size=12))}) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS + ["river", "stone"]) + "\n", encoding="utf-8")
    return path, vocab


@pytest.mark.parametrize("name", ["noisy-cooccurrence", "spectral-lda"])
def test_cli_topics_mechanism_path(tmp_path, name):
    path, vocab = _write(tmp_path)
    out, private = tmp_path / "rel.json", tmp_path / "private.json"
    res = runner.invoke(app, ["topics", str(path), "-o", str(out), "--private-report", str(private),
                              "--vocabulary", str(vocab), "--mechanism", name, "--topics", "2", "--keywords", "3",
                              "--delta", "1e-5", "--seed", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert rec["mechanism"] == name and rec["unit"] == "user" and len(rec["keywords"]) == 2
    assert all(len(k) == 3 and set(k) <= set(WORDS + ["river", "stone"]) for k in rec["keywords"])
    assert rec["guarantee"]["parameters"]["keywords_from"] == "noisy" and "NOT covered" not in json.dumps(rec)
    assert "n_users" not in json.dumps(rec) and json.loads(private.read_text())["n_users"] == 20
    settings = json.loads((tmp_path / "rel.json.settings.json").read_text())
    assert settings["mechanism"] == name and "seed" not in settings and "per_db_users" not in settings


def test_cli_refuses_options_that_do_not_apply_to_a_corpus_mechanism(tmp_path):
    path, vocab = _write(tmp_path)
    for extra in (["--keywords-from", "model"], ["--sensitivity", "worst-case"]):
        res = runner.invoke(app, ["topics", str(path), "--vocabulary", str(vocab), "--mechanism", "noisy-cooccurrence",
                                  *extra])
        assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
