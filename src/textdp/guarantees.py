"""Guarantee records: immutable statements of what a release spent (a leaf module).

In the style of Google's ``dp_accounting`` events and OpenDP's privacy maps: every
mechanism in textdp returns or carries a frozen *guarantee object*, and every
output record repeats it. This module imports nothing from the rest of textdp, so
mechanisms, accounting, engines and the CLI can all depend on it without cycles.

Every guarantee object follows the :class:`Guarantee` protocol:

* ``mechanism`` -- the registered mechanism name;
* ``epsilon`` and ``delta`` -- the privacy parameters (``delta = 0`` for pure DP);
* ``unit`` -- what one privacy unit is (``"word"``, ``"document"``, ``"sentence"``, ``"user"``);
* ``statement`` -- one sentence: the definition, the parameters, the unit and what is *not* covered;
* ``to_dict()`` -- the JSON form (it always has the keys ``mechanism``, ``epsilon``,
  ``delta``, ``unit`` and ``guarantee``, the last being ``statement``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

GUARANTEE_KEYS = ("mechanism", "epsilon", "delta", "unit", "guarantee")


@runtime_checkable
class Guarantee(Protocol):
    """What every guarantee object offers (see the module docstring)."""

    @property
    def mechanism(self) -> str: ...

    @property
    def epsilon(self) -> float: ...

    @property
    def delta(self) -> float: ...

    @property
    def unit(self) -> str: ...

    @property
    def statement(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


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
    delta : float
        Always 0: metric DP here is pure (no failure probability).
    unit : str
        The privacy unit: ``"document"`` (a bag of N words; the loss scales with E_d).

    Examples
    --------
    >>> g = EarthMoversGuarantee(epsilon=10.0, size=50, dim=50, vocab_size=400000,
    ...                          embeddings="glove-6B-50d", bag="truncate")
    >>> g.privacy_loss(0.01)
    5.0
    >>> isinstance(g, Guarantee)
    True
    """

    epsilon: float
    size: int
    dim: int
    vocab_size: int
    embeddings: str
    bag: str
    mechanism: str = "earth-movers-privacy"
    metric: str = "euclidean"
    delta: float = 0.0
    unit: str = "document"

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
