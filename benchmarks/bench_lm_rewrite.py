"""Speed of the language-model rewriters: tokens per second, batched against unbatched, and the decoding core.

No pretrained model can be downloaded here, so the models are random ones of a small size built in a
temporary folder by ``examples/tiny_lm.py`` (GPT-2 / BART / BERT layouts; ``--hidden`` and ``--layers``; a
word-level vocabulary of ``--vocab`` words). Their outputs are gibberish: this measures speed only, which
depends on the shapes, not on the weights. Inputs are the first ``--sentences`` sentences of Reuters C50
(``../shared/data/reuter_50_50``; a development corpus), never written anywhere.

(a) for each rewriter, output tokens per second (generated tokens for dp-prompt / dp-paraphrase /
    dp-bart, replaced tokens for dp-mlm) with ``batch_size=1`` and ``batch_size=--batch``, and their ratio;
(b) the decoding core alone: one clipped exponential-mechanism draw per row of a ``(B, V)`` logit matrix
    (``V`` = GPT-2's 50,257), against ``torch.multinomial(softmax(logits / T))`` (torch's own sampler: not
    usable for privacy, it is the speed baseline), measured in the same run.

    python benchmarks/bench_lm_rewrite.py                  # the table of BENCHMARKS.md
    python benchmarks/bench_lm_rewrite.py --sentences 16   # quick
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from textdp._rng import make_rng
from textdp.generation.decoding import ClipBounds, exponential_step
from textdp.mechanisms import get, mechanism_class
from textdp.text import split_sentences

ROOT = Path(__file__).resolve().parents[1]
KIND = {name: mechanism_class(name).kind for name in ("dp-prompt", "dp-paraphrase", "dp-mlm", "dp-bart")}


def _sentences(n: int) -> list[str]:
    path = ROOT.parent / "shared" / "data" / "reuter_50_50" / "reuter_50_50.jsonl.gz"
    if not path.exists():
        path = Path("/work/shared/data/reuter_50_50/reuter_50_50.jsonl.gz")
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            out += [s.lower() for s in split_sentences(json.loads(line)["text"]) if len(s.split()) >= 5]
            if len(out) >= n:
                return out[:n]
    return out


def _tokens(texts: list[str]) -> int:
    return sum(len(t.split()) for t in texts)


def bench_rewriters(root: Path, sentences: list[str], batch: int, new_tokens: int) -> list[dict[str, object]]:
    rows = []
    for mech, kind in KIND.items():
        bounds = ClipBounds(-0.2, 0.1) if mech == "dp-bart" else ClipBounds(-3.0, 3.0)
        res: dict[str, object] = {"mechanism": mech}
        for b in (1, batch):
            own = {"delta": 1e-5} if "delta" in mechanism_class(mech).param_names() else {}
            s = get(mech, epsilon=3.0, model=str(root / kind), clip=bounds, max_new_tokens=new_tokens, max_tokens=32,
                    batch_size=b, **own).fit()
            s.rewrite_units(sentences[:2], make_rng(0))  # load and warm up
            t = time.perf_counter()
            out = s.rewrite_units(sentences, make_rng(1))
            dt = time.perf_counter() - t
            n = sum(len(x.split()) for x in out) if mech != "dp-mlm" else _tokens(sentences)
            res[f"tok_s_b{b}"] = n / dt
        res["ratio"] = float(res[f"tok_s_b{batch}"]) / float(res["tok_s_b1"])  # type: ignore[arg-type]
        rows.append(res)
    return rows


def bench_core(rows: int, vocab: int, repeats: int) -> dict[str, float]:
    logits = torch.randn(rows, vocab) * 4
    bounds = ClipBounds(-5.0, 5.0)
    rng = make_rng(0)
    best_core = best_torch = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        exponential_step(logits, rng, epsilon=3.0, bounds=bounds)
        best_core = min(best_core, time.perf_counter() - t)
        t = time.perf_counter()
        torch.multinomial(torch.softmax(logits / bounds.temperature(3.0), dim=1), 1)
        best_torch = min(best_torch, time.perf_counter() - t)
    return {"rows": rows, "vocab": vocab, "core_draws_s": rows / best_core, "torch_draws_s": rows / best_torch,
            "ratio": best_torch / best_core}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    sentences = _sentences(a.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for kind in ("causal", "seq2seq", "masked"):
            tiny.build(root / kind, kind, hidden=a.hidden, layers=a.layers, extra_words=a.vocab)
        rows = bench_rewriters(root, sentences, a.batch, a.new_tokens)
    core = [bench_core(b, 50_257, a.repeats) for b in (1, 32)]
    print(f"models: hidden {a.hidden}, {a.layers} layers, vocabulary {a.vocab + 40}; {len(sentences)} sentences; "
          f"{a.threads} threads; max {a.new_tokens} new tokens")
    print(f"| mechanism | tokens/s, batch 1 | tokens/s, batch {a.batch} | batched / unbatched |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mechanism']} | {float(r['tok_s_b1']):.1f} | {float(r[f'tok_s_b{a.batch}']):.1f} | "  # type: ignore[arg-type]
              f"{float(r['ratio']):.2f} |")  # type: ignore[arg-type]
    print("\n| rows x vocabulary | clipped exponential mechanism (draws/s) | torch.multinomial softmax (draws/s) | "
          "core / torch speed |")
    print("|---|---:|---:|---:|")
    for c in core:
        print(f"| {c['rows']:.0f} x {c['vocab']:.0f} | {c['core_draws_s']:.0f} | {c['torch_draws_s']:.0f} | "
              f"{c['ratio']:.2f} |")
    _ = np


if __name__ == "__main__":
    main()
