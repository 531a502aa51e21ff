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
    "POST 2019 (Algorithms 1-2, Theorem 4.1, Theorem 5.1)"
)

BAG_STATEMENTS = ("truncate", "sample")


@dataclass(frozen=True)
class EarthMoversGuarantee:
    """The guarantee of one Earth Mover's privacy release.

    ``bag="truncate"`` (the bag is the first N in-vocabulary words): Theorem 5.1,
    epsilon*N*E_d-privacy between bags, E_d the Earth Mover's distance.

    ``bag="sample"`` (N words drawn with replacement from the document): the
    hidden sampled bag is never released, so the statement is about documents:
    any output is at most ``exp(epsilon * N * W_inf(p_D, p_D'))`` times more
    likely from D than from D', where ``p_D`` is D's empirical distribution of
    in-vocabulary words and ``W_inf`` the infinity-Wasserstein (bottleneck)
    distance under the embedding metric. Proof (coupling): take a coupling ``pi``
    of ``p_D`` and ``p_D'`` whose support only pairs words at distance
    ``<= w = W_inf`` (it exists: W_inf is the smallest such threshold, attained on
    finite supports). One draw then outputs ``o`` with probability
    ``sum_{x,y} pi(x,y) K(x,o) <= sum_{x,y} pi(x,y) e^{epsilon w} K(y,o)``, since the
    per-word mechanism ``K`` (n-dim Laplace noise, then nearest-word decoding,
    which is post-processing) satisfies ``K(x,o) <= e^{epsilon d(x,y)} K(y,o)``
    (Theorem 4.1). The N draws are independent, so the ordered outputs differ by at
    most ``e^{epsilon N w}`` pointwise, and the released bag is a function of them.
    See :func:`textdp.accounting.sample_privacy_loss` for the numbers.

    Attributes
    ----------
    epsilon : float
        Per-word privacy parameter of the n-dimensional Laplace noise.
    size : int
        Bag size N (public); the guarantee compares bags of exactly this size.
    dim : int
        Embedding dimension n.
    vocab_size : int
        Size of the public vocabulary the words are decoded to.
    embeddings : str
        Description of the embeddings (the metric d is Euclidean distance between them).
    bag : str
        How the bag of N words was formed (``truncate`` or ``sample``).
    size_from_data : bool
        N was set to the shortest document's in-vocabulary length (``--size-from-data``):
        then N reveals that length, which the guarantee does not cover.
    seeded : bool
        The noise came from a user seed (an experiment): anyone who knows the seed can
        undo the noise.
    delta : float
        Always 0: metric DP here is pure (no failure probability).
    unit : str
        The privacy unit: ``"document"`` (the loss scales with the distance between documents).

    Examples
    --------
    >>> g = EarthMoversGuarantee(epsilon=10.0, size=50, dim=50, vocab_size=400000,
    ...                          embeddings="glove-6B-50d", bag="truncate")
    >>> g.privacy_loss(0.01)
    5.0
    >>> isinstance(g, Guarantee), g.distance
    (True, 'E_d')
    >>> EarthMoversGuarantee(epsilon=3.0, size=2, dim=2, vocab_size=9, embeddings="toy", bag="sample").distance
    'W_inf'
    """

    epsilon: float
    size: int
    dim: int
    vocab_size: int
    embeddings: str
    bag: str
    size_from_data: bool = False
    seeded: bool = False
    mechanism: str = "earth-movers"
    metric: str = "euclidean"
    delta: float = 0.0
    unit: str = "document"

    @property
    def distance(self) -> str:
        """The distance between documents the loss is proportional to: ``E_d`` or ``W_inf``."""
        return "W_inf" if self.bag == "sample" else "E_d"

    @property
    def statement(self) -> str:
        """The guarantee in one sentence, as written to every output record."""
        n = self.size
        e = self.epsilon
        space = f"{self.metric} distance between {self.embeddings} vectors, n={self.dim}"
        if self.bag == "sample":
            head = (
                f"epsilon*N*W_inf-privacy with epsilon={e:g} and N={n} (coupling bound on Fernandes et al. 2019, "
                f"Thm 4.1): the bag is N={n} words drawn with replacement from the document's in-vocabulary words; "
                f"for any two documents D, D' with in-vocabulary word distributions p_D, p_D', the probability of "
                f"any output bag differs by a factor <= exp({e:g}*{n}*W_inf(p_D,p_D')), where W_inf is the "
                f"infinity-Wasserstein (bottleneck) distance ({space}). "
            )
        else:
            head = (
                f"epsilon*N*E_d-privacy with epsilon={e:g} and N={n} (Fernandes et al. 2019, Thm 5.1): for any two "
                f"documents whose bags b, b' (their first N={n} in-vocabulary words) both hold N words, the "
                f"probability of any output bag differs by a factor <= exp({e:g}*{n}*E_d(b,b')), where E_d is the "
                f"Earth Mover's distance (mean matched {space}). "
            )
        tail = (
            "Covers the multiset of output words. Not covered: the bag size N (public), the record id (copied "
            "from the input's id field, else a sequence number), the topic (the factor grows with the distance, "
            "so documents on different topics stay distinguishable), and which words were out of vocabulary or "
            + ("not drawn" if self.bag == "sample" else "cut by truncation")
            + " (never released)."
        )
        if self.size_from_data:
            tail += " N was taken from the data (the shortest document's in-vocabulary length): it reveals that length."
        if self.seeded:
            tail += " Seeded run: anyone who knows the seed can undo the noise (for experiments only)."
        return head + tail

    def privacy_loss(self, distance: float) -> float:
        """epsilon * N * distance: the log of the worst-case output probability ratio.

        ``distance`` is ``E_d(b, b')`` for ``bag="truncate"`` and ``W_inf(p_D, p_D')``
        for ``bag="sample"`` (see :attr:`distance`).
        """
        return float(self.epsilon * self.size * distance)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, including the sentence and the paper reference."""
        out = asdict(self)
        out["distance"] = self.distance
        out["guarantee"] = self.statement
        out["reference"] = EARTH_MOVERS_REFERENCE
        return out
