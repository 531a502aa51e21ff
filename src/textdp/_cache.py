"""The one textdp cache directory.

Every cached artefact (converted embeddings, approximate-decoder indexes, sampled
sensitivities) lives under :func:`cache_dir`: ``$TEXTDP_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/textdp``, else ``~/.cache/textdp``.

>>> import os
>>> old = os.environ.pop("TEXTDP_CACHE_DIR", None)
>>> os.environ["XDG_CACHE_HOME"] = "/tmp/xdg"
>>> str(cache_dir("topics"))
'/tmp/xdg/textdp/topics'
>>> del os.environ["XDG_CACHE_HOME"]
>>> if old is not None: os.environ["TEXTDP_CACHE_DIR"] = old
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(sub: str | None = None) -> Path:
    """The textdp cache directory, or its subdirectory ``sub`` (not created here)."""
    env = os.environ.get("TEXTDP_CACHE_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "textdp"
    return base / sub if sub else base
