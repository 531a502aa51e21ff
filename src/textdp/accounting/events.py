"""Immutable records of what a release spent (in the style of Google's dp_accounting).

Every release made by textdp returns or carries one of these events. They are
frozen dataclasses: a released guarantee cannot be edited after the fact, and
``to_dict`` gives the JSON form written beside every output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

EARTH_MOVERS_REFERENCE = (
    "Fernandes, Dras & McIver, 'Generalised Differential Privacy for Text Document Processing', "
    "POST 2019 (Algorithms 1-2, Theorem 5.1)"
)


@dataclass(frozen=True)
class EarthMoversGuarantee:
    """The epsilon*N*E_d-privacy guarantee of one Earth Mover's privacy release.

    Attributes
    ----------
    epsilon : float
        Per-word privacy parameter of the n-dimensional Laplace noise.
    size : int
        Bag size N; the guarantee compares bags of exactly this size.
    dim : int
        Embedding dimension n.
    vocab_size : int
        Size of the public vocabulary the words are decoded to.
    embeddings : str
        Description of the embeddings (the metric d is Euclidean distance between them).
    bag : str
        How the bag of N words was formed (``truncate`` or ``sample``).

    Examples
    --------
    >>> g = EarthMoversGuarantee(epsilon=10.0, size=50, dim=50, vocab_size=400000,
    ...                          embeddings="glove-6B-50d", bag="truncate")
    >>> g.privacy_loss(0.01)
    5.0
    """

    epsilon: float
    size: int
    dim: int
    vocab_size: int
    embeddings: str
    bag: str
    mechanism: str = "earth-movers-privacy"
    metric: str = "euclidean"

    @property
    def statement(self) -> str:
        """The guarantee in one sentence, as written to every output record."""
        n = self.size
        e = self.epsilon
        return (
            f"epsilon*N*E_d-privacy with epsilon={e:g} and N={n} (Fernandes et al. 2019, Thm 5.1): for any two "
            f"documents whose preprocessed bags b, b' both hold N={n} in-vocabulary words, the probability of any "
            f"output bag differs by a factor <= exp({e:g}*{n}*E_d(b,b')), where E_d is the Earth Mover's distance "
            f"(mean matched {self.metric} distance between {self.embeddings} vectors, n={self.dim}). "
            "Covers the multiset of words in the bag. Not covered: which words were out of vocabulary or were "
            "cut by truncation (they are never released), the counts n_tokens/dropped_oov in the record "
            "(they describe the input), and the bag size N itself."
        )

    def privacy_loss(self, earth_movers_distance: float) -> float:
        """epsilon * N * E_d(b, b'): the log of the worst-case output probability ratio."""
        return float(self.epsilon * self.size * earth_movers_distance)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, including the sentence and the paper reference."""
        out = asdict(self)
        out["guarantee"] = self.statement
        out["reference"] = EARTH_MOVERS_REFERENCE
        return out
