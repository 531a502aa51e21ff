"""The word and document mechanisms on the page: their vocabulary, which words a release kept, and the
guarantee of a release as numbers for this text.

Every word and document mechanism of the page runs over one vocabulary (:class:`PageVocabulary`, loaded on first
use). A release is shown as its output words (kept ones marked), the input's protected words (kept, replaced or
dropped) and the guarantee for two example neighbours of this text.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..mechanisms import MECHANISM_NAMES, EarthMoversPrivacy, Mechanism, mechanism_class
from ..text import normalize, resolve_stop_words
from .checks import BAG_MECHANISMS
from .sentences import LETTERS, factor, split_guarantee

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..embeddings import Embeddings
    from ..guarantees import Guarantee
    from ..mechanisms.common import DocumentDiagnostics

__all__ = ["NO_WORDS", "RELEASES_STOP_WORDS", "PageVocabulary", "WordRelease", "mark_kept", "page_advice",
           "truncated_bag", "word_result"]


class WordRelease(Protocol):
    """What the page shows of a release record of the word family (a bag or a text)."""

    @property
    def words(self) -> Sequence[str]: ...
    @property
    def guarantee(self) -> Guarantee: ...
    def to_record(self) -> Mapping[str, object]: ...


#: A text with no protected word: what the page says (``custext+`` releases stop words in place, so it runs).
NO_WORDS = ("no word of this text can be released: stop words, one-letter words, numbers and words outside the "
            "vocabulary are set aside; type a sentence of ordinary English words")
RELEASES_STOP_WORDS = tuple(n for n in MECHANISM_NAMES if getattr(mechanism_class(n), "keeps_stop_words", False))


def truncated_bag(mech: Mechanism, size: int | None) -> int | None:
    """N when ``mech`` releases a bag of the text's first N protected words (Earth Mover's privacy with
    ``bag="truncate"``: a shorter text is refused, the words after the N-th are dropped), else None."""
    if isinstance(mech, EarthMoversPrivacy) and mech.get_params().get("bag", "truncate") == "truncate":
        return size
    return None


def page_advice(message: str) -> str:
    """A mechanism's refusal for the page: without the unit's number and the CLI advice after the first ``;``.

    >>> page_advice("document 0: only 4 in-vocabulary words, fewer than the bag size N=10; lower --size, or use --bag sample")
    'only 4 in-vocabulary words, fewer than the bag size N=10: lower N or add text'
    """
    core = re.sub(r"^document \d+: ", "", message.splitlines()[0] if message else "").split(";")[0].strip()
    return f"{core}: lower N or add text" if "bag size" in core else f"{core}: change the text"


def mark_kept(diag: DocumentDiagnostics, inp: list[int], words: list[str], emb: Embeddings) -> tuple[list[bool], Counter[str]]:
    """Which output words are input words kept (by position when aligned, else by count), and those words."""
    out = diag.output_rows.tolist()
    if diag.aligned:
        kept_flags = [a == b for a, b in zip(out, inp)]
        kept_words = Counter(emb.words[b] for a, b in zip(out, inp) if a == b)
        out_flags = kept_flags
    else:
        remaining = Counter(inp)
        out_flags = []
        for w in words:
            row = emb.index.get(w)
            hit = row is not None and remaining[row] > 0
            if hit and row is not None:  # (hit implies a row: said for the type checker)
                remaining[row] -= 1
            out_flags.append(hit)
        kept_words = Counter(w for w, f in zip(words, out_flags) if f)
    return out_flags, kept_words


class PageVocabulary:
    """The vocabulary of the page's word and document mechanisms (loaded on first use) and what the page computes
    over it: the protected words of a text, a word's nearest neighbour, the input marked by a release, and the
    guarantee as numbers for this text.

    Parameters
    ----------
    source : Embeddings, path or None
        The embeddings (``None``: GloVe 6B 50d, loaded on first use).
    """

    def __init__(self, source: Embeddings | str | os.PathLike[str] | None = None) -> None:
        self._source = source
        self._emb: Embeddings | None = None
        self._lock = threading.Lock()
        self._sq_norms: np.ndarray | None = None
        self.stops = resolve_stop_words("english")

    @property
    def embeddings(self) -> Embeddings:
        with self._lock:
            if self._emb is None:
                from ..embeddings import Embeddings, load_embeddings

                self._emb = self._source if isinstance(self._source, Embeddings) else load_embeddings(self._source)
            return self._emb

    def protected_rows(self, text: str) -> list[int]:
        """Vocabulary rows of the words a mechanism protects (:func:`textdp.text.normalize`, in the vocabulary)."""
        index = self.embeddings.index
        return [index[w] for w in normalize(text, self.stops) if w in index]

    def nearest_word(self, row: int) -> tuple[int, float]:
        """The vocabulary row nearest to ``row`` (Euclidean distance between embeddings, itself excluded).

        Candidates from ``|x|^2 - 2 x.v`` in float32 (one matrix-vector product), the best 8 re-ranked exactly
        in float64.
        """
        emb = self.embeddings
        vectors = emb.vectors
        with self._lock:
            if self._sq_norms is None:
                self._sq_norms = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
            sq = self._sq_norms
        approx = sq - 2.0 * (vectors @ vectors[row]).astype(np.float64)
        approx[row] = np.inf
        k = min(8, approx.size - 1)
        cand = np.argpartition(approx, k)[: k + 1]
        cand = cand[cand != row]
        exact = np.linalg.norm(np.asarray(vectors[cand], dtype=np.float64)
                               - np.asarray(vectors[row], dtype=np.float64), axis=1)
        order = np.lexsort((cand, exact))
        return int(cand[order[0]]), float(exact[order[0]])

    def meaning(self, mech: Mechanism, guarantee: Guarantee, rows: Sequence[int]) -> list[dict[str, object]]:
        """The guarantee as numbers for this text: the factor for two example neighbours of it, in words.

        For a word of the text (its first protected word), ``w'`` its nearest vocabulary word and ``w''`` the
        protected word of the text farthest from it: the bound on how much more likely any output is from the
        text than from the same text with ``w`` replaced by ``w'`` (or ``w''``). Word mechanisms: the product
        of the per-word factors, here the one factor ``exp(log_ratio_bound(w, w'))``; ``earth-movers``:
        ``exp(epsilon * N * E_d)`` with ``E_d = d(w, w') / N`` for a truncated bag (one of N words moved) and
        ``exp(epsilon * N * W_inf)`` with ``W_inf <= d(w, w')`` for a sampled one; a mechanism with neither a
        metric guarantee nor a per-word bound (``syntf``): ``exp(epsilon)`` for any two texts (Weggenmann &
        Kerschbaum 2018).
        """
        from ..guarantees.earth_movers import EarthMoversGuarantee

        words = self.embeddings.words
        if not isinstance(guarantee, EarthMoversGuarantee) and not hasattr(mech, "log_ratio_bound"):
            # a document mechanism with one ε for any two texts (SynTF: no metric, no per-word bound)
            loss = float(guarantee.epsilon)
            return [{"text": "any two texts, however different (with the same N)", "loss": loss,
                     "factor": factor(loss), "sentence": "For any two texts, however different (with the same "
                     f"N): any output is at most {factor(loss)} times as likely from one as from the other."}]
        if not rows:
            return []
        w = int(rows[0])
        nn, d_nn = self.nearest_word(w)
        vectors = self.embeddings.vectors
        others = sorted({int(r) for r in rows} - {w})
        pairs = [(nn, f"its nearest word \u201c{words[nn]}\u201d", d_nn)]
        groups = getattr(mech, "groups_", None)  # CusText: the bound holds within one customized output set
        if groups is not None and groups[nn] != groups[w]:
            members = np.flatnonzero(np.asarray(groups) == groups[w])
            members = members[members != w]
            if members.size:
                dist = np.linalg.norm(np.asarray(vectors[members], dtype=np.float64)
                                      - np.asarray(vectors[w], dtype=np.float64), axis=1)
                near = int(members[int(np.argmin(dist))])
                pairs = [(near, f"\u201c{words[near]}\u201d, its nearest word in the same output set",
                          float(dist.min())), (nn, f"its nearest word \u201c{words[nn]}\u201d", d_nn)]
        if others:
            dist = np.linalg.norm(np.asarray(vectors[others], dtype=np.float64)
                                  - np.asarray(vectors[w], dtype=np.float64), axis=1)
            far = others[int(np.argmax(dist))]
            pairs.append((far, f"\u201c{words[far]}\u201d, another word of your text", float(dist.max())))
        out: list[dict[str, object]] = []
        for other, what, d in pairs:
            if isinstance(guarantee, EarthMoversGuarantee):
                loss = guarantee.privacy_loss(d / guarantee.size if guarantee.bag == "truncate" else d)
            elif hasattr(mech, "log_ratio_bound"):
                loss = float(mech.log_ratio_bound(w, other))
            else:  # pragma: no cover - every registered word or bag mechanism is handled above
                continue
            head = f"Your text, and the same text with \u201c{words[w]}\u201d replaced by {what}"
            if math.isinf(loss):
                tail = "no bound: the guarantee does not cover this pair, and the output can tell them apart."
            else:
                tail = f"any output is at most {factor(loss)} times as likely from one as from the other."
            out.append({"text": head, "loss": loss if math.isfinite(loss) else None, "factor": factor(loss),
                        "distance": round(d, 4), "sentence": f"{head}: {tail}"})
        return out

    def spans(self, text: str, kept: Counter[str], bag_size: int | None) -> list[list[object]]:
        """The input as ``[text, class]`` pieces: ``kept`` / ``replaced`` / ``dropped`` words, ``None`` between."""
        index = self.embeddings.index
        spans: list[list[object]] = []
        pos = 0
        protected = 0
        left = Counter(kept)
        for m in LETTERS.finditer(text):
            if m.start() > pos:
                spans.append([text[pos : m.start()], None])
            w = m.group().lower()
            if len(w) < 2 or w in self.stops or w not in index:
                cls = "dropped"
            elif bag_size is not None and protected >= bag_size:
                cls = "dropped"
                protected += 1
            else:
                protected += 1
                cls = "kept" if left[w] > 0 else "replaced"
                if left[w] > 0:
                    left[w] -= 1
            spans.append([m.group(), cls])
            pos = m.end()
        if pos < len(text):
            spans.append([text[pos:], None])
        return spans


def word_result(vocab: PageVocabulary, name: str, mech: Mechanism, doc: WordRelease, diag: DocumentDiagnostics,
                text: str, protected: list[int], bag: int | None, notes: list[str]) -> dict[str, object]:
    """The page's answer for one release ``doc`` of a word or document mechanism (its private diagnostics
    ``diag``; ``bag``: :func:`truncated_bag`): output words (kept ones marked), input spans, kept fraction, guarantee, record and ``notes``.

    The record is exactly what ``textdp obfuscate`` would write for this text; the input spans and the kept
    fraction describe the private input and are shown only to the person at the keyboard.
    """
    record = doc.to_record()
    inp = diag.input_rows.tolist()
    words = list(doc.words)
    out_flags, kept_words = mark_kept(diag, inp, words, vocab.embeddings)
    covered, not_covered = split_guarantee(doc.guarantee.statement)  # the record carries the compact form
    return {
        "mechanism": name,
        "epsilon": mech.epsilon_,  # the fitted calibration's, which the noise and the record read
        "kind": "bag" if name in BAG_MECHANISMS else "text",
        "output": [{"word": w, "kept": bool(f)} for w, f in zip(words, out_flags)],
        "input": vocab.spans(text, kept_words, bag),
        "kept": int(sum(out_flags)),
        "protected": len(inp) if diag.aligned else len(words),
        "kept_fraction": float(diag.unchanged_fraction()),
        "guarantee": {"statement": covered, "not_covered": not_covered, "unit": record.get("unit"),
                      "epsilon": record.get("epsilon"), "delta": record.get("delta")},
        "meaning": vocab.meaning(mech, doc.guarantee, inp if inp else protected),
        "record": record,
        "notes": notes,
    }
