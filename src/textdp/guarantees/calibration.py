"""A mechanism's calibration: its parameters in, the numbers its noise and its guarantee read out (a leaf module).

In the style of OpenDP's ``Measurement`` (parameters in, a privacy map out), a mechanism builds one frozen
:class:`Calibration` in ``fit`` (:meth:`textdp.mechanisms.base.Mechanism.fit`): the validated ε, the δ, and the
public noise parameters its sampler uses (σ and the sensitivity of a Gaussian, the replacement rate of
randomised response, ...). Its sampler, its :meth:`~textdp.mechanisms.base.Mechanism.guarantee` (and so the
records, :meth:`~textdp.guarantees.Guarantee.charge` and the ledger) read this one object, never the raw
parameters: ``epsilon_`` *is* ``calibration_.epsilon``. Assigning a parameter after ``fit`` drops the whole
fitted state, calibration included, and the next release refuses until ``fit`` runs again, so the noise and the
statement cannot drift apart (issue 40).

ε is validated here, once (:func:`textdp._validation.check_epsilon`); an ε derived from another parameter
(``epsilon_from``: the rate of randomised response) only needs to be a finite number ``>= 0``.

>>> c = Calibration(epsilon=2, delta=1e-5, noise={"sigma": 3.5})
>>> c.epsilon, c.delta, c.noise_params["sigma"]
(2.0, 1e-05, 3.5)
>>> Calibration(epsilon=0)
Traceback (most recent call last):
...
textdp.errors.ParameterError: epsilon must be a finite number > 0, got 0
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from .._validation import check_epsilon
from ..errors import ParameterError

__all__ = ["Calibration"]


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What a fitted mechanism's noise and guarantee read (see the module docstring).

    Attributes
    ----------
    epsilon : float
        The validated ε (per the unit its guarantee states).
    delta : float
        δ (0 for pure ε-DP).
    noise : tuple of (str, object)
        The public noise parameters the sampler uses (given as a mapping; stored as pairs, hashable).
    derived_from : str or None
        The parameter ε was derived from (``"rate"``), or ``None`` when ε was given.
    """

    epsilon: float
    delta: float = 0.0
    noise: tuple[tuple[str, object], ...] | Mapping[str, object] = ()
    derived_from: str | None = None

    def __post_init__(self) -> None:
        if self.derived_from is None:
            eps = check_epsilon(self.epsilon)
        else:
            eps = float(self.epsilon)
            if not math.isfinite(eps) or eps < 0:
                raise ParameterError(f"epsilon derived from {self.derived_from} must be a finite number >= 0, "
                                     f"got {self.epsilon!r}; check {self.derived_from}")
        d = float(self.delta)
        if not (math.isfinite(d) and 0.0 <= d < 1.0):
            raise ParameterError(f"delta must be a number in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", d)
        noise = self.noise.items() if isinstance(self.noise, Mapping) else self.noise
        object.__setattr__(self, "noise", tuple((str(k), v) for k, v in noise))

    @property
    def noise_params(self) -> dict[str, object]:
        """The noise parameters as a dict."""
        return dict(self.noise)

    def with_noise(self, **noise: object) -> Self:
        """A copy with more noise parameters (e.g. σ once the model's size is known, still inside ``fit``)."""
        new = copy.copy(self)  # not replace(): epsilon is validated once, when the calibration was built
        object.__setattr__(new, "noise", (*self.noise, *((str(k), v) for k, v in noise.items())))
        return new
