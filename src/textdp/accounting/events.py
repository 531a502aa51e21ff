"""Guarantee records (kept for compatibility: they live in the leaf module :mod:`textdp.guarantees`)."""

from __future__ import annotations

from ..guarantees import EARTH_MOVERS_REFERENCE, EarthMoversGuarantee, Guarantee

__all__ = ["EARTH_MOVERS_REFERENCE", "EarthMoversGuarantee", "Guarantee"]
