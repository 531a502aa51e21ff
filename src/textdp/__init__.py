"""textdp: differential privacy for text.

>>> import textdp
>>> textdp.EarthMoversPrivacy  # doctest: +ELLIPSIS
<class 'textdp.mechanisms.earth_movers.EarthMoversPrivacy'>
>>> from importlib.metadata import version
>>> textdp.__version__ == version("textdp")
True
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .embeddings import Embeddings, load_embeddings
from .errors import TextDPError
from .guarantees import EarthMoversGuarantee
from .mechanisms import EarthMoversPrivacy, PrivateDocument

try:  # the one place the version is written is pyproject.toml
    __version__ = version("textdp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "EarthMoversGuarantee",
    "EarthMoversPrivacy",
    "Embeddings",
    "PrivateDocument",
    "TextDPError",
    "__version__",
    "load_embeddings",
]
