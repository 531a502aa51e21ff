"""TopicDP: user-level differentially private release of topic-keyword matrices.

Reproduces and corrects J. Sharma, *TopicDP - Ensuring Differential Privacy for
Topic Mining* (MSc thesis, IIT, 2021): fit any topic model, sample the
user-level L2 sensitivity of its top-``m`` x top-``n`` keyword matrix
(Rubinstein & Aldà 2017), and release the matrix with Gaussian noise
((ε, δ, γ)-random DP), next to the Laplace and MVG baselines.

Typical use::

    corpus = UserCorpus.from_jsonl("pan11_enron.jsonl.gz", user_field="author",
                                   max_docs_per_user=30)
    model = SklearnLDA(n_topics=10)
    tw, prev = model.fit(corpus.X)
    topics = extract_topic_matrix(tw, prev, corpus.vocabulary, 10, 10)
    sens = SensitivitySampler(corpus=corpus, model=model, sizes=[(10, 10)],
                              n_jobs=2).sample(0.1)[(10, 10)]
    rel = release_topics(topics, TopicDPGaussian(epsilon=3, delta=1e-4,
                         sensitivity=sens, gamma=0.1))
"""

from .mechanisms import (
    KEYWORD_NOTE,
    LaplaceBaseline,
    MVGMechanism,
    TopicDPGaussian,
    TopicRelease,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
    mvg_precision_budget,
    postprocess,
    release_topics,
    thesis_gaussian_sigma,
)
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
    topic_matrix_distance,
)
from .sensitivity import (
    SampledSensitivity,
    SamplerParameters,
    SensitivitySampler,
    default_cache_dir,
    sampler_parameters,
)

__all__ = [
    "KEYWORD_NOTE", "LaplaceBaseline", "MVGMechanism", "TopicDPGaussian", "TopicRelease",
    "analytic_gaussian_sigma", "classic_gaussian_sigma", "gaussian_delta", "mvg_precision_budget",
    "postprocess", "release_topics", "thesis_gaussian_sigma",
    "all_metrics", "kendall_tau_distance", "keyword_rank_distance", "l1_distance", "rmse",
    "row_euclidean_distance",
    "SklearnLDA", "TomotopyLDA", "TopicMatrix", "TopicModel", "UserCorpus", "align_topics",
    "extract_topic_matrix", "make_topic_model", "topic_matrix_distance",
    "SampledSensitivity", "SamplerParameters", "SensitivitySampler", "default_cache_dir",
    "sampler_parameters",
]
