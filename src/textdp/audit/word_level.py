"""Audit cases for the word-level mechanisms (every name of :data:`textdp.mechanisms.MECHANISM_NAMES`).

Each case releases one of two public GloVe words, ``n`` times per word, through the registered
class's ``privatize_batch`` (one call of ``n`` one-word documents, :func:`~textdp.audit.release_batch.text_batch`:
the path of ``textdp obfuscate`` and ``release()``, the class's ``_privatize``), and audits the
released words (discrete events). The claim is the mechanism's per-word bound for the pair,
computed by :func:`textdp.audit.claims.word_claim` from the public parameters the case was given
(ε, the vocabulary, β or λ), never read from the mechanism object (whose ``epsilon_`` the sampler
also reads, so a bug inflating both would go unseen):

* metric DP (``cmp``, ``vickrey``, ``tem``, ``santext``): ``ε·d`` for two words at Euclidean
  distance ``d`` (TEM: ``ε·min(d, γ)``); ``mahalanobis``: ``ε·d_RM``; ``santext+``: ``ε·d`` for two
  *sensitive* words (the only pairs whose every output is protected);
* ε-DP per word (``custext``, ``custext+``, ``random``): ``ε`` for two words that the mechanism
  protects from each other (CusText: two words of one output set).

Vocabulary: GloVe 6B 50d restricted to its :data:`AUDIT_VOCABULARY` most frequent words (a
public restriction, a valid configuration of every mechanism). Pairs come from fixed public lists;
the default ε per mechanism (:data:`DEFAULT_EPSILON`) puts the claim near
:data:`textdp.audit.word_cases.TARGET_LOSS`, a loss ~10^5 samples can resolve.

How much of the claim an audit can show is the mechanism's, not the auditor's: the exponential
mechanisms ``exp(-ε d / 2)`` realise about half of ``ε·d`` (the other half covers the normaliser),
and noise-then-decode mechanisms in 50 dimensions far less (see BENCHMARKS.md). So the cases whose
claimed law is known also audit the whole privacy curve (:mod:`textdp.audit.curve`), with the
claimed law computed from the public parameters only (:mod:`textdp.audit.claims`):

* ``cmp``, ``mahalanobis`` and ``vickrey`` on the noisy vectors before decoding (exact loss of the
  claimed noise density; Vickrey's threshold rule is post-processing of its noisy vector, and with
  ``lambd`` its noise and claim are the Mahalanobis ones);
* ``santext`` and ``tem`` on the released words (exact loss from the claimed score table);
* ``random`` on the released words: the exact law of |V|-ary randomised response at ε
  (:func:`~textdp.audit.claims.randomized_response_logp`);
* ``custext`` and ``custext+`` on the released words: CusText's exact law in the output set of the
  pair, the sets recomputed from the public vocabulary and ``top_k``
  (:func:`~textdp.audit.claims.custext_logp`); CusText+ differs only in releasing stop words
  unchanged, and its pair is two non-stop words, whose law is CusText's.

* ``santext+`` on the released words of two sensitive words: the exponential mechanism over the
  sensitive rows only, the frequency split recomputed from the public ``V`` and
  ``sensitive_fraction`` (:func:`~textdp.audit.claims.first_sensitive_row`).

A pass is no proof; a failure at 95% confidence is strong evidence of a bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from .claimed_curves import metric_noise_curve, selected_noise_curve, table_curve
from .claims import (
    CUSTEXT_TOP_K,
    SANTEXT_SENSITIVE_FRACTION,
    VICKREY_T,
    WORD_CLAIMS,
    WordClaim,
    as_float,
    as_int,
    custext_logp,
    custext_output_sets,
    first_sensitive_row,
    word_claim,
    word_claim_of,
)
from .conformance import Conformance
from .core import AuditCase
from .curve import PrivacyCurve
from .public_lists import audit_stop_words
from .release_batch import text_batch
from .word_cases import EXACT_DECODERS, TARGET_LOSS, WORD_PAIRS, decoded_conformance

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from ..mechanisms.word_level import WordLevelMechanism

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
#: Default ε of each case (claims near TARGET_LOSS for the chosen pair), as declared in :mod:`textdp.audit.claims`.
DEFAULT_EPSILON: Mapping[str, float] = MappingProxyType({n: c.default_epsilon for n, c in WORD_CLAIMS.items()})
#: Pairs of words that are both *sensitive* for SanText+ (outside the 10% most frequent of the
#: 5,000-word audit vocabulary).
SENSITIVE_PAIRS: tuple[tuple[str, str], ...] = (
    ("husband", "wife"), ("boy", "girl"), ("red", "blue"), ("king", "queen"), ("brother", "sister"),
)
#: The word whose CusText output set supplies the pair.
GROUP_ANCHOR = "monday"


def choose_mechanism_pair(name: str, epsilon: float, embeddings: Embeddings,
                          pairs: Sequence[tuple[str, str]] | None = None,
                          target: float | None = None, **params: object) -> tuple[str, str]:
    """The candidate pair (in the vocabulary, positive claim) whose claim is closest to ``target``.

    The claim is :func:`~textdp.audit.claims.word_claim` (public parameters only); "closest" is on
    a log scale. ``pairs`` (the candidates) defaults to :data:`textdp.audit.word_cases.WORD_PAIRS`, ``target`` to
    :data:`~textdp.audit.word_cases.TARGET_LOSS`.
    """
    index = embeddings.index
    goal = TARGET_LOSS if target is None else float(target)
    scored = []
    for p in WORD_PAIRS if pairs is None else pairs:
        if p[0] in index and p[1] in index:
            claim = word_claim(name, epsilon, embeddings.vectors, index[p[0]], index[p[1]], **params)
            if math.isfinite(claim) and claim > 0:
                scored.append((abs(math.log(claim / goal)), p))
    if not scored:
        raise ParameterError(f"{name}: no audit word pair is in the vocabulary with a finite claim")
    return min(scored)[1]


def group_pair(embeddings: Embeddings, anchor: str = GROUP_ANCHOR, *, top_k: object = None,
               stop_words: object = None, epsilon: float = 1.0) -> tuple[str, str]:
    """Two words of ``anchor``'s CusText output set with the largest privacy loss of CusText's law.

    The output sets and the law are the audit's own (:func:`~textdp.audit.claims.custext_output_sets`,
    :func:`~textdp.audit.claims.custext_logp`: the public vectors, ``top_k`` and ε); stop words
    (CusText+ releases them unchanged) are left out by the audit's own list. Nothing is read from
    the mechanism.
    """
    emb = embeddings
    if anchor not in emb.index:
        raise ParameterError(f"custext: audit anchor word {anchor!r} is not in the vocabulary {emb.name}")
    k = CUSTEXT_TOP_K if top_k is None else as_int(top_k, "top_k")
    sets = custext_output_sets(emb.vectors, k)
    stops = audit_stop_words(stop_words)
    x = emb.index[anchor]
    members = [int(m) for m in np.flatnonzero(sets == sets[x]) if emb.words[m] not in stops]
    if len(members) < 2:
        raise ParameterError(f"custext: the output set of {anchor!r} holds fewer than two audited words")
    logp = custext_logp(emb.vectors, epsilon, k, tuple(members))[:, members]
    loss = np.max(np.abs(logp[:, None, :] - logp[None, :, :]), axis=2)
    i, j = np.unravel_index(int(np.argmax(loss)), loss.shape)
    return emb.words[members[i]], emb.words[members[j]]


def mechanism_case(name: str, mech: WordLevelMechanism, pair: tuple[str, str] | None = None, *, epsilon: float,
                   embeddings: Embeddings | None = None, claim_name: str | None = None, curve: bool = True,
                   chunk: int = 8_192, **params: object) -> AuditCase:
    """An audit case for a fitted word-level mechanism: two words, discrete events (the released word).

    Parameters
    ----------
    name : str
        Name of the case (the mechanism's registered name for the built-in cases).
    mech : WordLevelMechanism
        The mechanism to sample (its ``privatize_batch``: one-word documents), fitted or not. It is
        sampled only: the claim never reads it.
    pair : (str, str), optional
        The two words (default: :func:`choose_mechanism_pair`).
    epsilon : float
        The public ε the mechanism was asked for: the claim is computed from it.
    embeddings : Embeddings, optional
        The public vocabulary the mechanism was given (default: the one it holds).
    claim_name : str, optional
        Which mechanism's claim to compute (default ``name``; tests name a broken variant).
    curve : bool
        Also audit the privacy curve (the claimed law is known for every name).
    chunk : int
        Words privatized per call.
    **params
        Public parameters of the claim (``beta`` for TEM, ``lambd`` for Mahalanobis and Vickrey,
        ``top_k`` for CusText, ``stop_words`` for CusText+).

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> from textdp.mechanisms import RandomReplacement
    >>> from textdp.audit import run_audit
    >>> emb = Embeddings(["alpha", "beta", "gamma", "delta"], np.eye(4), name="toy")
    >>> m = RandomReplacement(epsilon=1.0, embeddings=emb, stop_words=None).fit()
    >>> case = mechanism_case("random", m, ("alpha", "beta"), epsilon=1.0)
    >>> case.claimed_epsilon, run_audit(case, samples=20_000, seed=0).passed
    (1.0, True)
    """
    mech._ensure_fitted()
    eps = check_epsilon(epsilon)
    kind = name if claim_name is None else claim_name
    emb = mech.embeddings_ if embeddings is None else embeddings
    chosen = choose_mechanism_pair(kind, eps, emb, None, None, **params) if pair is None else pair
    for w in chosen:
        if w not in emb.index:
            raise ParameterError(f"{name}: audit word {w!r} is not in the vocabulary {emb.name}")
    a, b = emb.index[chosen[0]], emb.index[chosen[1]]
    claim = word_claim(kind, eps, emb.vectors, a, b, **params)
    if not math.isfinite(claim):
        raise ParameterError(f"{name}: the words {chosen} are not protected from each other (infinite bound)")

    release = text_batch(mech, emb.words, name)

    def sample(x: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return release(np.full(n, x, dtype=np.int64), rng)

    spec = word_claim_of(kind)
    law = _curve(spec, eps, emb, a, b, sample, **params) if curve else None
    return AuditCase(
        mechanism=name,
        pair=(f"words {chosen[0]!r} vs {chosen[1]!r} ({emb.name}); claim {claim:.4f} computed from the public "
              f"epsilon={eps:g} and the vocabulary; events: released words"),
        input_a=a,
        input_b=b,
        sample=sample,
        claimed_epsilon=claim,
        events="discrete",
        chunk=check_positive_int(chunk, "chunk"),
        curve=law,
        conformance=_conformance(spec, eps, emb, a, b, **params),
    )


def _tables(spec: WordClaim, eps: float, emb: Embeddings, a: int, b: int,
            **params: object) -> tuple[np.ndarray, np.ndarray, str] | None:
    """The claimed law's two tables (public parameters only), where the claim declares them."""
    if spec.tables is None:
        return None
    return spec.tables(eps, emb.vectors, a, b, words=(emb.words[a], emb.words[b]), **params)


def _curve(spec: WordClaim, eps: float, emb: Embeddings, a: int, b: int,
           sample: Callable[[int, int, np.random.Generator], np.ndarray], **params: object) -> PrivacyCurve | None:
    """The privacy curve of the claimed law, where it is known (else ``None``); public parameters only."""
    kind = spec.name
    if spec.noise is not None:
        # the released words (after decoding / Vickrey's threshold rule), against the claimed noise law's
        # profile, which bounds theirs by post-processing; the noise helper is never sampled
        vectors = emb.vectors
        noise = metric_noise_curve(sample, vectors[a], vectors[b], eps, transform=spec.noise(vectors, **params),
                                   what=f"{kind}'s noise")
        return selected_noise_curve(sample, noise, f"{kind}'s released words" + (" after its threshold rule"
                                                                                 if spec.threshold else ""))
    tables = _tables(spec, eps, emb, a, b, **params)
    if tables is None:
        return None
    return table_curve(sample, tables[0], tables[1], what=f"{kind}'s released words", law=tables[2])


def _conformance(spec: WordClaim, eps: float, emb: Embeddings, a: int, b: int, **params: object) -> Conformance | None:
    """The released words against the paper's law: its exact table, or the reference sampler (noise + decoding)."""
    kind = spec.name
    if spec.noise is not None and (params.get("postprocess") is not None
                                   or params.get("decoder", "exact") not in EXACT_DECODERS):
        return None  # not the exact nearest word: the reference law does not apply (the privacy tests still do)
    if spec.noise is not None:
        transform = spec.noise(emb.vectors, **params)
        root = None if transform is None else np.linalg.inv(transform)
        t = as_float(params.get("t", VICKREY_T), "t") if spec.threshold else None
        return decoded_conformance(emb.vectors, eps, root=root, vickrey_t=t, what=f"{kind}'s released words")
    tables = _tables(spec, eps, emb, a, b, **params)
    if tables is None:
        return None
    pa, pb = np.exp(tables[0]), np.exp(tables[1])
    return Conformance(description=f"{kind}'s released words vs the exact table of its law (textdp.audit.claims)",
                       kind="table", keep=lambda x, out: np.asarray(out).reshape(-1),
                       table=lambda x: pa if x == a else pb)


def word_mechanism_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                        vocab_size: int = AUDIT_VOCABULARY, pair: tuple[str, str] | None = None,
                        mechanism: WordLevelMechanism | None = None, **params: object) -> AuditCase:
    """The built-in case of the registered word-level mechanism ``name`` (see the module docstring).

    ``mechanism``: sample this (fitted) instance instead of building one (tests pass deliberately
    broken variants; the claim still comes from ``epsilon`` and the public vocabulary).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import get
    from ..mechanisms.word_level import WordLevelMechanism

    spec = word_claim_of(name)
    if delta not in (None, 0, 0.0):
        raise ParameterError(f"{name} is pure (metric) DP (delta = 0); --delta does not apply")
    eps = check_epsilon(spec.default_epsilon if epsilon is None else epsilon)
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    # stop words matter to CusText+ only (they pass through unchanged); the others see vocabulary rows
    stops = {} if spec.stop_words or "stop_words" in params else {"stop_words": None}
    mech = get(name, epsilon=eps, embeddings=emb, **stops, **params).fit() if mechanism is None else mechanism
    if not isinstance(mech, WordLevelMechanism):
        raise ParameterError(f"{name} is not a word-level mechanism ({type(mech).__name__})")
    if pair is None and spec.pair == "output-set":
        pair = group_pair(emb, top_k=params.get("top_k"), epsilon=eps,
                          stop_words=params.get("stop_words", "english") if spec.stop_words else None)
    elif pair is None and spec.pair == "sensitive":
        fraction = as_float(params.get("sensitive_fraction", SANTEXT_SENSITIVE_FRACTION), "sensitive_fraction")
        first = first_sensitive_row(emb.vocab_size, fraction)
        pair = choose_mechanism_pair(name, eps, emb, [p for p in SENSITIVE_PAIRS if _sensitive(emb, first, p)],
                                     None, **params)
    if spec.stop_words and pair is not None and getattr(mech, "keeps_stop_words", False):  # CusText+'s own branch
        from .word_cases import custext_plus_document_case

        doc = custext_plus_document_case(name, mech, pair, eps, emb, **params)
        if doc is not None:
            return doc
    # the case's own options at their defaults: params are the mechanism's (``get`` refused any other name)
    return mechanism_case(name, mech, pair, epsilon=eps, embeddings=emb, claim_name=None, curve=True, chunk=8_192,
                          **params)


def _sensitive(emb: Embeddings, first: int, pair: tuple[str, str]) -> bool:
    """Both words are SanText+-sensitive: rows from ``first`` on (the audit's own split of the public vocabulary)."""
    index = emb.index
    return all(w in index and index[w] >= first for w in pair)


def _factory(name: str) -> Callable[..., AuditCase]:
    def factory(epsilon: float | None = None, delta: float | None = None, **params: object) -> AuditCase:
        """The case at ``epsilon``, with the mechanism's own ``params`` (``lambd``, ``beta``, ``top_k``, ...)."""
        fixed = sorted(set(params) & {"epsilon", "embeddings", "seed", "vocab_size", "pair", "mechanism"})
        if fixed:
            raise ParameterError(f"{name}: the audit sets {', '.join(fixed)} itself (epsilon with --epsilon; the "
                                 f"vocabulary is GloVe's {AUDIT_VOCABULARY:,} most frequent words)")
        for key, why in word_claim_of(name).refuses:
            if key in params:
                raise ParameterError(f"{name}: {why}")
        return word_mechanism_case(name, epsilon, delta, vocab_size=AUDIT_VOCABULARY, pair=None, mechanism=None,
                                   **params)

    return factory


def register_word_level_cases() -> None:
    """Register a case under every word-level claim declared in :mod:`textdp.audit.claims` (idempotent)."""
    from .registry import register_audit_case

    for name, spec in WORD_CLAIMS.items():
        register_audit_case(name, _factory(name), description=spec.description, replace=True, takes_params=True)
