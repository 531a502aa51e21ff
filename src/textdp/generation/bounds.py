r"""The bounds of sentence rewriting on a textdp model: what textdp's implementation satisfies, per mechanism.

(Composition across releases is :mod:`textdp.accounting`'s; this module states one release's bound.)

The unit is a **sentence**: a segment of at most ``L_max`` tokens (longer sentences are cut
into near-equal segments, each its own unit). Two sentences are neighbours whatever their
content (the local model: any sentence may be replaced by any other), so a bound ``B``
means: for any two sentences ``x, x'`` and any output ``o``,
``P(o | x) <= exp(B) * P(o | x')``. A document's bound is the sum over its sentences
(basic sequential composition, Dwork & Roth 2014, Thm 3.16); the number of sentences is
not protected.

Two-set exponential mechanism (ER-AE, Bo et al., NAACL 2021; poster: "(ε + ln s)-DP")
-------------------------------------------------------------------------------------
At each generation step the model gives a distribution ``p`` over the output alphabet
``V`` (vocabulary words plus the end token; pad, start and unk are never emitted). textdp
draws the lexical multiset ``L`` (``k`` i.i.d. draws from ``p``, the authors' variant),
sets ``S = V \ distinct(L)``, picks ``L`` with probability
``sigmoid(ε_set (u_L − 1/2))`` where ``u_L ∈ [0, 1]`` is the (duplicate-counted,
normalised) mass of ``L`` (the exponential mechanism ``∝ exp(ε_set u / 2)`` over the two
sets with utilities ``u_L`` and ``u_S = 1 − u_L``, sensitivity 1), then draws the word
inside the chosen set with a second exponential mechanism ``∝ exp(ε_word p_w / 2)``
(entries of ``L`` counted with multiplicity). The nominal budget ``ε = ε_set + ε_word``
is split ``ε_word = f ε`` (default ``f = 0.1``; the authors' code uses an uncounted
``ε_tok = 0.1``).

**Per-step bound (textdp's derivation).** Write ``a = ε_set/2`` and ``b = ε_word/2``.
For every input and every history, and every output word ``w``:

* upper: ``P(w) <= e^a / (1 + e^a)`` — whichever set holds ``w``, it is chosen with
  probability at most ``1 / (1 + e^{-a})`` (``u ∈ [0, 1]``);
* lower: ``P(w) >= 1 / ((1 + e^a) · M)`` with
  ``M = max(|V| − 2 + e^b, 1 + (k − 1) e^b)`` — the set holding ``w`` is chosen with
  probability at least ``1 / (1 + e^a)``; inside ``S`` (at most ``|V| − 1`` words,
  weights in ``[1, e^b]``, masses summing to at most 1) ``w`` has probability at least
  ``1 / (|V| − 2 + e^b)``; inside the ``k`` entries of ``L`` at least
  ``1 / (1 + (k − 1) e^b)``.

Hence the per-step privacy loss is at most

.. math:: ε_{tok} = ε_{set}/2 + \ln\max(|V| − 2 + e^{ε_{word}/2},\; 1 + (k − 1) e^{ε_{word}/2}),

whatever the model and however the lexical set was formed. It is attained up to the
``e^b − 1`` term: a point mass on ``w`` against a point mass on ``v ≠ w`` gives the ratio
``e^a (|V| − 1)``. For ``|V| = 10,001`` the ``ln`` term is ``≈ 9.2`` nats: **it, not ε,
dominates** — the nominal ε is a small part of the bound at every ε the authors sweep
(10, 5, 3, 1, ...).

**Per sentence.** Generation runs at most ``L_max`` steps and stops when the mechanism
itself emits the end token, so the output length is decided by the mechanism; every
step's bound holds conditionally on the history (adaptive composition), and the bound
for a sentence is ``L_max · ε_tok`` (the teacher-forced variant feeds the private tokens
back, but the per-step bound does not depend on what the model conditions on).

**Reconciling with the poster.** The poster claims ``(ε + ln s)``-DP. With ``s = |V|``
and ε counting both draws, ``ε_tok <= ε/2 + ln(|V| − 1) + ε_word/2 <= ε + ln|V|``: the
claim holds *per token* (textdp's bound is slightly tighter). It is false if ``s`` is the
size of the lexical set (``ln 5 ≪ ln |V|``), it is per token not per sentence (a sentence
costs ``L_max`` times more), and it does not cover the model (next paragraph).

**The model.** The bound holds for any model, but a model trained (without privacy) on
the sentences being rewritten makes every output depend on every training sentence, and
its vocabulary (the output alphabet) is then private data itself. The guarantee covers
the rewriting step only when the model and vocabulary are public or were trained on data
disjoint from the input; see :data:`MODEL_DATA_CASES`.

AE-DP (one exponential mechanism over the whole vocabulary per step)
--------------------------------------------------------------------
``P(w) ∝ exp(ε p_w / 2)`` with ``p_w ∈ [0, 1]`` (sensitivity 1, McSherry & Talwar 2007,
Thm 6): ``ε`` per step, ``L_max · ε`` per sentence (length protected the same way).

Random-R (uniform random replacement at rate r)
-----------------------------------------------
Each token is kept with probability ``1 − r`` and otherwise replaced by a word drawn
uniformly from ``V`` (out-of-vocabulary tokens are dropped, as in the word family's ``random``,
whose core ``random-sentence`` runs). This is randomized
response over ``V``: ``ε_tok = ln((1 − r + r/|V|) / (r/|V|))``, so
``r = |V| / (|V| + e^{ε_tok} − 1)``. The output length equals the input length and is
not covered; two sentences of equal length ``n`` have bound ``n · ε_tok``.

SynTF: see :mod:`textdp.mechanisms.syntf` (``ε`` per sentence, ``ε/n`` per drawn term).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .._options import MODEL_DATA_CASES
from .._validation import EPSILON_MIN, check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError
from ..guarantees import Guarantee
from ..guarantees.events import RandomizedResponseEvent, SelfComposedEvent

__all__ = [
    "MODEL_DATA_CASES",
    "POSTER_REFERENCE",
    "SENTENCE_REFERENCE",
    "RewriteGuarantee",
    "TwoSetBound",
    "em_bound",
    "em_guarantee",
    "random_r_epsilon",
    "random_r_guarantee",
    "random_r_rate",
    "syntf_guarantee",
    "two_set_bound",
    "two_set_epsilon_for_budget",
    "two_set_guarantee",
]

POSTER_REFERENCE = (
    "Bo, Ding, Fung & Iqbal, 'ER-AE: Differentially Private Text Generation for Authorship Anonymization', "
    "NAACL 2021 (poster: two-set exponential mechanism, claimed (epsilon + ln s)-DP)"
)
SENTENCE_REFERENCE = (
    "Weggenmann & Kerschbaum, SIGIR 2018 (SynTF); k-ary randomised response (Kairouz, Oh & Viswanath 2014); "
    "basic composition: Dwork & Roth 2014, Thm 3.16"
)


def _check_fraction(value: float, name: str) -> float:
    v = float(value)
    if not (0.0 <= v < 1.0) or math.isnan(v):
        raise ParameterError(f"{name} must lie in [0, 1), got {value!r}")
    return v


@dataclass(frozen=True)
class TwoSetBound:
    """The documented composition of the two-set exponential mechanism (module docstring).

    Attributes
    ----------
    epsilon : float
        Nominal per-step budget ε = ε_set + ε_word.
    epsilon_set, epsilon_word : float
        The two counted draws.
    vocab_size : int
        Output alphabet size |V| (words + end token).
    k : int
        Draws forming the lexical set.
    length : int
        Steps composed (``L_max``).
    log_term : float
        ``ln max(|V| − 2 + e^{ε_word/2}, 1 + (k − 1) e^{ε_word/2})``.
    per_token : float
        ``ε_set / 2 + log_term``.
    per_sentence : float
        ``length · per_token``.
    poster_claim_per_token : float
        The poster's ``ε + ln s`` with ``s = |V|`` (for comparison only).
    """

    epsilon: float
    epsilon_set: float
    epsilon_word: float
    vocab_size: int
    k: int
    length: int
    log_term: float
    per_token: float
    per_sentence: float
    poster_claim_per_token: float

    @property
    def log_share(self) -> float:
        """Fraction of the per-token bound that the ``ln |V|`` term accounts for."""
        return self.log_term / self.per_token

    def document(self, n_sentences: int) -> float:
        """Bound for a document of ``n_sentences`` sentences (the sum over them)."""
        return check_positive_int(n_sentences, "n_sentences") * self.per_sentence

    def to_dict(self) -> dict[str, object]:
        """Plain-data form."""
        out = asdict(self)
        out["log_share"] = self.log_share
        return out


def two_set_bound(
    epsilon: float, vocab_size: int, length: int = 1, *, word_fraction: float = 0.1, k: int = 5
) -> TwoSetBound:
    """Per-token and per-sentence bound of textdp's two-set exponential mechanism.

    Parameters
    ----------
    epsilon : float
        Nominal per-step budget ε, split ``ε_word = word_fraction · ε`` and
        ``ε_set = ε − ε_word`` (both counted).
    vocab_size : int
        Output alphabet size |V| (words plus the end token), at least ``k + 1``.
    length : int
        Composed steps: the public maximum length ``L_max``.
    word_fraction : float
        Share of ε for the draw inside the chosen set, in [0, 1).
    k : int
        Lexical-set draws (5, the authors' value).

    Returns
    -------
    TwoSetBound
        ``per_token = ε_set/2 + ln max(|V|−2+e^{ε_word/2}, 1+(k−1)e^{ε_word/2})`` and
        ``per_sentence = length · per_token``.

    Examples
    --------
    >>> b = two_set_bound(5.0, 10_001, 32)
    >>> round(b.epsilon_set, 2), round(b.epsilon_word, 2)
    (4.5, 0.5)
    >>> round(b.per_token, 3), round(b.per_sentence, 1)
    (11.46, 366.7)
    >>> b.log_share > 0.8       # ln|V| dominates
    True
    """
    eps = check_epsilon(epsilon)
    v = check_positive_int(vocab_size, "vocab_size", minimum=2)
    n = check_positive_int(length, "length")
    k = check_positive_int(k, "k")
    f = _check_fraction(word_fraction, "word_fraction")
    if v < k + 1:
        raise ParameterError(f"vocab_size must be at least k + 1 = {k + 1}, got {v}")
    e_word = f * eps
    e_set = eps - e_word
    b = e_word / 2.0
    # ln(max(V - 2 + e^b, 1 + (k-1) e^b)) computed stably for large b
    s_term = b + math.log((v - 2) * math.exp(-b) + 1.0)
    l_term = b + math.log(math.exp(-b) + (k - 1))
    log_term = max(s_term, l_term)
    per_token = e_set / 2.0 + log_term
    return TwoSetBound(
        epsilon=eps, epsilon_set=e_set, epsilon_word=e_word, vocab_size=v, k=k, length=n,
        log_term=log_term, per_token=per_token, per_sentence=n * per_token,
        poster_claim_per_token=eps + math.log(v),
    )


def two_set_epsilon_for_budget(
    per_sentence: float, vocab_size: int, length: int, *, word_fraction: float = 0.1, k: int = 5
) -> float | None:
    """The nominal ε whose two-set per-sentence bound equals ``per_sentence`` (``None`` if unreachable).

    The bound is increasing in ε and at least ``length · ln(|V| − 1)``; below that no ε
    reaches the budget.

    >>> eps = two_set_epsilon_for_budget(366.7, 10_001, 32)
    >>> round(eps, 1)
    5.0
    >>> two_set_epsilon_for_budget(100.0, 10_001, 32) is None
    True
    """
    target = check_epsilon(per_sentence, "per_sentence")

    def bound(e: float) -> float:
        return two_set_bound(e, vocab_size, length, word_fraction=word_fraction, k=k).per_sentence

    lo, hi = EPSILON_MIN, 1.0
    if bound(lo) > target:
        return None
    while bound(hi) < target:
        hi *= 2.0
        if hi > 1e9:
            raise ParameterError(f"per_sentence budget {per_sentence!r} is too large")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if bound(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def em_bound(epsilon: float, length: int = 1) -> float:
    """AE-DP: one exponential mechanism per step with utility in [0, 1] is ε-DP; ``length · ε`` per sentence.

    >>> em_bound(10.0, 32)
    320.0
    """
    return check_positive_int(length, "length") * check_epsilon(epsilon)


def random_r_epsilon(rate: float, vocab_size: int) -> float:
    """Per-token ε of uniform random replacement at ``rate`` over ``vocab_size`` words (randomized response).

    ``ln((1 − r + r/|V|) / (r/|V|))``.

    >>> round(random_r_epsilon(0.5, 10_000), 3)
    9.21
    """
    r = float(rate)
    if not (0.0 < r <= 1.0):
        raise ParameterError(f"rate must lie in (0, 1], got {rate!r}")
    v = check_positive_int(vocab_size, "vocab_size", minimum=2)
    return math.log((1.0 - r + r / v) / (r / v))


def random_r_rate(epsilon: float, vocab_size: int) -> float:
    """The replacement rate whose per-token ε is ``epsilon``: ``|V| / (|V| + e^ε − 1)``.

    >>> round(random_r_rate(random_r_epsilon(0.3, 5000), 5000), 6)
    0.3
    """
    e = check_epsilon(epsilon)
    v = check_positive_int(vocab_size, "vocab_size", minimum=2)
    # |V| / (|V| + e^e - 1) computed without overflow
    return 1.0 / (1.0 + math.expm1(e) / v) if e < 700 else math.exp(math.log(v) - e)


@dataclass(frozen=True, kw_only=True)
class RewriteGuarantee(Guarantee):
    """The per-sentence guarantee of one rewrite (a :class:`textdp.guarantees.Guarantee`).

    Attributes
    ----------
    mechanism : str
        ``er-ae``, ``ae-dp``, ``syntf-sentence`` or ``random-sentence``.
    epsilon : float
        The per-sentence (per-segment) bound (pure DP, ``delta = 0``) for the rewriting step.
    epsilon_parameter : float
        The mechanism parameter the user chose (per step for er-ae/ae-dp/random-sentence,
        per sentence for syntf-sentence).
    per_token : float
        The per-step bound (``epsilon / max_length`` where the length is protected).
    max_length : int
        ``L_max``: tokens per sentence (segment) and steps composed.
    vocab_size : int
        Output alphabet size.
    model_data : str
        One of :data:`MODEL_DATA_CASES`, or ``"none"`` for ``syntf-sentence``/``random-sentence``
        over a public (GloVe-derived) vocabulary.
    covered : bool
        Whether the model/vocabulary case lets the bound cover the rewriting step.
    length_covered : bool
        Whether the output length is protected by the mechanism.
    uses_model : bool
        Whether the mechanism runs the model's network (else only its vocabulary).
    detail : str
        Mechanism-specific derivation (in the statement).
    unit : str
        Always ``"sentence"`` (a segment of at most ``max_length`` tokens); a record of a line
        of ``m`` segments states ``units = m`` and the total ``m * epsilon``.

    Examples
    --------
    >>> from textdp.guarantees import Guarantee
    >>> g = em_guarantee("ae-dp", 10.0, vocab_size=10_001, max_length=32, model_data="disjoint")
    >>> g.epsilon, g.unit, isinstance(g, Guarantee)
    (320.0, 'sentence', True)
    >>> sorted(g.params)[:4]
    ['covered', 'epsilon_parameter', 'length_covered', 'max_length']
    """

    epsilon_parameter: float
    per_token: float
    max_length: int
    vocab_size: int
    model_data: str
    covered: bool
    length_covered: bool
    detail: str
    uses_model: bool = True
    unit: str = "sentence"

    def _derive(self) -> dict[str, object]:
        head = (
            f"{self.mechanism}: epsilon-DP per sentence with epsilon={self.epsilon:.4g} (pure, delta=0), where a "
            f"sentence is a segment of at most {self.max_length} tokens (longer sentences are cut into segments) and "
            f"any two sentences are neighbours: any output is at most exp({self.epsilon:.4g}) times more likely from "
            f"one sentence than from any other. {self.detail}"
        )
        if self.model_data == "none":
            model = "The output vocabulary is public (GloVe's word list, independent of any private data)."
        elif not self.uses_model:
            model = ("Vocabulary (this mechanism uses no model, only the model's vocabulary): "
                     f"{MODEL_DATA_CASES[self.model_data][1]}.")
        else:
            model = f"Model: {MODEL_DATA_CASES[self.model_data][1]}."
        not_covered = "the number of sentences (segments) of a document"
        if not self.length_covered:
            not_covered += ", the length of each sentence (the output has one word per in-vocabulary input token)"
        if not self.covered:
            not_covered += ", what the model (or vocabulary) memorised of its training data"
        composition = (f"A line (document) of m segments costs m*{self.epsilon:.4g} (basic sequential composition: "
                       "every record states its number of segments, units, and that total).")
        return {
            "statement": f"{head} {composition} Not covered: {not_covered}. {model}",
            "not_covered": not_covered + ".",
            "composition": composition,
            "parameters": (
                ("epsilon_parameter", self.epsilon_parameter), ("per_token", self.per_token),
                ("max_length", self.max_length), ("vocab_size", self.vocab_size), ("model_data", self.model_data),
                ("covered", self.covered), ("length_covered", self.length_covered),
            ),
        }


def _case(mechanism: str, epsilon: float, vocab_size: int, max_length: int, model_data: str,
          uses_model: bool) -> tuple[float, int, int, bool]:
    """Checked ``(ε, |V|, L_max, covered)``; ``model_data="none"`` only for a mechanism that uses no model."""
    eps = check_epsilon(epsilon)
    v = check_positive_int(vocab_size, "vocab_size", minimum=2)
    n = check_positive_int(max_length, "max_length")
    check_choice(model_data, "model data case", (*MODEL_DATA_CASES, "none"))
    if model_data == "none" and uses_model:
        raise ParameterError(f"{mechanism} uses a model: say which data it saw (one of {', '.join(MODEL_DATA_CASES)})")
    return eps, v, n, True if model_data == "none" else MODEL_DATA_CASES[model_data][0]


def two_set_guarantee(mechanism: str, epsilon: float, *, vocab_size: int, max_length: int,
                      model_data: str = "unknown", word_fraction: float = 0.1, k: int = 5) -> RewriteGuarantee:
    """ER-AE's :class:`RewriteGuarantee`: :func:`two_set_bound` per sentence at the nominal per-step ``epsilon``.

    >>> g = two_set_guarantee("er-ae", 5.0, vocab_size=10_001, max_length=32, model_data="public")
    >>> round(g.epsilon, 1), g.covered, g.length_covered
    (366.7, True, True)
    >>> "dominates" in g.statement
    True
    """
    eps, v, n, covered = _case(mechanism, epsilon, vocab_size, max_length, model_data, True)
    b = two_set_bound(eps, v, n, word_fraction=word_fraction, k=k)
    detail = (
        f"Two-set exponential mechanism, textdp's bound (not the poster's epsilon + ln s): per generation step "
        f"epsilon_set/2 + ln max(|V|-2+e^(epsilon_word/2), 1+(k-1)e^(epsilon_word/2)) = {b.epsilon_set / 2:.3g} + "
        f"{b.log_term:.3g} = {b.per_token:.4g} nats, with nominal epsilon={eps:g} split into epsilon_set="
        f"{b.epsilon_set:.3g} and epsilon_word={b.epsilon_word:.3g} (both counted), k={k}, |V|={v}. The ln|V| term "
        f"dominates ({100 * b.log_share:.0f}% of the per-step bound): the nominal epsilon adds little to it. "
        f"Composed over L_max={n} steps; the output length is covered (the end token is drawn by the mechanism)."
    )
    return RewriteGuarantee(mechanism=mechanism, epsilon=b.per_sentence, epsilon_parameter=eps,
                            per_token=b.per_token, max_length=n, vocab_size=v, model_data=model_data,
                            covered=covered, length_covered=True, detail=detail, reference=POSTER_REFERENCE)


def em_guarantee(mechanism: str, epsilon: float, *, vocab_size: int, max_length: int,
                 model_data: str = "unknown") -> RewriteGuarantee:
    """AE-DP's :class:`RewriteGuarantee`: ``epsilon`` per step (:func:`em_bound`), ``L_max`` steps per sentence."""
    eps, v, n, covered = _case(mechanism, epsilon, vocab_size, max_length, model_data, True)
    detail = (
        f"One exponential mechanism over the whole vocabulary per step, P(w) ~ exp(epsilon p_w / 2) with p_w in "
        f"[0, 1]: epsilon={eps:g} per step (|V|={v}), composed over L_max={n} steps; the output length is covered "
        "(the end token is drawn by the mechanism)."
    )
    return RewriteGuarantee(mechanism=mechanism, epsilon=em_bound(eps, n), epsilon_parameter=eps, per_token=eps,
                            max_length=n, vocab_size=v, model_data=model_data, covered=covered,
                            length_covered=True, detail=detail, reference=POSTER_REFERENCE)


def random_r_guarantee(mechanism: str, epsilon: float, *, vocab_size: int, max_length: int,
                       model_data: str = "unknown") -> RewriteGuarantee:
    """Random-R's :class:`RewriteGuarantee`: ``epsilon`` per token (rate :func:`random_r_rate`), length not covered."""
    eps, v, n, covered = _case(mechanism, epsilon, vocab_size, max_length, model_data, False)
    rate = random_r_rate(eps, v)
    detail = (
        f"Uniform random replacement at rate r={rate:.6g} (randomized response over |V|={v} words, the word "
        f"family's 'random' core): per token ln((1-r+r/|V|)/(r/|V|)) = {eps:g}, composed over at most L_max={n} "
        "tokens, for two sentences of the same length; out-of-vocabulary tokens are dropped (never released), "
        "so the output length equals the number of in-vocabulary tokens and is NOT covered."
    )
    event = SelfComposedEvent(RandomizedResponseEvent(noise_parameter=rate, num_buckets=v), n)
    return RewriteGuarantee(mechanism=mechanism, epsilon=eps * n, epsilon_parameter=eps, per_token=eps,
                            max_length=n, vocab_size=v, model_data=model_data, covered=covered,
                            length_covered=False, detail=detail, uses_model=False, reference=SENTENCE_REFERENCE,
                            event=event)


def syntf_guarantee(mechanism: str, epsilon: float, *, vocab_size: int, max_length: int,
                    model_data: str = "unknown", syntf_size: int | None = None) -> RewriteGuarantee:
    """SynTF's :class:`RewriteGuarantee`: ``epsilon`` per sentence, a bag of ``syntf_size`` (default ``L_max``) terms."""
    eps, v, n, covered = _case(mechanism, epsilon, vocab_size, max_length, model_data, False)
    size = check_positive_int(syntf_size if syntf_size is not None else n, "syntf_size")
    detail = (
        f"SynTF (Weggenmann & Kerschbaum, SIGIR 2018): a bag of {size} terms sampled by the exponential mechanism "
        f"over term-frequency vectors of l1 norm {size} with utility <w, y> (w: the sentence's term weights scaled "
        f"to [0, 1]; sensitivity {size}), i.e. {size} i.i.d. terms with P(t) ~ exp(epsilon w_t / (2 * {size})): "
        f"epsilon={eps:g} per sentence ({eps / size:.4g} per term); the bag size is public, word order is not released."
    )
    return RewriteGuarantee(mechanism=mechanism, epsilon=eps, epsilon_parameter=eps, per_token=eps / size,
                            max_length=n, vocab_size=v, model_data=model_data, covered=covered, length_covered=True,
                            detail=detail, uses_model=False, reference=SENTENCE_REFERENCE)
