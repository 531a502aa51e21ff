"""What the page computes, without the web framework: one release, the kept-fraction curve, one audit.

Every function takes the request's values, checks them (one-line :class:`~textdp.errors.TextDPError`
otherwise) and returns a JSON-ready dict. Nothing is stored: the text lives only for the duration of
the call; only fitted mechanisms (public parameters: name, ε, N) are kept in a small cache. Each call
draws fresh OS entropy (:func:`textdp._rng.make_rng` with no seed): the page has no seed option.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import warnings
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .._rng import make_rng
from .._validation import EPSILON_MAX, EPSILON_MIN, check_epsilon
from ..errors import DocumentError, ParameterError, ParameterTypeError, TextDPError
from ..mechanisms import MECHANISM_NAMES, EarthMoversPrivacy, Mechanism, entry, get, mechanism_class, names
from ..text import normalize, resolve_stop_words

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..embeddings import Embeddings
    from ..generation.rewriter import Rewriter
    from ..guarantees import Guarantee
    from ..mechanisms.common import DocumentDiagnostics


class _Release(Protocol):
    """What the page shows of a release record (a bag or a text of the word family)."""

    @property
    def words(self) -> Sequence[str]: ...
    @property
    def guarantee(self) -> Guarantee: ...
    def to_record(self) -> Mapping[str, object]: ...

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

#: Longest text the page accepts (characters); the HTTP layer also caps the request body.
MAX_TEXT_CHARS = 20_000
#: Largest bag size N the page accepts for a bag mechanism.
MAX_SIZE = 500
#: Mechanisms whose release is a bag of N words (the others replace each protected word in place).
BAG_MECHANISMS = tuple(n for n in MECHANISM_NAMES if entry(n).releases == "bag")
#: Public clipping bounds the page starts from for a language-model rewriter (``textdp serve --clip`` replaces them;
#: each release may set its own): the logits clipped to [-2, 2] (docs/lm-rewriting.md's dp-mlm example).
LM_DEFAULT_CLIP = (-2.0, 2.0)
#: What the page starts from for a rewriter with a public prior (dp-prompt): the prior and its public top-k+ set, the
#: difference to the prior clipped to [-8, 8], ε 64 per token and 48 new tokens (docs/lm-rewriting.md's route on
#: SmolLM2: paraphrases, where [-2, 2] on the raw logits ties every plausible token and releases random tokens)
LM_PRIOR_CLIP: tuple[float, float] = (-8.0, 8.0)
LM_PRIOR_DEFAULTS: dict[str, object] = {"prior": True, "public_top_k": 20, "clip": LM_PRIOR_CLIP, "epsilon": 64.0,
                                        "max_new_tokens": 48}
#: ... and for a rewriter with δ (Gaussian noise on the clipped encoder output, DP-BART): [-0.2, 0.1] per coordinate
#: (docs/lm-rewriting.md's dp-bart example).
LM_DEFAULT_CLIP_GAUSSIAN = (-0.2, 0.1)
#: δ per sentence the page starts from for a rewriter with δ.
LM_DEFAULT_DELTA = 1e-5
#: Default ε of the slider per mechanism (metric mechanisms: ε per unit of embedding distance).
DEFAULT_EPSILON = {"earth-movers": 10.0, "cmp": 10.0, "mahalanobis": 10.0, "vickrey": 10.0}
#: ε grid of the kept-fraction plot (log-spaced; the mechanism itself is run at each point).
CURVE_EPSILONS = tuple(float(x) for x in np.round(np.logspace(-1, 3, 9), 4))
#: Releases per ε drawn for the plot of a mechanism without an exact calibration.
CURVE_WORDS = 60
#: Samples per input of the audit button (a few seconds for every registered mechanism).
AUDIT_SAMPLES = 20_000
#: ε range the auditor accepts (the same as ``textdp audit``).
AUDIT_EPSILON_RANGE = (1e-3, 100.0)

_LETTERS = re.compile(r"[^\W\d_]+")
_NOT_COVERED = re.compile(r"\s*Not covered:\s*", re.IGNORECASE)


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise ParameterTypeError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise DocumentError("the text is empty: paste or drop a text first")
    if len(text) > MAX_TEXT_CHARS:
        raise DocumentError(f"the text has {len(text):,} characters; this page takes at most {MAX_TEXT_CHARS:,}: "
                            "paste a shorter part (the command textdp obfuscate takes whole documents)")
    return text


def _check_mechanism(name: object, sentence: Sequence[str] = ()) -> str:
    if isinstance(name, str) and name in names("sentence") and name not in sentence:
        raise ParameterError(f"{name} rewrites sentences with a trained model, and this server has none that fits "
                             f"it; choose a word or document mechanism (or start textdp serve --model DIR with one)")
    if not isinstance(name, str) or name not in (*MECHANISM_NAMES, *sentence):
        raise ParameterError(f"unknown mechanism {name!r}; choose one of: {', '.join((*MECHANISM_NAMES, *sentence))}")
    return name


def _shown(value: object) -> str:
    """A request value as the person typed it (JSON spelling: ``null``, ``"abc"``, ``2.5``)."""
    try:
        return json.dumps(value, ensure_ascii=False)[:40]
    except (TypeError, ValueError):
        return type(value).__name__


def _check_epsilon(value: object) -> float:
    """ε of a request: a JSON number in ``[EPSILON_MIN, EPSILON_MAX]`` (``1e-5`` and ``1e-7`` spellings included).

    >>> _check_epsilon(1e-5)
    1e-05
    >>> _check_epsilon("abc")
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterTypeError: epsilon must be a number such as 0.5, 10 or 1e-3 (in [1e-06, 1e+06]), got "abc"
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterTypeError(f"epsilon must be a number such as 0.5, 10 or 1e-3 (in [{EPSILON_MIN:g}, "
                                 f"{EPSILON_MAX:g}]), got {_shown(value)}")
    try:
        return check_epsilon(float(value))
    except OverflowError:
        raise ParameterError(f"epsilon must be a number in [{EPSILON_MIN:g}, {EPSILON_MAX:g}], got a number too "
                             "large to represent") from None


def _check_size(name: str, size: object) -> int | None:
    """The bag size N of a bag mechanism: a whole number in ``[1, MAX_SIZE]`` (``2.5`` is refused, not cut to 2).

    >>> _check_size("cmp", 2.5) is None, _check_size("earth-movers", 7)
    (True, 7)
    >>> _check_size("earth-movers", 2.5)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the bag size N must be a whole number of words from 1 to 500, got 2.5
    """
    if name not in BAG_MECHANISMS:
        return None
    if isinstance(size, float) and size.is_integer() and 1 <= size <= MAX_SIZE:
        return int(size)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
        raise ParameterError(f"the bag size N must be a whole number of words from 1 to {MAX_SIZE}, got {_shown(size)}")
    return int(size)


def _check_prior(name: str, prior: object, public_top_k: object, defaults: dict[str, object]) -> object:
    """dp-prompt's prior of a request: False (off), None (on, whole vocabulary) or the top-k+ size (on).

    >>> d = {"prior": True, "public_top_k": 20}
    >>> _check_prior("dp-prompt", None, None, d), _check_prior("dp-prompt", False, None, d)
    (20, False)
    >>> _check_prior("dp-prompt", True, 5, d), _check_prior("dp-prompt", True, 0, d)
    (5, None)
    """
    if "prior" not in defaults:
        if prior is not None or public_top_k is not None:
            raise ParameterError(f"prior and public_top_k are dp-prompt's public parameters, not {name}'s")
        return None
    if prior is None and public_top_k is None:
        return defaults["public_top_k"]
    if prior is not None and not isinstance(prior, bool):
        raise ParameterError(f"prior must be true or false, got {_shown(prior)}")
    if prior is False:
        return False
    if public_top_k is None or public_top_k == 0:
        return None
    if isinstance(public_top_k, bool) or not isinstance(public_top_k, int) or not 0 < public_top_k <= 100_000:
        raise ParameterError(f"public_top_k must be a whole number from 1 to 100000 (0 or null: the whole "
                             f"vocabulary), got {_shown(public_top_k)}")
    return public_top_k


def _check_clip(value: object, default: tuple[float, float]) -> tuple[float, float]:
    """Public clipping bounds of a request: ``[low, high]``, two finite JSON numbers with ``low < high``
    (``None``: ``default``).

    >>> _check_clip([-3, 1.5], (-2.0, 2.0)), _check_clip(None, (-2.0, 2.0))
    ((-3.0, 1.5), (-2.0, 2.0))
    >>> _check_clip([2, -2], (-2.0, 2.0))
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: the clipping bounds must be two numbers low < high such as [-2, 2], got [2, -2]
    """
    if value is None:
        return default
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            and value[0] < value[1]):
        return float(value[0]), float(value[1])
    raise ParameterError(f"the clipping bounds must be two numbers low < high such as [-2, 2], got {_shown(value)}")


def _check_delta(name: str, value: object, default: float | None) -> float | None:
    """δ of a request for a rewriter that takes one (``default`` not None): a number in (0, 1); refused otherwise.

    >>> _check_delta("dp-bart", None, 1e-5), _check_delta("dp-bart", 1e-6, 1e-5), _check_delta("dp-mlm", None, None)
    (1e-05, 1e-06, None)
    >>> _check_delta("dp-mlm", 1e-5, None)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: dp-mlm is pure epsilon-DP: it takes no delta, got 1e-05
    """
    if default is None:
        if value is None:
            return None
        raise ParameterError(f"{name} is pure epsilon-DP: it takes no delta, got {_shown(value)}")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) < 1.0:
        raise ParameterError(f"delta must be a number between 0 and 1 such as 1e-5, got {_shown(value)}")
    return float(value)


def split_guarantee(statement: str) -> tuple[str, str]:
    """``(what is covered, what is not)``: the sentence split at its ``Not covered:`` part.

    >>> split_guarantee("epsilon-DP per word. Not covered: the length.")
    ('epsilon-DP per word.', 'the length.')
    >>> split_guarantee("3-DP")
    ('3-DP', '')
    """
    parts = _NOT_COVERED.split(statement, maxsplit=1)
    return parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")


def _kept(diag: DocumentDiagnostics, inp: list[int], words: list[str], emb: Embeddings) -> tuple[list[bool], Counter[str]]:
    """Which output words are input words kept (by position when aligned, else by count), and those words."""
    out = diag.output_rows.tolist()
    if diag.aligned:
        kept_flags = [a == b for a, b in zip(out, inp)]
        kept_words = Counter(emb.words[b] for a, b in zip(out, inp) if a == b)
        out_flags = kept_flags
    else:
        remaining = Counter(inp)
        out_flags = []
        for w in words:
            row = emb.index.get(w)
            hit = row is not None and remaining[row] > 0
            if hit and row is not None:  # (hit implies a row: said for the type checker)
                remaining[row] -= 1
            out_flags.append(hit)
        kept_words = Counter(w for w, f in zip(words, out_flags) if f)
    return out_flags, kept_words


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
        mechanism API (``get(name, model=..., clip=...).fit()``).
    clip : (float, float) or None
        The public clipping bounds the page starts from for every language-model rewriter (``None``:
        :data:`LM_DEFAULT_CLIP`, or :data:`LM_DEFAULT_CLIP_GAUSSIAN` for a rewriter with δ). Public
        parameters: chosen without the private text, recorded in every release's guarantee.
    """

    def __init__(self, embeddings: Embeddings | str | os.PathLike[str] | None = None, cache_size: int = 24,
                 rewriter: Rewriter | None = None, lm_model: str | os.PathLike[str] | None = None,
                 clip: tuple[float, float] | None = None) -> None:
        self._rewriter = rewriter
        self._lm_model = None if lm_model is None else os.fspath(lm_model)
        self._clip = clip
        #: each offered language-model rewriter -> its public defaults (``clip``, ``delta``: None when pure ε-DP)
        self.lm_mechanisms: dict[str, dict[str, object]] = {} if lm_model is None else self._probe_lm()
        objective = None
        if rewriter is not None and isinstance(rewriter.card.get("training"), dict):
            objective = rewriter.card["training"].get("objective")
        self.sentence_mechanisms: tuple[str, ...] = () if rewriter is None else tuple(
            n for n in names("sentence") if "clip" not in mechanism_class(n).param_names()
            and getattr(mechanism_class(n), "objective", None) in (None, objective))
        self._source = embeddings
        self._emb: Embeddings | None = None
        self._lock = threading.Lock()
        self._warn_lock = threading.Lock()  # catch_warnings changes process-wide state: one release at a time
        self._fitted: OrderedDict[tuple[object, ...], Mechanism] = OrderedDict()
        self._cache_size = cache_size
        self._stops = resolve_stop_words("english")
        self._sq_norms: np.ndarray | None = None

    def _probe_lm(self) -> dict[str, dict[str, object]]:
        """The language-model rewriters that fit on the model folder, with their default bounds and δ.

        The language-model rewriters (``dp-prompt``, ``dp-paraphrase``, ``dp-mlm``, ``dp-bart``) are the sentence
        mechanisms that take public clipping bounds (a ``clip`` parameter); one with a ``delta`` parameter adds
        Gaussian noise to the clipped encoder output (DP-BART) and starts from :data:`LM_DEFAULT_CLIP_GAUSSIAN`.
        Each is fitted as a caller would: a mechanism whose model kind the folder does not hold refuses in
        ``fit``, and is not offered. Raises :class:`ParameterError` when none fits.
        """
        offered: dict[str, dict[str, object]] = {}
        why: list[str] = []
        for name in names("sentence"):
            params = mechanism_class(name).param_names()
            if "clip" not in params:
                continue
            delta = LM_DEFAULT_DELTA if "delta" in params else None
            prior = "prior" in params
            default = LM_PRIOR_CLIP if prior else LM_DEFAULT_CLIP if delta is None else LM_DEFAULT_CLIP_GAUSSIAN
            clip = self._clip or default
            extra = self._lm_extra(name, LM_PRIOR_DEFAULTS["public_top_k"] if prior else None)
            try:
                get(name, epsilon=1.0, model=self._lm_model, clip=clip,
                    **({} if delta is None else {"delta": delta}), **extra).fit()
            except TextDPError as exc:
                why.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                continue
            offered[name] = {"clip": list(clip), "delta": delta}
            if prior:
                offered[name].update(prior=True, public_top_k=LM_PRIOR_DEFAULTS["public_top_k"],
                                     epsilon=LM_PRIOR_DEFAULTS["epsilon"])
        if not offered:
            raise ParameterError(f"no language-model rewriter runs on {self._lm_model}: {why[0] if why else ''}; "
                                 "give a model folder from textdp train-rewriter, or a causal, sequence-to-sequence "
                                 "or masked language model (safetensors or GGUF)")
        return offered

    @staticmethod
    def _lm_extra(name: str, public_top_k: object) -> dict[str, object]:
        """The public prior's parameters of ``name`` (none for a rewriter without a prior): prior on with
        ``public_top_k`` (None: the prior off), and the page's token cap."""
        if "prior" not in mechanism_class(name).param_names():
            return {}
        if public_top_k is False:
            return {"prior": False, "max_new_tokens": LM_PRIOR_DEFAULTS["max_new_tokens"]}
        return {"prior": True, "public_top_k": public_top_k, "max_new_tokens": LM_PRIOR_DEFAULTS["max_new_tokens"]}

    def _is_sentence(self, name: str) -> bool:
        """Whether ``name`` rewrites sentences (the registry's family; ``name`` is a checked, offered name)."""
        return entry(name).family == "sentence"

    @property
    def embeddings(self) -> Embeddings:
        with self._lock:
            if self._emb is None:
                from ..embeddings import Embeddings, load_embeddings

                self._emb = self._source if isinstance(self._source, Embeddings) else load_embeddings(self._source)
            return self._emb

    def mechanisms(self) -> list[dict[str, object]]:
        """Every registered word and document mechanism, then the sentence mechanisms of the model, with their
        release kind and default ε."""
        out: list[dict[str, object]] = [
            {"name": n, "kind": "bag" if n in BAG_MECHANISMS else "text", "epsilon": DEFAULT_EPSILON.get(n, 3.0)}
            for n in MECHANISM_NAMES
        ]
        out += [{"name": n, "kind": "sentence", "epsilon": 3.0} for n in self.sentence_mechanisms]
        return out + [{"name": n, "kind": "sentence", "epsilon": 3.0, "lm": True, **d}
                      for n, d in self.lm_mechanisms.items()]

    def _offered_sentence(self) -> tuple[str, ...]:
        return (*self.sentence_mechanisms, *self.lm_mechanisms)

    def limits(self) -> dict[str, object]:
        return {"epsilon_min": EPSILON_MIN, "epsilon_max": EPSILON_MAX, "max_text_chars": MAX_TEXT_CHARS,
                "max_size": MAX_SIZE, "audit_epsilon_min": AUDIT_EPSILON_RANGE[0],
                "audit_epsilon_max": AUDIT_EPSILON_RANGE[1], "audit_samples": AUDIT_SAMPLES}

    def mechanism(self, name: str, epsilon: float, size: int | None, clip: tuple[float, float] | None = None,
                  delta: float | None = None, public_top_k: object = None) -> Mechanism:
        """A fitted mechanism (cached by its public parameters; ``public_top_k``: dp-prompt's prior, False when
        off, None for the prior over the whole vocabulary)."""
        key = (name, epsilon, size, clip, delta, public_top_k)
        with self._lock:
            if key in self._fitted:
                self._fitted.move_to_end(key)
                return self._fitted[key]
        if name in self.lm_mechanisms:
            mech = get(name, epsilon=epsilon, model=self._lm_model, clip=clip,
                       **({} if delta is None else {"delta": delta}), **self._lm_extra(name, public_top_k)).fit()
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
                 size: int | None) -> tuple[list[_Release], list[DocumentDiagnostics], list[str]]:
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
        text = _check_text(text)
        name = _check_mechanism(mechanism, self._offered_sentence())
        eps = _check_epsilon(epsilon)
        n = _check_size(name, size)
        if name in self.lm_mechanisms:
            defaults = self.lm_mechanisms[name]
            bounds = _check_clip(clip, tuple(defaults["clip"]))  # type: ignore[arg-type]
            d = _check_delta(name, delta, defaults["delta"])  # type: ignore[arg-type]
            top_k = _check_prior(name, prior, public_top_k, defaults)
            return self._rewrite(text, name, eps, self.mechanism(name, eps, None, bounds, d, top_k))
        if prior is not None or public_top_k is not None:
            raise ParameterError(f"prior and public_top_k are dp-prompt's public parameters, not {name}'s")
        if clip is not None or delta is not None:
            raise ParameterError(f"clip and delta are public parameters of the language-model rewriters, not of {name}")
        if self._is_sentence(name):
            return self._rewrite(text, name, eps, self.mechanism(name, eps, None))
        protected = self._protected_rows(text)
        if not protected and name not in _RELEASES_STOP_WORDS:
            raise DocumentError(_NO_WORDS)
        overflow = f"epsilon {eps:g} overflows {name}'s probabilities; choose a smaller epsilon"
        try:
            mech = self.mechanism(name, eps, n)
        except (OverflowError, FloatingPointError):
            raise ParameterError(overflow) from None
        bag = _truncated_bag(mech, n)
        if bag is not None and len(protected) < bag:
            raise DocumentError(f"the text has {len(protected)} protected word{'s' if len(protected) != 1 else ''}, "
                                f"fewer than the bag size N = {bag}: set N to {len(protected)} or less, or add text")
        try:
            docs, diags, notes = self._release(mech, [text], n)
        except (OverflowError, FloatingPointError):
            raise ParameterError(overflow) from None
        except DocumentError as exc:  # the mechanism's own refusal; its advice names CLI options the page lacks
            raise DocumentError(_page_advice(str(exc))) from None
        doc, diag = docs[0], diags[0]
        record = doc.to_record()
        inp = diag.input_rows.tolist()
        words = list(doc.words)
        out_flags, kept_words = _kept(diag, inp, words, self.embeddings)
        kept = int(sum(out_flags))
        covered, not_covered = split_guarantee(doc.guarantee.statement)  # the record carries the compact form
        return {
            "mechanism": name,
            "epsilon": mech.epsilon_,  # the fitted calibration's, which the noise and the record read
            "kind": "bag" if name in BAG_MECHANISMS else "text",
            "output": [{"word": w, "kept": bool(f)} for w, f in zip(words, out_flags)],
            "input": self._spans(text, kept_words, bag),
            "kept": kept,
            "protected": len(inp) if diag.aligned else len(words),
            "kept_fraction": float(diag.unchanged_fraction()),
            "guarantee": {"statement": covered, "not_covered": not_covered, "unit": record.get("unit"),
                          "epsilon": record.get("epsilon"), "delta": record.get("delta")},
            "meaning": self._meaning(mech, doc.guarantee, inp if inp else protected),
            "record": record,
            "notes": notes,
        }

    def _rewrite(self, text: str, name: str, eps: float, mech: Mechanism) -> dict[str, object]:
        """One release of a sentence mechanism (fitted ``mech``): the rewritten text and its guarantee per unit.

        A word of the output is marked kept when the input has it too (matched once each, case ignored); the
        guarantee in numbers, from the release's own guarantee (ε and δ per unit): ``exp(epsilon)`` for the text
        and any text with one unit (a sentence) changed into a neighbouring one and ``exp(m * epsilon)`` for any
        two texts of ``m`` sentences (basic composition); for a rewriter whose unit is the whole document
        (dp-prompt), ``exp(epsilon)`` for the text and any other text. With δ > 0 every factor holds except
        with probability δ (``m * δ`` for m sentences).
        """
        diags: list[dict[str, object]] = []
        with self._warn_lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            docs = mech.privatize_batch([text], seed=make_rng(), private_report=diags)
        notes = sorted({str(w.message) for w in caught})
        doc = docs[0]
        record = doc.to_record()
        g = doc.guarantee
        words_in = [m.group() for m in _LETTERS.finditer(text)]
        left = Counter(w.lower() for w in words_in)
        out_flags = []
        for w in doc.text.split():
            hit = left[w.lower()] > 0
            if hit:
                left[w.lower()] -= 1
            out_flags.append(hit)
        kept_words = Counter(w.lower() for w, f in zip(doc.text.split(), out_flags) if f)
        spans: list[list[object]] = []
        pos = 0
        for m in _LETTERS.finditer(text):
            if m.start() > pos:
                spans.append([text[pos : m.start()], None])
            w = m.group().lower()
            cls = "kept" if kept_words[w] > 0 else "replaced"
            if kept_words[w] > 0:
                kept_words[w] -= 1
            spans.append([m.group(), cls])
            pos = m.end()
        if pos < len(text):
            spans.append([text[pos:], None])
        kept = sum(1 for sp in spans if sp[1] == "kept")
        units = int(record.get("units") or 1)
        e, d = float(g.epsilon), float(g.delta or 0.0)
        meaning: list[dict[str, object]] = []
        if g.unit == "document":
            meaning.append(_pair("Your text, and any other text", e, d))
        else:
            length = getattr(g, "max_length", None)
            sentence = f"a sentence (at most {length} tokens)" if length else "a sentence"
            adjacency = _adjacency(g)
            meaning.append(_pair(f"Your text, and the same text with {sentence} changed into any other"
                                 if not adjacency else f"Your text, and the same text with one sentence changed into "
                                 f"a neighbouring one ({adjacency})", e, d))
            meaning.append(_pair(f"Your text ({units} sentence{'s' if units != 1 else ''}), and any other text of as "
                                 f"many{', each a neighbour of yours' if adjacency else ''}", units * e, units * d))
        if not getattr(g, "covered", True):
            notes.append("the model may have seen private data: the guarantee does not cover what it memorised")
        covered, not_covered = split_guarantee(g.statement)
        return {
            "mechanism": name, "epsilon": eps, "kind": "sentence",
            "output": [{"word": w, "kept": bool(f)} for w, f in zip(doc.text.split(), out_flags)],
            "input": spans, "kept": kept, "protected": len(words_in),
            "kept_fraction": kept / len(words_in) if words_in else 0.0,
            "guarantee": {"statement": covered, "not_covered": not_covered, "unit": record.get("unit"),
                          "epsilon": record.get("epsilon"), "delta": record.get("delta")},
            "meaning": meaning, "record": record, "notes": notes,
        }

    def _protected_rows(self, text: str) -> list[int]:
        """Vocabulary rows of the words a mechanism protects (:func:`textdp.text.normalize`, in the vocabulary)."""
        index = self.embeddings.index
        return [index[w] for w in normalize(text, self._stops) if w in index]

    def nearest_word(self, row: int) -> tuple[int, float]:
        """The vocabulary row nearest to ``row`` (Euclidean distance between embeddings, itself excluded).

        Candidates from ``|x|^2 - 2 x.v`` in float32 (one matrix-vector product), the best 8 re-ranked exactly
        in float64.
        """
        emb = self.embeddings
        vectors = emb.vectors
        with self._lock:
            if self._sq_norms is None:
                self._sq_norms = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
            sq = self._sq_norms
        approx = sq - 2.0 * (vectors @ vectors[row]).astype(np.float64)
        approx[row] = np.inf
        k = min(8, approx.size - 1)
        cand = np.argpartition(approx, k)[: k + 1]
        cand = cand[cand != row]
        exact = np.linalg.norm(np.asarray(vectors[cand], dtype=np.float64)
                               - np.asarray(vectors[row], dtype=np.float64), axis=1)
        order = np.lexsort((cand, exact))
        return int(cand[order[0]]), float(exact[order[0]])

    def _meaning(self, mech: Mechanism, guarantee: Guarantee, rows: Sequence[int]) -> list[dict[str, object]]:
        """The guarantee as numbers for this text: the factor for two example neighbours of it, in words.

        For a word of the text (its first protected word), ``w'`` its nearest vocabulary word and ``w''`` the
        protected word of the text farthest from it: the bound on how much more likely any output is from the
        text than from the same text with ``w`` replaced by ``w'`` (or ``w''``). Word mechanisms: the product
        of the per-word factors, here the one factor ``exp(log_ratio_bound(w, w'))``; ``earth-movers``:
        ``exp(epsilon * N * E_d)`` with ``E_d = d(w, w') / N`` for a truncated bag (one of N words moved) and
        ``exp(epsilon * N * W_inf)`` with ``W_inf <= d(w, w')`` for a sampled one; a mechanism with neither a
        metric guarantee nor a per-word bound (``syntf``): ``exp(epsilon)`` for any two texts (Weggenmann &
        Kerschbaum 2018).
        """
        from ..guarantees.earth_movers import EarthMoversGuarantee

        words = self.embeddings.words
        if not isinstance(guarantee, EarthMoversGuarantee) and not hasattr(mech, "log_ratio_bound"):
            # a document mechanism with one ε for any two texts (SynTF: no metric, no per-word bound)
            loss = float(guarantee.epsilon)
            return [{"text": "any two texts, however different (with the same N)", "loss": loss,
                     "factor": _factor(loss), "sentence": "For any two texts, however different (with the same "
                     f"N): any output is at most {_factor(loss)} times as likely from one as from the other."}]
        if not rows:
            return []
        w = int(rows[0])
        nn, d_nn = self.nearest_word(w)
        vectors = self.embeddings.vectors
        others = sorted({int(r) for r in rows} - {w})
        pairs = [(nn, f"its nearest word \u201c{words[nn]}\u201d", d_nn)]
        groups = getattr(mech, "groups_", None)  # CusText: the bound holds within one customized output set
        if groups is not None and groups[nn] != groups[w]:
            members = np.flatnonzero(np.asarray(groups) == groups[w])
            members = members[members != w]
            if members.size:
                dist = np.linalg.norm(np.asarray(vectors[members], dtype=np.float64)
                                      - np.asarray(vectors[w], dtype=np.float64), axis=1)
                near = int(members[int(np.argmin(dist))])
                pairs = [(near, f"\u201c{words[near]}\u201d, its nearest word in the same output set",
                          float(dist.min())), (nn, f"its nearest word \u201c{words[nn]}\u201d", d_nn)]
        if others:
            dist = np.linalg.norm(np.asarray(vectors[others], dtype=np.float64)
                                  - np.asarray(vectors[w], dtype=np.float64), axis=1)
            far = others[int(np.argmax(dist))]
            pairs.append((far, f"\u201c{words[far]}\u201d, another word of your text", float(dist.max())))
        out: list[dict[str, object]] = []
        for other, what, d in pairs:
            if isinstance(guarantee, EarthMoversGuarantee):
                loss = guarantee.privacy_loss(d / guarantee.size if guarantee.bag == "truncate" else d)
            elif hasattr(mech, "log_ratio_bound"):
                loss = float(mech.log_ratio_bound(w, other))
            else:  # pragma: no cover - every registered word or bag mechanism is handled above
                continue
            head = f"Your text, and the same text with \u201c{words[w]}\u201d replaced by {what}"
            if math.isinf(loss):
                tail = "no bound: the guarantee does not cover this pair, and the output can tell them apart."
            else:
                tail = f"any output is at most {_factor(loss)} times as likely from one as from the other."
            out.append({"text": head, "loss": loss if math.isfinite(loss) else None, "factor": _factor(loss),
                        "distance": round(d, 4), "sentence": f"{head}: {tail}"})
        return out

    def _spans(self, text: str, kept: Counter[str], bag_size: int | None) -> list[list[object]]:
        """The input as ``[text, class]`` pieces: ``kept`` / ``replaced`` / ``dropped`` words, ``None`` between."""
        index = self.embeddings.index
        spans: list[list[object]] = []
        pos = 0
        protected = 0
        left = Counter(kept)
        for m in _LETTERS.finditer(text):
            if m.start() > pos:
                spans.append([text[pos : m.start()], None])
            w = m.group().lower()
            if len(w) < 2 or w in self._stops or w not in index:
                cls = "dropped"
            elif bag_size is not None and protected >= bag_size:
                cls = "dropped"
                protected += 1
            else:
                protected += 1
                cls = "kept" if left[w] > 0 else "replaced"
                if left[w] > 0:
                    left[w] -= 1
            spans.append([m.group(), cls])
            pos = m.end()
        if pos < len(text):
            spans.append([text[pos:], None])
        return spans

    # -- kept fraction against ε ------------------------------------------------------------------
    def curve(self, text: object, mechanism: object, target: object = 0.5, size: object = None) -> dict[str, object]:
        """Kept fraction against ε for this text, and the ε that keeps ``target`` of its words.

        ``earth-movers``: the exact survival curve of :func:`textdp.accounting.calibration.survival_curve`
        on this text's words (common random numbers, monotone in ε). Every other mechanism: the mechanism
        itself run on the text at each ε of :data:`CURVE_EPSILONS` (about :data:`CURVE_WORDS` words each),
        the ε for the target read from the running maximum by interpolation in log ε.
        """
        text = _check_text(text)
        name = _check_mechanism(mechanism, self._offered_sentence())
        if isinstance(target, bool) or not isinstance(target, int | float) or not 0.0 < float(target) < 1.0:
            raise ParameterError(f"the target kept fraction must be a number between 0 and 1 such as 0.5, "
                                 f"got {_shown(target)}")
        target = float(target)
        n = _check_size(name, size)
        if self._is_sentence(name):
            return {"mechanism": name, "points": [], "target": target, "epsilon_for_target": None,
                    "why": "no curve for sentence rewriting",
                    "method": "not computed for sentence rewriting (each point would rewrite the whole text again)"}
        emb = self.embeddings
        rows = np.array([emb.index[w] for w in (m.group().lower() for m in _LETTERS.finditer(text))
                         if len(w) > 1 and w not in self._stops and w in emb.index], dtype=np.int64)
        if rows.size == 0:
            raise DocumentError("no in-vocabulary word left after normalisation; nothing to plot")
        if issubclass(mechanism_class(name), EarthMoversPrivacy):
            from ..accounting.calibration import survival_curve

            words = rows[: 200]
            repeats = max(2, min(10, 300 // words.size))
            curve = survival_curve(emb, words=words, repeats=repeats, seed=make_rng())
            grid = np.logspace(-1, 3, 41)
            points = [[float(e), curve.unchanged_fraction(float(e))] for e in grid]
            method = (f"exact survival curve (textdp calibrate) of {words.size} words x {repeats} noise draws; "
                      "fraction of words mapped to themselves")
            try:
                eps_target: float | None = curve.epsilon_for(target)
                why = ""
            except ParameterError as exc:
                eps_target, why = None, str(exc)
        else:
            # word-level mechanisms treat words one by one: the first CURVE_WORDS protected words stand for the text
            first = [emb.words[r] for r in rows[:CURVE_WORDS]]
            sample = " ".join(first)
            copies = max(1, CURVE_WORDS // len(first))
            points = []
            for e in CURVE_EPSILONS:
                try:
                    mech = self.mechanism(name, e, n)
                    _, diags, _ = self._release(mech, [sample] * copies, n)
                except (OverflowError, FloatingPointError):
                    continue  # beyond what this mechanism can represent: the point is left out
                points.append([e, float(np.mean([d.unchanged_fraction() for d in diags]))])
            method = (f"the mechanism run {copies} time{'s' if copies > 1 else ''} on this text at each epsilon "
                      "(Monte Carlo); fraction of words released unchanged")
            eps_target, why = _inverse(points, target)
        return {"mechanism": name, "points": points, "target": target, "epsilon_for_target": eps_target,
                "why": why, "method": method}

    # -- audit ------------------------------------------------------------------------------------
    def audit(self, mechanism: object, epsilon: object) -> dict[str, object]:
        """Run the mechanism's registered audit case (public neighbouring pair; not the text) at ``epsilon``."""
        from ..audit import audit

        name = _check_mechanism(mechanism, self._offered_sentence())
        eps = _check_epsilon(epsilon)
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


#: A text with no protected word: what the page says (``custext+`` releases stop words in place, so it runs).
_NO_WORDS = ("no word of this text can be released: stop words, one-letter words, numbers and words outside the "
             "vocabulary are set aside; type a sentence of ordinary English words")
_RELEASES_STOP_WORDS = tuple(n for n in MECHANISM_NAMES if getattr(mechanism_class(n), "keeps_stop_words", False))


def _truncated_bag(mech: Mechanism, size: int | None) -> int | None:
    """N when ``mech`` releases a bag of the text's first N protected words (Earth Mover's privacy with
    ``bag="truncate"``: a shorter text is refused, the words after the N-th are dropped), else None."""
    if isinstance(mech, EarthMoversPrivacy) and mech.get_params().get("bag", "truncate") == "truncate":
        return size
    return None


def _page_advice(message: str) -> str:
    """A mechanism's refusal for the page: without the unit's number and the CLI advice after the first ``;``.

    >>> _page_advice("document 0: only 4 in-vocabulary words, fewer than the bag size N=10; lower --size, or use --bag sample")
    'only 4 in-vocabulary words, fewer than the bag size N=10: lower N or add text'
    """
    core = re.sub(r"^document \d+: ", "", message.splitlines()[0] if message else "").split(";")[0].strip()
    return f"{core}: lower N or add text" if "bag size" in core else f"{core}: change the text"


def _pair(text: str, loss: float, delta: float) -> dict[str, object]:
    """One example of the guarantee in numbers: two inputs, the bound ``exp(loss)`` on their output odds, in words.

    >>> _pair("Your text, and any other text", 2.0, 1e-5)["sentence"]
    'Your text, and any other text: any output is at most 7.39 times as likely from one as from the other, except with probability at most 1e-05.'
    """
    tail = f", except with probability at most {delta:.3g}" if delta > 0 else ""
    return {"text": text, "loss": loss, "factor": _factor(loss), "delta": delta,
            "sentence": f"{text}: any output is at most {_factor(loss)} times as likely from one as from the other"
                        f"{tail}."}


def _adjacency(guarantee: Guarantee) -> str:
    """Which sentences are neighbours, as a rewriter's guarantee states it (its public ``adjacency`` parameter;
    ``""`` when it states none: any two sentences)."""
    params = getattr(guarantee, "params", None)
    value = params.get("adjacency") if isinstance(params, dict) else None
    return str(value).rstrip(".") if value else ""


def _factor(loss: float) -> str:
    """``exp(loss)`` as a number a person can hold: ``3.2``, ``410``, ``2.4 × 10^9``; ``∞`` when unbounded.

    >>> _factor(0.0), _factor(1.16), _factor(6.0), _factor(21.6), _factor(1e4), _factor(math.inf)
    ('1', '3.19', '403', '2.4 × 10^9', '10^4343', '∞')
    """
    if math.isinf(loss):
        return "\u221e"
    if loss > 700:
        return f"10^{loss / math.log(10):.0f}"
    f = math.exp(loss)
    if f < 10:
        return f"{f:.3g}"
    if f < 100_000:
        return f"{f:,.0f}"
    e = math.floor(math.log10(f))
    return f"{f / 10**e:.1f} \u00d7 10^{e}"


def _inverse(points: list[list[float]], target: float) -> tuple[float | None, str]:
    """ε where the running maximum of the measured curve first reaches ``target`` (log-linear interpolation).

    >>> _inverse([[1.0, 0.0], [10.0, 0.4], [100.0, 0.8]], 0.6)
    (31.6228, '')
    >>> _inverse([[1.0, 0.0], [10.0, 0.2]], 0.5)[0] is None
    True
    """
    eps = np.array([p[0] for p in points])
    frac = np.maximum.accumulate(np.array([p[1] for p in points]))
    if frac[-1] < target:
        return None, f"no epsilon up to {eps[-1]:g} keeps {target:.0%} of this text's words"
    if frac[0] >= target:
        return None, f"already {frac[0]:.0%} of the words are kept at epsilon {eps[0]:g}"
    i = int(np.argmax(frac >= target))
    f0, f1 = frac[i - 1], frac[i]
    t = 0.0 if f1 == f0 else (target - f0) / (f1 - f0)
    value = math.exp(math.log(eps[i - 1]) + t * (math.log(eps[i]) - math.log(eps[i - 1])))
    return round(value, 4), ""
