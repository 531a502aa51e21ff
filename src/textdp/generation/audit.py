"""An empirical audit of the two-set exponential mechanism on a toy alphabet.

:func:`two_set_audit_case` gives an auditor what it needs: two samplers of the
mechanism's output word for two neighbouring toy inputs (a point mass on word 0 against
a point mass on word 1, the pair that attains the bound up to ``e^{ε_word/2} − 1``), and
the claimed ``(ε, δ)``. The auditor of :mod:`textdp.audit` (case ``er-ae``) turns them
into a Clopper–Pearson lower bound on the privacy loss; a correct claim stays above it,
and the ``broken`` variants are flagged:

``"set-epsilon-doubled"``
    the mechanism uses ``exp(ε_set u)`` instead of ``exp(ε_set u / 2)`` for the set
    choice (a factor-2 slip) while claiming textdp's bound;
``"poster-claim"``
    the mechanism is right but the claim is the poster's ``ε + ln s`` with ``s = k`` (the
    lexical set's size) instead of ``ln |V|``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._validation import check_choice, check_epsilon, check_positive_int
from .bounds import two_set_bound
from .sampling import torch_module, two_set_step

__all__ = ["BROKEN_VARIANTS", "two_set_audit_case"]

BROKEN_VARIANTS = ("set-epsilon-doubled", "poster-claim")

Sampler = Callable[[int, np.random.Generator], np.ndarray]


def two_set_audit_case(
    epsilon: float,
    *,
    vocab_size: int = 50,
    k: int = 5,
    word_fraction: float = 0.1,
    broken: str | None = None,
) -> tuple[Sampler, Sampler, float, float]:
    """``(sample_a, sample_b, claimed_epsilon, claimed_delta)`` for one step of the mechanism.

    ``sample_a(n, rng)`` returns ``n`` output word ids (``np.ndarray`` of int64) of the
    mechanism on the toy input ``p = δ_0`` over ``vocab_size`` words; ``sample_b`` on
    ``p = δ_1``. The claim is :func:`~textdp.generation.bounds.two_set_bound` per
    token (δ = 0), unless ``broken`` selects a deliberately wrong variant (module
    docstring).

    >>> from textdp._rng import make_rng
    >>> sa, sb, eps, delta = two_set_audit_case(2.0)
    >>> sa(5, make_rng(0)).shape, round(eps, 3), delta
    ((5,), 4.794, 0.0)
    """
    eps = check_epsilon(epsilon)
    v = check_positive_int(vocab_size, "vocab_size", minimum=k + 1)
    if broken is not None:
        check_choice(broken, "broken variant", BROKEN_VARIANTS)
    bound = two_set_bound(eps, v, 1, word_fraction=word_fraction, k=k)
    e_set = bound.epsilon_set * (2.0 if broken == "set-epsilon-doubled" else 1.0)
    e_word = bound.epsilon_word
    claimed = eps + math.log(k) if broken == "poster-claim" else bound.per_token

    def sampler(word: int) -> Sampler:
        def sample(n: int, rng: np.random.Generator) -> np.ndarray:
            torch = torch_module()
            n = check_positive_int(n, "n")
            logp = torch.full((n, v), -math.inf, dtype=torch.float64)
            logp[:, word] = 0.0
            allowed = torch.ones(v, dtype=torch.bool)
            ids = two_set_step(logp, rng, epsilon_set=e_set, epsilon_word=e_word, k=k, allowed=allowed)
            return np.asarray(ids.numpy())

        return sample

    return sampler(0), sampler(1), claimed, 0.0
