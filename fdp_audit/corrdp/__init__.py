"""CorrDP: correlation-aware differential privacy for ERM (docs/corrdp.md; Wang, Zhang & Cummings).

Modules: :mod:`~fdp_audit.corrdp.tv` (TV(j) estimators and the upper-confidence TV~),
:mod:`~fdp_audit.corrdp.distance` (the neighbour distance d(D, D') and Example 2.6),
:mod:`~fdp_audit.corrdp.noise` (Eq. 4 / Eq. 5 noise and the baselines), :mod:`~fdp_audit.corrdp.sgd`
(CorrDP-SGD for GLMs and MLPs), :mod:`~fdp_audit.corrdp.accounting` (realised ε by exact Gaussian
accounting, the Eq. 4 and Theorem 3.9 checks), :mod:`~fdp_audit.corrdp.design` (Adult and synthetic
data) and :mod:`~fdp_audit.corrdp.experiments` (the reproductions and the report section).
"""

from fdp_audit.corrdp.accounting import (
    composed_epsilon,
    eq4_calibration,
    gdp_delta,
    gdp_epsilon,
    realised_privacy,
    theorem_3_9_check,
)
from fdp_audit.corrdp.distance import example_2_6, feature_tv_exact, neighbour_distance
from fdp_audit.corrdp.experiments import report_section, train_experiment, tv_experiment
from fdp_audit.corrdp.noise import eq4_variance, variance_factors
from fdp_audit.corrdp.sgd import SGDSettings, train_glm, train_mlp
from fdp_audit.corrdp.tv import (
    TVEstimate,
    feature_tv,
    gaussian_tv,
    tv_discrete,
    tv_gaussian,
    tv_histogram,
    tv_multinomial_logistic,
)

__all__ = [
    "SGDSettings",
    "TVEstimate",
    "composed_epsilon",
    "eq4_calibration",
    "eq4_variance",
    "example_2_6",
    "feature_tv",
    "feature_tv_exact",
    "gaussian_tv",
    "gdp_delta",
    "gdp_epsilon",
    "neighbour_distance",
    "realised_privacy",
    "report_section",
    "theorem_3_9_check",
    "train_experiment",
    "train_glm",
    "train_mlp",
    "tv_discrete",
    "tv_experiment",
    "tv_gaussian",
    "tv_histogram",
    "tv_multinomial_logistic",
    "variance_factors",
]
