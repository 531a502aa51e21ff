"""Test helper: validate release records against the schema shipped with the package."""

from __future__ import annotations

from typing import Any

import jsonschema

from textdp.guarantees import load_record_schema

SCHEMA = load_record_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
GUARANTEE = jsonschema.Draft202012Validator({**SCHEMA["$defs"]["guarantee"], "$defs": SCHEMA["$defs"]})


def validate_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Raise unless ``rec`` is a valid release record; return it."""
    VALIDATOR.validate(rec)
    assert rec["epsilon"] == rec["guarantee"]["epsilon"] and rec["unit"] == rec["guarantee"]["unit"]
    assert rec["mechanism"] == rec["guarantee"]["mechanism"] and rec["delta"] == rec["guarantee"]["delta"]
    if "ex_post" in rec:  # the privacy loss of this output never exceeds the worst-case bound the record states
        worst = rec["total"]["epsilon"] if "total" in rec else rec["epsilon"]
        assert rec["ex_post"]["worst_case_epsilon"] == worst and rec["ex_post"]["epsilon"] <= worst + 1e-9
    return rec


def validate_guarantee(g: dict[str, Any], *, full: bool = True) -> dict[str, Any]:
    """Raise unless ``g`` is a guarantee object (``full``: with statement and reference, as in settings files)."""
    GUARANTEE.validate(g)
    if full:
        assert g["statement"] and "reference" in g
    return g


def compact(full: dict[str, Any]) -> dict[str, Any]:
    """A settings file's full guarantee without what records leave out (statement, reference, event)."""
    return {k: v for k, v in full.items() if k not in ("statement", "reference", "event")}
