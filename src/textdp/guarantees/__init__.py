"""Guarantees: one frozen type for what every release of every family spent (a leaf package).

* :mod:`textdp.guarantees.base` - :class:`Guarantee` (mechanism, epsilon, delta, unit, reference,
  parameters, not_covered, composition, statement, seeded, empty; ``to_dict(compact=)``), the
  base of every family's guarantee.
* :mod:`textdp.guarantees.earth_movers` - :class:`EarthMoversGuarantee` (Theorem 5.1 and the
  sample-bag coupling bound).
* :mod:`textdp.guarantees.records` - the one release-record layout (:class:`ReleaseRecord`) and
  the JSON Schema shipped with the package (``textdp/schemas/record.schema.json``).

The other families' guarantees live beside their maths and derive from :class:`Guarantee`:
:class:`textdp.mechanisms.word_level.WordLevelGuarantee`, :class:`textdp.mechanisms.syntf.SynTFGuarantee`,
:class:`textdp.generation.bounds.RewriteGuarantee`, :class:`textdp.topics.release.TopicGuarantee`.
This package imports nothing from the rest of textdp but the leaf modules.
"""

from __future__ import annotations

from .base import COMPACT_KEYS, EMPTY_POLICIES, GUARANTEE_KEYS, SEEDED_NOTE, Guarantee, as_parameters, empty_note
from .earth_movers import EARTH_MOVERS_REFERENCE, EarthMoversGuarantee
from .records import RECORD_SCHEMA_PATH, RELEASE_FORMS, ReleaseRecord, load_record_schema

__all__ = [
    "COMPACT_KEYS",
    "EARTH_MOVERS_REFERENCE",
    "EMPTY_POLICIES",
    "GUARANTEE_KEYS",
    "RECORD_SCHEMA_PATH",
    "RELEASE_FORMS",
    "SEEDED_NOTE",
    "EarthMoversGuarantee",
    "Guarantee",
    "ReleaseRecord",
    "as_parameters",
    "empty_note",
    "load_record_schema",
]
