"""Theorem 4 of the FDP paper (docs/accounting.md): for a convex trade-off function f and an f-DP_i^Ψ mechanism,
every attribute-inference adversary succeeds with probability at most ``1 - f(Ball)``.

The bound holds per public value u, so over targets with different u the mean success is compared
with the mean of the per-target bounds (:func:`mean_theorem4_bound`). An estimated Ball enters with its
upper confidence bound (:func:`theorem4_bound_from_estimate`); f is non-increasing, so a larger Ball
can only raise the bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from fdp_audit.accounting import _validate
from fdp_audit.accounting.ball import BallEstimate
from fdp_audit.accounting.tradeoff import TradeoffCurve

TradeoffLike = TradeoffCurve | Callable[[npt.ArrayLike], "float | np.ndarray"]


def theorem4_bound(f: TradeoffLike, ball: npt.ArrayLike) -> float | np.ndarray:
    """``1 - f(Ball)``, vectorised over targets. For a :class:`TradeoffCurve` the power ``1 - f`` is
    read directly, keeping its relative precision when it is tiny."""
    b = _validate.unit_interval(ball, "ball")
    if isinstance(f, TradeoffCurve):
        out = np.asarray(f.power_at(b), dtype=float)
    else:
        out = np.clip(1 - np.asarray(f(b), dtype=float), b, 1.0)
    return float(out) if np.ndim(ball) == 0 else out


def mean_theorem4_bound(f: TradeoffLike, balls: npt.ArrayLike) -> float:
    """Mean over targets of the per-target bounds (valid for the mean success because the bound holds
    for every u)."""
    b = np.atleast_1d(_validate.unit_interval(balls, "balls"))
    if b.size == 0:
        raise _validate.InvalidParameterError("needs at least one target", "balls")
    return float(np.mean(theorem4_bound(f, b)))


def theorem4_bound_from_estimate(f: TradeoffLike, estimate: BallEstimate) -> float:
    """The conservative bound for an estimated Ball: ``1 - f(upper confidence bound of Ball)``."""
    return float(theorem4_bound(f, min(estimate.upper, 1.0)))
