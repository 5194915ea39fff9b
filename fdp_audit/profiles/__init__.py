"""Privacy profiles, coverage and the ε transition (docs/profiles.md; LeBlond et al., privacy-profile paper).

Setting: L2-regularised logistic regression without intercept on row-normalised data
(:mod:`.logistic`), released by output perturbation with a known density (:mod:`.mechanisms`). For
every neighbouring data set y_i (row removal, or FDP replacement of the protected columns) the exact
neighbour model A(y_i) comes from a batched Newton solve and the fast approximation A_wc(y_i) from the
Okumura sphere (:mod:`.neighbours`). Coverage and privacy loss (:mod:`.coverage`), privacy profiles
and typical profiles (:mod:`.profile`), the ε sweep and its transition (:mod:`.transition`), Monte
Carlo coverage for mechanisms without a density (:mod:`.monte_carlo`), the optional diffprivlib
mechanism (:mod:`.third_party`), figures (:mod:`.figures`) and the end-to-end run behind
``fdp-audit profile`` (:mod:`.compute`: ``run_profile``; :mod:`.schema`: ``results_dict``, the
``profile.json``; :mod:`.outputs`: ``make_figures``, ``write_outputs``; not re-exported here so that
importing the maths does not import matplotlib).
"""

from fdp_audit.profiles.coverage import (
    analytic_log_coverage,
    empirical_coverage,
    gaussian_kl,
    laplace_mean_abs_loss,
    laplace_mean_loss,
    mean_loss,
)
from fdp_audit.profiles.design import Design, design_from_table, normalise_rows
from fdp_audit.profiles.logistic import fit_newton, loss_gradients, objective
from fdp_audit.profiles.mechanisms import (
    GaussianOutputPerturbation,
    LaplaceOutputPerturbation,
    OutputPerturbation,
    gaussian_sigma,
    laplace_beta,
    make_mechanism,
)
from fdp_audit.profiles.monte_carlo import MonteCarloLoss, default_cutoff, monte_carlo_privacy_loss
from fdp_audit.profiles.neighbours import (
    NeighbourModels,
    Neighbours,
    exact_neighbour_models,
    okumura_spheres,
    removal_neighbours,
    replacement_neighbours,
    worst_case_points,
)
from fdp_audit.profiles.profile import PrivacyProfile, TypicalProfile, privacy_profile, profile_at, typical_profile
from fdp_audit.profiles.transition import (
    EpsilonSweep,
    Transition,
    beta_star,
    detect_transition,
    epsilon_sweep,
    rank_positions,
)

__all__ = [
    "Design",
    "EpsilonSweep",
    "GaussianOutputPerturbation",
    "LaplaceOutputPerturbation",
    "MonteCarloLoss",
    "NeighbourModels",
    "Neighbours",
    "OutputPerturbation",
    "PrivacyProfile",
    "Transition",
    "TypicalProfile",
    "analytic_log_coverage",
    "beta_star",
    "default_cutoff",
    "design_from_table",
    "detect_transition",
    "empirical_coverage",
    "epsilon_sweep",
    "exact_neighbour_models",
    "fit_newton",
    "gaussian_kl",
    "gaussian_sigma",
    "laplace_beta",
    "laplace_mean_abs_loss",
    "laplace_mean_loss",
    "loss_gradients",
    "make_mechanism",
    "mean_loss",
    "monte_carlo_privacy_loss",
    "normalise_rows",
    "objective",
    "okumura_spheres",
    "privacy_profile",
    "profile_at",
    "rank_positions",
    "removal_neighbours",
    "replacement_neighbours",
    "typical_profile",
    "worst_case_points",
]
