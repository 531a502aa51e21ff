"""The choice options of the command line, one enum per concept, built from the library's tuples.

Typer needs an :class:`~enum.Enum` per choice option; each one here is checked, when
the CLI is imported, against the tuple the library validates with (``DECODERS``,
``BAG_MODES``, ``ENGINES``, ...), so the CLI can never offer a name the library
refuses, or miss one it accepts. Commands import their choices from here only.
"""

from __future__ import annotations

from enum import Enum

from ..accounting.emd import METRICS
from ..embeddings import DECODERS, OUTPUT_VOCABULARIES
from ..engines import ENGINES
from ..generation.accounting import MODEL_DATA_CASES
from ..generation.model import OUTPUT_LAYERS
from ..generation.rewriter import UNITS, VARIANTS
from ..generation.training import OBJECTIVES, VOCAB_SOURCES
from ..guarantees import EMPTY_POLICIES
from ..io import INPUT_FORMATS
from ..mechanisms import MECHANISM_NAMES, names
from ..mechanisms.mbr import POSTPROCESSORS
from ..pipeline import OUTPUT_FORMATS
from ..text import BAG_MODES

__all__ = [
    "CHOICES",
    "BagMode",
    "Decoder",
    "EmptyPolicy",
    "Engine",
    "InputFormat",
    "Mechanism",
    "Metric",
    "ModelData",
    "ObfuscateEngine",
    "Objective",
    "OutputFormat",
    "OutputLayer",
    "OutputVocab",
    "PostProcess",
    "RewriteMechanism",
    "Unit",
    "Variant",
    "VocabSource",
]


class InputFormat(str, Enum):
    auto = "auto"
    text = "text"
    jsonl = "jsonl"


class OutputFormat(str, Enum):
    jsonl = "jsonl"
    text = "text"


class EmptyPolicy(str, Enum):
    """What to do with a line that has no in-vocabulary word (``textdp.guarantees.EMPTY_POLICIES``)."""

    error = "error"
    skip = "skip"
    empty = "empty"


class BagMode(str, Enum):
    truncate = "truncate"
    sample = "sample"


class Metric(str, Enum):
    euclidean = "euclidean"
    manhattan = "manhattan"


class Decoder(str, Enum):
    exact = "exact"
    faiss_exact = "faiss-exact"
    torch = "torch"
    approximate = "approximate"
    hnsw = "hnsw"
    ivf = "ivf"


#: Every registered mechanism (its names hold ``-`` and ``+``: members are reached by value).
Mechanism = Enum("Mechanism", {n: n for n in MECHANISM_NAMES}, type=str)  # type: ignore[misc]


class OutputVocab(str, Enum):
    full = "full"
    words = "words"


class PostProcess(str, Enum):
    mbr = "mbr"


class Engine(str, Enum):
    local = "local"
    dask = "dask"


class ObfuscateEngine(str, Enum):
    """``textdp obfuscate``: the engines, plus ``auto`` (choose by input) and ``single`` (no partitions)."""

    auto = "auto"
    single = "single"
    local = "local"
    dask = "dask"


class RewriteMechanism(str, Enum):
    er_ae = "er-ae"
    ae_dp = "ae-dp"
    syntf_sentence = "syntf-sentence"
    random_sentence = "random-sentence"


class Unit(str, Enum):
    sentence = "sentence"
    document = "document"


class Variant(str, Enum):
    autoregressive = "autoregressive"
    teacher_forced = "teacher-forced"


class ModelData(str, Enum):
    """Which data the rewriting model saw; ``auto`` reads the model card."""

    auto = "auto"
    public = "public"
    disjoint = "disjoint"
    same = "same"
    unknown = "unknown"


class Objective(str, Enum):
    er_ae = "er-ae"
    reconstruction = "reconstruction"


class VocabSource(str, Enum):
    corpus = "corpus"
    glove = "glove"


class OutputLayer(str, Enum):
    dense = "dense"
    embedding = "embedding"


#: Each CLI enum and the library tuple it must equal (checked at import).
CHOICES: tuple[tuple[type[Enum], tuple[str, ...]], ...] = (
    (InputFormat, INPUT_FORMATS),
    (OutputFormat, OUTPUT_FORMATS),
    (EmptyPolicy, EMPTY_POLICIES),
    (BagMode, BAG_MODES),
    (Metric, METRICS),
    (Decoder, DECODERS),
    (Mechanism, MECHANISM_NAMES),
    (OutputVocab, OUTPUT_VOCABULARIES),
    (PostProcess, POSTPROCESSORS),
    (Engine, ENGINES),
    (ObfuscateEngine, ("auto", "single", *ENGINES)),
    (RewriteMechanism, names("sentence")),
    (Unit, UNITS),
    (Variant, VARIANTS),
    (ModelData, ("auto", *MODEL_DATA_CASES)),
    (Objective, OBJECTIVES),
    (VocabSource, VOCAB_SOURCES),
    (OutputLayer, OUTPUT_LAYERS),
)

for _enum, _values in CHOICES:
    if tuple(m.value for m in _enum) != tuple(_values):  # pragma: no cover - a developer error, caught by CI
        raise RuntimeError(f"CLI choices {_enum.__name__} {[m.value for m in _enum]} differ from the library's "
                           f"{list(_values)}; update textdp/cli/_choices.py")
