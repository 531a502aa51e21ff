r"""Audit cases of the language-model rewriters on their own release path, and their conformance tests.

Each case (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``, ``dp-bart``) builds the mechanism with
:func:`textdp.mechanisms.get`, fits it on a **tiny random model** of its kind that this module writes
to a temporary folder (:func:`~textdp.audit.lm_models.tiny_model`: random weights drawn from :func:`textdp._rng.make_rng`, a
word-level tokenizer over :data:`~textdp.audit.lm_options.WORDS`; nothing is downloaded) and samples
:meth:`~textdp.mechanisms.base.Mechanism.privatize_batch` on two neighbouring texts that differ in
one unit (:attr:`~textdp.audit.lm_options.LMAuditSpec.texts`). The released texts are read back as token sequences (re-tokenised) and
indexed over every sequence the public vocabulary allows (:class:`~textdp.audit.lm_reference.SequenceSupport`).

Nothing here calls the rewriters' calibration or decoding code. The reference law of the released
sequences is computed **again** from the model (:class:`~textdp.audit.lm_reference.ReferenceLM`: the model run here, clipped
to the public bounds, the exponential mechanism ``P(w | x) ∝ exp(ε clip(s_w(x)) / (2Δ))`` over the
public output vocabulary; McSherry & Talwar 2007, as DP-Prompt (Utpala et al. 2023, §3), DP-Paraphrase
(Mattern et al. 2022) and DP-MLM (Meisenbacher et al. 2024) use it), token by token:

* ``dp-prompt``, ``dp-paraphrase``: ``n = max_new_tokens`` adaptive steps (each conditioned on the
  tokens released before it), the end token one of the candidates; the released sequence's
  probability is the product of the step probabilities up to the end token or ``n`` tokens;
* ``dp-mlm`` (``copy_stopwords=False``: every token replaced): one independent draw per position,
  each at its mask with the original sentence as context (DP-MLM's input: the sentence, then its
  copy with one token masked); with ``copy_stopwords`` the stop words and punctuation are released as
  they are (a point mass), the pair :data:`~textdp.audit.lm_options.COPY_TEXTS` has the same skeleton and the claim counts the
  replaced tokens only;
* ``dp-bart`` (Igamberdiev & Habernal 2023): the encoder output of the sentence padded to
  ``max_tokens``, clipped per coordinate, plus ``N(0, σ²)`` per coordinate and token with σ from
  the analytic Gaussian mechanism (Balle & Wang 2018; :func:`~textdp.audit.accountant.analytic_gaussian_sigma`,
  the audit's own bisection) at L2 sensitivity ``(c_max − c_min) sqrt(d · max_tokens)``, then
  greedy decoding. A random model's greedy decode says little about the noise, so DP-BART is fitted on a
  **probe model** instead (:class:`~textdp.audit.lm_models.GaussianProbe`: a BART whose weights are set by hand): the two
  sentences' clipped encoder outputs differ by the whole sensitivity (and by 5× more unclipped), and
  the decoder reads the noisy rows through one direction only, cut into one interval per public word,
  so the released law is the Gaussian mass of each interval, exact (:meth:`~textdp.audit.lm_reference.ReferenceLM.probe_tables`).

The claims come from public parameters only: ``n ε`` per unit for the token-level rewriters
(sequential composition of ``n`` ε-DP steps, every two units neighbours), ``(ε, δ)`` per sentence for
DP-BART. Every token-level case carries

* the **event test** (:mod:`textdp.audit.core`) on the released sequences against ``n ε``;
* the **privacy curve** (:mod:`textdp.audit.curve`) with the exact loss ``ln p_a(o)/p_b(o)`` of the
  reference law at the claimed ε (:func:`~textdp.audit.curve.exact_profile`): a loop that samples a
  sharper law than it claims (ε×3 inside the temperature, clipping removed) moves the curve above
  the claim's although ``n ε`` may still hold for this pair;
* the **conformance test** (:mod:`textdp.audit.conformance`, ``kind="table"``): χ² of the released
  sequences against the reference table, run by ``textdp audit NAME --conformance``.

DP-BART's case has the event test against ``(ε, δ)`` and, like the token-level cases, the curve with the
exact loss of the probe's law and the χ² table conformance test. Its ``spread`` probe (the known-bad
``dp-bart-shared-noise``'s, :mod:`textdp.audit.lm`) has no closed-form law: the curve selects events on the
released tokens against the Gaussian mechanism's profile at ``σ`` (the released tokens are post-processing
of the noisy encoder output, so their profile lies below it), and a two-sample χ² test compares them
with the reference sampler (:meth:`~textdp.audit.lm_reference.ReferenceLM.bart_sample`).

The tiny models make the audit fast (seconds on 2 cores) and exercise the whole loop (prompt frame,
KV cache, end token, batching, decoding, re-tokenisation); they say nothing about a large model's
logits, which the claims do not depend on.

References
----------
F. McSherry, K. Talwar. Mechanism design via differential privacy. FOCS 2007. S. Utpala, S. Hooker,
P.-Y. Chen. Locally differentially private document generation using zero shot prompting. Findings of
EMNLP 2023. J. Mattern, B. Weggenmann, F. Kerschbaum. The limits of word level differential privacy.
Findings of NAACL 2022. S. Meisenbacher, M. Chevli, J. Vladika, F. Matthes. DP-MLM: differentially
private text rewriting using masked language models. Findings of ACL 2024. T. Igamberdiev, I. Habernal.
DP-BART for privatized text rewriting under local differential privacy. Findings of ACL 2023. B. Balle,
Y.-X. Wang. Improving the Gaussian mechanism for differential privacy. ICML 2018.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError
from .accountant import analytic_gaussian_delta
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, Sampler, exact_profile
from .lm_models import TINY_HIDDEN, TINY_LAYERS, bart_probe, probe_model, tiny_model, tiny_tokenizer
from .lm_options import (
    LM_LAW_OPTIONS,
    LM_RELEASE_DEFAULTS,
    LM_VARIANT_CASES,
    MAX_TOKENS,
    SPREAD_TEXTS,
    LMAuditSpec,
    OptionValue,
    law_options,
)
from .lm_reference import ReferenceLM
from .public_lists import AUDIT_ENGLISH_STOP_WORDS

if TYPE_CHECKING:
    from ..mechanisms.base import Mechanism

__all__ = ["lm_release_case", "register_lm_release_cases"]


def _mechanism(name: str, spec: LMAuditSpec, folder: Path, epsilon: float, delta: float,
               clip: tuple[float, float] | None = None, **extra: object) -> Mechanism:
    """The rewriter built and fitted through the public API (:func:`textdp.mechanisms.get`)."""
    from ..mechanisms import get

    params: dict[str, object] = {"epsilon": epsilon, "model": str(folder), "clip": clip or spec.clip,
                              "max_tokens": MAX_TOKENS,
                              "batch_size": 4096, **dict(spec.params), **extra}
    if spec.law == "gaussian":
        params["delta"] = delta
    return get(name, **params).fit()


def _most_divergent(texts: tuple[str, ...], tables: dict[str, np.ndarray]) -> tuple[str, str]:
    """The pair of texts whose reference laws are furthest apart (symmetrised KL over the common support)."""
    def divergence(pair: tuple[str, str]) -> float:
        x, y = tables[pair[0]], tables[pair[1]]
        live = np.isfinite(x) & np.isfinite(y)
        return float(((np.exp(x[live]) - np.exp(y[live])) * (x[live] - y[live])).sum())

    return max(itertools.combinations(texts, 2), key=divergence)


def lm_release_case(name: str, epsilon: float | None = None, delta: float | None = None, *,
                    seed: int = 0, design: str = "mean", **options: object) -> AuditCase:
    """The audit case of rewriter ``name`` on its release path (module docstring).

    ``epsilon``: per token (dp-bart: per sentence, with ``delta``); ``None``: :data:`~textdp.audit.lm_options.LM_RELEASE_DEFAULTS`.
    ``seed``: the tiny model's weights (public). dp-bart only: the probe's ``design``
    (:data:`~textdp.audit.lm_models.PROBE_DESIGNS`; ``spread`` audits :data:`~textdp.audit.lm_options.SPREAD_TEXTS`).
    ``options`` (Python values or ``--param`` text, checked by :func:`~textdp.audit.lm_options.law_options`):
    ``clip`` (default the spec's), ``sampler`` (how each draw is made: the same law). dp-prompt only: ``prior``
    (the public-prior path, ``--prior``) and ``public_top_k`` (its public top-k+ candidate set,
    ``--public-top-k``): the mechanism is built with them and the reference law is the prior law
    (``_prior_log_law`` of :mod:`textdp.audit.lm_reference`, the public prompt's logits computed from the model here). dp-prompt and
    dp-paraphrase: ``max_new_tokens`` (1 to :data:`~textdp.audit.lm_options.MAX_AUDITED_NEW_TOKENS`; the reference law enumerates every
    sequence of up to ``n`` public words, and the claim is ``n ε``; dp-bart takes it too: its probe decodes ``n``
    tokens from the same noisy encoder output, the claim ``(ε, δ)`` unchanged). dp-mlm: ``copy_stopwords`` (true: the pair
    is :data:`~textdp.audit.lm_options.COPY_TEXTS`, whose stop words are released as they are; the claim counts the replaced tokens).
    dp-prompt's ``stop`` (a string; ``none``), ``repeat_ngram`` (a whole number; ``none``) and ``tidy``: a row
    stopped on its released tokens is a prefix of the ``n`` draws, and tidying is a function of the released text,
    so the release is post-processing of the ``n``-token law: the claim ``n ε`` and the exact profile of that law
    still bound it (event test and curve), and the conformance test, whose table is the undone law, is left out.
    """
    spec = LM_RELEASE_DEFAULTS.get(name)
    if spec is None:
        raise ParameterError(f"no release-path LM audit for {name!r}; choose one of {', '.join(LM_RELEASE_DEFAULTS)}")
    opts = law_options(name, spec, options)
    prior, public_top_k, copy, stopping = opts.prior, opts.public_top_k, opts.copy, opts.stopping
    eps = spec.epsilon if epsilon is None else float(epsilon)
    dlt = spec.delta if delta is None else float(delta)
    if spec.law == "gaussian":
        return _dp_bart_case(name, spec, eps, dlt, opts.clip or spec.clip, design, opts.steps)
    dlt = 0.0  # pure epsilon-DP per token
    folder, model = tiny_model(spec.kind, seed=seed)
    bounds = opts.clip or spec.clip
    mech = _mechanism(name, spec, folder, eps, dlt, clip=bounds, **opts.mechanism)
    text_a, text_b = opts.texts[:2]
    length = (len(tiny_tokenizer()(text_a, add_special_tokens=False)["input_ids"]) if spec.law == "positions"
              else opts.steps)
    ref = ReferenceLM(spec, model, epsilon=eps, clip=bounds, length=length, max_tokens=MAX_TOKENS, delta=dlt,
                      prior=prior, public_top_k=public_top_k, copied=AUDIT_ENGLISH_STOP_WORDS if copy else None)
    support, tok = ref.support, ref.tok
    tables = {t: ref.log_table(t) for t in opts.texts}
    text_a, text_b = _most_divergent(opts.texts, tables)

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        released = mech.privatize_batch([str(which)] * n, seed=rng, chunk=n)
        return support.ids_of([str(r.content) for r in released], tok)

    pair = (f"{name} on a tiny random {spec.kind} model ({TINY_HIDDEN} hidden, {TINY_LAYERS} layer, "
            f"{len(ref.words)} words), released through privatize_batch: {text_a!r} vs {text_b!r}, "
            f"clip [{bounds[0]:g}, {bounds[1]:g}]")
    la, lb = tables[text_a], tables[text_b]
    law = (f"{name}: clipped exponential mechanism, T = 2*Delta/epsilon over the public vocabulary, recomputed "
           f"from the model, {length} token(s) per release")
    if prior:
        law += (", scores clipped around the public prompt's logits (InvisibleInk)"
                + (f", over the public top-k+ set (k={public_top_k})" if public_top_k is not None else ""))
        pair += "; public prior" + (f", public_top_k={public_top_k}" if public_top_k is not None else "")
    # n epsilon-DP steps compose to n epsilon (every two units neighbours); copied tokens cost nothing
    drawn = length - len(ref.copied_positions(text_a))
    if copy:
        law += f", stop words and punctuation copied ({length - drawn} of {length} tokens)"
        pair += "; copy_stopwords=true (the same stop words in place)"
    case = _table_case(name, pair, text_a, text_b, sample, la, lb, support.size, law, drawn * eps, 0.0, spec.samples)
    if not stopping:
        return case
    import dataclasses

    said = ", ".join(f"{k}={v!r}" for k, v in stopping.items())
    return dataclasses.replace(case, pair=f"{pair}; {said} (post-processing of the {length}-token law)",
                               conformance=None)


def _table_case(name: str, pair: str, text_a: str, text_b: str, sample: Sampler, la: np.ndarray, lb: np.ndarray,
                size: int, law: str, claimed: float, delta: float, samples: int) -> AuditCase:
    """The case of a release whose exact law over ``size`` sequences is the table ``la`` / ``lb`` (log)."""
    with np.errstate(invalid="ignore"):
        diff = np.where(np.isfinite(la) & np.isfinite(lb), la - lb, 0.0)
    loss_of = np.append(diff, 0.0)  # the index "outside the support": loss 0 (the conformance test rejects it)
    top = float(np.abs(diff).max())
    curve = PrivacyCurve(sample=sample, loss=lambda ids: loss_of[np.asarray(ids, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, top, CURVE_POINTS, endpoint=False)),
                         description=f"the exact loss of the reference law over {size} sequences", chunk=4096,
                         reuse_outputs=True)
    probs = {text_a: np.append(np.exp(la), 0.0), text_b: np.append(np.exp(lb), 0.0)}
    conf = Conformance(description=law, kind="table", keep=lambda which, out: out,
                       table=lambda which: probs[str(which)])
    return AuditCase(mechanism=name, pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=claimed, claimed_delta=delta, events="discrete", chunk=4096, curve=curve,
                     conformance=conf, default_samples=samples)


def _dp_bart_case(name: str, spec: LMAuditSpec, eps: float, dlt: float, clip: tuple[float, float],
                  design: str, steps: int) -> AuditCase:
    """DP-BART through ``privatize_batch`` on its probe model (:class:`~textdp.audit.lm_models.GaussianProbe`; module docstring)."""
    text_a, text_b = spec.texts[:2] if design == "mean" else SPREAD_TEXTS
    probe = bart_probe(eps, dlt, clip, design, (text_a, text_b))
    lo, hi = probe.clip
    sigma = probe.sigma
    sens = (hi - lo) * math.sqrt(TINY_HIDDEN * MAX_TOKENS)
    folder, model = probe_model(probe)
    mech = _mechanism(name, spec, folder, eps, dlt, (lo, hi), max_new_tokens=steps)
    ref = ReferenceLM(spec, model, epsilon=eps, clip=(lo, hi), length=steps, max_tokens=MAX_TOKENS, delta=dlt)
    support, tok = ref.support, ref.tok

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        released = mech.privatize_batch([str(which)] * n, seed=rng, chunk=n)
        return support.ids_of([str(r.content) for r in released], tok)

    pair = (f"{name} on a probe BART model built here ({TINY_HIDDEN} hidden, 1 layer, designed weights: "
            f"{design} read-out of the noisy encoder rows), released through privatize_batch: {text_a!r} vs "
            f"{text_b!r}, clip [{lo:g}, {hi:g}]" + (f", {steps} tokens" if steps != spec.max_new_tokens else ""))
    if design == "mean":
        law = (f"DP-BART on the probe: encoder rows clipped to [{lo:g}, {hi:g}], N(0, {sigma:.4g}^2) per coordinate "
               f"and token (Igamberdiev & Habernal 2023), the probe's read-out z normal, cut at its edges")
        la, lb = ref.probe_tables((text_a, text_b), probe)
        return _table_case(name, pair, text_a, text_b, sample, la, lb, support.size, law, eps, dlt, spec.samples)

    def gaussian(grid: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        pt = np.array([max(analytic_gaussian_delta(sigma, float(e), sens), 0.0) for e in grid])
        return pt, pt + 1e-12

    curve = PrivacyCurve(sample=sample, loss=None, claimed=gaussian, grid=tuple(np.linspace(0.0, eps, CURVE_POINTS)),
                         description=f"released tokens against the Gaussian mechanism's profile (sigma {sigma:.4g}, "
                                     f"L2 sensitivity {sens:.4g}; post-processing)", chunk=4096, reuse_outputs=True)
    conf = Conformance(description=f"DP-BART reference sampler: encoder output clipped to [{lo:g}, {hi:g}], "
                                   f"N(0, {sigma:.4g}^2) per coordinate and token, greedy decoding of "
                                   f"{steps} tokens (Igamberdiev & Habernal 2023)",
                       kind="reference", keep=lambda which, out: out,
                       reference=lambda which, n, rng: ref.bart_sample(str(which), n, rng))
    return AuditCase(mechanism=name, pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=eps, claimed_delta=dlt, events="discrete", chunk=4096, curve=curve,
                     conformance=conf, default_samples=spec.samples)


def register_lm_release_cases() -> None:
    """Register the four rewriters' release-path cases (idempotent; replaces the toy-step cases)."""
    from .registry import register_audit_case

    for name, d in LM_RELEASE_DEFAULTS.items():
        claim = (f"(epsilon, delta) per sentence; default ({d.epsilon:g}, {d.delta:g})" if d.law == "gaussian" else
                 f"n*epsilon per unit; default epsilon {d.epsilon:g} per token")
        model = ("a probe BART model built here (weights set so the exact law is known)" if d.law == "gaussian"
                 else "a tiny random model built here")
        opts = LM_LAW_OPTIONS.get(name, ())

        def factory(epsilon: float | None = None, delta: float | None = None, name: str = name,
                    opts: tuple[str, ...] = opts, **params: object) -> AuditCase:
            bad = sorted(set(params) - set(opts))
            if bad:
                raise ParameterError(f"the audit case {name!r} takes {', '.join(opts) or 'no mechanism parameters'} "
                                     f"as --param, not {', '.join(bad)}")
            return lm_release_case(name, epsilon, delta, seed=0, design="mean", **params)

        register_audit_case(name, factory, description=f"{d.paper} through privatize_batch on {model}, "
                            f"neighbouring texts (claim {claim}; needs [generation])", replace=True,
                            takes_params=bool(opts))
    for variant, (base, params) in LM_VARIANT_CASES.items():
        register_audit_case(variant, functools.partial(_variant, base, params), replace=True,
                            description=(f"{LM_RELEASE_DEFAULTS[base].paper} with "
                                         f"{', '.join(f'{k}={v}' for k, v in params)} (a law users select: "
                                         f"textdp audit {base} " + " ".join(f"--param {k}={v}" for k, v in params)
                                         + "; needs [generation])"))


def _variant(base: str, params: tuple[tuple[str, OptionValue], ...], epsilon: float | None = None,
             delta: float | None = None) -> AuditCase:
    """The case of ``base`` with the law-changing options ``params`` (registered for ``--all``)."""
    import dataclasses

    case = lm_release_case(base, epsilon, delta, seed=0, design="mean", **dict(params))
    name = next(k for k, v in LM_VARIANT_CASES.items() if v == (base, params))
    return dataclasses.replace(case, mechanism=name)
