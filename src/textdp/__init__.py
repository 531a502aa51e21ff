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

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from .embeddings import Embeddings, load_embeddings
    from .errors import TextDPError
    from .guarantees import EarthMoversGuarantee
    from .mechanisms import EarthMoversPrivacy, PrivateDocument

try:  # the one place the version is written is pyproject.toml
    __version__ = version("textdp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"

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


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
