"""The suite keeps textdp's per-user state out of the real cache (issue 38, item 9; the root conftest.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-W", "error",
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


def _inner_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTDP_CACHE_DIR", "XDG_CACHE_HOME",
                                                            "TEXTDP_TEST_CACHE_GUARD", "TEXTDP_TEST_STATE_DIR")
           and not k.startswith("PYTEST_")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    return env


def test_two_workers_have_a_state_folder_each_and_one_guard(tmp_path):
    """Under pytest-xdist (the suite's default) each worker keeps its state in a folder of its own, the workers'
    own writes there never trip the guard, and a worker that escapes into the real cache still fails the run."""
    pytest.importorskip("xdist", reason="pytest-xdist (the [test] extra) runs the suite on two workers")
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    seen = tmp_path / "seen"
    seen.mkdir()
    (tmp_path / "test_workers.py").write_text(textwrap.dedent(f"""
        import os

        import pytest

        from textdp._cache import cache_dir

        @pytest.mark.parametrize("i", range(6))
        def test_clean(i):
            state = cache_dir("runs", create=True)
            (state / f"kept-private-{{i}}").write_text("x")
            worker = os.environ["PYTEST_XDIST_WORKER"]
            (__import__("pathlib").Path({str(seen)!r}) / f"{{worker}}-{{i}}").write_text(os.environ["TEXTDP_CACHE_DIR"])

        def test_leak(monkeypatch):
            monkeypatch.delenv("TEXTDP_CACHE_DIR")
            (cache_dir("runs", create=True) / "left-behind").write_text("x")
    """))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "-n", "2",
                          "--rootdir", str(tmp_path), "test_workers.py"], check=False, cwd=tmp_path,
                         env=_inner_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "7 passed" in res.stdout and "textdp state guard" in res.stdout, res.stdout
    guard = res.stdout[res.stdout.index("textdp state guard"):]
    assert "new      runs/left-behind" in guard and "kept-private" not in guard, guard
    folders = {f.name.split("-")[0]: Path(f.read_text()) for f in seen.iterdir()}
    assert not any(str(folder) in guard for folder in folders.values()), guard  # the workers' folders: not real
    assert set(folders) == {"gw0", "gw1"}, folders  # both workers ran tests
    assert all(folder.parent.name == worker for worker, folder in folders.items()), folders
    run = folders["gw0"].parent.parent
    assert folders["gw1"].parent.parent == run  # the run's private folder, removed at its end
    assert not run.exists() and not run.is_relative_to(tmp_path / "home")


def _conftest_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("textdp_root_conftest", ROOT / "conftest.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("given", "cores", "want"), [
    ({}, 2, (2, "loadscope")),
    ({}, 16, (2, "loadscope")),  # at most two: more would only compete for a 2-core machine
    ({}, 1, (None, "no")),  # one core: one process
    ({"numprocesses": 0}, 2, (0, "no")),  # -n 0: debugging in one process
    ({"numprocesses": 4}, 2, (4, "no")),  # -n 4: as asked (xdist then picks its default distribution)
    ({"dist": "load"}, 2, (None, "load")),
    ({"usepdb": True}, 2, (None, "no")),
    ({"capture": "no"}, 2, (None, "no")),  # -s
    ({"collectonly": True}, 2, (None, "no")),
])
def test_the_default_is_two_workers_unless_the_command_line_chose(monkeypatch, given, cores, want):
    """``python -m pytest`` (the README's and CI's command) runs on two workers, module by module; the command line
    wins, and debugging options keep the run in one process."""
    from types import SimpleNamespace

    mod = _conftest_module()
    monkeypatch.setattr(mod, "_cores", lambda: cores)
    opt = SimpleNamespace(**{"numprocesses": None, "dist": "no", "tx": [], "usepdb": False, "trace": False,
                             "capture": "fd", "collectonly": False, **given})
    config = SimpleNamespace(option=opt, pluginmanager=SimpleNamespace(hasplugin=lambda name: name == "xdist"))
    mod.pytest_cmdline_main(config)
    assert (opt.numprocesses, opt.dist) == want
    # without xdist (-p no:xdist, or not installed) and in a worker itself: nothing is changed
    for other in (SimpleNamespace(option=SimpleNamespace(numprocesses=None, dist="no"),
                                  pluginmanager=SimpleNamespace(hasplugin=lambda name: False)),
                  SimpleNamespace(option=SimpleNamespace(numprocesses=None, dist="no"), workerinput={},
                                  pluginmanager=SimpleNamespace(hasplugin=lambda name: True))):
        mod.pytest_cmdline_main(other)
        assert (other.option.numprocesses, other.option.dist) == (None, "no")
