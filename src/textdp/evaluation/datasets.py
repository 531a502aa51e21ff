"""Deterministic author (and topic) evaluation sets, after the paper's Appendix B.

Fernandes, Dras & McIver (POST 2019, Appendix B.1) give each author a
*known* text (the first 2,000 words) and an *unknown snippet* (the last 1,000
words), normalise them, and apply the mechanism to the snippets only.
:func:`build_evaluation_set` builds such a set from any JSON-lines corpus with
an author field, in a fully deterministic way (no randomness at all):

1. rows are read in file order; rows without an author or text are skipped;
   with ``strip_quotes`` quoted lines (``>`` ...) and attribution lines
   ("... writes:") are removed first (Usenet replies quote other posters) by
   :func:`textdp.text.strip_quoted` (the one quote-stripper; rows are read by
   :func:`textdp.io.iter_jsonl_records`, the one JSONL reader);
2. if a ``topic_field`` is given, an author's topic is their most frequent
   topic (ties: alphabetical) and only their rows in that topic are kept;
3. an author's rows are concatenated in file order and normalised
   (:func:`textdp.text.normalise`); the known text is the first ``known_words``
   normalised words, the snippet the last ``unknown_words`` (the two never
   overlap: authors with fewer than ``known_words + unknown_words`` are left
   out). The raw text split the same way (first / last words of the raw
   whitespace tokens) is kept for the raw-text reference row;
4. with topics, the ``n_topics`` topics with most eligible authors (ties:
   alphabetical) are kept, and in each the ``authors_per_topic`` authors with
   most words (ties: by name); otherwise authors are sorted by name and the
   first ``max_authors`` kept;
5. the topic classifier's training set is every row in the kept topics by an
   author *not* in the set (so utility models never see the evaluated authors),
   normalised.

Normalising the whole text before cutting (``cut = "normalised"``, the
default) matches the independent reference replication of Koppel on Reuters
C50 (0.56); ``cut = "raw"`` cuts 2,000 / 1,000 raw words and normalises after.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._validation import check_choice, check_positive_int
from ..errors import DocumentError, ParameterError
from ..io import iter_jsonl_records as read_jsonl
from ..text import normalise, strip_quoted

__all__ = ["PRESETS", "EvaluationSet", "build_evaluation_set", "read_jsonl", "resolve_data_dir", "strip_quoted"]

#: Corpus defaults for the three development corpora (paths are under the data dir).
PRESETS: dict[str, dict[str, Any]] = {
    "reuter_50_50": {"path": "reuter_50_50/reuter_50_50.jsonl.gz"},
    "pan11_enron": {"path": "pan11_enron/pan11_enron.jsonl.gz", "filter_field": "in_candidate_set", "max_authors": 50},
    "20newsgroups": {
        "path": "20newsgroups/20newsgroups.jsonl.gz",
        "topic_field": "topic",
        "strip_quotes": True,
        "n_topics": 5,
        "authors_per_topic": 10,
    },
}

_HELD_OUT = ("ebg", "pan19_fanfiction")


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The corpus directory: ``data_dir``, else ``$TEXTDP_DATA_DIR``, else ``./shared/data`` or ``../shared/data``."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("TEXTDP_DATA_DIR")
    if env:
        return Path(env)
    for cand in (Path("shared/data"), Path("../shared/data")):
        if cand.is_dir():
            return cand
    raise ParameterError("no corpus directory: set data_dir in the config or the TEXTDP_DATA_DIR environment variable")


@dataclass
class EvaluationSet:
    """Known texts and unknown snippets of a set of authors (Appendix B.1).

    Attributes
    ----------
    name : str
        Corpus name.
    authors : list of str
        One entry per author, in set order.
    known, unknown : list of list of str
        Normalised known texts and snippets.
    known_raw, unknown_raw : list of list of str
        The same cut on raw whitespace tokens (reference rows only).
    topics : list of str or None
        Topic of each author (``None`` for authorship-only corpora).
    topic_train_texts, topic_train_labels : list
        Normalised training texts for topic classifiers (other authors).
    construction : dict
        Settings and counts describing the construction (for the report).
    """

    name: str
    authors: list[str]
    known: list[list[str]]
    unknown: list[list[str]]
    known_raw: list[list[str]]
    unknown_raw: list[list[str]]
    topics: list[str] | None = None
    topic_train_texts: list[list[str]] = field(default_factory=list)
    topic_train_labels: list[str] = field(default_factory=list)
    construction: dict[str, Any] = field(default_factory=dict)


def build_evaluation_set(
    corpus: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    author_field: str = "author",
    text_field: str = "text",
    topic_field: str | None = None,
    filter_field: str | None = None,
    strip_quotes: bool = False,
    known_words: int = 2000,
    unknown_words: int = 1000,
    cut: str = "normalised",
    max_authors: int | None = None,
    n_topics: int | None = None,
    authors_per_topic: int | None = None,
    max_topic_train: int | None = 5000,
) -> EvaluationSet:
    """Build the evaluation set of ``corpus`` (a preset name or a JSON-lines path).

    Keyword arguments not given take the preset's value (:data:`PRESETS`).
    See the module docstring for the construction.
    """
    preset = dict(PRESETS.get(corpus, {}))
    if corpus in _HELD_OUT or any(h in str(corpus) for h in _HELD_OUT):
        raise ParameterError(f"corpus {corpus!r} is held out for final evaluation; use another corpus")
    if preset:
        path = resolve_data_dir(data_dir) / preset["path"]
        topic_field = topic_field if topic_field is not None else preset.get("topic_field")
        filter_field = filter_field if filter_field is not None else preset.get("filter_field")
        strip_quotes = strip_quotes or bool(preset.get("strip_quotes", False))
        max_authors = max_authors if max_authors is not None else preset.get("max_authors")
        n_topics = n_topics if n_topics is not None else preset.get("n_topics")
        authors_per_topic = authors_per_topic if authors_per_topic is not None else preset.get("authors_per_topic")
        name = corpus
    else:
        path = Path(corpus)
        if not path.is_absolute() and data_dir is not None and not path.exists():
            path = Path(data_dir) / path
        name = path.name.split(".")[0]
    known_words = check_positive_int(known_words, "known_words")
    unknown_words = check_positive_int(unknown_words, "unknown_words")
    check_choice(cut, "cut", ("normalised", "raw"))

    rows_by_author: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    all_rows: list[tuple[str, str, str | None]] = []
    for row in read_jsonl(path):
        author, text = row.get(author_field), row.get(text_field)
        if author is None or not isinstance(text, str) or not text.strip():
            continue
        if filter_field is not None and not row.get(filter_field):
            continue
        if strip_quotes:
            text = strip_quoted(text)
        topic = None if topic_field is None else row.get(topic_field)
        if topic_field is not None and topic is None:
            continue
        rows_by_author[str(author)].append((text, None if topic is None else str(topic)))
        all_rows.append((str(author), text, None if topic is None else str(topic)))
    if not rows_by_author:
        raise DocumentError(f"{path}: no rows with fields {author_field!r} and {text_field!r}")

    need = known_words + unknown_words
    eligible: dict[str, tuple[list[str], list[str], list[str], list[str], str | None, int]] = {}
    for author in sorted(rows_by_author):
        rows = rows_by_author[author]
        topic = None
        if topic_field is not None:
            counts = Counter(t for _, t in rows)
            top = max(counts.values())
            topic = min(str(t) for t, c in counts.items() if c == top)
            rows = [r for r in rows if r[1] == topic]
        raw = " ".join(t for t, _ in rows).split()
        if cut == "normalised":
            words = normalise(" ".join(raw))
            if len(words) < need:
                continue
            known, unknown = words[:known_words], words[-unknown_words:]
        else:
            if len(raw) < need:
                continue
            known, unknown = normalise(" ".join(raw[:known_words])), normalise(" ".join(raw[-unknown_words:]))
        if len(raw) < need:
            k_raw, u_raw = raw[: len(raw) // 2], raw[len(raw) // 2 :]
        else:
            k_raw, u_raw = raw[:known_words], raw[-unknown_words:]
        eligible[author] = (known, unknown, k_raw, u_raw, topic, len(raw))

    if topic_field is not None:
        by_topic: dict[str, list[str]] = defaultdict(list)
        for a, v in eligible.items():
            by_topic[str(v[4])].append(a)
        ranked = sorted(by_topic, key=lambda t: (-len(by_topic[t]), t))
        if n_topics is not None:
            ranked = ranked[: check_positive_int(n_topics, "n_topics")]
        per = None if authors_per_topic is None else check_positive_int(authors_per_topic, "authors_per_topic")
        chosen: list[str] = []
        for t in sorted(ranked):
            members = sorted(by_topic[t], key=lambda a: (-eligible[a][5], a))
            chosen.extend(sorted(members[:per] if per is not None else members))
        kept_topics = sorted(ranked)
    else:
        chosen = sorted(eligible)
        if max_authors is not None:
            chosen = chosen[: check_positive_int(max_authors, "max_authors")]
        kept_topics = []
    if len(chosen) < 2:
        raise DocumentError(
            f"{path}: only {len(chosen)} author(s) have {need} words or more; lower known_words/unknown_words"
        )

    out = EvaluationSet(
        name=name,
        authors=chosen,
        known=[eligible[a][0] for a in chosen],
        unknown=[eligible[a][1] for a in chosen],
        known_raw=[eligible[a][2] for a in chosen],
        unknown_raw=[eligible[a][3] for a in chosen],
        topics=[str(eligible[a][4]) for a in chosen] if topic_field is not None else None,
    )
    if topic_field is not None:
        chosen_set = set(chosen)
        texts, labels = [], []
        for author, text, topic in all_rows:
            if author in chosen_set or topic not in kept_topics:
                continue
            words = normalise(text)
            if len(words) >= 5:
                texts.append(words)
                labels.append(str(topic))
        if max_topic_train is not None and len(texts) > max_topic_train:
            # deterministic thinning: every k-th row in file order
            step = len(texts) / max_topic_train
            idx = [int(i * step) for i in range(max_topic_train)]
            texts, labels = [texts[i] for i in idx], [labels[i] for i in idx]
        out.topic_train_texts, out.topic_train_labels = texts, labels
    out.construction = {
        "corpus": name,
        "path": str(path),
        "authors": len(chosen),
        "eligible_authors": len(eligible),
        "known_words": known_words,
        "unknown_words": unknown_words,
        "cut": cut,
        "topic_field": topic_field,
        "topics": kept_topics,
        "authors_per_topic": authors_per_topic,
        "strip_quotes": strip_quotes,
        "filter_field": filter_field,
        "topic_train_texts": len(out.topic_train_texts),
    }
    return out
