"""Text preparation: tokens, stop words and fixed-size bags of words.

The Earth Mover's privacy guarantee (Fernandes, Dras & McIver, 2019, Thm. 5.1)
holds between *bags of the same size N*, so every document is turned into a bag
of exactly N in-vocabulary words before any noise is added:

``normalize``
    lower-case, keep runs of letters (punctuation and digits removed), drop stop
    words and one-letter tokens; the normalisation of the paper's Appendix B.
``split_sentences``
    a rule-based sentence splitter for sentence-level rewriting
    (:mod:`textdp.generation`); ``tokenize(text, punctuation=True)`` keeps
    punctuation marks and numbers as tokens for the same use.
``make_bag``
    ``truncate`` keeps the first N words (the paper's experiments; a document
    with fewer than N words is an error, because padding would invent words) and
    ``sample`` draws N words with replacement from the document's word
    distribution (the workshop paper's reading; works for any length >= 1).

Out-of-vocabulary words are dropped *before* the bag is formed and counted:
they are never copied to an output (the paper's fan-fiction experiment leaked
character names that way).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .._options import BAG_MODES
from .._validation import check_choice, check_size
from ..errors import DocumentError, ParameterTypeError

__all__ = [
    "BAG_MODES",
    "ENGLISH_STOP_WORDS",
    "Bag",
    "make_bag",
    "normalize",
    "resolve_stop_words",
    "split_sentences",
    "strip_quoted",
    "tokenize",
]

#: The 318 English stop words of scikit-learn (Glasgow Information Retrieval
#: Group list), the list used for the paper's and the reference's normalisation.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    (
    "a", "about", "above", "across", "after", "afterwards", "again", "against", "all", "almost",
    "alone", "along", "already", "also", "although", "always", "am", "among", "amongst",
    "amoungst", "amount", "an", "and", "another", "any", "anyhow", "anyone", "anything", "anyway",
    "anywhere", "are", "around", "as", "at", "back", "be", "became", "because", "become",
    "becomes", "becoming", "been", "before", "beforehand", "behind", "being", "below", "beside",
    "besides", "between", "beyond", "bill", "both", "bottom", "but", "by", "call", "can",
    "cannot", "cant", "co", "con", "could", "couldnt", "cry", "de", "describe", "detail", "do",
    "done", "down", "due", "during", "each", "eg", "eight", "either", "eleven", "else",
    "elsewhere", "empty", "enough", "etc", "even", "ever", "every", "everyone", "everything",
    "everywhere", "except", "few", "fifteen", "fifty", "fill", "find", "fire", "first", "five",
    "for", "former", "formerly", "forty", "found", "four", "from", "front", "full", "further",
    "get", "give", "go", "had", "has", "hasnt", "have", "he", "hence", "her", "here", "hereafter",
    "hereby", "herein", "hereupon", "hers", "herself", "him", "himself", "his", "how", "however",
    "hundred", "i", "ie", "if", "in", "inc", "indeed", "interest", "into", "is", "it", "its",
    "itself", "keep", "last", "latter", "latterly", "least", "less", "ltd", "made", "many", "may",
    "me", "meanwhile", "might", "mill", "mine", "more", "moreover", "most", "mostly", "move",
    "much", "must", "my", "myself", "name", "namely", "neither", "never", "nevertheless", "next",
    "nine", "no", "nobody", "none", "noone", "nor", "not", "nothing", "now", "nowhere", "of",
    "off", "often", "on", "once", "one", "only", "onto", "or", "other", "others", "otherwise",
    "our", "ours", "ourselves", "out", "over", "own", "part", "per", "perhaps", "please", "put",
    "rather", "re", "same", "see", "seem", "seemed", "seeming", "seems", "serious", "several",
    "she", "should", "show", "side", "since", "sincere", "six", "sixty", "so", "some", "somehow",
    "someone", "something", "sometime", "sometimes", "somewhere", "still", "such", "system",
    "take", "ten", "than", "that", "the", "their", "them", "themselves", "then", "thence",
    "there", "thereafter", "thereby", "therefore", "therein", "thereupon", "these", "they",
    "thick", "thin", "third", "this", "those", "though", "three", "through", "throughout", "thru",
    "thus", "to", "together", "too", "top", "toward", "towards", "twelve", "twenty", "two", "un",
    "under", "until", "up", "upon", "us", "very", "via", "was", "we", "well", "were", "what",
    "whatever", "when", "whence", "whenever", "where", "whereafter", "whereas", "whereby",
    "wherein", "whereupon", "wherever", "whether", "which", "while", "whither", "who", "whoever",
    "whole", "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you",
    "your", "yours", "yourself", "yourselves",
    )
)


_TOKEN = re.compile(r"[^\W\d_]+")
_ATTRIBUTION = re.compile(r"(writes|wrote|says|said)\s*:\s*$", re.IGNORECASE)


def strip_quoted(text: str) -> str:
    """Remove the quoted lines and attribution lines of an e-mail or Usenet reply.

    A line is dropped if its first non-blank character is ``>`` or ``|`` (quoted
    text: another poster's words) or if it ends in ``writes:``, ``wrote:``,
    ``says:`` or ``said:`` (any case, spaces allowed before the colon), the
    attribution line that introduces a quote. The one quote-stripper of textdp:
    the evaluation sets and the TopicDP corpora both use it.

    >>> strip_quoted("In article <1@x>, bob@y writes:\\n> old text\\n|> older\\nnew text")
    'new text'
    >>> strip_quoted("Alice said :\\n| quoted\\nmine")
    'mine'
    """
    if not isinstance(text, str):
        raise ParameterTypeError(f"text must be a str, got {type(text).__name__}")
    keep = [ln for ln in text.splitlines() if not ln.lstrip().startswith((">", "|")) and not _ATTRIBUTION.search(ln)]
    return "\n".join(keep)
# with punctuation: dotted abbreviations (u.s.), numbers (1,000 / 3.5), letter runs, single punctuation marks
_TOKEN_PUNCT = re.compile(r"(?:[^\W\d_]\.){2,}|\d+(?:[.,]\d+)*|[^\W\d_]+|[^\w\s]")


def tokenize(text: str, *, punctuation: bool = False) -> list[str]:
    """Lower-case ``text`` and split it into runs of letters.

    By default punctuation, digits and underscores separate tokens and are
    dropped. With ``punctuation=True`` (sentence rewriting), numbers, dotted
    abbreviations (``u.s.``) and every punctuation mark are kept as tokens of
    their own, as in GloVe's vocabulary; underscores still only separate tokens.

    >>> tokenize("The President greets the press in Chicago, 2019!")
    ['the', 'president', 'greets', 'the', 'press', 'in', 'chicago']
    >>> tokenize("It's 3.5% up in the U.S., isn't it?", punctuation=True)
    ['it', "'", 's', '3.5', '%', 'up', 'in', 'the', 'u.s.', ',', 'isn', "'", 't', 'it', '?']
    """
    if not isinstance(text, str):
        raise ParameterTypeError(f"text must be a str, got {type(text).__name__}")
    if punctuation:
        return [t for t in _TOKEN_PUNCT.findall(text.lower()) if t != "_"]
    return _TOKEN.findall(text.lower())


#: Abbreviations after which a full stop does not end a sentence (lower case, without the stop).
_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "inc", "corp", "co", "ltd", "plc", "bros", "vs", "etc", "e.g", "i.e", "u.s", "u.k", "u.n", "a.m", "p.m", "no", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen", "gov", "sen", "rep", "rev", "ft", "mt"]
)
_SENTENCE_END = re.compile(r"([.!?]+[\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (rule-based, for English prose).

    Blank lines end paragraphs; single line breaks inside a paragraph are
    spaces (hard-wrapped e-mail and Usenet text). Inside a paragraph a sentence
    ends at ``.``, ``!`` or ``?`` (plus closing quotes or brackets) followed by
    white space and an upper-case letter, a digit or an opening quote, unless
    the stop ends a known abbreviation (``Mr.``, ``U.S.``, ``Corp.``, ...) or a
    single letter (an initial). Empty sentences are dropped.

    >>> split_sentences("The U.S. Postal Service said so. Mr. Smith agreed!\\nIt rained.\\n\\nNew part")
    ['The U.S. Postal Service said so.', 'Mr. Smith agreed!', 'It rained.', 'New part']
    """
    if not isinstance(text, str):
        raise ParameterTypeError(f"text must be a str, got {type(text).__name__}")
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if not para:
            continue
        start = 0
        for m in _SENTENCE_END.finditer(para):
            end = m.end(1)
            words = para[start:m.start(1)].split()
            last = words[-1].lower() if words else ""
            if m.group(1).startswith(".") and (last.rstrip(".") in _ABBREVIATIONS or len(last.rstrip(".")) == 1):
                continue
            sentence = para[start:end].strip()
            if sentence:
                out.append(sentence)
            start = m.end()
        rest = para[start:].strip()
        if rest:
            out.append(rest)
    return out


def resolve_stop_words(stop_words: str | Iterable[str] | None) -> frozenset[str]:
    """Turn the ``stop_words`` parameter into a set.

    ``"english"`` gives :data:`ENGLISH_STOP_WORDS`, ``None`` keeps every word, an
    iterable is used as given (lower-cased).

    >>> len(resolve_stop_words("english")), len(resolve_stop_words(None))
    (318, 0)
    """
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        check_choice(stop_words, "stop-word list", ("english",))
        return ENGLISH_STOP_WORDS
    if isinstance(stop_words, (bytes, bytearray)) or not isinstance(stop_words, Iterable):
        raise ParameterTypeError(
            f"stop_words must be 'english', None or an iterable of str, got {type(stop_words).__name__}"
        )
    words = tuple(stop_words)
    if not all(isinstance(w, str) for w in words):
        raise ParameterTypeError("stop_words must hold only str")
    return frozenset(w.lower() for w in words)


def normalize(text: str, stop_words: str | Iterable[str] | None = "english") -> list[str]:
    """Tokenise ``text``, remove stop words and one-letter tokens (Appendix B).

    One-letter tokens are mostly debris of punctuation removal (``chicago's`` ->
    ``chicago``, ``s``) and carry no topic, so they are dropped too.

    >>> normalize("The President greets the press in Chicago's suburbs")
    ['president', 'greets', 'press', 'chicago', 'suburbs']
    """
    stops = resolve_stop_words(stop_words)
    return [t for t in tokenize(text) if len(t) > 1 and t not in stops]


@dataclass(frozen=True)
class Bag:
    """A fixed-size bag of vocabulary rows, ready for the mechanism.

    Attributes
    ----------
    ids : numpy.ndarray
        ``(N,)`` int64 rows of the embeddings vocabulary.
    n_tokens : int
        Tokens after normalisation (before the OOV filter).
    dropped_oov : int
        Out-of-vocabulary tokens removed (never released).
    n_in_vocabulary : int
        In-vocabulary tokens available to form the bag.
    """

    ids: np.ndarray
    n_tokens: int
    dropped_oov: int
    n_in_vocabulary: int


def make_bag(
    ids: np.ndarray,
    size: int,
    mode: str = "truncate",
    rng: np.random.Generator | None = None,
    *,
    doc_id: str = "document",
) -> np.ndarray:
    """Form a bag of exactly ``size`` rows from a document's in-vocabulary ``ids``.

    Parameters
    ----------
    ids : numpy.ndarray
        In-vocabulary rows of the document, in document order.
    size : int
        The bag size N (>= 1).
    mode : {"truncate", "sample"}
        ``truncate`` keeps the first N (error if fewer); ``sample`` draws N with
        replacement from the empirical word distribution (needs ``rng``).
    rng : numpy.random.Generator, optional
        Source of randomness for ``sample``.

    >>> make_bag(np.array([5, 6, 7]), 2).tolist()
    [5, 6]
    """
    size = check_size(size)
    check_choice(mode, "bag mode", BAG_MODES)
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ParameterTypeError(f"{doc_id}: ids must be a 1-D integer array, got {ids.dtype} of shape {ids.shape}")
    ids = ids.astype(np.int64, copy=False)
    if ids.size == 0:
        raise DocumentError(f"{doc_id}: no in-vocabulary word left after normalisation")
    if mode == "truncate":
        if ids.size < size:
            raise DocumentError(
                f"{doc_id}: only {ids.size} in-vocabulary words, fewer than the bag size N={size}; "
                "lower --size, or use --bag sample"
            )
        return ids[:size].copy()
    if not isinstance(rng, np.random.Generator):
        raise ParameterTypeError(f"bag mode 'sample' needs a numpy Generator (rng), got {type(rng).__name__}")
    return ids[rng.integers(0, ids.size, size=size)]
