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
  :func:`entry`, ``MECHANISM_NAMES`` (the names ``textdp obfuscate`` takes), read from the generated
  index :mod:`textdp.mechanisms._index`.

The public names are imported on first use (PEP 562), so that listing the registered names
(``from textdp.mechanisms import MECHANISM_NAMES``: the CLI's choices) loads neither numpy nor torch.

>>> import textdp.mechanisms as m
>>> m.MECHANISM_NAMES[:2], m.CMP.family
(('earth-movers', 'cmp'), 'word')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
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

#: Each public name and the submodule that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "FAMILIES": "base", "Mechanism": "base", "ReleaseContext": "base",
    "BagMechanism": "common", "DocumentDiagnostics": "common", "PrivateDocument": "common", "TextMechanism": "common",
    "EarthMoversPrivacy": "earth_movers", "noisy_vectors": "earth_movers", "privatize_ids": "earth_movers",
    "TEM": "exponential", "CusText": "exponential", "CusTextPlus": "exponential",
    "RandomReplacement": "exponential", "SanText": "exponential", "SanTextPlus": "exponential",
    "laplace_noise": "laplace", "sample_direction": "laplace", "sample_radius": "laplace",
    "CMP": "perturbation", "Mahalanobis": "perturbation", "MBRDecoder": "perturbation", "Vickrey": "perturbation",
    "MECHANISM_NAMES": "registry", "REGISTRY": "registry", "Entry": "registry", "entry": "registry", "get": "registry",
    "mechanism_class": "registry", "names": "registry",
    "SynTF": "syntf",
    "PrivateText": "word_level", "WordLevelGuarantee": "word_level", "WordLevelMechanism": "word_level",
}

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


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
