"""Privacy accounting: guarantees, distances and calibration.

* :mod:`~textdp.accounting.emd` - Earth Mover's distance between bags (Def. 3, Lemma A1).
* :mod:`~textdp.accounting.bounds` - privacy loss between two documents (Thm 5.1) and
  utility bounds (Thm 4.2, Thm A2).
* :mod:`~textdp.accounting.calibration` - the epsilon that keeps a target share of words.
* :mod:`~textdp.accounting.diagnostics` - neighbour ranks and per-document report fields.
* :mod:`~textdp.accounting.gaussian` - σ of the Gaussian mechanism (Balle & Wang 2018, Thm 8) and the
  matrix-variate Gaussian condition (Chanyaswad et al. 2018, Thm 3).
"""

from __future__ import annotations

from .bounds import (
    DocumentGuarantee,
    UtilityBound,
    document_guarantee,
    format_multiplier,
    log10_multiplier,
    multiplier,
    privacy_loss,
    sum_of_norms_probability,
    theorem_4_2,
    theorem_a2,
    utility_bound,
    utility_radius,
)
from .calibration import (
    Calibration,
    DiagnosticRow,
    SurvivalCurve,
    calibrate_epsilon,
    calibration_words,
    diagnose,
    survival_curve,
    survival_thresholds,
    wilson_interval,
)
from .diagnostics import neighbour_ranks, rank_summary, report_fields
from .emd import bag_distance, earth_movers_distance, ground_distances, optimal_matching

__all__ = [
    "Calibration",
    "DiagnosticRow",
    "DocumentGuarantee",
    "SurvivalCurve",
    "UtilityBound",
    "bag_distance",
    "calibrate_epsilon",
    "calibration_words",
    "diagnose",
    "document_guarantee",
    "earth_movers_distance",
    "format_multiplier",
    "ground_distances",
    "log10_multiplier",
    "multiplier",
    "neighbour_ranks",
    "optimal_matching",
    "privacy_loss",
    "rank_summary",
    "report_fields",
    "sum_of_norms_probability",
    "survival_curve",
    "survival_thresholds",
    "theorem_4_2",
    "theorem_a2",
    "utility_bound",
    "utility_radius",
    "wilson_interval",
]
