"""Issue 39 §4: ``--seed`` is visible to every user in ``ps``; ``--seed-file`` and ``TEXTDP_SEED`` are not.

Every command that takes ``--seed`` also takes ``--seed-file PATH`` (a file of yours, mode 600, every folder above
it checked) and reads ``$TEXTDP_SEED`` (``/proc/PID/environ`` is readable by its owner and root only); its help says
that ``--seed`` shows in ``ps``. The three give the same stream; more than one is refused.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from textdp.cli import COMMAND_MODULES, app, load_module_commands

runner = CliRunner()


def _seeded_commands():
    for module in COMMAND_MODULES:
        for name, cmd in load_module_commands(module).items():
            for sub_name, sub in (getattr(cmd, "commands", None) or {name: cmd}).items():
                if any(p.name == "seed" and "--seed" in p.opts for p in sub.params):
                    yield sub_name, sub


def test_every_command_with_seed_takes_a_seed_file_and_says_seed_shows_in_ps():
    names = []
    for name, cmd in _seeded_commands():
        names.append(name)
        (seed,) = [p for p in cmd.params if p.name == "seed"]
        assert "visible to every user of this machine (ps" in seed.help, name
        assert any(p.opts == ["--seed-file"] for p in cmd.params), name
        assert "TEXTDP_SEED" in seed.help, name
    assert {"obfuscate", "topics", "rewrite", "audit", "calibrate", "train-rewriter", "topics-report"} <= set(names)


def _obfuscate(*args, env=None):
    res = runner.invoke(app, ["obfuscate", "-", "-e", "5", "-n", "4", "--format", "text", *args],
                        input="the river boat sailed past the old harbour\n", env=env)
    return res


def test_seed_file_and_environment_give_the_same_release_as_seed(tmp_path, monkeypatch):
    monkeypatch.delenv("TEXTDP_SEED", raising=False)
    by_option = _obfuscate("--seed", "7")
    assert by_option.exit_code == 0, by_option.output
    seed = tmp_path / "seed"
    seed.write_text("7\n")
    seed.chmod(0o600)
    by_file = _obfuscate("--seed-file", str(seed))
    by_env = _obfuscate(env={"TEXTDP_SEED": "7"})
    assert by_file.stdout == by_env.stdout == by_option.stdout


@pytest.mark.parametrize("case", ["readable", "both", "not-a-number", "bad-env"])
def test_a_seed_source_that_is_wrong_is_one_line_and_exit_2(tmp_path, case):
    seed = tmp_path / "seed"
    seed.write_text("7\n" if case != "not-a-number" else "seven\n")
    seed.chmod(0o644 if case == "readable" else 0o600)
    args, env, expected = ["--seed-file", str(seed)], None, "must hold one whole number"
    if case == "readable":
        expected = "can be read by others (mode 644)"
    elif case == "both":
        args, expected = [*args, "--seed", "3"], "give the seed once: --seed and --seed-file"
    elif case == "bad-env":
        args, env, expected = [], {"TEXTDP_SEED": "0x7"}, "TEXTDP_SEED must be a whole number"
    res = _obfuscate(*args, env=env)
    assert res.exit_code == 2 and expected in res.output and len(res.output.strip().splitlines()) == 1, res.output
