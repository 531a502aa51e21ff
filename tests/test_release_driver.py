"""The one release driver (textdp.release.release) and ``--ledger/--budget`` on ``textdp obfuscate`` (issue 31).

A release is charged to the ledger once, after every unit is validated and before any noise is drawn; a charge
past the budget is refused with a one-line error and nothing is written (no release, no settings, no private
report) nor recorded. The same holds from Python and from the command line, and ``textdp ledger show`` lists
what ``obfuscate`` spent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from textdp.accounting.ledger import PrivacyLedger
from textdp.cli import app
from textdp.embeddings import load_embeddings, output_vocabulary
from textdp.errors import ParameterError, ParameterTypeError, UnrecordedSpendWarning
from textdp.mechanisms import get
from textdp.release import release

DOCS = [{"id": "a", "text": "The quick brown fox jumps over the lazy dog near the river bank."},
        {"id": "b", "text": "Stocks fell sharply on Monday as investors worried about interest rates."}]


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Ledger anchors in a private state of this test (never the user's)."""
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def emb():
    return output_vocabulary(load_embeddings(vocab_size=20000), "full", "english")


def _write(path: Path, docs: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _nothing_written(folder: Path, *names: str) -> bool:
    return not any((folder / n).exists() for n in names) and not list(folder.glob(".*.tmp"))


def test_python_driver_charges_each_id_its_units_and_refuses_past_the_budget(tmp_path, emb):
    """cmp is per word: a document spends its protected words' count; a bag (earth-movers) epsilon*N per document."""
    led = tmp_path / "private" / "ledger.jsonl"
    cmp = get("cmp", epsilon=2.0, embeddings=emb, seed=1)
    words = [len(cmp.fit().tokens(d["text"])) for d in DOCS]
    s = release(cmp, [d["text"] for d in DOCS], tmp_path / "out.jsonl", ids=["a", "b"], ledger=led)
    assert s.charged == 2 and s.records == 2 and s.guarantee.unit == "word"
    spent = PrivacyLedger(led).spent()
    assert spent["a"].epsilon == pytest.approx(2.0 * words[0]) and spent["b"].epsilon == pytest.approx(2.0 * words[1])
    assert {e.command for e in PrivacyLedger(led).events()} == {"release"}
    emp = get("earth-movers", epsilon=1.0, size=4, embeddings=emb, seed=1)
    s2 = release(emp, [DOCS[0]["text"]], tmp_path / "bag.jsonl", ids=["a"], ledger=led)
    assert s2.guarantee.unit == "document"
    assert s2.guarantee.charge(1).epsilon == 4.0  # epsilon*N per unit of distance between documents (issue 40)
    assert PrivacyLedger(led).spent()["a"].epsilon == pytest.approx(2.0 * words[0] + 4.0)
    before = led.read_bytes()
    with pytest.raises(ParameterError, match="privacy budget 10 would be exceeded"):
        release(cmp, [DOCS[0]["text"]], tmp_path / "over.jsonl", ids=["a"], ledger=led, budget=10.0,
                private_report=tmp_path / "private" / "over-report.jsonl")
    assert led.read_bytes() == before  # nothing recorded
    assert _nothing_written(tmp_path, "over.jsonl", "over.jsonl.settings.json", "private/over-report.jsonl")


def test_python_driver_writes_records_settings_and_private_report(tmp_path, emb):
    inp = _write(tmp_path / "in.jsonl", DOCS)
    mech = get("cmp", epsilon=10.0, embeddings=emb, seed=3)
    s = release(mech, [inp], tmp_path / "out.jsonl", private_report=tmp_path / "report.jsonl",
                settings={"note": "public"}, command="obfuscate")
    recs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"] and s.records == 2 and s.charged == 0
    settings = json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert settings == dict(s.settings) and settings["note"] == "public" and settings["command"] == "obfuscate"
    assert settings["guarantee"]["statement"] and str(inp) not in json.dumps(settings)  # no input path
    report = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text().splitlines()]
    assert [r["source"] for r in report] == [f"{inp}:1", f"{inp}:2"]  # the private report names the sources


def test_python_driver_refuses_bad_input_in_one_line(tmp_path, emb):
    mech = get("cmp", epsilon=1.0, embeddings=emb)
    with pytest.raises(ParameterTypeError, match="a single str is ambiguous"):
        release(mech, "some text", tmp_path / "out.jsonl")
    with pytest.raises(ParameterError, match="--budget needs --ledger"):
        release(mech, ["a text"], tmp_path / "out.jsonl", budget=3.0)
    with pytest.raises(ParameterError, match="keep it out of the output's folder"):
        release(mech, ["a text"], tmp_path / "out.jsonl", ledger=tmp_path / "ledger.jsonl")
    assert not list(tmp_path.iterdir())


def test_obfuscate_charges_the_ledger_and_refuses_over_budget_with_exit_2(tmp_path):
    inp = _write(tmp_path / "in.jsonl", DOCS)
    led = tmp_path / "private" / "ledger.jsonl"
    runner = CliRunner()
    base = ["obfuscate", str(inp), "-e", "0.3", "-n", "5", "-k", "20000", "--ledger", str(led), "--budget", "2"]
    first = runner.invoke(app, [*base, "-o", str(tmp_path / "one.jsonl")])
    assert first.exit_code == 0, first.output
    shown = runner.invoke(app, ["ledger", "show", str(led), "--json"])
    assert shown.exit_code == 0, shown.output
    docs = json.loads(shown.stdout)["documents"]
    # the bag's stated epsilon*N (0.3 * 5) per unit of distance between documents, not epsilon (issue 40)
    assert docs["a"]["releases"] == 1 and docs["a"]["epsilon"] == pytest.approx(1.5)
    assert {e.command for e in PrivacyLedger(led).events()} == {"obfuscate"}
    before = led.read_bytes()
    second = runner.invoke(app, [*base, "-o", str(tmp_path / "two.jsonl"), "--private-report",
                                 str(tmp_path / "private" / "two.jsonl")])
    assert second.exit_code == 2 and "privacy budget 2 would be exceeded" in second.output
    assert len(second.output.strip().splitlines()) == 1
    assert led.read_bytes() == before
    assert _nothing_written(tmp_path, "two.jsonl", "two.jsonl.settings.json", "private/two.jsonl")
    bad = runner.invoke(app, ["obfuscate", str(inp), "-e", "3", "-n", "5", "--budget", "3",
                              "-o", str(tmp_path / "three.jsonl")])
    assert bad.exit_code == 2 and "--budget needs --ledger" in bad.output


THEMES = ["president press economy inflation markets investors", "farmer apples pears market river harvest",
          "football team match season fans training", "music band concert guitar songs album"]
#: a fast ``textdp topics`` run (no sampling: a supplied sensitivity), as in test_topics_hostile.py
TOPICS_FAST = ["--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2", "--topics", "2", "--keywords", "2",
               "--sensitivity", "0.5", "--no-cache", "-q", "--seed", "1", "-e", "1"]


def test_topics_charges_the_ledger_and_refuses_over_budget_with_exit_2(tmp_path):
    """One topics release costs every user its epsilon (unit user), recorded under the release's record id."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"{THEMES[i % 4]} {THEMES[i // 4 % 4].split()[0]}",
                                          "author": f"u{i % 5}"}) + "\n" for i in range(40)))
    led = tmp_path / "private" / "ledger.jsonl"
    runner = CliRunner()
    base = ["topics", str(corpus), *TOPICS_FAST, "--ledger", str(led), "--budget", "1.1"]
    first = runner.invoke(app, [*base, "-o", str(tmp_path / "one.json")])
    assert first.exit_code == 0, first.output
    (event,) = PrivacyLedger(led).events()
    assert (event.document, event.command, event.unit, event.epsilon) == ("topics", "topics", "user", 1.0)
    record = json.loads((tmp_path / "one.json").read_text())
    assert record["id"] == "topics" and record["epsilon"] == 1.0
    shown = runner.invoke(app, ["ledger", "show", str(led)])
    assert shown.exit_code == 0 and "topics" in shown.stdout
    before = led.read_bytes()
    second = runner.invoke(app, [*base, "-o", str(tmp_path / "two.json"), "--private-report",
                                 str(tmp_path / "private" / "two.json")])
    assert second.exit_code == 2 and "privacy budget 1.1 would be exceeded" in second.output
    assert led.read_bytes() == before
    assert _nothing_written(tmp_path, "two.json", "two.json.settings.json", "private/two.json")
    beside = runner.invoke(app, ["topics", str(corpus), *TOPICS_FAST, "-o", str(tmp_path / "three.json"),
                                 "--ledger", str(tmp_path / "ledger.jsonl")])
    assert beside.exit_code == 2 and "keep it out of the output's folder" in beside.output


def test_transform_without_a_ledger_warns_at_every_call(emb):
    mech = get("cmp", epsilon=5.0, embeddings=emb, seed=0)
    for _ in range(2):  # each call draws fresh noise: each is a new release
        with pytest.warns(UnrecordedSpendWarning, match="no ledger recorded it"):
            mech.transform([DOCS[0]["text"]])


def test_transform_charges_the_ledger_it_is_given_through_a_cloned_pipeline(tmp_path, emb):
    """scikit-learn clones the estimator (cross_val_score, grid search): the clone charges the same ledger."""
    from sklearn.base import clone
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline

    led = PrivacyLedger(tmp_path / "private" / "ledger.jsonl")
    mech = get("earth-movers", epsilon=0.5, size=3, embeddings=emb, seed=0).set_ledger(led, budget=4.0)
    pipe = clone(make_pipeline(mech, CountVectorizer()))
    texts = [d["text"] for d in DOCS]
    assert pipe.fit_transform(texts).shape[0] == 2  # no warning (filterwarnings=error): the ledger records it
    spent = led.spent()
    assert len(spent) == 2 and all(s.epsilon == pytest.approx(1.5) for s in spent.values())  # epsilon * N
    assert not any(d["text"] in json.dumps(list(spent)) for d in DOCS) and all(k.startswith("text:") for k in spent)
    pipe.transform(texts[:1])  # the same text again: its key adds up
    assert sorted(s.epsilon for s in led.spent().values()) == pytest.approx([1.5, 3.0])
    before = led.path.read_bytes()
    with pytest.raises(ParameterError, match="privacy budget 4 would be exceeded"):
        pipe.transform(texts[:1])
    assert led.path.read_bytes() == before


def test_partitioned_obfuscate_charges_the_ledger_once_before_any_part(tmp_path):
    """--engine local: each record id is charged before the first part file; over budget, no part is written."""
    inp = _write(tmp_path / "in.jsonl", DOCS)
    led = tmp_path / "private" / "ledger.jsonl"
    runner = CliRunner()
    base = ["obfuscate", str(inp), "-e", "2", "--mechanism", "cmp", "-k", "20000", "--engine", "local",
            "--workers", "1", "--ledger", str(led), "--budget", "30"]
    first = runner.invoke(app, [*base, "-o", str(tmp_path / "one")])
    assert first.exit_code == 0, first.output
    spent = PrivacyLedger(led).spent()
    words = [len(r["text"].split()) for f in sorted((tmp_path / "one").glob("part-*"))
             for r in map(json.loads, f.read_text().splitlines())]
    assert sorted(spent) == ["a", "b"] and sum(s.epsilon for s in spent.values()) == pytest.approx(2.0 * sum(words))
    assert {e.command for e in PrivacyLedger(led).events()} == {"obfuscate"}
    before = led.read_bytes()
    second = runner.invoke(app, [*base, "-o", str(tmp_path / "two")])
    assert second.exit_code == 2 and "privacy budget 30 would be exceeded" in second.output
    assert led.read_bytes() == before
    assert not (tmp_path / "two").exists() or not any((tmp_path / "two").iterdir())


def test_python_driver_on_the_partitioned_engine_charges_the_ledger_once(tmp_path, emb):
    """release(engine="local"): the corpus engine charges before the first part; a resume charges nothing."""
    inp = _write(tmp_path / "in.jsonl", DOCS)
    led = tmp_path / "private" / "ledger.jsonl"
    mech = get("earth-movers", epsilon=0.5, size=4, embeddings=emb, seed=5)  # charged epsilon * N = 2 a document
    s = release(mech, [inp], tmp_path / "out", engine="local", ledger=led, budget=3.0)
    assert s.charged == 2 and s.records == 2 and s.guarantee.unit == "document"
    assert sorted(PrivacyLedger(led).spent()) == ["a", "b"] and (tmp_path / "out" / "settings.json").exists()
    with pytest.raises(ParameterError, match="privacy budget 3 would be exceeded"):
        release(mech, [inp], tmp_path / "again", engine="local", ledger=led, budget=3.0)
    assert not (tmp_path / "again").exists() or not any((tmp_path / "again").iterdir())
    with pytest.raises(ParameterError, match="reads files"):
        release(mech, [DOCS[0]["text"]], tmp_path / "texts", engine="local")
