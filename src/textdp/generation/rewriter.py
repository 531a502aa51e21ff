"""Rewriting text with a trained model: ER-AE, AE-DP, SynTF and Random-R, with honest records.

:class:`Rewriter` loads a model directory (:mod:`textdp.generation.training`) and
rewrites sentence segments with one of four mechanisms:

``er-ae``
    the ER-AE model with textdp's two-set exponential mechanism
    (:func:`~textdp.generation.sampling.two_set_step`);
``ae-dp``
    the model with one exponential mechanism over the whole vocabulary per step
    (:func:`~textdp.generation.sampling.em_step`; train the model with
    ``--objective reconstruction`` for the baseline as published);
``syntf``
    a bag of ``max_length`` words per sentence (:mod:`textdp.mechanisms.syntf`);
``random``
    uniform random replacement at the rate calibrated to the per-token ε
    (:func:`~textdp.generation.accounting.random_r_rate`).

Two generation variants (``er-ae``/``ae-dp``): ``autoregressive`` feeds the generator its
own draws; ``teacher-forced`` (the authors' code) feeds it the private input's tokens
while there are any. Both run at most ``max_length`` steps and stop when the mechanism
draws the end token, so the output length is covered by the bound.

:func:`rewrite_documents` is the pure batch function ``(documents, rng) -> records`` the
CLI maps over partitions with :mod:`textdp.engines`. Records hold the rewritten text and
public parameters only; :func:`rewrite_documents` returns the per-document diagnostics
(counts describing the private input) separately, for a private sidecar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import make_rng
from .._validation import check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError
from ..mechanisms.syntf import SynTF
from .accounting import (
    MECHANISM_NAMES,
    MODEL_DATA_CASES,
    RewriteGuarantee,
    random_r_rate,
    rewrite_guarantee,
)
from .model import build_network, generate
from .sampling import em_step, torch_module, two_set_step
from .training import load_model_files
from .vocab import PAD, detokenize, segment_text

__all__ = ["UNITS", "VARIANTS", "RewriteSettings", "Rewriter", "load_rewriter", "rewrite_documents"]

VARIANTS = ("autoregressive", "teacher-forced")
UNITS = ("sentence", "document")


@dataclass(frozen=True)
class RewriteSettings:
    """Public parameters of a rewrite (recorded in the settings file).

    Attributes
    ----------
    mechanism : str
        One of ``er-ae``, ``ae-dp``, ``syntf``, ``random``.
    epsilon : float
        Per-step nominal ε (er-ae), per-step ε (ae-dp, random) or per-sentence ε (syntf).
    variant : str
        ``autoregressive`` (default) or ``teacher-forced`` (the authors').
    word_fraction : float
        ER-AE: share of ε for the draw inside the chosen set.
    k : int
        ER-AE: lexical-set draws.
    model_data : str
        ``public``, ``disjoint``, ``same``, ``unknown`` or ``auto`` (``public`` if the model
        card declares its data public, else ``unknown``).
    unit : str
        ``sentence`` (one record per segment) or ``document`` (segments joined).
    batch_size : int
        Segments generated together.
    """

    mechanism: str = "er-ae"
    epsilon: float = 5.0
    variant: str = "autoregressive"
    word_fraction: float = 0.1
    k: int = 5
    model_data: str = "auto"
    unit: str = "document"
    batch_size: int = 256

    def __post_init__(self) -> None:
        check_choice(self.mechanism, "mechanism", MECHANISM_NAMES)
        check_epsilon(self.epsilon)
        check_choice(self.variant, "variant", VARIANTS)
        check_choice(self.model_data, "model data case", (*MODEL_DATA_CASES, "auto"))
        check_choice(self.unit, "unit", UNITS)
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.k, "k")

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return asdict(self)


class Rewriter:
    """A loaded model directory: vocabulary, network and card.

    Parameters
    ----------
    model_dir : path
        Written by ``textdp train-rewriter`` (:func:`textdp.generation.training.train_rewriter`).
    """

    def __init__(self, model_dir: str | Path) -> None:
        torch = torch_module()
        self.model_dir = Path(model_dir)
        # every file checked against the SHA-256 its card recorded at training time
        self.card, self.vocab, cfg, state = load_model_files(self.model_dir)
        if cfg.vocab_size != self.vocab.size:
            raise ParameterError(f"{model_dir}: config.json and vocab.txt disagree on the vocabulary size")
        self.config = cfg
        self.net = build_network(cfg, state["word_emb"].numpy())
        self.net.load_state_dict(state)
        self.net.eval()
        self._allowed = torch.from_numpy(self.vocab.output_mask())
        self._word_ids = np.arange(4, self.vocab.size)

    @property
    def max_length(self) -> int:
        """``L_max``: tokens per segment and steps per generated sentence."""
        return self.config.max_length

    def resolve_model_data(self, model_data: str) -> str:
        """``auto`` -> ``public`` if the card declares the training data public, else ``unknown``."""
        if model_data != "auto":
            return check_choice(model_data, "model data case", tuple(MODEL_DATA_CASES))
        return "public" if self.card.get("data", {}).get("declared_public") else "unknown"

    def guarantee(self, settings: RewriteSettings) -> RewriteGuarantee:
        """The per-sentence guarantee of ``settings`` with this model."""
        uses_model = settings.mechanism in ("er-ae", "ae-dp")
        size = self.vocab.output_size if uses_model else len(self.vocab.words)
        public_vocab = not self.card.get("vocabulary", {}).get("depends_on_training_data", True)
        case = "none" if (not uses_model and public_vocab) else self.resolve_model_data(settings.model_data)
        return rewrite_guarantee(
            settings.mechanism, settings.epsilon, vocab_size=size, max_length=self.max_length,
            model_data=case, word_fraction=settings.word_fraction, k=settings.k,
        )

    def segments(self, text: str) -> list[list[str]]:
        """The privacy units of ``text``: sentences cut to at most ``max_length`` tokens."""
        return segment_text(text, self.max_length)

    def rewrite_segments(
        self, segments: Sequence[Sequence[str]], settings: RewriteSettings, rng: np.random.Generator
    ) -> list[list[str]]:
        """Output tokens for every segment (a pure batch function of the segments and ``rng``)."""
        if not segments:
            return []
        if any(len(s) > self.max_length or len(s) == 0 for s in segments):
            raise ParameterError(f"segments must hold 1 to {self.max_length} tokens; use Rewriter.segments")
        m = settings.mechanism
        if m == "syntf":
            mech = SynTF(settings.epsilon, self.max_length, self.vocab.words, unit="sentence")
            return mech.privatize([list(s) for s in segments], rng)
        if m == "random":
            return self._random_replace(segments, random_r_rate(settings.epsilon, len(self.vocab.words)), rng)
        return self._generate(segments, settings, rng)

    def _random_replace(self, segments: Sequence[Sequence[str]], rate: float, rng: np.random.Generator) -> list[list[str]]:
        words = self.vocab.words
        out = []
        for seg in segments:
            ids = self.vocab.encode(list(seg)) - 4  # OOV -> negative
            replace_mask = (rng.random(ids.size) < rate) | (ids < 0)  # OOV tokens are always replaced
            ids[replace_mask] = rng.integers(0, len(words), size=int(replace_mask.sum()))
            out.append([words[i] for i in ids])
        return out

    def _generate(self, segments: Sequence[Sequence[str]], settings: RewriteSettings, rng: np.random.Generator) -> list[list[str]]:
        torch = torch_module()
        eps = settings.epsilon
        if settings.mechanism == "er-ae":
            e_word = settings.word_fraction * eps
            e_set = eps - e_word

            def choose(logp: Any) -> Any:
                return two_set_step(logp, rng, epsilon_set=e_set, epsilon_word=e_word, k=settings.k)
        else:

            def choose(logp: Any) -> Any:
                return em_step(logp, rng, epsilon=eps)

        encoded = [self.vocab.encode(list(s)) for s in segments]
        order = np.argsort([len(e) for e in encoded], kind="stable")
        result: list[list[str]] = [[] for _ in segments]
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            lengths = np.array([len(encoded[i]) for i in idx], dtype=np.int64)
            enc = np.full((len(idx), int(lengths.max())), PAD, dtype=np.int64)
            for r, i in enumerate(idx):
                enc[r, : lengths[r]] = encoded[i]
            ids = generate(self.net, torch.from_numpy(enc), torch.from_numpy(lengths), choose, allowed=self._allowed,
                           max_length=self.max_length, teacher_forcing=settings.variant == "teacher-forced")
            for r, i in enumerate(idx):
                result[i] = self.vocab.decode(ids[r])
        return result


@lru_cache(maxsize=4)
def load_rewriter(model_dir: str) -> Rewriter:
    """A cached :class:`Rewriter` (one load per process, e.g. per engine worker)."""
    return Rewriter(model_dir)


def rewrite_documents(
    rewriter: Rewriter,
    documents: Sequence[tuple[str, str]],
    settings: RewriteSettings,
    rng: int | np.random.Generator | np.random.SeedSequence | None = None,
    *,
    seeded: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rewrite ``(id, text)`` documents: ``(records, private_diagnostics)``.

    Records (one per document, or one per segment with ``unit="sentence"``) hold
    ``id``, ``text``, ``epsilon``, ``mechanism``, ``unit``, ``guarantee`` and ``seeded``;
    never the input text or anything computed from it. The diagnostics (segments,
    input tokens, out-of-vocabulary tokens per document) describe the private input:
    keep them private.
    """
    g = make_rng(rng)
    guarantee = rewriter.guarantee(settings)
    gdict = guarantee.to_dict()
    segs_per_doc = [rewriter.segments(text) for _, text in documents]
    flat = [s for segs in segs_per_doc for s in segs]
    outputs = rewriter.rewrite_segments(flat, settings, g)
    records: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    pos = 0
    for (doc_id, _), segs in zip(documents, segs_per_doc, strict=True):
        outs = outputs[pos : pos + len(segs)]
        pos += len(segs)
        texts = [detokenize(o) for o in outs]
        base = {"epsilon": settings.epsilon, "mechanism": settings.mechanism, "unit": settings.unit}
        if settings.unit == "document":
            records.append({"id": doc_id, "text": " ".join(t for t in texts if t), **base, "guarantee": gdict,
                            "seeded": seeded})
        else:
            for j, t in enumerate(texts):
                records.append({"id": f"{doc_id}:{j}", "text": t, **base, "guarantee": gdict, "seeded": seeded})
        n_tok = sum(len(s) for s in segs)
        n_oov = sum(int((rewriter.vocab.encode(s) == 2).sum()) for s in segs)
        diagnostics.append({"id": doc_id, "segments": len(segs), "input_tokens": n_tok, "oov_tokens": n_oov,
                            "output_tokens": sum(len(o) for o in outs)})
    return records, diagnostics
