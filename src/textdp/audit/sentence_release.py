"""Audit cases of the sentence family's vocabulary mechanisms (``syntf-sentence``, ``random-sentence``) on their release path.

Both mechanisms use a trained textdp model's **vocabulary** only (never its network). Each case fits
the registered class with :func:`textdp.mechanisms.get` on the tiny model that
:func:`textdp.audit.generation.tiny_model` trains in a private temporary folder (8 public words, at
most ``L_max`` = 2 tokens per sentence; nothing read from a corpus or downloaded), samples
:meth:`~textdp.mechanisms.base.Mechanism.privatize_batch` on two neighbouring one-sentence texts, and
reads each released text back as an output id: an ordered sequence of words (``random-sentence``)
or a bag of words, i.e. the sorted multiset (``syntf-sentence``), indexed over every output the
vocabulary allows plus one id for anything else (impossible under the law: the conformance test
rejects it).

Nothing here calls the mechanism's calibration or sampler. The claims come from the audit's own
accountant and the laws from :mod:`textdp.audit.claims`, from ε, the public vocabulary and the two
sentences only:

* ``syntf-sentence``: a bag of ``N = L_max`` terms from the exponential mechanism over bags with
  utility ``<x̃, y>`` (range ``N``) and log-weights ``ε u/(2N)``; the claim is
  :func:`~textdp.audit.accountant.exponential_per_token` ``(ε/(2N), N) = ε`` per sentence; the law of
  a bag is the multinomial of ``N`` i.i.d. terms of :func:`~textdp.audit.claims.syntf_logp`
  (Weggenmann & Kerschbaum 2018; the factorisation in :mod:`textdp.mechanisms.syntf`);
* ``random-sentence``: each token by ``|V|``-ary randomised response at ε
  (:func:`~textdp.audit.claims.randomized_response_logp`); two sentences of the same length
  (the length is public: the guarantee does not cover it) differ in at most ``L_max`` tokens, so
  the claim is ``L_max ε`` (basic composition), and the law of a sequence is the product of its
  tokens' laws.

Each case carries the **event test**, the **privacy curve** with the exact loss of the reference law
(:func:`textdp.audit.claimed_curves.table_curve`) and the **conformance test** (χ² of the released outputs
against the reference table). Needs the ``[generation]`` extra (torch) for the model folder.

References
----------
B. Weggenmann, F. Kerschbaum. SynTF: synthetic and differentially private term frequency vectors for
privacy-preserving text mining. SIGIR 2018. P. Kairouz, S. Oh, P. Viswanath. Extremal mechanisms for
local differential privacy. NeurIPS 2014. H. Bo et al. ER-AE, NAACL 2021 (the sentence baselines;
/work/shared/reference/er-ae-notes.md). F. McSherry, K. Talwar. Mechanism design via differential
privacy. FOCS 2007. C. Dwork, A. Roth. The algorithmic foundations of differential privacy (2014),
Theorem 3.16 (basic composition).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ParameterError, require
from .accountant import exponential_per_token
from .claimed_curves import table_curve
from .claims import randomized_response_logp, syntf_logp
from .conformance import Conformance
from .core import AuditCase
from .generation import ER_AE_MAX_LENGTH, one_torch_thread, tiny_model

__all__ = [
    "RANDOM_SENTENCE_DEFAULT_EPSILON",
    "RANDOM_SENTENCE_PAIR",
    "SENTENCE_SAMPLES",
    "SYNTF_SENTENCE_DEFAULT_EPSILON",
    "SYNTF_SENTENCE_PAIR",
    "output_index",
    "random_sentence_case",
    "random_sentence_logp",
    "syntf_sentence_case",
    "syntf_sentence_logp",
]

#: Default ε of ``syntf-sentence`` (per sentence: the claim).
SYNTF_SENTENCE_DEFAULT_EPSILON = 3.0
#: Default ε of ``random-sentence`` (per token: the claim for two 2-token sentences is 2ε = 4).
RANDOM_SENTENCE_DEFAULT_EPSILON = 2.0
#: SynTF's pair: one word against two others (``x̃ = e_cat`` vs ``e_dog + e_ran``): the bag ``cat cat`` has the
#: largest loss a sentence of at most 2 tokens allows over 8 words.
SYNTF_SENTENCE_PAIR = ("cat", "dog ran")
#: Random-R's pair: two sentences of the same length (public) that differ in every token (the claim is tight).
RANDOM_SENTENCE_PAIR = ("cat sat", "dog ran")
#: Default samples per input (10^4 releases of a tiny vocabulary take well under a second).
SENTENCE_SAMPLES = 10_000


def output_index(words: Sequence[str], length: int, *, bags: bool) -> dict[tuple[str, ...], int]:
    """Every output of ``length`` words over ``words``: ordered sequences, or bags (sorted in vocabulary order).

    >>> output_index(["a", "b"], 2, bags=False)
    {('a', 'a'): 0, ('a', 'b'): 1, ('b', 'a'): 2, ('b', 'b'): 3}
    >>> output_index(["a", "b"], 2, bags=True)
    {('a', 'a'): 0, ('a', 'b'): 1, ('b', 'b'): 2}
    """
    rows = (itertools.combinations_with_replacement(range(len(words)), int(length)) if bags
            else itertools.product(range(len(words)), repeat=int(length)))
    return {tuple(words[j] for j in row): i for i, row in enumerate(rows)}


def syntf_sentence_logp(epsilon: float, words: Sequence[str], sentence: str, size: int) -> np.ndarray:
    """``ln P(bag | sentence)`` of SynTF's bags of ``size`` terms, in :func:`output_index`'s order (``bags=True``).

    Each term is i.i.d. with :func:`~textdp.audit.claims.syntf_logp` (unit weights on the sentence's
    distinct in-vocabulary words, ``ε/(2N)`` per term); a bag with counts ``c`` has probability
    ``N!/Π c_t! · Π q_t^{c_t}`` (the multinomial).

    >>> lp = syntf_sentence_logp(2.0, ["a", "b"], "a", 1)
    >>> np.exp(lp).round(4).tolist()
    [0.7311, 0.2689]
    """
    rows = sorted({list(words).index(t) for t in sentence.split() if t in words})
    if not rows:
        raise ParameterError(f"the audit sentence {sentence!r} has no vocabulary word")
    q = syntf_logp(float(epsilon), len(words), np.array(rows, dtype=np.int64), int(size))
    out = []
    for bag in itertools.combinations_with_replacement(range(len(words)), int(size)):
        counts = np.bincount(np.array(bag, dtype=np.int64), minlength=len(words))
        log_mult = math.lgamma(int(size) + 1) - sum(math.lgamma(int(c) + 1) for c in counts)
        out.append(log_mult + float(counts @ q))
    return np.array(out)


def random_sentence_logp(epsilon: float, words: Sequence[str], sentence: str) -> np.ndarray:
    """``ln P(sequence | sentence)`` of per-token randomised response, in :func:`output_index`'s order (``bags=False``).

    >>> np.exp(random_sentence_logp(np.log(3.0), ["a", "b"], "a")).round(4).tolist()
    [0.75, 0.25]
    """
    tokens = [t for t in sentence.split() if t in words]
    per = [randomized_response_logp(float(epsilon), len(words), list(words).index(t)) for t in tokens]
    out = np.zeros(1)
    for lp in per:  # the tokens are independent: sum of the per-token log laws, in product order
        out = (out[:, None] + lp[None, :]).reshape(-1)
    return out


#: ``logp(words, sentence) -> log-probabilities`` of every output (in :func:`output_index`'s order)
SentenceLaw = Callable[[Sequence[str], str], np.ndarray]


def _sentence_case(name: str, eps: float, pair: tuple[str, str], logp: SentenceLaw, *, bags: bool, claimed: float,
                   law: str) -> AuditCase:
    """The case of the vocabulary mechanism ``name`` at ``eps`` through ``privatize_batch`` (module docstring)."""
    require("torch", "generation")
    from ..generation.rewriter import Rewriter
    from ..mechanisms import get

    folder = tiny_model(seed=0, objective="er-ae")  # the vocabulary only: any trained textdp model serves
    with one_torch_thread():
        words = list(Rewriter(folder).vocab.words)  # the model's public vocabulary, read from its folder
    length = ER_AE_MAX_LENGTH
    index = output_index(words, length, bags=bags)
    size = len(index)
    text_a, text_b = pair
    la, lb = (np.append(logp(words, t), -np.inf) for t in pair)  # the last id: any other output
    mech = get(name, epsilon=eps, model=str(folder)).fit()
    rank = {w: i for i, w in enumerate(words)}

    def read(text: str) -> int:
        toks = text.split()
        if bags:
            toks = sorted(toks, key=lambda t: rank.get(t, len(words)))
        return index.get(tuple(toks), size)

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        with one_torch_thread():
            released = mech.privatize_batch([str(which)] * n, seed=rng)
        return np.array([read(str(r.content)) for r in released], dtype=np.int64)

    probs = {text_a: np.exp(la), text_b: np.exp(lb)}
    what = "bags" if bags else "sequences"
    conf = Conformance(description=f"{name}: {law}, |V| = {len(words)}, {length} tokens", kind="table",
                       keep=lambda which, out: out, table=lambda which: probs[str(which)])
    return AuditCase(
        mechanism=name,
        pair=(f"{name} on the vocabulary of a tiny textdp model trained here ({len(words)} words, L_max {length}), "
              f"released through privatize_batch: {text_a!r} vs {text_b!r}; events: released {what}"),
        input_a=text_a, input_b=text_b, sample=sample, claimed_epsilon=claimed, claimed_delta=0.0,
        events="discrete", chunk=SENTENCE_SAMPLES,
        curve=table_curve(sample, la, lb, what=f"{name}'s released {what}", law=law),
        conformance=conf, default_samples=SENTENCE_SAMPLES)


def syntf_sentence_case(epsilon: float | None = None, delta: float | None = None) -> AuditCase:
    """The ``syntf-sentence`` case (module docstring): bags of ``L_max`` terms of :data:`SYNTF_SENTENCE_PAIR`.

    ``epsilon``: per sentence (``None``: :data:`SYNTF_SENTENCE_DEFAULT_EPSILON`); pure ε-DP, so
    ``delta`` must be ``None`` or 0.
    """
    if delta not in (None, 0, 0.0):
        raise ParameterError("syntf-sentence is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = SYNTF_SENTENCE_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    n = ER_AE_MAX_LENGTH
    # the claim: the exponential mechanism over bags of N terms, utility <x~, y> of range N, log-weights eps u/(2N)
    claimed = exponential_per_token(eps / (2.0 * n), float(n))
    return _sentence_case("syntf-sentence", eps, SYNTF_SENTENCE_PAIR,
                          lambda words, sentence: syntf_sentence_logp(eps, words, sentence, n), bags=True,
                          claimed=claimed, law=f"SynTF's law, {n} i.i.d. terms at epsilon/(2N) each (a multinomial bag)")


def random_sentence_case(epsilon: float | None = None, delta: float | None = None) -> AuditCase:
    """The ``random-sentence`` case (module docstring): sequences of :data:`RANDOM_SENTENCE_PAIR`'s length.

    ``epsilon``: per token (``None``: :data:`RANDOM_SENTENCE_DEFAULT_EPSILON`); pure ε-DP, so ``delta``
    must be ``None`` or 0. The claim is ``L_max ε`` for the two sentences of ``L_max`` tokens.
    """
    if delta not in (None, 0, 0.0):
        raise ParameterError("random-sentence is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = RANDOM_SENTENCE_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    # the claim: eps per token (|V|-ary randomised response), L_max tokens, basic composition
    claimed = ER_AE_MAX_LENGTH * eps
    return _sentence_case("random-sentence", eps, RANDOM_SENTENCE_PAIR,
                          lambda words, sentence: random_sentence_logp(eps, words, sentence), bags=False,
                          claimed=claimed, law="|V|-ary randomised response per token at epsilon")
