"""Every option that changes a released law has a case (issue 41, finding 3).

On e24cd34 ``textdp audit dp-prompt --param prior=true`` was refused and no case sampled DP-Prompt's
public-prior path: ε×3 planted in ``prior_log_weights`` moved the mode of a release from 40/3000 to
275/3000 and the audit passed. Here the classes' own parameter lists are read, each is classified in
:data:`textdp.audit.options.LAW_OPTIONS`, and every law-changing one names a registered case that builds
with it; the prior paths' planted ε×3 is flagged.
"""

from __future__ import annotations

import numpy as np
import pytest

from textdp.audit import audit, audit_case, audit_case_names
from textdp.audit.options import LAW_OPTIONS, not_audited_options
from textdp.audit.registry import _CASES
from textdp.mechanisms.registry import REGISTRY, mechanism_class

#: A value of each ``param`` option that differs from the class default (the case is built with it).
EXAMPLES = {"decoder": "torch", "postprocess": "mbr", "candidates": 16, "lambd": 0.3, "t": 0.6, "beta": 0.01,
            "p": 0.5, "sensitive_fraction": 0.8, "top_k": 10, "size": 2, "bag": "sample", "known_source": True,
            "variant": "composition", "grid": 2.0 ** -18, "stop_words": "english", "clip": "-2,2",
            "sampler": "gumbel", "max_new_tokens": 3, "copy_stopwords": True,
            "word_fraction": 0.3, "k": 3, "stop": ".", "repeat_ngram": 1, "tidy": True}
#: Values for one mechanism's parameter where the name means another thing elsewhere (the corpus topic mechanisms).
EXAMPLES_OF = {("er-ae", "variant"): "teacher-forced", ("ae-dp", "variant"): "teacher-forced", ("noisy-cooccurrence", "clip"): 0.05, ("spectral-lda", "clip"): 0.05, "words": 6, ("spectral-lda", "words"): 10,
               "topics": 3,
               "clip3": 2.0, "share": 0.3, "alpha0": 0.5}
SENTENCE = {n for n in REGISTRY if mechanism_class(n).family == "sentence"}


def test_every_parameter_of_every_registered_class_is_classified():
    # a mechanism with no case at all is NOT AUDITED as a whole (textdp audit --all names it); every other is here
    audited = {n for n, e in REGISTRY.items() if e.audit is not None}
    assert set(LAW_OPTIONS) == audited, "an audited mechanism without entries, or a stale one"
    for name in audited:
        params = set(mechanism_class(name).param_names())
        assert set(LAW_OPTIONS[name]) == params, (name, params ^ set(LAW_OPTIONS[name]))


def test_every_case_named_is_registered_and_takes_its_params():
    names = set(audit_case_names())
    for mech, opts in LAW_OPTIONS.items():
        for key, cov in opts.items():
            if cov.how in ("param", "case"):
                assert cov.case in names, (mech, key, cov.case)
            if cov.how == "param":
                assert _CASES[cov.case].takes_params, (mech, key, cov.case)


def _param_cases():
    for mech, opts in LAW_OPTIONS.items():
        for key, cov in opts.items():
            if cov.how == "param":
                marks = [pytest.mark.slow] if mech in SENTENCE else []
                yield pytest.param(mech, key, cov.case, marks=marks, id=f"{mech}-{key}")


@pytest.mark.parametrize(("mech", "key", "case"), list(_param_cases()))
def test_each_param_option_builds_its_case(mech, key, case):
    if mech in SENTENCE:
        pytest.importorskip("transformers")
    if key == "decoder" or mech in SENTENCE:
        pytest.importorskip("torch")
    value = EXAMPLES_OF.get((mech, key), EXAMPLES_OF.get(key, EXAMPLES.get(key)))
    built = audit_case(case, params={key: value})
    out = built.sample(built.input_a, 8, np.random.default_rng(0))
    assert len(out) == 8


def test_the_gaps_are_named_by_audit_all():
    gaps = not_audited_options()
    # the law-changing options no case samples yet, listed by textdp audit --all (never a silent gap)
    assert gaps == {}  # issue 41 done: every option that changes a law users select is a --param or a case


def test_dp_prompt_takes_its_prior_options_as_params():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    case = audit_case("dp-prompt", params={"prior": "true", "public_top_k": "5"})
    assert "public prior, public_top_k=5" in case.pair


@pytest.mark.parametrize("name", ["dp-prompt-prior", pytest.param("dp-prompt-public-top-k",
                                                                  marks=pytest.mark.slow)])
def test_triple_epsilon_in_the_prior_path_is_flagged(monkeypatch, name):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import textdp.generation.lm_decode as lm_decode

    assert audit(name, samples=10_000, seed=2, conformance=True).passed
    real = lm_decode.prior_log_weights
    monkeypatch.setattr(lm_decode, "prior_log_weights", lambda *a, epsilon, **k: real(*a, epsilon=3 * epsilon, **k))
    bad = audit(name, samples=10_000, seed=2, conformance=True)
    assert not bad.passed and not bad.conformance.passed, bad
