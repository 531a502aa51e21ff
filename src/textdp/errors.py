"""Exceptions raised by textdp.

Every error that a user can cause (bad parameter, bad file, bad document) is a
:class:`TextDPError` subclass with a one-line message that says what is wrong and
how to fix it. The CLI prints that message and exits non-zero, never a traceback.
"""

from __future__ import annotations

import types


class TextDPError(Exception):
    """Base class of all errors textdp raises on purpose."""


class ParameterError(TextDPError, ValueError):
    """A parameter has a value outside its domain (for example ``epsilon <= 0``)."""


class ParameterTypeError(TextDPError, TypeError):
    """A parameter has the wrong type."""


class DocumentError(TextDPError, ValueError):
    """A document cannot be processed (empty, not UTF-8, no in-vocabulary word, too short)."""


class EmbeddingsError(TextDPError, ValueError):
    """An embeddings file is missing, unreadable or inconsistent."""


class OutputExistsError(TextDPError, FileExistsError):
    """An output would replace an existing file (or an input) and ``--force`` / ``overwrite`` was not given."""


class MissingDependencyError(TextDPError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class PrivacyWarning(UserWarning):
    """A choice the user made weakens what a release hides (e.g. a bag size taken from the data)."""


def require(module: str, extra: str) -> types.ModuleType:
    """Import an optional dependency or raise a :class:`MissingDependencyError`.

    >>> require("json", "none").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            f"this feature needs the optional dependency {module!r}; "
            f"install it with: pip install 'textdp[{extra}]'"
        ) from exc
