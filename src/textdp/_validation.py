"""Parameter checks shared by every mechanism (diffprivlib style: say what is wrong)."""

from __future__ import annotations

import math
import numbers

from .errors import ParameterError, ParameterTypeError


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise if it is not a finite number > 0.

    >>> check_epsilon(2)
    2.0
    >>> check_epsilon(0)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: epsilon must be a finite number > 0, got 0
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterTypeError(f"{name} must be a real number, got {type(epsilon).__name__}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


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
