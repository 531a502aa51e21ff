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
* The distance is the Frobenius norm of the difference of the two released
  matrices after Hungarian topic alignment
  (:func:`~textdp.topics.models.topic_matrix_distance`), taken in both
  directions (each fit's own top topics) and maximised; that is the L2
  sensitivity the Gaussian mechanism needs.

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

Affordability
-------------
Fits are cold, from a fixed data-independent initialisation: warm-starting a
neighbour from the other fit would change the function being measured (it
would hide local-optimum jumps that the real release is exposed to), so it is
not done. Instead: the corpus is vectorised once and databases are row-slices
of one sparse matrix; samples run in parallel processes (``n_jobs``); each
sample is seeded by its index (``SeedSequence(entropy, spawn_key=(i,))``), so
results do not depend on scheduling; and the raw per-sample distances (all
requested matrix sizes from the same fits) are cached per (corpus, model,
neighbours, N, sizes). Samples are i.i.d., so a cache built for a large
``gamma`` (few samples) is extended, not recomputed, for a smaller one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import lambertw

from ..io import atomic_writer
from .._cache import cache_dir
from .._rng import make_rng
from .._validation import check_choice, check_positive_int, check_probability
from ..errors import ParameterError
from .models import TopicModel, UserCorpus, topic_matrix_distance

__all__ = [
    "SamplerParameters",
    "sampler_parameters",
    "SampledSensitivity",
    "SensitivitySampler",
    "default_cache_dir",
]

NEIGHBOURS = ("add-remove", "replace")


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
    """The sampled L2 (Frobenius) sensitivity ``Δ_s`` for one matrix size.

    ``value`` is the ``order_statistic``-th smallest of the first ``n_samples``
    sampled distances. It yields (eps, delta, gamma)-random DP, see the module
    docstring; ``statement`` says so in words.
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
            f"L2 (Frobenius) sensitivity {self.value:.6g} of the {self.size[0]}x{self.size[1]} "
            f"topic-keyword matrix, sampled (Rubinstein & Alda 2017): order statistic "
            f"{self.order_statistic} of {self.n_samples} neighbouring pairs ({kind}) of databases of "
            f"{self.per_db_users} users drawn uniformly with replacement from the corpus's "
            f"{self.corpus_users} users ({cap}); holds for a random neighbouring pair with "
            f"probability >= {1 - self.gamma:.4g}. The sensitivity value itself is computed from "
            f"the private corpus and is not privatised."
        )

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "gamma": self.gamma, "n_samples": self.n_samples,
                "order_statistic": self.order_statistic, "rho": self.rho, "size": list(self.size),
                "per_db_users": self.per_db_users, "neighbours": self.neighbours,
                "corpus_users": self.corpus_users, "max_docs_per_user": self.max_docs_per_user,
                "model": self.model, "seconds": self.seconds, "cache_hit": self.cache_hit,
                "statement": self.statement}


def default_cache_dir() -> Path:
    """The ``topics`` subdirectory of :func:`textdp._cache.cache_dir`."""
    return cache_dir("topics")


# --- worker side -----------------------------------------------------------------
_STATE: dict[str, object] = {}


def _init_worker(corpus: UserCorpus, model: TopicModel, sizes: list[tuple[int, int]],
                 n_users: int, neighbours: str, entropy: int) -> None:
    _STATE.update(corpus=corpus, model=model, sizes=sizes, n_users=n_users,
                  neighbours=neighbours, entropy=entropy)


def _one_sample(i: int) -> tuple[int, list[float]]:
    corpus: UserCorpus = _STATE["corpus"]  # type: ignore[assignment]
    model: TopicModel = _STATE["model"]  # type: ignore[assignment]
    sizes: list[tuple[int, int]] = _STATE["sizes"]  # type: ignore[assignment]
    n_users = int(_STATE["n_users"])  # type: ignore[arg-type]
    gen = np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(int(_STATE["entropy"]), spawn_key=(i,))))  # type: ignore[arg-type]
    draw = gen.integers(0, corpus.n_users, size=n_users + 1)
    shared, u, v = draw[: n_users - 1], draw[n_users - 1], draw[n_users]
    tw_a, prev_a = model.fit(corpus.rows_for([*shared, u]))
    if _STATE["neighbours"] == "add-remove":
        if n_users - 1 == 0:
            raise ParameterError("add-remove sampling needs databases of at least 2 users")
        tw_b, prev_b = model.fit(corpus.rows_for(shared))
    else:
        tw_b, prev_b = model.fit(corpus.rows_for([*shared, v]))
    d_ab = topic_matrix_distance(tw_a, prev_a, tw_b, sizes)
    d_ba = topic_matrix_distance(tw_b, prev_b, tw_a, sizes)
    return i, np.maximum(d_ab, d_ba).tolist()


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
    n_jobs : int
        Worker processes.
    cache_dir : path or None
        Where to cache raw sample distances; ``None`` disables caching.
    """

    def __init__(self, *, corpus: UserCorpus, model: TopicModel,
                 sizes: Sequence[tuple[int, int]] = ((10, 10),), n_users: int | None = None,
                 neighbours: str = "add-remove", n_jobs: int = 1,
                 cache_dir: str | Path | None = None) -> None:
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
        self.n_jobs = check_positive_int(n_jobs, "n_jobs")
        self.cache_dir = None if cache_dir is None else Path(cache_dir)

    # cache ---------------------------------------------------------------------
    def cache_key(self) -> str:
        """Hash of everything the samples depend on (not of the seed: samples are i.i.d.)."""
        blob = json.dumps({"corpus": self.corpus.fingerprint, "model": self.model.settings(),
                           "neighbours": self.neighbours, "n_users": self.n_users,
                           "sizes": self.sizes, "version": 1}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def _cache_path(self) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"sens-{self.cache_key()}.json"

    def _load(self) -> tuple[int | None, list[list[float]]]:
        path = self._cache_path()
        if path is None or not path.is_file():
            return None, []
        try:
            data = json.loads(path.read_text())
            return int(data["entropy"]), [list(map(float, r)) for r in data["samples"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None, []

    def _save(self, entropy: int, samples: list[list[float]]) -> None:
        path = self._cache_path()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"entropy": entropy, "sizes": self.sizes, "model": self.model.settings(),
                   "corpus": self.corpus.fingerprint, "neighbours": self.neighbours,
                   "n_users": self.n_users, "samples": samples}
        with atomic_writer(path) as fh:
            json.dump(payload, fh)

    # sampling ------------------------------------------------------------------
    def draw(self, n_samples: int, *, rng: int | np.random.Generator | None = None,
             progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, bool, float]:
        """Return ``(samples, cache_hit, seconds)``; ``samples`` is ``n_samples x len(sizes)``."""
        check_positive_int(n_samples, "n_samples")
        entropy, samples = self._load()
        if entropy is None:
            entropy = int(make_rng(rng).integers(0, 2**63 - 1))
            samples = []
        have = len(samples)
        t0 = time.perf_counter()
        if have < n_samples:
            todo = list(range(have, n_samples))
            results: dict[int, list[float]] = {}
            args = (self.corpus, self.model, self.sizes, self.n_users, self.neighbours, entropy)
            if progress is not None:
                progress(have, n_samples)

            def done(j: int, d: list[float]) -> None:
                results[j] = d
                if progress is not None:
                    progress(have + len(results), n_samples)
                if len(results) % 25 == 0:  # checkpoint the contiguous prefix
                    k = have
                    while k in results:
                        k += 1
                    self._save(entropy, samples + [results[i] for i in range(have, k)])

            if self.n_jobs == 1:
                _init_worker(*args)
                for i in todo:
                    done(*_one_sample(i))
            else:
                with ProcessPoolExecutor(max_workers=self.n_jobs, initializer=_init_worker,
                                         initargs=args) as pool:
                    futures = [pool.submit(_one_sample, i) for i in todo]
                    for fut in as_completed(futures):
                        done(*fut.result())
            samples = samples + [results[i] for i in todo]
            self._save(entropy, samples)
        return np.asarray(samples[:n_samples], dtype=float), have >= n_samples, time.perf_counter() - t0

    def sample(self, gamma: float, *, rng: int | np.random.Generator | None = None,
               progress: Callable[[int, int], None] | None = None) -> dict[tuple[int, int], SampledSensitivity]:
        """Sampled sensitivity for ``gamma``, one :class:`SampledSensitivity` per size."""
        params = sampler_parameters(gamma)
        samples, hit, seconds = self.draw(params.n_samples, rng=rng, progress=progress)
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
