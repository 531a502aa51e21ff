"""The one registry of textdp's mechanisms, every family: one line per class, and an index generated from the classes.

A mechanism is one class (its ``name``, ``family``, ``releases`` and ``reference`` declared at class
level, :class:`~textdp.mechanisms.base.Mechanism`) and one line of :data:`LOCATIONS` here
(``"module:Class"``, with the audit case that checks it when that case has another name). The
registry's rows (:class:`Entry`) are read from the classes by
``python -m textdp.mechanisms.registry --write-index``, which writes :mod:`textdp.mechanisms._index`;
``tests/test_mechanisms_registry.py`` fails when the index differs from what the classes declare. The same
command rewrites the ``<!-- names:... -->`` blocks of :data:`DOC_FILES` (:func:`name_blocks`), and the help texts
build their lists with :func:`spoken_list`, so a new class reaches every list of names by its registry line.
Listing names reads the index only, so ``textdp obfuscate --help`` and the one-line errors import
neither numpy nor torch; a class is imported on first use (:meth:`Entry.load`), which also keeps the
sentence and topics families (which import this package) free of import cycles.

``get(name, **params)`` returns a configured (unfitted) mechanism of any family: the document family
(``earth-movers``, ``syntf``), the word family (``cmp`` ... ``random``), the sentence family
(``er-ae`` ... ``dp-bart``: the rewriters, ``[generation]`` extra) and the topics family
(``topicdp`` ... ``mvg-directional``). Each name is spelt once across families. :func:`names`
lists a family's names (the CLI's choices), :func:`entry` gives a name's :class:`Entry`.

>>> "cmp" in MECHANISM_NAMES and "earth-movers" in MECHANISM_NAMES
True
>>> entry("topicdp-laplace").family, entry("er-ae").releases, entry("cmp").audit, entry("topicdp-laplace").audit
('topics', 'sentence', 'cmp', 'laplace')
>>> get("nope", epsilon=1.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
textdp.errors.ParameterError: unknown mechanism 'nope'; choose one of: earth-movers, cmp, ...
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import ParameterError
from ._index import FAMILIES, INDEX

if TYPE_CHECKING:
    from .base import Mechanism

__all__ = ["DOC_FILES", "LOCATIONS", "MECHANISM_NAMES", "REGISTRY", "Entry", "entry", "get", "index_source",
           "mechanism_class", "name_blocks", "names", "spoken_list"]

#: One line per mechanism, in the order of the CLI's choices: ``"module:Class"``, or
#: ``("module:Class", audit)`` when the audit case that checks it (``textdp audit NAME``) has another
#: name than the mechanism, or ``("module:Class", None)`` while it has none: the mechanism is then usable
#: everywhere and ``textdp audit --all`` lists it as NOT AUDITED (docs/new-mechanism.md, §audit).
#: Everything else is read from the class.
LOCATIONS: tuple[str | tuple[str, str | None], ...] = (
    "textdp.mechanisms.earth_movers:EarthMoversPrivacy",
    "textdp.mechanisms.perturbation:CMP",
    "textdp.mechanisms.perturbation:Mahalanobis",
    "textdp.mechanisms.perturbation:Vickrey",
    "textdp.mechanisms.exponential:TEM",
    "textdp.mechanisms.exponential:SanText",
    "textdp.mechanisms.exponential:SanTextPlus",
    "textdp.mechanisms.exponential:CusText",
    "textdp.mechanisms.exponential:CusTextPlus",
    "textdp.mechanisms.syntf:SynTF",
    "textdp.mechanisms.exponential:RandomReplacement",
    "textdp.generation.rewriter:ERAE",
    "textdp.generation.rewriter:AEDP",
    "textdp.generation.rewriter:SynTFSentence",
    "textdp.generation.rewriter:RandomSentence",
    "textdp.generation.lm_family:DPPrompt",
    "textdp.generation.lm_family:DPParaphrase",
    "textdp.generation.lm_family:DPMLM",
    "textdp.generation.lm_family:DPBART",
    "textdp.topics.family:TopicDP",
    "textdp.topics.family:TopicDPThesis",
    ("textdp.topics.family:TopicDPLaplace", "laplace"),
    "textdp.topics.family:MVG",
    "textdp.topics.family:MVGDirectional",
    "textdp.topics.cooccurrence:NoisyCooccurrence",
    "textdp.topics.spectral:SpectralLDA",
)


@dataclass(frozen=True)
class Entry:
    """One registered mechanism (a row of the generated index).

    Attributes
    ----------
    name : str
        The registered name (one spelling across families): the class's ``name``.
    family : str
        ``document``, ``word``, ``sentence`` or ``topics``: the class's ``family``.
    releases : str
        ``bag``, ``text``, ``sentence`` or ``matrix``: the class's ``releases``.
    audit : str or None
        The audit case (``textdp audit NAME``) that checks this mechanism's claim (:data:`LOCATIONS`).
    location : str
        ``"module:Class"``, imported on first use.
    """

    name: str
    family: str
    releases: str
    audit: str | None
    location: str

    def load(self) -> type[Mechanism]:
        """The class (imports its module the first time)."""
        module, _, cls = self.location.partition(":")
        loaded: type[Mechanism] = getattr(importlib.import_module(module), cls)
        return loaded


_ENTRIES = tuple(Entry(*row) for row in INDEX)

#: every registered name -> its :class:`Entry`
REGISTRY: Mapping[str, Entry] = MappingProxyType({e.name: e for e in _ENTRIES})


def names(*families: str) -> tuple[str, ...]:
    """The registered names of ``families`` (all families when none is given), in registry order.

    >>> names("sentence")
    ('er-ae', 'ae-dp', 'syntf-sentence', 'random-sentence', 'dp-prompt', 'dp-paraphrase', 'dp-mlm', 'dp-bart')
    """
    for f in families:
        if f not in FAMILIES:
            raise ParameterError(f"unknown mechanism family {f!r}; choose one of: {', '.join(FAMILIES)}")
    return tuple(e.name for e in _ENTRIES if not families or e.family in families)


#: the names ``textdp obfuscate`` takes: the document and word families
MECHANISM_NAMES: tuple[str, ...] = names("document", "word")


def spoken_list(items: Sequence[str]) -> str:
    """``a, b and c``: a list of names for help text (built from the index, so a new class needs no edit).

    >>> spoken_list(names("document"))
    'earth-movers and syntf'
    """
    return " and ".join(filter(None, (", ".join(items[:-1]), *items[-1:])))


#: the documents (relative to the source tree) whose ``<!-- names:... -->`` blocks ``--write-index`` rewrites
DOC_FILES: tuple[str, ...] = ("README.md", "docs/glossary.md", "docs/audit.md")
_BLOCK = re.compile(r"(<!-- names:([a-z,]+) -->)(.*?)(<!-- /names -->)", re.DOTALL)


def _render(spec: str, rows: Sequence[tuple[str, str, str, str | None, str]]) -> str:
    """A block's text: ``all`` is every family (``family: `a`, `b`; ...``), else the names of the listed families."""
    def quoted(fams: Sequence[str]) -> str:
        return ", ".join(f"`{r[0]}`" for r in rows if r[1] in fams)

    if spec == "all":
        return "; ".join(f"{f}: {quoted((f,))}" for f in dict.fromkeys(r[1] for r in rows))
    families = spec.split(",")
    for f in families:
        if f not in FAMILIES:
            raise ParameterError(f"unknown family {f!r} in <!-- names:{spec} -->; choose all or {', '.join(FAMILIES)}")
    return quoted(families)


def name_blocks(text: str, rows: Sequence[tuple[str, str, str, str | None, str]] | None = None) -> str:
    """``text`` with every ``<!-- names:SPEC -->...<!-- /names -->`` block rewritten from the registry rows.

    ``SPEC`` is ``all`` (every family, ``family: `name`, ...; ...``) or comma-separated families (their
    names, in registry order). The lists of names in README.md, the glossary and docs/audit.md are such
    blocks, so a new class reaches them by ``--write-index`` (``tests/test_name_lists.py`` checks they are
    current).

    >>> name_blocks("sentence: <!-- names:document -->stale<!-- /names -->.")
    'sentence: <!-- names:document -->`earth-movers`, `syntf`<!-- /names -->.'
    """
    rows = INDEX if rows is None else rows
    return _BLOCK.sub(lambda m: m.group(1) + _render(m.group(2), rows) + m.group(4), text)


def entry(name: str) -> Entry:
    """The :class:`Entry` of ``name`` (one-line :class:`ParameterError` listing the names otherwise)."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of: {', '.join(names())}")
    return REGISTRY[name]


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name``."""
    return entry(name).load()


def get(name: str, **params: object) -> Mechanism:
    """A configured (unfitted) mechanism by registered name, any family.

    ``params`` are the class's constructor parameters (``epsilon``, ``embeddings``, ``seed``,
    ``size``, ``t``, ``model``, ``delta``, ...); an unknown one is a one-line error listing them.

    Examples
    --------
    >>> get("tem", epsilon=2.0, beta=0.01).beta
    0.01
    >>> get("cmp", epsilon=1.0, lambd=2)
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: mechanism 'cmp' has no parameter 'lambd'; its parameters: epsilon, embeddings, vocab_size, stop_words, seed, decoder, postprocess, candidates
    """
    e = entry(name)
    cls = e.load()
    valid = cls.param_names()
    unknown = [k for k in params if k not in valid]
    if unknown:
        raise ParameterError(f"mechanism {name!r} has no parameter {unknown[0]!r}; its parameters: "
                             f"{', '.join(valid)}")
    try:
        return cls(**params)
    except TypeError as exc:  # a required parameter is missing
        raise ParameterError(f"mechanism {name!r}: {exc}".replace("__init__() ", "")) from None


def _read_classes() -> tuple[tuple[str, ...], tuple[tuple[str, str, str, str | None, str], ...]]:
    """``(FAMILIES, rows)`` read from the classes of :data:`LOCATIONS` (imports every family)."""
    from .base import FAMILIES as families
    from .base import Mechanism

    rows = []
    for line in LOCATIONS:
        location, audit = (line, "") if isinstance(line, str) else line
        module, _, name = location.partition(":")
        cls = getattr(importlib.import_module(module), name)
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)) or not (cls.name and cls.family
                                                                              and cls.releases and cls.reference):
            raise ParameterError(f"{location} must be a Mechanism subclass declaring name, family, releases and "
                                 "reference")
        rows.append((cls.name, cls.family, cls.releases, cls.name if audit == "" else audit, location))
    spelt = [r[0] for r in rows]
    if len(set(spelt)) != len(spelt):
        raise ParameterError(f"a mechanism name is registered twice: {sorted(n for n in spelt if spelt.count(n) > 1)}")
    return tuple(families), tuple(rows)


def index_source() -> str:
    """The text of :mod:`textdp.mechanisms._index` as the classes of :data:`LOCATIONS` declare it."""
    families, rows = _read_classes()
    def lit(v: str | None) -> str:
        return "None" if v is None else json.dumps(v)

    body = "".join(f"    ({', '.join(lit(v) for v in row)}),\n" for row in rows)
    from .._options import param_annotations

    classes = {row[0]: Entry(*row).load() for row in rows}  # --param and --epsilon are checked from these rows
    params = ""
    for n, c in classes.items():
        lines = [""]
        for item in (f"({lit(k)}, {lit(t)})," for k, t in param_annotations(c)):
            lines[-1:] = [lines[-1] + " " + item] if len(lines[-1]) + len(item) < 108 else [lines[-1], " " + item]
        params += f"    {lit(n)}: (\n" + "".join(f"       {ln}\n" for ln in lines if ln) + "    ),\n"
    eps = "".join(f"    {lit(n)}: {lit(c.epsilon_from)},\n" for n, c in classes.items())
    return ('"""Generated by ``python -m textdp.mechanisms.registry --write-index`` from the classes of\n'
            "``registry.LOCATIONS``: do not edit (tests/test_mechanisms_registry.py checks it).\n\n"
            "Rows: (name, family, releases, audit case, location). PARAMS: each class's parameters and their\n"
            "annotations; EPSILON_FROM: the parameter its epsilon comes from when none is given (None: required).\n"
            '"""\n\n'
            f"FAMILIES = ({', '.join(lit(f) for f in families)})\n\n"
            "INDEX: tuple[tuple[str, str, str, str | None, str], ...] = (\n"
            f"{body})\n\n"
            f"PARAMS: dict[str, tuple[tuple[str, str], ...]] = {{\n{params}}}\n\n"
            f"EPSILON_FROM: dict[str, str | None] = {{\n{eps}}}\n")


def _main(argv: Sequence[str]) -> int:
    """``--write-index``: rewrite :mod:`textdp.mechanisms._index` and the name blocks of :data:`DOC_FILES` from the
    classes; ``--check``: exit 1 if any of them is stale."""
    from pathlib import Path

    from ..io import atomic_writer

    if list(argv) not in (["--check"], ["--write-index"]):
        print("usage: python -m textdp.mechanisms.registry --write-index | --check", file=sys.stderr)
        return 2
    path = Path(__file__).with_name("_index.py")
    text = index_source()
    _, rows = _read_classes()
    root = Path(__file__).resolve().parents[3]  # the source tree (editable install); docs absent in a wheel
    targets = {path: text}
    for doc in DOC_FILES:
        if (root / doc).is_file():
            old = (root / doc).read_text(encoding="utf-8")
            targets[root / doc] = name_blocks(old, rows)
    stale = [p for p, t in targets.items() if p.read_text(encoding="utf-8") != t]
    if list(argv) == ["--check"]:
        for p in targets:
            print(f"{p}: {'stale: run python -m textdp.mechanisms.registry --write-index' if p in stale else 'up to date'}")
        return int(bool(stale))
    for p in stale:
        with atomic_writer(p, private=False) as f:
            f.write(targets[p])
    print(f"wrote {path} ({text.count(chr(10) + '    (')} mechanisms); name blocks: "
          f"{', '.join(str(p) for p in stale if p != path) or 'up to date'}")
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line of the index
    raise SystemExit(_main(sys.argv[1:]))
