"""The one place textdp makes random generators.

Randomness always comes from a :class:`numpy.random.Generator`. A user may pass a
seed (for reproducible experiments) or a generator; the default is a generator
seeded from fresh OS entropy, never from a constant. Seeds are never written into
released outputs unless the user chose them (a released seed lets anyone undo the
noise).
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import ParameterError, ParameterTypeError




def make_rng(rng: int | np.random.Generator | np.random.SeedSequence | None = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    ``None`` gives a generator seeded from OS entropy; an ``int`` or a
    :class:`~numpy.random.SeedSequence` gives a reproducible one; a generator is
    returned unchanged (so callers share its stream).

    >>> bool(make_rng(7).integers(100) == make_rng(7).integers(100))
    True
    >>> g = make_rng(1)
    >>> make_rng(g) is g
    True
    """
    if rng is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence()))
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(rng))
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise ParameterTypeError(
            f"rng must be None, an int seed, a SeedSequence or a numpy Generator, got {type(rng).__name__}"
        )
    if int(rng) < 0:
        raise ParameterError(f"rng seed must be a non-negative integer, got {rng}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(rng))))


def spawn(rng: int | np.random.SeedSequence | None, n: int) -> list[np.random.Generator]:
    """``n`` independent generators from one seed (``SeedSequence(seed).spawn(n)``).

    The i-th generator depends only on the seed and ``i``, so partitioned work
    gives the same output whatever the scheduling.

    >>> a = spawn(3, 2); b = spawn(3, 2)
    >>> bool(a[1].random() == b[1].random())
    True
    """
    if isinstance(rng, np.random.SeedSequence):
        seq = rng
    elif rng is None:
        seq = np.random.SeedSequence()
    else:
        if isinstance(rng, bool) or not isinstance(rng, numbers.Integral) or int(rng) < 0:
            raise ParameterError(f"seed must be a non-negative integer, got {rng!r}")
        seq = np.random.SeedSequence(int(rng))
    return [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(n)]
