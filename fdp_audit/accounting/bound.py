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
    """``1 - f(Ball)``, vectorised over targets (Theorem 4, docs/accounting.md). For a :class:`TradeoffCurve` the
    power ``1 - f`` is read directly, keeping its relative precision when it is tiny; for any other callable the
    bound is ``1 - f(Ball)`` clipped to [Ball, 1] (a trade-off function satisfies f(α) <= 1 - α).

    Args:
        f: the claimed trade-off function: a :class:`TradeoffCurve`, or a callable mapping type-I errors α in
            [0, 1] to type-II errors.
        ball: Ball, the prior's largest mass on a ball of the attack's success radius, one value or one per target,
            in [0, 1].

    Returns:
        The bound on the attribute-inference success probability: a float for a scalar ``ball``, else an array of
        its shape.

    Raises:
        InvalidParameterError: a Ball value is outside [0, 1].
    """
    b = _validate.unit_interval(ball, "ball")
    if isinstance(f, TradeoffCurve):
        out = np.asarray(f.power_at(b), dtype=float)
    else:
        out = np.clip(1 - np.asarray(f(b), dtype=float), b, 1.0)
    return float(out) if np.ndim(ball) == 0 else out


def mean_theorem4_bound(f: TradeoffLike, balls: npt.ArrayLike) -> float:
    """Mean over targets of the per-target bounds (valid for the mean success because the bound holds
    for every u).

    Args:
        f: the claimed trade-off function (see :func:`theorem4_bound`).
        balls: one Ball value per target, in [0, 1].

    Returns:
        The mean of ``1 - f(Ball)`` over the targets.

    Raises:
        InvalidParameterError: there is no target, or a Ball value is outside [0, 1].
    """
    b = np.atleast_1d(_validate.unit_interval(balls, "balls"))
    if b.size == 0:
        raise _validate.InvalidParameterError("needs at least one target", "balls")
    return float(np.mean(theorem4_bound(f, b)))


def theorem4_bound_from_estimate(f: TradeoffLike, estimate: BallEstimate) -> float:
    """The conservative bound for an estimated Ball: ``1 - f(upper confidence bound of Ball)``.

    Args:
        f: the claimed trade-off function (see :func:`theorem4_bound`).
        estimate: the Ball estimate; its upper confidence bound (capped at 1) is used.

    Returns:
        The bound on the success probability, valid with the estimate's confidence.
    """
    return float(theorem4_bound(f, min(estimate.upper, 1.0)))
