"""Privacy mechanisms, one module per family, and the one registry.

* :mod:`textdp.mechanisms.laplace` - the n-dimensional Laplace noise of Thm 4.1.
* :mod:`textdp.mechanisms.earth_movers` - Earth Mover's privacy for documents.
* :mod:`textdp.mechanisms.perturbation` - CMP, Mahalanobis, Vickrey (+ the MBR post-processing).
* :mod:`textdp.mechanisms.exponential` - TEM, SanText(+), CusText(+), random replacement.
* :mod:`textdp.mechanisms.syntf` - SynTF synthetic term-frequency bags (``SynTFPrivacy`` for
  documents; ``SynTF`` over token lists, used by the sentence rewriter).
* :mod:`textdp.mechanisms.registry` - ``get(name, epsilon=..., embeddings=..., **params)`` and
  ``MECHANISM_NAMES``.
"""

from __future__ import annotations

from .earth_movers import (
    DocumentDiagnostics,
    EarthMoversPrivacy,
    PrivateDocument,
    noisy_vectors,
    privatize_ids,
)
from .exponential import (
    TEM,
    CusText,
    CusTextPlus,
    RandomReplacement,
    SanText,
    SanTextPlus,
)
from .laplace import laplace_noise, sample_direction, sample_radius
from .perturbation import CMP, Mahalanobis, MBRDecoder, Vickrey
from .registry import MECHANISM_CLASSES, MECHANISM_NAMES, get, mechanism_class
from .syntf import SynTFPrivacy
from .word_level import PrivateText, WordLevelGuarantee, WordLevelMechanism

MECHANISMS = MECHANISM_CLASSES

__all__ = [
    "CMP",
    "MECHANISMS",
    "MECHANISM_CLASSES",
    "MECHANISM_NAMES",
    "TEM",
    "CusText",
    "CusTextPlus",
    "DocumentDiagnostics",
    "EarthMoversPrivacy",
    "MBRDecoder",
    "Mahalanobis",
    "PrivateDocument",
    "PrivateText",
    "RandomReplacement",
    "SanText",
    "SanTextPlus",
    "SynTFPrivacy",
    "Vickrey",
    "WordLevelGuarantee",
    "WordLevelMechanism",
    "get",
    "laplace_noise",
    "mechanism_class",
    "noisy_vectors",
    "privatize_ids",
    "sample_direction",
    "sample_radius",
]
