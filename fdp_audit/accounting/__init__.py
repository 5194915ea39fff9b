"""Privacy accounting (docs/accounting.md, docs/training.md): trade-off curves of the composed Poisson-subsampled
Gaussian from dp_accounting's PLD, closed forms and conversions, the accounting object of each mechanism, the
Ball helpers and the Theorem 4 bound, and noise calibration.

Typical use::

    from fdp_audit.accounting import MechanismSpec, SubsampledGaussianEvent, accountant_for, ball_discrete

    acc = accountant_for(MechanismSpec("fdp_sgd", SubsampledGaussianEvent.claimed(1.0, 1 / 16, 100)))
    acc.epsilon(1e-5)                      # 4.376
    acc.bound(ball_discrete([0.5, 0.5]))   # 1 - f(0.5) = 0.7783

The names below load on first use (PEP 562), so that importing one light module of the package (the privacy events
that the mechanism registry and the configuration read) does not load dp_accounting and SciPy.
"""

from __future__ import annotations

import importlib
from typing import Any

# submodule → the public names it provides
_PROVIDERS: dict[str, tuple[str, ...]] = {
    "parameters": ("InvalidParameterError",),
    "ball": (
        "BallEstimate", "ball_discrete", "ball_gaussian", "ball_monte_carlo", "ball_uniform_box",
        "circle_rectangle_area",
    ),
    "bound": ("mean_theorem4_bound", "theorem4_bound", "theorem4_bound_from_estimate"),
    "calibration": ("calibrate_noise_multiplier", "max_steps_for_budget"),
    "events": (
        "NonPrivateEvent", "PrivacyEvent", "PublicOnlyEvent", "RELATIONS", "Relation", "Segment",
        "SubsampledGaussianEvent",
    ),
    "mechanism": (
        "ACCOUNTANTS", "ClosedFormAccountant", "MechanismAccountant", "MechanismSpec", "PldAccountant",
        "accountant_for", "register_accountant", "unregister_accountant",
    ),
    "pld": ("DIRECTIONS", "Direction", "build_pld", "composed_pld", "schedule_curves", "tradeoff_curves"),
    "tradeoff": (
        "TradeoffCurve", "compose_gaussian", "delta_from_tradeoff", "eps_delta_tradeoff", "epsilon_from_tradeoff",
        "gaussian_delta", "gaussian_epsilon", "gaussian_power", "gaussian_tradeoff", "gdp_clt_mu_approximation",
        "replacement_from_insertion", "tradeoff_from_profile",
    ),
}
_MODULE_OF = {name: module for module, names in _PROVIDERS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
