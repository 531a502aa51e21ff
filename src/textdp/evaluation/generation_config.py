"""The TOML config of ``textdp evaluate-generation``: the ER-AE sweep's :class:`GenerationConfig`
(:func:`load_generation_config`), and the dispatch to the LM-only frontier config (:func:`load_evaluation_config`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._validation import check_positive_int
from ..errors import ParameterError, ParameterTypeError
from .datasets import PRESETS

if TYPE_CHECKING:
    from .lm_frontier_config import FrontierConfig

__all__ = ['GenerationConfig', 'generation_config_from_dict', 'load_evaluation_config', 'load_generation_config']

# --------------------------------------------------------------------------------------------
# the sweep

@dataclass
class GenerationConfig:
    """The resolved settings of a generation sweep (``textdp evaluate-generation CONFIG.toml``)."""

    corpus: str
    er_ae_model: str
    ae_model: str
    epsilons: list[float]
    data_dir: str | None = None
    authors: int = 50
    train_docs: int = 50
    test_docs: int = 4
    similarity_sentences: int = 1000
    model_data: str = "disjoint"
    variants: list[str] = field(default_factory=lambda: ["autoregressive", "teacher-forced"])
    nominal_table: bool = True
    earth_movers_epsilons: list[float] = field(default_factory=list)
    earth_movers_size: int = 50
    seed: int = 0
    bootstrap: int = 1000
    output: str | None = None
    lm_models: dict[str, str] = field(default_factory=dict)
    lm_clip: list[float] | None = None
    lm_clip_public: str | None = None
    lm_delta: float = 1e-5
    lm_max_new_tokens: int = 32
    lm_instruction: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Plain-data form (``settings.json``)."""
        return asdict(self)


def _table(d: dict[str, object], key: str) -> dict[str, object]:
    t = d.get(key, {})
    if not isinstance(t, dict):
        raise ParameterTypeError(f"config [{key}] must be a table")
    return t


def generation_config_from_dict(d: dict[str, object], *, base_dir: Path | None = None) -> GenerationConfig:
    """Validate a parsed TOML config (``[corpus]``, ``[models]``, ``[sweep]``, ``[earth_movers]``, ``[run]``, ``[lm]``).

    >>> cfg = generation_config_from_dict({"corpus": {"name": "reuter_50_50"},
    ...     "models": {"er_ae": "m1", "ae": "m2"}, "sweep": {"epsilons": [1, 5]}})
    >>> cfg.epsilons, cfg.model_data
    ([1.0, 5.0], 'disjoint')
    """
    from .._validation import check_choice, check_epsilon

    if not isinstance(d, dict):
        raise ParameterTypeError("config must be a TOML table")
    allowed = {"corpus": {"name", "data_dir", "authors", "train_docs", "test_docs", "similarity_sentences"},
               "models": {"er_ae", "ae", "model_data"}, "sweep": {"epsilons", "variants", "nominal_table"},
               "earth_movers": {"epsilons", "size"}, "run": {"seed", "bootstrap", "output"},
               "lm": {"models", "clip", "clip_public", "delta", "max_new_tokens", "instruction"}}
    unknown = set(d) - set(allowed)
    if unknown:
        raise ParameterError(f"unknown config section(s): {', '.join(sorted(unknown))}")
    for sec, keys in allowed.items():
        bad = set(_table(d, sec)) - keys
        if bad:
            raise ParameterError(f"unknown key(s) in [{sec}]: {', '.join(sorted(bad))}")
    c, m, sw, em, run, lm = (_table(d, k) for k in ("corpus", "models", "sweep", "earth_movers", "run", "lm"))
    if "name" not in c:
        raise ParameterError("config [corpus] needs name = a corpus preset (reuter_50_50, pan11_enron, 20newsgroups)")
    check_choice(str(c["name"]), "corpus", tuple(PRESETS))
    for key in ("er_ae", "ae"):
        if key not in m:
            raise ParameterError(f"config [models] needs {key} = a model directory from textdp train-rewriter")

    def path(v: object) -> str:
        p = Path(str(v)).expanduser()
        return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)

    eps = sw.get("epsilons")
    if not isinstance(eps, list) or not eps:
        raise ParameterError("config [sweep] needs epsilons = a non-empty list of ER-AE nominal epsilons")
    variants = sw.get("variants", ["autoregressive", "teacher-forced"])
    em_eps = em.get("epsilons", [])
    if not isinstance(variants, list) or not isinstance(em_eps, list):
        raise ParameterTypeError("config [sweep] variants and [earth_movers] epsilons must be lists")
    for v in variants:
        check_choice(v, "variant", ("autoregressive", "teacher-forced"))
    data_dir = c.get("data_dir")
    lm_models, lm_clip, lm_clip_public = _lm_config(lm, path)
    return GenerationConfig(
        corpus=str(c["name"]), er_ae_model=path(m["er_ae"]), ae_model=path(m["ae"]),
        epsilons=[check_epsilon(e) for e in eps], data_dir=None if data_dir is None else path(data_dir),
        authors=check_positive_int(c.get("authors", 50), "authors"),
        train_docs=check_positive_int(c.get("train_docs", 50), "train_docs"),
        test_docs=check_positive_int(c.get("test_docs", 4), "test_docs"),
        similarity_sentences=check_positive_int(c.get("similarity_sentences", 1000), "similarity_sentences"),
        model_data=check_choice(str(m.get("model_data", "disjoint")), "model data case",
                                ("public", "disjoint", "same", "unknown")),
        variants=variants, nominal_table=bool(sw.get("nominal_table", True)),
        earth_movers_epsilons=[check_epsilon(e) for e in em_eps],
        earth_movers_size=check_positive_int(em.get("size", 50), "size"),
        seed=check_positive_int(run.get("seed", 0), "seed", minimum=0),
        bootstrap=check_positive_int(run.get("bootstrap", 1000), "bootstrap"),
        output=None if run.get("output") is None else str(run["output"]),
        lm_models=lm_models, lm_clip=lm_clip, lm_clip_public=lm_clip_public,
        lm_delta=float(check_epsilon(lm.get("delta", 1e-5))),
        lm_max_new_tokens=check_positive_int(lm.get("max_new_tokens", 32), "max_new_tokens"),
        lm_instruction=_instruction(lm),
    )


def _instruction(lm: dict[str, object]) -> str | None:
    """``[lm] instruction``: dp-prompt's named public instruction (one line naming the choices otherwise)."""
    if "instruction" not in lm:
        return None
    from ..generation.lm_family import instruction

    return instruction(str(lm["instruction"])).name


def _lm_config(lm: dict[str, object], path: Callable[[object], str]
               ) -> tuple[dict[str, str], list[float] | None, str | None]:
    """The ``[lm]`` table: ``models = {name = DIR}`` (sentence-family LM rewriters) and ``clip`` or ``clip_public``."""
    from ..generation.lm_family import LMRewriter
    from ..mechanisms.registry import mechanism_class, names

    if not lm:
        return {}, None, None
    models = lm.get("models")
    if not isinstance(models, dict) or not models:
        raise ParameterError('config [lm] needs models = { "dp-prompt" = "DIR", ... } (local model directories)')
    allowed = tuple(n for n in names("sentence") if issubclass(mechanism_class(n), LMRewriter))
    for name in models:
        if name not in allowed:
            raise ParameterError(f"config [lm]: unknown language-model rewriter {name!r}; choose from: "
                                 f"{', '.join(allowed)}")
    if ("clip" in lm) == ("clip_public" in lm):
        raise ParameterError("config [lm] needs the public clipping bounds: clip = [low, high], or clip_public = "
                             "FILE (public text); see docs/lm-rewriting.md")
    clip = None
    if "clip" in lm:
        c = lm["clip"]
        if not (isinstance(c, list) and len(c) == 2 and all(isinstance(x, (int, float)) for x in c)
                and float(c[0]) < float(c[1])):
            raise ParameterError(f"config [lm] clip must be [low, high] with low < high, got {c!r}")
        clip = [float(c[0]), float(c[1])]
    return ({str(k): path(v) for k, v in models.items()}, clip,
            None if "clip_public" not in lm else path(lm["clip_public"]))


def _read_toml(p: Path) -> dict[str, object]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParameterError(f"{p}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"{p}: not valid TOML ({exc})") from None


def load_generation_config(path: str | Path) -> GenerationConfig:
    """Read and validate a TOML config file of the ER-AE sweep."""
    p = Path(path)
    return generation_config_from_dict(_read_toml(p), base_dir=p.parent)


def load_evaluation_config(path: str | Path) -> GenerationConfig | FrontierConfig:
    """Read a config of ``evaluate-generation``: without ``[models]`` it is the LM-only frontier
    (:func:`~textdp.evaluation.lm_frontier.frontier_config_from_dict`), else the ER-AE sweep."""
    from .lm_frontier_config import frontier_config_from_dict

    p = Path(path)
    d = _read_toml(p)
    if "models" not in d and "lm" in d:
        return frontier_config_from_dict(d, base_dir=p.parent)
    return generation_config_from_dict(d, base_dir=p.parent)


