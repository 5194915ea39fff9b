"""Calibration (docs/files.md ``calibrate``): the noise multiplier for a privacy budget, and the number of
steps a budget affords. Both search the pessimistic PLD's ε(δ) (dp_accounting), which is
non-increasing in z and non-decreasing in T, and return the conservative end of the final bracket,
so the answer always meets the budget under the same accounting the audit uses.

Speed: a search first runs on a 10× coarser loss grid (ε within ~0.05 % of the fine one and about
ten times cheaper) and then refines on the requested grid from the coarse answer outward, so only a
handful of fine PLDs are built.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fdp_audit.accounting import _validate
from fdp_audit.accounting.pld import (
    Relation,
    Segment,
    build_pld,
    check_relation,
    compose_steps,
    gaussian_step_pld,
    resolve_discretization,
)

# Noise multipliers outside this range are not useful for training and make the PLD huge (z small)
# or degenerate (z large); a target that needs one is reported as unreachable.
Z_MIN, Z_MAX = 0.1, 1e4
_COARSE = 10.0  # coarse grid = this × the requested discretisation


def _epsilon(
    z: float, p: float, steps: int, delta: float, relation: Relation, discretization: float | None, coarsen: float
) -> float:
    """ε(δ) on the grid ``coarsen`` × the (resolved) requested grid."""
    segment = Segment(z, p, steps)
    try:
        pld = build_pld((segment,), relation, True, coarsen * resolve_discretization((segment,), discretization))
    except _validate.InvalidParameterError:
        return math.inf  # the PLD would be too large to hold: ε is in the hundreds or more
    return float(pld.get_epsilon_for_delta(delta))


def _bracket_z(fits: Callable[[float], bool], start: float, factor: float, target: float, delta: float):
    """(lo, hi) with ``not fits(lo)`` and ``fits(hi)``, stepping geometrically from ``start``."""
    if fits(start):
        hi = start
        while fits(hi / factor):
            hi /= factor
            if hi < Z_MIN:
                raise _validate.InvalidParameterError(
                    f"the budget is met even with noise multiplier {hi:g}; nothing to calibrate", "epsilon"
                )
        return hi / factor, hi
    lo = start
    while not fits(lo * factor):
        lo *= factor
        if lo > Z_MAX:
            raise _validate.InvalidParameterError(
                f"unreachable: even noise multiplier {lo:g} gives ε > {target:g} at δ = {delta:g}", "epsilon"
            )
    return lo, lo * factor


def _bisect_z(fits: Callable[[float], bool], lo: float, hi: float, rtol: float) -> float:
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def calibrate_noise_multiplier(
    epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    relation: Relation = Relation.ADD_REMOVE,
    rtol: float = 1e-3,
    discretization: float | None = None,
) -> float:
    """Smallest noise multiplier z (to relative tolerance ``rtol``) with ``ε(δ) <= epsilon`` for
    ``steps`` Poisson-subsampled Gaussian steps at rate ``sample_rate``.

    Bracketing (factor 2 from z = 1) and bisection in log z on the coarse grid, then bracketing
    (factor 1.01 from the coarse answer) and bisection on the requested grid until
    ``hi / lo <= 1 + rtol``; returns ``hi``, whose ε(δ) is within budget.

    Args:
        epsilon: the budget ε, finite and > 0.
        delta: δ in (0, 1).
        sample_rate: the Poisson sampling rate p in (0, 1].
        steps: the number of steps T (>= 1).
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS`.
        rtol: the relative tolerance on z (> 0).
        discretization: the loss grid step, or None for :func:`~fdp_audit.accounting.pld.resolve_discretization`'s
            choice.

    Returns:
        z, the upper end of the final bracket, whose pessimistic ε(δ) is at most ``epsilon``.

    Raises:
        InvalidParameterError: a parameter out of range; the budget is unreachable with z up to :data:`Z_MAX`; or
            it is met even below :data:`Z_MIN` (nothing to calibrate).
    """
    target = float(_validate.epsilons(epsilon))
    if target <= 0 or math.isinf(target):
        raise _validate.InvalidParameterError(f"must be a finite number > 0, got {target!r}", "epsilon")
    d = float(_validate.deltas(delta))
    p = _validate.rate(sample_rate, "sample_rate")
    t = _validate.step_count(steps, "steps")
    relation = check_relation(relation)
    rtol = _validate.positive_finite(rtol, "rtol")
    if discretization is not None:
        _validate.positive_finite(discretization, "discretization")

    def fits_on(coarsen: float) -> Callable[[float], bool]:
        return lambda z: _epsilon(z, p, t, d, relation, discretization, coarsen) <= target

    guess = _bisect_z(fits_on(_COARSE), *_bracket_z(fits_on(_COARSE), 1.0, 2.0, target, d), rtol)
    return _bisect_z(fits_on(1.0), *_bracket_z(fits_on(1.0), guess, 1.01, target, d), rtol)


def max_steps_for_budget(
    epsilon: float,
    delta: float,
    noise_multiplier: float,
    sample_rate: float,
    relation: Relation = Relation.ADD_REMOVE,
    max_steps: int = 1_000_000,
    discretization: float | None = None,
) -> int:
    """Largest T <= ``max_steps`` with ``ε(δ) <= epsilon``; 0 when even one step exceeds the budget,
    ``max_steps`` when the budget is never exhausted up to it.

    Doubling then integer bisection on the coarse grid, then galloping up from the coarse answer and
    bisection on the requested grid. One-step PLDs are built once and self-composed for each T.

    Args:
        epsilon: the budget ε >= 0 (+inf gives ``max_steps``).
        delta: δ in (0, 1).
        noise_multiplier: the noise multiplier z.
        sample_rate: the Poisson sampling rate p in (0, 1].
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS`.
        max_steps: the largest T searched (>= 1).
        discretization: the loss grid step, or None for :func:`~fdp_audit.accounting.pld.resolve_discretization`'s
            choice.

    Returns:
        The number of steps T in [0, ``max_steps``].

    Raises:
        InvalidParameterError: a parameter out of range.
    """
    target = float(_validate.epsilons(epsilon))
    d = float(_validate.deltas(delta))
    z = _validate.noise_multiplier(noise_multiplier)
    p = _validate.rate(sample_rate, "sample_rate")
    relation = check_relation(relation)
    cap = _validate.step_count(max_steps, "max_steps")
    fine = resolve_discretization((Segment(z, p, 1),), discretization)
    if math.isinf(target):
        return cap

    def fits_on(grid: float) -> Callable[[int], bool]:
        one_step = gaussian_step_pld(z, p, relation, True, grid)

        def fits(t: int) -> bool:
            try:
                pld = compose_steps(one_step, t)
            except _validate.InvalidParameterError:
                return False  # too large to hold: ε is in the hundreds or more
            return pld.get_epsilon_for_delta(d) <= target

        return fits

    coarse = _largest_fitting(fits_on(_COARSE * fine), 0, cap)
    return _largest_fitting(fits_on(fine), coarse, cap)


def _largest_fitting(fits: Callable[[int], bool], start: int, cap: int) -> int:
    """Largest t in [0, cap] with ``fits(t)``, for ``fits`` true up to some t and false after.

    ``start`` is a guess (the coarse answer, or 0): galloping up from it with doubling strides finds a
    failing t, then integer bisection; if the guess itself fails, bisection below it.
    """
    if not fits(1):
        return 0
    good, bad = 1, None
    if start > 1:
        if fits(start):
            good = start
        else:
            bad = start
    stride = 1
    while bad is None:
        if good >= cap:
            return cap
        trial = min(good + stride, cap)
        if fits(trial):
            good, stride = trial, 2 * stride
        else:
            bad = trial
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
