"""The in-process engine (defined in the leaf module :mod:`textdp.backend`, re-exported here)."""

from __future__ import annotations

from ..backend import LocalBackend

__all__ = ["LocalBackend"]
