"""textdp: differential privacy for text.

>>> import textdp
>>> textdp.EarthMoversPrivacy  # doctest: +ELLIPSIS
<class 'textdp.mechanisms.earth_movers.EarthMoversPrivacy'>
"""

from __future__ import annotations

from .guarantees import EarthMoversGuarantee
from .embeddings import Embeddings, load_embeddings
from .errors import TextDPError
from .mechanisms import EarthMoversPrivacy, PrivateDocument

__version__ = "0.1.0"

__all__ = [
    "EarthMoversGuarantee",
    "EarthMoversPrivacy",
    "Embeddings",
    "PrivateDocument",
    "TextDPError",
    "__version__",
    "load_embeddings",
]
