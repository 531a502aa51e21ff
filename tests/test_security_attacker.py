"""Issue 28, section 1, run as an attacker would: another local user swaps an ancestor of the work dir.

The review's attack (a779fc6): ``shared/`` is mode 0777 without the sticky bit and owned by
the attacker; the victim owns ``shared/sub`` (0755) and runs a partitioned release with
``--work-dir shared/sub/wd``. When the run is under way the attacker renames ``sub`` away and
puts its own tree in its place: a byte-identical ``vocabulary-<fingerprint>/`` and links to the
victim's real spill and report folders. Once a worker's hash check has read the vocabulary, the
attacker renames a copy with vectors scaled by 1000 over it; the worker then memory-mapped the
path again and used the scaled vectors, so an epsilon = 1 release copied its input.

Here the attacker is a throwaway unprivileged user (``useradd``, removed at the end), and the
race is driven deterministically: the victim is paused at its first progress report (after the
work dir was checked and the vocabulary written, before any job ran) while the attacker swaps the
tree, and the vocabulary's ``words.txt`` is a FIFO the attacker serves, so the attacker knows
exactly when the hash check has read it and renames the scaled vectors in at that moment. The
run must be refused, or leave a release identical to a clean seeded run; on a779fc6 it copied
its input. Skipped when not root (creating a user needs root; CI runs as root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import run_as, second_user

from textdp.embeddings import Embeddings, vocabulary_fingerprint
from textdp.engines import LocalBackend
from textdp.engines.corpus import obfuscate_corpus
from textdp.errors import ParameterError

PYTHON = "/usr/bin/python3"  # the attacker cannot read root's virtual environment
pytestmark = [
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                       reason="the attacker is a throwaway user: creating one (useradd) needs root, as in CI"),
    pytest.mark.skipif(shutil.which("useradd") is None or not os.path.exists(PYTHON),
                       reason="needs useradd/userdel and a system python3 for the attacker's steps"),
]

WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]
SEED = 20261125

# The attacker's steps (stdlib only, run as the attacker with the system python).
SWAP = r"""
import os, shutil, sys
shared, fp, payload = sys.argv[1:4]
os.rename(f"{shared}/sub", f"{shared}/sub-away")          # the victim's folder, renamed away
vocab = f"{shared}/sub/wd/vocabulary-{fp}"
os.makedirs(vocab)
shutil.copy(f"{payload}/vectors.npy", f"{vocab}/vectors.npy")   # byte-identical to the driver's
os.mkfifo(f"{vocab}/words.txt")                                  # served by SERVE: we see each read
for name in ("input", "report"):                                 # the victim's real private folders
    os.symlink(f"{shared}/sub-away/wd/{name}", f"{shared}/sub/wd/{name}")
"""

SERVE = r"""
import errno, os, sys, time
shared, fp, payload = sys.argv[1:4]
vocab = f"{shared}/sub/wd/vocabulary-{fp}"
words = open(f"{payload}/words.txt", "rb").read()
deadline = time.monotonic() + 120
print("armed", flush=True)
served = 0
while time.monotonic() < deadline:
    try:
        fd = os.open(f"{vocab}/words.txt", os.O_WRONLY | os.O_NONBLOCK)   # succeeds once the victim reads
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        time.sleep(0.002)
        continue
    os.set_blocking(fd, True)
    if served == 0:  # the hash check is reading: the matrix it hashes is already open, swap the file now
        os.replace(f"{payload}/vectors-x1000.npy.copy", f"{vocab}/vectors.npy")
    os.write(fd, words)
    os.close(fd)
    time.sleep(0.3)  # let this reader finish before the next open is served
    served += 1
    print("served", served, flush=True)
"""


@pytest.fixture(scope="module")
def attacker() -> Iterator[tuple[int, int]]:
    with second_user("tdpa") as user:
        yield user


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    rng = np.random.default_rng(5)
    return Embeddings(WORDS, rng.standard_normal((300, 8)).astype(np.float32), name="toy")


@pytest.fixture()
def base() -> Iterator[Path]:
    """A folder the attacker can reach (pytest's own tmp folders are root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="textdp-attack-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as(user: tuple[int, int], script: str, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_as(user, script, *args, check=False, env={"PATH": "/usr/bin:/bin"})
    assert isinstance(res, subprocess.CompletedProcess)
    return res


def _corpus(path: Path) -> Path:
    rng = np.random.default_rng(1)
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(WORDS[j] for j in rng.integers(0, 300, 15))})
                            + "\n" for i in range(30)))
    return path


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]


def _copied(records: list[dict], inp: Path) -> float:
    src = {json.loads(line)["id"]: set(json.loads(line)["text"].split()) for line in inp.read_text().splitlines()}
    words = [(w, r["id"]) for r in records for w in r["words"]]
    return sum(w in src[i] for w, i in words) / max(1, len(words))


def _payload(base: Path, emb: Embeddings, user: tuple[int, int]) -> Path:
    """The attacker's files: the public vocabulary (from the public embeddings) and a copy scaled by 1000."""
    pay = base / "payload"
    pay.mkdir()
    (pay / "words.txt").write_bytes("".join(w + "\n" for w in emb.words).encode())
    np.save(pay / "vectors.npy", np.asarray(emb.vectors, dtype=np.float32))
    np.save(pay / "vectors-x1000.npy", np.asarray(emb.vectors, dtype=np.float32) * 1000)
    shutil.copy(pay / "vectors-x1000.npy", pay / "vectors-x1000.npy.copy")
    for p in [pay, *pay.iterdir()]:
        os.chown(p, *user)
    return pay


def _kw(emb: Embeddings, **extra: object) -> dict:
    return {"embeddings": emb, "epsilon": 1.0, "size": 10, "bag": "truncate", "stop_words": None,
            "decoder": "exact", "seed": SEED, "partitions": 3, **extra}


class _Attack:
    """The progress hook: at the victim's first progress report, the attacker swaps the tree and arms the FIFO."""

    def __init__(self, user: tuple[int, int], shared: Path, fp: str, payload: Path) -> None:
        self.user, self.args = user, [str(shared), fp, str(payload)]
        self.server: subprocess.Popen[str] | None = None
        self.swapped = False

    def __call__(self, done: int, total: int) -> None:
        if self.swapped:
            return
        self.swapped = True
        res = _as(self.user, SWAP, *self.args)
        assert res.returncode == 0, res.stderr
        self.server = subprocess.Popen([PYTHON, "-I", "-c", SERVE, *self.args], user=self.user[0],
                                       group=self.user[1], extra_groups=[], stdout=subprocess.PIPE, text=True,
                                       env={"PATH": "/usr/bin:/bin"})
        assert self.server.stdout is not None and self.server.stdout.readline().strip() == "armed"

    def stop(self) -> None:
        if self.server is not None:
            self.server.kill()  # the process this test started
            self.server.wait()
            if self.server.stdout is not None:
                self.server.stdout.close()


def _victim_tree(base: Path, user: tuple[int, int]) -> Path:
    shared = base / "shared"
    (shared / "sub").mkdir(parents=True)
    os.chown(shared, *user)
    shared.chmod(0o777)  # the attacker's folder, writable by all, no sticky bit
    (shared / "sub").chmod(0o755)  # the victim's own folder inside it
    return shared


def _backend(engine: str):
    if engine == "local":
        return LocalBackend()
    pytest.importorskip("distributed")
    pytest.importorskip("cryptography")
    from textdp.engines.dask import DaskBackend

    return DaskBackend(workers=1, processes=True)


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_the_ancestor_swap_is_refused_on_both_engines(base, attacker, toy_emb, engine):
    inp = _corpus(base / "in.jsonl")
    clean_out = base / "clean"
    obfuscate_corpus([inp], clean_out, work_dir=base / "private-wd", backend=LocalBackend(), **_kw(toy_emb))
    clean = _records(clean_out)
    assert _copied(clean, inp) < 0.3  # (0.0-0.2 at epsilon = 1 on this vocabulary)

    shared = _victim_tree(base, attacker)
    attack = _Attack(attacker, shared, vocabulary_fingerprint(toy_emb.vectors), _payload(base, toy_emb, attacker))
    out = base / "out"
    backend = _backend(engine)
    try:
        obfuscate_corpus([inp], out, work_dir=shared / "sub" / "wd", backend=backend, progress=attack,
                         **_kw(toy_emb))
    except ParameterError as exc:  # refused: in one line, naming the folder at fault
        assert "\n" not in str(exc) and f"{shared} on its path is owned by another user" in str(exc)
        assert not attack.swapped and not list(out.glob("part-*"))
    else:  # or the release is exactly the clean one
        assert _records(out) == clean
    finally:
        attack.stop()
        backend.close()


def test_with_the_ancestor_check_bypassed_the_descriptors_still_hold(base, attacker, toy_emb, monkeypatch):
    """Defence in depth: even if an ancestor were missed, the swapped tree is never used or written to.

    The ancestor rule is switched off in this process (the local engine runs its jobs here), so the
    check passes and the attacker swaps the tree while the victim is paused. The driver keeps working
    through the descriptor it opened; the worker opens the vocabulary itself and finds the attacker's
    folder (refused), so no release is made from the attacker's vectors and nothing private lands in
    the attacker's tree.
    """
    import textdp._cache as cache

    monkeypatch.setattr(cache, "_check_ancestor", lambda *a, **k: None, raising=False)
    inp = _corpus(base / "in.jsonl")
    shared = _victim_tree(base, attacker)
    fp = vocabulary_fingerprint(toy_emb.vectors)
    attack = _Attack(attacker, shared, fp, _payload(base, toy_emb, attacker))
    out = base / "out"
    try:
        with pytest.raises(ParameterError) as exc:
            obfuscate_corpus([inp], out, work_dir=shared / "sub" / "wd", backend=LocalBackend(), progress=attack,
                             **_kw(toy_emb, private_report=base / "report.jsonl"))
    finally:
        attack.stop()
    assert attack.swapped and "\n" not in str(exc.value)
    assert "owned by another user" in str(exc.value) or "hash mismatch" in str(exc.value)
    assert not list(out.glob("part-*"))
    # the attacker's tree holds only what the attacker put there
    theirs = shared / "sub" / "wd"
    assert sorted(p.name for p in theirs.iterdir()) == ["input", "report", f"vocabulary-{fp}"]
    assert sorted(p.name for p in (theirs / f"vocabulary-{fp}").iterdir()) == ["vectors.npy", "words.txt"]


SWAP_EMPTY = r"""
import os, sys
shared = sys.argv[1]
os.rename(f"{shared}/sub", f"{shared}/sub-away")   # the victim's folder, renamed away mid-run
os.makedirs(f"{shared}/sub/wd")
os.chmod(f"{shared}/sub/wd", 0o777)                 # a trap: anything written by path lands here
"""


def test_a_swap_after_the_check_changes_nothing(base, attacker, toy_emb, monkeypatch):
    """Renaming the work dir's parent mid-run (ancestor rule bypassed here, so the check passes) changes nothing.

    The attacker acts after the first part is finished: the driver keeps reading and writing its
    run state through the descriptor it opened (on a779fc6 it wrote ``state.json`` and the run's
    key by path, into the attacker's folder), the release is byte for byte the clean seeded one,
    and the attacker's folder stays empty.
    """
    import textdp._cache as cache

    inp = _corpus(base / "in.jsonl")
    obfuscate_corpus([inp], base / "clean", work_dir=base / "private-wd", backend=LocalBackend(), **_kw(toy_emb))
    monkeypatch.setattr(cache, "_check_ancestor", lambda *a, **k: None, raising=False)
    shared = _victim_tree(base, attacker)
    calls: list[int] = []

    def pause_after_the_first_part(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 2:  # the first part is finished; the victim is paused here while the attacker acts
            res = _as(attacker, SWAP_EMPTY, str(shared))
            assert res.returncode == 0, res.stderr

    out = base / "out"
    obfuscate_corpus([inp], out, work_dir=shared / "sub" / "wd", backend=LocalBackend(),
                     progress=pause_after_the_first_part, **_kw(toy_emb))
    assert len(calls) >= 3 and (shared / "sub-away").is_dir()
    assert [p.read_bytes() for p in sorted(out.glob("part-*"))] == \
        [p.read_bytes() for p in sorted((base / "clean").glob("part-*"))]
    assert list((shared / "sub" / "wd").iterdir()) == []  # nothing of the victim's in the attacker's folder
    assert not [p for p in (shared / "sub-away").rglob("*") if p.is_file()]  # the victim's state was deleted
