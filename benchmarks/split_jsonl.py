"""Write the records of one split of a JSON-lines corpus (20 Newsgroups' ``train``/``test``) to a new file.

The 20 Newsgroups corpus in /work/shared/data holds both by-date splits with a ``split`` field; ``textdp topics``
reads one file, so the private corpus (the ``train`` posters) is written out first (outside the repository):

    python benchmarks/split_jsonl.py /work/shared/data/20newsgroups/20newsgroups.jsonl.gz train /tmp/20ng-train.jsonl.gz
"""

from __future__ import annotations

import gzip
import json
import sys


def main() -> None:
    src, split, dst = sys.argv[1:4]
    n = 0
    with gzip.open(src, "rt", encoding="utf-8") as fin, gzip.open(dst, "wt", encoding="utf-8") as fout:
        for line in fin:
            if json.loads(line).get("split") == split:
                fout.write(line)
                n += 1
    print(f"wrote {n} records of split {split!r} to {dst}")


if __name__ == "__main__":
    main()
