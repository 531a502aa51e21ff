"""A release of a sentence mechanism on the page, and every release's guarantee as numbers a person can hold.

A sentence mechanism (the ER-AE family on a ``textdp train-rewriter`` model, or a language-model rewriter) rewrites
the text; the page marks the output words the input has too and states the guarantee of exactly that release as
the bound ``exp(loss)`` on how much more likely any output is from the text than from a neighbouring one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..guarantees import Guarantee

__all__ = ["LETTERS", "Rewritten", "adjacency", "factor", "pair", "rewrite_result", "sentence_meaning", "split_guarantee"]

#: A word of the input or output (letters only: numbers and punctuation stay between words).
LETTERS = re.compile(r"[^\W\d_]+")
_NOT_COVERED = re.compile(r"\s*Not covered:\s*", re.IGNORECASE)


def split_guarantee(statement: str) -> tuple[str, str]:
    """``(what is covered, what is not)``: the sentence split at its ``Not covered:`` part.

    >>> split_guarantee("epsilon-DP per word. Not covered: the length.")
    ('epsilon-DP per word.', 'the length.')
    >>> split_guarantee("3-DP")
    ('3-DP', '')
    """
    parts = _NOT_COVERED.split(statement, maxsplit=1)
    return parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")


def pair(text: str, loss: float, delta: float) -> dict[str, object]:
    """One example of the guarantee in numbers: two inputs, the bound ``exp(loss)`` on their output odds, in words.

    >>> pair("Your text, and any other text", 2.0, 1e-5)["sentence"]
    'Your text, and any other text: any output is at most 7.39 times as likely from one as from the other, except with probability at most 1e-05.'
    """
    tail = f", except with probability at most {delta:.3g}" if delta > 0 else ""
    return {"text": text, "loss": loss, "factor": factor(loss), "delta": delta,
            "sentence": f"{text}: any output is at most {factor(loss)} times as likely from one as from the other"
                        f"{tail}."}


def adjacency(guarantee: Guarantee) -> str:
    """Which sentences are neighbours, as a rewriter's guarantee states it (its public ``adjacency`` parameter;
    ``""`` when it states none: any two sentences)."""
    params = getattr(guarantee, "params", None)
    value = params.get("adjacency") if isinstance(params, dict) else None
    return str(value).rstrip(".") if value else ""


def factor(loss: float) -> str:
    """``exp(loss)`` as a number a person can hold: ``3.2``, ``410``, ``2.4 × 10^9``; ``∞`` when unbounded.

    >>> factor(0.0), factor(1.16), factor(6.0), factor(21.6), factor(1e4), factor(math.inf)
    ('1', '3.19', '403', '2.4 × 10^9', '10^4343', '∞')
    """
    if math.isinf(loss):
        return "\u221e"
    if loss > 700:
        return f"10^{loss / math.log(10):.0f}"
    f = math.exp(loss)
    if f < 10:
        return f"{f:.3g}"
    if f < 100_000:
        return f"{f:,.0f}"
    e = math.floor(math.log10(f))
    return f"{f / 10**e:.1f} \u00d7 10^{e}"


class Rewritten(Protocol):
    """What the page shows of a sentence mechanism's release record (:class:`textdp.generation.RewrittenText`)."""

    @property
    def text(self) -> str: ...
    @property
    def guarantee(self) -> Guarantee: ...
    def to_record(self) -> Mapping[str, object]: ...


def _marks(text: str, output: Sequence[str]) -> tuple[list[bool], list[list[object]]]:
    """Which output words the input has too (matched once each, case ignored), and the input as ``[text, class]``
    pieces (``kept`` / ``replaced`` words, ``None`` between).

    >>> _marks("The cat, the dog.", ["a", "cat", "THE"])
    ([False, True, True], [['The', 'kept'], [' ', None], ['cat', 'kept'], [', ', None], ['the', 'replaced'], [' ', None], ['dog', 'replaced'], ['.', None]])
    """
    left = Counter(m.group().lower() for m in LETTERS.finditer(text))
    out_flags = []
    for w in output:
        hit = left[w.lower()] > 0
        if hit:
            left[w.lower()] -= 1
        out_flags.append(hit)
    kept_words = Counter(w.lower() for w, f in zip(output, out_flags) if f)
    spans: list[list[object]] = []
    pos = 0
    for m in LETTERS.finditer(text):
        if m.start() > pos:
            spans.append([text[pos : m.start()], None])
        w = m.group().lower()
        cls = "kept" if kept_words[w] > 0 else "replaced"
        if kept_words[w] > 0:
            kept_words[w] -= 1
        spans.append([m.group(), cls])
        pos = m.end()
    if pos < len(text):
        spans.append([text[pos:], None])
    return out_flags, spans


def sentence_meaning(g: Guarantee, units: int) -> list[dict[str, object]]:
    """A sentence mechanism's guarantee in numbers: ``exp(epsilon)`` for the text and any text with one unit (a
    sentence) changed into a neighbouring one and ``exp(m * epsilon)`` for any two texts of ``m`` sentences (basic
    composition); for a rewriter whose unit is the whole document (dp-prompt), ``exp(epsilon)`` for the text and any
    other text. With δ > 0 every factor holds except with probability δ (``m * δ`` for m sentences)."""
    e, d = float(g.epsilon), float(g.delta or 0.0)
    if g.unit == "document":
        return [pair("Your text, and any other text", e, d)]
    length = getattr(g, "max_length", None)
    sentence = f"a sentence (at most {length} tokens)" if length else "a sentence"
    near = adjacency(g)
    return [pair(f"Your text, and the same text with {sentence} changed into any other" if not near else
                 f"Your text, and the same text with one sentence changed into a neighbouring one ({near})", e, d),
            pair(f"Your text ({units} sentence{'s' if units != 1 else ''}), and any other text of as many"
                 f"{', each a neighbour of yours' if near else ''}", units * e, units * d)]


def rewrite_result(text: str, name: str, eps: float, doc: Rewritten, notes: list[str]) -> dict[str, object]:
    """The page's answer for one release ``doc`` of a sentence mechanism: the rewritten text (a word marked kept
    when the input has it too), the input's kept and replaced words, the guarantee per unit and in numbers
    (:func:`sentence_meaning`), the release record and ``notes`` (the release's warnings)."""
    record = doc.to_record()
    g = doc.guarantee
    words_in = [m.group() for m in LETTERS.finditer(text)]
    output = doc.text.split()
    out_flags, spans = _marks(text, output)
    kept = sum(1 for sp in spans if sp[1] == "kept")
    units = record.get("units")
    meaning = sentence_meaning(g, int(units) if isinstance(units, int | float) and units else 1)
    if not getattr(g, "covered", True):
        notes.append("the model may have seen private data: the guarantee does not cover what it memorised")
    covered, not_covered = split_guarantee(g.statement)
    return {
        "mechanism": name, "epsilon": eps, "kind": "sentence",
        "output": [{"word": w, "kept": bool(f)} for w, f in zip(output, out_flags)],
        "input": spans, "kept": kept, "protected": len(words_in),
        "kept_fraction": kept / len(words_in) if words_in else 0.0,
        "guarantee": {"statement": covered, "not_covered": not_covered, "unit": record.get("unit"),
                      "epsilon": record.get("epsilon"), "delta": record.get("delta")},
        "meaning": meaning, "record": record, "notes": notes,
    }
