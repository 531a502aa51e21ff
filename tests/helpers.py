"""Helpers shared by several test modules (import them: ``from helpers import second_user``).

* :func:`second_user` - a throwaway unprivileged local user (root and ``useradd`` only; skipped otherwise),
  for the tests that act as another user against a private folder, the ledger or a model folder;
* :func:`run_as` - run stdlib-only Python as that user (the system interpreter: the user cannot read
  root's virtual environment);
* :func:`shared_folder` - a folder both users can write to, root-owned and sticky like ``/tmp``;
* :func:`tiny_model`, :func:`tiny_lms` and :func:`tiny_gguf` - a tiny ER-AE model trained in seconds, tiny random language
  models of the three kinds and a tiny GPT-2 in one GGUF file (``examples/tiny_lm.py``: offline, no corpus text).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: the interpreter a second user runs (root's virtual environment is not readable by it)
SYSTEM_PYTHON = "/usr/bin/python3"

#: the toy text :func:`tiny_model` trains on (36 sentences made here, no corpus text)
TOY_TEXT = " ".join(f"The {a} {v} the {o} near the river." for a in ("cat", "dog", "fox", "owl") for v in
                    ("saw", "chased", "found") for o in ("ball", "stick", "boat"))


@contextmanager
def second_user(prefix: str = "tdp") -> Iterator[tuple[int, int]]:
    """A throwaway system user ``(uid, gid)``, removed at the end; the test is skipped without root or useradd."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to create a throwaway second user (CI runs as root)")
    if not (shutil.which("useradd") and shutil.which("userdel") and os.path.exists(SYSTEM_PYTHON)):
        pytest.skip(f"needs useradd, userdel and {SYSTEM_PYTHON} to act as a second user")
    name = prefix + secrets.token_hex(4)  # unique: two test workers may each make one at the same time
    for attempt in range(5):  # /etc/passwd may be locked by another useradd for a moment
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              check=False, capture_output=True, text=True)
        if made.returncode == 0:
            break
        time.sleep(0.5 * (attempt + 1))
    else:
        pytest.fail(f"useradd failed: {made.stderr.strip()}")
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        for attempt in range(5):  # the same lock as useradd's (another test worker may hold it a moment)
            if subprocess.run(["userdel", name], check=False, capture_output=True).returncode == 0:
                break
            time.sleep(0.5 * (attempt + 1))


def run_as(user: tuple[int, int], code: str, *args: str, wait: bool = True, check: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """Run stdlib-only Python ``code`` (dedented) as ``user`` with ``args``; ``wait=False`` returns the process."""
    uid, gid = user
    cmd = [SYSTEM_PYTHON, "-I", "-c", textwrap.dedent(code), *args]
    if not wait:
        return subprocess.Popen(cmd, user=uid, group=gid, extra_groups=[], cwd="/", stdout=subprocess.PIPE, text=True,
                                env=env)
    return subprocess.run(cmd, user=uid, group=gid, extra_groups=[], cwd="/", check=check, capture_output=True,
                          text=True, timeout=60, env=env)


@contextmanager
def shared_folder(prefix: str = "textdp-shared-", mode: int = 0o1777) -> Iterator[Path]:
    """A fresh folder under the system's temporary folder with ``mode`` (sticky and world-writable like ``/tmp``)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(mode)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def tiny_model(out: Path, glove) -> Path:
    """A tiny ER-AE model trained here in seconds (declared public: the guarantee covers the rewriting step)."""
    torch = pytest.importorskip("torch", reason="sentence rewriting needs the [generation] extra")
    from textdp.generation.training import TrainingSettings, train_rewriter
    from textdp.generation.vocab import segment_text

    torch.set_num_threads(1)
    settings = TrainingSettings(seed=5, vocab_size=40, encoder_hidden=8, latent=8, decoder_hidden=8, max_length=12,
                                batch_size=8, epochs=1)
    train_rewriter(segment_text(TOY_TEXT, 12), out, glove, settings, data_description="toy", declared_public=True)
    return out


def _tiny_lm_module():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_lm", Path(__file__).resolve().parents[1] / "examples" /
                                                  "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    return tiny


def tiny_gguf(path: Path) -> Path:
    """A tiny random GPT-2 as one GGUF file at ``path`` (examples/tiny_lm.py ``build_gguf``: offline, no corpus text)."""
    pytest.importorskip("torch", reason="the language-model rewriters need the [generation] extra")
    pytest.importorskip("transformers", reason="the language-model rewriters need the [generation] extra")
    pytest.importorskip("gguf", reason="GGUF model files need the [generation] extra")
    return _tiny_lm_module().build_gguf(path)


def tiny_lms(root: Path) -> dict[str, Path]:
    """Tiny random language models of the three kinds (examples/tiny_lm.py: offline, safetensors, no corpus text)."""
    pytest.importorskip("torch", reason="the language-model rewriters need the [generation] extra")
    pytest.importorskip("transformers", reason="the language-model rewriters need the [generation] extra")
    tiny = _tiny_lm_module()
    return {kind: tiny.build(root / kind, kind) for kind in ("causal", "seq2seq", "masked")}
