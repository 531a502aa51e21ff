"""Embedding-perturbation mechanisms: noise in embedding space, then decoding to a word.

* :class:`CMP` - calibrated multivariate perturbation (Feyisetan, Balle, Drake &
  Diethe, WSDM 2020): n-dimensional Laplace noise + nearest-neighbour decoding.
* :class:`Mahalanobis` - elliptical noise shaped by the regularised embedding
  covariance (Xu, Aggarwal, Feyisetan & Teissier, PrivateNLP 2020).
* :class:`Vickrey` - the noisy vector's first or second nearest neighbour, chosen
  by the threshold rule of Xu, Aggarwal, Feyisetan & Teissier (PrivateNLP 2021).
* :class:`MBRDecoder` - an opt-in post-processing that returns semantic neighbours
  (after Asghar, Carpentier, Zhao & Kaafar, arXiv 2411.13784; see its docstring).

Everything after the noise is drawn is a function of the noisy vector and public
data only (the decoders get no ``sources``), so decoding is post-processing and the
guarantee of the noise carries over unchanged.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_choice
from ..embeddings import DECODERS, Decoder, Embeddings, make_decoder
from ..errors import ParameterError, ParameterTypeError
from .kernels import augment32, nearest_k
from .laplace import laplace_noise, sample_direction, sample_radius
from .mbr import POSTPROCESSORS, MBRDecoder
from .word_level import WordLevelMechanism, composition

__all__ = ["CMP", "POSTPROCESSORS", "MBRDecoder", "Mahalanobis", "Vickrey"]

CMP_REFERENCE = (
    "Feyisetan, Balle, Drake & Diethe, 'Privacy- and Utility-Preserving Textual Analysis via Calibrated "
    "Multivariate Perturbations', WSDM 2020 (Algorithm 1; n-dim Laplace noise sampled as in "
    "Fernandes et al. 2019, Thm 4.1)"
)
MAHALANOBIS_REFERENCE = (
    "Xu, Aggarwal, Feyisetan & Teissier, 'A Differentially Private Text Perturbation Method Using a "
    "Regularized Mahalanobis Metric', PrivateNLP@EMNLP 2020 (Algorithm 1 and its privacy theorem)"
)
VICKREY_REFERENCE = (
    "Xu, Aggarwal, Feyisetan & Teissier, 'On a Utilitarian Approach to Privacy Preserving Text Generation', "
    "PrivateNLP@NAACL 2021 (Vickrey mechanism: first/second nearest neighbour with threshold t)"
)
class _NoisyVector(WordLevelMechanism):
    """Noise in embedding space, then a release that reads only the noisy vector (CMP, Mahalanobis, Vickrey).

    Shared machinery: the float64 vectors, CMP's n-dimensional Laplace noise (a subclass may
    shape it), ``core = release(noisy_vectors(ids))`` and the Euclidean log-ratio bound.
    """

    def _setup(self, emb: Embeddings) -> None:
        self._v64 = emb.vectors.astype(np.float64)
        self._sq = np.einsum("ij,ij->i", self._v64, self._v64)

    def noise(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``(count, n)`` noise vectors of this mechanism."""
        return laplace_noise(count, self.embeddings_.dim, self.epsilon_, rng)

    def noisy_vectors(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``e_w + Z`` for each row of ``ids`` (``(n,)`` -> ``(n, d)``)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        return self._v64[ids] + self.noise(ids.size, rng)

    def release(self, noisy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The released rows for noisy vectors: a function of the noisy vectors (and public data) only."""
        raise NotImplementedError

    def core(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noise, then :meth:`release` (pure given the fitted parameters, ``ids`` and ``rng``)."""
        return self.release(self.noisy_vectors(ids, rng), rng)

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon ||e_x - e_x2||_2``."""
        self._ensure_fitted()
        return float(self.epsilon_ * np.linalg.norm(self._v64[x] - self._v64[x2]))


class _Decoded(_NoisyVector):
    """A noisy-vector mechanism released by a nearest-word decoder (parameter ``decoder``)."""

    decoder: str = "exact"

    def _setup(self, emb: Embeddings) -> None:
        super()._setup(emb)
        self.decoder_: Decoder = self._make_decoder(emb)

    def _make_decoder(self, emb: Embeddings) -> Decoder:
        check_choice(self.decoder, "decoder", DECODERS)
        return make_decoder(self.decoder, emb.vectors)

    def release(self, noisy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The nearest word of each noisy vector (the decoder gets no source rows)."""
        return self.decoder_.decode(noisy)

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out["decoder"] = getattr(self.decoder_, "name", self.decoder)
        return out


class CMP(_Decoded):
    """Calibrated multivariate perturbation (CMP), per word, in place.

    Each in-vocabulary word ``w`` becomes ``argmin_u ||e_u - (e_w + Z)||`` where ``Z`` has
    density proportional to ``exp(-epsilon ||Z||)`` in R^n (radius ~ Gamma(n, 1/epsilon),
    direction uniform; Feyisetan et al. 2020, Algorithm 1). Decoding is exact and gets
    no source rows (the known-source shortcut of the decoders is opt-in elsewhere
    because its running time depends on the input).

    Guarantee: epsilon*d_2-privacy per word (metric local DP): for any words w, w'
    and any output u, ``P(u | w) <= exp(epsilon ||e_w - e_w'||) P(u | w')``. Over a
    document of T words: ``exp(epsilon sum_i ||e_{w_i} - e_{w'_i}||)`` between two
    documents of equal length (position-matched). Unlike Earth Mover's privacy the
    output keeps word order (text, not a bag), so only the position-matched bound holds.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per unit of embedding distance (> 0).
    embeddings : Embeddings, path or None
        Vocabulary; ``None`` loads GloVe 6B 50d (400,000 words).
    vocab_size : int, optional
        Keep the K most frequent words.
    stop_words : "english", iterable or None
        Removed before the mechanism (never released).
    seed : int, Generator, SeedSequence or None
        ``None`` uses fresh OS entropy.
    decoder : str
        Exact nearest-word decoder (``"exact"``, ``"faiss-exact"``, ``"torch"``) or an approximate
        one (``"hnsw"``, ``"ivf"``; opt-in); ignored when ``postprocess`` is set.
    postprocess : {None, "mbr"}
        ``"mbr"``: the :class:`MBRDecoder` post-processing for semantic neighbours.
    candidates : int
        Candidate words of the ``"mbr"`` post-processing.

    Examples
    --------
    >>> emb = Embeddings(["cat", "dog", "car"], np.array([[0, 0], [0, 1], [9, 9]]), name="toy")
    >>> CMP(epsilon=1e6, embeddings=emb, stop_words=None, seed=0).privatize("dog car unicorn").text
    'dog car'
    """

    name = "cmp"
    reference = CMP_REFERENCE

    postprocess: str | None = None
    candidates: int = 64

    def _make_decoder(self, emb: Embeddings) -> Decoder:
        if self.postprocess is not None:
            check_choice(self.postprocess, "postprocess", POSTPROCESSORS)
            return MBRDecoder(emb.vectors, epsilon=self.epsilon_, candidates=self.candidates)
        return super()._make_decoder(emb)

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        if self.postprocess is not None:
            out["postprocess"] = self.postprocess
            out["candidates"] = self.candidates
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        post = (
            f" Decoding uses the '{self.postprocess}' post-processing (a function of the noisy vector only), "
            "so the bound is unchanged."
            if self.postprocess
            else ""
        )
        return (
            f"epsilon*d_2-privacy per word with epsilon={e:g} ({self.name}; Feyisetan et al. 2020, Algorithm 1): "
            f"for any two words w, w' of the public vocabulary ({emb.name}, {emb.vocab_size} words, n={emb.dim}) "
            f"and any output word, the output probability differs by a factor <= exp({e:g}*||e_w - e_w'||_2)."
            f"{post} " + composition(f"{e:g}*||e_(w_i) - e_(w'_i)||_2")
            + " " + self._not_covered()
        )


class Mahalanobis(_Decoded):
    """Regularised-Mahalanobis perturbation (elliptical noise), per word, in place.

    With ``Sigma`` the sample covariance of the (public) embedding vectors, scaled to
    trace n, and ``Sigma_lambda = lambd * Sigma + (1 - lambd) * I``, each word ``w`` becomes
    the nearest word (Euclidean) to ``e_w + Y Sigma_lambda^(1/2) U`` with ``Y ~ Gamma(n, 1/epsilon)``
    and ``U`` uniform on the unit sphere (Xu et al. 2020, Algorithm 1). The noise
    density is proportional to ``exp(-epsilon ||Sigma_lambda^(-1/2) z||)``. The square root
    is computed once (symmetric eigendecomposition) at ``fit``. Scaling ``Sigma`` to trace n
    puts both terms of the mix on the same scale and keeps the expected squared
    noise norm equal to CMP's for every lambda.

    Guarantee: epsilon*d_RM-privacy per word, ``d_RM(w, w') = ||Sigma_lambda^(-1/2) (e_w - e_w')||``
    (the regularised Mahalanobis distance); since the smallest eigenvalue of
    ``Sigma_lambda`` is at least ``1 - lambd``, this is at most
    ``epsilon / sqrt(lambda_min) * ||e_w - e_w'||_2``. Over a document: the sum over positions.

    Parameters
    ----------
    lambd : float
        The mix lambda in [0, 1] (0 = CMP's spherical noise). Default 0.2 (mldp-text's default).
    (other parameters as :class:`CMP`; no ``postprocess``.)

    Examples
    --------
    >>> emb = Embeddings(["a1", "b2", "c3"], np.array([[0.0, 0.0], [1.0, 0.5], [4.0, 1.0]]), name="toy")
    >>> m = Mahalanobis(epsilon=1e6, embeddings=emb, stop_words=None, seed=0).fit()
    >>> m.privatize_ids(np.array([2, 0, 1])).tolist()
    [2, 0, 1]
    """

    name = "mahalanobis"
    reference = MAHALANOBIS_REFERENCE
    metric = "regularized-mahalanobis"

    lambd: float = 0.2

    def _setup(self, emb: Embeddings) -> None:
        super()._setup(emb)
        self.sqrt_cov_, self.inv_sqrt_cov_ = regularized_sqrt(self._v64, self.lambd)

    def noise(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``Y Sigma_lambda^(1/2) U``: Gamma radius times a uniform direction, then the linear map."""
        n = self.embeddings_.dim
        r = sample_radius(count, n, self.epsilon_, rng)
        u = sample_direction(count, n, rng)
        return (u * r[:, None]) @ self.sqrt_cov_

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()
        out["lambd"] = float(self.lambd)
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        lam_min = float(np.linalg.eigvalsh(self.sqrt_cov_ @ self.sqrt_cov_).min())
        return (
            f"epsilon*d_RM-privacy per word with epsilon={e:g}, lambda={float(self.lambd):g} (Xu et al. 2020): for any "
            f"two words w, w' of the public vocabulary ({emb.name}, {emb.vocab_size} words, n={emb.dim}) and any "
            f"output word, the output probability differs by a factor <= exp({e:g}*d_RM(w, w')), "
            "d_RM(w, w') = ||Sigma_lambda^(-1/2)(e_w - e_w')||_2 with Sigma_lambda = lambda*Sigma + (1-lambda)*I and "
            "Sigma the covariance of the public embeddings scaled to trace n; hence <= "
            f"exp({e / np.sqrt(lam_min):.4g}*||e_w - e_w'||_2). "
            + composition(f"{e:g}*d_RM(w_i, w'_i)")
            + " " + self._not_covered()
        )

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon d_RM(x, x2)``."""
        self._ensure_fitted()
        diff = (self._v64[x] - self._v64[x2]) @ self.inv_sqrt_cov_
        return float(self.epsilon_ * np.linalg.norm(diff))


def regularized_sqrt(vectors: np.ndarray, lambd: float) -> tuple[np.ndarray, np.ndarray]:
    """``Sigma_lambda^(1/2)`` and ``Sigma_lambda^(-1/2)`` (symmetric) for the embedding matrix ``vectors``.

    ``Sigma`` is the sample covariance of the rows scaled to trace n; ``Sigma_lambda = lambd Sigma + (1-lambd) I``.

    >>> s, inv = regularized_sqrt(np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [2.0, 1.0]]), 0.0)
    >>> np.allclose(s, np.eye(2)), np.allclose(s @ inv, np.eye(2))
    (True, True)
    """
    if isinstance(lambd, bool) or not isinstance(lambd, (int, float, np.floating)):
        raise ParameterTypeError(f"lambd must be a real number in [0, 1], got {type(lambd).__name__}")
    lam = float(lambd)
    if not 0.0 <= lam <= 1.0:
        raise ParameterError(f"lambd must lie in [0, 1], got {lambd!r}")
    v = np.asarray(vectors, dtype=np.float64)
    n = v.shape[1]
    if v.shape[0] < 2:
        raise ParameterError("the Mahalanobis mechanism needs at least 2 vocabulary words to estimate a covariance")
    cov = np.cov(v, rowvar=False).reshape(n, n)
    tr = float(np.trace(cov))
    cov = cov * (n / tr) if tr > 0 else np.eye(n)
    s = lam * cov + (1.0 - lam) * np.eye(n)
    w, q = np.linalg.eigh(s)
    if w.min() <= 1e-12 * max(w.max(), 1.0):
        raise ParameterError(
            "the regularised covariance is singular (lambd=1 with a degenerate embedding covariance); use lambd < 1"
        )
    root = (q * np.sqrt(w)) @ q.T
    inv = (q / np.sqrt(w)) @ q.T
    return root, inv


class Vickrey(_NoisyVector):
    """The Vickrey mechanism: first or second nearest neighbour of the noisy vector.

    The noisy vector ``z`` is CMP's (``lambd=None``) or the Mahalanobis mechanism's
    (``lambd`` given). With ``w1, w2`` its two nearest words at distances ``d1 <= d2``, the
    output is ``w1`` with probability ``(1-t) d2 / (t d1 + (1-t) d2)`` and ``w2`` otherwise
    (Xu et al. 2021). ``t = 0`` is CMP; ``t = 0.5`` weighs the two by inverse distance; larger
    ``t`` favours the second neighbour (the first is often the input word itself).
    The choice depends only on ``z`` and the public vocabulary (the input word is *not*
    excluded from the neighbours, which some implementations do; that would make
    the output depend on the input beyond ``z``).

    Guarantee: that of the noise (post-processing): epsilon*d_2-privacy per word
    (epsilon*d_RM with ``lambd``). The two nearest words are found by a float32 search
    with float64 re-ranking of the best ``2 + 6`` candidates.

    Examples
    --------
    >>> emb = Embeddings(["x", "y", "z"], np.array([[0.0], [1.0], [3.0]]), name="toy")
    >>> Vickrey(epsilon=1e6, t=1.0, embeddings=emb, stop_words=None, seed=0).fit().privatize_ids([0, 2]).tolist()
    [1, 1]
    """

    name = "vickrey"
    reference = VICKREY_REFERENCE

    t: float = 0.5
    lambd: float | None = None

    def _setup(self, emb: Embeddings) -> None:
        if isinstance(self.t, bool) or not isinstance(self.t, (int, float, np.floating)) or not 0 <= float(self.t) <= 1:
            raise ParameterError(f"t must be a number in [0, 1], got {self.t!r}")
        if emb.vocab_size < 2:
            raise ParameterError("the Vickrey mechanism needs a vocabulary of at least 2 words")
        self._v64 = emb.vectors.astype(np.float64)
        self._sq = np.einsum("ij,ij->i", self._v64, self._v64)
        if self.lambd is not None:
            self.sqrt_cov_, self.inv_sqrt_cov_ = regularized_sqrt(self._v64, self.lambd)
        self._aug32 = augment32(emb.vectors, self._sq)

    def noise(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """CMP's noise, or the Mahalanobis noise when ``lambd`` is set."""
        if self.lambd is None:
            return super().noise(count, rng)
        n = self.embeddings_.dim
        r = sample_radius(count, n, self.epsilon_, rng)
        return (sample_direction(count, n, rng) * r[:, None]) @ self.sqrt_cov_

    def release(self, noisy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Two nearest words of each noisy vector, then the threshold rule (noisy vector only)."""
        rows, dist = nearest_k(noisy, self.embeddings_.vectors, 2, augmented32=self._aug32)
        t = float(self.t)
        d1, d2 = dist[:, 0], dist[:, 1]
        den = t * d1 + (1.0 - t) * d2
        with np.errstate(invalid="ignore", divide="ignore"):
            p1 = np.where(den > 0, (1.0 - t) * d2 / np.where(den > 0, den, 1.0), 1.0 - t)
        first = rng.random(rows.shape[0]) < p1
        return np.where(first, rows[:, 0], rows[:, 1])

    def _public_params(self) -> dict[str, object]:
        out = super()._public_params()  # Vickrey's own decoding: no decoder parameter
        out["t"] = float(self.t)
        if self.lambd is not None:
            out["lambd"] = float(self.lambd)
        return out

    def _statement(self) -> str:
        e = self.epsilon_
        emb = self.embeddings_
        if self.lambd is None:
            metric = "||e_w - e_w'||_2"
            doc_metric = "||e_(w_i) - e_(w'_i)||_2"
            kind = "epsilon*d_2-privacy"
            noise = "CMP's n-dimensional Laplace noise"
        else:
            metric = "d_RM(w, w')"
            doc_metric = "d_RM(w_i, w'_i)"
            kind = "epsilon*d_RM-privacy"
            noise = f"regularised-Mahalanobis noise (lambda={float(self.lambd):g}, d_RM as for 'mahalanobis')"
        return (
            f"{kind} per word with epsilon={e:g} (vickrey, t={float(self.t):g}; Xu et al. 2021): the noisy vector gets "
            f"{noise}, and the choice between its two nearest words ({emb.name}, {emb.vocab_size} words, n={emb.dim}) "
            f"is post-processing of the noisy vector, so for any two words w, w' and any output the probability differs "
            f"by a factor <= exp({e:g}*{metric}). "
            + composition(f"{e:g}*{doc_metric}")
            + " " + self._not_covered()
        )

    def log_ratio_bound(self, x: int, x2: int) -> float:
        """``epsilon ||e_x - e_x2||`` (or ``epsilon d_RM`` with ``lambd``)."""
        self._ensure_fitted()
        diff = self._v64[x] - self._v64[x2]
        if self.lambd is not None:
            diff = diff @ self.inv_sqrt_cov_
        return float(self.epsilon_ * np.linalg.norm(diff))
