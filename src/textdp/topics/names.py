"""Names of the TopicDP options, shared by the library and the CLI (no heavy imports).

>>> MECHANISMS[0], NEIGHBOURS[0], TOPIC_MODELS[0]
('topicdp', 'add-remove', 'sklearn')
"""

from __future__ import annotations

__all__ = ["MECHANISMS", "NEIGHBOURS", "TOPIC_MODELS"]

#: Release mechanisms (:func:`textdp.topics.mechanisms.build_mechanism`).
MECHANISMS = ("topicdp", "topicdp-thesis", "laplace", "mvg", "mvg-directional")

#: Neighbouring relations of the sensitivity sampler (one user added/removed, or replaced).
NEIGHBOURS = ("add-remove", "replace")

#: Topic-model libraries (:func:`textdp.topics.models.make_topic_model`).
TOPIC_MODELS = ("sklearn", "tomotopy")
