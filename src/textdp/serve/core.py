"""What the page computes, without the web framework: one release, the kept-fraction curve, one audit.

Every method of :class:`Workbench` takes the request's values, checks them (:mod:`textdp.serve.checks`; a
one-line :class:`~textdp.errors.TextDPError` otherwise) and returns a JSON-ready dict. Nothing is stored: the
text lives only for the duration of the call; only fitted mechanisms (public parameters: name, ε, N) are kept in a
small cache. Each call draws fresh OS entropy (:func:`textdp._rng.make_rng` with no seed): the page has no seed
option.

The parts: :mod:`~textdp.serve.checks` (the request values), :mod:`~textdp.serve.words` (the word and document
mechanisms over one vocabulary), :mod:`~textdp.serve.sentences` (a sentence release; the guarantee in numbers),
:mod:`~textdp.serve.lm` (the language-model rewriters a model folder runs, and their public settings),
:mod:`~textdp.serve.curve` (kept fraction against ε); this module holds the session: what is offered, the cache of
fitted mechanisms, and the dispatch of each request.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from .._rng import make_rng
from .._validation import EPSILON_MAX, EPSILON_MIN
from ..errors import DocumentError, ParameterError
from ..mechanisms import MECHANISM_NAMES, EarthMoversPrivacy, Mechanism, entry, get, mechanism_class, names
from .checks import (
    BAG_MECHANISMS,
    MAX_SIZE,
    MAX_TEXT_CHARS,
    check_clip,
    check_delta,
    check_epsilon_value,
    check_mechanism,
    check_prior,
    check_size,
    check_text,
    shown,
)
from .curve import CURVE_EPSILONS, CURVE_WORDS, exact_curve, sampled_curve
from .lm import (
    LM_DEFAULT_CLIP,
    LM_DEFAULT_CLIP_GAUSSIAN,
    LM_DEFAULT_DELTA,
    LM_PRIOR_CLIP,
    LM_PRIOR_DEFAULTS,
    LMSettings,
    lm_extra,
    probe_lm,
)
from .sentences import LETTERS, rewrite_result
from .words import NO_WORDS, RELEASES_STOP_WORDS, PageVocabulary, page_advice, truncated_bag, word_result

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from ..generation.rewriter import Rewriter
    from ..mechanisms.common import DocumentDiagnostics
    from .words import WordRelease

__all__ = [
    "AUDIT_EPSILON_RANGE",
    "AUDIT_SAMPLES",
    "BAG_MECHANISMS",
    "CURVE_EPSILONS",
    "LM_DEFAULT_CLIP",
    "LM_DEFAULT_CLIP_GAUSSIAN",
    "LM_DEFAULT_DELTA",
    "LM_PRIOR_CLIP",
    "LM_PRIOR_DEFAULTS",
    "MAX_SIZE",
    "MAX_TEXT_CHARS",
    "Workbench",
]

#: Default ε of the slider per mechanism (metric mechanisms: ε per unit of embedding distance).
DEFAULT_EPSILON = {"earth-movers": 10.0, "cmp": 10.0, "mahalanobis": 10.0, "vickrey": 10.0}
#: Samples per input of the audit button (a few seconds for every registered mechanism).
AUDIT_SAMPLES = 20_000
#: ε range the auditor accepts (the same as ``textdp audit``).
AUDIT_EPSILON_RANGE = (1e-3, 100.0)


class Workbench:
    """The page's computations over one vocabulary, with a small cache of fitted mechanisms.

    Parameters
    ----------
    embeddings : Embeddings, path or None
        The vocabulary every mechanism uses (``None``: GloVe 6B 50d, loaded on first use).
    cache_size : int
        Fitted mechanisms kept (keyed by public parameters only: name, ε, N).
    rewriter : Rewriter or None
        A loaded model from ``textdp train-rewriter``: the page then offers the mechanisms of the
        sentence family that run on such a model (no ``clip``: not the language-model rewriters) and need no
        training objective or the one the model's card states (the class's ``objective``, as ``textdp rewrite``
        checks it).
    lm_model : path or None
        A language-model folder (Hugging Face, safetensors; or a GGUF file), as ``textdp rewrite`` takes it: the
        page then offers the language-model rewriters that run on its kind (causal: ``dp-prompt``;
        sequence-to-sequence: ``dp-paraphrase``, ``dp-bart``; masked: ``dp-mlm``), each through the public
        mechanism API (``get(name, model=..., clip=...).fit()``; :func:`textdp.serve.lm.probe_lm`).
    clip : (float, float) or None
        The public clipping bounds the page starts from for every language-model rewriter (``None``:
        :data:`LM_DEFAULT_CLIP`, :data:`LM_DEFAULT_CLIP_GAUSSIAN` for a rewriter with δ, :data:`LM_PRIOR_CLIP`
        for one with a public prior). Public parameters: chosen without the private text, recorded in every
        release's guarantee.
    """

    def __init__(self, embeddings: Embeddings | str | os.PathLike[str] | None = None, cache_size: int = 24,
                 rewriter: Rewriter | None = None, lm_model: str | os.PathLike[str] | None = None,
                 clip: tuple[float, float] | None = None) -> None:
        self._rewriter = rewriter
        self._lm_model = None if lm_model is None else os.fspath(lm_model)
        #: each offered language-model rewriter -> the public settings the page starts from
        self.lm_mechanisms: dict[str, LMSettings] = {} if self._lm_model is None else probe_lm(self._lm_model, clip)
        objective = None
        if rewriter is not None and isinstance(rewriter.card.get("training"), dict):
            objective = rewriter.card["training"].get("objective")
        self.sentence_mechanisms: tuple[str, ...] = () if rewriter is None else tuple(
            n for n in names("sentence") if "clip" not in mechanism_class(n).param_names()
            and getattr(mechanism_class(n), "objective", None) in (None, objective))
        self.vocabulary = PageVocabulary(embeddings)
        self._lock = threading.Lock()
        self._warn_lock = threading.Lock()  # catch_warnings changes process-wide state: one release at a time
        self._fitted: OrderedDict[tuple[object, ...], Mechanism] = OrderedDict()
        self._cache_size = cache_size

    def _is_sentence(self, name: str) -> bool:
        """Whether ``name`` rewrites sentences (the registry's family; ``name`` is a checked, offered name)."""
        return entry(name).family == "sentence"

    @property
    def embeddings(self) -> Embeddings:
        """The vocabulary of the word and document mechanisms (loaded on first use)."""
        return self.vocabulary.embeddings

    def nearest_word(self, row: int) -> tuple[int, float]:
        """The vocabulary row nearest to ``row`` (:meth:`PageVocabulary.nearest_word`)."""
        return self.vocabulary.nearest_word(row)

    def mechanisms(self) -> list[dict[str, object]]:
        """Every registered word and document mechanism, then the sentence mechanisms of the model, with their
        release kind and default ε (a language-model rewriter: with the public settings it starts from)."""
        out: list[dict[str, object]] = [
            {"name": n, "kind": "bag" if n in BAG_MECHANISMS else "text", "epsilon": DEFAULT_EPSILON.get(n, 3.0)}
            for n in MECHANISM_NAMES
        ]
        out += [{"name": n, "kind": "sentence", "epsilon": 3.0} for n in self.sentence_mechanisms]
        return out + [{"name": n, "kind": "sentence", "epsilon": 3.0, "lm": True, **s.to_json()}
                      for n, s in self.lm_mechanisms.items()]

    def _offered_sentence(self) -> tuple[str, ...]:
        return (*self.sentence_mechanisms, *self.lm_mechanisms)

    def limits(self) -> dict[str, object]:
        return {"epsilon_min": EPSILON_MIN, "epsilon_max": EPSILON_MAX, "max_text_chars": MAX_TEXT_CHARS,
                "max_size": MAX_SIZE, "audit_epsilon_min": AUDIT_EPSILON_RANGE[0],
                "audit_epsilon_max": AUDIT_EPSILON_RANGE[1], "audit_samples": AUDIT_SAMPLES}

    def mechanism(self, name: str, epsilon: float, size: int | None, clip: tuple[float, float] | None = None,
                  delta: float | None = None, public_top_k: int | bool | None = None) -> Mechanism:
        """A fitted mechanism (cached by its public parameters; ``public_top_k``: dp-prompt's prior, False when
        off, None for the prior over the whole vocabulary)."""
        key = (name, epsilon, size, clip, delta, public_top_k)
        with self._lock:
            if key in self._fitted:
                self._fitted.move_to_end(key)
                return self._fitted[key]
        if name in self.lm_mechanisms:
            mech = get(name, epsilon=epsilon, model=self._lm_model, clip=clip,
                       **({} if delta is None else {"delta": delta}), **lm_extra(name, public_top_k)).fit()
        elif self._is_sentence(name):
            mech = get(name, epsilon=epsilon, model=self._rewriter).fit()
        else:
            kwargs: dict[str, object] = {"size": size} if size is not None else {}
            mech = get(name, epsilon=epsilon, embeddings=self.embeddings, **kwargs).fit()
        with self._lock:
            self._fitted[key] = mech
            while len(self._fitted) > self._cache_size:
                self._fitted.popitem(last=False)
        return mech

    # -- one release -------------------------------------------------------------------------------
    def _release(self, mech: Mechanism, texts: list[str],
                 size: int | None) -> tuple[list[WordRelease], list[DocumentDiagnostics], list[str]]:
        """``privatize_batch`` with fresh OS entropy and the private diagnostics; warnings returned as notes."""
        diags: list[DocumentDiagnostics] = []
        with self._warn_lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            docs = mech.privatize_batch(texts, seed=make_rng(), private_report=diags, size=size)
        return docs, diags, sorted({str(w.message) for w in caught})

    def privatize(self, text: object, mechanism: object, epsilon: object, size: object = None, clip: object = None,
                  delta: object = None, prior: object = None, public_top_k: object = None) -> dict[str, object]:
        """One private release of ``text``: output words (kept ones marked), input spans, kept fraction, guarantee.

        The release record is exactly what ``textdp obfuscate`` would write for this text; the input spans and
        the kept fraction describe the private input and are shown only to the person at the keyboard.
        ``clip`` (``[low, high]``) and ``delta``: the public parameters of a language-model rewriter
        (``None``: the server's defaults, listed by :meth:`mechanisms`); refused for the other mechanisms.
        ``prior`` (true/false) and ``public_top_k`` (a positive integer, or null for the whole vocabulary): dp-prompt's
        public prior (default: on, with the top-k+ set of :data:`LM_PRIOR_DEFAULTS`).
        """
        text = check_text(text)
        name = check_mechanism(mechanism, self._offered_sentence())
        eps = check_epsilon_value(epsilon)
        n = check_size(name, size)
        if name in self.lm_mechanisms:
            settings = self.lm_mechanisms[name]
            bounds = check_clip(clip, settings.clip)
            d = check_delta(name, delta, settings.delta)
            top_k = check_prior(name, prior, public_top_k, settings)
            return self._rewrite(text, name, eps, self.mechanism(name, eps, None, bounds, d, top_k))
        if prior is not None or public_top_k is not None:
            raise ParameterError(f"prior and public_top_k are dp-prompt's public parameters, not {name}'s")
        if clip is not None or delta is not None:
            raise ParameterError(f"clip and delta are public parameters of the language-model rewriters, not of {name}")
        if self._is_sentence(name):
            return self._rewrite(text, name, eps, self.mechanism(name, eps, None))
        return self._word_release(text, name, eps, n)

    def _word_release(self, text: str, name: str, eps: float, n: int | None) -> dict[str, object]:
        """One release of a word or document mechanism (checked values; :func:`textdp.serve.words.word_result`)."""
        protected = self.vocabulary.protected_rows(text)
        if not protected and name not in RELEASES_STOP_WORDS:
            raise DocumentError(NO_WORDS)
        overflow = f"epsilon {eps:g} overflows {name}'s probabilities; choose a smaller epsilon"
        try:
            mech = self.mechanism(name, eps, n)
        except (OverflowError, FloatingPointError):
            raise ParameterError(overflow) from None
        bag = truncated_bag(mech, n)
        if bag is not None and len(protected) < bag:
            raise DocumentError(f"the text has {len(protected)} protected word{'s' if len(protected) != 1 else ''}, "
                                f"fewer than the bag size N = {bag}: set N to {len(protected)} or less, or add text")
        try:
            docs, diags, notes = self._release(mech, [text], n)
        except (OverflowError, FloatingPointError):
            raise ParameterError(overflow) from None
        except DocumentError as exc:  # the mechanism's own refusal; its advice names CLI options the page lacks
            raise DocumentError(page_advice(str(exc))) from None
        return word_result(self.vocabulary, name, mech, docs[0], diags[0], text, protected, bag, notes)

    def _rewrite(self, text: str, name: str, eps: float, mech: Mechanism) -> dict[str, object]:
        """One release of a sentence mechanism (fitted ``mech``; :func:`textdp.serve.sentences.rewrite_result`)."""
        diags: list[dict[str, object]] = []
        with self._warn_lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            docs = mech.privatize_batch([text], seed=make_rng(), private_report=diags)
        return rewrite_result(text, name, eps, docs[0], sorted({str(w.message) for w in caught}))

    # -- kept fraction against ε ------------------------------------------------------------------
    def curve(self, text: object, mechanism: object, target: object = 0.5, size: object = None) -> dict[str, object]:
        """Kept fraction against ε for this text, and the ε that keeps ``target`` of its words.

        ``earth-movers``: the exact survival curve (:func:`textdp.serve.curve.exact_curve`) on this text's words.
        Every other mechanism: the mechanism itself run on the text at each ε of :data:`CURVE_EPSILONS` (about
        :data:`CURVE_WORDS` words each; :func:`textdp.serve.curve.sampled_curve`).
        """
        text = check_text(text)
        name = check_mechanism(mechanism, self._offered_sentence())
        if isinstance(target, bool) or not isinstance(target, int | float) or not 0.0 < float(target) < 1.0:
            raise ParameterError(f"the target kept fraction must be a number between 0 and 1 such as 0.5, "
                                 f"got {shown(target)}")
        target = float(target)
        n = check_size(name, size)
        if self._is_sentence(name):
            return {"mechanism": name, "points": [], "target": target, "epsilon_for_target": None,
                    "why": "no curve for sentence rewriting",
                    "method": "not computed for sentence rewriting (each point would rewrite the whole text again)"}
        emb = self.embeddings
        stops = self.vocabulary.stops
        rows = np.array([emb.index[w] for w in (m.group().lower() for m in LETTERS.finditer(text))
                         if len(w) > 1 and w not in stops and w in emb.index], dtype=np.int64)
        if rows.size == 0:
            raise DocumentError("no in-vocabulary word left after normalisation; nothing to plot")
        if issubclass(mechanism_class(name), EarthMoversPrivacy):
            points, eps_target, why, method = exact_curve(emb, rows, target)
        else:
            # word-level mechanisms treat words one by one: the first CURVE_WORDS protected words stand for the text
            first = [emb.words[r] for r in rows[:CURVE_WORDS]]
            sample = " ".join(first)
            copies = max(1, CURVE_WORDS // len(first))

            def kept_at(e: float) -> float:
                _, diags, _ = self._release(self.mechanism(name, e, n), [sample] * copies, n)
                return float(np.mean([d.unchanged_fraction() for d in diags]))

            points, eps_target, why, method = sampled_curve(kept_at, copies, target)
        return {"mechanism": name, "points": points, "target": target, "epsilon_for_target": eps_target,
                "why": why, "method": method}

    # -- audit ------------------------------------------------------------------------------------
    def audit(self, mechanism: object, epsilon: object) -> dict[str, object]:
        """Run the mechanism's registered audit case (public neighbouring pair; not the text) at ``epsilon``."""
        from ..audit import audit

        name = check_mechanism(mechanism, self._offered_sentence())
        eps = check_epsilon_value(epsilon)
        lo, hi = AUDIT_EPSILON_RANGE
        if not lo <= eps <= hi:
            raise ParameterError(f"the audit runs for epsilon in [{lo:g}, {hi:g}] (beyond, "
                                 f"{AUDIT_SAMPLES:,} samples cannot resolve the claim); got {eps:g}")
        result = audit(name, epsilon=eps, samples=AUDIT_SAMPLES, seed=None)
        out: dict[str, object] = dict(result.to_dict())
        out["event"] = result.event
        out["confidence"] = result.confidence
        out["seconds"] = round(result.seconds, 2)
        return out
