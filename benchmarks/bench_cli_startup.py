"""Start-up time of the ``textdp`` command line: lazy command imports against eager ones, in the same run.

Each case runs the command line in a fresh Python process, alternating the two ways of starting it:

* ``lazy``: ``textdp`` as installed (commands imported on first use, ``textdp``'s public names on
  first use);
* ``eager``: the same, after importing every command module and ``textdp.mechanisms`` /
  ``textdp.embeddings`` up front, as ``textdp`` started before issue 27 (the baseline);
* ``--old-src DIR``: instead of ``eager``, the ``src`` folder of an older checkout
  (``git archive a779fc6 src | tar -x -C /tmp/old``, then ``--old-src /tmp/old/src``).

CPU time (user + sys) is the robust measure on a shared machine; wall time is printed too, with the
load average. Usage::

    python benchmarks/bench_cli_startup.py [--repeats 7] [--old-src DIR] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CASES = {
    "textdp --version": ["--version"],
    "textdp runs -h": ["runs", "-h"],
    "textdp obfusc (typo)": ["obfusc"],
    "textdp obfuscate (missing file)": ["obfuscate", "/nonexistent/in.txt", "-e", "10", "--size", "3"],
    "textdp obfuscate --mechanism bogus x": ["obfuscate", "--mechanism", "bogus", "x"],
    "textdp obfuscate -h": ["obfuscate", "-h"],
    "textdp obfuscate x -e 1 -n 0 (bad N)": ["obfuscate", "x", "-e", "1", "-n", "0"],
    "textdp --help (every command)": ["--help"],
    # issue 31: --param and a missing --epsilon are checked from the registry index ({input}: a real file)
    "obfuscate IN -e 1 -n 5 --param bogus=1": ["obfuscate", "{input}", "-e", "1", "-n", "5", "--param", "bogus=1"],
    "obfuscate IN -e 1 --param lambd=abc": ["obfuscate", "{input}", "-e", "1", "--mechanism", "vickrey",
                                            "--param", "lambd=abc"],
    "obfuscate IN -n 5 (no --epsilon)": ["obfuscate", "{input}", "-n", "5"],
    # issue 31: rewrite's option lists in the leaf _options, files checked before the class is imported
    # ({model}: an empty folder, {out}: a file name in the temporary folder)
    "rewrite -h": ["rewrite", "-h"],
    "rewrite M IN --mechanism bogus": ["rewrite", "{model}", "{input}", "-e", "1", "-o", "{out}",
                                       "--mechanism", "bogus"],
    "rewrite M IN --unit bogus": ["rewrite", "{model}", "{input}", "-e", "1", "-o", "{out}", "--unit", "bogus"],
    "rewrite M IN --param bogus=1": ["rewrite", "{model}", "{input}", "-e", "1", "-o", "{out}", "--param", "bogus=1"],
    "rewrite M missing.txt": ["rewrite", "{model}", "/nonexistent/in.txt", "-e", "1", "-o", "{out}"],
    "topics -h": ["topics", "-h"],
    "topics IN -e -1": ["topics", "{input}", "-e", "-1"],
    "topics missing.jsonl": ["topics", "/nonexistent/c.jsonl"],
    "audit -h": ["audit", "-h"],
    "audit bogus": ["audit", "bogus"],
}

EAGER = ("import importlib, textdp.mechanisms, textdp.embeddings, textdp.cli as c\n"
         "for m in c.COMMAND_MODULES: importlib.import_module('textdp.cli.' + m)\n")


def _code(args: list[str], *, eager: bool, src: str | None) -> str:
    path = f"import sys; sys.path.insert(0, {src!r})\n" if src else "import sys\n"
    return (path + (EAGER if eager else "") + "from textdp.cli import main\n"
            f"sys.argv = ['textdp'] + {args!r}\nmain()\n")


def _run(code: str) -> tuple[float, float]:
    out = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S", sys.executable, "-c", code],
                         capture_output=True, text=True, check=False)
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("TIME ")][-1].split()
    return float(line[1]), float(line[2]) + float(line[3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--old-src", default=None, help="src folder of an older checkout (the baseline)")
    ap.add_argument("--only", default=None, help="run only the cases whose label contains this")
    a = ap.parse_args()
    base = "old" if a.old_src else "eager"
    folder = tempfile.mkdtemp(prefix="bench-cli-")
    real_input = os.path.join(folder, "in.txt")
    with open(real_input, "w", encoding="utf-8") as fh:
        fh.write("The harbour was quiet at dawn.\n")
    model = os.path.join(folder, "model")  # an empty model folder: read only after the options are checked
    os.mkdir(model)
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {a.repeats} runs each; baseline: {base}")
    print(f"{'case':34s} {base + ' CPU':>9s} {'lazy CPU':>9s} {'ratio':>6s} {base + ' wall':>10s} {'lazy wall':>10s}")
    for label, args in CASES.items():
        if a.only and a.only not in label:
            continue
        places = {"{input}": real_input, "{model}": model, "{out}": os.path.join(folder, "out.jsonl")}
        args = [places.get(x, x) for x in args]
        runs: dict[str, list[tuple[float, float]]] = {"base": [], "lazy": []}
        for _ in range(a.repeats):
            runs["base"].append(_run(_code(args, eager=not a.old_src, src=a.old_src)))
            runs["lazy"].append(_run(_code(args, eager=False, src=None)))
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        print(f"{label:34s} {cpu['base']:8.2f}s {cpu['lazy']:8.2f}s {cpu['base'] / cpu['lazy']:5.1f}x "
              f"{wall['base']:9.2f}s {wall['lazy']:9.2f}s")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    os.remove(real_input)
    os.rmdir(model)
    os.rmdir(folder)


if __name__ == "__main__":
    main()
