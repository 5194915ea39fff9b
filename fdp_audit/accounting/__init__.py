"""Privacy accounting (docs/accounting.md, docs/training.md): trade-off curves of the composed Poisson-subsampled
Gaussian from dp_accounting's PLD, closed forms and conversions, the accounting object of each mechanism, the
Ball helpers and the Theorem 4 bound, and noise calibration.

Typical use::

    from fdp_audit.accounting import MechanismSpec, MechanismAccountant, ball_discrete

    acc = MechanismAccountant(MechanismSpec("fdp_sgd", noise_multiplier=1.0, sample_rate=1 / 16, steps=100))
    acc.epsilon(1e-5)                      # 4.376
    acc.bound(ball_discrete([0.5, 0.5]))   # 1 - f(0.5) = 0.7783
"""

from fdp_audit.accounting._validate import InvalidParameterError
from fdp_audit.accounting.ball import (
    BallEstimate,
    ball_discrete,
    ball_gaussian,
    ball_monte_carlo,
    ball_uniform_box,
    circle_rectangle_area,
)
from fdp_audit.accounting.bound import mean_theorem4_bound, theorem4_bound, theorem4_bound_from_estimate
from fdp_audit.accounting.calibration import calibrate_noise_multiplier, max_steps_for_budget
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec
from fdp_audit.accounting.pld import (
    DIRECTIONS,
    RELATIONS,
    Direction,
    Relation,
    Segment,
    build_pld,
    composed_pld,
    schedule_curves,
    tradeoff_curves,
)
from fdp_audit.accounting.tradeoff import (
    TradeoffCurve,
    compose_gaussian,
    delta_from_tradeoff,
    eps_delta_tradeoff,
    epsilon_from_tradeoff,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_power,
    gaussian_tradeoff,
    gdp_clt_mu_approximation,
    replacement_from_insertion,
    tradeoff_from_profile,
)

__all__ = [
    "DIRECTIONS",
    "RELATIONS",
    "BallEstimate",
    "Direction",
    "InvalidParameterError",
    "MechanismAccountant",
    "MechanismSpec",
    "Relation",
    "Segment",
    "TradeoffCurve",
    "ball_discrete",
    "ball_gaussian",
    "ball_monte_carlo",
    "ball_uniform_box",
    "build_pld",
    "calibrate_noise_multiplier",
    "circle_rectangle_area",
    "compose_gaussian",
    "composed_pld",
    "delta_from_tradeoff",
    "eps_delta_tradeoff",
    "epsilon_from_tradeoff",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_power",
    "gaussian_tradeoff",
    "gdp_clt_mu_approximation",
    "max_steps_for_budget",
    "mean_theorem4_bound",
    "replacement_from_insertion",
    "schedule_curves",
    "theorem4_bound",
    "theorem4_bound_from_estimate",
    "tradeoff_curves",
    "tradeoff_from_profile",
]
