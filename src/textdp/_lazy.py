"""Module attributes imported on first use (PEP 562), so ``import textdp`` and ``textdp -h`` load no numpy."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, MutableMapping


def lazy_attributes(package: str, names: Mapping[str, str],
                    namespace: MutableMapping[str, object]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a public name from its submodule, or a submodule.

    ``names`` maps each public name to the submodule that defines it; ``namespace`` is the package's
    ``globals()``, where a value is cached after its first import.

    >>> ns: dict[str, object] = {}
    >>> get, _ = lazy_attributes("textdp", {"ParameterError": "errors"}, ns)
    >>> get("ParameterError").__name__, "ParameterError" in ns
    ('ParameterError', True)
    """

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f".{module}", package), name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
