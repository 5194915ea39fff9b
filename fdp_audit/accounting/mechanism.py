"""The accounting object of a training mechanism (docs/training.md; FDP paper Theorem 5).

A :class:`MechanismSpec` names a mechanism and its privacy parameters; :class:`MechanismAccountant`
turns it into the trade-off function f (vectorised callable), ε(δ), δ(ε) and the Theorem 4 bound.

How each mechanism is accounted:

* ``nonprivate`` -- f ≡ 0 (ε = ∞ for every δ < 1).
* ``public_only`` -- trains on ``ℓ_pub∘Ψ`` only, never reads private features: (0, 0)-FDP,
  ``f(α) = 1 - α``.
* ``dp_sgd``, ``fdp_sgd`` (Algorithm 1, Theorem 5), ``fdp_dpsgd`` (public pre-training, then
  DP-SGD) -- the composed Poisson-subsampled Gaussian PLD of :mod:`fdp_audit.accounting.pld`.
  Public-only steps (``public_pretrain_steps``, or interleaved public steps, Remark 2) cost nothing
  and are not part of the schedule.
* ``corrdp_sgd`` -- a Gaussian mechanism for a *sensitive*-feature neighbour; the caller passes the
  effective noise multiplier ``σ / Δ_2`` (sample rate 1 for full-batch GD). Insensitive-feature
  neighbours, whose noise is scaled by the TV correlation, are accounted by :mod:`fdp_audit.corrdp`.
* known-faulty mechanisms (``fdp_sgd_shared_batch``, ``dp_sgd_half_noise``, ``dp_sgd_no_clip``,
  ``fdp_sgd_leaky_public``, ``dp_sgd_wrong_rate``) -- accounted *as they claim*, i.e. exactly like
  the correct mechanism with the claimed z and p. That is the point: the audit has to catch the gap
  between the claim and what the code does.

Which of these applies is the ``accounting`` and ``claims`` of the mechanism's row in the registry
(:mod:`fdp_audit.training.mechanisms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fdp_audit.accounting import _validate
from fdp_audit.accounting.bound import theorem4_bound
from fdp_audit.accounting.pld import (
    DEFAULT_DISCRETIZATION,
    Direction,
    Relation,
    Schedule,
    Segment,
    check_direction,
    check_relation,
    composed_pld,
    resolve_discretization,
    schedule_curves,
)
from fdp_audit.accounting.tradeoff import TradeoffCurve, gdp_clt_mu_approximation
from fdp_audit.training.mechanisms import MECHANISMS, Mechanism


@dataclass(frozen=True)
class MechanismSpec:
    """A mechanism and its *claimed* privacy parameters.

    For the Gaussian mechanisms either give ``noise_multiplier``, ``sample_rate`` and ``steps`` (a
    constant schedule) or ``schedule``, a sequence of :class:`~fdp_audit.accounting.pld.Segment`
    ``(z_t, p_t, count)``. ``nonprivate`` and ``public_only`` need no parameters.
    ``public_pretrain_steps`` is recorded for reports; it does not change the accounting.
    """

    name: str
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int = 0
    public_pretrain_steps: int = 0
    relation: Relation = "add-remove"
    schedule: Schedule | None = None

    def __post_init__(self) -> None:
        if self.name not in MECHANISMS:
            raise _validate.InvalidParameterError(
                f"unknown mechanism {self.name!r}; expected one of {', '.join(MECHANISMS)}", "mechanism"
            )
        check_relation(self.relation)
        _validate.step_count(self.public_pretrain_steps, "public_pretrain_steps", minimum=0)
        if self.schedule is not None:
            object.__setattr__(self, "schedule", tuple(self.schedule))
        if self.is_gaussian:
            self.segments()  # validates z, p, T (or the schedule) now rather than at first use

    @property
    def mechanism(self) -> Mechanism:
        """The mechanism's row in the registry."""
        return MECHANISMS[self.name]

    @property
    def is_gaussian(self) -> bool:
        return self.mechanism.accounting == "subsampled_gaussian"

    @property
    def claimed_as(self) -> str:
        """The correct mechanism whose guarantee this one claims (itself unless known-faulty)."""
        return self.mechanism.claimed_as

    def segments(self) -> Schedule:
        """The private steps as a schedule of segments (empty for non-Gaussian mechanisms)."""
        if not self.is_gaussian:
            return ()
        if self.schedule is not None:
            if not self.schedule or not all(isinstance(s, Segment) for s in self.schedule):
                raise _validate.InvalidParameterError("must be a non-empty sequence of Segment", "schedule")
            return self.schedule
        if self.noise_multiplier is None or self.sample_rate is None:
            raise _validate.InvalidParameterError(
                f"mechanism {self.name!r} needs noise_multiplier, sample_rate and steps", "noise_multiplier"
            )
        return (Segment(self.noise_multiplier, self.sample_rate, self.steps),)

    @property
    def total_steps(self) -> int:
        return sum(s.steps for s in self.segments())


class MechanismAccountant:
    """f, ε(δ), δ(ε) and the Theorem 4 bound of a mechanism (pessimistic PLD, docs/accounting.md, docs/training.md).

    ``discretization`` None means the PLD grid of
    :func:`~fdp_audit.accounting.pld.resolve_discretization` (1e-4 in all usual settings).

    ``direction`` selects the curve (see :mod:`fdp_audit.accounting.pld`): ``"symmetric"`` (default,
    the lower convex envelope of both directions, conservative), ``"remove"`` (Theorem 5's
    ``T(N(0,1)^T, mixture^T)``, the simulator direction of Theorem 4) or ``"add"``. ε(δ) and δ(ε) are
    the usual DP quantities, maximised over both directions (dp_accounting's convention), which is
    also what Theorem 2 gives for the symmetric curve.
    """

    def __init__(self, spec: MechanismSpec, discretization: float | None = None):
        self.spec = spec
        # The loss grid: docs/training.md's 1e-4 unless the per-step loss is too small for it (pld module).
        segments = spec.segments()
        self.discretization = (
            resolve_discretization(segments, discretization) if segments else DEFAULT_DISCRETIZATION
        )

    def __repr__(self) -> str:
        return f"MechanismAccountant({self.spec!r})"

    @property
    def relation(self) -> Relation:
        return self.spec.relation

    def curve(self, direction: Direction = "symmetric", pessimistic: bool = True) -> TradeoffCurve:
        """The trade-off curve; ``pessimistic=False`` gives the optimistic PLD's curve (an upper bound
        on the true f, used only for the tightness band)."""
        check_direction(direction)
        if self.spec.mechanism.accounting == "nonprivate":
            return TradeoffCurve.no_privacy()
        if self.spec.mechanism.accounting == "public_only":
            return TradeoffCurve.perfect_privacy()
        curves = schedule_curves(self.spec.segments(), self.relation, pessimistic, self.discretization)
        return curves[direction]

    def f(self, alpha: npt.ArrayLike, direction: Direction = "symmetric") -> float | np.ndarray:
        """``f(α)``, vectorised over α ∈ [0, 1]."""
        return self.curve(direction)(alpha)

    def bound(self, ball: npt.ArrayLike, direction: Direction = "symmetric") -> float | np.ndarray:
        """Theorem 4: an attribute-inference adversary succeeds with probability at most
        ``1 - f(Ball)``."""
        return theorem4_bound(self.curve(direction), ball)

    def tightness_band(
        self, alpha: npt.ArrayLike, direction: Direction = "symmetric"
    ) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(f_pessimistic(α), f_optimistic(α))``: the true f lies between them."""
        return self.curve(direction)(alpha), self.curve(direction, pessimistic=False)(alpha)

    def epsilon(self, delta: npt.ArrayLike) -> float | np.ndarray:
        """Smallest ε with δ(ε) <= δ (dp_accounting's ``get_epsilon_for_delta``; +inf when no finite
        ε exists)."""
        d = _validate.deltas(delta)
        if self.spec.mechanism.accounting == "nonprivate":
            out = np.full(d.shape, math.inf)
        elif self.spec.mechanism.accounting == "public_only":
            out = np.zeros(d.shape)
        else:
            pld = composed_pld(self.spec.segments(), self.relation, True, self.discretization)
            out = np.array([pld.get_epsilon_for_delta(float(x)) for x in d.ravel()]).reshape(d.shape)
        return float(out) if np.ndim(delta) == 0 else out

    def delta(self, epsilon: npt.ArrayLike) -> float | np.ndarray:
        """δ(ε), the maximum over both directions of the hockey-stick divergence, vectorised over
        ε >= 0. Read off the symmetric curve (its conjugate, exact for the discrete pair and equal to
        dp_accounting's ``get_delta_for_epsilon`` to ~1e-12, which loops in Python over the PMF)."""
        e = _validate.epsilons(epsilon)
        if self.spec.mechanism.accounting == "nonprivate":
            out = np.ones(e.shape)
        elif self.spec.mechanism.accounting == "public_only":
            out = np.zeros(e.shape)
        else:
            flat = e.ravel()
            order = np.argsort(flat)
            ascending = np.asarray(self.curve().delta(flat[order]), dtype=float)
            # δ is non-increasing in ε; enforce it against rounding with the conservative running
            # maximum from the right.
            values = np.empty_like(flat)
            values[order] = np.maximum.accumulate(ascending[::-1])[::-1]
            out = values.reshape(e.shape)
        return float(out) if np.ndim(epsilon) == 0 else out

    def gdp_clt_mu(self) -> float | None:
        """APPROXIMATION for labelled comparisons only (docs/accounting.md): ``μ ≈ p sqrt(T (e^{1/z²} - 1))``,
        composed over segments as ``sqrt(Σ μ_t²)``; None for non-Gaussian mechanisms."""
        segments = self.spec.segments()
        if not segments:
            return None
        return math.sqrt(
            sum(gdp_clt_mu_approximation(s.noise_multiplier, s.sample_rate, s.steps) ** 2 for s in segments)
        )
