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

The record names the model by its architecture and the SHA-256 of its weights (a public
fingerprint of a public model), never by its local path.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._validation import check_choice
from ..errors import ParameterError, require
from .folders import check_model_folder

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MODEL_KINDS", "LanguageModel", "load_language_model", "model_kind"]

#: Model kinds and the ``transformers`` auto class that loads each.
MODEL_KINDS = {"causal": "AutoModelForCausalLM", "seq2seq": "AutoModelForSeq2SeqLM", "masked": "AutoModelForMaskedLM"}
_KIND_WORDS = {"causal": "a causal language model", "seq2seq": "a sequence-to-sequence (encoder-decoder) model",
               "masked": "a masked language model"}


@dataclass(frozen=True)
class LanguageModel:
    """A loaded model: ``model`` (in eval mode), ``tokenizer``, ``kind`` and public ``identity``."""

    model: Any
    tokenizer: Any
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


def _check_directory(model_dir: Path, kind: str) -> dict[str, Any]:
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


def _weights_digest(model_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(model_dir.glob("*.safetensors")):
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=4)
def load_language_model(model_dir: str, kind: str) -> LanguageModel:
    """Load ``model_dir`` as a model of ``kind`` (cached per process), offline and safetensors only."""
    check_choice(kind, "model kind", tuple(MODEL_KINDS))
    path = check_model_folder(model_dir)  # links may not leave the folder (generation/folders.py)
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
    identity = {"architecture": (config.get("architectures") or [type(model).__name__])[0],
                "model_type": config.get("model_type"), "weights_sha256": _weights_digest(path)}
    return LanguageModel(model, tokenizer, kind, identity)
