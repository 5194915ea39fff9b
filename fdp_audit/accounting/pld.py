"""Privacy-loss-distribution accounting of the (Poisson-subsampled) Gaussian mechanism and the exact
trade-off curves it implies (docs/accounting.md, docs/training.md; FDP paper Theorem 5).

**Mechanism.** A schedule is a sequence of :class:`Segment` ``(z_t, p_t, count)``: ``count`` steps of
the Gaussian mechanism with noise multiplier ``z_t`` (noise std / clip norm) on a Poisson sample of
rate ``p_t``. Theorem 5: Algorithm 1 is f-DP_i^Ψ with
``f = T(N(0,1)^T, ((1-p) N(0,1) + p N(1/z, 1))^T)`` -- exactly the add/remove accounting of DP-SGD.

**Grid.** Losses live on multiples of Δ = 1e-4 (docs/accounting.md), refined for mechanisms whose per-step
privacy loss is too small for that grid (:func:`resolve_discretization`).

**Relations.** ``Relation.ADD_REMOVE``: dp_accounting's ``ADD_OR_REMOVE_ONE`` with sensitivity 1 (in units of
the clip norm). Its REMOVE pair is (upper ``(1-p)N(0,z²) + pN(-1,z²)``, lower ``N(0,z²)``) and its ADD
pair (upper ``N(0,z²)``, lower ``(1-p)N(0,z²) + pN(1,z²)``). ``Relation.REPLACE``: ``REPLACE_ONE`` with
sensitivity 1, i.e. the pair ``(1-p)N(0) + pN(-1)`` vs ``(1-p)N(0) + pN(+1)``: the two contributions are
2C apart, as docs/accounting.md's replace-one pair says. It coincides with add/remove at
sensitivity 2 only when p = 1 (both give ``G_{2 sqrt(T)/z}``); for p < 1 add/remove with sensitivity 2
is a different (and wrong) pair. Passing sensitivity 2 *to* REPLACE_ONE would double count
(``G_{4 sqrt(T)/z}`` at p = 1).

**From the PLD to f.** A discretised PLD (pessimistic: dp_accounting's connect-the-dots
discretisation, losses on the grid ``kΔ``, Δ = 1e-4, plus an atom at +∞) is itself a pair of discrete
distributions: U puts mass ``u_k`` on loss ``ℓ_k`` (and the +∞ atom), L puts ``u_k e^{-ℓ_k}`` there.
Its hockey-stick profile is exactly what ``get_delta_for_epsilon`` returns, and, because the
connect-the-dots construction interpolates the true profile as a function of ``e^ε`` (a convex
function) on a grid that covers negative losses too, the pair dominates the true one for *every*
ε ∈ ℝ, hence ``T(L, U) <= T(true)`` pointwise. We compute ``T(L, U)`` directly by Neyman–Pearson:
reject the largest losses first, so the vertices are the tail sums
``α_k = Σ_{i>=k} u_i e^{-ℓ_i}`` and ``1 - f = m_∞ + Σ_{i>=k} u_i`` (slope ``e^{ℓ_k}`` between them).
This is exactly ``sup_{ε∈ℝ} (1 - δ(ε) - e^ε α)``, i.e. docs/accounting.md's route with an ε grid containing every
loss value (checked against :func:`~fdp_audit.accounting.tradeoff.tradeoff_from_profile` in the
tests), but O(n) and free of grid error. It reads the PMF arrays of dp_accounting's PLD, which
are not public API (``_pmf_remove``, ``_pmf_add``, ``_probs``, ``_lower_loss``, ``_infinity_mass``);
:func:`_pmf_arrays` is the one place that does so and fails loudly if they change.

**Directions.** ``"remove"``: ``T(L, U)`` of the REMOVE PMF = ``T(N(0,1)^T, mixture^T)``, the null being
the record's absence (the simulator of Definition 6): Theorem 5's curve, the one Theorem 4 needs.
``"add"``: from the ADD PMF, ``T(mixture^T, N(0,1)^T)``, the inverse direction. ``"symmetric"``
(default, docs/accounting.md): the lower convex envelope ``conv(min(f_remove, f_add))`` -- the largest convex
function below both, which equals docs/accounting.md's ``sup_{ε>=0} f_{ε, max(δ_remove, δ_add)(ε)}``. It is
conservative for Theorem 4 and is what the docs/accounting.md reference table uses (at α = 0.5 the add
direction is the binding one: 1 - f = 0.7783 vs 0.7676 for remove alone at z=1, p=1/16, T=100).
For p = 1 or the replace relation both directions coincide.

**Envelope algorithm.** Both PMFs live on the same loss grid, so every segment slope of either curve
is some ``e^{ℓ_k}``. A vertex of ``f_X`` between slopes ``e^{ℓ_{k-1}}`` and ``e^{ℓ_k}`` lies on the
envelope iff at one of those two slopes its supporting line has the smaller intercept, i.e. iff
``δ_X(ℓ_{k-1}) >= δ_Y(ℓ_{k-1})`` or ``δ_X(ℓ_k) >= δ_Y(ℓ_k)`` (intercepts are ``1 - δ(ε)``, linear in
``e^ε`` between grid slopes). The kept vertices of both curves, sorted by α, are the envelope's.
``δ_X(ℓ_k) = m_∞ + Σ_{i>k} u_i (1 - e^{-(ℓ_i - ℓ_k)})`` is evaluated with a first-order recursive
filter, so nothing overflows even for losses in the thousands.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal

import numpy as np
from dp_accounting import privacy_accountant
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import signal

from fdp_audit.accounting import _validate
from fdp_audit.accounting.events import Relation, Schedule, Segment, check_relation
from fdp_audit.accounting.tradeoff import TradeoffCurve

Direction = Literal["symmetric", "remove", "add"]
DIRECTIONS: tuple[Direction, ...] = ("symmetric", "remove", "add")

DEFAULT_DISCRETIZATION = 1e-4  # docs/accounting.md; refined for tiny per-step losses, see resolve_discretization
_FINEST_DISCRETIZATION = 1e-7
# dp_accounting truncates at most this much mass from the tails of a composition, pessimistically
# (the right tail goes to the +∞ atom); it is its default.
_TAIL_MASS_TRUNCATION = 1e-15
# A composed PMF longer than this (float64 arrays; the curve extraction holds ~a dozen of them) would
# need gigabytes; such parameters give ε in the hundreds and are refused with a clear message.
MAX_PLD_POINTS = 12_000_000

_NEIGHBOURING = {
    Relation.ADD_REMOVE: privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
    Relation.REPLACE: privacy_accountant.NeighboringRelation.REPLACE_ONE,
}


def check_direction(direction: str) -> Direction:
    """``direction`` if it is a direction of the trade-off curves: ``"symmetric"``, ``"remove"`` or ``"add"``.

    Args:
        direction: the direction to check (module docstring, "Directions").

    Returns:
        ``direction`` unchanged.

    Raises:
        InvalidParameterError: it is not one of :data:`DIRECTIONS`.
    """
    if direction not in DIRECTIONS:
        raise _validate.InvalidParameterError(f"must be one of {', '.join(DIRECTIONS)}, got {direction!r}", "direction")
    return direction  # type: ignore[return-value]


def _check_schedule(schedule: Schedule) -> Schedule:
    schedule = tuple(schedule)
    if not schedule or not all(isinstance(s, Segment) for s in schedule):
        raise _validate.InvalidParameterError("must be a non-empty sequence of Segment", "schedule")
    return schedule


def resolve_discretization(schedule: Schedule, discretization: float | None = None) -> float:
    """The loss grid: ``discretization`` when given, else docs/accounting.md's 1e-4 -- refined to the power of ten
    below a tenth of the per-step privacy-loss scale ``μ_1 = p sqrt(e^{1/z²} - 1)`` when that is
    smaller (floor 1e-7). In a heterogeneous schedule the scale is that of the segment contributing
    most to the composed loss (largest ``T_t μ_1²``): all segments share one grid, and refining for a
    segment that hardly matters would only lengthen the others' PMFs.

    Why: the pessimistic rounding costs at most one grid step per composed step, and its bias in ε
    grows like ``(Δ/μ_1)²``. With Δ = 1e-4 it is below 0.1 % for μ_1 >= 1e-3 (every usual DP-SGD
    setting, and every docs/accounting.md reference row) but 9 % at z = 10, p = 1e-3, T = 1e4 (μ_1 = 1e-4),
    where the PRV accountants and a 1e-6 grid agree on ε = 0.02734 and the 1e-4 grid says 0.02976.
    A grid scaled to μ_1 keeps the PMF short (about ``5 T μ_1 + 160 sqrt(T)`` points) while refining.

    Args:
        schedule: the mechanism's :class:`Segment` sequence (non-empty).
        discretization: the grid step Δ of privacy losses (> 0), or None to choose it as above.

    Returns:
        The grid step Δ.

    Raises:
        InvalidParameterError: an empty schedule or one holding something other than :class:`Segment`, or a
            non-positive ``discretization``.
    """
    if discretization is not None:
        return _validate.positive_finite(discretization, "discretization")
    # e^{1/z²} overflows a float below z ≈ 0.0375; such a step's scale is then simply larger than any grid
    scales = {s: s.sample_rate * math.sqrt(math.expm1(_inverse_square(s.noise_multiplier)))
              if _inverse_square(s.noise_multiplier) < 700 else math.inf for s in _check_schedule(schedule)}
    scale = scales[max(scales, key=lambda s: s.steps * scales[s] ** 2)]
    if scale / 10 >= DEFAULT_DISCRETIZATION:
        return DEFAULT_DISCRETIZATION
    return max(10.0 ** math.floor(math.log10(scale / 10)), _FINEST_DISCRETIZATION)


def gaussian_step_pld(
    noise_multiplier: float,
    sample_rate: float,
    relation: Relation = Relation.ADD_REMOVE,
    pessimistic: bool = True,
    discretization: float | None = None,
) -> pld_lib.PrivacyLossDistribution:
    """PLD of one Poisson-subsampled Gaussian step (sensitivity 1 = the clip norm).

    ``pessimistic=False`` gives dp_accounting's optimistic estimate (privacy buckets, since
    connect-the-dots is pessimistic only): a lower bound on leakage, used for the tightness band.

    Args:
        noise_multiplier: the noise multiplier z (noise standard deviation over the clip norm).
        sample_rate: the Poisson sampling rate p in (0, 1].
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS` (module
            docstring, "Relations").
        pessimistic: True for the connect-the-dots upper bound on leakage, False for the optimistic estimate.
        discretization: the loss grid step, or None for :func:`resolve_discretization`'s choice.

    Returns:
        dp_accounting's ``PrivacyLossDistribution`` of the step.

    Raises:
        InvalidParameterError: z, p, the relation or the grid out of range, or a PMF longer than
            :data:`MAX_PLD_POINTS`.
    """
    segment = Segment(noise_multiplier, sample_rate, 1)
    discretization = resolve_discretization((segment,), discretization)
    # the loss at the centre of the shifted Gaussian is log(1 - p + p e^{1/(2z²)}) >= 1/(2z²) + log p: a tiny z
    # gives a one-step PMF of that many grid steps, which dp_accounting would allocate before any size check
    centre_loss = 0.5 * _inverse_square(segment.noise_multiplier) + math.log(segment.sample_rate)
    _check_size(math.ceil(min(max(0.0, centre_loss) / discretization, 1e18)))
    return pld_lib.from_gaussian_mechanism(
        standard_deviation=segment.noise_multiplier,
        sensitivity=1.0,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization,
        sampling_prob=segment.sample_rate,
        use_connect_dots=pessimistic,
        neighboring_relation=_NEIGHBOURING[check_relation(relation)],
    )


def compose_steps(step: pld_lib.PrivacyLossDistribution, steps: int) -> pld_lib.PrivacyLossDistribution:
    """``steps``-fold self-composition of a one-step PLD, refused (with a clear message) when the
    result would exceed :data:`MAX_PLD_POINTS` points.

    Args:
        step: the PLD of one step (e.g. from :func:`gaussian_step_pld`).
        steps: the number of compositions T (>= 1).

    Returns:
        The composed PLD (tails truncated pessimistically at 1e-15 mass).

    Raises:
        InvalidParameterError: ``steps`` below 1, or a result longer than :data:`MAX_PLD_POINTS`.
    """
    steps = _validate.step_count(steps, "steps")
    _check_size(_predicted_points(step, steps))
    return step.self_compose(steps, tail_mass_truncation=_TAIL_MASS_TRUNCATION)


def build_pld(
    schedule: Schedule,
    relation: Relation = Relation.ADD_REMOVE,
    pessimistic: bool = True,
    discretization: float | None = None,
) -> pld_lib.PrivacyLossDistribution:
    """The composed PLD of a schedule (uncached; :func:`composed_pld` is the cached entry point).
    ``discretization=None`` means :func:`resolve_discretization`'s choice.

    Args:
        schedule: the mechanism's :class:`Segment` sequence (non-empty), composed in order.
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS`.
        pessimistic: True for the connect-the-dots upper bound on leakage, False for the optimistic estimate.
        discretization: the loss grid step shared by all segments, or None.

    Returns:
        dp_accounting's ``PrivacyLossDistribution`` of the whole schedule.

    Raises:
        InvalidParameterError: a bad schedule, relation or grid, or a PMF longer than :data:`MAX_PLD_POINTS`.
    """
    schedule = _check_schedule(schedule)
    discretization = resolve_discretization(schedule, discretization)
    steps = [
        gaussian_step_pld(seg.noise_multiplier, seg.sample_rate, relation, pessimistic, discretization)
        for seg in schedule
    ]
    _check_size(sum(_predicted_points(step, seg.steps) for seg, step in zip(schedule, steps)))
    composed = None
    for seg, step in zip(schedule, steps):
        part = step.self_compose(seg.steps, tail_mass_truncation=_TAIL_MASS_TRUNCATION)
        composed = part if composed is None else composed.compose(part, tail_mass_truncation=_TAIL_MASS_TRUNCATION)
    return composed


def composed_pld(
    schedule: Schedule,
    relation: Relation = Relation.ADD_REMOVE,
    pessimistic: bool = True,
    discretization: float | None = None,
) -> pld_lib.PrivacyLossDistribution:
    """Cached :func:`build_pld`: audits ask for the same mechanism many times.

    Args:
        schedule: the mechanism's :class:`Segment` sequence (non-empty).
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS`.
        pessimistic: True for the connect-the-dots upper bound on leakage, False for the optimistic estimate.
        discretization: the loss grid step, or None for :func:`resolve_discretization`'s choice.

    Returns:
        The composed PLD (the same object for the same arguments while it stays in the cache of 8).

    Raises:
        InvalidParameterError: as :func:`build_pld`.
    """
    schedule = _check_schedule(schedule)
    return _cached_pld(schedule, relation, pessimistic, resolve_discretization(schedule, discretization))


@functools.lru_cache(maxsize=8)  # a PLD for T = 10^4 holds a few MB
def _cached_pld(
    schedule: Schedule, relation: Relation, pessimistic: bool, discretization: float
) -> pld_lib.PrivacyLossDistribution:
    return build_pld(schedule, relation, pessimistic, discretization)


def tradeoff_curves(pld: pld_lib.PrivacyLossDistribution) -> dict[Direction, TradeoffCurve]:
    """The ``"remove"``, ``"add"`` and ``"symmetric"`` trade-off curves of a PLD (module docstring).

    Args:
        pld: a dp_accounting ``PrivacyLossDistribution``.

    Returns:
        Direction → :class:`TradeoffCurve`; one curve under all three keys when the PLD is symmetric.

    Raises:
        RuntimeError: the installed dp_accounting stores its PMFs differently from what this module reads.
    """
    pmf_remove, pmf_add = _pmfs(pld)
    offset_r, probs_r, inf_r, step = _pmf_arrays(pmf_remove)
    if pmf_add is pmf_remove:
        curve = _curve(*_neyman_pearson_vertices(offset_r, probs_r, inf_r, step))
        return {"symmetric": curve, "remove": curve, "add": curve}
    offset_a, probs_a, inf_a, _ = _pmf_arrays(pmf_add)
    # Place both PMFs on one loss grid so that the envelope can compare them slope by slope.
    lo = min(offset_r, offset_a)
    size = max(offset_r + probs_r.size, offset_a + probs_a.size) - lo
    u_r, u_a = np.zeros(size), np.zeros(size)
    u_r[offset_r - lo : offset_r - lo + probs_r.size] = probs_r
    u_a[offset_a - lo : offset_a - lo + probs_a.size] = probs_a
    alpha_r, power_r = _neyman_pearson_vertices(lo, u_r, inf_r, step)
    alpha_a, power_a = _neyman_pearson_vertices(lo, u_a, inf_a, step)
    delta_r, delta_a = _node_profile(u_r, inf_r, step), _node_profile(u_a, inf_a, step)
    # Vertex k (ascending loss index; vertex arrays are in descending-α order k = 0..n) spans the
    # profile nodes k-1 and k, which are entries k and k+1 of the node arrays.
    r_wins, a_wins = delta_r >= delta_a, delta_a >= delta_r
    keep_r = r_wins[:-1] | r_wins[1:]
    keep_a = a_wins[:-1] | a_wins[1:]
    env_alpha = np.concatenate([alpha_r[keep_r], alpha_a[keep_a]])
    env_power = np.concatenate([power_r[keep_r], power_a[keep_a]])
    order = np.lexsort((env_power, env_alpha))
    return {
        "symmetric": TradeoffCurve(env_alpha[order], env_power[order]),
        "remove": _curve(alpha_r, power_r),
        "add": _curve(alpha_a, power_a),
    }


def schedule_curves(
    schedule: Schedule,
    relation: Relation = Relation.ADD_REMOVE,
    pessimistic: bool = True,
    discretization: float | None = None,
) -> dict[Direction, TradeoffCurve]:
    """Cached trade-off curves (all three directions) of a schedule.

    Args:
        schedule: the mechanism's :class:`Segment` sequence (non-empty).
        relation: the neighbouring relation, one of :data:`~fdp_audit.accounting.events.RELATIONS`.
        pessimistic: True for the curve the verdicts use (a lower bound on f), False for the optimistic one.
        discretization: the loss grid step, or None for :func:`resolve_discretization`'s choice.

    Returns:
        Direction (``"symmetric"``, ``"remove"``, ``"add"``) → :class:`TradeoffCurve`, as :func:`tradeoff_curves`.

    Raises:
        InvalidParameterError: as :func:`build_pld`.
    """
    schedule = _check_schedule(schedule)
    return _cached_curves(schedule, relation, pessimistic, resolve_discretization(schedule, discretization))


@functools.lru_cache(maxsize=16)  # curves are what audits evaluate repeatedly
def _cached_curves(
    schedule: Schedule, relation: Relation, pessimistic: bool, discretization: float
) -> dict[Direction, TradeoffCurve]:
    return tradeoff_curves(composed_pld(schedule, relation, pessimistic, discretization))


def _pmfs(pld: pld_lib.PrivacyLossDistribution) -> tuple[Any, Any]:
    """The REMOVE and ADD PMFs (the same object for a symmetric PLD)."""
    try:
        return pld._pmf_remove, pld._pmf_add
    except AttributeError as err:  # pragma: no cover - depends on the installed dp_accounting
        raise RuntimeError(f"unsupported dp_accounting PrivacyLossDistribution layout: {err}") from err


def _pmf_arrays(pmf) -> tuple[int, np.ndarray, float, float]:
    """(index of the lowest loss, masses on consecutive grid losses, mass at +∞, grid step) of a PLD
    PMF -- the only place that reads dp_accounting's private PMF attributes. FFT composition leaves
    round-off masses of about -1e-18; they are set to zero."""
    dense = pmf.to_dense_pmf()
    try:
        return (
            int(dense._lower_loss),
            np.maximum(np.asarray(dense._probs, dtype=float), 0.0),
            float(dense._infinity_mass),
            float(dense._discretization),
        )
    except AttributeError as err:  # pragma: no cover - depends on the installed dp_accounting
        raise RuntimeError(f"unsupported dp_accounting DensePLDPmf layout: {err}") from err


def _neyman_pearson_vertices(offset: int, probs: np.ndarray, infinity_mass: float, step: float):
    """Vertices of ``T(L, U)`` for the discrete pair of a PMF, in descending-α order.

    Entry k (k = 0..n) is the test rejecting every loss >= ℓ_k (and the +∞ atom); entry n rejects only
    the atom. Tail sums run from the largest loss down, so small α keep full relative precision.
    """
    losses = (offset + np.arange(probs.size)) * step
    with np.errstate(divide="ignore", over="ignore"):
        # u e^{-ℓ} in log space: for very negative losses e^{-ℓ} alone would overflow.
        lower = np.exp(np.log(probs) - losses)
    alpha = np.append(np.cumsum(lower[::-1])[::-1], 0.0)
    power = infinity_mass + np.append(np.cumsum(probs[::-1])[::-1], 0.0)
    return alpha, power


def _node_profile(probs: np.ndarray, infinity_mass: float, step: float) -> np.ndarray:
    """``δ(ε)`` at the nodes ε = -∞, ℓ_0, …, ℓ_{n-1}, +∞ of the full (two-sided) profile of a PMF."""
    tail = np.append(np.cumsum(probs[::-1])[::-1][1:], 0.0)  # Σ_{i>k} u_i
    ratio = math.exp(-step)
    # discounted[k] = Σ_{i>k} u_i e^{-(ℓ_i - ℓ_k)}: on the reversed sequence, y[m] = r (x[m-1] + y[m-1]).
    discounted = signal.lfilter([0.0, ratio], [1.0, -ratio], probs[::-1])[::-1]
    inner = infinity_mass + tail - discounted
    return np.concatenate([[infinity_mass + probs.sum()], inner, [infinity_mass]])


def _curve(alpha_desc: np.ndarray, power_desc: np.ndarray) -> TradeoffCurve:
    return TradeoffCurve(alpha_desc[::-1], power_desc[::-1])


def _predicted_points(step: pld_lib.PrivacyLossDistribution, steps: int) -> int:
    """Length of the ``steps``-fold composition's PMF, predicted with the Chernoff bound that
    dp_accounting itself uses to truncate a self-composition (a public helper), before composing."""
    sizes = []
    for pmf in {id(p): p for p in _pmfs(step)}.values():
        lo, hi = pld_common.compute_self_convolve_bounds(_pmf_arrays(pmf)[1], steps, _TAIL_MASS_TRUNCATION)
        sizes.append(hi - lo + 1)
    return max(sizes)


def _inverse_square(noise_multiplier: float) -> float:
    """1/z², infinite (not an OverflowError) for a z so small that its square underflows."""
    return (1.0 / noise_multiplier) * (1.0 / noise_multiplier)


def _check_size(points: int) -> None:
    """Refuse compositions whose PMF would not fit in memory, before spending minutes on them."""
    if points > MAX_PLD_POINTS:
        raise _validate.InvalidParameterError(
            f"the privacy-loss distribution of this schedule needs about {points:,} points at the "
            f"accounting grid (limit {MAX_PLD_POINTS:,}); ε is in the hundreds or more, i.e. there is "
            "essentially no privacy -- use a larger noise multiplier or fewer/sparser steps",
            "noise_multiplier",
        )
