"""``textdp serve``: a local page that shows what ε does to your own text (needs the ``[serve]`` extra).

Paste or drop a text, pick a registered mechanism and ε; the page shows the private release beside the input
with the surviving words highlighted, the kept fraction, the guarantee sentence of exactly that release (and
what it does not cover), kept fraction against ε for this text with the ε for a target, and the mechanism's
audit (claim against an empirical lower bound). Started with ``--model DIR`` (a folder from ``textdp
train-rewriter``) it offers sentence rewriting too: ``er-ae`` or ``ae-dp`` (as the model was trained),
``syntf-sentence`` and ``random-sentence``.

It sits on top, like :mod:`textdp.cli`: it calls the public API (:func:`textdp.mechanisms.get` and the
mechanisms' ``privatize_batch``, :mod:`textdp.accounting.calibration`, :func:`textdp.audit.audit`) and no
lower layer imports it. :mod:`textdp.serve.core` holds the computations (no web framework: the
:class:`Workbench` session, with :mod:`~textdp.serve.checks`, :mod:`~textdp.serve.words`,
:mod:`~textdp.serve.sentences`, :mod:`~textdp.serve.lm` and :mod:`~textdp.serve.curve`);
:mod:`textdp.serve.app` the Starlette application with its Host / token / size checks. Nothing is stored or
logged and the page loads nothing from elsewhere.
"""

from __future__ import annotations

from .core import Workbench

__all__ = ["Workbench"]
