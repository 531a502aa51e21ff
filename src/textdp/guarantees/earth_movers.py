"""The guarantee of Earth Mover's privacy (Fernandes, Dras & McIver 2019): a :class:`Guarantee` subclass."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Guarantee

__all__ = ["EARTH_MOVERS_REFERENCE", "EarthMoversGuarantee"]

EARTH_MOVERS_REFERENCE = (
    "Fernandes, Dras & McIver, 'Generalised Differential Privacy for Text Document Processing', "
    "POST 2019 (Algorithms 1-2, Theorem 4.1, Theorem 5.1)"
)

@dataclass(frozen=True, kw_only=True)
class EarthMoversGuarantee(Guarantee):
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
        Per-word privacy parameter of the n-dimensional Laplace noise (per unit of distance).
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
    decoder : str
        The nearest-word decoder (post-processing: the bound does not depend on it).
    delta : float
        Always 0: metric DP here is pure (no failure probability).
    unit : str
        The privacy unit: ``"document"`` (the loss scales with the distance between documents).

    The other fields (``seeded``, ``empty``, the texts) are :class:`~textdp.guarantees.Guarantee`'s.

    Examples
    --------
    >>> g = EarthMoversGuarantee(epsilon=10.0, size=50, dim=50, vocab_size=400000,
    ...                          embeddings="glove-6B-50d", bag="truncate")
    >>> g.privacy_loss(0.01)
    5.0
    >>> isinstance(g, Guarantee), g.distance, g.params["size"]
    (True, 'E_d', 50)
    >>> EarthMoversGuarantee(epsilon=3.0, size=2, dim=2, vocab_size=9, embeddings="toy", bag="sample").distance
    'W_inf'
    """

    size: int
    dim: int
    vocab_size: int
    embeddings: str
    bag: str
    size_from_data: bool = False
    mechanism: str = "earth-movers"
    metric: str = "euclidean"
    decoder: str = "exact"
    unit: str = "document"
    reference: str = EARTH_MOVERS_REFERENCE

    @property
    def distance(self) -> str:
        """The distance between documents the loss is proportional to: ``E_d`` or ``W_inf``."""
        return "W_inf" if self.bag == "sample" else "E_d"

    def _derive(self) -> dict[str, object]:
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
        not_covered = (
            "the bag size N (public), the record id (copied from the input's id field, else a sequence number), "
            "the topic (the factor grows with the distance, so documents on different topics stay "
            "distinguishable), and which words were out of vocabulary or "
            + ("not drawn" if self.bag == "sample" else "cut by truncation")
            + " (never released)."
        )
        if self.size_from_data:
            not_covered += " N was taken from the data (the shortest document's in-vocabulary length): it reveals that length."
        composition = (
            "Sequential composition over documents: k documents of one person cost the sum of their bounds; "
            "every release of the same document spends the budget again."
        )
        return {
            "statement": head + "Covers the multiset of output words. Not covered: " + not_covered,
            "not_covered": not_covered,
            "composition": composition,
            "parameters": (
                ("size", n), ("bag", self.bag), ("distance", self.distance), ("dim", self.dim),
                ("vocab_size", self.vocab_size), ("embeddings", self.embeddings), ("metric", self.metric),
                ("decoder", self.decoder), ("size_from_data", bool(self.size_from_data)),
            ),
        }

    def charged(self) -> tuple[float, float]:
        """``(epsilon * N, 0)``: what one document costs per unit of :attr:`distance` (the statement's epsilon*N*d).

        >>> EarthMoversGuarantee(epsilon=1.0, size=20, dim=2, vocab_size=9, embeddings="toy", bag="sample").charged()
        (20.0, 0.0)
        """
        return float(self.epsilon) * int(self.size), 0.0

    def charge_note(self) -> str:
        return f", per unit of {self.distance} distance between the two documents"

    def privacy_loss(self, distance: float) -> float:
        """epsilon * N * distance: the log of the worst-case output probability ratio.

        ``distance`` is ``E_d(b, b')`` for ``bag="truncate"`` and ``W_inf(p_D, p_D')``
        for ``bag="sample"`` (see :attr:`distance`).
        """
        return float(self.epsilon * self.size * distance)
