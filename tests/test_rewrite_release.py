"""The sentence family on the partitioned engines goes through the one driver (issue 31).

``textdp.release.release(mechanism, ..., engine="local"|"dask")`` runs er-ae, ae-dp, syntf-sentence and
random-sentence partition by partition: the same files as the one-process path (records, settings, private
report), the ledger charged once before anything is generated, a killed run resumed without a second charge
and without redoing finished partitions; ``textdp rewrite`` only parses and prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import tiny_model
from typer.testing import CliRunner

pytest.importorskip("torch", reason="sentence rewriting needs the [generation] extra")

from textdp.accounting.ledger import PrivacyLedger
from textdp.cli import app
from textdp.engines.workdir import list_runs
from textdp.errors import ParameterError
from textdp.mechanisms import get
from textdp.release import release

DOCS = [{"id": f"d{i}", "text": t} for i, t in enumerate([
    "The cat ran to the garden. A dog slept there.", "The fox saw a cow near the river!",
    "A bird sat in the field.", "The horse ran to the barn and slept.", "The sheep saw a cat.",
])]


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Ledger anchors and default work directories in a private state of this test (never the user's)."""
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def model(tmp_path_factory, glove):
    return tiny_model(tmp_path_factory.mktemp("m") / "model", glove)


@pytest.fixture()
def inp(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _keys(rows: list[dict]) -> list[tuple[str, ...]]:
    return [tuple(sorted(r)) for r in rows]


@pytest.mark.parametrize("name", ["er-ae", "syntf-sentence"])
def test_the_partitioned_release_has_the_layout_of_the_single_one(tmp_path, model, inp, name):
    mech = get(name, epsilon=3.0, model=str(model))
    single = release(mech, [inp], tmp_path / "single.jsonl", private_report=tmp_path / "p" / "single.json",
                     private_details={}, seed=4, empty="empty", command="rewrite")
    parted = release(mech, [inp], tmp_path / "local.jsonl", private_report=tmp_path / "p" / "local.json",
                     private_details={}, seed=4, empty="empty", command="rewrite", engine="local", partition_size=2)
    a, b = _records(tmp_path / "single.jsonl"), _records(tmp_path / "local.jsonl")
    assert [r["id"] for r in a] == [r["id"] for r in b] == [d["id"] for d in DOCS]
    assert _keys(a) == _keys(b) and [r["guarantee"] for r in a] == [r["guarantee"] for r in b]
    assert [r["units"] for r in a] == [r["units"] for r in b]
    sa = json.loads((tmp_path / "single.jsonl.settings.json").read_text())
    sb = json.loads((tmp_path / "local.jsonl.settings.json").read_text())
    assert sb == dict(parted.settings) and set(sb) == set(sa) | {"partition_size"}
    assert (sa["engine"], sb["engine"], sb["partition_size"]) == ("single", "local", 2)
    assert {k: v for k, v in sa.items() if k != "engine"} == {k: v for k, v in sb.items()
                                                                if k not in ("engine", "partition_size")}
    ra = json.loads((tmp_path / "p" / "single.json").read_text())
    rb = json.loads((tmp_path / "p" / "local.json").read_text())
    assert set(ra) == set(rb) and _keys(ra["documents"]) == _keys(rb["documents"])
    assert [r["source"] for r in rb["documents"]] == [f"{inp}:{i + 1}" for i in range(len(DOCS))]
    assert [{k: v for k, v in r.items() if k != "output_tokens"} for r in ra["documents"]] == \
        [{k: v for k, v in r.items() if k != "output_tokens"} for r in rb["documents"]]
    assert (single.records, parted.records, parted.guarantee) == (5, 5, single.guarantee)
    # the same seed and partition size give the same release, whatever the partitions' order of completion
    again = release(mech, [inp], tmp_path / "again.jsonl", seed=4, empty="empty", command="rewrite",
                    engine="local", partition_size=2)
    assert again.records == 5 and _records(tmp_path / "again.jsonl") == b
    assert list_runs() == []  # the private state is gone once complete


def test_a_partitioned_release_is_charged_once_and_resumes_without_a_second_charge(tmp_path, model, inp,
                                                                                   monkeypatch):
    mech = get("er-ae", epsilon=2.0, model=str(model))
    led = tmp_path / "private" / "ledger.jsonl"
    work = tmp_path / "work"
    calls: list[int] = []
    import textdp.engines.sentences as sentences  # the engine job, counted below
    job = sentences.rewrite_partition

    def counted(item):
        calls.append(len(item[2]))
        return job(item)

    monkeypatch.setattr(sentences, "rewrite_partition", counted)

    def stop_after_the_first(done: int, total: int) -> None:
        if done >= 2:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C after the first partition

    args = {"ledger": led, "budget": 1e6, "seed": 7, "empty": "empty", "engine": "local", "partition_size": 2,
            "work_dir": work, "command": "rewrite"}
    with pytest.raises(KeyboardInterrupt):
        release(mech, [inp], tmp_path / "out.jsonl", progress=stop_after_the_first, **args)
    assert calls == [2] and not (tmp_path / "out.jsonl").exists()
    charged = PrivacyLedger(led).events()
    segments = {d["id"]: len(mech.units(d["text"])) for d in DOCS}
    g = mech.guarantee()
    assert {e.document: e.epsilon for e in charged} == pytest.approx({k: n * g.epsilon for k, n in segments.items()})
    resumed = release(mech, [inp], tmp_path / "out.jsonl", **args)
    assert calls == [2, 2, 1]  # the finished partition is not rewritten again
    assert resumed.charged == 0 and PrivacyLedger(led).events() == charged  # nor charged again
    release(mech, [inp], tmp_path / "fresh.jsonl", seed=7, empty="empty", engine="local", partition_size=2,
            command="rewrite")
    assert _records(tmp_path / "out.jsonl") == _records(tmp_path / "fresh.jsonl")
    assert not work.exists()  # the run made it, and deleted it with its private state once complete
    # over the budget: refused whole before anything is generated; nothing written, recorded or kept
    before = led.read_bytes()
    with pytest.raises(ParameterError, match="privacy budget .* would be exceeded"):
        release(mech, [inp], tmp_path / "over.jsonl", **{**args, "budget": max(segments.values()) * g.epsilon * 1.5})
    assert led.read_bytes() == before and calls == [2, 2, 1, 2, 2, 1]
    assert not (tmp_path / "over.jsonl").exists() and not work.exists()


def test_the_partitioned_release_refuses_what_it_cannot_split_in_one_line(tmp_path, model, inp):
    mech = get("random-sentence", epsilon=2.0, model=str(model))
    with pytest.raises(ParameterError, match="writes a file it can resume"):
        release(mech, [inp], None, engine="local")
    with pytest.raises(ParameterError, match="int seed or none"):
        release(mech, [inp], tmp_path / "o.jsonl", engine="local", seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="partition_size applies to the sentence family"):
        release(get("cmp", epsilon=1.0, embeddings=None), [inp], tmp_path / "o.jsonl", partition_size=3)
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n")
    with pytest.raises(ParameterError, match="every input document is empty"):
        release(mech, [blank], tmp_path / "o.jsonl", engine="local")
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.slow
def test_the_driver_on_dask_equals_local(tmp_path, model, inp):
    """Partition i draws from spawn(seed, P)[i] in a Dask worker as in this process: the same release."""
    pytest.importorskip("distributed", reason="the dask engine needs the [dask] extra")
    from textdp.engines.dask import DaskBackend

    mech = get("er-ae", epsilon=4.0, model=str(model))
    local = release(mech, [inp], tmp_path / "local.jsonl", seed=5, engine="local", partition_size=2)
    with DaskBackend(workers=1) as backend:
        dask = release(mech, [inp], tmp_path / "dask.jsonl", seed=5, engine="dask", backend=backend,
                       partition_size=2)
    assert (local.settings["engine"], dask.settings["engine"]) == ("local", "dask")
    assert (tmp_path / "local.jsonl").read_text() == (tmp_path / "dask.jsonl").read_text()


def test_rewrite_param_sets_a_mechanism_parameter_without_an_option(tmp_path, model, inp):
    """``--param KEY=VALUE`` (obfuscate's parser) reaches the class's own fields: er-ae's k has no option."""
    runner = CliRunner()
    out = tmp_path / "k2.jsonl"
    res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "-o", str(out), "--seed", "1",
                              "--param", "k=2", "--work-dir", str(tmp_path / "work"), "-q"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "work").exists()  # the run's private state, deleted once complete
    settings = json.loads((tmp_path / "k2.jsonl.settings.json").read_text())
    assert settings["settings"]["k"] == 2 and "k=2" in settings["guarantee"]["statement"]
    for args, says in (
        (["--param", "bogus=1"], "mechanism 'er-ae' has no parameter 'bogus'; the keys --param takes for er-ae: k"),
        (["--param", "k=abc"], "--param k=abc: k takes a number"),
        (["--param", "seed=3"], "--param seed: give it with its own option --seed"),
        (["--param", "word_fraction=0.5"], "its own option --word-fraction"),
        (["--param", "k"], "--param k: write KEY=VALUE"),
        (["--mechanism", "syntf-sentence", "--param", "k=2"], "none (it has no parameters of its own)"),
        (["--mechanism", "dp-bart", "--param", "k=2"], "the keys --param takes for dp-bart: sampler"),
        (["--mechanism", "dp-bart", "--param", "delta=0.1"], "its own option --delta"),
        (["--param", "k=0"], "k must be"),
    ):
        bad = tmp_path / "bad.jsonl"
        res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "-o", str(bad), *args])
        assert res.exit_code == 2 and says in res.output, (args, res.output)
        assert len(res.output.strip().splitlines()) == 1 and not bad.exists()
