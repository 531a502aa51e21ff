"""The privacy ledger as an attacker would meet it: anchored head, private folder, a lock that cannot hang.

Issue 28 §2. An attacker who could write to the ledger's folder deleted it and the same document
was charged 4 + 4 under a budget of 5; deleting its last lines or the whole file went unnoticed; an
attacker-held ``FILE.lock`` made the victim's charge hang with no message, and the lock file was
opened through links. The tests that need a second local user create one (``useradd``, removed at
the end; skipped with the reason when not root) and run the attacker's steps as that user with the
system Python (stdlib only); the victim is this (root) process, or a child of it when the old code
would hang.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_checks import one_error
from helpers import run_as, second_user, shared_folder
from typer.testing import CliRunner

from textdp.accounting.ledger import LedgerMismatchError, PrivacyLedger
from textdp.cli import app
from textdp.errors import ParameterError

runner = CliRunner()
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Anchors go to this test's own textdp state (never the user's real cache)."""
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))


def _charge(led, eps=4.0, budget=5.0, doc="doc", **kw):
    return led.charge({doc: (eps, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=budget, **kw)


# -- the head is anchored: truncated, replaced, deleted ----------------------------------------------------------
def test_deleted_ledger_is_refused_until_reset_and_show_says_so(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led)
    led.path.unlink()
    with pytest.raises(LedgerMismatchError, match="is missing, but textdp recorded 1 events"):
        _charge(led)  # the old code charged 4 + 4 under a budget of 5 here
    shown = runner.invoke(app, ["ledger", "show", str(led.path)])
    one_error(shown, str(led.path), "is missing", "textdp ledger reset")
    reset = runner.invoke(app, ["ledger", "reset", str(led.path)])
    assert reset.exit_code == 0, reset.output
    assert "now anchored at 0 events" in reset.stdout and "spend of 1 recorded events" in reset.stdout
    assert "may be released again up to the full budget" in reset.stdout
    _charge(led)  # the user said so: a new ledger
    assert led.spent()["doc"].releases == 1


@pytest.mark.parametrize("how", ["drop-last-line", "empty-file", "older-copy", "other-ledger"])
def test_truncated_or_replaced_ledger_is_refused(tmp_path, how):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0, doc="a")
    older = led.path.read_bytes()
    _charge(led, 1.0, doc="b")
    _charge(led, 1.0, doc="c")
    if how == "drop-last-line":
        led.path.write_bytes(b"".join(led.path.read_bytes().splitlines(keepends=True)[:-1]))
        expected = "holds 2 events, but textdp recorded 3"
    elif how == "empty-file":
        led.path.write_bytes(b"")
        expected = "holds 0 events, but textdp recorded 3"
    elif how == "older-copy":
        led.path.write_bytes(older)
        expected = "holds 1 events, but textdp recorded 3"
    else:  # a valid chain of the same length, written elsewhere: every hash verifies, the head differs
        other = PrivacyLedger(tmp_path / "elsewhere" / "ledger.jsonl")
        for d in "xyz":
            _charge(other, 1.0, doc=d)
        led.path.write_bytes(other.path.read_bytes())
        expected = "its event 3 is not the recorded head"
    with pytest.raises(LedgerMismatchError, match=expected) as exc:
        led.spent()
    assert "\n" not in str(exc.value)
    with pytest.raises(LedgerMismatchError):
        _charge(led, 1.0, doc="a", budget=2.0)
    one_error(runner.invoke(app, ["ledger", "show", str(led.path), "--json"]), expected)
    # --new-ledger (the library's new_ledger=True): the user accepts the file as it is, in the same lock
    _charge(led, 1.0, doc="q", budget=2.0, new_ledger=True)
    assert led.spent()["q"].releases == 1


def test_reset_refuses_a_broken_chain_and_says_to_move_it_away(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0, doc="a")
    _charge(led, 1.0, doc="b")
    led.path.write_text(led.path.read_text().replace('"epsilon": 1.0', '"epsilon": 0.1', 1))
    res = runner.invoke(app, ["ledger", "reset", str(led.path)])
    one_error(res, "breaks its hash chain", f"move {led.path} away first")
    led.path.rename(tmp_path / "private" / "broken.jsonl")
    assert runner.invoke(app, ["ledger", "reset", str(led.path)]).exit_code == 0
    assert led.spent() == {}


def test_a_ledger_ahead_of_its_anchor_is_accepted_and_an_unanchored_one_is_adopted(tmp_path, monkeypatch):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0, doc="a")
    before = led.path.read_bytes()
    _charge(led, 1.0, doc="b")
    after = led.path.read_bytes()
    led.path.write_bytes(before)
    led.reset()  # anchored at 1 event
    led.path.write_bytes(after)  # a run stopped between its two writes: more events, the anchored head in place
    assert set(led.spent()) == {"a", "b"}
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "another-cache"))  # a second cache: the anchor is kept
    assert led.state().anchored_events == 1 and set(led.spent()) == {"a", "b"}
    monkeypatch.setenv("TEXTDP_STATE_DIR", str(tmp_path / "fresh-state"))  # the state itself gone: refused ...
    assert led.state().anchored_events is None
    with pytest.raises(LedgerMismatchError, match="holds 2 events but textdp has no anchor .*`textdp ledger adopt "):
        led.spent()
    adopted = runner.invoke(app, ["ledger", "adopt", str(led.path)])  # ... until the user adopts it
    assert adopted.exit_code == 0 and "anchored at 2 events" in adopted.stdout
    _charge(led, 1.0, doc="c")
    assert led.state().anchored_events == 3


def test_anchor_is_private_and_names_no_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTDP_STATE_DIR", str(tmp_path / "state-folder"))
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led)
    folder = tmp_path / "state-folder" / "ledger-anchors"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    by_id, by_path = sorted(folder.iterdir())  # id-<hmac>.json (the head), path-<hmac>.json (which ledger is here)
    for anchor in (by_id, by_path):
        assert stat.S_IMODE(anchor.stat().st_mode) == 0o600
        assert "private" not in anchor.name and str(tmp_path) not in anchor.read_text()
    assert json.loads(by_id.read_text())["events"] == 1
    assert json.loads(by_path.read_text())["ledger"] == json.loads(led.path.read_text())["ledger"]


# -- the folder, the lock --------------------------------------------------------------------------------------------
def test_ledger_folder_is_created_0700_whatever_the_umask(tmp_path):
    mask = os.umask(0)
    try:
        led = PrivacyLedger(tmp_path / "new" / "deeper" / "ledger.jsonl")
        _charge(led)
    finally:
        os.umask(mask)
    for d in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, oct(d.stat().st_mode)
    assert stat.S_IMODE(led.path.stat().st_mode) == 0o600


def test_lock_held_by_another_run_times_out_with_a_message_naming_the_lock_file(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from textdp.accounting.ledger import PrivacyLedger
            with PrivacyLedger({str(led.path)!r})._session(create=True, exclusive=True):
                print("held", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(ParameterError) as exc:
            _charge(PrivacyLedger(led.path, lock_timeout=0.5), 1.0)
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.communicate()
    msg = str(exc.value)
    assert f"{led.path}.lock" in msg and f"process {holder.pid}" in msg and "\n" not in msg
    assert 0.5 <= waited < 10
    assert led.spent()["doc"].releases == 1  # nothing was recorded


def test_symlinked_lock_file_is_refused_and_its_target_never_created(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0)
    target = tmp_path / "chosen-by-someone-else"
    Path(f"{led.path}.lock").unlink()
    os.symlink(target, f"{led.path}.lock")
    with pytest.raises(ParameterError, match="lock file .* is a symbolic link"):
        _charge(led, 1.0)
    assert not target.exists()


def test_symlinked_ledger_file_is_refused(tmp_path):
    real = PrivacyLedger(tmp_path / "private" / "real.jsonl")
    _charge(real, 1.0)
    link = tmp_path / "private" / "ledger.jsonl"
    os.symlink(real.path, link)
    with pytest.raises(ParameterError, match="is a symbolic link"):
        PrivacyLedger(link).spent()


# -- issue 27 §3.6: the file's name in the errors; the input is not a ledger -----------------------------------------
def test_show_names_a_binary_file_and_a_text_file_is_not_a_ledger(tmp_path):
    (tmp_path / "p").mkdir(mode=0o700)
    binary = tmp_path / "p" / "data.parquet"
    binary.write_bytes(b"PAR1\x15\x04\x15\x80\x01\xff\xfe")
    binary.chmod(0o644)  # an input file as usual: said to be no ledger, not "chmod 600 it"
    one_error(runner.invoke(app, ["ledger", "show", str(binary)]), str(binary), "not valid UTF-8", "--ledger")
    text = tmp_path / "p" / "in.jsonl"
    text.write_text(json.dumps({"id": "d1", "text": "hello"}) + "\n")
    text.chmod(0o644)
    one_error(runner.invoke(app, ["ledger", "show", str(text)]), str(text), "is not a textdp ledger")
    assert not (tmp_path / "p" / "in.jsonl.lock").exists()
    one_error(runner.invoke(app, ["ledger", "show", str(tmp_path / "p" / "typo.jsonl")]), "no such ledger file")
    assert not (tmp_path / "p" / "typo.jsonl.lock").exists()  # a read of nothing leaves nothing


@pytest.mark.parametrize("mechanism", ["er-ae", "dp-prompt"])
def test_ledger_equal_to_the_input_is_refused_as_the_input(tmp_path, mechanism):
    (tmp_path / "p").mkdir(mode=0o700)
    inp = tmp_path / "p" / "in.jsonl"
    inp.write_text(json.dumps({"id": "d1", "text": "The cat sat on the mat."}) + "\n")
    inp.chmod(0o600)
    before = inp.read_bytes()
    (tmp_path / "model").mkdir()
    res = runner.invoke(app, ["rewrite", str(tmp_path / "model"), str(inp), "--mechanism", mechanism, "-e", "1",
                              "-o", str(tmp_path / "out" / "o.jsonl"), "--clip=-1,1" if mechanism != "er-ae" else "-q",
                              "--ledger", str(tmp_path / "p" / ".." / "p" / "in.jsonl")])
    one_error(res, "is the input file", "give another path")
    assert inp.read_bytes() == before


# -- as another local user ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def attacker():
    """A throwaway unprivileged user (removed at the end)."""
    with second_user("tdpatk") as user:
        yield user


@pytest.fixture()
def arena():
    """A folder both users can write to, root-owned and sticky like ``/tmp`` (the victim's tmp_path is 0700)."""
    with shared_folder("textdp-ledger-") as root:
        yield root


def test_attacker_cannot_delete_the_ledger_and_double_spend(attacker, arena):
    run_as(attacker, f"import os; os.mkdir({str(arena / 'shared')!r}); os.chmod({str(arena / 'shared')!r}, 0o777)")
    led = PrivacyLedger(arena / "shared" / "ledger.jsonl")
    done, refusals = 0, []
    for _ in range(2):
        try:
            _charge(led)  # 4 under a budget of 5
            done += 1
        except ParameterError as exc:
            refusals.append(str(exc))
        run_as(attacker, f"import os\nif os.path.exists({str(led.path)!r}): os.unlink({str(led.path)!r})")
    assert done == 0, "a release was charged in a folder another user can write to"
    assert all(str(arena / "shared") in r and "owned by another user" in r for r in refusals)


def test_ancestor_owned_by_the_attacker_is_refused(attacker, arena):
    shared = arena / "shared"
    run_as(attacker, f"import os; os.mkdir({str(shared)!r}); os.chmod({str(shared)!r}, 0o777)")
    (shared / "mine").mkdir(mode=0o700)  # the victim's own private folder, below the attacker's
    with pytest.raises(ParameterError) as exc:
        _charge(PrivacyLedger(shared / "mine" / "ledger.jsonl"))
    assert f"the folder {shared} on its path is owned by another user" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert not (shared / "mine" / "ledger.jsonl").exists()


def test_lock_squatted_by_the_attacker_is_refused_without_hanging(attacker, arena, tmp_path):
    shared = arena / "shared"
    lock = shared / "ledger.jsonl.lock"
    squat = run_as(attacker, f"""
        import fcntl, os, time
        os.mkdir({str(shared)!r}); os.chmod({str(shared)!r}, 0o777)
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(120)
    """, wait=False)
    try:
        assert squat.stdout is not None and squat.stdout.readline().strip() == "held"
        victim = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(f"""
                from textdp.accounting.ledger import PrivacyLedger
                from textdp.errors import ParameterError
                try:
                    PrivacyLedger({str(shared / 'ledger.jsonl')!r}).charge({{"d": (1.0, 0.0)}}, mechanism="m",
                                                                           unit="sentence", budget=5.0)
                except ParameterError as exc:
                    print("refused:", exc)
            """)], check=False, capture_output=True, text=True, timeout=60,
            env={**os.environ, "TEXTDP_CACHE_DIR": str(tmp_path / "s")})
    finally:
        squat.kill()
        squat.communicate()
    assert victim.stdout.startswith("refused:") and str(shared) in victim.stdout, victim.stdout + victim.stderr
    assert not (shared / "ledger.jsonl").exists()


# -- the command line: refused, then --new-ledger says what it does ------------------------------------------------
@pytest.fixture(scope="module")
def causal(tmp_path_factory):
    pytest.importorskip("transformers")
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_lm", Path(__file__).resolve().parents[1] / "examples" /
                                                  "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    root = tmp_path_factory.mktemp("lm")
    tiny.build(root / "causal", "causal")
    return root / "causal"


def test_rewrite_refuses_a_truncated_ledger_and_new_ledger_says_what_it_forgets(causal, tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "d1", "text": "the cat sat on the mat ."}) + "\n"
                                       + json.dumps({"id": "d2", "text": "we met at the station ."}) + "\n")
    led = tmp_path / "private" / "ledger.jsonl"

    def rewrite(out, *extra):
        return runner.invoke(app, ["rewrite", str(causal), str(tmp_path / "in.jsonl"), "--mechanism", "dp-prompt",
                                   "-e", "2", "-o", str(tmp_path / out), "--clip=-2,2", "--max-new-tokens", "2", "-q",
                                   "--seed", "1", "--ledger", str(led), "--budget", "6", *extra])

    assert rewrite("a.jsonl").exit_code == 0
    led.write_text("")  # truncated (its mode stays 0600)
    one_error(rewrite("b.jsonl"), "holds 0 events, but textdp recorded 2", "textdp ledger reset")
    assert not (tmp_path / "b.jsonl").exists()
    again = rewrite("c.jsonl", "--new-ledger")
    assert again.exit_code == 0, again.output
    warning = [line for line in again.stderr.splitlines() if line.startswith("warning: --new-ledger")]
    assert len(warning) == 1 and "the spend of 2 recorded events that the file no longer holds is forgotten" in \
        warning[0]
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(led), "--json"]).stdout)
    assert shown["events"] == 2 and shown["documents"]["d1"]["releases"] == 1


# -- issue 39 §4: the anchor outlives the cache, follows a moved ledger, and an unanchored history is refused -------
def test_a_rolled_back_ledger_is_refused_after_a_cache_wipe_or_a_second_cache(tmp_path, monkeypatch):
    import shutil

    from textdp._cache import user_secret

    user_secret()  # the cache exists, its key and all (this module's TEXTDP_CACHE_DIR)
    cache = tmp_path / "state"
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 2.0, doc="a")
    older = led.path.read_bytes()
    _charge(led, 2.0, doc="a")
    shutil.rmtree(cache)  # the cache wiped (rm -rf ~/.cache/textdp, or runs clean and more)
    led.path.write_bytes(older)  # ... and the ledger rolled back to 2 of its 4 spent
    with pytest.raises(LedgerMismatchError, match="holds 1 events, but textdp recorded 2"):
        _charge(led, 2.0, doc="a")  # document a would reach 6 under a budget of 5
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "second-cache"))
    one_error(runner.invoke(app, ["obfuscate", "-", "-e", "1", "-n", "1", "--ledger", str(led.path),
                                  "--budget", "5"], input="river\n"), "holds 1 events, but textdp recorded 2")


def test_a_moved_ledger_is_recognised_and_its_older_copy_refused(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0, doc="a")
    older = led.path.read_bytes()
    _charge(led, 1.0, doc="b")
    moved = PrivacyLedger(tmp_path / "elsewhere" / "moved.jsonl")
    moved.path.parent.mkdir(mode=0o700)
    led.path.rename(moved.path)
    assert set(moved.spent()) == {"a", "b"}  # anchored by its identity, not by its old path
    _charge(moved, 1.0, doc="c")
    copy = PrivacyLedger(tmp_path / "elsewhere" / "copy.jsonl")
    copy.path.write_bytes(older)
    copy.path.chmod(0o600)
    with pytest.raises(LedgerMismatchError, match="holds 1 events, but textdp recorded 3"):
        _charge(copy, 1.0, doc="a")


def test_an_unanchored_ledger_with_history_is_refused_until_adopted(tmp_path, monkeypatch):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    _charge(led, 1.0, doc="a")
    monkeypatch.setenv("TEXTDP_STATE_DIR", str(tmp_path / "wiped-state"))  # the anchors themselves are gone
    res = runner.invoke(app, ["ledger", "show", str(led.path)])
    one_error(res, "holds 1 events but textdp has no anchor", f"textdp ledger adopt {led.path}")
    with pytest.raises(LedgerMismatchError, match="no anchor"):
        _charge(led, 1.0, doc="b")  # never silently accepted
    adopted = runner.invoke(app, ["ledger", "adopt", str(led.path)])
    assert adopted.exit_code == 0, adopted.output
    _charge(led, 1.0, doc="b")
    assert set(led.spent()) == {"a", "b"}
    led.path.write_bytes(b"".join(led.path.read_bytes().splitlines(keepends=True)[:1]))
    one_error(runner.invoke(app, ["ledger", "adopt", str(led.path)]), "holds 1 events, but textdp recorded 2",
              "textdp ledger reset")  # adopt never accepts a rollback: that is reset's job
