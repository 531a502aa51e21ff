"""POWER STUDIES ONLY: samplers that do not run a user's release (never used by a registered audit case).

These draw from a law the library *declares* or from the mechanism's internal step, which is fast
but never runs the code that releases: an audit on these draws would pass with ``_privatize``
broken. They are kept for power studies (``benchmarks/``, ``tools/``) and for tests that compare
them with the release; ``tests/test_audit_public_path.py`` checks that no registered case samples
them and that the modules that build cases import nothing from here.
"""

from __future__ import annotations

import numpy as np

from ..errors import require
from ..samplers import discrete_gaussian, discrete_laplace, snap_to_grid
from .accountant import two_set_per_token
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, exact_profile
from .generation import two_set_point_mass_law

__all__ = ["exact_law_releases", "two_set_toy_case"]


def exact_law_releases(mechanism: object, matrix: np.ndarray, n: int,
                       rng: np.random.Generator) -> np.ndarray | None:
    """POWER STUDIES ONLY: ``n`` releases drawn from the law a grid mechanism *declares*, not from its release.

    ``randomize`` of :mod:`textdp.topics.noise`' classes is ``(rint(matrix/g) + Z) g`` with
    ``Z`` i.i.d. exact discrete noise whose parameter the class exposes (``grid_scale``,
    ``grid_variance``, ``grid_variances``). Drawing from that declared law in one vectorised call
    is fast, but it never runs the code that releases: with ``randomize`` patched to add no noise
    an audit on these draws still passes. Never used by ``textdp audit``
    (``tests/test_audit_release.py`` checks that); ``None`` for any other class.
    """
    from ..topics.noise import GaussianNoise, LaplaceNoise, MatrixGaussianNoise

    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2 or type(mechanism) not in (LaplaceNoise, MatrixGaussianNoise, GaussianNoise):
        return None
    assert isinstance(mechanism, (LaplaceNoise, MatrixGaussianNoise, GaussianNoise))  # exactly one of them (above)
    shape = (int(a.shape[0]), int(a.shape[1]))
    k = snap_to_grid(a, mechanism.grid)
    count = n * shape[0] * shape[1]
    if isinstance(mechanism, LaplaceNoise):
        z = discrete_laplace(mechanism.grid_scale(shape), count, rng).reshape((n,) + shape)
    elif isinstance(mechanism, GaussianNoise):
        z = discrete_gaussian(mechanism.grid_variance(shape), count, rng).reshape((n,) + shape)
    else:
        var = mechanism.grid_variances(shape)
        z = np.empty((n,) + shape, dtype=np.int64)
        for v in sorted(set(var)):
            cols = [j for j in range(shape[1]) if var[j] == v]
            z[:, :, cols] = discrete_gaussian(v, n * shape[0] * len(cols), rng).reshape(n, shape[0], len(cols))
    return np.asarray((k + np.asarray(z, dtype=np.int64)).astype(np.float64) * mechanism.grid)


def two_set_toy_case(epsilon: float | None = None, delta: float | None = None, *, broken: str | None = None,
                     vocab_size: int = 50) -> AuditCase:
    """One step of the two-set mechanism on point masses (a power study of the step; never registered).

    The samplers come from :func:`textdp.generation.audit.two_set_audit_case` (point masses on words
    0 and 1 of a toy alphabet, drawn by the mechanism's own ``two_set_step``); the claim is
    :func:`~textdp.audit.accountant.two_set_per_token`; ``broken``: a deliberately wrong variant.
    ``delta`` is ignored.
    """
    require("torch", "generation")
    from ..generation.audit import two_set_audit_case

    eps = 2.0 if epsilon is None else epsilon
    sample_a, sample_b, stated, claimed_delta = two_set_audit_case(eps, vocab_size=vocab_size, broken=broken)
    # the poster-claim variant keeps its deliberately wrong claim
    claimed = stated if broken == "poster-claim" else two_set_per_token(float(eps), vocab_size)

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_a(n, rng) if which == "a" else sample_b(n, rng)

    table = two_set_point_mass_law(float(eps), vocab_size)
    conf = Conformance(description=f"two-set exponential mechanism on a point mass (er-ae-notes.md): the lexical "
                                   f"set chosen with probability 1/(1 + e^(-eps_set/2)), eps_set = 0.9 eps, else a "
                                   f"uniform word of the other {vocab_size - 1}",
                       kind="table", keep=lambda which, out: out, table=lambda which: table[0 if which == "a" else 1])
    la, lb = np.log(table[0]), np.log(table[1])
    curve = PrivacyCurve(sample=sample, loss=lambda out: (la - lb)[np.asarray(out, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, 0.75 * claimed, CURVE_POINTS)),
                         description="the exact loss of the two-set law on the point masses", chunk=50_000,
                         reuse_outputs=True)
    return AuditCase(
        mechanism="er-ae", pair=f"one step, point masses on words 0 and 1 of a {vocab_size}-word toy alphabet",
        input_a="a", input_b="b", sample=sample, claimed_epsilon=claimed, claimed_delta=claimed_delta,
        events="discrete", chunk=50_000, curve=curve, conformance=conf,
    )
