"""textdp: differential privacy for text.

The public names below are imported on first use (PEP 562), so that ``import textdp`` (and
with it ``textdp --version`` and the command line's errors) does not load numpy, scipy and
the embeddings until something needs them.

>>> import textdp
>>> textdp.EarthMoversPrivacy  # doctest: +ELLIPSIS
<class 'textdp.mechanisms.earth_movers.EarthMoversPrivacy'>
>>> from importlib.metadata import version
>>> textdp.__version__ == version("textdp")
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from .embeddings import Embeddings, load_embeddings
    from .errors import TextDPError
    from .guarantees import EarthMoversGuarantee
    from .mechanisms import EarthMoversPrivacy, PrivateDocument

    __version__: str


#: Each public name and the submodule that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "EarthMoversGuarantee": "guarantees",
    "EarthMoversPrivacy": "mechanisms",
    "Embeddings": "embeddings",
    "PrivateDocument": "mechanisms",
    "TextDPError": "errors",
    "load_embeddings": "embeddings",
}

__all__ = [
    "EarthMoversGuarantee",
    "EarthMoversPrivacy",
    "Embeddings",
    "PrivateDocument",
    "TextDPError",
    "__version__",
    "load_embeddings",
]


_lazy_getattr, __dir__ = lazy_attributes(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    """A public name on first use; ``__version__`` too, read from the installed metadata then (``import textdp``
    stays a few imports long: the ``textdp`` command installs its Ctrl+C handling right after it)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:  # the one place the version is written is pyproject.toml
            value = version("textdp")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
            value = "0+unknown"
        globals()["__version__"] = value
        return value
    return _lazy_getattr(name)
