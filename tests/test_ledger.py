"""The privacy ledger: immutable events, budget refusals across runs, a verified hash chain, a private file."""

from __future__ import annotations

import json
import os
import stat

import pytest

from textdp.accounting.ledger import GENESIS, LedgerEvent, PrivacyLedger
from textdp.errors import ParameterError


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """The ledgers' anchors go to this test's own textdp state, not the user's cache."""
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))


def _ledger(tmp_path):
    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    led.charge({"a": (2.0, 0.0), "b": (1.0, 1e-6)}, mechanism="dp-mlm", unit="sentence", budget=10.0)
    led.charge({"a": (3.0, 0.0)}, mechanism="dp-prompt", unit="document", budget=10.0)
    return led


def test_spend_is_summed_per_document_across_runs_and_events_are_frozen(tmp_path):
    led = _ledger(tmp_path)
    again = PrivacyLedger(led.path)  # a later run reads the same file
    spent = again.spent()
    assert (spent["a"].releases, spent["a"].epsilon, spent["b"].delta) == (2, 5.0, 1e-6)
    ev = again.events()[0]
    with pytest.raises(AttributeError):
        ev.epsilon = 0.0  # type: ignore[misc]
    assert [e.mechanism for e in again.events()] == ["dp-mlm", "dp-mlm", "dp-prompt"]


def test_over_budget_release_is_refused_whole_and_nothing_is_recorded(tmp_path):
    led = _ledger(tmp_path)
    before = led.path.read_bytes()
    with pytest.raises(ParameterError, match="budget 10 would be exceeded for 1 document") as exc:
        led.charge({"a": (6.0, 0.0), "c": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=10.0)
    assert "\n" not in str(exc.value)
    assert led.path.read_bytes() == before  # "c" was not charged either
    led.charge({"a": (5.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=10.0)  # exactly the budget: allowed
    assert led.spent()["a"].epsilon == 10.0


def test_file_is_private_and_a_shared_file_is_refused(tmp_path):
    led = _ledger(tmp_path)
    assert stat.S_IMODE(led.path.stat().st_mode) == 0o600
    os.chmod(led.path, 0o644)
    with pytest.raises(ParameterError, match="readable or writable by others"):
        led.events()


@pytest.mark.parametrize("tamper", ["edit", "delete-middle", "swap", "insert", "garbage"])
def test_tampered_ledger_is_refused(tmp_path, tamper):
    led = _ledger(tmp_path)
    lines = led.path.read_text().splitlines()
    if tamper == "edit":
        lines[0] = lines[0].replace('"epsilon": 2.0', '"epsilon": 0.5')
    elif tamper == "delete-middle":
        del lines[1]
    elif tamper == "swap":
        lines[0], lines[1] = lines[1], lines[0]
    elif tamper == "insert":
        row = json.loads(lines[1])
        row["event"]["document"] = "z"
        lines.insert(1, json.dumps(row))
    else:
        lines.append("{not json")
    led.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParameterError, match="was modified: line"):
        led.spent()
    with pytest.raises(ParameterError, match="was modified"):
        led.charge({"q": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=None)


def test_head_and_event_validation(tmp_path):
    led = PrivacyLedger(tmp_path / "l.jsonl")
    assert led.head() == GENESIS and led.spent() == {}
    led.charge({"a": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=None)
    assert led.head() != GENESIS and led.head() == json.loads(led.path.read_text())["hash"]
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ParameterError):
            LedgerEvent("a", "m", bad, 0.0, "sentence", "rewrite", "t")
    with pytest.raises(ParameterError, match="budget must be"):
        led.charge({"a": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=-1.0)
