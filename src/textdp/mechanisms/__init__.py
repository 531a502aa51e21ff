"""Privacy mechanisms, one module per family.

* :mod:`textdp.mechanisms.laplace` - the n-dimensional Laplace noise of Thm 4.1.
* :mod:`textdp.mechanisms.earth_movers` - Earth Mover's privacy for documents.
"""

from __future__ import annotations

from .earth_movers import DocumentDiagnostics, EarthMoversPrivacy, PrivateDocument, noisy_vectors, privatize_ids
from .laplace import laplace_noise, sample_direction, sample_radius

MECHANISMS = {"earth-movers": EarthMoversPrivacy}

__all__ = [
    "MECHANISMS",
    "DocumentDiagnostics",
    "EarthMoversPrivacy",
    "PrivateDocument",
    "laplace_noise",
    "noisy_vectors",
    "privatize_ids",
    "sample_direction",
    "sample_radius",
]
