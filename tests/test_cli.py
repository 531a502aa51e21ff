"""The ``textdp obfuscate`` command: outputs, metadata and every promised error."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from textdp.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "letter.txt"


def run(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def test_obfuscate_file_jsonl(tmp_path):
    out = tmp_path / "out.jsonl"
    r = run("obfuscate", EXAMPLE, "--epsilon", 10, "--size", 30, "--seed", 7, "-o", out)
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text())
    assert rec["id"] == "0" and len(rec["words"]) == 30 and rec["epsilon"] == 10.0
    assert rec["mechanism"] == "earth-movers" and rec["guarantee"]["parameters"]["size"] == 30 and rec["seeded"] is True
    settings = json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert "N=30" in settings["guarantee"]["statement"]  # the long statement: once, in the settings
    assert settings["seeded"] is True and settings["size"] == 30 and settings["documents"] == 1
    assert "seed" not in settings and "inputs" not in settings  # the seed undoes the noise; paths are private
    # same seed, same output
    r2 = run("obfuscate", EXAMPLE, "--epsilon", 10, "--size", 30, "--seed", 7, "--format", "text")
    assert r2.stdout.split() == rec["words"]


def test_jsonl_and_stdin(tmp_path):
    src = tmp_path / "docs.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "a", "body": "harbour boats gulls market bread"}) + "\n")
        fh.write(json.dumps({"id": "b", "body": "river mountains village winter snow"}) + "\n")
    r = run("obfuscate", src, "--text-field", "body", "-e", 1e6, "--seed", 1, "-n", 5)
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["id"] for x in recs] == ["a", "b"]
    assert sorted(recs[1]["words"]) == sorted(["river", "mountains", "village", "winter", "snow"])
    r = run("obfuscate", "-e", 1e6, "-n", 2, "--seed", 1, "--format", "text", input="Gulls over the harbour\n")
    assert r.exit_code == 0 and sorted(r.stdout.split()) == ["gulls", "harbour"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["-e", "0", "-n", "5"], "epsilon must be a finite number > 0"),
        (["-e", "-1", "-n", "5"], "epsilon must be a finite number > 0"),
        (["-e", "nan", "-n", "5"], "epsilon must be a finite number > 0"),
        (["-e", "inf", "-n", "5"], "epsilon must be a finite number > 0"),
        (["-e", "1"], "--size N is required"),
        (["-e", "1", "-n", "5", "--size-from-data"], "exclude each other"),
        (["-e", "1", "-n", "5", "--report"], "--private-report"),
        (["-e", "1", "--size", "0"], "size must be an integer >= 1"),
        (["-e", "1", "--size", "500"], "fewer than the bag size"),
    ],
)
def test_parameter_errors(args, message, tmp_path):
    out = tmp_path / "o.jsonl"
    r = run("obfuscate", EXAMPLE, *args, "-o", out)
    assert r.exit_code == 2
    assert message in r.stderr and "Traceback" not in r.output
    assert not out.exists() and not list(tmp_path.glob(".o.jsonl*"))


def test_document_errors(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    oov = tmp_path / "oov.txt"
    oov.write_text("zorbulax quuxifrob", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    for bad, msg in [
        (empty, "empty after normalisation"),
        (latin, "not valid UTF-8"),
        (oov, "none of its 2 words is in the vocabulary"),
        (tmp_path / "missing.txt", "no such file"),
    ]:
        r = run("obfuscate", EXAMPLE, bad, "-e", 5, "-n", 1, "-o", out)  # a good file first: still nothing written
        assert r.exit_code == 2, (bad, r.output)
        assert msg in r.stderr and "Traceback" not in r.output
        assert not out.exists()


def test_bad_embeddings(tmp_path):
    emb = tmp_path / "emb.txt"
    emb.write_text("fisherman 1 2 3\nharbour 1 2\n", encoding="utf-8")
    r = run("obfuscate", EXAMPLE, "-e", 5, "-n", 5, "--embeddings", emb)
    assert r.exit_code == 2 and "inconsistent dimensions" in r.stderr
    r = run("obfuscate", EXAMPLE, "-e", 5, "-n", 5, "--embeddings", tmp_path / "none.txt")
    assert r.exit_code == 2 and "embeddings file not found" in r.stderr


def test_custom_embeddings_and_domain_vocab(tmp_path):
    emb = tmp_path / "emb.txt"
    emb.write_text("fisherman 0 0\nharbour 0 1\nbakery 9 9\nbread 9 8\n", encoding="utf-8")
    r = run("obfuscate", EXAMPLE, "-e", 1e6, "-n", 1, "--embeddings", emb, "--format", "text")
    assert r.exit_code == 0, r.output
    assert set(r.stdout.split()) <= {"fisherman", "harbour", "bakery", "bread"}
    dom = tmp_path / "domain.txt"
    dom.write_text("bakery bread fisherman", encoding="utf-8")
    r = run("obfuscate", EXAMPLE, "-e", 1e6, "-n", 1, "--embeddings", emb, "--domain-vocab", dom, "--format", "text")
    assert r.exit_code == 0 and "harbour" not in r.stdout.split()


def test_console_script_help():
    r = subprocess.run([sys.executable, "-m", "textdp", "obfuscate", "--help"], check=False, capture_output=True, text=True)
    assert r.returncode == 0 and "epsilon" in r.stdout.lower()
