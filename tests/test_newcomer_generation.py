"""Issue 23 items 3, 14, 15 and issue 19 item 5: model folders that are verified, bounded training, honest cards.

Each test fails on b4f2b11: a damaged model.pt gave a traceback and ``train-rewriter -o`` on it said "already holds
this trained model"; there was no --max-steps/--max-minutes; an interrupted run said "no output was written" beside
a checkpoint; ``rewrite --mechanism ae-dp`` ran an ER-AE model; the card held the seed and the file names, and
rewrite settings named the model by a digest of the training data.
"""

from __future__ import annotations

import json
import signal

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from textdp.cli import app
from textdp.generation.rewriter import Rewriter
from textdp.generation.training import TrainingSettings, train_rewriter
from textdp.generation.vocab import segment_text

ANIMALS = ["cat", "dog", "horse", "bird", "fox", "cow", "sheep"]
PLACES = ["garden", "river", "house", "field", "forest", "barn"]
TOY = [f"The {a} ran to the {p} and slept there." for a in ANIMALS for p in PLACES]
TINY = ["--vocab-size", "40", "--encoder-hidden", "8", "--latent", "8", "--decoder-hidden", "16",
        "--max-length", "12", "--batch-size", "16", "--epochs", "2", "--seed", "1234567", "--threads", "1", "-q"]

runner = CliRunner()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "secret-training-file.jsonl"
    p.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TOY)))
    return p


@pytest.fixture(scope="module")
def model(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("m") / "model"
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), "--public", *TINY])
    assert res.exit_code == 0, res.output
    return out


def _copy(src, dst):
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def _one_error(res, *needles):
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in res.output, res.output
    for n in needles:
        assert n in lines[0], res.output


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing", "card"])
def test_a_damaged_model_folder_is_one_line_and_never_already_trained(tmp_path, corpus, model, damage):
    bad = _copy(model, tmp_path / "bad")
    pt = bad / "model.pt"
    if damage == "truncated":
        pt.write_bytes(pt.read_bytes()[: pt.stat().st_size // 2])
    elif damage == "garbage":
        pt.write_bytes(b"\x00garbage" * 100)
    elif damage == "missing":
        pt.unlink()
    else:
        (bad / "card.json").write_text("{not json")
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran to the river.")
    res = runner.invoke(app, ["rewrite", str(bad), str(inp), "-e", "3", "-o", str(tmp_path / "o.jsonl")])
    _one_error(res, "card.json" if damage == "card" else "model.pt", "train")
    again = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(bad), "--public", *TINY])
    assert again.exit_code == 2 and "already holds this trained model" not in again.output, again.output
    assert "damaged" in again.output


def test_ae_dp_refuses_an_er_ae_model_and_er_ae_a_reconstruction_model(tmp_path, corpus, model):
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran to the river.")
    res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "--mechanism", "ae-dp",
                              "-o", str(tmp_path / "o.jsonl")])
    _one_error(res, "--objective reconstruction", "er-ae")
    recon = tmp_path / "recon"
    flags = [*TINY[:-1], "--max-steps", "1", "-q"]
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(recon), "--objective", "reconstruction",
                              *flags])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["rewrite", str(recon), str(inp), "-e", "3", "-o", str(tmp_path / "o.jsonl")])
    _one_error(res, "--objective er-ae")
    res = runner.invoke(app, ["rewrite", str(recon), str(inp), "-e", "3", "--mechanism", "ae-dp",
                              "-o", str(tmp_path / "o.jsonl"), "-q"])
    assert res.exit_code == 0, res.output


def test_card_names_neither_seed_nor_files_unless_asked_and_settings_hold_no_data_digest(tmp_path, corpus, model):
    card_text = (model / "card.json").read_text()
    card = json.loads(card_text)
    assert "secret-training-file" not in card_text and "1234567" not in card_text
    assert "seed" not in card["training"] and card["files"]["model.pt"]
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran to the river.")
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "o.jsonl.settings.json").read_text())
    assert settings["model"] == card["model_id"] and card["run_key"] not in json.dumps(settings)
    named = tmp_path / "named"
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(named), "--card-names-data",
                              *TINY[:-1], "--max-steps", "1", "-q"])
    assert res.exit_code == 0, res.output
    named_card = json.loads((named / "card.json").read_text())
    assert "secret-training-file.jsonl" in named_card["data"]["description"]
    assert named_card["training"]["seed"] == 1234567


def test_a_step_budget_ends_with_a_usable_model_and_the_same_command_continues(tmp_path, corpus):
    out = tmp_path / "m"
    args = ["train-rewriter", str(corpus), "-o", str(out), *TINY, "--max-steps", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 2 and summary["stopped_early"]
    assert "usable model" in res.output and (out / "checkpoint.pt").exists()
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["stopped_early"] and card["training"]["steps"] == 2
    Rewriter(out)  # loads: a usable model
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])  # no budget: finish it
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert res.exit_code == 0 and summary["resumed_from_step"] == 2 and not summary["stopped_early"]
    assert summary["steps"] == card["training"]["planned_steps"] and not (out / "checkpoint.pt").exists()
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])
    assert json.loads(res.stdout.strip().splitlines()[-1])["already_trained"]


def test_a_time_budget_ends_with_a_usable_model(tmp_path, corpus):
    out = tmp_path / "m"
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY, "--max-minutes", "1e-9"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 1 and summary["stopped_early"]
    assert "time budget" in json.loads((out / "card.json").read_text())["training"]["stopped_early"]["reason"]
    Rewriter(out)


def test_a_signal_says_what_the_checkpoint_holds(tmp_path, corpus, monkeypatch):
    import textdp.generation.training as training

    out = tmp_path / "m"
    real = training.train_rewriter

    def interrupted(*args, **kwargs):
        def on_step(step):
            if step == 5:  # 3 steps per epoch: the last checkpoint is the end of epoch 1
                signal.raise_signal(signal.SIGTERM)
        return real(*args, **{**kwargs, "on_step": on_step, "checkpoint_every": 100})

    monkeypatch.setattr(training, "train_rewriter", interrupted)
    res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])
    assert res.exit_code == 143, res.output
    assert "no output was written" not in res.output and "checkpoint.pt holds step 3" in res.output
    assert "run the same command again" in res.output and (out / "checkpoint.pt").exists()


def test_training_api_budget_arguments_are_checked(tmp_path, glove):
    segs = [s for t in TOY for s in segment_text(t, 12)]
    settings = TrainingSettings(vocab_size=40, encoder_hidden=8, latent=8, decoder_hidden=16, max_length=12,
                                batch_size=16, epochs=1, seed=1)
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError):
        train_rewriter(segs, tmp_path / "m", glove, settings, data_description="toy", max_minutes=float("nan"))
    with pytest.raises(ParameterError):
        train_rewriter(segs, tmp_path / "m", glove, settings, data_description="toy", max_steps=0)


def test_no_output_replaces_a_model_file_or_a_training_file(tmp_path, corpus, model):
    inp = tmp_path / "in.txt"
    inp.write_text("The cat ran to the river.")
    before = (model / "vocab.txt").read_bytes()
    res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "-o", str(model / "vocab.txt"), "--force"])
    _one_error(res, "is the input file", "--force never replaces an input")
    res = runner.invoke(app, ["rewrite", str(model), str(inp), "-e", "3", "-o", str(tmp_path / "o.jsonl"),
                              "--private-report", str(model / "model.pt"), "--force"])
    _one_error(res, "--private-report", "is the input file")
    assert (model / "vocab.txt").read_bytes() == before
    folder = tmp_path / "m"
    folder.mkdir()
    train = folder / "vocab.txt"  # a training file where the model would write its vocabulary
    train.write_text(corpus.read_text())
    res = runner.invoke(app, ["train-rewriter", str(train), "-o", str(folder), "--input-format", "jsonl", *TINY])
    _one_error(res, "vocab.txt", "is the input file")
    assert train.read_text() == corpus.read_text()
