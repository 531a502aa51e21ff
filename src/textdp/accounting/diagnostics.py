"""Word-level diagnostics of a release: unchanged words and neighbour ranks.

The *neighbour rank* of an output word ``o`` chosen for an input word ``w`` is
the position of ``o`` in the list of ``w``'s nearest vocabulary words: 0 when the
word is kept, 1 for the nearest other word, 57 when 57 words lie closer to ``w``
than ``o``. It tells how far the noise moved a word in the vocabulary's own
terms, which, unlike epsilon, reads the same whatever the embedding dimension.

These numbers describe the *sensitive input*: they are diagnostics for the
person running the release, not covered by the privacy guarantee, and should not
be published beside the private documents.
"""

from __future__ import annotations

import numpy as np

from ..embeddings import Embeddings
from ..errors import ParameterError
from ..mechanisms import DocumentDiagnostics
from .emd import optimal_matching

__all__ = ["neighbour_ranks", "rank_summary", "report_fields"]


def neighbour_ranks(inputs: np.ndarray, outputs: np.ndarray, vectors: np.ndarray, *, block: int = 32) -> np.ndarray:
    """Exact neighbour rank of each ``outputs[i]`` among the neighbours of ``inputs[i]``.

    ``rank = #{u : ||e_u - e_w|| < ||e_o - e_w||} + #{u < o : ||e_u - e_w|| = ||e_o - e_w||}``
    over the whole vocabulary (``w`` itself included, so a kept word has rank 0
    and the nearest other word rank 1; exact ties are ordered by row, like the
    decoder). Squared distances are compared in float64
    (``||e_u||^2 - 2 e_u . e_w``, one blocked matrix product per distinct input word).

    Parameters
    ----------
    inputs, outputs : numpy.ndarray
        Vocabulary rows, same shape.
    vectors : numpy.ndarray
        ``(V, d)`` embedding matrix.

    Examples
    --------
    >>> vec = np.array([[0.0], [1.0], [3.0], [-2.0]])
    >>> neighbour_ranks(np.array([0, 0, 0, 2]), np.array([0, 2, 1, 3]), vec).tolist()
    [0, 3, 1, 3]
    """
    inp = np.asarray(inputs, dtype=np.int64)
    out = np.asarray(outputs, dtype=np.int64)
    if inp.shape != out.shape:
        raise ParameterError(f"inputs and outputs must have the same shape, got {inp.shape} and {out.shape}")
    flat_in = inp.reshape(-1)
    flat_out = out.reshape(-1)
    ranks = np.zeros(flat_in.size, dtype=np.int64)
    moved = np.flatnonzero(flat_in != flat_out)
    if moved.size == 0:
        return ranks.reshape(inp.shape)
    vec = np.asarray(vectors)
    v = vec.shape[0]
    uniq, inverse = np.unique(flat_in[moved], return_inverse=True)
    rows_all = np.arange(v)
    chunk = 65536
    keys = np.empty((v, min(block, uniq.size)), dtype=np.float64)
    for start in range(0, uniq.size, block):
        words = uniq[start : start + block]
        w64 = np.asarray(vec[words], dtype=np.float64)
        k = keys[:, : words.size]
        # key_u = ||e_u||^2 - 2 e_u . e_w orders u by distance to w (||e_w||^2 is common to all u)
        for vs in range(0, v, chunk):
            c64 = np.asarray(vec[vs : vs + chunk], dtype=np.float64)
            np.matmul(c64, w64.T, out=k[vs : vs + chunk])
            k[vs : vs + chunk] *= -2.0
            k[vs : vs + chunk] += np.einsum("ij,ij->i", c64, c64)[:, None]
        for j in range(words.size):
            sel = moved[inverse == start + j]
            key = k[:, j]
            o = flat_out[sel]
            t = key[o]
            lt = (key[None, :] < t[:, None]).sum(axis=1)
            eq = ((key[None, :] == t[:, None]) & (rows_all[None, :] < o[:, None])).sum(axis=1)
            ranks[sel] = lt + eq
    return ranks.reshape(inp.shape)


def rank_summary(ranks: np.ndarray) -> dict[str, float]:
    """Mean, median, 90th percentile and share within the 10 nearest neighbours of ``ranks``.

    >>> rank_summary(np.array([0, 0, 1, 30]))["mean"]
    7.75
    """
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    if r.size == 0:
        raise ParameterError("no ranks to summarise")
    return {
        "mean": float(r.mean()),
        "median": float(np.median(r)),
        "p90": float(np.quantile(r, 0.9)),
        "within_10": float(np.mean(r <= 10)),
    }


def report_fields(diag: DocumentDiagnostics, embeddings: Embeddings) -> dict[str, object]:
    """The private-report fields of one document (``textdp obfuscate --private-report``).

    Returns ``{"n_tokens", "dropped_oov", "n_in_vocabulary", "unchanged_fraction",
    "mean_neighbour_rank"}``. A text mechanism (``diag.aligned``) pairs the words by
    position. A bag mechanism releases a *bag*, so which output word
    came from which input word is not known; each input word is paired with an
    output word by the Earth Mover's optimal matching (Lemma A1: the one-to-one
    matching with the least total Euclidean distance) and the neighbour rank of
    the pair is computed exactly (:func:`neighbour_ranks`). All of these describe
    the sensitive input (see the module notes): never publish them.

    Examples
    --------
    >>> from textdp.embeddings import Embeddings
    >>> from textdp.mechanisms import EarthMoversPrivacy
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> diags = []
    >>> _ = EarthMoversPrivacy(epsilon=1e6, size=2, embeddings=emb, stop_words=None, seed=0).privatize(
    ...     "dog car unicorn", private_report=diags)
    >>> report_fields(diags[0], emb)
    {'n_tokens': 3, 'dropped_oov': 1, 'n_in_vocabulary': 2, 'unchanged_fraction': 1.0, 'mean_neighbour_rank': 0.0}
    """
    inp = np.asarray(diag.input_rows, dtype=np.int64)
    out = np.asarray(diag.output_rows, dtype=np.int64)
    if inp.size != out.size or inp.size == 0:
        raise ParameterError(f"document {diag.id}: input and output bags differ in size ({inp.size} and {out.size})")
    if max(int(inp.max()), int(out.max())) >= embeddings.vocab_size:
        raise ParameterError(f"document {diag.id}: rows outside the embeddings {embeddings.name}")
    vec = embeddings.vectors
    if getattr(diag, "aligned", False):  # a text mechanism: output i replaced input i
        rows = cols = np.arange(inp.size)
    else:
        # the one matching of textdp (Lemma A1); cdist gives exactly 0 for a kept word, so it pairs with itself
        rows, cols, _ = optimal_matching(np.asarray(vec[inp], dtype=np.float64),
                                         np.asarray(vec[out], dtype=np.float64))
    ranks = neighbour_ranks(inp[rows], out[cols], vec)
    return {
        "n_tokens": int(diag.n_tokens),
        "dropped_oov": int(diag.dropped_oov),
        "n_in_vocabulary": int(diag.n_in_vocabulary),
        "unchanged_fraction": float(diag.unchanged_fraction()),
        "mean_neighbour_rank": float(ranks.mean()),
    }
