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
from typing import NamedTuple, TypedDict

from .._validation import check_choice, check_positive_int
from ..errors import DocumentError, ParameterError
from ..io import iter_jsonl_records as read_jsonl
from ..text import normalize, strip_quoted

__all__ = ["PRESETS", "Construction", "EvaluationSet", "Preset", "build_evaluation_set", "read_jsonl", "resolve_data_dir", "strip_quoted"]

class Preset(TypedDict, total=False):
    """A corpus's defaults (``path`` is under the data dir; the others are the construction's settings)."""

    path: str
    topic_field: str
    filter_field: str
    max_authors: int
    strip_quotes: bool
    n_topics: int
    authors_per_topic: int


#: Corpus defaults for the three development corpora (paths are under the data dir).
PRESETS: dict[str, Preset] = {
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


class _Exclusion(TypedDict, total=False):
    author: str
    words: int
    known_words: int
    unknown_words: int
    reason: str


class Construction(TypedDict, total=False):
    """How a set was built (the report's set-up section): settings, counts, exclusions, split checks."""

    corpus: str
    path: str
    authors: int
    eligible_authors: int
    corpus_authors: int
    excluded: list[_Exclusion]
    split_field: str | None
    known_split: list[str] | None
    unknown_split: list[str] | None
    detected_split_field: str | None
    crossed_split: dict[str, dict[str, list[str]]]
    known_words: int
    unknown_words: int
    cut: str
    topic_field: str | None
    topics: list[str]
    authors_per_topic: int | None
    strip_quotes: bool
    filter_field: str | None
    topic_train_texts: int


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
    construction: Construction = field(default_factory=lambda: Construction())


@dataclass
class _Options:
    """The construction's settings, resolved against the preset (``path`` and ``name`` by :func:`_resolve`)."""

    author_field: str
    text_field: str
    topic_field: str | None
    filter_field: str | None
    strip_quotes: bool
    known_words: int
    unknown_words: int
    cut: str
    max_authors: int | None
    n_topics: int | None
    authors_per_topic: int | None
    max_topic_train: int | None
    split_field: str | None
    known_split: tuple[str, ...]
    unknown_split: tuple[str, ...]
    path: Path = Path()
    name: str = ""

    @property
    def need(self) -> int:
        return self.known_words + self.unknown_words


@dataclass
class _Rows:
    """The usable rows of the corpus, in file order, per author (text, topic) with their split values."""

    by_author: dict[str, list[tuple[str, str | None]]] = field(default_factory=lambda: defaultdict(list))
    splits: dict[str, list[str | None]] = field(default_factory=lambda: defaultdict(list))
    every: list[tuple[str, str, str | None]] = field(default_factory=list)
    detected_split: str | None = None


class _Author(NamedTuple):
    known: list[str]
    unknown: list[str]
    known_raw: list[str]
    unknown_raw: list[str]
    topic: str | None
    n_words: int


def _resolve(corpus: str, data_dir: str | os.PathLike[str] | None, o: _Options) -> _Options:
    """The settings: the preset's values for those not given, the path, and validated sizes and splits."""
    preset = PRESETS.get(corpus, Preset())
    if corpus in _HELD_OUT or any(h in str(corpus) for h in _HELD_OUT):
        raise ParameterError(f"corpus {corpus!r} is held out for final evaluation; use another corpus")
    if preset:
        o.path, o.name = resolve_data_dir(data_dir) / preset["path"], corpus
        # the preset's value for each setting not given
        o.topic_field = preset.get("topic_field") if o.topic_field is None else o.topic_field
        o.filter_field = preset.get("filter_field") if o.filter_field is None else o.filter_field
        o.max_authors = preset.get("max_authors") if o.max_authors is None else o.max_authors
        o.n_topics = preset.get("n_topics") if o.n_topics is None else o.n_topics
        o.authors_per_topic = preset.get("authors_per_topic") if o.authors_per_topic is None else o.authors_per_topic
        o.strip_quotes = o.strip_quotes or bool(preset.get("strip_quotes", False))
    else:
        o.path = Path(corpus)
        if not o.path.is_absolute() and data_dir is not None and not o.path.exists():
            o.path = Path(data_dir) / o.path
        o.name = o.path.name.split(".")[0]
    o.known_words = check_positive_int(o.known_words, "known_words")
    o.unknown_words = check_positive_int(o.unknown_words, "unknown_words")
    check_choice(o.cut, "cut", ("normalised", "raw"))
    o.known_split = tuple(str(v) for v in o.known_split)
    o.unknown_split = tuple(str(v) for v in o.unknown_split)
    if o.split_field is not None:
        if not o.known_split or not o.unknown_split:
            raise ParameterError("split_field needs non-empty known_split and unknown_split lists")
        shared = set(o.known_split) & set(o.unknown_split)
        if shared:
            raise ParameterError(f"known_split and unknown_split share {sorted(shared)}")
        if o.cut != "normalised":
            raise ParameterError('split_field works with cut = "normalised" only')
    return o


def _read_rows(o: _Options) -> _Rows:
    """Step 1 (and the filter): the rows with an author and a text, quotes stripped if asked."""
    out = _Rows()
    for row in read_jsonl(o.path):
        author, text = row.get(o.author_field), row.get(o.text_field)
        if author is None or not isinstance(text, str) or not text.strip():
            continue
        if o.filter_field is not None and not row.get(o.filter_field):
            continue
        if o.strip_quotes:
            text = strip_quoted(text)
        topic = None if o.topic_field is None else row.get(o.topic_field)
        if o.topic_field is not None and topic is None:
            continue
        key = o.split_field or ("split" if "split" in row else None)
        if key is not None and o.split_field is None:
            out.detected_split = key
        sval = None if key is None or row.get(key) is None else str(row.get(key))
        if o.split_field is not None and sval not in o.known_split + o.unknown_split:
            continue  # neither side of the split (e.g. a validation set)
        topic_s = None if topic is None else str(topic)
        out.by_author[str(author)].append((text, topic_s))
        out.splits[str(author)].append(sval)
        out.every.append((str(author), text, topic_s))
    if not out.by_author:
        raise DocumentError(f"{o.path}: no rows with fields {o.author_field!r} and {o.text_field!r}")
    return out


def _cut_along_split(o: _Options, author: str, rows: list[tuple[str, str | None]], svals: list[str | None],
                     topic: str | None) -> _Author | _Exclusion:
    """Step 3 with ``split_field``: known text from the known split, snippet from the unknown split."""
    k_rows = [t for (t, _), v in zip(rows, svals, strict=True) if v in o.known_split]
    u_rows = [t for (t, _), v in zip(rows, svals, strict=True) if v in o.unknown_split]
    k_words, u_words = normalize(" ".join(k_rows)), normalize(" ".join(u_rows))
    if len(k_words) < o.known_words or len(u_words) < o.unknown_words:
        return _Exclusion(author=author, known_words=len(k_words), unknown_words=len(u_words),
                          reason=f"fewer than {o.known_words} known ({'/'.join(o.known_split)}) or "
                                 f"{o.unknown_words} unknown ({'/'.join(o.unknown_split)}) words")
    k_raw, u_raw = " ".join(k_rows).split(), " ".join(u_rows).split()
    return _Author(k_words[: o.known_words], u_words[: o.unknown_words], k_raw[: o.known_words],
                   u_raw[: o.unknown_words], topic, len(k_raw) + len(u_raw))


def _cut_in_order(o: _Options, author: str, rows: list[tuple[str, str | None]], svals: list[str | None],
                  topic: str | None, detected: str | None,
                  crossed: dict[str, dict[str, list[str]]]) -> _Author | _Exclusion:
    """Step 3: the first ``known_words`` and last ``unknown_words`` words (normalised or raw cut)."""
    raw = " ".join(t for t, _ in rows).split()
    if o.cut == "normalised":
        per_row = [normalize(t) for t, _ in rows]
        words = [w for r in per_row for w in r]
        if len(words) < o.need:
            return _Exclusion(author=author, words=len(words), reason=f"fewer than {o.need} normalised words")
        known, unknown = words[: o.known_words], words[-o.unknown_words :]
        if detected is not None:  # which split values fed each side (never hidden)
            owner = [v for r, v in zip(per_row, svals, strict=True) for _ in r]
            k_src = sorted({str(v) for v in owner[: o.known_words]})
            u_src = sorted({str(v) for v in owner[-o.unknown_words :]})
            if set(k_src) & set(u_src) or len(k_src) > 1:  # one split fed both sides, or the known text mixes
                crossed[author] = {"known": k_src, "unknown": u_src}
    else:
        if len(raw) < o.need:
            return _Exclusion(author=author, words=len(raw), reason=f"fewer than {o.need} raw words")
        known, unknown = normalize(" ".join(raw[: o.known_words])), normalize(" ".join(raw[-o.unknown_words :]))
    if len(raw) < o.need:  # hyphenated words give more normalised than raw words: never overlap the raw cut
        k_raw, u_raw = raw[: len(raw) // 2], raw[len(raw) // 2 :]
    else:
        k_raw, u_raw = raw[: o.known_words], raw[-o.unknown_words :]
    return _Author(known, unknown, k_raw, u_raw, topic, len(raw))


def _cut_authors(o: _Options, data: _Rows) -> tuple[dict[str, _Author], list[_Exclusion], dict[str, dict[str, list[str]]]]:
    """Steps 2-3 for every author: the topic's rows, then the known / unknown cut (or the exclusion)."""
    eligible: dict[str, _Author] = {}
    excluded: list[_Exclusion] = []
    crossed: dict[str, dict[str, list[str]]] = {}
    for author in sorted(data.by_author):
        rows, svals = data.by_author[author], data.splits[author]
        topic = None
        if o.topic_field is not None:
            counts = Counter(t for _, t in rows)
            top = max(counts.values())
            topic = min(str(t) for t, c in counts.items() if c == top)
            keep_idx = [i for i, r in enumerate(rows) if r[1] == topic]
            rows, svals = [rows[i] for i in keep_idx], [svals[i] for i in keep_idx]
        if o.split_field is not None:
            got = _cut_along_split(o, author, rows, svals, topic)
        else:
            got = _cut_in_order(o, author, rows, svals, topic, data.detected_split, crossed)
        if isinstance(got, _Author):
            eligible[author] = got
        else:
            excluded.append(got)
    return eligible, excluded, crossed


def _choose(o: _Options, eligible: dict[str, _Author]) -> tuple[list[str], list[str]]:
    """Step 4: the authors of the set and the topics kept."""
    if o.topic_field is None:
        names = sorted(eligible)
        if o.max_authors is not None:
            names = names[: check_positive_int(o.max_authors, "max_authors")]
        return names, []
    by_topic: dict[str, list[str]] = defaultdict(list)
    for a, v in eligible.items():
        by_topic[str(v.topic)].append(a)
    ranked = sorted(by_topic, key=lambda t: (-len(by_topic[t]), t))
    if o.n_topics is not None:
        ranked = ranked[: check_positive_int(o.n_topics, "n_topics")]
    per = None if o.authors_per_topic is None else check_positive_int(o.authors_per_topic, "authors_per_topic")
    chosen: list[str] = []
    for t in sorted(ranked):
        members = sorted(by_topic[t], key=lambda a: (-eligible[a].n_words, a))
        chosen.extend(sorted(members[:per] if per is not None else members))
    return chosen, sorted(ranked)


def _topic_training(o: _Options, data: _Rows, chosen: list[str], kept_topics: list[str]
                    ) -> tuple[list[list[str]], list[str]]:
    """Step 5: the kept topics' rows by authors outside the set, normalised, thinned to ``max_topic_train``."""
    chosen_set = set(chosen)
    texts, labels = [], []
    for author, text, topic in data.every:
        if author in chosen_set or topic not in kept_topics:
            continue
        words = normalize(text)
        if len(words) >= 5:
            texts.append(words)
            labels.append(str(topic))
    if o.max_topic_train is not None and len(texts) > o.max_topic_train:
        # deterministic thinning: every k-th row in file order
        step = len(texts) / o.max_topic_train
        idx = [int(i * step) for i in range(o.max_topic_train)]
        texts, labels = [texts[i] for i in idx], [labels[i] for i in idx]
    return texts, labels


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
    o = _resolve(corpus, data_dir, _Options(
        author_field=author_field, text_field=text_field, topic_field=topic_field, filter_field=filter_field,
        strip_quotes=strip_quotes, known_words=known_words, unknown_words=unknown_words, cut=cut,
        max_authors=max_authors, n_topics=n_topics, authors_per_topic=authors_per_topic,
        max_topic_train=max_topic_train, split_field=split_field, known_split=tuple(known_split),
        unknown_split=tuple(unknown_split)))
    data = _read_rows(o)
    eligible, excluded, crossed = _cut_authors(o, data)
    chosen, kept_topics = _choose(o, eligible)
    if len(chosen) < 2:
        raise DocumentError(
            f"{o.path}: only {len(chosen)} author(s) have {o.need} words or more"
            + (f" ({o.known_words} known / {o.unknown_words} unknown along {o.split_field!r})" if o.split_field
               else "")
            + "; lower known_words/unknown_words"
        )
    texts, labels = _topic_training(o, data, chosen, kept_topics) if o.topic_field is not None else ([], [])
    out = EvaluationSet(
        name=o.name, authors=chosen,
        known=[eligible[a].known for a in chosen], unknown=[eligible[a].unknown for a in chosen],
        known_raw=[eligible[a].known_raw for a in chosen], unknown_raw=[eligible[a].unknown_raw for a in chosen],
        topics=[str(eligible[a].topic) for a in chosen] if o.topic_field is not None else None,
        topic_train_texts=texts, topic_train_labels=labels,
    )
    out.construction = Construction(
        corpus=o.name, path=str(o.path), authors=len(chosen), eligible_authors=len(eligible),
        corpus_authors=len(data.by_author), excluded=excluded, split_field=o.split_field,
        known_split=list(o.known_split) if o.split_field else None,
        unknown_split=list(o.unknown_split) if o.split_field else None,
        detected_split_field=data.detected_split,
        crossed_split={a: v for a, v in crossed.items() if a in set(chosen)},
        known_words=o.known_words, unknown_words=o.unknown_words, cut=o.cut,
        topic_field=o.topic_field, topics=kept_topics, authors_per_topic=o.authors_per_topic,
        strip_quotes=o.strip_quotes, filter_field=o.filter_field, topic_train_texts=len(texts),
    )
    return out
