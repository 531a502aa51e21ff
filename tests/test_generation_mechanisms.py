"""The rewriting mechanisms against their exact laws, the accounting, and the two-set audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

torch = pytest.importorskip("torch")

from textdp._rng import make_rng
from textdp.errors import ParameterError
from textdp.generation.audit import two_set_audit_case
from textdp.generation.bounds import (
    em_bound,
    random_r_epsilon,
    random_r_guarantee,
    random_r_rate,
    two_set_bound,
    two_set_epsilon_for_budget,
)
from textdp.generation.sampling import (
    em_distribution,
    em_step,
    two_set_distribution,
    two_set_step,
)
from textdp.guarantees import GUARANTEE_KEYS, Guarantee
from textdp.mechanisms.syntf import SynTF, syntf, syntf_distribution

# a fixed toy distribution over 6 emittable tokens plus one banned token (like <unk>)
P = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04, 0.0])
ALLOWED = np.array([1, 1, 1, 1, 1, 1, 0], dtype=bool)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # one thread: identical float results for a run and its resumption, no contention on small ops
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _logp(p: np.ndarray, n: int):
    with np.errstate(divide="ignore"):
        return torch.log(torch.tensor(p, dtype=torch.float32)).repeat(n, 1)


def _counts(ids, size: int) -> np.ndarray:
    return np.bincount(np.asarray(ids), minlength=size)


@pytest.mark.parametrize("eps_set,eps_word", [(2.0, 1.0), (9.0, 0.0), (0.5, 4.0)])
def test_two_set_matches_exact_law_and_rejects_a_wrong_one(eps_set, eps_word):
    n = 600_000  # k=4 against k=5 differs by < 1% in places: 200,000 draws reject it only at p ~ 1e-4
    ids = two_set_step(_logp(P, n), make_rng(5), epsilon_set=eps_set, epsilon_word=eps_word, k=5)
    c = _counts(ids, P.size)
    assert c[6] == 0  # the banned token is never emitted
    exact = two_set_distribution(P, epsilon_set=eps_set, epsilon_word=eps_word, k=5, allowed=ALLOWED)
    assert math.isclose(exact.sum(), 1.0, rel_tol=1e-12)
    assert chisquare(c[:6], exact[:6] * n).pvalue > 1e-3
    # the same test rejects a wrong law: set choice with 1.5 epsilon_set, or lexical sets of k=4 draws
    wrong = two_set_distribution(P, epsilon_set=eps_set * 1.5, epsilon_word=eps_word, k=5, allowed=ALLOWED)
    wrong_k = two_set_distribution(P, epsilon_set=eps_set, epsilon_word=eps_word, k=4, allowed=ALLOWED)
    assert chisquare(c[:6], wrong[:6] * n).pvalue < 1e-6
    assert chisquare(c[:6], wrong_k[:6] * n).pvalue < 1e-6


def test_em_step_matches_exact_law_and_rejects_a_wrong_one():
    n = 200_000
    c = _counts(em_step(_logp(P, n), make_rng(3), epsilon=6.0), P.size)
    assert c[6] == 0
    exact = em_distribution(P, epsilon=6.0, allowed=ALLOWED)
    assert chisquare(c[:6], exact[:6] * n).pvalue > 1e-3
    wrong = em_distribution(P, epsilon=12.0, allowed=ALLOWED)  # exp(eps p) instead of exp(eps p / 2)
    assert chisquare(c[:6], wrong[:6] * n).pvalue < 1e-6


def test_two_set_step_batch_rows_are_independent_of_their_neighbours():
    # rows with different distributions in one batch each follow their own law
    p2 = np.array([0.05, 0.05, 0.1, 0.1, 0.3, 0.4, 0.0])
    n = 100_000
    logp = torch.cat([_logp(P, n), _logp(p2, n)])
    ids = two_set_step(logp, make_rng(9), epsilon_set=3.0, epsilon_word=1.0).numpy()
    for rows, p in ((ids[:n], P), (ids[n:], p2)):
        exact = two_set_distribution(p, epsilon_set=3.0, epsilon_word=1.0, allowed=ALLOWED)
        assert chisquare(_counts(rows, 7)[:6], exact[:6] * n).pvalue > 1e-3


def test_two_set_bound_is_the_documented_composition():
    b = two_set_bound(5.0, 10_001, 32, word_fraction=0.1, k=5)
    a, bb = 4.5 / 2, 0.5 / 2
    per_token = a + math.log(max(10_001 - 2 + math.exp(bb), 1 + 4 * math.exp(bb)))
    assert b.epsilon_set == pytest.approx(4.5) and b.epsilon_word == pytest.approx(0.5)
    assert b.per_token == pytest.approx(per_token, rel=1e-12)
    assert b.per_sentence == pytest.approx(32 * per_token, rel=1e-12)
    assert b.document(3) == pytest.approx(3 * 32 * per_token)
    assert b.log_share > 0.8  # ln|V| dominates
    assert b.poster_claim_per_token == pytest.approx(5.0 + math.log(10_001))
    assert b.per_token <= b.poster_claim_per_token  # the poster's claim holds per token with s = |V|
    # a large word budget: the lexical-set term takes over
    big = two_set_bound(100.0, 8, 1, word_fraction=0.5, k=5)
    assert big.log_term == pytest.approx(25.0 + math.log(math.exp(-25.0) + 4), rel=1e-9)
    # inverse and the floor L_max * ln(|V| - 1)
    assert two_set_epsilon_for_budget(b.per_sentence, 10_001, 32) == pytest.approx(5.0, rel=1e-6)
    assert two_set_epsilon_for_budget(32 * math.log(10_000) - 1e-6, 10_001, 32) is None
    with pytest.raises(ParameterError):
        two_set_bound(0.0, 100)
    with pytest.raises(ParameterError):
        two_set_bound(1.0, 5, k=5)


def test_two_set_bound_holds_exactly_on_a_toy_alphabet():
    # exact output laws for every pair of point-mass and mixed toy inputs stay within the per-token bound,
    # and the point-mass pair comes within e^{eps_word/2} - 1 of it
    V, eps = 7, 3.0
    b = two_set_bound(eps, V, 1)
    inputs = [np.eye(V)[i] for i in range(V)] + [np.full(V, 1 / V), np.array([0.5, 0.5, 0, 0, 0, 0, 0])]
    laws = [two_set_distribution(p, epsilon_set=b.epsilon_set, epsilon_word=b.epsilon_word) for p in inputs]
    worst = max(np.max(np.log(x / y)) for x in laws for y in laws)
    assert worst <= b.per_token + 1e-12
    assert worst >= b.epsilon_set / 2 + math.log(V - 1) - 1e-9


def test_em_and_random_r_calibration():
    assert em_bound(3.0, 20) == 60.0
    for v in (10, 10_000):
        for r in (0.01, 0.3, 0.99):
            assert random_r_rate(random_r_epsilon(r, v), v) == pytest.approx(r, rel=1e-9)
    assert random_r_epsilon(1.0, 10) == pytest.approx(0.0, abs=1e-12)
    assert random_r_rate(1000.0, 10_000) < 1e-300


def test_random_r_rate_is_the_measured_replacement_rate(tmp_path):
    from textdp.generation.rewriter import RandomSentence, Rewriter

    # a model directory is only needed for its vocabulary; build the smallest one by hand
    from textdp.generation.vocab import Vocabulary

    words = [f"w{i}" for i in range(200)]
    rw = Rewriter.__new__(Rewriter)
    rw.vocab = Vocabulary.from_words(words)
    eps = 6.0
    rate = random_r_rate(eps, len(words))
    seg = [words[:20]] * 2000 + [["out-of-vocabulary"] * 5] * 100
    mech = RandomSentence(epsilon=eps, model=rw).fit()
    assert mech.replacement_.rate_ == pytest.approx(rate)  # the word family's RandomReplacement core
    out = mech.rewrite_segments(seg, make_rng(4))
    changed = sum(o != s for a, b in zip(out[:2000], seg[:2000], strict=True) for o, s in zip(a, b, strict=True))
    n = 2000 * 20
    expected = rate * (1 - 1 / len(words))  # replaced by a different word
    assert abs(changed / n - expected) < 4 * math.sqrt(expected * (1 - expected) / n)
    assert all(o == [] for o in out[2000:])  # OOV tokens dropped, as the word family's random does
    g = random_r_guarantee("random-sentence", eps, vocab_size=len(words), max_length=32)
    assert not g.length_covered and "NOT covered" in g.statement and not g.uses_model


def test_syntf_matches_exact_law_and_rejects_a_wrong_one():
    w = np.array([3.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    eps, size, n = 24.0, 4, 40_000
    bags = syntf(np.tile(w, (n, 1)), eps, size, make_rng(2))
    assert bags.shape == (n, 6) and set(bags.sum(1).tolist()) == {size}
    c = bags.sum(0)
    exact = syntf_distribution(w, eps, size)
    assert chisquare(c, exact * n * size).pvalue > 1e-3
    # exp(eps x / n) (sensitivity taken as n/2) is rejected
    wrong = syntf_distribution(w, 2 * eps, size)
    assert chisquare(c, wrong * n * size).pvalue < 1e-6
    # composition variant with a public similarity
    sim = np.clip(np.eye(6) + 0.3 * (np.abs(np.subtract.outer(np.arange(6), np.arange(6))) == 1), 0, 1)
    bags = syntf(np.tile(w, (n, 1)), eps, size, make_rng(3), variant="composition", similarity=sim)
    exact = syntf_distribution(w, eps, size, variant="composition", similarity=sim)
    assert chisquare(bags.sum(0), exact * n * size).pvalue > 1e-3
    wrong = syntf_distribution(w, eps, size)  # the weights variant is a different law
    assert chisquare(bags.sum(0), wrong * n * size).pvalue < 1e-6


def test_syntf_guarantee_bound_and_api(glove):
    from textdp.embeddings import Embeddings

    vocab = ["cat", "dog", "fish", "bird"]
    m = SynTF(epsilon=12.0, size=3, embeddings=Embeddings(vocab, np.eye(4), name="toy"), stop_words=None)
    g = m.guarantee()
    assert isinstance(g, Guarantee) and set(GUARANTEE_KEYS) <= set(g.to_dict())
    assert g.epsilon == 12.0 and g.unit == "document"
    # the exact per-term law changes by at most exp(eps / size) between any two inputs
    q = [syntf_distribution(x, 12.0, 3) for x in (np.array([1.0, 0, 0, 0]), np.array([0, 0, 0, 5.0]), np.zeros(4))]
    assert max(np.max(np.log(a / b)) for a in q for b in q) <= 12.0 / 3 + 1e-12
    bags = m.privatize(["cat unicorn", "dog"], seed=0)
    assert [len(b.words) for b in bags] == [3, 3] and all(w in vocab for b in bags for w in b.words)
    # composition with GloVe vectors computed row by row
    words = ["king", "queen", "apple", "car"]
    mv = SynTF(epsilon=50.0, size=5, variant="composition", stop_words=None,
               embeddings=Embeddings(words, np.stack([glove.vector(w) for w in words]), name="four"))
    assert len(mv.privatize("king", seed=1).words) == 5


def test_two_set_audit_stays_below_the_claim_and_flags_broken_variants():
    from textdp.audit import run_audit
    from textdp.audit.power import two_set_toy_case as er_ae_case

    results = {b: run_audit(er_ae_case(2.0, broken=b), samples=100_000, seed=1)
               for b in (None, "set-epsilon-doubled", "poster-claim")}
    ok = results[None]
    assert ok.passed and 0.7 * ok.claimed_epsilon < ok.lower_bound <= ok.claimed_epsilon  # tight, not violated
    for broken in ("set-epsilon-doubled", "poster-claim"):
        assert not results[broken].passed  # flagged
    _, _, claimed, delta = two_set_audit_case(2.0)
    assert delta == 0.0 and claimed == pytest.approx(ok.claimed_epsilon)
