"""Evaluating sentence rewriting: semantic similarity, authorship, stylometric change, and the ε sweep.

Metrics (for the paper's Table 1, Bo et al. NAACL 2021):

* **semantic similarity** — cosine of all-MiniLM-L6-v2 sentence embeddings
  (:func:`textdp.attacks.sentence.minilm_embed`) of each input sentence and its rewrite,
  averaged; a stand-in for the paper's Universal Sentence Encoder (not installable
  offline). Higher is better.
* **authorship** — the accuracy of an attribution classifier trained on the authors'
  *original* documents (character 2-4-gram TF-IDF + linear SVM,
  :class:`textdp.attacks.char_ngrams.CharNgramAttacker`) on the *rewritten* test
  documents, against chance (1 / number of authors). Lower is better.
* **stylometric change** — :func:`stylometric_features` of input and output (per
  document), each feature divided by its standard deviation over the original
  documents, and the Euclidean distance between the two vectors, averaged. The paper
  does not define its measure; this one is documented here. Higher means more change.

:func:`run_generation_sweep` rewrites the test documents of an evaluation corpus with
ER-AE, AE-DP, SynTF and Random-R over an ε grid, at **equal per-sentence bounds**:
each ER-AE nominal ε gives a per-sentence bound ``B`` (:func:`two_set_bound`), and the
other mechanisms are calibrated to the same ``B`` (AE-DP and Random-R: ``B / L_max`` per
token; SynTF: ``B`` per sentence). :func:`write_training_corpus` writes the rewriter's
training sentences from the corpora's *train* splits (disjoint from the evaluated test
documents), so the guarantee's model case is ``disjoint``.

An optional ``[lm]`` table adds the language-model rewriters (``dp-prompt``,
``dp-paraphrase``, ``dp-mlm``, ``dp-bart``): :func:`lm_rows` runs each configured one at
each ε of the grid (its own ε, not calibrated to ``B``) on the same test documents, with
the same document measures, in a table ``lm`` of the same report and plot.

The modules, by concern: :mod:`~textdp.evaluation.generation_metrics` (the measures),
:mod:`~textdp.evaluation.generation_data` (the texts), :mod:`~textdp.evaluation.generation_config` (the TOML config),
:mod:`~textdp.evaluation.generation_sweep` (the sweep), :mod:`~textdp.evaluation.generation_report` (markdown, plot,
report folder) and :mod:`~textdp.evaluation.lm_frontier` with its config and report (the LM-only frontier of
dp-prompt's instructions). This module gathers their public names.
"""

from __future__ import annotations

from .generation_config import (
    GenerationConfig,
    generation_config_from_dict,
    load_evaluation_config,
    load_generation_config,
)
from .generation_data import TRAINING_SOURCES, AuthorshipDocuments, load_authorship_documents, write_training_corpus
from .generation_metrics import (
    FUNCTION_WORDS,
    normalize_text,
    semantic_similarity,
    stylometric_distance,
    stylometric_features,
)
from .generation_report import plot_privacy_utility, render_generation_markdown, write_generation_report
from .generation_sweep import (
    Condition,
    Measures,
    SweepResult,
    SweepRow,
    check_lm_models,
    lm_rows,
    run_generation_sweep,
    sweep_conditions,
)

__all__ = [
    "FUNCTION_WORDS",
    "TRAINING_SOURCES",
    "AuthorshipDocuments",
    "Condition",
    "GenerationConfig",
    "Measures",
    "SweepResult",
    "SweepRow",
    "check_lm_models",
    "generation_config_from_dict",
    "lm_rows",
    "load_authorship_documents",
    "load_evaluation_config",
    "load_generation_config",
    "normalize_text",
    "plot_privacy_utility",
    "render_generation_markdown",
    "run_generation_sweep",
    "semantic_similarity",
    "stylometric_distance",
    "stylometric_features",
    "sweep_conditions",
    "write_generation_report",
    "write_training_corpus",
]
