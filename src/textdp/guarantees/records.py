"""The one release record: what every command writes per released unit, in one layout.

``obfuscate`` (every document and word mechanism), ``rewrite`` and ``topics`` write the same
JSON object per record, validated in the tests against ``textdp/schemas/record.schema.json``
(shipped with the package; :func:`load_record_schema`)::

    {"id": "...",                       # the input's id (or sequence number); "<id>:<j>" per segment
     "release": "bag" | "text" | "sentence" | "document" | "matrix",
     "words": [...] | "text": "..." | "matrix": [[...]],   # exactly one, by release form
     "mechanism": "...", "epsilon": 1.0, "delta": 0.0, "unit": "word",   # = the guarantee's (one bound)
     "guarantee": {...},                # Guarantee.to_dict(compact=True): no statement, no reference
     "seeded": false,
     "units": 3, "total": {"epsilon": 3.0, "delta": 0.0}}  # only when a record covers several units

The top-level ``mechanism``/``epsilon``/``delta``/``unit`` ARE the guarantee (one bound per
``unit``); ``units`` and ``total`` say how many units the record holds and their sum (basic
composition): a rewritten line of ``m`` segments costs ``m`` times the per-segment bound. The
long statement and the reference are written once, in ``<output>.settings.json``
(``guarantee``: the full :meth:`~textdp.guarantees.Guarantee.to_dict`), not on every record.

>>> from textdp.guarantees import Guarantee
>>> g = Guarantee(mechanism="toy", epsilon=2.0, unit="sentence", statement="...")
>>> rec = ReleaseRecord(id="a", guarantee=g, seeded=False, release="sentence", content="hi", units=3)
>>> d = rec.to_record()
>>> d["text"], d["epsilon"], d["units"], d["total"]
('hi', 2.0, 3, {'epsilon': 6.0, 'delta': 0.0})
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .base import Guarantee

__all__ = ["CONTENT_KEYS", "RECORD_SCHEMA_PATH", "RELEASE_FORMS", "ReleaseRecord", "load_record_schema"]

#: what a release holds: a bag of words, text in input order, rewritten sentences, a document rewritten whole, a matrix
RELEASE_FORMS = ("bag", "text", "sentence", "document", "matrix")
#: the record key of each release form's content
CONTENT_KEYS = {"bag": "words", "text": "text", "sentence": "text", "document": "text", "matrix": "matrix"}
#: what a record holds: words (bag, text), a string (text, sentence) or matrix rows
Content = str | tuple[str, ...] | tuple[tuple[float, ...], ...]
#: the schema's location inside the installed package
RECORD_SCHEMA_PATH = "schemas/record.schema.json"


def load_record_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of a release record, as shipped with the package.

    >>> load_record_schema()["title"]
    'textdp release record'
    """
    text = resources.files("textdp").joinpath(RECORD_SCHEMA_PATH).read_text(encoding="utf-8")
    schema: dict[str, object] = json.loads(text)
    return schema


@dataclass(frozen=True)
class ReleaseRecord:
    """One released unit: id, content, guarantee, whether seeded (see the module docstring).

    Family release classes (:class:`~textdp.mechanisms.PrivateDocument`,
    :class:`~textdp.mechanisms.PrivateText`, the rewriter's and the topics' releases) derive
    from it and only say what their content is; :meth:`to_record` is written once, here.
    Nothing describing the private input is held (counts go to a private report).
    """

    id: str
    guarantee: Guarantee
    seeded: bool
    release: str = "text"
    content: Content = ""
    units: int | None = None

    def payload(self) -> str | list[str] | list[list[float]]:
        """The JSON form of the content (a list of words, a string, or a list of rows)."""
        if isinstance(self.content, str):
            return self.content
        if self.release == "matrix":
            return [[float(x) for x in row] for row in self.content if not isinstance(row, str)]
        return [str(w) for w in self.content]

    def to_record(self) -> dict[str, Any]:
        """The record (one JSON object of the release file)."""
        g = self.guarantee
        out: dict[str, Any] = {
            "id": self.id,
            "release": self.release,
            CONTENT_KEYS[self.release]: self.payload(),
            "mechanism": g.mechanism,
            "epsilon": float(g.epsilon),
            "delta": float(g.delta),
            "unit": g.unit,
            "guarantee": g.to_dict(compact=True),
            "seeded": bool(self.seeded),
        }
        if self.units is not None:
            out["units"] = int(self.units)
            out["total"] = {"epsilon": float(g.epsilon) * self.units, "delta": float(g.delta) * self.units}
        return out
