"""``textdp obfuscate -h`` and its errors for bad option values import no numpy (issues 27 and 31: a fast first
contact; ``--param`` and a missing ``--epsilon`` are checked against the generated registry index).

The option lists it needs at parse time live in the leaf :mod:`textdp._options`; the embeddings, the mechanisms
and the pipeline are imported only after the options are validated. Each case runs the command in a fresh
interpreter and reads ``sys.modules`` at exit (timings: BENCHMARKS.md, never asserted here).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from textdp.cli import main
sys.argv = ["textdp", *{args!r}]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in ("numpy", "torch", "textdp.embeddings", "textdp.pipeline", "textdp.mechanisms.base")
               if m in sys.modules)
print("EXIT", code, "HEAVY", ",".join(heavy) or "-", file=sys.stderr)
"""


@pytest.mark.parametrize("args,status,says", [
    (["obfuscate", "--mechanism", "bogus", "x"], 2, "'bogus' is not one of"),
    (["obfuscate", "-h"], 0, "--mechanism"),
    (["obfuscate", "x", "-e", "1", "-n", "0"], 2, "size"),
    (["obfuscate", "x", "-e", "1", "--mechanism", "cmp", "-n", "5"], 2, "--size applies to bag mechanisms"),
    (["obfuscate", "x", "-e", "1", "-n", "5", "--budget", "3"], 2, "--budget needs --ledger"),
    (["obfuscate", "missing.txt", "-e", "1", "-n", "5"], 2, "missing.txt: no such file"),
    # --param and a missing --epsilon are checked against the index's record of the class (issue 31)
    (["obfuscate", "x", "-e", "1", "-n", "5", "--param", "bogus=1"], 2, "the keys --param takes for earth-movers"),
    (["obfuscate", "x", "-e", "1", "--mechanism", "vickrey", "--param", "lambd=abc"], 2, "lambd takes a number"),
    (["obfuscate", "x", "-e", "1", "--mechanism", "cmp", "--param", "seed=3"], 2, "its own option --seed"),
    (["obfuscate", "x", "-n", "5"], 2, "--epsilon is required for earth-movers"),
    (["obfuscate", "x", "--mechanism", "random", "--param", "rate=0.3", "--param", "t=1"], 2,
     "the keys --param takes for random: rate"),
])
def test_obfuscate_help_and_bad_options_import_no_numpy(args, status, says, tmp_path):
    (tmp_path / "x").write_text("The harbour was quiet at dawn.")  # an input file "x"
    res = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], check=False, capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    last = res.stderr.strip().splitlines()[-1]
    assert last == f"EXIT {status} HEAVY -", res.stderr[-2000:]
    assert says in res.stdout + res.stderr


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The probe bites: a valid run imports numpy and the mechanisms."""
    (tmp_path / "in.txt").write_text("The harbour was quiet at dawn and the boats were still.")
    res = subprocess.run([sys.executable, "-c", PROBE.format(args=["obfuscate", "in.txt", "-e", "1", "-n", "3",
                                                                   "-k", "1000", "-o", "out.jsonl"])],
                         check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "numpy" in res.stderr.strip().splitlines()[-1], res.stderr[-2000:]
