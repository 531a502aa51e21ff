"""Same-representation attackers: k-NN in the word-embedding space.

Fernandes, Dras & McIver (POST 2019, Section 6) measure what the mechanism
leaves *in its own space*: 1-NN authorship ("SRauth") and 5-NN topic
("SRtopic") over documents represented by their word vectors. A document is
represented either by its **mean word vector** (Euclidean distance between
means; ``distance="mean"``, the default) or as a bag whose distance to another
bag is the **Earth Mover's distance** with the Euclidean ground metric
(``distance="emd"``, the metric of the paper's Theorem 5.1; exact, by an
assignment problem for equal-size bags, by ``POT`` otherwise).
Out-of-vocabulary words are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validation import check_choice, check_positive_int
from ..accounting.emd import earth_movers_distance
from ..embeddings import EmbeddingsLike
from ..errors import DocumentError, ParameterError
from ._common import as_token_lists, check_labels

__all__ = ["NearestNeighbourAttacker", "document_vectors", "emd_distance_matrix"]

DISTANCES = ("mean", "emd")


def _rows(tokens: list[str], embeddings: EmbeddingsLike, where: str) -> np.ndarray:
    index = embeddings.index
    rows = np.fromiter((index[w] for w in tokens if w in index), dtype=np.int64)
    if rows.size == 0:
        raise DocumentError(f"{where} has no in-vocabulary word")
    return rows


def document_vectors(texts: Sequence[object], embeddings: EmbeddingsLike) -> np.ndarray:
    """Mean word vector of each text (``(n, d)`` float64), skipping unknown words.

    >>> from types import SimpleNamespace
    >>> emb = SimpleNamespace(index={"a": 0, "b": 1}, vectors=np.eye(2, dtype=np.float32))
    >>> document_vectors([["a", "b", "zz"]], emb).tolist()
    [[0.5, 0.5]]
    """
    toks = as_token_lists(texts)
    vecs = np.asarray(embeddings.vectors)
    return np.stack([vecs[_rows(t, embeddings, f"text {i}")].mean(axis=0, dtype=np.float64) for i, t in enumerate(toks)])


def emd_distance_matrix(a_texts: Sequence[object], b_texts: Sequence[object], embeddings: EmbeddingsLike) -> np.ndarray:
    """Earth Mover's distance between every pair of bags (uniform mass per word).

    The one EMD of textdp, :func:`textdp.accounting.emd.earth_movers_distance`: equal-size
    bags by the assignment problem (Lemma A1), other sizes by POT if installed, else
    scipy's exact transport LP.

    >>> from types import SimpleNamespace
    >>> emb = SimpleNamespace(index={"a": 0, "b": 1}, vectors=np.array([[0., 0.], [3., 4.]], dtype=np.float32))
    >>> emd_distance_matrix([["a", "a"]], [["a", "b"], ["b", "b"]], emb).round(3).tolist()
    [[2.5, 5.0]]
    """
    vecs = np.asarray(embeddings.vectors, dtype=np.float64)
    A = [vecs[_rows(t, embeddings, f"text {i}")] for i, t in enumerate(as_token_lists(a_texts))]
    B = [vecs[_rows(t, embeddings, f"text {i}")] for i, t in enumerate(as_token_lists(b_texts))]
    out = np.empty((len(A), len(B)))
    for i, x in enumerate(A):
        for j, y in enumerate(B):
            out[i, j] = earth_movers_distance(x, y)
    return out


class NearestNeighbourAttacker:
    """k-nearest-neighbour classifier in the embedding space (SRauth / SRtopic).

    Parameters
    ----------
    embeddings : textdp.embeddings.Embeddings
        Word vectors (``index`` and ``vectors``), the ones the mechanism uses.
    k : int
        Neighbours; 1 for authorship, 5 for topic as in the paper.
    distance : {"mean", "emd"}
        Euclidean distance of mean word vectors, or Earth Mover's distance.

    Ties in the vote go to the label whose nearest member is closest.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> emb = SimpleNamespace(index={"a": 0, "b": 1, "c": 2}, vectors=np.eye(3, dtype=np.float32))
    >>> nn = NearestNeighbourAttacker(emb).fit([["a"], ["b", "c"]], ["X", "Y"])
    >>> nn.predict([["a", "a"], ["c"]]).tolist()
    ['X', 'Y']
    """

    def __init__(self, embeddings: EmbeddingsLike, k: int = 1, distance: str = "mean") -> None:
        self.embeddings = embeddings
        self.k = check_positive_int(k, "k")
        self.distance = check_choice(distance, "distance", DISTANCES)

    def fit(self, texts: Sequence[object], labels: Sequence[object]) -> NearestNeighbourAttacker:
        """Store the labelled reference texts (known-author texts)."""
        self._ref = as_token_lists(texts, "texts")
        self.labels_ = check_labels(labels, len(self._ref))
        if self.k > len(self._ref):
            raise ParameterError(f"k={self.k} is larger than the {len(self._ref)} reference texts")
        if self.distance == "mean":
            self._ref_vec = document_vectors(self._ref, self.embeddings)
        return self

    def distances(self, texts: Sequence[object]) -> np.ndarray:
        """``(n_texts, n_reference)`` distances to the reference texts."""
        toks = as_token_lists(texts, "texts")
        if self.distance == "mean":
            from scipy.spatial.distance import cdist

            return cdist(document_vectors(toks, self.embeddings), self._ref_vec)
        return emd_distance_matrix(toks, self._ref, self.embeddings)

    def predict(self, texts: Sequence[object]) -> np.ndarray:
        """Majority label of the ``k`` nearest reference texts."""
        d = self.distances(texts)
        order = np.argsort(d, axis=1, kind="stable")[:, : self.k]
        out = np.empty(d.shape[0], dtype=object)
        for i, nb in enumerate(order):
            labs = self.labels_[nb].tolist()
            counts = {lab: labs.count(lab) for lab in labs}
            top = max(counts.values())
            out[i] = next(lab for lab in labs if counts[lab] == top)
        return out
