"""The single-file path that ``textdp obfuscate FILE -o out`` runs: the release driver (textdp.release.release).

Issue 20 item 4: the CLI redid the duplicate-id, settings and private-report steps of the engine. They are now
library steps (``release`` with ``obfuscate_settings``; ``check_duplicate_ids`` shared with the partitioned
driver); the CLI is a thin layer, so the API and the CLI write the same bytes for a seed.
"""

from __future__ import annotations

import json
import stat

import pytest
from typer.testing import CliRunner

from textdp.cli import app
from textdp.embeddings import load_embeddings, output_vocabulary
from textdp.engines.single import check_duplicate_ids, obfuscate_settings
from textdp.errors import DocumentError
from textdp.io import read_sourced_documents
from textdp.pipeline import build_mechanism
from textdp.release import release


def obfuscate_file(mech, docs, output, **kwargs):
    """What ``textdp obfuscate`` runs for one file: the release driver with obfuscate's public settings."""
    settings = obfuscate_settings(mech, known_source=False, stop_words="english")
    return dict(release(mech, docs, output, command="obfuscate", settings=settings, **kwargs).settings)

DOCS = [{"id": "a", "text": "The quick brown fox jumps over the lazy dog near the river bank."},
        {"id": "b", "text": "Stocks fell sharply on Monday as investors worried about interest rates."}]


@pytest.fixture(scope="module")
def emb():
    return output_vocabulary(load_embeddings(vocab_size=20000), "full", "english")


def _write(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


@pytest.mark.parametrize("mechanism,size", [("cmp", None), ("earth-movers", 5)])
def test_api_and_cli_write_the_same_release(tmp_path, emb, mechanism, size):
    inp = _write(tmp_path / "in.jsonl", DOCS)
    mech = build_mechanism(mechanism, epsilon=10.0, size=size, embeddings=emb, stop_words="english", seed=3)
    api_out, api_report = tmp_path / "api.jsonl", tmp_path / "api-report.jsonl"
    settings = obfuscate_file(mech, read_sourced_documents([inp]), api_out, private_report=api_report)
    cli_out, cli_report = tmp_path / "cli.jsonl", tmp_path / "cli-report.jsonl"
    args = ["obfuscate", str(inp), "-e", "10", "--mechanism", mechanism, "-k", "20000", "--seed", "3",
            "-o", str(cli_out), "--private-report", str(cli_report)] + (["-n", str(size)] if size else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert api_out.read_bytes() == cli_out.read_bytes()
    assert api_report.read_bytes() == cli_report.read_bytes()
    assert stat.S_IMODE(api_report.stat().st_mode) == 0o600
    cli_settings = json.loads((tmp_path / "cli.jsonl.settings.json").read_text())
    assert settings["guarantee"] == cli_settings["guarantee"] and settings["documents"] == 2
    assert json.loads((tmp_path / "api.jsonl.settings.json").read_text()) == settings


def test_duplicate_ids_are_reported_once_or_refused_before_anything_is_written(tmp_path, emb):
    inp = _write(tmp_path / "in.jsonl", [DOCS[0], {**DOCS[1], "id": "a"}])
    docs = read_sourced_documents([inp])
    seen: list[tuple[int, str]] = []
    mech = build_mechanism("cmp", epsilon=10.0, embeddings=emb, stop_words="english", seed=3)
    obfuscate_file(mech, docs, tmp_path / "out.jsonl", on_duplicate_ids=lambda n, first: seen.append((n, first)))
    assert seen == [(1, "a")]
    with pytest.raises(DocumentError, match="repeats"):
        obfuscate_file(mech, docs, tmp_path / "strict.jsonl", strict_ids=True)
    assert not (tmp_path / "strict.jsonl").exists() and not (tmp_path / "strict.jsonl.settings.json").exists()
    calls: list[int] = []
    check_duplicate_ids(lambda: calls.append(1) or [], strict=False, on_duplicate_ids=None)
    assert calls == []  # nobody asked: the ids are not even read
