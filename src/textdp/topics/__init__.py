"""TopicDP: user-level differentially private release of topic-keyword matrices.

Reproduces and corrects J. Sharma, *TopicDP - Ensuring Differential Privacy for
Topic Mining* (MSc thesis, IIT, 2021): fit any topic model, sample the
user-level L2 sensitivity of its released top-``m`` x top-``n`` keyword matrix
(Rubinstein & Aldà 2017), and release the matrix with exact discrete Gaussian
noise on a public grid ((ε, δ, γ)-random DP), next to the Laplace and MVG
baselines.

Typical use::

    corpus = UserCorpus.from_jsonl("pan11_enron.jsonl.gz", user_field="author",
                                   max_docs_per_user=30)
    model = SklearnLDA(n_topics=10)
    tw, prev = model.fit(corpus.X)
    topics = extract_topic_matrix(tw, prev, corpus.vocabulary, 10, 10)
    sampler_seed, noise_seed = textdp._rng.spawn(None, 2)
    sens = SensitivitySampler(corpus=corpus, model=model, sizes=[(10, 10)],
                              backend=textdp.engines.get_backend("dask", workers=2)
                              ).sample(0.1, seed=sampler_seed)[(10, 10)]
    mech = textdp.mechanisms.get("topicdp", epsilon=3, delta=1e-4, sensitivity=sens,
                                 keywords_from="model", seed=noise_seed)
    rel = mech.privatize(topics)
    rel.to_record()   # guarantee, public parameters, keywords, noisy matrix -- nothing else

Names are imported lazily (PEP 562), so ``textdp.topics.names`` (the option
names the CLI needs) loads without numpy-heavy modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from .family import needs_sensitivity
    from .metrics import (
        all_metrics,
        kendall_tau_distance,
        keyword_rank_distance,
        l1_distance,
        rmse,
        row_euclidean_distance,
    )
    from .models import (
        SklearnLDA,
        TomotopyLDA,
        TopicMatrix,
        TopicModel,
        UserCorpus,
        align_topics,
        extract_topic_matrix,
        make_topic_model,
        released_matrix_distance,
        topic_matrix_distance,
    )
    from .names import MECHANISMS, NEIGHBOURS, TOPIC_MODELS
    from .noise import DEFAULT_GRID, GaussianNoise, LaplaceNoise, MatrixGaussianNoise
    from .release import KEYWORD_NOTE, TopicGuarantee, TopicRelease, postprocess
    from .sensitivity import (
        SampledSensitivity,
        SamplerParameters,
        SensitivitySampler,
        default_cache_dir,
        draw_neighbours,
        sampler_parameters,
    )

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("DEFAULT_GRID", "GaussianNoise", "LaplaceNoise", "MatrixGaussianNoise"), "noise"),
    **dict.fromkeys(("KEYWORD_NOTE", "TopicGuarantee", "TopicRelease", "postprocess"), "release"),
    "needs_sensitivity": "family",
    **dict.fromkeys(
        ("all_metrics", "kendall_tau_distance", "keyword_rank_distance", "l1_distance", "rmse",
         "row_euclidean_distance"), "metrics"),
    **dict.fromkeys(
        ("SklearnLDA", "TomotopyLDA", "TopicMatrix", "TopicModel", "UserCorpus", "align_topics",
         "extract_topic_matrix", "make_topic_model", "released_matrix_distance", "topic_matrix_distance"), "models"),
    **dict.fromkeys(("MECHANISMS", "NEIGHBOURS", "TOPIC_MODELS"), "names"),
    **dict.fromkeys(
        ("SampledSensitivity", "SamplerParameters", "SensitivitySampler", "default_cache_dir", "draw_neighbours",
         "sampler_parameters"), "sensitivity"),
}

__all__ = [
    "DEFAULT_GRID",
    "KEYWORD_NOTE",
    "MECHANISMS",
    "NEIGHBOURS",
    "TOPIC_MODELS",
    "GaussianNoise",
    "LaplaceNoise",
    "MatrixGaussianNoise",
    "SampledSensitivity",
    "SamplerParameters",
    "SensitivitySampler",
    "SklearnLDA",
    "TomotopyLDA",
    "TopicGuarantee",
    "TopicMatrix",
    "TopicModel",
    "TopicRelease",
    "UserCorpus",
    "align_topics",
    "all_metrics",
    "default_cache_dir",
    "draw_neighbours",
    "extract_topic_matrix",
    "kendall_tau_distance",
    "keyword_rank_distance",
    "l1_distance",
    "make_topic_model",
    "needs_sensitivity",
    "postprocess",
    "released_matrix_distance",
    "rmse",
    "row_euclidean_distance",
    "sampler_parameters",
    "topic_matrix_distance",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
