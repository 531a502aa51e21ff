"""Old names that keep working for one release, with a :class:`DeprecationWarning`.

A leaf module: the one way textdp renames a keyword argument or a function
(``docs/glossary.md`` lists the names; ``rng=`` became ``seed=``, ``normalise``
became ``normalize``, ``randomise`` became ``randomize``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ParameterTypeError

__all__ = ["REMOVAL", "deprecated_alias", "renamed_parameter"]

#: The release in which the deprecated names go.
REMOVAL = "0.3"

F = TypeVar("F", bound=Callable[..., Any])


def renamed_parameter(old: str, new: str) -> Callable[[F], F]:
    """Accept ``old=`` as a deprecated spelling of keyword argument ``new=``.

    >>> @renamed_parameter("rng", "seed")
    ... def draw(n, seed=None):
    ...     return n, seed
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     draw(2, rng=7), w[0].category.__name__
    ((2, 7), 'DeprecationWarning')
    >>> draw(2, rng=1, seed=1)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterTypeError: draw() got both seed= and its deprecated name rng=; give seed= only
    """

    def decorate(fn: F) -> F:
        name = fn.__qualname__.replace(".__init__", "")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise ParameterTypeError(f"{name}() got both {new}= and its deprecated name {old}=; give {new}= only")
                warnings.warn(f"{name}({old}=...) is deprecated and will be removed in textdp {REMOVAL}; use {new}=...",
                              DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def deprecated_alias(fn: F, old_name: str) -> F:
    """``fn`` under its old name ``old_name``, warning on every call.

    >>> def normalize(x):
    ...     return x.lower()
    >>> normalise = deprecated_alias(normalize, "normalise")
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     normalise("A"), str(w[0].message)
    ('a', 'normalise() is deprecated and will be removed in textdp 0.3; use normalize()')
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{old_name}() is deprecated and will be removed in textdp {REMOVAL}; use {fn.__name__}()",
                      DeprecationWarning, stacklevel=2)
        return fn(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = old_name
    wrapper.__doc__ = f"Deprecated alias of :func:`{fn.__name__}` (removed in textdp {REMOVAL})."
    return wrapper  # type: ignore[return-value]
