"""The one registry of textdp's mechanisms: ``get(name, epsilon=..., embeddings=..., **params)``.

``MECHANISM_NAMES`` is the tuple the CLI builds its ``--mechanism`` choices from.
``syntf`` is registered lazily: it is listed (and importable through :func:`get`)
when the module :mod:`textdp.mechanisms.syntf` exists, and resolves to its
``MECHANISM`` (:class:`~textdp.mechanisms.syntf.SynTFPrivacy`, the document job's
SynTF; ``get("syntf", epsilon=...)`` uses GloVe's 400,000 words unless given
``embeddings=`` or ``vocab_size=``).

>>> "cmp" in MECHANISM_NAMES and "earth-movers" in MECHANISM_NAMES
True
>>> get("nope", epsilon=1.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
textdp.errors.ParameterError: unknown mechanism 'nope'; choose one of: earth-movers, cmp, ...
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Any

from ..errors import ParameterError
from .earth_movers import EarthMoversPrivacy
from .exponential import (
    TEM,
    CusText,
    CusTextPlus,
    RandomReplacement,
    SanText,
    SanTextPlus,
)
from .perturbation import CMP, Mahalanobis, Vickrey

__all__ = ["MECHANISM_CLASSES", "MECHANISM_NAMES", "get", "mechanism_class"]

#: registered name -> class (syntf is resolved lazily by :func:`mechanism_class`)
MECHANISM_CLASSES: dict[str, type] = {
    "earth-movers": EarthMoversPrivacy,
    "cmp": CMP,
    "mahalanobis": Mahalanobis,
    "vickrey": Vickrey,
    "tem": TEM,
    "santext": SanText,
    "santext+": SanTextPlus,
    "custext": CusText,
    "custext+": CusTextPlus,
    "random": RandomReplacement,
}

_SYNTF_MODULE = "textdp.mechanisms.syntf"


def _syntf_available() -> bool:
    try:
        return importlib.util.find_spec(_SYNTF_MODULE) is not None
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        return False


_ORDER = ("earth-movers", "cmp", "mahalanobis", "vickrey", "tem", "santext", "santext+", "custext", "custext+")
MECHANISM_NAMES: tuple[str, ...] = _ORDER + (("syntf",) if _syntf_available() else ()) + ("random",)


def mechanism_class(name: str) -> type:
    """The class registered under ``name`` (one-line :class:`ParameterError` listing the names otherwise)."""
    if not isinstance(name, str) or name not in MECHANISM_NAMES:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of: {', '.join(MECHANISM_NAMES)}")
    if name == "syntf":
        module = importlib.import_module(_SYNTF_MODULE)
        for attr in ("MECHANISM", "SynTF", "SynTFMechanism"):
            cls = getattr(module, attr, None)
            if isinstance(cls, type):
                return cls
        raise ParameterError(f"{_SYNTF_MODULE} defines no SynTF class (expected SynTF or MECHANISM)")
    return MECHANISM_CLASSES[name]


def get(name: str, epsilon: float | None = None, embeddings: Any = None, **params: Any) -> Any:
    """A configured (unfitted) mechanism object by registered name.

    Parameters
    ----------
    name : str
        One of :data:`MECHANISM_NAMES`.
    epsilon : float
        Privacy parameter (``random`` also accepts ``rate=`` instead).
    embeddings : Embeddings, path or None
        The vocabulary (``None``: GloVe 6B 50d).
    **params
        Mechanism-specific parameters (``seed``, ``lambd``, ``t``, ``beta``, ``p``, ``top_k``,
        ``postprocess``, ...). ``seed`` is passed as ``rng`` to mechanisms that still call it so.

    Examples
    --------
    >>> get("tem", epsilon=2.0, beta=0.01).beta
    0.01
    """
    cls = mechanism_class(name)
    sig = inspect.signature(cls)
    if "seed" in params and "seed" not in sig.parameters and "rng" in sig.parameters:
        params["rng"] = params.pop("seed")
    kwargs: dict[str, Any] = dict(params)
    if epsilon is not None or "epsilon" in sig.parameters:
        kwargs["epsilon"] = epsilon
    if "embeddings" in sig.parameters:
        kwargs["embeddings"] = embeddings
    elif embeddings is not None:
        raise ParameterError(f"mechanism {name!r} takes no embeddings")
    unknown = [k for k in kwargs if k not in sig.parameters]
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        valid = ", ".join(p for p in sig.parameters if p not in ("self",))
        raise ParameterError(f"mechanism {name!r} has no parameter {unknown[0]!r}; valid: {valid}")
    required = [p.name for p in sig.parameters.values() if p.default is inspect.Parameter.empty
                and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    missing = [p for p in required if p not in kwargs]
    if missing:
        raise ParameterError(f"mechanism {name!r} needs {', '.join(f'{p}=' for p in missing)}; pass "
                             f"{'it' if len(missing) == 1 else 'them'} to textdp.mechanisms.get")
    return cls(**kwargs)
