"""The suite keeps textdp's per-user state out of the real cache (issue 38, item 9; the root conftest.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_state_folder_is_private_and_not_the_users():
    from textdp._cache import cache_dir, check_private_dir

    state = Path(os.environ["TEXTDP_CACHE_DIR"])
    assert cache_dir() == state
    real = Path.home() / ".cache" / "textdp"
    assert not state.resolve().is_relative_to(real.resolve())
    check_private_dir(state, what="the test state folder")  # 0700, this user's, every parent checked
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_subprocesses_inherit_the_private_state_folder():
    code = "from textdp._cache import cache_dir, user_secret; user_secret(); print(cache_dir())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert Path(out.stdout.strip()) == Path(os.environ["TEXTDP_CACHE_DIR"])
    assert (Path(os.environ["TEXTDP_CACHE_DIR"]) / "runs" / ".salt").is_file()


def test_guard_fails_a_run_that_writes_into_the_real_cache(tmp_path):
    """A test that escapes the private folder (here: it unsets the variable) fails the run, naming the new files."""
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leak.py").write_text(textwrap.dedent("""
        from textdp._cache import cache_dir

        def test_leak(monkeypatch):
            monkeypatch.delenv("TEXTDP_CACHE_DIR")
            (cache_dir("runs", create=True) / "left-behind").write_text("x")

        def test_clean():
            (cache_dir("runs", create=True) / "kept-private").write_text("x")
    """))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTDP_CACHE_DIR", "XDG_CACHE_HOME",
                                                            "TEXTDP_TEST_CACHE_GUARD")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
            "--rootdir", str(tmp_path), "test_leak.py", "-k"]
    leak = subprocess.run([*args, "leak or clean"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert leak.returncode == 1, leak.stdout + leak.stderr
    assert "2 passed" in leak.stdout and "textdp state guard" in leak.stdout, leak.stdout
    assert "new      runs/left-behind" in leak.stdout and "kept-private" not in leak.stdout, leak.stdout
    # TEXTDP_TEST_CACHE_GUARD=0 (something else uses that cache meanwhile) makes it a warning
    warned = subprocess.run([*args, "leak"], check=False, cwd=tmp_path, env={**env, "TEXTDP_TEST_CACHE_GUARD": "0"},
                            capture_output=True, text=True, timeout=120)
    assert warned.returncode == 0, warned.stdout + warned.stderr
    assert "warning (TEXTDP_TEST_CACHE_GUARD=0)" in warned.stdout and "modified runs/left-behind" in warned.stdout
