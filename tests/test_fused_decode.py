"""The fused, tiled decoder and its lower-precision candidate path return the exact decoder's words (issue 33).

The reference is ``F(z)`` of :mod:`textdp.embeddings.decode`: the lowest row among the float64
minimisers of the squared distance, computed here by brute force. A planted bug (the candidate
margin shrunk to nothing) is shown to break the identity on the same near ties, so the tests bite.
"""

from __future__ import annotations

import numpy as np
import pytest

from textdp.embeddings import ExactDecoder
from textdp.embeddings.decode import margin_of, plan_tiles, rounding_bound
from textdp.errors import ParameterError
from textdp.mechanisms import noisy_vectors


def brute(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """F(z): float64 squared distances by the decoder's expression, lowest row among the minimisers."""
    v64 = np.asarray(vectors, dtype=np.float64)
    chunk = max(1, 4_000_000 // v64.size)  # <= 32 MB of differences at a time
    out = []
    for s in range(0, len(queries), chunk):
        q = np.asarray(queries[s : s + chunk], dtype=np.float64)
        d = ((v64[None, :, :] - q[:, None, :]) ** 2).sum(axis=2)
        out.append(np.argmax(d == d.min(axis=1, keepdims=True), axis=1))
    return np.concatenate(out)


def near_tie_queries(vec: np.ndarray, n: int, gen: np.random.Generator) -> np.ndarray:
    """Midpoints of a word and its nearest other word, nudged by 1e-7 (below float16 and float32
    resolution: the two words' scores tie to within rounding), and exact copies of words."""
    v64 = np.asarray(vec, dtype=np.float64)
    a = gen.integers(0, vec.shape[0], n // 2)
    d = ((v64[a][:, None, :] - v64[None, : min(len(v64), 2000), :]) ** 2).sum(axis=2) if n // 2 <= 500 else None
    if d is None:  # many queries: pair words among the first 2,000 rows in chunks
        d = np.concatenate([((v64[a[s : s + 500]][:, None, :] - v64[None, :2000, :]) ** 2).sum(axis=2)
                            for s in range(0, a.size, 500)])
    d[d == 0] = np.inf  # the word itself and its duplicates
    b = d.argmin(axis=1)
    mid = 0.5 * (v64[a] + v64[b]) + 1e-7 * gen.standard_normal((a.size, vec.shape[1]))
    copies = v64[gen.integers(0, vec.shape[0], n - n // 2)]
    return np.concatenate([mid, copies])


@pytest.fixture(scope="module")
def small_glove(glove) -> np.ndarray:
    """The 400 most frequent GloVe 50d words, with rows 0..19 duplicated at the end (exact ties)."""
    vec = np.asarray(glove.vectors[:400])
    return np.concatenate([vec, vec[:20]])


@pytest.mark.slow  # 100,000 queries (10 s on 2 cores); the default suite checks the same identity on the 5,000
# queries where a shrunk margin breaks it: test_shrunk_margin_breaks_identity (issue 38 item 9)
def test_float16_candidate_path_identical_on_100k_noisy_vectors(small_glove):
    torch = pytest.importorskip("torch")
    from textdp.embeddings.gpu import TorchDecoder

    gen = np.random.default_rng(33)
    vec = small_glove
    src = gen.integers(0, vec.shape[0], 80_000)
    q = np.concatenate([noisy_vectors(src[:40_000], vec, 10.0, gen), noisy_vectors(src[40_000:], vec, 40.0, gen),
                        near_tie_queries(vec, 20_000, gen)])
    assert q.shape[0] == 100_000
    exact = ExactDecoder(vec).decode(q)
    low = TorchDecoder(vec, device="cpu", precision="float16", query_block=25_000, query_tile=25_000,
                       vocab_block=420, threads=torch.get_num_threads())
    got = low.decode(q)
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(got[80_000:], brute(vec, q[80_000:]))  # the near ties, by brute force
    assert low.stats["float32_batches"] == 0  # the float16 path ran
    assert low.stats["ambiguous"] > 20_000  # wide candidate sets were re-ranked, near ties among them
    assert (got >= 400).sum() == 0  # duplicated rows: ties go to the lowest row


def test_shrunk_margin_breaks_identity(small_glove, monkeypatch):
    """float16 with the real margin decodes as the exact decoder; the planted bug (candidates within 1e-6 of the
    margin) then mis-decodes near ties on the same queries."""
    pytest.importorskip("torch")
    from textdp.embeddings.gpu import TorchDecoder

    gen = np.random.default_rng(7)
    vec = small_glove
    q = np.concatenate([noisy_vectors(gen.integers(0, 420, 3000), vec, 10.0, gen), near_tie_queries(vec, 2000, gen)])
    exact = ExactDecoder(vec).decode(q)
    low = TorchDecoder(vec, device="cpu", precision="float16", query_block=5000, query_tile=5000, vocab_block=420)
    np.testing.assert_array_equal(low.decode(q), exact)  # the real margin: identical on these queries
    assert low.stats["float32_batches"] == 0 and low.stats["ambiguous"] > 1000  # the float16 path, near ties re-ranked
    real = low._cpu.margins
    monkeypatch.setattr(low._cpu, "margins", lambda q64, **kw: real(q64, **kw) * np.float32(1e-6))
    assert (low.decode(q) != exact).sum() > 10


@pytest.mark.parametrize("threads,query_tile,vocab_block,query_block",
                         [(1, 128, 2048, 1024), (2, 64, 1000, 600), (3, 7, 997, 97), (2, 512, 30_000, 4096), (2, 128, 1024, 8192)])
def test_tiles_and_threads_do_not_change_words(glove, threads, query_tile, vocab_block, query_block):
    gen = np.random.default_rng(threads * 1000 + query_tile)
    vec = np.asarray(glove.vectors[:8_000])
    q = np.concatenate([noisy_vectors(gen.integers(0, 8_000, 600), vec, 10.0, gen),
                        near_tie_queries(vec, 400, gen)])
    dec = ExactDecoder(vec, threads=threads, query_tile=query_tile, vocab_block=vocab_block,
                       query_block=query_block)
    ranges = dec.plan(q.shape[0]).ranges
    small = min(q.shape[0], query_block) * 8_000 < 4_000_000  # too little work to split
    assert len(ranges) == (1 if threads == 1 or small else min(threads, -(-8_000 // vocab_block)))
    np.testing.assert_array_equal(dec.decode(q), brute(vec, q))
    assert dec.stats["ambiguous"] >= 150  # the midpoints were re-ranked in float64


def test_float32_margin_bites():
    """Scores that differ by less than float32 resolution: a zero margin picks the wrong word."""
    import textdp.embeddings.decode as mod

    angles = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    vec = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32) * 100
    q = np.random.default_rng(3).standard_normal((400, 2)) * 1e-5
    ref = brute(vec, q)
    np.testing.assert_array_equal(ExactDecoder(vec).decode(q), ref)
    dec = ExactDecoder(vec)
    dec.margins = lambda q64, **kw: np.zeros(q64.shape[0], np.float32)  # type: ignore[method-assign]
    assert (dec.decode(q) != ref).sum() > 5
    assert mod.select_candidates is not None


def test_rounding_bound_holds_and_a_smaller_one_fails(glove):
    """|computed - exact score| <= B for float32 (numpy) scores; B / 500 is exceeded (the bound is within ~2 orders of the worst error seen)."""
    gen = np.random.default_rng(5)
    vec = np.asarray(glove.vectors[:20_000])
    dec = ExactDecoder(vec)
    q = noisy_vectors(gen.integers(0, 20_000, 200), vec, 10.0, gen)
    s32 = (dec._augment(q) @ dec._aug.T).astype(np.float64)
    v64 = vec.astype(np.float64)
    s64 = q @ v64.T - 0.5 * (v64**2).sum(axis=1)
    err = np.abs(s32 - s64).max(axis=1)
    qn = np.linalg.norm(q, axis=1)
    b = rounding_bound(qn, np.abs(q).sum(axis=1), max_norm=dec._max_norm, max_half_sq=dec._max_half_sq,
                       max_l1=dec._max_l1, k=51, u_in=2.0**-24, u_acc=2.0**-24)
    assert np.all(err <= b)
    assert np.any(err > b / 500)
    m = margin_of(b, qn * dec._max_norm + dec._max_half_sq, qn + dec._max_norm, 51)
    assert m.dtype == np.float32 and np.all(m >= 2 * b)


def test_plan_tiles_cover_the_vocabulary():
    for v, t, vt in [(400_000, 2, 2048), (10_001, 3, 1000), (5, 4, 2), (30_000, 16, 4096)]:
        plan = plan_tiles(10_000, v, threads=t, batch=1024, query_tile=128, vocab_tile=vt)
        starts = [lo for lo, _ in plan.ranges]
        assert starts[0] == 0 and plan.ranges[-1][1] == v
        assert all(a[1] == b[0] for a, b in zip(plan.ranges, plan.ranges[1:]))
        assert all(lo % vt == 0 for lo in starts) and len(plan.ranges) <= t


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_threads_must_be_positive_integers(bad):
    with pytest.raises(ParameterError, match="threads must be a positive integer"):
        ExactDecoder(np.eye(3), threads=bad)


def test_torch_float32_path_shares_the_tiles(small_glove):
    pytest.importorskip("torch")
    from textdp.embeddings.gpu import TorchDecoder

    gen = np.random.default_rng(2)
    q = np.concatenate([noisy_vectors(gen.integers(0, 420, 2000), small_glove, 10.0, gen),
                        near_tie_queries(small_glove, 1000, gen)])
    dec = TorchDecoder(small_glove, device="cpu", query_tile=300, vocab_block=100)
    assert dec.plan(len(q)).ranges == ((0, 420),) and dec.plan(len(q)).vocab_tile == 100
    np.testing.assert_array_equal(dec.decode(q), brute(small_glove, q))
    with pytest.raises(ParameterError, match="precision"):
        TorchDecoder(small_glove, device="cpu", precision="bfloat16")


def test_cli_threads_option(tmp_path, glove):
    """``textdp obfuscate --threads N``: the same words for any N (seeded); 0 is refused in one line."""
    from cli_checks import one_error
    from typer.testing import CliRunner

    from textdp.cli import app

    doc = tmp_path / "doc.txt"
    doc.write_text("the stock market fell sharply as investors sold shares of technology companies\n")
    outs = []
    for t in ("1", "2"):
        out = tmp_path / f"out{t}.jsonl"
        res = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--size", "40", "--bag", "sample",
                                       "--vocab-size", "30000", "--seed", "4", "--threads", t, "-o", str(out)])
        assert res.exit_code == 0, res.output
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    bad = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--size", "5", "--vocab-size", "30000",
                                   "--threads", "0", "-o", str(tmp_path / "bad.jsonl")])
    one_error(bad, "threads")
    assert not (tmp_path / "bad.jsonl").exists()
    part = CliRunner().invoke(app, ["obfuscate", str(doc), "-e", "10", "--size", "5", "--engine", "local",
                                    "--threads", "2", "-o", str(tmp_path / "dir")])
    one_error(part, "--threads applies to --engine single")


def test_float16_bound_follows_torchs_accumulation_setting(small_glove, monkeypatch):
    """If torch may accumulate float16 GEMMs in float16 on the CPU, the bound takes float16's unit roundoff."""
    torch = pytest.importorskip("torch")
    from textdp.embeddings.gpu import TorchDecoder

    name = "_get_cpu_allow_fp16_reduced_precision_reduction"
    if not hasattr(torch._C, name):
        pytest.skip("this torch has no CPU reduced-precision setting")
    dec = TorchDecoder(small_glove, device="cpu", precision="float16", query_tile=2000, vocab_block=420)
    assert dec._u16_acc() == (2.0**-11 if getattr(torch._C, name)() else 2.0**-24)
    gen = np.random.default_rng(9)
    q = np.concatenate([noisy_vectors(gen.integers(0, 420, 1500), small_glove, 10.0, gen),
                        near_tie_queries(small_glove, 500, gen)])
    narrow = dec.decode(q), dec.stats["ambiguous"]
    monkeypatch.setattr(torch._C, name, lambda: True)  # (setting it raises on a CPU without float16 arithmetic)
    assert dec._u16_acc() == 2.0**-11
    wide = dec.decode(q), dec.stats["ambiguous"] - narrow[1]
    np.testing.assert_array_equal(wide[0], ExactDecoder(small_glove).decode(q))
    np.testing.assert_array_equal(narrow[0], wide[0])
    assert wide[1] > narrow[1]  # wider margins: more queries re-ranked, same words
