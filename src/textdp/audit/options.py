"""Which audit covers each parameter of each registered mechanism (issue 41: every option that changes the law).

Every parameter a registered class declares (:meth:`~textdp.mechanisms.base.Mechanism.param_names`) is
classified here, by name, in one of five ways:

* ``param`` -- it changes the released law and ``textdp audit CASE --param KEY=VALUE`` builds the
  mechanism with it and computes the claim and the reference law from it;
* ``case`` -- the non-default law it selects has its own registered case, run by ``textdp audit --all``
  (``CASE``), and may also be given as ``--param`` where noted;
* ``input`` -- the audit sets it itself (ε and δ by ``--epsilon``/``--delta``; the public vocabulary,
  the tiny model, the pair's distance): the claim holds for every value and the audit picks one;
* ``same-law`` -- it does not change the released law (a seed, a batch size, a public sentence, an
  algorithm with the same output law) or the class refuses every value but the default;
* ``not-audited`` -- it changes the law and no case samples it yet: ``textdp audit --all`` names it
  (NOT AUDITED options), never a silent gap.

``tests/test_audit_law_options.py`` reads the classes and fails on a parameter with no entry here, on an
entry naming a case that is not registered, and on a ``param`` entry the case refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["HOW", "LAW_OPTIONS", "OptionCoverage", "not_audited_options"]

HOW = ("param", "case", "input", "same-law", "not-audited")


@dataclass(frozen=True)
class OptionCoverage:
    """How one parameter of one mechanism is audited (:data:`HOW`), by which case, and why."""

    how: str
    case: str | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.how not in HOW:
            raise ValueError(f"how must be one of {HOW}, got {self.how!r}")


def _p(case: str, note: str = "") -> OptionCoverage:
    return OptionCoverage("param", case, note)


def _c(case: str, note: str = "") -> OptionCoverage:
    return OptionCoverage("case", case, note)


def _i(note: str) -> OptionCoverage:
    return OptionCoverage("input", None, note)


def _s(note: str) -> OptionCoverage:
    return OptionCoverage("same-law", None, note)


def _n(note: str) -> OptionCoverage:
    return OptionCoverage("not-audited", None, note)


_EPS = _i("set by --epsilon: the claim is computed from it")
_DELTA = _i("set by --delta: the claim is computed from it")
_SEED = _s("the random stream only (the audit passes its own generator)")
_EMB = _i("the public vocabulary: the audit fixes GloVe's most frequent words (the claim holds for any vocabulary)")
_VOCAB = _i("the public vocabulary's size: the audit fixes it")
_STOPS_OFF = _s("stop words are removed before the mechanism: the audited words are not stop words")


def _word(name: str, **own: OptionCoverage) -> dict[str, OptionCoverage]:
    return {"epsilon": _EPS, "embeddings": _EMB, "vocab_size": _VOCAB, "stop_words": _STOPS_OFF, "seed": _SEED, **own}


def _decoding(case: str) -> dict[str, OptionCoverage]:
    return {"decoder": _p(case, "the nearest-word index (approximate ones: privacy tests only, no reference law)"),
            "postprocess": _p(case, "mbr decoding: privacy tests only (post-processing of the noise)"),
            "candidates": _p(case, "MBR's candidates: privacy tests only")}


_LM = {"epsilon": _EPS, "seed": _SEED, "model": _i("the audit builds its own tiny model (the law is recomputed from it)"),
       "batch_size": _s("rows per forward pass"),
       "top_k": _s("refused by the class (truncating the private logits is not private)"),
       "top_p": _s("refused by the class (truncating the private logits is not private)"),
       "max_new_tokens": _p("{case}", "n generated tokens, 1 to 3 (the reference law lists 19^n sequences): the "
                                "claim n*epsilon (composition); --all runs {variant}"),
       "max_tokens": _i("the encoder's public length; the audit fixes 8")}


def _lm(case: str, variant: str) -> dict[str, OptionCoverage]:
    return {k: OptionCoverage(v.how, v.case.format(case=case) if v.case else None, v.note.format(variant=variant))
            for k, v in _LM.items()}


_TOPICS = {"epsilon": _EPS, "delta": _DELTA, "seed": _SEED,
           "sensitivity": _i("the declaration under audit: the pair is placed at the stated distance (0.1); "
                             "a sampled value is checked by --replay"),
           "gamma": _s("the confidence of a sampled sensitivity: the law given the value is the same (--replay)"),
           "vocabulary_note": _s("a public sentence in the guarantee"),
           "keywords_from": _c("{base}-covered", "noisy: the covered release (keywords read off the noise); "
                               "model: the model-column case {base}"),
           "keywords": _c("{base}-covered", "keywords of the covered release (the case releases 2 of 4)"),
           "grid": _p("{base}")}
#: the corpus topic mechanisms (textdp.audit.topic_moments): their noisy statistic is audited; the rest is post-processing
_CORPUS = {"epsilon": _EPS, "delta": _DELTA, "seed": _SEED,
           "sensitivity": _s("refused by the class (the sensitivity is the public clip)"),
           "gamma": _s("refused by the class"), "vocabulary_note": _s("a public sentence in the guarantee"),
           "keywords_from": _s("refused by the class but for 'noisy'"),
           "grid": _s("post-processing of the noisy statistic (rounding of the released rows)"),
           "keywords": _s("post-processing of the noisy statistic"),
           "topics": _s("post-processing: the NMF's rank (the statistic does not depend on it)"),
           "released_topics": _s("post-processing of the noisy statistic"),
           "relevance": _s("post-processing: the keywords' ranking")}
_GEN = {"epsilon": _EPS, "seed": _SEED, "model": _i("the audit trains its own tiny model"),
        "model_data": _i("the tiny model's public data")}


def _topics(base: str) -> dict[str, OptionCoverage]:
    return {k: OptionCoverage(v.how, v.case.format(base=base) if v.case else None, v.note.format(base=base))
            for k, v in _TOPICS.items()}


LAW_OPTIONS: Mapping[str, Mapping[str, OptionCoverage]] = MappingProxyType({
    "earth-movers": {"epsilon": _EPS, "embeddings": _EMB, "vocab_size": _VOCAB, "stop_words": _STOPS_OFF,
                     "seed": _SEED, "size": _p("earth-movers", "bags of N words"),
                     "size_from_data": _s("N taken from the data is a public N (the case sets it)"),
                     "bag": _p("earth-movers"), "known_source": _p("earth-movers", "same words, faster decoding"),
                     **_decoding("earth-movers")},
    "cmp": _word("cmp", **_decoding("cmp")),
    "mahalanobis": _word("mahalanobis", decoder=_p("mahalanobis"), lambd=_p("mahalanobis")),
    "vickrey": _word("vickrey", t=_p("vickrey"), lambd=_p("vickrey")),
    "tem": _word("tem", beta=_p("tem")),
    "santext": _word("santext"),
    "santext+": _word("santext+", p=_p("santext+", "the replacement probability of insensitive words; the audited "
                                       "pair is two sensitive words"),
                      sensitive_fraction=_p("santext+")),
    "custext": _word("custext", top_k=_p("custext")),
    "custext+": {**_word("custext+", top_k=_p("custext+")),
                 "stop_words": _p("custext+", "kept in place: the case's documents start with a stop word")},
    "syntf": {"epsilon": _EPS, "embeddings": _EMB, "vocab_size": _VOCAB, "stop_words": _STOPS_OFF, "seed": _SEED,
              "size": _c("syntf-n3", "N > 1 (also --param size=N)"),
              "size_from_data": _s("N taken from the data is a public N (the case sets it)"),
              "variant": _p("syntf", "composition: the event test only (its law is not written again)")},
    "random": _word("random", rate=_i("set through --epsilon (the rate follows from epsilon)")),
    "er-ae": {**_GEN, "variant": _p("er-ae", "teacher-forced: the reference law feeds the text's tokens (the claim "
                                    "is the same); --all runs er-ae-teacher-forced"),
              "word_fraction": _p("er-ae", "in (0, 1): the claim (two_set_per_token) and the step law take it; "
                                  "--all runs er-ae-k3 (k=3, word_fraction=0.3)"),
              "k": _p("er-ae", "1 to 8 (the step law lists every multiset of k draws); --all runs er-ae-k3"),
              "batch_size": _s("sentences per batch")},
    "ae-dp": {**_GEN, "variant": _p("ae-dp", "teacher-forced: the reference law feeds the text's tokens (the claim "
                                    "is the same); --all runs ae-dp-teacher-forced"), "batch_size": _s("sentences per batch")},
    "syntf-sentence": dict(_GEN),
    "random-sentence": dict(_GEN),
    "dp-prompt": {**_lm("dp-prompt", "dp-prompt-3-tokens"), "clip": _p("dp-prompt"), "sampler": _p("dp-prompt", "inverse CDF or Gumbel: the same law"),
                  "prior": _c("dp-prompt-prior", "also --param prior=true"),
                  "public_top_k": _c("dp-prompt-public-top-k", "also --param prior=true --param public_top_k=K"),
                  "max_input_tokens": _i("the document's public length cap; the audit's texts are shorter"),
                  "prompt": _i("the public template; the audit fixes one"),
                  "prompt_format": _i("plain on the tiny model (no chat template)"),
                  "instruction": _i("a named public instruction (part of the public prompt); the audit fixes "
                                    "its own prompt"),
                  "batch_tokens": _s("tokens per forward pass"),
                  "response_prefix": _i("part of the public prompt; none in the plain format the audit uses"),
                  "stop": _p("dp-prompt", "ends a row on released tokens only: a prefix of the n draws (post-"
                             "processing; claim n*epsilon, the n-token law's profile): privacy tests only; --all runs "
                             "dp-prompt-stopping"),
                  "repeat_ngram": _p("dp-prompt", "ends a row on released tokens only (as stop): privacy tests only"),
                  "tidy": _p("dp-prompt", "post-processing of the released text: privacy tests only")},
    "dp-paraphrase": {**_lm("dp-paraphrase", "dp-paraphrase-1-token"), "clip": _p("dp-paraphrase"), "sampler": _p("dp-paraphrase")},
    "dp-mlm": {**_lm("dp-mlm", ""), "clip": _p("dp-mlm"), "sampler": _p("dp-mlm"),
               "max_new_tokens": _s("dp-mlm replaces every token in place (no generation)"),
               "copy_stopwords": _p("dp-mlm", "true (the class default): a pair with the same stop word in place, "
                                    "released as it is (a point mass); the claim counts the replaced tokens only; "
                                    "--all runs dp-mlm-copy-stopwords")},
    "dp-bart": {**_lm("dp-bart", ""), "clip": _p("dp-bart"), "delta": _DELTA,
                "max_new_tokens": _p("dp-bart", "1 to 3: the probe decodes n tokens from the same noisy encoder "
                                     "output (post-processing: the claim (epsilon, delta) does not change); --all runs "
                                     "dp-bart-3-tokens"),
                "sampler": _s("dp-bart decodes greedily (no draw)")},
    "topicdp": _topics("topicdp"),
    "topicdp-thesis": _topics("topicdp-thesis"),
    "topicdp-laplace": {**_topics("laplace"), "delta": _s("pure epsilon-DP: delta is not used"),
                        "sensitivity": _s("refused by the class: the global L1 bound 2m"),
                        "gamma": _s("refused by the class")},
    "mvg": _topics("mvg"),
    "mvg-directional": _topics("mvg-directional"),
    "noisy-cooccurrence": {**_CORPUS, "words": _p("noisy-cooccurrence", "the statistic's columns (at most the audit's 10)"),
                           "clip": _p("noisy-cooccurrence", "the L2 sensitivity C"),
                           "nmf_iter": _s("post-processing: the NMF's iterations")},
    "spectral-lda": {**_CORPUS, "words": _p("spectral-lda", "the statistic's columns (at most the audit's 10)"),
                     "clip": _p("spectral-lda", "release 1's sensitivity C2"),
                     "topics": _p("spectral-lda", "K: the whitening's width and C3 (at most the 10 columns)"),
                     "clip3": _p("spectral-lda", "release 2's constant and C3"), "share": _p("spectral-lda"),
                     "alpha0": _p("spectral-lda", "C3 (the post-processing's LDA correction reads it too)")},
})


def not_audited_options() -> dict[str, dict[str, str]]:
    """``{mechanism: {parameter: why}}`` of every law-changing option no case samples yet (``--all`` lists them)."""
    out: dict[str, dict[str, str]] = {}
    for name, params in LAW_OPTIONS.items():
        gaps = {k: v.note for k, v in params.items() if v.how == "not-audited"}
        if gaps:
            out[name] = gaps
    return out
