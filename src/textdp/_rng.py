"""The one place textdp makes random generators.

Randomness always comes from a :class:`numpy.random.Generator`. Its bit generator
is **AES-128 in counter mode** (``randomgen.AESCounter``, AES-NI where the CPU has
it), a cryptographically secure pseudo-random generator: without the 128-bit key,
its output cannot be told apart from uniform bits or used to recover the key or
the other outputs, unlike numpy's default PCG64, whose state can be recovered
from its output. Its cost is measured in ``benchmarks/bench_rng.py`` (BENCHMARKS.md,
"Secure random generator"): the same speed as PCG64 on x86-64 with AES-NI.

* ``make_rng(None)`` (the default everywhere) keys AES with 128 bits read from the
  operating system's CSPRNG (:func:`secrets.randbits`); nothing about the key is
  recorded anywhere.
* A seed (``int`` or :class:`~numpy.random.SeedSequence`) is for **experiments
  only**: the key is ``SeedSequence(seed).generate_state(2, uint64)``, so the same
  seed gives the same stream on every machine (with or without AES-NI), and the
  stream is exactly as secret as the seed. A released seed lets anyone undo the
  noise; small integer seeds can be guessed. Seeds are never written into
  released outputs; outputs say whether they were seeded (:func:`describe_rng`).
* A :class:`numpy.random.Generator` is used as given (its bit generator may not
  be secure: :func:`describe_rng` says which one it is).

Generators made here are :class:`TextDPGenerator`, a ``Generator`` that remembers
whether its key came from the OS, so that :func:`describe_rng` can say so.
"""

from __future__ import annotations

import numbers
import secrets
from typing import cast

import numpy as np

from .errors import ParameterError, ParameterTypeError

#: Name of the bit generator textdp uses (recorded in output settings).
BIT_GENERATOR = "AESCounter"

#: Bit generators considered cryptographically secure when a user passes a ``Generator``.
CSPRNG_BIT_GENERATORS = frozenset({"AESCounter", "ChaCha"})

SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def _aes(seed: np.random.SeedSequence | None) -> np.random.BitGenerator:
    """An ``AESCounter`` keyed from ``seed``, or from 128 fresh OS bits when ``seed`` is None."""
    from randomgen import AESCounter  # first use: ~35 ms

    # cast: randomgen's own stubs (py.typed in 2.0-2.1) do not declare AESCounter a numpy BitGenerator, which it is
    if seed is None:
        return cast(np.random.BitGenerator, AESCounter(key=secrets.randbits(128)))
    return cast(np.random.BitGenerator, AESCounter(seed))


class TextDPGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` that records whether it was seeded.

    Made only by :func:`make_rng` and :func:`spawn`; behaves exactly like a numpy
    ``Generator`` (and pickles as one of this class, e.g. to Dask workers).

    >>> make_rng(3).seeded, make_rng().seeded
    (True, False)
    """

    __slots__ = ("__weakref__", "_seeded")

    def __init__(self, bit_generator: np.random.BitGenerator, seeded: bool = True) -> None:
        super().__init__(bit_generator)
        self._seeded = bool(seeded)  # unknown provenance counts as seeded

    @property
    def seeded(self) -> bool:
        """True if the key came from a user's seed, False if from OS entropy."""
        return self._seeded

    def spawn(self, n_children: int) -> list[np.random.Generator]:
        """numpy's ``Generator.spawn``: children that keep the ``seeded`` flag.

        Seeded: children of the bit generator's ``SeedSequence`` (reproducible, the
        stream is not advanced); unseeded: each child gets a fresh OS key.
        """
        if not self._seeded:
            return spawn(None, n_children)
        return [TextDPGenerator(bg, seeded=True) for bg in self.bit_generator.spawn(n_children)]

    # (class, (bit generator, seeded)): the flag travels with a pickle, so not numpy's (constructor, (bg,), None)
    def __reduce__(self) -> tuple[type[TextDPGenerator], tuple[np.random.BitGenerator, bool]]:  # type: ignore[override]
        return (TextDPGenerator, (self.bit_generator, self._seeded))

    def __repr__(self) -> str:
        return f"TextDPGenerator({type(self.bit_generator).__name__}, seeded={self._seeded})"


def _seed_sequence(seed: object, what: str = "seed") -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ParameterTypeError(
            f"{what} must be None, an int seed, a SeedSequence or a numpy Generator, got {type(seed).__name__}"
        )
    if int(seed) < 0:
        raise ParameterError(f"{what} must be a non-negative integer, got {seed}")
    return np.random.SeedSequence(int(seed))


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``seed``.

    ``None`` gives an AES-CTR generator keyed from fresh OS entropy; an ``int`` or a
    :class:`~numpy.random.SeedSequence` gives a reproducible AES-CTR generator keyed
    from the seed (experiments only); a generator is returned unchanged (so callers
    share its stream).

    >>> bool(make_rng(7).integers(100) == make_rng(7).integers(100))
    True
    >>> type(make_rng().bit_generator).__name__
    'AESCounter'
    >>> g = make_rng(1)
    >>> make_rng(g) is g
    True
    """
    if seed is None:
        return TextDPGenerator(_aes(None), seeded=False)
    if isinstance(seed, np.random.Generator):
        return seed
    return TextDPGenerator(_aes(_seed_sequence(seed, "seed")), seeded=True)


def spawn(seed: SeedLike, n: int) -> list[np.random.Generator]:
    """``n`` independent generators for parallel work.

    * ``None``: each gets its own fresh OS key;
    * an ``int`` or a ``SeedSequence``: the i-th is keyed from
      ``SeedSequence(entropy, spawn_key=spawn_key + (i,))``, the same as
      ``SeedSequence(seed).spawn(n)[i]``; it depends only on the seed and ``i``
      (not on ``n``, nor on how often this was called), so partitioned work gives
      the same output whatever the scheduling;
    * a ``Generator``: the n keys are drawn from it at once (the i-th child then
      depends only on the generator's state and ``i``); children inherit its
      ``seeded`` flag (a foreign generator counts as seeded).

    >>> a = spawn(3, 2); b = spawn(3, 4)
    >>> bool(a[1].random() == b[1].random())
    True
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 0:
        raise ParameterError(f"number of generators must be a non-negative integer, got {n!r}")
    n = int(n)
    if seed is None:
        return [TextDPGenerator(_aes(None), seeded=False) for _ in range(n)]
    if isinstance(seed, np.random.Generator):
        seeded = is_seeded(seed)
        keys = seed.integers(0, 2**64, size=(n, 2), dtype=np.uint64, endpoint=False)
        from randomgen import AESCounter

        return [TextDPGenerator(AESCounter(key=k), seeded=seeded) for k in keys]
    seq = _seed_sequence(seed)
    return [
        TextDPGenerator(
            _aes(np.random.SeedSequence(seq.entropy, spawn_key=tuple(seq.spawn_key) + (i,), pool_size=seq.pool_size)),
            seeded=True,
        )
        for i in range(n)
    ]


def is_seeded(seed: SeedLike) -> bool:
    """Whether outputs drawn with ``seed`` are reproducible from a seed someone holds.

    ``False`` only for ``None`` and for generators textdp keyed from OS entropy; a
    generator made outside textdp counts as seeded (textdp cannot vouch for it).

    >>> is_seeded(None), is_seeded(5), is_seeded(make_rng()), is_seeded(make_rng(5))
    (False, True, False, True)
    """
    if seed is None:
        return False
    if isinstance(seed, TextDPGenerator):
        return seed.seeded
    if isinstance(seed, np.random.Generator):
        return True
    _seed_sequence(seed, "seed")  # validates
    return True


def describe_rng(seed: SeedLike) -> dict[str, object]:
    """Public description of a generator for output settings (never its seed or state).

    Keys: ``seeded`` (see :func:`is_seeded`), ``bit_generator`` (class name) and
    ``csprng`` (whether that bit generator is cryptographically secure).

    >>> describe_rng(None)
    {'seeded': False, 'bit_generator': 'AESCounter', 'csprng': True}
    >>> describe_rng(make_rng(4))
    {'seeded': True, 'bit_generator': 'AESCounter', 'csprng': True}
    """
    if isinstance(seed, np.random.Generator):
        name = type(seed.bit_generator).__name__
    else:
        name = BIT_GENERATOR
    return {"seeded": is_seeded(seed), "bit_generator": name, "csprng": name in CSPRNG_BIT_GENERATORS}
