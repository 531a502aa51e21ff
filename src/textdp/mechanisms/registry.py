"""The one registry of textdp's mechanisms, every family: name -> class, family, release form, audit case.

``get(name, **params)`` returns a configured (unfitted) :class:`~textdp.mechanisms.base.Mechanism`
for every registered name: the document family (``earth-movers``, ``syntf``), the word family
(``cmp`` ... ``random``), the sentence family (``er-ae``, ``ae-dp``, ``syntf-sentence``,
``random-sentence``: the rewriters, ``[generation]`` extra) and the topics family (``topicdp``,
``topicdp-thesis``, ``topicdp-laplace``, ``mvg``, ``mvg-directional``). Each name is spelt once
across families. :func:`names` lists a family's names (the CLI's choices), :func:`entry` gives
a name's :class:`Entry` (family, release form, audit case) without importing the class.

The sentence and topics classes live in :mod:`textdp.generation` and :mod:`textdp.topics`,
which import this package; their entries name their module and are imported on first use
(:meth:`Entry.load`), so listing names never imports torch and no import cycle arises.

>>> "cmp" in MECHANISM_NAMES and "earth-movers" in MECHANISM_NAMES
True
>>> entry("topicdp-laplace").family, entry("er-ae").releases, entry("cmp").audit
('topics', 'sentence', 'cmp')
>>> get("nope", epsilon=1.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
textdp.errors.ParameterError: unknown mechanism 'nope'; choose one of: earth-movers, cmp, ...
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import ParameterError
from .base import FAMILIES, Mechanism
from .earth_movers import EarthMoversPrivacy
from .exponential import TEM, CusText, CusTextPlus, RandomReplacement, SanText, SanTextPlus
from .perturbation import CMP, Mahalanobis, Vickrey
from .syntf import SynTF

__all__ = ["MECHANISM_NAMES", "REGISTRY", "Entry", "entry", "get", "mechanism_class", "names"]


@dataclass(frozen=True)
class Entry:
    """One registered mechanism.

    Attributes
    ----------
    name : str
        The registered name (one spelling across families).
    family : str
        ``document``, ``word``, ``sentence`` or ``topics``.
    releases : str
        ``bag``, ``text``, ``sentence`` or ``matrix``.
    audit : str or None
        The audit case (``textdp audit NAME``) that checks this mechanism's claim.
    location : type or str
        The class, or ``"module:Class"`` for the families imported on first use.
    """

    name: str
    family: str
    releases: str
    audit: str | None
    location: type[Mechanism] | str

    def load(self) -> type[Mechanism]:
        """The class (imports its module the first time for the sentence and topics families)."""
        if not isinstance(self.location, str):
            return self.location
        module, _, cls = self.location.partition(":")
        loaded: type[Mechanism] = getattr(importlib.import_module(module), cls)
        return loaded


_GEN = "textdp.generation.rewriter"
_TOP = "textdp.topics.family"
_ENTRIES = (
    Entry("earth-movers", "document", "bag", "earth-movers", EarthMoversPrivacy),
    Entry("cmp", "word", "text", "cmp", CMP),
    Entry("mahalanobis", "word", "text", "mahalanobis", Mahalanobis),
    Entry("vickrey", "word", "text", "vickrey", Vickrey),
    Entry("tem", "word", "text", "tem", TEM),
    Entry("santext", "word", "text", "santext", SanText),
    Entry("santext+", "word", "text", "santext+", SanTextPlus),
    Entry("custext", "word", "text", "custext", CusText),
    Entry("custext+", "word", "text", "custext+", CusTextPlus),
    Entry("syntf", "document", "bag", "syntf", SynTF),
    Entry("random", "word", "text", "random", RandomReplacement),
    Entry("er-ae", "sentence", "sentence", "er-ae", f"{_GEN}:ERAE"),
    Entry("ae-dp", "sentence", "sentence", None, f"{_GEN}:AEDP"),
    Entry("syntf-sentence", "sentence", "sentence", "syntf", f"{_GEN}:SynTFSentence"),
    Entry("random-sentence", "sentence", "sentence", "random", f"{_GEN}:RandomSentence"),
    Entry("topicdp", "topics", "matrix", "topicdp", f"{_TOP}:TopicDP"),
    Entry("topicdp-thesis", "topics", "matrix", "topicdp-thesis", f"{_TOP}:TopicDPThesis"),
    Entry("topicdp-laplace", "topics", "matrix", "laplace", f"{_TOP}:TopicDPLaplace"),
    Entry("mvg", "topics", "matrix", "mvg", f"{_TOP}:MVG"),
    Entry("mvg-directional", "topics", "matrix", "mvg-directional", f"{_TOP}:MVGDirectional"),
)

#: every registered name -> its :class:`Entry`
REGISTRY: Mapping[str, Entry] = MappingProxyType({e.name: e for e in _ENTRIES})


def names(*families: str) -> tuple[str, ...]:
    """The registered names of ``families`` (all families when none is given), in registry order.

    >>> names("sentence")
    ('er-ae', 'ae-dp', 'syntf-sentence', 'random-sentence')
    """
    for f in families:
        if f not in FAMILIES:
            raise ParameterError(f"unknown mechanism family {f!r}; choose one of: {', '.join(FAMILIES)}")
    return tuple(e.name for e in _ENTRIES if not families or e.family in families)


#: the names ``textdp obfuscate`` takes: the document and word families
MECHANISM_NAMES: tuple[str, ...] = names("document", "word")


def entry(name: str) -> Entry:
    """The :class:`Entry` of ``name`` (one-line :class:`ParameterError` listing the names otherwise)."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of: {', '.join(names())}")
    return REGISTRY[name]


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name``."""
    return entry(name).load()


def get(name: str, **params: object) -> Mechanism:
    """A configured (unfitted) mechanism by registered name, any family.

    ``params`` are the class's constructor parameters (``epsilon``, ``embeddings``, ``seed``,
    ``size``, ``t``, ``model``, ``delta``, ...); an unknown one is a one-line error listing them.

    Examples
    --------
    >>> get("tem", epsilon=2.0, beta=0.01).beta
    0.01
    >>> get("cmp", epsilon=1.0, lambd=2)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: mechanism 'cmp' has no parameter 'lambd'; its parameters: epsilon, embeddings, vocab_size, stop_words, seed, decoder, postprocess, candidates
    """
    e = entry(name)
    cls = e.load()
    valid = cls.param_names()
    unknown = [k for k in params if k not in valid]
    if unknown:
        raise ParameterError(f"mechanism {name!r} has no parameter {unknown[0]!r}; its parameters: "
                             f"{', '.join(valid)}")
    try:
        return cls(**params)
    except TypeError as exc:  # a required parameter is missing
        raise ParameterError(f"mechanism {name!r}: {exc}".replace("__init__() ", "")) from None
