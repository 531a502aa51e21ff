"""Names of the TopicDP options, shared by the library and the CLI (no heavy imports).

>>> MECHANISMS[0], NEIGHBOURS[0], TOPIC_MODELS[0]
('topicdp', 'add-remove', 'sklearn')
"""

from __future__ import annotations

from ..mechanisms.registry import names as _registry_names

__all__ = ["KEYWORD_SOURCES", "MAX_MODEL_TOPICS", "MECHANISMS", "NEIGHBOURS", "SENSITIVITIES", "TOPIC_MODELS",
           "VOCABULARIES"]

#: Release mechanisms: the topics family of the one registry (:func:`textdp.mechanisms.names`).
MECHANISMS = _registry_names("topics")

#: Neighbouring relations of the sensitivity sampler (one user added/removed, or replaced).
NEIGHBOURS = ("add-remove", "replace")

#: Topic-model libraries (:func:`textdp.topics.models.make_topic_model`).
TOPIC_MODELS = ("sklearn", "tomotopy")

#: Where the L2 sensitivity of the Gaussian mechanisms comes from (``--sensitivity``; a number is also accepted):
#: ``sampled`` (Rubinstein & Alda, random DP with gamma) or ``worst-case`` (the global bound sqrt(2m), plain DP).
SENSITIVITIES = ("sampled", "worst-case")

#: Where each topic's keywords come from (``--keywords-from``, ``keywords_from=``): ``noisy`` (the covered default:
#: the largest noisy values of the whole row over a public vocabulary) or ``model`` (the thesis's release: the
#: non-private model's top n, NOT covered).
KEYWORD_SOURCES = ("noisy", "model")

#: Kinds of ``--vocabulary``: ``corpus`` (built by a rule, rebuilt for every database), ``glove:K`` or a word-list file.
VOCABULARIES = ("corpus", "glove:K", "FILE")

#: Largest number of topics a model may fit (``--topics``, ``--model-topics``, ``n_topics=``). scikit-learn's
#: variational LDA overflows in ``exp`` beyond about a thousand topics with its default prior 1/K (measured on 120
#: Enron documents), each fit costs time linear in K, and the sensitivity sampler fits the model hundreds of times.
MAX_MODEL_TOPICS = 500
