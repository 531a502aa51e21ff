"""Audit cases for the word-level mechanisms (every name of :data:`textdp.mechanisms.MECHANISM_NAMES`).

Each case runs the registered mechanism class itself (``privatize_ids``: its pure batch core,
vectorised over all samples) on one of two public GloVe words, ``n`` times per word, and audits
the released words (discrete events). The claim is the mechanism's own per-word bound for the
pair, :meth:`~textdp.mechanisms.WordLevelMechanism.log_ratio_bound`:

* metric DP (``cmp``, ``vickrey``, ``tem``, ``santext``): ``ε·d`` for two words at Euclidean
  distance ``d`` (TEM: ``ε·min(d, γ)``); ``mahalanobis``: ``ε·d_RM``; ``santext+``: ``ε·d`` for two
  *sensitive* words (the only pairs whose every output is protected);
* ε-DP per word (``custext``, ``custext+``, ``random``): ``ε`` for two words that the mechanism
  protects from each other (CusText: two words of one output set).

Vocabulary: GloVe 6B 50d restricted to its :data:`AUDIT_VOCABULARY` most frequent words (a
public restriction, a valid configuration of every mechanism). Pairs come from fixed public lists;
the default ε per mechanism (:data:`DEFAULT_EPSILON`) puts the claim near
:data:`textdp.audit.cases.TARGET_LOSS`, a loss ~10^5 samples can resolve.

How much of the claim an audit can show is the mechanism's, not the auditor's: the exponential
mechanisms ``exp(-ε d / 2)`` realise about half of ``ε·d`` (the other half covers the normaliser),
and noise-then-decode mechanisms in 50 dimensions far less (see BENCHMARKS.md). A pass is no
proof; a failure at 95% confidence is strong evidence of a bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from .cases import TARGET_LOSS, WORD_PAIRS
from .core import AuditCase

__all__ = [
    "AUDIT_VOCABULARY",
    "DEFAULT_EPSILON",
    "SENSITIVE_PAIRS",
    "choose_mechanism_pair",
    "group_pair",
    "mechanism_case",
    "register_word_level_cases",
    "word_mechanism_case",
]

#: GloVe's most frequent words used by the word-level cases.
AUDIT_VOCABULARY = 5_000
#: Default ε of each case (claims near TARGET_LOSS for the chosen pair).
DEFAULT_EPSILON: dict[str, float] = {
    "cmp": 10.0, "mahalanobis": 10.0, "vickrey": 10.0, "tem": 2.0, "santext": 2.0, "santext+": 2.0,
    "custext": 3.0, "custext+": 3.0, "random": 3.0,
}
#: Pairs of words that are both *sensitive* for SanText+ (outside the 10% most frequent of the
#: 5,000-word audit vocabulary).
SENSITIVE_PAIRS: tuple[tuple[str, str], ...] = (
    ("husband", "wife"), ("boy", "girl"), ("red", "blue"), ("king", "queen"), ("brother", "sister"),
)
#: The word whose CusText output set supplies the pair.
GROUP_ANCHOR = "monday"


def choose_mechanism_pair(mech: Any, candidates: Sequence[tuple[str, str]] | None = None,
                          target: float | None = None) -> tuple[str, str]:
    """The candidate pair (in the vocabulary, finite positive claim) whose claim is closest to ``target``.

    The claim is ``mech.log_ratio_bound``; "closest" is on a log scale. ``candidates`` defaults
    to :data:`textdp.audit.cases.WORD_PAIRS`, ``target`` to :data:`~textdp.audit.cases.TARGET_LOSS`.
    """
    index = mech.embeddings_.index
    goal = TARGET_LOSS if target is None else float(target)
    scored = []
    for p in WORD_PAIRS if candidates is None else candidates:
        if p[0] in index and p[1] in index:
            claim = float(mech.log_ratio_bound(index[p[0]], index[p[1]]))
            if math.isfinite(claim) and claim > 0:
                scored.append((abs(math.log(claim / goal)), p))
    if not scored:
        raise ParameterError(f"{mech.name}: no audit word pair is in the vocabulary with a finite claim")
    return min(scored)[1]


def group_pair(mech: Any, anchor: str = GROUP_ANCHOR) -> tuple[str, str]:
    """Two words of ``anchor``'s CusText output set with the largest exact privacy loss.

    Uses the mechanism's exact law (``probabilities``) to pick the pair only; the audit itself
    samples the mechanism as a black box.
    """
    emb = mech.embeddings_
    if anchor not in emb.index:
        raise ParameterError(f"{mech.name}: audit anchor word {anchor!r} is not in the vocabulary {emb.name}")
    x = emb.index[anchor]
    members = np.array([m for m in np.flatnonzero(mech.groups_ == mech.groups_[x])
                        if math.isfinite(mech.log_ratio_bound(x, int(m)))])  # CusText+: no stop words
    with np.errstate(divide="ignore"):
        logp = np.log(np.stack([mech.probabilities(int(m))[members] for m in members]))
    loss = np.max(np.abs(logp[:, None, :] - logp[None, :, :]), axis=2)
    i, j = np.unravel_index(int(np.argmax(loss)), loss.shape)
    return emb.words[members[i]], emb.words[members[j]]


def mechanism_case(
    name: str,
    mech: Any,
    pair: tuple[str, str] | None = None,
    *,
    claimed_by: Any = None,
    chunk: int = 8_192,
) -> AuditCase:
    """An audit case for a fitted word-level mechanism: two words, discrete events (the released word).

    Parameters
    ----------
    name : str
        Name of the case (the mechanism's registered name for the built-in cases).
    mech : WordLevelMechanism
        The mechanism to sample (``privatize_ids(ids, rng)``), fitted or not.
    pair : (str, str), optional
        The two words (default: :func:`choose_mechanism_pair`).
    claimed_by : WordLevelMechanism, optional
        Whose ``log_ratio_bound`` is the claim (default ``mech``). Tests pass the correct
        mechanism here and a deliberately broken one as ``mech``.
    chunk : int
        Words privatized per call.

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> from textdp.mechanisms import RandomReplacement
    >>> from textdp.audit import run_audit
    >>> emb = Embeddings(["a1", "b2", "c3", "d4"], np.eye(4), name="toy")
    >>> m = RandomReplacement(epsilon=1.0, embeddings=emb, stop_words=None).fit()
    >>> case = mechanism_case("random", m, ("a1", "b2"))
    >>> case.claimed_epsilon, run_audit(case, samples=20_000, seed=0).passed
    (1.0, True)
    """
    mech._ensure_fitted()
    claimer = mech if claimed_by is None else claimed_by
    claimer._ensure_fitted()
    emb = mech.embeddings_
    chosen = choose_mechanism_pair(claimer) if pair is None else pair
    for w in chosen:
        if w not in emb.index:
            raise ParameterError(f"{name}: audit word {w!r} is not in the vocabulary {emb.name}")
    a, b = emb.index[chosen[0]], emb.index[chosen[1]]
    claim = float(claimer.log_ratio_bound(a, b))
    if not math.isfinite(claim):
        raise ParameterError(f"{name}: the words {chosen} are not protected from each other (infinite bound)")

    def sample(x: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(mech.privatize_ids(np.full(n, x, dtype=np.int64), rng))

    return AuditCase(
        mechanism=name,
        pair=(f"words {chosen[0]!r} vs {chosen[1]!r} ({emb.name}); claim = the mechanism's per-word bound "
              f"{claim:.4f} ({claimer.metric}); events: released words"),
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claim,
        events="discrete",
        chunk=check_positive_int(chunk, "chunk"),
    )


def word_mechanism_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                        vocab_size: int = AUDIT_VOCABULARY, pair: tuple[str, str] | None = None,
                        **params: Any) -> AuditCase:
    """The built-in case of the registered word-level mechanism ``name`` (see the module docstring)."""
    from ..embeddings import load_embeddings
    from ..mechanisms import get

    if delta not in (None, 0, 0.0):
        raise ParameterError(f"{name} is pure (metric) DP (delta = 0); --delta does not apply")
    eps = check_epsilon(DEFAULT_EPSILON[name] if epsilon is None else epsilon)
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    # stop words matter to CusText+ only (they pass through unchanged); the others see vocabulary rows
    stops = {} if name == "custext+" else {"stop_words": None}
    mech = get(name, epsilon=eps, embeddings=emb, **stops, **params).fit()
    if pair is None and name in ("custext", "custext+"):
        pair = group_pair(mech)
    elif pair is None and name == "santext+":
        pair = choose_mechanism_pair(mech, [p for p in SENSITIVE_PAIRS if _sensitive(mech, p)])
    return mechanism_case(name, mech, pair)


def _sensitive(mech: Any, pair: tuple[str, str]) -> bool:
    index = mech.embeddings_.index
    return all(w in index and index[w] >= mech.first_sensitive_ for w in pair)


_DESCRIPTIONS = {
    "cmp": "CMP (Laplace noise + nearest word), two GloVe words (claim epsilon*d; default epsilon 10)",
    "mahalanobis": "Mahalanobis noise + nearest word (claim epsilon*d_RM; default epsilon 10)",
    "vickrey": "Vickrey (first/second nearest word of CMP's noisy vector; claim epsilon*d; default epsilon 10)",
    "tem": "truncated exponential mechanism (claim epsilon*min(d, gamma); default epsilon 2)",
    "santext": "SanText exponential mechanism (claim epsilon*d; default epsilon 2)",
    "santext+": "SanText+, two sensitive words (claim epsilon*d; default epsilon 2)",
    "custext": "CusText, two words of one output set (claim epsilon; default 3)",
    "custext+": "CusText+, two non-stop words of one output set (claim epsilon; default 3)",
    "random": "uniform random replacement, |V|-ary randomised response (claim epsilon; default 3)",
}


def _factory(name: str) -> Callable[..., AuditCase]:
    def factory(epsilon: float | None = None, delta: float | None = None) -> AuditCase:
        return word_mechanism_case(name, epsilon, delta)

    return factory


def register_word_level_cases() -> None:
    """Register a case under every word-level name of :data:`DEFAULT_EPSILON` (idempotent)."""
    from .registry import register_audit_case

    for name, text in _DESCRIPTIONS.items():
        register_audit_case(name, _factory(name), description=text, replace=True)
