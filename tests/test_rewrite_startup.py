"""``textdp rewrite -h`` and the errors of ``textdp rewrite`` and ``textdp topics`` for bad option values, a bad
``--param`` or a missing file import no numpy and no torch (issue 31: a fast first contact, as ``textdp obfuscate``'s in
tests/test_obfuscate_startup.py).

The option lists ``rewrite`` needs at parse time (``--unit``, ``--variant``, ``--model-data``, the default
``--max-new-tokens``) live in the leaf :mod:`textdp._options`; ``--param`` is checked against the registry index;
the input files and the model folder are checked before the mechanism's class is imported. ``topics`` checks
every option (and that the corpus exists) before the topic models are imported (its ``-h`` and a bad
``--mechanism``, answered at parse time, already imported no numpy). Each case runs the command in a
fresh interpreter and reads ``sys.modules`` at exit (timings: BENCHMARKS.md, never asserted here).
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
heavy = sorted(m for m in ("numpy", "torch", "textdp.embeddings", "textdp.generation", "textdp.mechanisms.base",
                           "textdp.topics.models") if m in sys.modules)
print("EXIT", code, "HEAVY", ",".join(heavy) or "-", file=sys.stderr)
"""

REWRITE = ["rewrite", "model", "x", "-e", "1", "-o", "out.jsonl"]  # "model": an (empty) folder, "x": a real file


def _probe(args: list[str], cwd) -> tuple[str, str]:
    (cwd / "x").write_text("The harbour was quiet at dawn.")
    (cwd / "model").mkdir(exist_ok=True)
    (cwd / "corpus.jsonl").write_text('{"author": "a", "text": "The harbour was quiet at dawn."}\n')
    res = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], check=False, capture_output=True, text=True,
                         cwd=cwd, timeout=300)
    return res.stderr.strip().splitlines()[-1], res.stdout + res.stderr


@pytest.mark.parametrize("args,status,says", [
    (["rewrite", "-h"], 0, "--model-data"),
    ([*REWRITE, "--mechanism", "bogus"], 2, "'bogus' is not one of"),
    ([*REWRITE, "--unit", "paragraph"], 2, "'paragraph' is not one of 'sentence', 'document'"),
    ([*REWRITE, "--variant", "bogus"], 2, "'bogus' is not one of 'autoregressive'"),
    ([*REWRITE, "--model-data", "bogus"], 2, "'bogus' is not one of 'auto', 'public'"),
    ([*REWRITE, "--param", "bogus=1"], 2, "the keys --param takes for er-ae: k"),
    ([*REWRITE, "--mechanism", "dp-bart", "--param", "epsilon=3"], 2, "its own option --epsilon"),
    (["rewrite", "model", "missing.txt", "-e", "1", "-o", "out.jsonl"], 2, "missing.txt: no such file"),
    (["rewrite", "no-model", "x", "-e", "1", "-o", "out.jsonl"], 2, "MODEL_DIR no-model: no such folder"),
    (["rewrite", "model", "x", "-o", "out.jsonl"], 2, "Missing option '--epsilon'"),
])
def test_rewrite_help_and_bad_options_import_no_numpy(args, status, says, tmp_path):
    last, out = _probe(args, tmp_path)
    assert last == f"EXIT {status} HEAVY -", out[-2000:]
    assert says in out


@pytest.mark.parametrize("args,status,says", [
    (["topics", "corpus.jsonl", "-e", "-1"], 2, "epsilon must be a finite number > 0"),
    (["topics", "corpus.jsonl", "--topics", "0"], 2, "--topics must be an integer >= 1"),
    (["topics", "corpus.jsonl", "--sensitivity", "bogus"], 2, "--sensitivity 'bogus'"),
    (["topics", "corpus.jsonl", "--budget", "1"], 2, "--budget needs --ledger"),
    (["topics", "missing.jsonl"], 2, "missing.jsonl: no such file"),
])
def test_topics_help_and_bad_options_import_no_numpy(args, status, says, tmp_path):
    last, out = _probe(args, tmp_path)
    assert last == f"EXIT {status} HEAVY -", out[-2000:]
    assert says in out


@pytest.mark.parametrize("args,heavy", [
    # options and files fine: the model folder is read (it is empty), after the mechanism's class is imported
    ([*REWRITE, "--mechanism", "dp-bart", "--clip=-1,1"], "numpy"),
    # options fine: the corpus is read (an empty user field), after the topic models are imported
    (["topics", "corpus.jsonl", "--user-field", "nobody", "--vocabulary", "glove:10"], "numpy"),
])
def test_the_probe_sees_a_heavy_import(args, heavy, tmp_path):
    """The probe bites: a command whose options pass goes on to import numpy (and fails later, on its data)."""
    last, out = _probe(args, tmp_path)
    assert last.startswith("EXIT 2 HEAVY") and heavy in last.split("HEAVY ")[1].split(","), out[-2000:]
