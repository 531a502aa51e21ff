"""The page's request values, checked: each returns the value the computation uses or raises a one-line
:class:`~textdp.errors.TextDPError` that says what to type instead (the page shows it as it is)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from .._validation import EPSILON_MAX, EPSILON_MIN, check_epsilon
from ..errors import DocumentError, ParameterError, ParameterTypeError
from ..mechanisms import MECHANISM_NAMES, entry, names

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .lm import LMSettings

__all__ = ["BAG_MECHANISMS", "MAX_SIZE", "MAX_TEXT_CHARS", "check_clip", "check_delta", "check_epsilon_value",
           "check_mechanism", "check_prior", "check_size", "check_text", "shown"]

#: Longest text the page accepts (characters); the HTTP layer also caps the request body.
MAX_TEXT_CHARS = 20_000
#: Largest bag size N the page accepts for a bag mechanism.
MAX_SIZE = 500
#: Mechanisms whose release is a bag of N words (the others replace each protected word in place).
BAG_MECHANISMS = tuple(n for n in MECHANISM_NAMES if entry(n).releases == "bag")


def check_text(text: object) -> str:
    if not isinstance(text, str):
        raise ParameterTypeError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise DocumentError("the text is empty: paste or drop a text first")
    if len(text) > MAX_TEXT_CHARS:
        raise DocumentError(f"the text has {len(text):,} characters; this page takes at most {MAX_TEXT_CHARS:,}: "
                            "paste a shorter part (the command textdp obfuscate takes whole documents)")
    return text


def check_mechanism(name: object, sentence: Sequence[str] = ()) -> str:
    if isinstance(name, str) and name in names("sentence") and name not in sentence:
        raise ParameterError(f"{name} rewrites sentences with a trained model, and this server has none that fits "
                             f"it; choose a word or document mechanism (or start textdp serve --model DIR with one)")
    if not isinstance(name, str) or name not in (*MECHANISM_NAMES, *sentence):
        raise ParameterError(f"unknown mechanism {name!r}; choose one of: {', '.join((*MECHANISM_NAMES, *sentence))}")
    return name


def shown(value: object) -> str:
    """A request value as the person typed it (JSON spelling: ``null``, ``"abc"``, ``2.5``)."""
    try:
        return json.dumps(value, ensure_ascii=False)[:40]
    except (TypeError, ValueError):
        return type(value).__name__


def check_epsilon_value(value: object) -> float:
    """ε of a request: a JSON number in ``[EPSILON_MIN, EPSILON_MAX]`` (``1e-5`` and ``1e-7`` spellings included).

    >>> check_epsilon_value(1e-5)
    1e-05
    >>> check_epsilon_value("abc")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterTypeError: epsilon must be a number such as 0.5, 10 or 1e-3 (in [1e-06, 1e+06]), got "abc"
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterTypeError(f"epsilon must be a number such as 0.5, 10 or 1e-3 (in [{EPSILON_MIN:g}, "
                                 f"{EPSILON_MAX:g}]), got {shown(value)}")
    try:
        return check_epsilon(float(value))
    except OverflowError:
        raise ParameterError(f"epsilon must be a number in [{EPSILON_MIN:g}, {EPSILON_MAX:g}], got a number too "
                             "large to represent") from None


def check_size(name: str, size: object) -> int | None:
    """The bag size N of a bag mechanism: a whole number in ``[1, MAX_SIZE]`` (``2.5`` is refused, not cut to 2).

    >>> check_size("cmp", 2.5) is None, check_size("earth-movers", 7)
    (True, 7)
    >>> check_size("earth-movers", 2.5)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the bag size N must be a whole number of words from 1 to 500, got 2.5
    """
    if name not in BAG_MECHANISMS:
        return None
    if isinstance(size, float) and size.is_integer() and 1 <= size <= MAX_SIZE:
        return int(size)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
        raise ParameterError(f"the bag size N must be a whole number of words from 1 to {MAX_SIZE}, got {shown(size)}")
    return int(size)


def check_prior(name: str, prior: object, public_top_k: object, settings: LMSettings) -> int | bool | None:
    """dp-prompt's prior of a request: False (off), None (on, whole vocabulary) or the top-k+ size (on); None for
    a rewriter without a prior (``settings.prior`` false), which refuses both values.

    >>> from textdp.serve.lm import LMSettings
    >>> d = LMSettings(clip=(-8.0, 8.0), delta=None, prior=True, public_top_k=20)
    >>> check_prior("dp-prompt", None, None, d), check_prior("dp-prompt", False, None, d)
    (20, False)
    >>> check_prior("dp-prompt", True, 5, d), check_prior("dp-prompt", True, 0, d)
    (5, None)
    """
    if not settings.prior:
        if prior is not None or public_top_k is not None:
            raise ParameterError(f"prior and public_top_k are dp-prompt's public parameters, not {name}'s")
        return None
    if prior is None and public_top_k is None:
        return settings.public_top_k
    if prior is not None and not isinstance(prior, bool):
        raise ParameterError(f"prior must be true or false, got {shown(prior)}")
    if prior is False:
        return False
    if public_top_k is None or public_top_k == 0:
        return None
    if isinstance(public_top_k, bool) or not isinstance(public_top_k, int) or not 0 < public_top_k <= 100_000:
        raise ParameterError(f"public_top_k must be a whole number from 1 to 100000 (0 or null: the whole "
                             f"vocabulary), got {shown(public_top_k)}")
    return public_top_k


def check_clip(value: object, default: tuple[float, float]) -> tuple[float, float]:
    """Public clipping bounds of a request: ``[low, high]``, two finite JSON numbers with ``low < high``
    (``None``: ``default``).

    >>> check_clip([-3, 1.5], (-2.0, 2.0)), check_clip(None, (-2.0, 2.0))
    ((-3.0, 1.5), (-2.0, 2.0))
    >>> check_clip([2, -2], (-2.0, 2.0))
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the clipping bounds must be two numbers low < high such as [-2, 2], got [2, -2]
    """
    if value is None:
        return default
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            and value[0] < value[1]):
        return float(value[0]), float(value[1])
    raise ParameterError(f"the clipping bounds must be two numbers low < high such as [-2, 2], got {shown(value)}")


def check_delta(name: str, value: object, default: float | None) -> float | None:
    """δ of a request for a rewriter that takes one (``default`` not None): a number in (0, 1); refused otherwise.

    >>> check_delta("dp-bart", None, 1e-5), check_delta("dp-bart", 1e-6, 1e-5), check_delta("dp-mlm", None, None)
    (1e-05, 1e-06, None)
    >>> check_delta("dp-mlm", 1e-5, None)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: dp-mlm is pure epsilon-DP: it takes no delta, got 1e-05
    """
    if default is None:
        if value is None:
            return None
        raise ParameterError(f"{name} is pure epsilon-DP: it takes no delta, got {shown(value)}")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) < 1.0:
        raise ParameterError(f"delta must be a number between 0 and 1 such as 1e-5, got {shown(value)}")
    return float(value)
