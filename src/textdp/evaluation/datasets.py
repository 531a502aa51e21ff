"""Deterministic author (and topic) evaluation sets, after the paper's Appendix B.

Fernandes, Dras & McIver (POST 2019, Appendix B.1) give each author a
*known* text (the first 2,000 words) and an *unknown snippet* (the last 1,000
words), normalize them, and apply the mechanism to the snippets only.
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
   (:func:`textdp.text.normalize`); the known text is the first ``known_words``
   normalised words, the snippet the last ``unknown_words`` (the two never
   overlap: authors with fewer than ``known_words + unknown_words`` are left
   out, and the report lists them). The raw text split the same way (first / last
   words of the raw whitespace tokens) is kept for the raw-text reference row.
   With ``split_field`` (e.g. ``"split"``) the corpus's own known/unknown split is
   followed instead: the known text is the first ``known_words`` normalised words
   of the author's rows whose split is in ``known_split``, the snippet the first
   ``unknown_words`` of the rows in ``unknown_split``; the two never cross, and an
   author short of words on either side is left out (and listed). Without it, when
   the rows carry a ``split`` field, the construction records for how many authors
   the cut crossed that field (``construction["crossed_split"]``), so the report
   never hides it;
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
from ..text import normalize, strip_quoted

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
    split_field: str | None = None,
    known_split: tuple[str, ...] | list[str] = ("train",),
    unknown_split: tuple[str, ...] | list[str] = ("test",),
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
    known_split = tuple(str(v) for v in known_split)
    unknown_split = tuple(str(v) for v in unknown_split)
    if split_field is not None:
        if not known_split or not unknown_split:
            raise ParameterError("split_field needs non-empty known_split and unknown_split lists")
        if set(known_split) & set(unknown_split):
            raise ParameterError(f"known_split and unknown_split share {sorted(set(known_split) & set(unknown_split))}")
        if cut != "normalised":
            raise ParameterError('split_field works with cut = "normalised" only')

    rows_by_author: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    splits_by_author: dict[str, list[str | None]] = defaultdict(list)
    all_rows: list[tuple[str, str, str | None]] = []
    detected_split: str | None = None
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
        key = split_field or ("split" if "split" in row else None)
        if key is not None and split_field is None:
            detected_split = key
        sval = None if key is None or row.get(key) is None else str(row.get(key))
        if split_field is not None and sval not in known_split + unknown_split:
            continue  # neither side of the split (e.g. a validation set)
        rows_by_author[str(author)].append((text, None if topic is None else str(topic)))
        splits_by_author[str(author)].append(sval)
        all_rows.append((str(author), text, None if topic is None else str(topic)))
    if not rows_by_author:
        raise DocumentError(f"{path}: no rows with fields {author_field!r} and {text_field!r}")

    need = known_words + unknown_words
    eligible: dict[str, tuple[list[str], list[str], list[str], list[str], str | None, int]] = {}
    excluded: list[dict[str, Any]] = []
    crossed: dict[str, dict[str, list[str]]] = {}
    for author in sorted(rows_by_author):
        rows = rows_by_author[author]
        svals = splits_by_author[author]
        topic = None
        if topic_field is not None:
            counts = Counter(t for _, t in rows)
            top = max(counts.values())
            topic = min(str(t) for t, c in counts.items() if c == top)
            keep_idx = [i for i, r in enumerate(rows) if r[1] == topic]
            rows, svals = [rows[i] for i in keep_idx], [svals[i] for i in keep_idx]
        if split_field is not None:
            k_rows = [t for (t, _), v in zip(rows, svals) if v in known_split]
            u_rows = [t for (t, _), v in zip(rows, svals) if v in unknown_split]
            k_words = normalize(" ".join(k_rows))
            u_words = normalize(" ".join(u_rows))
            if len(k_words) < known_words or len(u_words) < unknown_words:
                excluded.append({"author": author, "known_words": len(k_words), "unknown_words": len(u_words),
                                 "reason": f"fewer than {known_words} known ({'/'.join(known_split)}) or "
                                           f"{unknown_words} unknown ({'/'.join(unknown_split)}) words"})
                continue
            k_raw_all, u_raw_all = " ".join(k_rows).split(), " ".join(u_rows).split()
            eligible[author] = (k_words[:known_words], u_words[:unknown_words], k_raw_all[:known_words],
                                u_raw_all[:unknown_words], topic, len(k_raw_all) + len(u_raw_all))
            continue
        raw = " ".join(t for t, _ in rows).split()
        if cut == "normalised":
            per_row = [normalize(t) for t, _ in rows]
            words = [w for r in per_row for w in r]
            if len(words) < need:
                excluded.append({"author": author, "words": len(words),
                                 "reason": f"fewer than {need} normalised words"})
                continue
            known, unknown = words[:known_words], words[-unknown_words:]
            if detected_split is not None:  # which split values fed each side (never hidden)
                owner = [v for r, v in zip(per_row, svals) for _ in r]
                k_src = sorted({str(v) for v in owner[:known_words]})
                u_src = sorted({str(v) for v in owner[-unknown_words:]})
                if set(k_src) & set(u_src) or len(k_src) > 1:  # one split fed both sides, or the known text mixes
                    crossed[author] = {"known": k_src, "unknown": u_src}
        else:
            if len(raw) < need:
                excluded.append({"author": author, "words": len(raw), "reason": f"fewer than {need} raw words"})
                continue
            known, unknown = normalize(" ".join(raw[:known_words])), normalize(" ".join(raw[-unknown_words:]))
        if len(raw) < need:  # hyphenated words give more normalised than raw words: never overlap the raw cut
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
            f"{path}: only {len(chosen)} author(s) have {need} words or more"
            + (f" ({known_words} known / {unknown_words} unknown along {split_field!r})" if split_field else "")
            + "; lower known_words/unknown_words"
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
            words = normalize(text)
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
        "corpus_authors": len(rows_by_author),
        "excluded": excluded,
        "split_field": split_field,
        "known_split": list(known_split) if split_field else None,
        "unknown_split": list(unknown_split) if split_field else None,
        "detected_split_field": detected_split,
        "crossed_split": {a: v for a, v in crossed.items() if a in set(chosen)},
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
