"""Sampling a registered mechanism's release path: texts in through ``privatize_batch``, released rows out.

Every word and bag case samples this way (:func:`text_batch`): the path of ``textdp obfuscate`` and
``release()``, the class's ``_privatize`` with its real decoder, never ``privatize_ids``, ``core`` or a
sampler (``tests/test_audit_public_path.py`` scans the imports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError

if TYPE_CHECKING:
    from ..guarantees.records import ReleaseRecord
    from ..mechanisms.base import Mechanism

__all__ = ["copies_sampler", "released_rows", "text_batch"]


def released_rows(records: Iterable[ReleaseRecord], index: Mapping[str, int], per_unit: int, name: str) -> np.ndarray:
    """The vocabulary rows of the words each release record names: ``(n, per_unit)`` int64.

    ``records`` are what the registered mechanism's ``privatize_batch`` returned (each record's
    ``content`` is its released words); ``index`` maps a word to its row. A record with another
    number of words is an error of the release (one-line, names the case).
    """
    recs = list(records)
    rows = np.fromiter((index[str(w)] for r in recs for w in r.content), dtype=np.int64)
    if rows.size != len(recs) * per_unit:
        raise ParameterError(f"{name}: the release returned {rows.size} words for {len(recs)} units of "
                             f"{per_unit} word(s) each")
    return rows.reshape(len(recs), per_unit)


def text_batch(
    mech: Mechanism, words: Iterable[str], name: str, *, per_unit: int | None = None, sort: bool = False,
    size: int | None = None,
) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """``release(ids, rng)``: a ``(B, N)`` batch of vocabulary rows released through ``mech.privatize_batch``.

    Each row of ``ids`` becomes the text of its words (joined by spaces), all ``B`` texts go to the
    registered mechanism's ``privatize_batch`` in one call (one chunk: ``chunk=B``; ``size=N``
    passes through), and the released words of each record are mapped back to rows
    (``per_unit`` words each, default ``N``; ``sort``: as a bag, each row sorted). This is the path of
    ``textdp obfuscate`` and ``release()``: the class's ``_privatize`` with its real decoder.
    """
    vocab = list(words)
    index = {w: i for i, w in enumerate(vocab)}
    batch = mech.privatize_batch

    def release(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        arr = np.asarray(ids, dtype=np.int64)
        arr2 = arr.reshape(len(arr), -1)
        texts: dict[bytes, str] = {}
        docs = []
        for row in arr2:
            key = row.tobytes()
            if key not in texts:
                texts[key] = " ".join(vocab[int(j)] for j in row)
            docs.append(texts[key])
        k = arr2.shape[1] if per_unit is None else per_unit
        out = released_rows(batch(docs, seed=rng, chunk=max(1, len(docs)), size=size), index, k, name)
        if sort:
            out = np.sort(out, axis=1)
        return out.reshape(arr.shape) if per_unit is None else out

    return release


def copies_sampler(
    batch: Callable[[np.ndarray, np.random.Generator], np.ndarray],
) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """``sample(bag, n, rng)``: ``batch`` run on a ``(n, N)`` batch of ``n`` copies of ``bag``."""

    def sample(bag: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(batch(np.broadcast_to(bag, (n, bag.size)).copy(), rng))

    return sample
