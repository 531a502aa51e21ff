"""Sensitivity sampling for user-level topic mining (thesis Algorithm 1).

Rubinstein & Aldà, "Pain-free random differential privacy with sensitivity
sampling", ICML 2017. Instead of a (here unbounded) global sensitivity, draw
``m`` pairs of neighbouring databases from a distribution ``P``, compute the
output distance of each pair, and use the ``k``-th order statistic ``Δ_s``.
With

* ``rho = exp(W_{-1}(-gamma / (2 sqrt(e))) + 1/2)`` (lower branch of Lambert W),
* ``m = ceil(ln(1/rho) / (2 (gamma - rho)^2))``,
* ``gamma_lo = rho + sqrt(ln(1/rho) / (2 m))``,
* ``k = ceil(m (1 - gamma + gamma_lo))`` (1-indexed),

any mechanism that is (eps, delta)-DP for sensitivity ``Δ_s`` is
(eps, delta, gamma)-*random* DP: with probability at least ``1 - gamma`` over
the draw of a neighbouring pair ``D, D' ~ P^{N+1}`` *and* of the ``m`` samples,
the (eps, delta)-DP inequality holds for that pair. It is **not** DP for every
pair of neighbours: a user whose documents move the model more than ``Δ_s``
(a ``gamma``-rare event under ``P``) is not protected at level eps. For the
usual ``gamma`` the order statistic is the sample maximum (``k = m``).

What is sampled here
--------------------
* ``P`` is the uniform distribution over the corpus's users (the thesis's
  choice). A database is ``N`` users drawn i.i.d. from ``P`` (with replacement,
  as the theorem requires), each contributing all of their (bounded, see
  :class:`~textdp.topics.models.UserCorpus`) documents.
* Neighbours are user-level. ``"add-remove"`` (default): ``D = S + {u}``,
  ``D' = S`` with ``S`` the ``N - 1`` shared users, i.e. one user's whole
  document set is added or removed. ``"replace"`` (the thesis's Algorithm 1):
  ``D = S + {u}``, ``D' = S + {v}``.
* Each database is fitted by the released function itself
  (:func:`~textdp.topics.models.fit_database`): with the corpus vocabulary,
  the vocabulary is rebuilt from the database's own documents, as the release
  builds it from the corpus (issue 19: a vocabulary held fixed at the corpus's
  measured a different function, 0.051 against 0.069 on 40 Enron users).
* The distance is the Frobenius norm of the difference of the two **released**
  ``m x n`` matrices (:func:`~textdp.topics.models.released_matrix_distance`):
  each fit's top ``m`` topics ordered by prevalence, each row its top ``n``
  probabilities in decreasing order, compared position by position -- exactly
  the function the mechanism adds noise to, so the sampled value is the L2
  sensitivity the Gaussian mechanism needs. (Earlier versions sampled a
  distance after Hungarian topic alignment, a different function: issue 9 found
  the released matrices' own distance above it in 27 % of neighbouring pairs of a
  synthetic 60-user corpus. Caches of that version are not reused:
  :data:`CACHE_VERSION`.)

Per-database size
-----------------
The guarantee is for databases of ``N`` users drawn from ``P``; by default ``N``
is the number of users of the corpus, so a sampled database has the size of the
real one (valid without extrapolation). Cost is controlled instead by the
per-user contribution bound ``max_docs_per_user``, which is part of the
released function itself (release and sampler both use it), so it does not
weaken the statement. A smaller ``n_users`` makes sampling cheaper but then the
statement is only for databases of that many users; a one-user change moves a
smaller database more, so it is usually conservative, but that is a heuristic,
and the record says which ``N`` was used.

Caveats stated in every release record: ``Δ_s`` is computed from the private
corpus (``P`` is its empirical user distribution) and is itself released
without noise; the fits use a fixed seed, so ``Δ_s`` is the sensitivity of that
deterministic function.

Affordability and determinism
-----------------------------
Fits are cold, from a fixed data-independent initialisation: warm-starting a
neighbour from the other fit would change the function being measured (it
would hide local-optimum jumps that the real release is exposed to), so it is
not done. Instead: the corpus is vectorised once and databases are row-slices
of one sparse matrix; the pairs are a pure job function mapped over sample
indices by a :class:`textdp.backend.Backend` (in process by default; a Dask
cluster through :func:`textdp.engines.get_backend`); sample ``i`` draws its users
from its own generator ``textdp._rng.spawn(seed, n)[i]``, which depends only on
the seed and ``i``, so a seed gives the same samples under any backend or
scheduling. The sampler's randomness is its own stream: give it a seed (or a
generator spawned for it), never the release-noise generator. The raw
per-sample distances (all requested matrix sizes from the same fits) are cached
per (corpus, model, neighbours, N, sizes); the cache file holds the samples and
nothing else (no seed, no generator output). Samples are i.i.d., so a cache
built for a large ``gamma`` (few samples) is extended with fresh samples, not
recomputed, for a smaller one.

The cache is private state (issue 39): its folder (``cache_dir``, the CLI's ``--cache-dir``)
must pass the ancestor rule of :func:`textdp._cache.open_private_dir` (refused otherwise, before
any work), and a cache file is read once through that checked descriptor and used only if its
HMAC under the per-user key (:func:`textdp._cache.write_keyed`) verifies: samples planted or
edited by anyone else (1e-12 distances would shrink the noise to nothing) are ignored, with a
one-line :class:`~textdp.errors.CacheWarning`, and drawn again.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import lambertw

from .._cache import PrivateDir, cache_dir, keyed_digest, load_keyed, open_private_dir, write_keyed
from .._rng import spawn
from .._validation import check_choice, check_positive_int, check_probability
from ..backend import Backend, LocalBackend
from ..errors import ParameterError, ParameterTypeError
from ..progress import ProgressCallback
from .models import TopicModel, UserCorpus, fit_database, released_matrix_distance, topic_rows_distance
from .names import NEIGHBOURS

__all__ = [
    "CACHE_VERSION",
    "SampledSensitivity",
    "SamplerParameters",
    "SensitivitySampler",
    "default_cache_dir",
    "draw_neighbours",
    "sampler_parameters",
    "worst_case_sensitivity",
]

#: Version of the cached samples (2: distance of the released matrices, no stored entropy;
#: 3: the corpus vocabulary rebuilt for every sampled database).
CACHE_VERSION = 3


def worst_case_sensitivity(m: int) -> float:
    """Global L2 (Frobenius) sensitivity ``sqrt(2m)`` of any released ``m x n`` topic matrix.

    No sampling, no γ, nothing computed from the data: with it the Gaussian
    mechanisms give ordinary (ε, δ)-DP for user-level neighbours, whatever the
    topic model, the vocabulary (corpus-built or public) or the neighbouring
    databases.

    Proof. Each released row ``p`` (the top ``n`` probabilities of one topic) is
    a *sub-probability vector*: ``p_j >= 0`` and ``sum_j p_j <= 1``. For two such
    vectors ``p, q`` (the row ``i`` of two neighbouring databases' releases,
    whatever their topics, keywords or vocabularies):

    * L1: ``||p - q||_1 <= ||p||_1 + ||q||_1 <= 2`` (triangle inequality), the
      bound the Laplace baseline uses for each row, ``2m`` in all;
    * L2: ``||p - q||_2^2 = ||p||_2^2 + ||q||_2^2 - 2<p, q>
      <= ||p||_2^2 + ||q||_2^2`` because ``<p, q> >= 0`` (non-negative entries),
      and ``||p||_2^2 = sum_j p_j^2 <= (max_j p_j) sum_j p_j <= 1``; so
      ``||p - q||_2 <= sqrt(2)``.

    The Frobenius norm adds the rows' squares: ``||P - Q||_F^2 <= m * 2``, so
    ``||P - Q||_F <= sqrt(2m)``. (Rounding to the release grid adds
    ``g sqrt(mn)``, which the mechanisms add themselves.)

    How tight: the row bound ``sqrt(2)`` is attained by ``p = e_1``, ``q = e_2``,
    but the released rows are sorted in decreasing order, which excludes that
    pair; a row that moves from ``(1, 0, ..., 0)`` (a topic on one word) to a
    nearly flat topic over a large vocabulary moves by almost 1, so the bound is
    within a factor ``sqrt(2)`` of what the released function can reach, and
    any bound below ``sqrt(m)`` is wrong (``tests/test_topics_vocab.py`` builds
    the violating pair). ``sqrt(2m)`` is used because it is proven for every
    sub-probability row without relying on the sort.

    >>> worst_case_sensitivity(5) == math.sqrt(10)
    True
    """
    return math.sqrt(2.0 * check_positive_int(m, "m (topics)"))



@dataclass(frozen=True)
class SamplerParameters:
    """Sample size and order statistic of the sensitivity sampler for ``gamma``."""

    gamma: float
    rho: float
    n_samples: int
    gamma_lo: float
    order_statistic: int


def sampler_parameters(gamma: float) -> SamplerParameters:
    """Rubinstein & Aldà's optimal ``rho``, sample size ``m`` and index ``k``.

    >>> p = sampler_parameters(0.1)
    >>> p.n_samples, p.order_statistic
    (285, 285)
    >>> round(p.rho, 5)
    0.00974
    """
    g = check_probability(gamma, "gamma")
    if g >= 0.5:
        raise ParameterError(f"gamma must be < 0.5 for the sensitivity sampler, got {gamma!r}")
    rho = float(np.exp(lambertw(-g / (2.0 * math.sqrt(math.e)), k=-1).real + 0.5))
    if not (0.0 < rho < g):
        raise ParameterError(f"no valid rho for gamma={gamma!r}")
    m = math.ceil(math.log(1.0 / rho) / (2.0 * (g - rho) ** 2))
    gamma_lo = rho + math.sqrt(math.log(1.0 / rho) / (2.0 * m))
    k = math.ceil(m * (1.0 - g + gamma_lo))
    k = min(max(k, 1), m)
    return SamplerParameters(gamma=g, rho=rho, n_samples=m, gamma_lo=gamma_lo, order_statistic=k)


@dataclass(frozen=True)
class SampledSensitivity:
    """The sampled L2 (Frobenius) sensitivity ``Δ_s`` for one matrix size (a *private* record).

    ``value`` is the ``order_statistic``-th smallest of the first ``n_samples``
    sampled distances. It yields (eps, delta, gamma)-random DP, see the module
    docstring; ``statement`` says so in words. Everything here is computed from
    the private corpus (the value, the samples, the user counts, the timing):
    it belongs in a private report, never beside a release.
    """

    value: float
    gamma: float
    n_samples: int
    order_statistic: int
    rho: float
    size: tuple[int, int]
    per_db_users: int
    neighbours: str
    corpus_users: int
    max_docs_per_user: int | None
    model: dict[str, object]
    samples: tuple[float, ...]
    seconds: float
    cache_hit: bool

    @property
    def statement(self) -> str:
        cap = ("all of their documents" if self.max_docs_per_user is None
               else f"at most {self.max_docs_per_user} documents each")
        kind = "one user added or removed" if self.neighbours == "add-remove" else "one user replaced"
        return (
            f"L2 (Frobenius) sensitivity {self.value:.6g} of the released {self.size[0]}x{self.size[1]} "
            f"topic-keyword matrix, sampled (Rubinstein & Alda 2017): order statistic "
            f"{self.order_statistic} of {self.n_samples} neighbouring pairs ({kind}) of databases of "
            f"{self.per_db_users} users drawn uniformly with replacement from the corpus's "
            f"{self.corpus_users} users ({cap}), each fitted by the released function (vocabulary "
            f"included); holds for a random neighbouring pair with "
            f"probability >= {1 - self.gamma:.4g}. The sensitivity value itself is computed from "
            f"the private corpus and is not privatised."
        )

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "gamma": self.gamma, "n_samples": self.n_samples,
                "order_statistic": self.order_statistic, "rho": self.rho, "size": list(self.size),
                "per_db_users": self.per_db_users, "neighbours": self.neighbours,
                "corpus_users": self.corpus_users, "max_docs_per_user": self.max_docs_per_user,
                "model": self.model, "seconds": self.seconds, "cache_hit": self.cache_hit,
                "distance": "Frobenius distance of the released matrices", "statement": self.statement}


#: what the sampler's cache folder is called in a refusal (``--cache-dir``, or ``<cache>/topics``)
_CACHE_WHAT = "the sensitivity cache folder (--cache-dir)"
#: the keyed MAC's purpose: a cache file's samples are used only if this user's textdp wrote them
_CACHE_PURPOSE = "textdp topics sensitivity samples"


def default_cache_dir() -> Path:
    """The ``topics`` subdirectory of :func:`textdp._cache.cache_dir` (made ``0700`` when it can be)."""
    try:
        return cache_dir("topics", create=True)
    except OSError:  # a read-only cache: samples are not stored (their write fails as it always did)
        return cache_dir("topics")


# --- the job (pure, runs wherever the backend puts it) ---------------------------------


@dataclass(frozen=True)
class _Context:
    """Everything a sample needs except its own generator (shipped to workers with each chunk)."""

    corpus: UserCorpus
    model: TopicModel
    sizes: tuple[tuple[int, int], ...]
    n_users: int
    neighbours: str
    rows: bool = False


@dataclass(frozen=True)
class _Chunk:
    context: _Context
    indices: tuple[int, ...]
    generators: tuple[np.random.Generator, ...]


def draw_neighbours(n_corpus_users: int, n_users: int, neighbours: str,
                    gen: np.random.Generator) -> tuple[list[int], list[int]]:
    """User multisets ``(D, D')`` of one neighbouring pair (indices into the corpus's users).

    ``n_users`` users are drawn i.i.d. uniformly with replacement; ``D`` is the
    ``n_users - 1`` shared users plus ``u``; ``D'`` is the shared users alone
    (``"add-remove"``) or plus another draw ``v`` (``"replace"``).

    >>> from textdp._rng import make_rng
    >>> a, b = draw_neighbours(10, 4, "add-remove", make_rng(0))
    >>> len(a), len(b), a[:3] == b
    (4, 3, True)
    """
    if neighbours == "add-remove" and n_users < 2:
        raise ParameterError("add-remove sampling needs databases of at least 2 users")
    draw = gen.integers(0, n_corpus_users, size=n_users + 1)
    shared = [int(x) for x in draw[: n_users - 1]]
    u, v = int(draw[n_users - 1]), int(draw[n_users])
    return [*shared, u], (shared if neighbours == "add-remove" else [*shared, v])


def _sample_one(ctx: _Context, gen: np.random.Generator) -> list[float]:
    a, b = draw_neighbours(ctx.corpus.n_users, ctx.n_users, ctx.neighbours, gen)
    # the released function itself, vocabulary included (rebuilt for each database: issue 19)
    tw_a, prev_a, _ = fit_database(ctx.corpus, ctx.model, a)
    tw_b, prev_b, _ = fit_database(ctx.corpus, ctx.model, b)
    if ctx.rows:  # whole rows over the public vocabulary (the covered release, keywords from noisy values)
        return [float(x) for x in topic_rows_distance(tw_a, prev_a, tw_b, prev_b, [m for m, _ in ctx.sizes])]
    return [float(x) for x in released_matrix_distance(tw_a, prev_a, tw_b, prev_b, ctx.sizes)]


def _sample_chunk(chunk: _Chunk) -> list[list[float]]:
    """The job: distances of the neighbouring pairs ``chunk.indices`` (pure; one generator per index)."""
    return [_sample_one(chunk.context, g) for g in chunk.generators]


def _streams(seed: int | np.random.SeedSequence | np.random.Generator | None, n: int) -> list[np.random.Generator]:
    """``n`` generators, the i-th depending only on ``seed`` and ``i`` (``textdp._rng.spawn``)."""
    if isinstance(seed, np.random.Generator):
        # a 256-bit seed drawn from the given generator (kept in memory only, never stored)
        seed = np.random.SeedSequence([int(x) for x in seed.integers(0, 2**32, size=8, dtype=np.uint64)])
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return spawn(seed, n)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ParameterTypeError(f"seed must be None, an int, a SeedSequence or a Generator, got {type(seed).__name__}")
    return spawn(int(seed), n)


# --- sampler -----------------------------------------------------------------------
class SensitivitySampler:
    """Sample the user-level L2 sensitivity of a topic model's released matrix.

    Parameters
    ----------
    corpus : UserCorpus
    model : TopicModel
        Deterministic topic model (the same one the release uses).
    sizes : sequence of (m, n)
        Matrix sizes to measure from the same fits (``m <= n_topics``).
    n_users : int or None
        Users per sampled database ``N`` (default: the corpus's user count).
    neighbours : {"add-remove", "replace"}
    backend : Backend or None
        Where the pairs are fitted (:class:`textdp.backend.Backend`); default
        in this process. ``textdp.engines.get_backend("dask", workers=k)`` or a
        ``--scheduler`` address runs them on a Dask cluster; the result is the
        same for a seed.
    cache_dir : path or None
        Where to cache raw sample distances; ``None`` disables caching.
    chunk_size : int or None
        Pairs per job (default: 1 in process; about four jobs per worker,
        at most 10 pairs each, for a backend with ``n_workers()``).
    rows : bool
        Measure the whole top-``m`` rows over the public vocabulary
        (:func:`~textdp.topics.models.topic_rows_distance`; the covered release, whose keywords are
        read off the noisy values) instead of the model's ``m x n`` keyword values; each size's
        ``n`` is then the vocabulary size. Needs a public vocabulary (the same columns for every database).

    Examples
    --------
    >>> from textdp.topics import SklearnLDA, UserCorpus
    >>> c = UserCorpus.from_texts(["gas price power", "game team win", "gas power deal", "team coach win"],
    ...                           ["a", "b", "c", "d"], min_df=1, max_df=1.0)
    >>> s = SensitivitySampler(corpus=c, model=SklearnLDA(n_topics=2, max_iter=2), sizes=[(2, 2)])
    >>> s.draw(3, seed=1)[0].shape
    (3, 1)
    """

    def __init__(self, *, corpus: UserCorpus, model: TopicModel,
                 sizes: Sequence[tuple[int, int]] = ((10, 10),), n_users: int | None = None,
                 neighbours: str = "add-remove", backend: Backend | None = None,
                 cache_dir: str | Path | None = None, chunk_size: int | None = None, rows: bool = False) -> None:
        if not isinstance(corpus, UserCorpus):
            raise ParameterError(f"corpus must be a UserCorpus, got {type(corpus).__name__}")
        if not isinstance(model, TopicModel):
            raise ParameterError("model must implement TopicModel (fit(X) and settings())")
        self.corpus = corpus
        self.model = model
        self.sizes = [(check_positive_int(m, "m"), check_positive_int(n, "n")) for m, n in sizes]
        if not self.sizes:
            raise ParameterError("sizes must name at least one (m, n)")
        self.n_users = corpus.n_users if n_users is None else check_positive_int(n_users, "n_users", 2)
        self.neighbours = check_choice(neighbours, "neighbours", NEIGHBOURS)
        if backend is not None and not isinstance(backend, Backend):
            raise ParameterTypeError(f"backend must implement textdp.backend.Backend, got {type(backend).__name__}")
        self.backend: Backend = backend if backend is not None else LocalBackend()
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        if self.cache_dir is not None:
            try:
                self._open_cache().close()  # refused now, before any work, if it is not private
            except OSError:  # it cannot be made (e.g. a read-only cache): samples are drawn, not stored
                pass
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        self.rows = bool(rows)
        if self.rows and corpus.rule is not None:
            raise ParameterError("whole topic rows are compared over a public vocabulary; this corpus builds its "
                                 "vocabulary from the data (give a public vocabulary: --vocabulary glove:K or FILE)")

    # cache ---------------------------------------------------------------------
    def cache_key(self) -> str:
        """Keyed hash of everything the samples depend on (not of the seed: samples are i.i.d.).

        HMAC-SHA256 under the per-user secret (:func:`textdp._cache.keyed_digest`), since it
        names the cache file and covers the private corpus's fingerprint: a plain hash would
        let anyone who sees the name confirm a guessed corpus (issue 28 §3).
        """
        blob = json.dumps({"corpus": self.corpus.fingerprint, "model": self.model.settings(),
                           "neighbours": self.neighbours, "n_users": self.n_users,
                           "sizes": self.sizes, "version": CACHE_VERSION,
                           **({"rows": "whole rows"} if self.rows else {})}, sort_keys=True, default=str)
        return keyed_digest("textdp topics sensitivity cache", blob.encode())[:32]

    def _cache_path(self) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"sens-{self.cache_key()}.json"

    @property
    def cache_path(self) -> Path | None:
        """The cache file of this sampler's samples (``None`` without a cache)."""
        return self._cache_path()

    def cached_samples(self) -> int:
        """How many samples the cache holds now (they are reused, so a re-run resumes from them)."""
        return len(self._load())

    def _open_cache(self) -> PrivateDir:
        """The cache folder, opened once with every folder on its path checked (made ``0700`` if missing)."""
        assert self.cache_dir is not None
        return open_private_dir(self.cache_dir, what=_CACHE_WHAT, create=True)

    def _load(self) -> list[list[float]]:
        if self.cache_dir is None:
            return []
        try:
            path = self._cache_path()  # keyed: the per-user secret lives in the cache too
            assert path is not None
            with self._open_cache() as folder:  # read once, through the checked folder; used only if keyed by us
                raw = load_keyed(folder, path.name, _CACHE_PURPOSE, what="the sensitivity cache file")
        except OSError:  # no usable cache: nothing to reuse
            return []
        if raw is None:
            return []
        try:
            data = json.loads(raw.decode("utf-8"))
            if data.get("version") != CACHE_VERSION:
                return []
            samples = [list(map(float, r)) for r in data["samples"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []
        return samples if all(len(r) == len(self.sizes) for r in samples) else []

    def _save(self, samples: list[list[float]]) -> None:
        if self.cache_dir is None:
            return
        data = json.dumps({"version": CACHE_VERSION, "sizes": self.sizes, "samples": samples}).encode("utf-8")
        try:
            path = self._cache_path()
            assert path is not None
            with self._open_cache() as folder:
                write_keyed(folder, path.name, data, _CACHE_PURPOSE)
        except OSError:  # a read-only or unusable cache: the samples are not stored
            pass

    def _chunk(self, todo: int) -> int:
        if self.chunk_size is not None:
            return self.chunk_size
        workers = getattr(self.backend, "n_workers", None)
        if not callable(workers):
            return 1
        return max(1, min(10, math.ceil(todo / (4 * max(1, int(workers()))))))

    # sampling ------------------------------------------------------------------
    def draw(self, n_samples: int, *, seed: int | np.random.SeedSequence | np.random.Generator | None = None,
             progress: ProgressCallback | None = None) -> tuple[np.ndarray, bool, float]:
        """Return ``(samples, cache_hit, seconds)``; ``samples`` is ``n_samples x len(sizes)``.

        Sample ``i`` uses the generator ``textdp._rng.spawn(seed, n)[i]``; cached
        samples are reused and only the missing ones are drawn.
        """
        check_positive_int(n_samples, "n_samples")
        samples = self._load()
        have = len(samples)
        t0 = time.perf_counter()
        if have < n_samples:
            gens = _streams(seed, n_samples)
            ctx = _Context(corpus=self.corpus, model=self.model, sizes=tuple(self.sizes),
                           n_users=self.n_users, neighbours=self.neighbours, rows=self.rows)
            size = self._chunk(n_samples - have)
            starts = list(range(have, n_samples, size))
            chunks = [_Chunk(ctx, tuple(range(a, min(a + size, n_samples))),
                             tuple(gens[a:min(a + size, n_samples)])) for a in starts]
            results: dict[int, list[float]] = {}
            saved = have
            if progress is not None:
                progress(have, n_samples)

            def done(j: int, rows: list[list[float]]) -> None:
                nonlocal saved
                for i, r in zip(chunks[j].indices, rows):
                    results[i] = r
                if progress is not None:
                    progress(have + len(results), n_samples)
                k = saved
                while k in results:
                    k += 1
                if k - saved >= 25:  # checkpoint the contiguous prefix
                    self._save(samples + [results[i] for i in range(have, k)])
                    saved = k

            self.backend.map(_sample_chunk, chunks, done)
            samples = samples + [results[i] for i in range(have, n_samples)]
            self._save(samples)
        return np.asarray(samples[:n_samples], dtype=float), have >= n_samples, time.perf_counter() - t0

    def sample(self, gamma: float, *, seed: int | np.random.SeedSequence | np.random.Generator | None = None,
               progress: ProgressCallback | None = None) -> dict[tuple[int, int], SampledSensitivity]:
        """Sampled sensitivity for ``gamma``, one :class:`SampledSensitivity` per size."""
        params = sampler_parameters(gamma)
        samples, hit, seconds = self.draw(params.n_samples, seed=seed, progress=progress)
        out: dict[tuple[int, int], SampledSensitivity] = {}
        for s, size in enumerate(self.sizes):
            col = np.sort(samples[:, s])
            out[size] = SampledSensitivity(
                value=float(col[params.order_statistic - 1]), gamma=params.gamma,
                n_samples=params.n_samples, order_statistic=params.order_statistic, rho=params.rho,
                size=size, per_db_users=self.n_users, neighbours=self.neighbours,
                corpus_users=self.corpus.n_users, max_docs_per_user=self.corpus.max_docs_per_user,
                model=self.model.settings(), samples=tuple(float(x) for x in samples[:, s]),
                seconds=seconds, cache_hit=hit)
        return out
