"""Issue 27 section 3: the next round of first-contact traps of the command line.

Each test fails on a779fc6: ``train-rewriter`` stopped before its first checkpoint could not be resumed (and said
"nothing was kept" beside config.json and vocab.txt); ``--engine single`` read a Parquet file as text; ``evaluate``
worked for minutes before saying it needed [eval]; ``-o file/out.jsonl`` said "File exists"; a run refused for an
unwritable output folder left an "interrupted" run in the cache; ``--param`` errors hid the value or listed
epsilon and seed; UTF-16 was "byte 0xff"; ``rewrite --help`` cut option names at 80 columns; there was no ``-h``,
``-V`` or completion; and ``textdp --version`` imported scipy.
"""

from __future__ import annotations

import json
import signal

import pytest
from typer.testing import CliRunner

from cli_checks import one_error
from textdp.cli import app

runner = CliRunner()


# -- item 1: train-rewriter interrupted before its first checkpoint resumes ------------------------------------------
ANIMALS = ["cat", "dog", "horse", "bird", "fox", "cow", "sheep"]
PLACES = ["garden", "river", "house", "field", "forest", "barn"]
TOY = [f"The {a} ran to the {p} and slept there." for a in ANIMALS for p in PLACES]
TINY = ["--vocab-size", "40", "--encoder-hidden", "8", "--latent", "8", "--decoder-hidden", "16",
        "--max-length", "12", "--batch-size", "16", "--epochs", "2", "--seed", "1234567", "--threads", "1", "-q"]


def test_train_rewriter_stopped_before_its_first_checkpoint_resumes(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import textdp.generation.training as training

    corpus = tmp_path / "train.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in TOY))
    real = training.train_rewriter
    threads = torch.get_num_threads()

    def interrupted(*args, **kwargs):  # 3 steps per epoch, one checkpoint per epoch: step 1 is before the first
        def on_step(step):
            if step == 1:
                signal.raise_signal(signal.SIGTERM)
        return real(*args, **{**kwargs, "on_step": on_step})

    out = tmp_path / "m"
    try:
        with monkeypatch.context() as m:
            m.setattr(training, "train_rewriter", interrupted)
            res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])
        assert res.exit_code == 143, res.output
        assert "nothing was kept" not in res.output, res.output  # config.json and vocab.txt are there
        assert "checkpoint.pt holds step 0 (the start of the run)" in res.output, res.output
        assert "run the same command again" in res.output and (out / "checkpoint.pt").exists()
        res = runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(out), *TINY])  # the promised resume
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        assert not summary["stopped_early"] and summary["steps"] == 6 and not (out / "checkpoint.pt").exists()
        alone = tmp_path / "alone"  # the same model as a run that was never interrupted
        assert runner.invoke(app, ["train-rewriter", str(corpus), "-o", str(alone), *TINY]).exit_code == 0
        a = torch.load(out / "model.pt", weights_only=True)
        b = torch.load(alone / "model.pt", weights_only=True)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    finally:
        torch.set_num_threads(threads)
