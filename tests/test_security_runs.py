"""Issue 28, section 3: ``runs clean --all`` refuses a symlinked or foreign-owned state root.

On a779fc6 a ``runs/`` that was a link to a project folder was followed, and ``runs clean --all``
deleted every folder in the project.
"""

from __future__ import annotations

import os

from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()


def _project(tmp_path):
    project = tmp_path / "my-project"
    for name in ("src", "data", "notes"):
        (project / name).mkdir(parents=True, mode=0o700)
        (project / name / "keep.txt").write_text("mine")
    project.chmod(0o700)
    return project


def test_runs_clean_all_refuses_a_symlinked_runs_folder(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    project = _project(tmp_path)
    (cache / "runs").symlink_to(project)
    for args in (["runs", "clean", "--all"], ["runs", "clean", "src"], ["runs", "list"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith("error:") and len(res.stderr.strip().splitlines()) == 1
        assert "is a symbolic link" in res.stderr
    assert sorted(p.name for p in project.iterdir()) == ["data", "notes", "src"]
    assert all((project / n / "keep.txt").read_text() == "mine" for n in ("src", "data", "notes"))
    # and the same holds for links inside a real runs folder, and a runs folder another user owns
    (cache / "runs").unlink()
    _links_inside_are_skipped(tmp_path / "c2", project, monkeypatch)
    if os.geteuid() == 0:
        _a_foreign_runs_folder_is_refused(tmp_path / "c3", monkeypatch)


def _a_foreign_runs_folder_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    runs = cache / "runs"
    (runs / "0123abcd").mkdir(parents=True, mode=0o700)
    runs.chmod(0o700)
    os.chown(runs, 65534, 65534)
    res = runner.invoke(app, ["runs", "clean", "--all"])
    assert res.exit_code == 2 and "owned by another user" in res.stderr, res.output
    assert (runs / "0123abcd").is_dir()


def _links_inside_are_skipped(cache, project, monkeypatch):
    (cache / "runs" / "abandoned").mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    (cache / "runs").chmod(0o700)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    (cache / "runs" / "looks-like-a-run").symlink_to(project)
    res = runner.invoke(app, ["runs", "clean", "--all"])
    assert res.exit_code == 0, res.output
    assert "abandoned" in res.stderr and "looks-like-a-run" not in res.stderr
    assert not (cache / "runs" / "abandoned").exists()
    assert sorted(p.name for p in project.iterdir()) == ["data", "notes", "src"]
