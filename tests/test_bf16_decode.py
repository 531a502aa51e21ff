"""The exact decoder's bfloat16 candidate path returns the float64 decoder's words (issue 44).

The reference is ``F(z)`` of :mod:`textdp.embeddings.decode` (lowest row among the float64 minimisers),
by brute force for the near ties. The bfloat16 path runs on any CPU (torch emulates bfloat16 where the
CPU has no bfloat16 arithmetic: slower, same words). A planted bug (the margin shrunk to nothing) is
shown to break the identity on the same near ties, and a planted bfloat16 accumulation fails the probe.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from test_fused_decode import brute, near_tie_queries

from textdp.embeddings import ExactDecoder
from textdp.embeddings import bf16 as mod
from textdp.errors import ParameterError
from textdp.mechanisms import noisy_vectors

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def glove_600(glove) -> np.ndarray:
    """The 600 most frequent GloVe 50d words, with rows 0..19 duplicated at the end (exact ties)."""
    vec = np.asarray(glove.vectors[:600])
    return np.concatenate([vec, vec[:20]])


def bf16_decoder(vec: np.ndarray, **kw: int) -> ExactDecoder:
    dec = ExactDecoder(vec, precision="bfloat16", **kw)  # type: ignore[arg-type]
    dec.bf16_vocab_tile = 128  # several norm-sorted tiles, each with its own bound
    assert dec.score_precision == "bfloat16"
    return dec


def test_bf16_path_identical_on_100k_noisy_vectors(glove_600):
    gen = np.random.default_rng(44)
    vec = glove_600
    v = vec.shape[0]
    src = gen.integers(0, v, 80_000)
    q = np.concatenate([noisy_vectors(src[:40_000], vec, 10.0, gen), noisy_vectors(src[40_000:], vec, 40.0, gen),
                        near_tie_queries(vec, 20_000, gen)])
    assert q.shape[0] == 100_000
    exact = ExactDecoder(vec, precision="float32").decode(q)
    dec = bf16_decoder(vec, threads=2, query_block=8192)
    got = dec.decode(q)
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(got[80_000:], brute(vec, q[80_000:]))  # the near ties, by brute force
    assert dec.stats["ambiguous"] > 20_000  # candidate sets of several words were re-ranked, near ties among them
    assert (got >= 600).sum() == 0  # duplicated rows: ties go to the lowest row


def test_shrunk_margin_breaks_identity(glove_600, monkeypatch):
    """The planted bug: the bound and the output rounding shrunk a millionfold. Near ties then mis-decode."""
    gen = np.random.default_rng(7)
    vec = glove_600
    q = np.concatenate([noisy_vectors(gen.integers(0, 620, 3000), vec, 10.0, gen), near_tie_queries(vec, 2000, gen)])
    exact = ExactDecoder(vec, precision="float32").decode(q)
    dec = bf16_decoder(vec, threads=1)
    np.testing.assert_array_equal(dec.decode(q), exact)
    real = mod.Bf16Scorer.bounds
    monkeypatch.setattr(mod.Bf16Scorer, "bounds",
                        lambda self, q64, delta: {k: x * 1e-6 for k, x in real(self, q64, delta).items()})
    monkeypatch.setattr(mod, "_UO", 2.0**-8 * 1e-6)
    assert (dec.decode(q) != exact).sum() > 10


def test_bound_holds_and_is_not_loose(glove):
    """|s~ - s| <= B_t + u_o |s~| on real GloVe scores; B_t / 50 is exceeded (the bound is not vacuous)."""
    gen = np.random.default_rng(5)
    vec = np.asarray(glove.vectors[:20_000])
    sq = (vec.astype(np.float64) ** 2).sum(axis=1)
    sc = mod.Bf16Scorer(vec, sq, 1024)
    q = noisy_vectors(gen.integers(0, 20_000, 200), vec, 10.0, gen)
    s_bf = (sc.queries(q) @ sc.e.T).float().numpy().astype(np.float64)
    v64 = vec[sc.perm].astype(np.float64)
    s64 = q @ v64.T - 0.5 * sq[sc.perm]
    coef = sc.bounds(q, np.zeros(len(q)))
    b = np.repeat(sc.tile_bounds(coef, 0, 20_000), 1024, axis=1)[:, :20_000]
    err = np.abs(s_bf - s64)
    assert np.all(err <= b + mod._UO * np.abs(s_bf))
    assert np.any(err > b / 50)


def test_probe_rejects_bfloat16_accumulation():
    """The probe passes torch's GEMM here and fails a planted one that accumulates in bfloat16."""
    assert mod.probe_decoder(torch, 64, 128, 53)

    def bf16_accumulating(q: np.ndarray, e: np.ndarray) -> np.ndarray:
        qv, ev = mod.bf16_values(q), mod.bf16_values(e)
        acc = np.zeros((qv.shape[0], ev.shape[0]), dtype=np.float32)
        for i in range(qv.shape[1]):
            acc = mod.bf16_values(mod.round_bf16(acc + np.outer(qv[:, i], ev[:, i])))
        return acc

    assert not mod.probe(torch, 16, 32, 53, matmul=bf16_accumulating)


def test_round_bf16_matches_round_to_nearest_even():
    gen = np.random.default_rng(1)
    x = np.concatenate([gen.standard_normal(100_000).astype(np.float32) * 10.0**gen.integers(-30, 30, 100_000),
                        np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8), 0.0, -0.0], dtype=np.float32)])
    x = x.astype(np.float32)
    ours = mod.round_bf16(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ours, theirs)
    assert np.all(np.abs(mod.bf16_values(ours).astype(np.float64) - x) <= 2.0**-8 * np.abs(x))


def test_auto_choice(glove_600, monkeypatch):
    """auto: float32 without bfloat16 flags or below the size floor; bfloat16 when the timing says faster."""
    monkeypatch.setattr(mod, "AUTO_MIN_ROWS", 100)
    monkeypatch.setattr(mod, "cpu_flags", lambda: frozenset({"avx512f"}))
    assert ExactDecoder(glove_600).score_precision == "float32"
    monkeypatch.setattr(mod, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(mod, "faster_than_float32", lambda *a, **k: False)
    assert ExactDecoder(glove_600).score_precision == "float32"
    monkeypatch.setattr(mod, "faster_than_float32", lambda *a, **k: True)
    assert ExactDecoder(glove_600).score_precision == "bfloat16"
    monkeypatch.setattr(mod, "AUTO_MIN_ROWS", 65_536)
    assert ExactDecoder(glove_600).score_precision == "float32"
    assert ExactDecoder(glove_600, precision="float32").score_precision == "float32"
    with pytest.raises(ParameterError, match="decoder precision must be one of auto, float32, bfloat16"):
        ExactDecoder(glove_600, precision="float16")


def test_failed_probe_refuses_forced_bfloat16(glove_600, monkeypatch):
    from textdp.errors import EmbeddingsError

    monkeypatch.setattr(mod, "probe_decoder", lambda *a: False)
    with pytest.raises(EmbeddingsError, match="use precision float32"):
        ExactDecoder(glove_600, precision="bfloat16").decode(glove_600[:3])
    monkeypatch.setattr(mod, "AUTO_MIN_ROWS", 100)
    monkeypatch.setattr(mod, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert ExactDecoder(glove_600).score_precision == "float32"


def test_pickled_decoder_rebuilds_its_tiles(glove_600):
    gen = np.random.default_rng(3)
    q = noisy_vectors(gen.integers(0, 620, 500), glove_600, 10.0, gen)
    dec = bf16_decoder(glove_600)
    first = dec.decode(q)
    again = pickle.loads(pickle.dumps(dec))
    assert again._bf16 is None and again.score_precision == "bfloat16"
    np.testing.assert_array_equal(again.decode(q), first)
    dec.set_precision("float32")
    np.testing.assert_array_equal(dec.decode(q), first)
    assert dec.score_precision == "float32"


def test_cli_decoder_precision(tmp_path):
    """``--decoder-precision``: byte-identical output for float32 and bfloat16 (seeded), recorded in the settings."""
    import json

    from cli_checks import one_error
    from typer.testing import CliRunner

    from textdp.cli import app

    doc = tmp_path / "doc.txt"
    doc.write_text("the stock market fell sharply as investors sold shares of technology companies\n")
    outs = {}
    for p in ("float32", "bfloat16"):
        out = tmp_path / f"out_{p}.jsonl"
        res = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--size", "200", "--bag", "sample",
                                       "--vocab-size", "30000", "--seed", "4", "--decoder-precision", p,
                                       "-o", str(out)])
        assert res.exit_code == 0, res.output
        outs[p] = out.read_bytes()
        settings = json.loads((tmp_path / f"out_{p}.jsonl.settings.json").read_text())
        assert settings["decoder_precision"] == p
    assert outs["float32"] == outs["bfloat16"]
    bad = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--decoder-precision", "half",
                                   "-o", str(tmp_path / "bad.jsonl")])
    assert bad.exit_code == 2 and "half" in bad.output
    part = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--size", "5", "--engine", "local",
                                    "--decoder-precision", "float32", "-o", str(tmp_path / "dir")])
    one_error(part, "--decoder-precision applies to --engine single")
