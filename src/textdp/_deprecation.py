"""The one way textdp will rename a keyword argument, once a version has been released.

A leaf module. Nothing has been released yet, so no old name is kept anywhere;
when a released name changes, decorate the function with
:func:`renamed_parameter` for one release and list the pair in
``docs/glossary.md``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .errors import ParameterTypeError

__all__ = ["renamed_parameter"]

P = ParamSpec("P")
R = TypeVar("R")


def renamed_parameter(old: str, new: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept ``old=`` as a deprecated spelling of keyword argument ``new=``, with a :class:`DeprecationWarning`.

    >>> @renamed_parameter("size_n", "size")
    ... def draw(n, size=None):
    ...     return n, size
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     draw(2, size_n=7), str(w[0].message)
    ((2, 7), 'draw(size_n=...) is deprecated; use size=...')
    >>> draw(2, size_n=1, size=1)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterTypeError: draw() got both size= and its deprecated name size_n=; give size= only
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        name = fn.__qualname__.replace(".__init__", "")

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if old in kwargs:
                if new in kwargs:
                    raise ParameterTypeError(f"{name}() got both {new}= and its deprecated name {old}=; give {new}= only")
                warnings.warn(f"{name}({old}=...) is deprecated; use {new}=...", DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate
