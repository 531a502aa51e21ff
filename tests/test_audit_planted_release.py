"""A bug in the method a user's release runs is flagged by the audit, for every family (issue 41, finding 1).

The plant is the class's ``_privatize`` (what ``privatize_batch`` -- and so ``textdp obfuscate``,
``topics``, ``rewrite`` and ``release()`` -- calls), replaced from the test side:

* **returning its input** (the words, bag, matrix or sentence units, unchanged);
* **ε×3**: the chunk released by a twin of the mechanism built at three times its ε.

On e24cd34 the word-level, earth-movers and SynTF cases sampled ``privatize_ids``/``core`` and every
audit here passed with numbers identical to the real run. The cheapest case of each family with
the power to see both plants runs by default; the others are marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from textdp.audit import audit
from textdp.mechanisms.common import BagOutput
from textdp.mechanisms.registry import REGISTRY, mechanism_class

#: The case run by default for each family (cheap, with power against both plants at 10^4 per input).
DEFAULT = {"random", "syntf", "laplace", "random-sentence"}


def _identity(family: str, real):
    def planted(self, prepared, context, rng):
        if family == "word":
            return [np.asarray(p.rows).copy() for p in prepared]
        if family == "document":  # the bag the release formed, released as it is
            return [BagOutput(o.bag, np.sort(o.bag)) for o in real(self, prepared, context, rng)]
        if family == "topics":
            return [np.asarray(p.matrix, dtype=np.float64).copy() for p in prepared]
        return [list(units) for units in prepared]  # sentence: the input units

    return planted


def _tripled(real):
    def planted(self, prepared, context, rng):
        twin = self.__dict__.get("_planted_twin")
        if twin is None:
            params = self.get_params()
            params["epsilon"] = 3.0 * float(self.epsilon)
            twin = type(self)(**params).fit()
            self.__dict__["_planted_twin"] = twin
        return real(twin, prepared, context, rng)

    return planted


def _plant(monkeypatch, name: str, kind: str) -> None:
    cls = mechanism_class(name)
    owner = next(c for c in cls.__mro__ if "_privatize" in vars(c))
    real = vars(owner)["_privatize"]
    monkeypatch.setattr(owner, "_privatize", _identity(cls.family, real) if kind == "identity" else _tripled(real))


def _cases():
    for name, entry in REGISTRY.items():
        if entry.audit is None or getattr(mechanism_class(name), "takes_corpus", False):
            continue  # the corpus topic mechanisms: planted in the release's noisy step, tests/test_audit_topic_moments.py
        heavy = entry.audit not in DEFAULT
        sentence = mechanism_class(name).family == "sentence"
        for kind in ("identity", "epsilon x3"):
            marks = [pytest.mark.slow] if heavy else []
            yield pytest.param(name, entry.audit, kind, sentence, marks=marks, id=f"{name}-{kind}")


@pytest.mark.parametrize(("name", "case", "kind", "sentence"), list(_cases()))
def test_a_bug_in_the_release_method_is_flagged(monkeypatch, name, case, kind, sentence):
    if sentence:
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
    ok = audit(case, samples=10_000, seed=11, conformance=True)
    assert ok.passed, (case, ok)
    _plant(monkeypatch, name, kind)
    bad = audit(case, samples=10_000, seed=11, conformance=True)
    assert not bad.passed, (case, kind, bad)


def test_every_family_has_a_default_case():
    fams = {mechanism_class(n).family for n, e in REGISTRY.items() if e.audit in DEFAULT}
    assert fams == {mechanism_class(n).family for n in REGISTRY}
