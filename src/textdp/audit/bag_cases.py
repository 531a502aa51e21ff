"""The bag-of-words document mechanisms' cases: Earth Mover's privacy (its released words, its noise) and SynTF.

* ``earth-movers`` -- two GloVe words ``w_a``, ``w_b`` (bags of N = 1 word) at Euclidean distance ``d``;
  the claim of Theorem 5.1 is ``ε·N·E_d = ε·d``. The pair is picked from a fixed public list
  (:func:`~textdp.audit.word_cases.choose_word_pair`); outputs are decoded against the
  :data:`EARTH_MOVERS_VOCABULARY` most frequent words (a public vocabulary restriction, which is
  post-processing), events are the decoded words.
* ``earth-movers-noise`` -- the same pair, auditing the noisy vectors the release itself decodes (Algorithm 1
  inside ``privatize_batch``, observed through a recording decoder) with the tails of their likelihood-ratio
  statistic: a much sharper check of the noise (decoding is post-processing, so the claim is the same).
* ``earth-movers-2d`` -- Algorithm 1 on GloVe's first two coordinates, where those tails carry almost all of
  ε·d (a halved noise scale is caught; in 50-d it cannot be, see BENCHMARKS.md).
* ``syntf`` -- SynTF (ε-DP per document) over the public vocabulary of the ten GloVe words
  :data:`SYNTF_AUDIT_WORDS`: document ``a`` is the one word ``monday``, document ``b`` the nine others once
  each (the pair whose log-normalisers differ most, so the loss of the output ``monday`` is
  ``ε/2 + ln((1 + 9 e^{ε/2}) / (e^{ε/2} + 9))``: 2.62 of the claimed 3 at ε = 3 with N = 1; two one-word
  documents only reach ε/2). Events are the released bags; the claim is ε.

Each samples the registered class's ``privatize_batch`` (:func:`~textdp.audit.release_batch.text_batch`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from .claimed_curves import bag_curve, metric_noise_curve, selected_noise_curve, table_curve
from .claims import syntf_logp
from .conformance import Conformance
from .core import AuditCase
from .release_batch import copies_sampler, text_batch
from .word_cases import EXACT_DECODERS, choose_word_pair, decoded_conformance, word_pair_case

__all__ = [
    "EARTH_MOVERS_PARAMS",
    "EARTH_MOVERS_VOCABULARY",
    "SYNTF_AUDIT_WORDS",
    "earth_movers_case",
    "earth_movers_noise_case",
    "syntf_case",
]


#: Vocabulary the ``earth-movers`` case decodes to (GloVe's most frequent words).
EARTH_MOVERS_VOCABULARY = 5_000
#: The mechanism parameters ``textdp audit earth-movers --param KEY=VALUE`` takes (each changes the released law
#: or its decoding; ``size`` is the bag size N).
EARTH_MOVERS_PARAMS = ("size", "bag", "decoder", "postprocess", "candidates", "known_source")


def _recording(decoder: object) -> object:
    """A decoder that keeps the noisy vectors it is given (the release's own Algorithm 1 output)."""

    class Recording:
        seen: list[np.ndarray]

        def __init__(self) -> None:
            self.seen = []
            self.name = getattr(decoder, "name", "exact")

        def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
            self.seen.append(np.array(queries, dtype=np.float64))
            inner = decoder.decode  # type: ignore[attr-defined]
            return np.asarray(inner(queries) if sources is None else inner(queries, sources=sources))

    return Recording()


def earth_movers_case(epsilon: float | None = None, delta: float | None = None, *,
                      vocab_size: int = EARTH_MOVERS_VOCABULARY,
                      pair: tuple[str, str] | None = None, size: int = 1, **params: object) -> AuditCase:
    """Earth Mover's privacy through the registered class's ``privatize_batch`` (what ``textdp obfuscate`` runs).

    The registered mechanism is built at ε on GloVe 6B 50d restricted to ``vocab_size`` words
    (its real decoder; no stop-word list: the audit's documents are the words themselves) and
    releases documents of ``size`` copies of each audited word as bags of ``size`` (:func:`~textdp.audit.release_batch.text_batch`);
    events are the released bags. Default ε = 10, for which the pair is ``monday``/``tuesday`` (claim ε·d ≈ 3.5).
    With ``size=1`` the privacy curve of the released words is audited against the claimed
    noise law's (:func:`~textdp.audit.claimed_curves.selected_noise_curve`). Conformance: the released bags against the
    reference law (:func:`~textdp.audit.word_cases.decoded_conformance`). ``params``: the mechanism's own options
    (:data:`EARTH_MOVERS_PARAMS`; ``textdp audit earth-movers --param decoder=torch``); with a decoder that
    is not the exact nearest word (``postprocess="mbr"``, an approximate index) the reference law does not
    apply and only the privacy tests run (decoding is post-processing of the noise).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import get

    if delta not in (None, 0, 0.0):
        raise ParameterError("earth-movers is pure metric DP (delta = 0); --delta does not apply")
    bad = sorted(set(params) - set(EARTH_MOVERS_PARAMS))
    if bad:
        raise ParameterError(f"earth-movers: the audit takes {', '.join(EARTH_MOVERS_PARAMS)} as --param, not "
                             f"{', '.join(bad)} (epsilon with --epsilon; the vocabulary is GloVe's "
                             f"{EARTH_MOVERS_VOCABULARY:,} most frequent words)")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    n_words = check_positive_int(size, "size")
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    vectors = emb.vectors
    opts = {k: _option(v) for k, v in params.items()}
    mech = get("earth-movers", epsilon=eps, embeddings=emb, size=n_words, stop_words=None, **opts).fit()
    exact = opts.get("postprocess") is None and opts.get("decoder", "exact") in EXACT_DECODERS
    privatize = text_batch(mech, emb.words, "earth-movers", sort=True, size=n_words)

    chosen, _ = choose_word_pair(emb, eps, n_words, pair, "earth-movers")
    law = None
    if n_words == 1:
        noise = metric_noise_curve(lambda x, n, rng: np.zeros((n, emb.dim)), vectors[emb.index[chosen[0]]],
                                   vectors[emb.index[chosen[1]]], eps, what="Algorithm 1's noisy vectors")
        law = selected_noise_curve(copies_sampler(privatize), noise, "earth-movers' released words")
    return word_pair_case("earth-movers", privatize, emb, eps, chosen, size=n_words, curve=law,
                          conformance=decoded_conformance(vectors, eps, what="earth-movers' released bags")
                          if exact else None)


def _option(value: object) -> object:
    """A mechanism option given as ``--param KEY=VALUE`` text: ``true``/``false``/``none`` and numbers parsed."""
    if not isinstance(value, str):
        return value
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def earth_movers_noise_case(epsilon: float | None = None, delta: float | None = None, *,
                            vocab_size: int = EARTH_MOVERS_VOCABULARY,
                            pair: tuple[str, str] | None = None, size: int = 1,
                            dim: int | None = None,
                            noisy: Callable[[np.ndarray, np.ndarray, float, np.random.Generator], np.ndarray]
                            | None = None) -> AuditCase:
    """Earth Mover's privacy, the noisy vectors its release decodes (Algorithm 1 inside the release).

    The registered mechanism releases documents of copies of the audited word through its
    ``privatize_batch`` (:func:`~textdp.audit.release_batch.text_batch`, what ``textdp obfuscate`` runs); its decoder is
    wrapped so that the noisy vectors the release actually decodes are observed (a release that
    decodes nothing is observed as its released words' own vectors: no noise). ``dim``: the
    mechanism runs on GloVe's first ``dim`` coordinates (``earth-movers-2d``). The guarantee ε·d
    holds in every dimension, and in low dimension the likelihood-ratio tail events carry almost
    all of it: in 2-d a correct sampler reaches ~0.9 of ε·d and one with half the noise scale ~1.8
    times it at 10^4 samples, while in 50-d no event of probability above ~10^-6 separates the two
    (BENCHMARKS.md). ``noisy(ids, vectors, epsilon, rng)``: a power study's stand-in for the
    release (tests pass deliberately broken samplers); never used by ``textdp audit``.
    Conformance: the radius ``||z − e_x||`` of every noisy vector against ``Gamma(n, 1/ε)``.
    """
    from scipy.stats import gamma as _gamma

    from ..embeddings import Embeddings, load_embeddings
    from ..mechanisms import get

    name = "earth-movers-noise" if dim is None else f"earth-movers-{dim}d"
    if delta not in (None, 0, 0.0):
        raise ParameterError(f"{name} is pure metric DP (delta = 0); --delta does not apply")
    eps = check_epsilon(10.0 if epsilon is None else epsilon)
    n_words = check_positive_int(size, "size")
    emb = load_embeddings(vocab_size=check_positive_int(vocab_size, "vocab_size"))
    if dim is not None:
        k = check_positive_int(dim, "dim")
        if k > emb.dim:
            raise ParameterError(f"{name}: dim must be at most {emb.dim}")
        emb = Embeddings(emb.words, np.ascontiguousarray(emb.vectors[:, :k]),
                         name=f"{emb.name}[first {k} coordinates]")
    vectors = emb.vectors
    v64 = vectors.astype(np.float64)
    mech = get("earth-movers", epsilon=eps, embeddings=emb, size=n_words, stop_words=None).fit()
    recorder = _recording(mech.decoder_)  # type: ignore[attr-defined]
    mech.decoder_ = recorder  # type: ignore[attr-defined]  # the audit's own instance: the release decodes through the recorder
    release = text_batch(mech, emb.words, name, size=n_words)

    def noisy_batch(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if noisy is not None:
            return noisy(ids, vectors, eps, rng)
        seen = recorder.seen  # type: ignore[attr-defined]
        seen.clear()
        rows = np.asarray(release(ids, rng))
        z = np.concatenate(seen, axis=0) if seen else v64[rows.reshape(-1)]
        seen.clear()
        if z.shape[0] != ids.size:
            raise ParameterError(f"{name}: the release decoded {z.shape[0]} vectors for {ids.size} words")
        return z.reshape(ids.shape + (vectors.shape[1],))

    def keep(x: object, out: np.ndarray) -> np.ndarray:
        rows = np.asarray(x, dtype=np.int64).reshape(-1)
        z = np.asarray(out, dtype=np.float64).reshape(len(out), rows.size, -1)
        r = np.linalg.norm(z - v64[rows][None, :, :], axis=2).reshape(-1)
        return np.asarray(_gamma.cdf(r, float(vectors.shape[1]), scale=1.0 / eps))

    conformance = Conformance(description=(f"radius of the decoded noisy vectors vs Gamma({vectors.shape[1]}, "
                                           f"1/{eps:g}) (Algorithm 1)"), kind="uniform", keep=keep)
    return word_pair_case(name, noisy_batch, emb, eps, pair, size=n_words, observe="noise", conformance=conformance)


#: The public vocabulary of the ``syntf`` case (all among GloVe's 5,000 most frequent words).
SYNTF_AUDIT_WORDS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                     "february", "march")


def syntf_case(epsilon: float | None = None, delta: float | None = None, *, size: object = 1,
               variant: str = "weights", sampler: Callable[..., np.ndarray] | None = None) -> AuditCase:
    """SynTF through the registered class's ``privatize_batch`` (what ``textdp obfuscate`` runs) over :data:`SYNTF_AUDIT_WORDS`.

    Document ``a`` = ``monday``, document ``b`` = the other nine words once each, given to the
    registered mechanism (built at ε on the ten-word public vocabulary, bags of ``size`` terms);
    the released bags are the events. Default ε = 3 (claimed ε per document). ``sampler`` (the
    signature of :func:`~textdp.mechanisms.syntf.sample_bags`) replaces the release: a power
    study's stand-in, never used by ``textdp audit``. The privacy curve is audited too, against the
    exact one-term law (:func:`~textdp.audit.claims.syntf_logp`, from ε, |V| and the two documents
    only) for ``size=1``, and against the exact law of bags of ``size`` i.i.d. terms at ε/(2N) per
    term otherwise (:func:`~textdp.audit.claimed_curves.bag_curve`). Conformance: χ² against that law (``size=1``), or a two-sample test
    against bags of ``size`` terms drawn from it (the multinomial factorisation). ``variant="composition"``
    (the patent's two-step draw; ``--param variant=composition``): its law is not written again here, so
    only the event test runs (claim ε).
    """
    from ..embeddings import load_embeddings
    from ..mechanisms import get

    if delta not in (None, 0, 0.0):
        raise ParameterError("syntf is pure epsilon-DP (delta = 0); --delta does not apply")
    eps = check_epsilon(3.0 if epsilon is None else epsilon)
    n_words = check_positive_int(_option(size), "size")
    if variant not in ("weights", "composition"):
        raise ParameterError(f"syntf: variant must be weights or composition, got {variant!r}")
    emb = load_embeddings(vocab_size=EARTH_MOVERS_VOCABULARY).restrict(words=SYNTF_AUDIT_WORDS, label="syntf audit")
    index = emb.index
    doc_a = np.array([index["monday"]], dtype=np.int64)
    doc_b = np.array(sorted(index[w] for w in SYNTF_AUDIT_WORDS if w != "monday"), dtype=np.int64)
    v = emb.vocab_size
    mech = get("syntf", epsilon=eps, embeddings=emb, size=n_words, stop_words=None, variant=variant).fit()
    release = text_batch(mech, emb.words, "syntf", per_unit=n_words, sort=True, size=n_words)

    def sample(doc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        if sampler is not None:
            w = np.ones(doc.size)
            return np.asarray(sampler([doc] * n, [w] * n, v, eps, n_words, rng))
        return release(np.broadcast_to(doc, (n, doc.size)), rng)

    la, lb = syntf_logp(eps, v, doc_a), syntf_logp(eps, v, doc_b)
    if n_words == 1:
        conformance = Conformance(description=f"released terms vs SynTF's one-term law (epsilon={eps:g}, |V|={v})",
                                  kind="table", keep=lambda x, out: np.asarray(out).reshape(-1),
                                  table=lambda x: np.exp(la if x is doc_a else lb))
    else:
        laws = {id(doc_a): np.exp(syntf_logp(eps, v, doc_a, n_words)),
                id(doc_b): np.exp(syntf_logp(eps, v, doc_b, n_words))}

        def refbags(x: object, n: int, rng: np.random.Generator) -> np.ndarray:
            p = laws[id(x)]
            return np.sort(rng.choice(v, size=(n, n_words), p=p / p.sum()), axis=1)

        conformance = Conformance(description=(f"released bags vs {n_words} i.i.d. terms of SynTF's law "
                                               f"(epsilon/(2N) per term, |V|={v})"), kind="reference",
                                  keep=lambda x, out: np.asarray(out).reshape(len(out), -1), reference=refbags)
    composition = variant == "composition"
    return AuditCase(
        mechanism="syntf",
        pair=(f"documents 'monday' vs the other {doc_b.size} words of a {v}-word public vocabulary "
              f"({', '.join(SYNTF_AUDIT_WORDS)}), bags of N={n_words}"
              + (", variant composition (law not written again: event test only)" if composition else "")
              + f"; claim epsilon={eps:g} per document; events: released bags"),
        input_a=doc_a,
        input_b=doc_b,
        sample=sample,
        claimed_epsilon=eps,
        events="discrete",
        chunk=16_384,
        curve=None if composition else
        table_curve(sample, la, lb, what="syntf's released terms",
                    law=f"SynTF's one-term law (epsilon={eps:g}, |V|={v})") if n_words == 1 else
        bag_curve(sample, syntf_logp(eps, v, doc_a, n_words), syntf_logp(eps, v, doc_b, n_words), n_words,
                  what="syntf's released bags", law=f"SynTF's law (epsilon/(2N) per term, |V|={v})"),
        conformance=None if composition else conformance,
    )
