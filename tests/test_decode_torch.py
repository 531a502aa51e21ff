"""The torch decoder (extra ``[gpu]``) returns exactly the numpy decoder's rows, on CPU or GPU."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from textdp.embeddings import ExactDecoder, make_decoder


def test_torch_decoder_identical_to_exact():
    g = np.random.default_rng(11)
    vec = g.standard_normal((5000, 50)).astype(np.float32)
    vec[4000:4010] = vec[:10]  # duplicated rows: ties must go to the lowest row
    src = g.integers(0, 5000, 600)
    q = vec[src] + 0.3 * g.standard_normal((600, 50))
    q[:10] = vec[:10]  # exact hits on duplicated rows
    dec = make_decoder("torch", vec, query_block=128, vocab_block=1024)
    np.testing.assert_array_equal(dec.decode(q), ExactDecoder(vec).decode(q))
    assert dec.decode(q[:10]).tolist() == list(range(10))
