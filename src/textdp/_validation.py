"""Parameter checks shared by every mechanism (diffprivlib style: say what is wrong)."""

from __future__ import annotations

import math
import numbers

from .errors import ParameterError, ParameterTypeError

#: The supported range of epsilon, for every mechanism (see ``check_epsilon``).
EPSILON_MIN = 1e-6
EPSILON_MAX = 1e6

#: The largest bag size N (words per released document).
MAX_SIZE = 1_000_000


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise if it is not a number in ``[EPSILON_MIN, EPSILON_MAX]``.

    The range ``[1e-6, 1e6]`` is where epsilon still means something and every
    computation stays finite, with wide margins. Measured on GloVe 6B 50d with the
    same noise draws at every epsilon (``benchmarks/epsilon_range.py``): below
    epsilon = 1e-3 the decoded words are those of the epsilon -> 0 limit (the
    noise direction alone decides them; 99.5% at 1e-2), and above 1e2 every word
    is returned unchanged, so epsilon matters over about [1e-2, 1e2]. The limits
    add three decades on each side (embeddings on another scale, other
    mechanisms). Outside, arithmetic breaks: near 1e-37 the noise length
    ``dim/epsilon`` overflows the decoders' float32 (every word decodes to row 0),
    below 1e-306 the noise scale ``1/epsilon`` overflows float64, and a privacy
    loss ``epsilon*N*d`` with epsilon near 1e300 overflows float64.

    >>> check_epsilon(2)
    2.0
    >>> check_epsilon(0)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: epsilon must be a finite number > 0, got 0
    >>> check_epsilon(1e-300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: epsilon=1e-300 is outside the supported range [1e-06, 1e+06]: ...
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterTypeError(f"{name} must be a real number, got {type(epsilon).__name__}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {epsilon!r}")
    if not EPSILON_MIN <= value <= EPSILON_MAX:
        raise ParameterError(
            f"{name}={value:g} is outside the supported range [{EPSILON_MIN:g}, {EPSILON_MAX:g}]: below it the "
            "noise swamps every word (the output no longer depends on epsilon), above it no word changes "
            "and the arithmetic overflows; choose a value inside"
        )
    return value


def check_size(value: object, name: str = "size") -> int:
    """Return the bag size N as an int in ``[1, MAX_SIZE]`` or raise.

    ``MAX_SIZE`` (10^6 words per document) bounds what one record costs: each
    word is noised, decoded (exact decoding over GloVe's 400,000 words runs at
    ~2,500 words/s on 2 cores: 10^6 words take ~7 minutes) and written (a record
    of 10^6 words is ~10 MB of JSON). No document is that long after stop-word
    removal (a 1,000-page novel has ~2x10^5 words left), and with
    ``bag="sample"`` the guarantee ``exp(epsilon*N*W_inf)`` weakens linearly in N.

    >>> check_size(30)
    30
    >>> check_size(10**8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: size must be at most 1000000 (words per document), got 100000000: ...
    """
    n = check_positive_int(value, name)
    if n > MAX_SIZE:
        raise ParameterError(
            f"{name} must be at most {MAX_SIZE} (words per document), got {n}: a bag costs time and memory "
            "for every word and the guarantee weakens with N; use a smaller N"
        )
    return n


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise.

    >>> check_positive_int(3, "size")
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_probability(value: object, name: str, *, open_low: bool = True, open_high: bool = True) -> float:
    """Return ``value`` as a float in (0, 1) (ends per flags) or raise.

    >>> check_probability(0.5, "delta")
    0.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    low_ok = v > 0 if open_low else v >= 0
    high_ok = v < 1 if open_high else v <= 1
    if not (math.isfinite(v) and low_ok and high_ok):
        lo = "(" if open_low else "["
        hi = ")" if open_high else "]"
        raise ParameterError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return v


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices`` or raise naming them.

    >>> check_choice("sample", "bag", ("truncate", "sample"))
    'sample'
    """
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")
    return value


def check_texts(texts: object) -> list[str] | None:
    """``None`` when ``texts`` is one ``str``, else the list of its texts; a clear error for anything else.

    ``bytes`` are refused by name (iterating them would give integers), and so are ``None``
    and objects that are not iterable; the type of each text is checked by the mechanism.

    >>> check_texts("one text") is None, check_texts(("a", "b"))
    (True, ['a', 'b'])
    >>> check_texts(b"raw")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterTypeError: texts must be a str or an iterable of str, got bytes; decode them first (e.g. data.decode("utf-8"))
    """
    if isinstance(texts, str):
        return None
    if isinstance(texts, (bytes, bytearray, memoryview)):
        raise ParameterTypeError(f"texts must be a str or an iterable of str, got {type(texts).__name__}; decode "
                                 'them first (e.g. data.decode("utf-8"))')
    if texts is None or not hasattr(texts, "__iter__"):
        raise ParameterTypeError(f"texts must be a str or an iterable of str, got {type(texts).__name__}")
    return list(texts)


#: the δ one document may spend in total when a budget caps ε only (``--budget`` without ``--delta-budget``):
#: 100 releases at the usual δ = 1e-5 per unit; past it a ledger refuses as it does past the ε budget
DEFAULT_DELTA_BUDGET = 1e-3

#: a privacy budget per document: ε (δ then capped at :data:`DEFAULT_DELTA_BUDGET`) or ``(ε, δ)``
BudgetLike = float | tuple[float, float]


def check_budget(budget: object, delta_budget: object = None) -> tuple[float, float] | None:
    """A budget as ``(ε, δ)``: ``budget`` is ε or a pair; ``delta_budget`` (``--delta-budget``) overrides δ.

    ``None`` (no budget) stays ``None``; a δ budget without an ε budget is refused.

    >>> check_budget(3.0), check_budget(3.0, 1e-5), check_budget((2, 0)), check_budget(None)
    ((3.0, 0.001), (3.0, 1e-05), (2.0, 0.0), None)
    >>> check_budget(None, 1e-5)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --delta-budget caps a budget: give --budget EPSILON too
    """
    if budget is None:
        if delta_budget is not None:
            raise ParameterError("--delta-budget caps a budget: give --budget EPSILON too")
        return None
    eps, delta = budget if isinstance(budget, tuple) else (budget, DEFAULT_DELTA_BUDGET)
    if delta_budget is not None:
        delta = delta_budget
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"--budget must be a finite number > 0, got {eps!r}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        raise ParameterError(f"--delta-budget must be a number in [0, 1), got {delta!r}")
    return float(eps), float(delta)
