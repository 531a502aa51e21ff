"""Build tiny random Hugging Face models (causal, seq2seq, masked) in a folder, offline.

For tests, benchmarks and the examples of docs/lm-rewriting.md: the weights are random (these models
rewrite into gibberish); they exercise loading, decoding and the guarantees, never utility.

    python examples/tiny_lm.py OUT_DIR [--kind causal|seq2seq|masked|all] [--hidden 32] [--layers 2]

Writes OUT_DIR/<kind>/ with config.json, model.safetensors and a word-level tokenizer trained with the
`tokenizers` library on a few public sentences written here (no corpus text). ``--kind gguf`` writes
OUT_DIR/gguf/tiny.gguf instead: a tiny random GPT-2 in one GGUF file (written with the `gguf` package), with a
byte-level tokenizer, that transformers loads as `textdp rewrite FILE.gguf` does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: Public sentences the tokenizer is trained on (written for this file).
SENTENCES = [
    "the cat sat on the mat .",
    "a dog ran in the park today .",
    "we met at the station in the morning .",
    "she wrote a long letter to her friend .",
    "the weather was cold and the sky was grey .",
    "he said that the meeting will start at noon .",
    "they bought bread , milk and apples at the shop .",
    "my brother plays the piano every evening .",
    "please send the report before friday .",
    "the train to the city was late again .",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>"]
KINDS = ("causal", "seq2seq", "masked")


def tokenizer(extra_words: int = 0):
    """A word-level tokenizer over the words of :data:`SENTENCES` (plus ``extra_words`` filler words)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()  # white space and punctuation
    words = [f"w{i}" for i in range(extra_words)]
    tok.train_from_iterator([*SENTENCES, " ".join(words)], trainers.WordLevelTrainer(special_tokens=SPECIALS))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", bos_token="<s>", eos_token="</s>")


def build(out: Path, kind: str, *, hidden: int = 32, layers: int = 2, extra_words: int = 0, seed: int = 0,
          init: float = 0.5, positions: int | None = None) -> Path:
    """Write a tiny random model of ``kind`` to ``out`` (safetensors) and return ``out``.

    ``positions``: the positions the model embeds (default 512 for causal, the prompt of dp-prompt
    around a 256-token document plus the generated tokens; 256 for the others).

    ``init`` is the standard deviation of the random weights: 0.5 (not transformers' 0.02) spreads the logits
    over a few units, so that the clipping bounds and the sampling law matter in the tests.
    """
    import torch
    import transformers
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        BertConfig,
        BertForMaskedLM,
        GPT2Config,
        GPT2LMHeadModel,
    )

    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)  # the random weights of a test model, not a privacy noise
    tok = tokenizer(extra_words)
    v, ids = len(tok), tok.convert_tokens_to_ids
    if kind == "causal":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=v, n_positions=positions or 512, n_embd=hidden, n_layer=layers, n_head=2, initializer_range=init,
                                           bos_token_id=ids("<s>"), eos_token_id=ids("</s>"),
                                           pad_token_id=ids("[PAD]")))
    elif kind == "seq2seq":
        model = BartForConditionalGeneration(BartConfig(
            vocab_size=v, d_model=hidden, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=2 * hidden, decoder_ffn_dim=2 * hidden,
            max_position_embeddings=positions or 256, init_std=init, pad_token_id=ids("[PAD]"), bos_token_id=ids("<s>"),
            eos_token_id=ids("</s>"), decoder_start_token_id=ids("</s>"), forced_eos_token_id=None))
    elif kind == "masked":
        model = BertForMaskedLM(BertConfig(vocab_size=v, hidden_size=hidden, num_hidden_layers=layers,
                                           num_attention_heads=2, intermediate_size=2 * hidden,
                                           max_position_embeddings=positions or 256, initializer_range=init,
                                           pad_token_id=ids("[PAD]")))
    else:
        raise SystemExit(f"error: kind must be one of {', '.join(KINDS)}")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def _byte_level_alphabet() -> list[str]:
    """GPT-2's 256 byte-level characters, in byte order (the tokens that spell any text)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
          *range(ord("\u00ae"), ord("\u00ff") + 1)]
    cs, extra = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return [chr(c) for _, c in sorted(zip(bs, cs, strict=True))]


def build_gguf(path: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0, init: float = 0.5) -> Path:
    """Write a tiny random GPT-2 as one GGUF file at ``path`` (float32 tensors) and return ``path``.

    The tokenizer is byte-level BPE (GPT-2's 256 byte characters, merges that spell a few words of
    :data:`SENTENCES`, and ``<|endoftext|>`` as BOS and EOS); transformers reads both from the file.
    """
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)  # the random weights of a test model, not a privacy noise
    tokens, merges = _byte_level_alphabet(), []
    for word in sorted({w for s in SENTENCES for w in s.split() if w.isalpha()}):
        cur = word[0]
        for c in word[1:]:
            if cur + c not in tokens:  # each merge once, in the order its token is added
                merges.append(f"{cur} {c}")
                tokens.append(cur + c)
            cur += c
    tokens.append("<|endoftext|>")
    v, ctx, ffn = len(tokens), 1024, 4 * hidden  # 1024: GPT-2's positions, which transformers' config expects
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_name("tiny-gpt2")
    w.add_context_length(ctx)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_block_count(layers)
    w.add_head_count(2)
    w.add_layer_norm_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (v - 1) + [3])  # normal tokens, then one control token
    w.add_token_merges(merges)
    w.add_bos_token_id(v - 1)
    w.add_eos_token_id(v - 1)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * init).astype(np.float32)

    def norm(name: str, n: int) -> None:
        w.add_tensor(f"{name}.weight", np.ones(n, np.float32))
        w.add_tensor(f"{name}.bias", np.zeros(n, np.float32))

    def linear(name: str, n_out: int, n_in: int) -> None:
        w.add_tensor(f"{name}.weight", rand(n_out, n_in))
        w.add_tensor(f"{name}.bias", np.zeros(n_out, np.float32))

    w.add_tensor("token_embd.weight", rand(v, hidden))
    w.add_tensor("position_embd.weight", rand(ctx, hidden))
    for i in range(layers):
        norm(f"blk.{i}.attn_norm", hidden)
        linear(f"blk.{i}.attn_qkv", 3 * hidden, hidden)
        linear(f"blk.{i}.attn_output", hidden, hidden)
        norm(f"blk.{i}.ffn_norm", hidden)
        linear(f"blk.{i}.ffn_up", ffn, hidden)
        linear(f"blk.{i}.ffn_down", hidden, ffn)
    norm("output_norm", hidden)
    w.add_tensor("output.weight", rand(v, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--kind", default="all", choices=[*KINDS, "gguf", "all"])
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--extra-words", type=int, default=0)
    ap.add_argument("--positions", type=int, default=None, help="positions the model embeds (its context)")
    a = ap.parse_args()
    if a.kind == "gguf":
        print(f"wrote {build_gguf(a.out / 'gguf' / 'tiny.gguf', hidden=a.hidden, layers=a.layers)}")
        return
    for kind in KINDS if a.kind == "all" else (a.kind,):
        build(a.out / kind, kind, hidden=a.hidden, layers=a.layers, extra_words=a.extra_words,
              positions=a.positions)
        print(f"wrote {a.out / kind}")


if __name__ == "__main__":
    main()
