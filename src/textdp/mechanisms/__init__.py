"""Privacy mechanisms: the one base class, one module per family, and the one registry.

* :mod:`textdp.mechanisms.base` - :class:`Mechanism` (the API every mechanism of every family
  follows: parameters, ``fit``, ``privatize_batch``, ``guarantee(context)``) and :class:`ReleaseContext`.
* :mod:`textdp.mechanisms.common` - the text families' shared steps (:class:`TextMechanism`,
  :class:`BagMechanism`, :class:`PrivateDocument`, :class:`DocumentDiagnostics`).
* :mod:`textdp.mechanisms.laplace` - the n-dimensional Laplace noise of Thm 4.1.
* :mod:`textdp.mechanisms.earth_movers` - Earth Mover's privacy for documents.
* :mod:`textdp.mechanisms.syntf` - SynTF synthetic term-frequency bags.
* :mod:`textdp.mechanisms.word_level` - the word family's base (:class:`WordLevelMechanism`, :class:`PrivateText`).
* :mod:`textdp.mechanisms.perturbation` - CMP, Mahalanobis, Vickrey (+ the MBR post-processing).
* :mod:`textdp.mechanisms.exponential` - TEM, SanText(+), CusText(+), random replacement.
* :mod:`textdp.mechanisms.registry` - ``get(name, **params)`` for every family, :func:`names`,
  :func:`entry`, ``MECHANISM_NAMES`` (the names ``textdp obfuscate`` takes).
"""

from __future__ import annotations

from .base import FAMILIES, Mechanism, ReleaseContext
from .common import BagMechanism, DocumentDiagnostics, PrivateDocument, TextMechanism
from .earth_movers import EarthMoversPrivacy, noisy_vectors, privatize_ids
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
from .registry import MECHANISM_NAMES, REGISTRY, Entry, entry, get, mechanism_class, names
from .syntf import SynTF
from .word_level import PrivateText, WordLevelGuarantee, WordLevelMechanism

__all__ = [
    "CMP",
    "FAMILIES",
    "MECHANISM_NAMES",
    "REGISTRY",
    "TEM",
    "BagMechanism",
    "CusText",
    "CusTextPlus",
    "DocumentDiagnostics",
    "EarthMoversPrivacy",
    "Entry",
    "MBRDecoder",
    "Mahalanobis",
    "Mechanism",
    "PrivateDocument",
    "PrivateText",
    "RandomReplacement",
    "ReleaseContext",
    "SanText",
    "SanTextPlus",
    "SynTF",
    "TextMechanism",
    "Vickrey",
    "WordLevelGuarantee",
    "WordLevelMechanism",
    "entry",
    "get",
    "laplace_noise",
    "mechanism_class",
    "names",
    "noisy_vectors",
    "privatize_ids",
    "sample_direction",
    "sample_radius",
]
