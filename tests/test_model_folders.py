"""Model folders: links that leave the folder are refused, a folder link is followed only if yours (issue 28 §3).

Before, symlinked weights, config, tokenizer or the folder itself were followed wherever they
pointed: a file that another user controls (or that changes after the check) was loaded. Now
:func:`textdp.generation.folders.check_model_folder` refuses them in one line, for language
models (``load_language_model``, ``textdp rewrite --mechanism dp-*``) and textdp's own rewriter
models (``load_model_files``). Links inside the folder still work.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from cli_checks import one_error
from helpers import run_as, second_user, shared_folder
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from textdp.cli import app
from textdp.errors import ParameterError
from textdp.generation.hf import load_language_model

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def causal(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    root = tmp_path_factory.mktemp("models")
    tiny.build(root / "causal", "causal")
    return root / "causal"


def _copy(causal, where):
    shutil.copytree(causal, where)
    return where


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json"])
def test_a_file_linked_outside_the_folder_is_refused(causal, tmp_path, name):
    m = _copy(causal, tmp_path / "m")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(m / name, outside / name)
    (m / name).symlink_to(outside / name)  # same bytes: only the link is wrong
    with pytest.raises(ParameterError, match=f"{name} is a link to {outside / name}, outside the folder") as exc:
        load_language_model(str(m), "causal")
    assert "\n" not in str(exc.value) and "cp -rL" in str(exc.value)


def test_links_inside_the_folder_and_your_own_folder_link_are_followed_one_leaving_it_is_not(causal, tmp_path):
    m = _copy(causal, tmp_path / "m")
    (m / "sub").mkdir()
    shutil.move(m / "model.safetensors", m / "sub" / "w.safetensors")
    (m / "model.safetensors").symlink_to("sub/w.safetensors")
    (tmp_path / "link").symlink_to(m)
    lm = load_language_model(str(tmp_path / "link"), "causal")
    assert lm.identity["weights_sha256"]
    n = _copy(m, tmp_path / "n")  # the relative link now points into n/sub; send it out through ..
    (n / "model.safetensors").unlink()
    (n / "model.safetensors").symlink_to("../m/sub/w.safetensors")
    with pytest.raises(ParameterError, match="outside the folder"):
        load_language_model(str(n), "causal")


def test_rewrite_refuses_a_model_folder_whose_weights_leave_it(causal, tmp_path):
    m = _copy(causal, tmp_path / "cli-model")
    (tmp_path / "w").mkdir()
    shutil.move(m / "model.safetensors", tmp_path / "w" / "model.safetensors")
    (m / "model.safetensors").symlink_to(tmp_path / "w" / "model.safetensors")
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "d1", "text": "the cat sat on the mat ."}) + "\n")
    res = runner.invoke(app, ["rewrite", str(m), str(tmp_path / "in.jsonl"), "--mechanism", "dp-prompt", "-e", "2",
                              "-o", str(tmp_path / "out.jsonl"), "--clip=-2,2", "--max-new-tokens", "2", "-q"])
    one_error(res, "model.safetensors is a link to", "outside the folder")
    assert not (tmp_path / "out.jsonl").exists()


def test_rewriter_model_file_linked_outside_is_refused_though_its_hash_matches(tmp_path, glove, monkeypatch):
    from textdp.generation.training import TrainingSettings, load_model_files, train_rewriter
    from textdp.generation.vocab import segment_text

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "state"))
    text = " ".join(f"The {a} saw the {o} near the river." for a in ("cat", "dog", "fox") for o in ("ball", "boat"))
    out = tmp_path / "erae"
    train_rewriter(segment_text(text, 12), out, glove, TrainingSettings(
        seed=1, vocab_size=30, encoder_hidden=8, latent=8, decoder_hidden=8, max_length=12, batch_size=8, epochs=1),
        data_description="toy")
    assert load_model_files(out)[0]["complete"]
    shutil.move(out / "vocab.txt", tmp_path / "vocab.txt")
    (out / "vocab.txt").symlink_to(tmp_path / "vocab.txt")  # the same bytes: the card's hash matches
    with pytest.raises(ParameterError, match="vocab.txt is a link to .*, outside the folder"):
        load_model_files(out)


def test_a_folder_link_owned_by_another_user_is_refused(causal, tmp_path):
    with second_user("tdpmdl") as user, shared_folder("textdp-model-") as arena:  # sticky, like /tmp
        link = arena / "model"
        run_as(user, f"import os; os.symlink({str(causal)!r}, {str(link)!r})")
        assert link.lstat().st_uid == user[0]
        with pytest.raises(ParameterError, match="is a link owned by another user"):
            load_language_model(str(link), "causal")
