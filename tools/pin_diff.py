"""Compare the installed packages with constraints.txt, or print pyproject.toml's floors as pins.

Usage::

    python tools/pin_diff.py constraints.txt      # lines "name: tested -> installed" (exit 1 if any differ)
    python tools/pin_diff.py --floors pyproject.toml   # "name==floor" for every ">=" of the core, test and dev sets

Used by ``tools/check_versions.sh`` (the opt-in latest/oldest checks).
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of every ``name==version`` line of a constraints file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_canon(name)] = version.strip()
    return out


def diff(constraints: Path) -> list[str]:
    """``name: tested -> installed`` for every pinned package installed at another version (or missing)."""
    installed = {_canon(d.metadata["Name"]): d.version for d in metadata.distributions()}
    return [f"{name}: {want} -> {installed.get(name, 'not installed')}"
            for name, want in sorted(pins(constraints).items()) if installed.get(name, want) != want]


def floors(pyproject: Path) -> list[str]:
    """``name==floor`` for each ``name>=floor`` requirement of the core dependencies and the test/dev extras."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    reqs = [*project["dependencies"], *project["optional-dependencies"]["test"],
            *project["optional-dependencies"]["dev"]]
    out = {}
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*>=\s*([0-9][^,;\s]*)", req)
        if m and _canon(m.group(1)) != "torch":  # torch: the CPU build, installed first by its own pin
            out[_canon(m.group(1))] = m.group(3)
    return [f"{name}=={version}" for name, version in sorted(out.items())]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--floors"] and len(argv) == 2:
        print("\n".join(floors(Path(argv[1]))))
        return 0
    if len(argv) == 1:
        lines = diff(Path(argv[0]))
        print("\n".join(lines) if lines else "every pinned package is installed at its tested version")
        return 1 if lines else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
