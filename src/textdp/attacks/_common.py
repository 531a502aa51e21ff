"""Helpers shared by the attackers: text coercion and label bookkeeping."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import DocumentError, ParameterError, ParameterTypeError


def as_tokens(text: object, where: str = "text") -> list[str]:
    """Return ``text`` as a list of whitespace tokens.

    A ``str`` is split on whitespace; a sequence of strings (a normalised word
    list, or :attr:`PrivateDocument.words`) is used as given; an object with a
    ``words`` attribute (a private document) gives its words.

    >>> as_tokens("a  b\\nc")
    ['a', 'b', 'c']
    >>> as_tokens(("x", "y"))
    ['x', 'y']
    """
    words = getattr(text, "words", None)
    if words is not None and not isinstance(text, str):
        text = words
    if isinstance(text, str):
        return text.split()
    if isinstance(text, Sequence | np.ndarray):
        out = [str(t) for t in text]
        return out
    raise ParameterTypeError(f"{where} must be a str or a sequence of str, got {type(text).__name__}")


def as_token_lists(texts: object, where: str = "texts") -> list[list[str]]:
    """Coerce a collection of texts with :func:`as_tokens`; refuse a bare string.

    >>> as_token_lists(["a b", ["c"]])
    [['a', 'b'], ['c']]
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence | np.ndarray):
        raise ParameterTypeError(f"{where} must be a sequence of texts, got {type(texts).__name__}")
    out = [as_tokens(t, where) for t in texts]
    if not out:
        raise ParameterError(f"{where} is empty")
    return out


def check_labels(labels: object, n: int, where: str = "labels") -> np.ndarray:
    """Return ``labels`` as an object array of length ``n``.

    >>> check_labels(["a", "b"], 2).tolist()
    ['a', 'b']
    """
    if isinstance(labels, str) or not isinstance(labels, Sequence | np.ndarray):
        raise ParameterTypeError(f"{where} must be a sequence, got {type(labels).__name__}")
    arr = np.empty(len(labels), dtype=object)
    arr[:] = list(labels)
    if arr.size != n:
        raise ParameterError(f"{where} has {arr.size} entries for {n} texts")
    return arr


def check_nonempty(tokens: list[list[str]], where: str) -> None:
    """Raise :class:`DocumentError` if any token list is empty."""
    for i, t in enumerate(tokens):
        if not t:
            raise DocumentError(f"{where}[{i}] has no tokens")
