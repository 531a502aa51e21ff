"""The generation sweep's texts: the rewriter's training sentences (:func:`write_training_corpus`) and the
authors' original training and test documents (:func:`load_authorship_documents`), read from the corpus presets.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._rng import make_rng, spawn
from .._validation import check_positive_int
from ..errors import ParameterError
from ..io import atomic_writer
from ..text import split_sentences
from .datasets import PRESETS, read_jsonl, resolve_data_dir, strip_quoted

__all__ = ['TRAINING_SOURCES', 'AuthorshipDocuments', 'corpus_rows', 'load_authorship_documents', 'write_training_corpus']

# --------------------------------------------------------------------------------------------
# training corpus


def _rows(corpus: str, data_dir: str | Path | None) -> list[dict[str, object]]:
    if corpus not in PRESETS:
        raise ParameterError(f"unknown corpus {corpus!r}; choose one of: {', '.join(PRESETS)}")
    return list(read_jsonl(resolve_data_dir(data_dir) / PRESETS[corpus]["path"]))


def _clean(corpus: str, text: str) -> str:
    return strip_quoted(text) if PRESETS[corpus].get("strip_quotes") else text



def corpus_rows(corpus: str, data_dir: str | Path | None) -> Iterator[tuple[dict[str, object], str]]:
    """Every row of ``corpus`` with a text, and that text cleaned (20NG quotes stripped)."""
    for row in _rows(corpus, data_dir):
        text = row.get("text")
        if isinstance(text, str):
            yield row, _clean(corpus, text)

#: The rewriter's training sentences: train splits of the three development corpora (60,000 sentences).
TRAINING_SOURCES: dict[str, int] = {"reuter_50_50": 30_000, "pan11_enron": 10_000, "20newsgroups": 20_000}


def write_training_corpus(
    path: str | Path,
    sources: dict[str, int],
    *,
    data_dir: str | Path | None = None,
    split: str = "train",
    seed: int = 0,
) -> dict[str, int]:
    """Write training sentences (JSONL, one sentence per line) from the ``split`` of each corpus.

    ``sources`` maps a corpus preset to the number of sentences sampled (uniformly, with
    ``seed``) from that corpus's ``split`` documents. Returns the counts written. The
    file holds corpus text: write it outside the repository.
    """
    out: list[dict[str, str]] = []
    counts: dict[str, int] = {}
    rngs = spawn(seed, len(sources))
    for (corpus, n), g in zip(sources.items(), rngs, strict=True):
        sents = [
            s for row in _rows(corpus, data_dir) if row.get("split") == split and isinstance(row.get("text"), str)
            for s in split_sentences(_clean(corpus, str(row["text"])))
        ]
        if not sents:
            raise ParameterError(f"{corpus}: no sentences in split {split!r}")
        pick = np.sort(g.choice(len(sents), size=min(int(n), len(sents)), replace=False))
        out.extend({"id": f"{corpus}-{i}", "text": sents[i]} for i in pick.tolist())
        counts[corpus] = int(pick.size)
    with atomic_writer(path) as fh:
        for rec in out:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return counts


# --------------------------------------------------------------------------------------------
# authorship documents


@dataclass
class AuthorshipDocuments:
    """Original training documents and test documents of a set of authors (raw text)."""

    name: str
    train_texts: list[str]
    train_labels: list[str]
    test_ids: list[str]
    test_texts: list[str]
    test_labels: list[str]
    construction: dict[str, object] = field(default_factory=dict)


def load_authorship_documents(
    corpus: str,
    *,
    data_dir: str | Path | None = None,
    authors: int = 50,
    train_docs: int = 50,
    test_docs: int = 4,
    min_words: int = 20,
    seed: int = 0,
) -> AuthorshipDocuments:
    """Training (``split == "train"``) and test documents of the authors with most documents.

    An author needs at least ``test_docs`` test documents and 5 training documents of at
    least ``min_words`` words (20NG quotes stripped); the ``authors`` authors with most
    training documents are kept (ties: by name); per author at most ``train_docs``
    training and exactly ``test_docs`` test documents are drawn with ``seed``.
    """
    authors = check_positive_int(authors, "authors")
    train_n, test_n = check_positive_int(train_docs, "train_docs"), check_positive_int(test_docs, "test_docs")
    by_author: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: {"train": [], "test": []})
    filt = PRESETS.get(corpus, {}).get("filter_field")
    for row in _rows(corpus, data_dir):
        a, text, split = row.get("author"), row.get("text"), row.get("split")
        if a is None or not isinstance(text, str) or split not in ("train", "test"):
            continue
        if filt and not row.get(filt):
            continue
        text = _clean(corpus, text)
        if len(text.split()) >= min_words:
            by_author[str(a)][split].append((str(row.get("id")), text))
    eligible = [a for a, d in by_author.items() if len(d["test"]) >= test_n and len(d["train"]) >= 5]
    eligible.sort(key=lambda a: (-len(by_author[a]["train"]), a))
    chosen = sorted(eligible[:authors])
    if len(chosen) < 2:
        raise ParameterError(f"{corpus}: fewer than 2 authors with {test_n} test and 5 training documents")
    g = make_rng(seed)
    out = AuthorshipDocuments(corpus, [], [], [], [], [])
    for a in chosen:
        tr, te = by_author[a]["train"], by_author[a]["test"]
        for i in np.sort(g.choice(len(tr), size=min(train_n, len(tr)), replace=False)):
            out.train_texts.append(tr[i][1])
            out.train_labels.append(a)
        for i in np.sort(g.choice(len(te), size=test_n, replace=False)):
            out.test_ids.append(te[i][0])
            out.test_texts.append(te[i][1])
            out.test_labels.append(a)
    out.construction = {"authors": len(chosen), "train_documents": len(out.train_texts),
                        "test_documents": len(out.test_texts), "eligible_authors": len(eligible), "seed": seed}
    return out


