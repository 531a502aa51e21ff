"""The one mechanism base class: every registered mechanism of every family derives from it.

The API (scikit-learn style, what a new mechanism implements and what callers use)
---------------------------------------------------------------------------------
**Class-level declarations** (read by the registry, the pipeline and the CLI; no reflection):

``name``
    the registered name (``textdp.mechanisms.get(name)``; one spelling across families);
``family``
    one of :data:`FAMILIES`: ``document`` (a document becomes a bag), ``word`` (each word
    replaced in place), ``sentence`` (sentences rewritten by a model), ``topics`` (a
    topic-keyword matrix);
``releases``
    one of :data:`~textdp.guarantees.RELEASE_FORMS`: ``bag``, ``text``, ``sentence``, ``matrix``;
``reference``
    the paper the mechanism and its bound come from;
``chunk_size``
    units privatized at once by default (memory is bounded by a chunk);
``epsilon_from``
    the parameter ε can be derived from instead (``random``: ``rate``), or ``None``.

**Parameters** are declared once, as annotated class attributes: every subclass of
:class:`Mechanism` is made a keyword-only dataclass (``kw_only=True, eq=False, repr=False``,
applied by ``__init_subclass__`` and announced to type checkers by ``dataclass_transform``),
so a family base declares its shared parameters (``epsilon``, ``embeddings``, ``seed``, ...)
and a mechanism adds only its own (``beta: float = 0.001``). The generated ``__init__``
stores them unchanged under the same names (as in scikit-learn: no validation in
``__init__``); :meth:`param_names` reads the dataclass fields, so the constructor, the
parameter list, :meth:`get_params`, :meth:`set_params`, the CLI and the settings files cannot
disagree. Every mechanism takes ``epsilon`` and ``seed``. On a subclass, an annotation that
is not a parameter must be a ``ClassVar`` (a class-level declaration); fitted attributes are
assigned in ``_fit`` without a class annotation (only :class:`Mechanism`, which is not a
dataclass, annotates the common ones). A hand-written ``__init__`` is refused at class
creation, so a parameter cannot be kept in two places. A new word mechanism is, in full::

    class Uniform(WordLevelMechanism):
        name = "uniform"                         # class-level declarations
        reference = "..."
        metric = "discrete"
        floor: float = 0.0                       # its own parameter, after the family's

        def core(self, ids, rng): ...            # the pure batch function
        def _statement(self): ...                # the guarantee, in words

**fit(X=None, y=None)** validates the parameters and loads the public data (embeddings, a
model); fitted attributes end in ``_`` (``calibration_``, ``embeddings_``, ``rng_``, ``seeded_``).
``fit`` builds one frozen :class:`~textdp.guarantees.calibration.Calibration` (``_calibrate``: ε validated
there, once, with δ and the noise parameters the sampler uses); ``epsilon_`` and ``delta_`` read it, and so do
the noise, :meth:`guarantee`, the records and the ledger's charge. Using a never-fitted mechanism fits it;
**assigning a parameter after fit** (``m.epsilon = 100`` or :meth:`set_params`) drops the fitted state, and
every later use refuses with a one-line :class:`~textdp.errors.ParameterError` ("refit first") until ``fit``
runs again: the noise can never use a value the guarantee does not state.

**The one batch verb** ::

    privatize_batch(units, ids=None, *, seed=None, seeded=None, size=None,
                    size_from_data=False, empty="error", private_report=None,
                    progress=None, chunk=None) -> list[ReleaseRecord]

``units`` are texts (document, word and sentence families) or matrices (topics);
``ids`` their record ids (default ``"0"``, ``"1"``, ...); ``seed`` the randomness of this call
(default: the mechanism's generator; nothing on the fitted object changes, so one object
serves many partitions at once); ``size``/``size_from_data`` the public bag size of ``bag``
releases (refused by the others); ``empty`` the policy for a unit with nothing to privatize
(:data:`~textdp.guarantees.EMPTY_POLICIES`: ``error`` stops before any noise, ``skip`` writes
no record, ``empty`` an empty one; the guarantee says which lines were emptied is public);
``private_report`` a list (or callable) receiving one PRIVATE diagnostics object per unit
(emptied ones included); ``progress(done, total)`` after each chunk. Every unit is validated
before any noise is drawn. :meth:`iter_privatize_batch` yields the same records a chunk at a
time; :meth:`privatize` takes one unit (or an iterable); :meth:`transform` returns texts. Both take the
same keywords as :class:`BatchOptions` (a ``TypedDict``, checked by mypy).

**The one guarantee method** ``guarantee(context=None) -> Guarantee``: ``context`` is a
:class:`ReleaseContext`, what the release depends on beyond the parameters (bag size, matrix
shape, seeded, empty policy); :meth:`release_context` builds it for a batch.

**What a subclass supplies** (a family base supplies most of it):

* ``_fit()`` - validate, load public data, precompute;
* ``_prepare(unit, uid) -> P`` - validate one unit and compute its PRIVATE input form
  (rows, segments, a matrix); ``_is_empty(P)`` and ``_empty_message(uid, P)``;
* ``_privatize(prepared, context, rng) -> list[O]`` - the core on one chunk (a pure batch
  function of its arguments);
* ``_release(uid, P, output_or_None, context, guarantee, seeded) -> ReleaseRecord``;
* ``_diagnose(uid, P, output_or_None)`` - the PRIVATE report entry (optional);
* ``guarantee(context)`` - the family's :class:`~textdp.guarantees.Guarantee` subclass.
"""

from __future__ import annotations

import dataclasses
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Protocol,
    Self,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
    dataclass_transform,
    overload,
)

import numpy as np

from .._rng import SeedLike, is_seeded, make_rng
from .._validation import BudgetLike, check_choice
from ..errors import DocumentError, ParameterError, ParameterTypeError, UnrecordedSpendWarning
from ..guarantees import EMPTY_POLICIES, RELEASE_FORMS, Guarantee, ReleaseRecord
from ..guarantees.calibration import Calibration
from ..guarantees.events import Charge
from ..progress import ProgressCallback

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["FAMILIES", "BatchOptions", "ChargeCallback", "Mechanism", "PrivateReport", "ReleaseContext", "SeedLike",
           "SpendLedger", "check_ids"]

#: the mechanism families (the registry groups names by them)
FAMILIES = ("document", "word", "sentence", "topics")

P = TypeVar("P")  # a unit's prepared (PRIVATE) input
O = TypeVar("O")  # noqa: E741 - a unit's core output
R = TypeVar("R", bound=ReleaseRecord)  # the release record type

#: receives PRIVATE per-unit diagnostics: a list to append to, or a callable
PrivateReport = list[Any] | Callable[[Any], None]


def empty_unit_error(what: str) -> DocumentError:
    """The error of a unit with nothing to privatize under ``empty="error"``: ``what``, then how to release the
    others, in Python's words (``empty='skip'``) and, for the command line, in its own (``--empty skip``).

    >>> e = empty_unit_error("document 3: no in-vocabulary word")
    >>> str(e).endswith("use empty='skip' (leave it out) or empty='empty' (an empty record)"), e.cli.split("; ")[1]
    (True, 'to release the other documents, add --empty skip (leave it out) or --empty empty (an empty record)')
    """
    return DocumentError(f"{what}; to release the other units, use empty='skip' (leave it out) or empty='empty' (an "
                         "empty record)",
                         cli=f"{what}; to release the other documents, add --empty skip (leave it out) or --empty "
                         "empty (an empty record)")

class SpendLedger(Protocol):
    """What :meth:`Mechanism.set_ledger` needs of a ledger (:class:`textdp.accounting.ledger.PrivacyLedger`)."""

    def charge(self, charges: Mapping[str, Charge], *, mechanism: str, unit: str, budget: BudgetLike | None,
               command: str = ..., new_ledger: bool = ...) -> object: ...


def _text_key(unit: object) -> str:
    """The ledger key of a unit given to ``transform``: an HMAC of its text under this user's secret (PRIVATE)."""
    from .._cache import keyed_digest

    if isinstance(unit, str):
        data = unit.encode("utf-8")
    else:  # a matrix (topics): its values and shape
        arr = np.ascontiguousarray(getattr(unit, "matrix", unit))
        data = str(arr.shape).encode() + arr.tobytes()
    return "text:" + keyed_digest("transform ledger key", data)[:32]


#: receives ``({record id: Charge}, guarantee)`` of a batch once, after validation and before any noise (a ledger)
ChargeCallback = Callable[[dict[str, Charge], Guarantee], object]

class BatchOptions(TypedDict, total=False):
    """The keyword options of the one batch verb (:meth:`Mechanism.privatize_batch` documents each)."""

    seed: SeedLike
    seeded: bool | None
    size: int | None
    size_from_data: bool
    empty: str
    private_report: PrivateReport | None
    progress: ProgressCallback | None
    chunk: int | None
    charge: ChargeCallback | None


@dataclass(frozen=True)
class ReleaseContext:
    """What a release's guarantee depends on beyond the mechanism's parameters.

    Attributes
    ----------
    size : int or None
        The public bag size N (``bag`` releases).
    size_from_data : bool
        N was taken from the data (the guarantee says it reveals that length).
    shape : tuple of int or None
        The released matrix's shape (``matrix`` releases).
    seeded : bool
        The randomness came from a user seed.
    empty : str
        The policy for units with nothing to privatize (:data:`~textdp.guarantees.EMPTY_POLICIES`).
    """

    size: int | None = None
    size_from_data: bool = False
    shape: tuple[int, int] | None = None
    seeded: bool = False
    empty: str = "error"


def check_ids(ids: Sequence[object] | None, n: int) -> list[str]:
    """Record ids of a batch of ``n`` units: ``ids`` as strings, or ``"0"``, ``"1"``, ...

    >>> check_ids(None, 2), check_ids([7, "b"], 2)
    (['0', '1'], ['7', 'b'])
    """
    if ids is None:
        return [str(i) for i in range(n)]
    if len(ids) != n:
        raise ParameterTypeError(f"got {len(ids)} ids for {n} units")
    for x in ids:
        if not isinstance(x, (str, int)) or isinstance(x, bool):
            raise ParameterTypeError(f"ids must be strings or integers, got {type(x).__name__}")
    return [str(x) for x in ids]


@dataclass_transform(kw_only_default=True, eq_default=False)
class Mechanism(ABC, Generic[P, O, R]):
    """Base of every mechanism (see the module docstring for the API).

    Every subclass is a keyword-only dataclass of its parameters (the module docstring says why).
    """

    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    releases: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    chunk_size: ClassVar[int] = 128
    #: the parameter ``epsilon`` may be derived from instead of given (``random``: ``"rate"``); None: ε is required
    epsilon_from: ClassVar[str | None] = None

    epsilon: float | None
    seed: SeedLike
    calibration_: Calibration
    rng_: np.random.Generator
    seeded_: bool
    #: the parameter names (set on each subclass by ``__init_subclass__``; read by ``__setattr__``)
    _param_set: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.family and cls.family not in FAMILIES:
            raise TypeError(f"{cls.__name__}.family must be one of {FAMILIES}")
        if cls.releases and cls.releases not in RELEASE_FORMS:
            raise TypeError(f"{cls.__name__}.releases must be one of {RELEASE_FORMS}")
        if "__init__" in vars(cls):
            raise TypeError(f"{cls.__name__}: declare the parameters as annotated class attributes "
                            "(a dataclass field each), not in __init__")
        dataclasses.dataclass(kw_only=True, eq=False, repr=False)(cls)
        cls._param_set = frozenset(cls.param_names())

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute assignment
        def __setattr__(self, key: str, value: object) -> None:
            """Assigning a parameter of a fitted mechanism drops its fitted state (the next use refuses: refit first)."""
            if key in self._param_set and "rng_" in self.__dict__:
                self._reset()
                object.__setattr__(self, "_changed_after_fit", key)
            object.__setattr__(self, key, value)

    @property
    def epsilon_(self) -> float:
        """The fitted ε: the calibration's (:attr:`calibration_`), what the noise and the guarantee read."""
        try:
            return self.__dict__["calibration_"].epsilon
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no epsilon_ before fit") from None

    @property
    def delta_(self) -> float:
        """The fitted δ per unit: the calibration's (0 for pure ε-DP)."""
        try:
            return self.__dict__["calibration_"].delta
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no delta_ before fit") from None

    def _calibrate(self, epsilon: object, delta: float = 0.0, *, derived_from: str | None = None,
                   **noise: object) -> Calibration:
        """Build the fitted :class:`Calibration` (inside ``_fit``: ε validated here, once) and return it."""
        cal = Calibration(epsilon=epsilon, delta=delta, noise=noise, derived_from=derived_from)  # type: ignore[arg-type]
        object.__setattr__(self, "calibration_", cal)
        return cal

    # -- scikit-learn protocol -------------------------------------------------------------
    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The constructor's parameters: the dataclass fields, in declaration order (family base first)."""
        data_class = cast("type[DataclassInstance]", cls)
        return tuple(f.name for f in dataclasses.fields(data_class) if f.init)

    def get_params(self, deep: bool = True) -> dict[str, object]:
        """Constructor parameters (scikit-learn protocol)."""
        return {k: getattr(self, k) for k in self.param_names()}

    def set_params(self, **params: object) -> Self:
        """Set constructor parameters (scikit-learn protocol); a fitted mechanism must then be refit.

        The fitted state is dropped, as by any assignment of a parameter after ``fit``: a release then
        refuses ("refit first") until :meth:`fit` runs again.
        """
        valid = self.param_names()
        for k in params:
            if k not in valid:
                raise ParameterTypeError(f"unknown parameter {k!r} of {self.name}; valid: {', '.join(valid)}")
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        shown = []
        for k, v in self.get_params().items():
            text = repr(v)
            shown.append(f"{k}={text if len(text) <= 40 else '...'}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _reset(self) -> None:
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            del self.__dict__[key]

    def fit(self, X: object = None, y: object = None) -> Self:
        """Validate the parameters, load public data and build the calibration (``X`` and ``y`` are ignored)."""
        self._reset()
        self.__dict__.pop("_changed_after_fit", None)
        self._fit()
        if "calibration_" not in self.__dict__:
            raise TypeError(f"{type(self).__name__}._fit must build the calibration (self._calibrate(epsilon, ...))")
        self.rng_ = make_rng(self.seed)
        self.seeded_ = is_seeded(self.seed)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return "rng_" in vars(self)

    def _ensure_fitted(self) -> None:
        """Fit a never-fitted mechanism; refuse one whose parameters changed after ``fit`` (refit first)."""
        if "rng_" in self.__dict__:
            return
        changed = self.__dict__.get("_changed_after_fit")
        if changed is not None:
            raise ParameterError(
                f"{self.name}: parameter {changed!r} was assigned after fit, so the fitted calibration (the noise "
                "and the guarantee) no longer matches the parameters; refit first (call .fit())")
        self.fit()

    # -- what a subclass supplies -------------------------------------------------------------
    @abstractmethod
    def _fit(self) -> None:
        """Validate the parameters, load public data and precompute; build the calibration (:meth:`_calibrate`)."""

    @abstractmethod
    def guarantee(self, context: ReleaseContext | None = None) -> Guarantee:
        """The guarantee of a release with this context (default: ``ReleaseContext()``)."""

    @abstractmethod
    def _prepare(self, unit: object, uid: str) -> P:
        """Validate one unit and compute its PRIVATE input form (raise a one-line error if invalid)."""

    def _is_empty(self, prepared: P) -> bool:
        """The unit has nothing to privatize (the ``empty`` policy applies)."""
        return False

    def _empty_message(self, uid: str, prepared: P) -> str:
        return f"unit {uid}: nothing to privatize"

    def _chunk_limit(self, context: ReleaseContext) -> int:
        """The most units a chunk may hold for this context (default: no limit beyond ``chunk``)."""
        return 1 << 62

    @abstractmethod
    def _privatize(self, prepared: Sequence[P], context: ReleaseContext, rng: np.random.Generator) -> list[O]:
        """The core on one chunk: one output per prepared unit (a pure batch function)."""

    @abstractmethod
    def _release(self, uid: str, prepared: P, output: O | None, context: ReleaseContext,
                 guarantee: Guarantee, seeded: bool) -> R:
        """The release record of one unit (``output is None``: an emptied unit, ``empty="empty"``)."""

    def _diagnose(self, uid: str, prepared: P, output: O | None) -> object | None:
        """The PRIVATE report entry of one unit (``None``: none)."""
        return None

    def charge_units(self, prepared: P, guarantee: Guarantee) -> int:
        """How many of ``guarantee``'s units one prepared input unit spends (PRIVATE: a ledger's count).

        One by default (a bag for a document, a matrix for every user); the word family counts the
        protected words, the sentence family its segments when the guarantee is per sentence.
        """
        return 1

    def charge_counts(self, units: Iterable[object], ids: Sequence[object] | None = None, *,
                      context: ReleaseContext | None = None) -> dict[str, int]:
        """PRIVATE: how many of ``guarantee(context)``'s units each record id spends on ``units``.

        Every unit is validated; one with nothing to privatize spends nothing, or is refused (a one-line
        :class:`~textdp.errors.DocumentError`) when ``context.empty`` is ``"error"``, as the release would.
        For a driver that charges a ledger before a release made of several batches (the partitioned
        engine) and adds the counts up; ``guarantee.charge(n)`` is then each id's charge.
        """
        self._ensure_fitted()
        units = list(units)
        uids = check_ids(ids, len(units))
        ctx = context or ReleaseContext(seeded=self.seeded_)
        guarantee = self.guarantee(ctx)
        counts: dict[str, int] = {}
        for unit, uid in zip(units, uids, strict=True):
            p = self._prepare(unit, uid)
            if self._is_empty(p):
                if ctx.empty == "error":
                    raise empty_unit_error(self._empty_message(uid, p))
                continue
            counts[uid] = counts.get(uid, 0) + int(self.charge_units(p, guarantee))
        return counts

    def charges(self, prepared: Sequence[P], uids: Sequence[str], guarantee: Guarantee) -> dict[str, Charge]:
        """``{record id: Charge}``: what this release costs each id (:meth:`Guarantee.charge`, units summed per id).

        A repeated id is one person: its units add up (basic composition, the event's ``count``).
        """
        counts: dict[str, int] = {}
        for uid, p in zip(uids, prepared, strict=True):
            counts[uid] = counts.get(uid, 0) + int(self.charge_units(p, guarantee))
        return {uid: guarantee.charge(n) for uid, n in counts.items()}

    def release_context(self, prepared: Sequence[P], *, size: int | None = None, size_from_data: bool = False,
                        seeded: bool = False, empty: str = "error") -> ReleaseContext:
        """The :class:`ReleaseContext` of a batch (bag families resolve the size from it)."""
        if size is not None or size_from_data:
            flag = "size" if size is not None else "size_from_data"
            raise ParameterError(
                f"{flag} applies to bag mechanisms; {self.name} releases {self.releases}: drop it")
        return ReleaseContext(seeded=seeded, empty=empty)

    # -- the verbs -------------------------------------------------------------------------------
    def iter_privatize_batch(self, units: Iterable[object], ids: Sequence[object] | None = None,
                             **options: Unpack[BatchOptions]) -> Iterator[list[R]]:
        """:meth:`privatize_batch`, yielded a chunk of units at a time (same arguments)."""
        seed, seeded, size = options.get("seed"), options.get("seeded"), options.get("size")
        empty, private_report, progress = options.get("empty", "error"), options.get("private_report"), options.get(
            "progress")
        self._ensure_fitted()
        check_choice(empty, "empty policy", EMPTY_POLICIES)
        units = list(units)
        uids = check_ids(ids, len(units))
        if not units:
            return
        prepared = [self._prepare(u, uid) for u, uid in zip(units, uids, strict=True)]
        emptied = [self._is_empty(p) for p in prepared]
        if empty == "error" and any(emptied):
            k = emptied.index(True)
            raise empty_unit_error(self._empty_message(uids[k], prepared[k]))
        if seeded is None:
            seeded = is_seeded(seed) if seed is not None else self.seeded_
        live = [p for p, e in zip(prepared, emptied, strict=True) if not e]
        context = self.release_context(live, size=size, size_from_data=options.get("size_from_data", False),
                                       seeded=bool(seeded),
                                       empty=empty)
        guarantee = self.guarantee(context)
        charge = options.get("charge")
        if charge is not None:  # before any noise: a refused charge (over budget) releases nothing
            live_ids = [u for u, e in zip(uids, emptied, strict=True) if not e]
            charge(self.charges(live, live_ids, guarantee), guarantee)
        gen = self.rng_ if seed is None else make_rng(seed)
        emit = None
        if private_report is not None:
            emit = private_report.append if isinstance(private_report, list) else private_report
        per_chunk = max(1, min(int(options.get("chunk") or self.chunk_size), self._chunk_limit(context)))
        for start in range(0, len(units), per_chunk):
            idx = range(start, min(start + per_chunk, len(units)))
            todo = [i for i in idx if not emptied[i]]
            outs = self._privatize([prepared[i] for i in todo], context, gen) if todo else []
            by_index: dict[int, O] = dict(zip(todo, outs, strict=True))
            part: list[R] = []
            for i in idx:
                out = by_index.get(i)
                if emit is not None:
                    diag = self._diagnose(uids[i], prepared[i], out)
                    if diag is not None:
                        emit(diag)
                if out is not None or empty == "empty":
                    part.append(self._release(uids[i], prepared[i], out, context, guarantee, bool(seeded)))
            if progress is not None:
                progress(idx.stop, len(units))
            yield part

    def privatize_batch(
        self,
        units: Iterable[object],
        ids: Sequence[object] | None = None,
        *,
        seed: SeedLike = None,
        seeded: bool | None = None,
        size: int | None = None,
        size_from_data: bool = False,
        empty: str = "error",
        private_report: PrivateReport | None = None,
        progress: ProgressCallback | None = None,
        chunk: int | None = None,
        charge: ChargeCallback | None = None,
    ) -> list[R]:
        """Privatize a batch of units: one release record per unit (see the module docstring)."""
        return [
            rec
            for part in self.iter_privatize_batch(
                units, ids, seed=seed, seeded=seeded, size=size, size_from_data=size_from_data, empty=empty,
                private_report=private_report, progress=progress, chunk=chunk, charge=charge,
            )
            for rec in part
        ]

    @overload
    def privatize(self, units: str | np.ndarray, **kwargs: Unpack[BatchOptions]) -> R: ...  # type: ignore[overload-overlap]

    @overload
    def privatize(self, units: Iterable[object], **kwargs: Unpack[BatchOptions]) -> list[R]: ...  # type: ignore[overload-overlap]

    @overload
    def privatize(self, units: object, **kwargs: Unpack[BatchOptions]) -> R: ...

    def privatize(self, units: object, **kwargs: Unpack[BatchOptions]) -> R | list[R]:
        """Privatize one unit (one record) or an iterable of units (a list); keywords as :meth:`privatize_batch`.

        A ``str``, ``bytes`` or array is one unit (``bytes`` is then refused with a one-line error).
        Typed by overloads: a ``str`` or an array gives one record ``R``, any other iterable a
        ``list[R]``, anything else (a topic matrix) one record.
        """
        if isinstance(units, (bytes, bytearray, memoryview)):  # iterating them would give integers
            raise ParameterTypeError(f"units must be a str or an iterable of str, got {type(units).__name__}; "
                                     'decode them first (e.g. data.decode("utf-8"))')
        if isinstance(units, Iterable) and not isinstance(units, (str, np.ndarray)):
            return self.privatize_batch(list(units), **kwargs)
        return self.privatize_batch([units], **kwargs)[0]

    def set_ledger(self, ledger: SpendLedger | None, *, budget: BudgetLike | None = None) -> Self:
        """Charge every later :meth:`transform` call to ``ledger`` (refused past ``budget``); ``None`` stops it.

        ``ledger`` is a :class:`textdp.accounting.ledger.PrivacyLedger` (or anything with its ``charge``
        method). Each call charges each text its :meth:`~textdp.guarantees.Guarantee.charge` before any noise,
        under a key that is an HMAC of the text with this user's secret (:func:`textdp._cache.keyed_digest`),
        so the same text transformed in several folds adds up; a call that would take a text past ``budget``
        raises a one-line :class:`~textdp.errors.ParameterError` and releases nothing. The setting is kept by
        :func:`sklearn.base.clone` (so ``cross_val_score`` charges it too) but is not a parameter.
        """
        self._ledger = ledger
        self._budget = budget
        return self

    def __sklearn_clone__(self) -> Self:
        """scikit-learn's ``clone``: the same parameters (shared, not copied) and the ledger of :meth:`set_ledger`."""
        new = type(self)(**self.get_params())
        return new.set_ledger(getattr(self, "_ledger", None), budget=getattr(self, "_budget", None))

    def transform(self, X: Iterable[object]) -> list[str]:
        """The released texts of an iterable of units (scikit-learn ``transform``; bags space-joined).

        **Every call is a new release and spends the budget again**: the noise is fresh each time, so
        inside a scikit-learn ``Pipeline``, ``cross_val_score`` or a grid search (which call ``transform``
        on every fit, fold and prediction) the same text is released, and its ε spent, many times. With a
        ledger (:meth:`set_ledger`) each call is charged to it first (refused past its budget); without one
        each call emits :class:`~textdp.errors.UnrecordedSpendWarning`. For one release with its records,
        use :meth:`privatize_batch` or :func:`textdp.release.release`.
        """
        units = list(X)
        ledger = getattr(self, "_ledger", None)
        if ledger is None:
            warnings.warn(f"{self.name}.transform released {len(units)} text(s) and spent their epsilon again, "
                          "and no ledger recorded it (each call draws fresh noise); record it with "
                          "set_ledger(PrivacyLedger(path)), or use privatize_batch for one release",
                          UnrecordedSpendWarning, stacklevel=2)
            records = self.privatize_batch(units)
        else:
            budget = getattr(self, "_budget", None)
            ids = [_text_key(u) for u in units]

            def charge(charges: dict[str, Charge], guarantee: Guarantee) -> None:
                ledger.charge(charges, mechanism=self.name, unit=guarantee.unit, budget=budget, command="transform")

            records = self.privatize_batch(units, ids, charge=charge)
        out = []
        for rec in records:
            payload = rec.payload()
            out.append(payload if isinstance(payload, str) else " ".join(str(w) for w in payload))
        return out

    def fit_transform(self, X: Iterable[object], y: object = None) -> list[str]:
        """``fit`` then ``transform``."""
        X = list(X)
        return self.fit(X, y).transform(X)
