"""The values of the options that the library and its commands share (a leaf: no numpy, no torch).

``textdp obfuscate -h``, ``textdp rewrite -h`` and their one-line errors for bad option values need these lists
at parse time;
keeping them here, not in the modules that use them (which import numpy and the embeddings), lets the
command answer before any of those is imported (issue 27; measured in BENCHMARKS.md). The library
modules import them from here, so each list is written once:

``DECODERS``
    nearest-word decoders (:mod:`textdp.embeddings.ann`);
``DECODER_PRECISIONS``
    score precisions of the exact decoder (:mod:`textdp.embeddings.bf16`);
``OUTPUT_VOCABULARIES``
    which vocabulary rows may be released (:func:`textdp.embeddings.output_vocabulary`);
``BAG_MODES``
    how a bag of N words is formed (:func:`textdp.text.make_bag`);
``POSTPROCESSORS``
    post-processing decoders (:mod:`textdp.mechanisms.mbr`);
``OUTPUT_FORMATS``
    what a release file holds (:func:`textdp.pipeline.write_records`);
``UNITS``, ``VARIANTS``
    records per sentence or per document, and how the ER-AE family's generator is fed
    (:mod:`textdp.generation.rewriter`);
``MODEL_DATA_CASES``
    which data a rewriting model saw, and whether the guarantee covers it (:mod:`textdp.generation.bounds`);
``MAX_NEW_TOKENS``
    the language-model rewriters' default cap on generated tokens (:mod:`textdp.generation.decoding`).

and the one parser of ``--param KEY=VALUE`` (:func:`parse_params`), whose keys the commands check against
each class's parameters as the generated registry index records them (:func:`param_annotations`), so a bad
``--param`` is refused before the mechanism's class (and numpy) is imported.

>>> "exact" in DECODERS and "truncate" in BAG_MODES
True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from ._validation import check_positive_int
from .errors import ParameterError

__all__ = ["BAG_MODES", "DECODERS", "DECODER_PRECISIONS", "MAX_NEW_TOKENS", "MODEL_DATA_CASES", "OUTPUT_FORMATS", "OUTPUT_VOCABULARIES",
           "POSTPROCESSORS", "SIZE_FROM_DATA_WARNING", "UNITS", "VARIANTS", "check_size_options", "param_annotations",
           "parse_params"]

DECODERS = ("exact", "faiss-exact", "torch", "approximate", "hnsw", "ivf")
#: the exact decoder's score precisions (``auto``: bfloat16 where the CPU has it and it measures faster)
DECODER_PRECISIONS = ("auto", "float32", "bfloat16")

#: Output vocabularies: ``"full"`` (every row) or ``"words"`` (only tokens the normaliser can produce).
OUTPUT_VOCABULARIES = ("full", "words")

BAG_MODES = ("truncate", "sample")

#: Registered post-processing decoders (``--postprocess``).
POSTPROCESSORS = ("mbr",)

#: The formats of a release file: JSONL records, or the released words (or text) only, one document a line.
OUTPUT_FORMATS = ("jsonl", "text")

#: ``textdp rewrite --variant``: the ER-AE family's generator fed its own draws, or the private input (the authors'
#: code).
VARIANTS = ("autoregressive", "teacher-forced")
#: ``textdp rewrite --unit``: one record per sentence segment, or per document (segments joined).
UNITS = ("sentence", "document")

#: ``textdp rewrite --model-data``: which data the model saw -> whether the guarantee covers the rewriting step.
MODEL_DATA_CASES: dict[str, tuple[bool, str]] = {
    "public": (
        True,
        ("the model and its vocabulary were declared trained on public data, so they are public functions and the "
        "bound covers the rewriting of each sentence"),
    ),
    "disjoint": (
        True,
        ("the user declared that this text was not in the model's training data, so the model and its vocabulary are "
        "fixed functions of other data and the bound covers the rewriting of each sentence (the model itself is as "
        "private as its training data)"),
    ),
    "same": (
        False,
        ("NOT covered: the model was trained without privacy on this very text, so its vocabulary (the output "
        "alphabet) and every rewritten sentence can carry information about every training sentence; the bound "
        "holds for one output sentence alone, not for a release of several (up to N times the bound for N sentences "
        "rewritten with the same model), and not for which words are in the vocabulary"),
    ),
    "unknown": (
        False,
        ("NOT covered: it is unknown whether the model saw this text; if it did, its vocabulary (the output alphabet) "
        "and every rewritten sentence can carry information about every training sentence, so the bound holds for "
        "one output sentence alone, not for a release of several or for which words are in the vocabulary "
        "(declare --model-data public or disjoint if you know it)"),
    ),
}

#: Default cap on generated tokens of the language-model rewriters: covers ordinary sentences and short paragraphs
#: (90th percentile of a public corpus' sentences: 47 tokens); each step costs epsilon, so a unit costs
#: max_new_tokens * epsilon.
MAX_NEW_TOKENS = 64

SIZE_FROM_DATA_WARNING = (
    "the bag size N is taken from the data (the shortest document's in-vocabulary length, N={n}); N is "
    "published with every record, so this reveals that length. Pass a public size instead."
)


def check_size_options(mechanism: str, releases: str, size: int | None, size_from_data: bool) -> None:
    """Bag mechanisms (``releases == "bag"``) need a public bag size N (``size``) or ``size_from_data``; text
    mechanisms take neither (one-line errors naming the CLI options).

    >>> check_size_options("earth-movers", "bag", None, False)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --size N is required (N is public: it is written in every record); --size-from-data uses the shortest document's length instead, and reveals it
    """
    if releases != "bag":
        if size is not None or size_from_data:
            flag = "--size" if size is not None else "--size-from-data"
            raise ParameterError(
                f"{flag} applies to bag mechanisms (earth-movers, syntf); {mechanism} releases text (one word per "
                f"protected input word): drop {flag}"
            )
        return
    if size is None and not size_from_data:
        raise ParameterError("--size N is required (N is public: it is written in every record); "
                             "--size-from-data uses the shortest document's length instead, and reveals it")
    if size is not None and size_from_data:
        raise ParameterError("--size and --size-from-data exclude each other; give one")
    if size is not None:
        check_positive_int(size, "size")


def parse_params(items: Sequence[str] | Mapping[str, object] | None) -> dict[str, object]:
    """Mechanism parameters from ``KEY=VALUE`` strings (CLI ``--param``): JSON values, else strings.

    >>> parse_params(["t=0.75", "top_k=20", "lambd=null", "p=0.3"])
    {'t': 0.75, 'top_k': 20, 'lambd': None, 'p': 0.3}
    >>> parse_params(["t"])
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --param t: write KEY=VALUE (e.g. --param t=0.75)
    """
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return dict(items)
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = str(item).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ParameterError(f"--param {item}: write KEY=VALUE (e.g. --param t=0.75)")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def param_annotations(cls: type) -> tuple[tuple[str, str], ...]:
    """A mechanism class's parameters (its dataclass fields, in order) with their annotations as text.

    What ``python -m textdp.mechanisms.registry --write-index`` records in the index (``PARAMS``), so that
    ``--param`` is checked without importing the class.

    >>> @dataclasses.dataclass
    ... class Toy:
    ...     epsilon: float
    ...     k: int = 5
    >>> param_annotations(Toy)
    (('epsilon', 'float'), ('k', 'int'))
    """
    return tuple((f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)))
                 for f in dataclasses.fields(cls))
