"""Privacy accounting: guarantees, distances and calibration."""

from __future__ import annotations

from .events import EarthMoversGuarantee

__all__ = ["EarthMoversGuarantee"]
