"""The accountants of what a mechanism releases (docs/accounting.md, docs/training.md; FDP paper Theorem 5).

A :class:`MechanismSpec` is a claim: the name of the mechanism whose guarantee is claimed, what it releases (a
:class:`~fdp_audit.accounting.events.PrivacyEvent`) and the neighbouring relation. :func:`accountant_for` turns
it into a :class:`MechanismAccountant` -- the trade-off function f (vectorised callable), ε(δ), δ(ε) and the
Theorem 4 bound -- choosing the first registered accountant that ``supports`` the event:

* :class:`ClosedFormAccountant` -- :class:`~fdp_audit.accounting.events.NonPrivateEvent` (f ≡ 0, ε = ∞ for every
  δ < 1) and :class:`~fdp_audit.accounting.events.PublicOnlyEvent` (training on ``ℓ_pub∘Ψ`` only, never reading
  private features: (0, 0)-FDP, ``f(α) = 1 - α``).
* :class:`PldAccountant` -- :class:`~fdp_audit.accounting.events.SubsampledGaussianEvent`: the composed
  Poisson-subsampled Gaussian PLD of :mod:`fdp_audit.accounting.pld` (DP-SGD, Algorithm 1, public pre-training
  then DP-SGD, and CorrDP-SGD's sensitive-feature neighbours, whose caller passes the effective noise multiplier
  ``σ / Δ_2`` at sample rate 1). Public-only steps cost nothing and are not part of the schedule.

Known-faulty mechanisms are accounted *as they claim*: their registry row releases the event of the correct
mechanism they imitate (:mod:`fdp_audit.mechanisms`). That is the point: the audit has to catch the gap between
the claim and what the code does. The accountants are the entries of :data:`ACCOUNTANTS` (the one registry pattern,
:mod:`fdp_audit.registry`); :func:`register_accountant` adds one for a new kind of event (docs/extending.md).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from fdp_audit.accounting import _validate
from fdp_audit.accounting.bound import theorem4_bound
from fdp_audit.accounting.events import (
    NonPrivateEvent,
    PrivacyEvent,
    PublicOnlyEvent,
    Relation,
    Schedule,
    SubsampledGaussianEvent,
    check_relation,
)
from fdp_audit.accounting.pld import (
    DEFAULT_DISCRETIZATION,
    Direction,
    check_direction,
    composed_pld,
    resolve_discretization,
    schedule_curves,
)
from fdp_audit.accounting.tradeoff import TradeoffCurve, gdp_clt_mu_approximation
from fdp_audit.registry import Registry, Rule


@dataclass(frozen=True)
class MechanismSpec:
    """A claimed mechanism: ``name``, what the claim is called (the mechanism whose guarantee is claimed), ``event``,
    what it releases under the claimed parameters, and the neighbouring ``relation`` it is accounted under.
    ``public_pretrain_steps`` is recorded for reports; it does not change the accounting.
    """

    name: str
    event: PrivacyEvent
    relation: Relation = Relation.ADD_REMOVE
    public_pretrain_steps: int = field(default=0, compare=False)  # the same claim for every accountant

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise _validate.InvalidParameterError(f"must be a PrivacyEvent, got {self.event!r}", "event")
        object.__setattr__(self, "relation", check_relation(self.relation))
        _validate.step_count(self.public_pretrain_steps, "public_pretrain_steps", minimum=0)

    @classmethod
    def gaussian(cls, name: str, noise_multiplier: float, sample_rate: float, steps: int,
                 relation: Relation = Relation.ADD_REMOVE, public_pretrain_steps: int = 0) -> MechanismSpec:
        """A claim of ``steps`` Poisson-subsampled Gaussian steps at noise multiplier ``noise_multiplier`` and
        sampling rate ``sample_rate`` (DP-SGD and Algorithm 1 alike, FDP paper Theorem 5).

        Args:
            name: what the claim is called (the mechanism whose guarantee is claimed).
            noise_multiplier: z > 0.
            sample_rate: p in (0, 1].
            steps: T >= 1.
            relation: the neighbouring relation.
            public_pretrain_steps: recorded for reports.

        Returns:
            The spec.
        """
        event = SubsampledGaussianEvent.claimed(noise_multiplier, sample_rate, steps)
        return cls(name, event, relation, public_pretrain_steps)

    @property
    def is_gaussian(self) -> bool:
        """Whether it releases composed Poisson-subsampled Gaussian steps."""
        return isinstance(self.event, SubsampledGaussianEvent)

    def segments(self) -> Schedule:
        """The private steps.

        Returns:
            The schedule of segments, empty for events that are not Gaussian.
        """
        return self.event.schedule if isinstance(self.event, SubsampledGaussianEvent) else ()

    def _constant(self, field: str) -> float | int | None:
        segment = self.event.constant if isinstance(self.event, SubsampledGaussianEvent) else None
        return None if segment is None else getattr(segment, field)

    @property
    def noise_multiplier(self) -> float | None:
        """z of a constant Gaussian schedule; None otherwise."""
        return self._constant("noise_multiplier")

    @property
    def sample_rate(self) -> float | None:
        """p of a constant Gaussian schedule; None otherwise."""
        return self._constant("sample_rate")

    @property
    def steps(self) -> int:
        """T of a constant Gaussian schedule; 0 otherwise."""
        return self._constant("steps") or 0

    @property
    def total_steps(self) -> int:
        """The number of private steps."""
        return sum(s.steps for s in self.segments())


class MechanismAccountant(ABC):
    """f, ε(δ), δ(ε) and the Theorem 4 bound of a claimed mechanism (docs/accounting.md, docs/training.md). Built
    by :func:`accountant_for`, which picks the subclass that :meth:`supports` the claim's event.

    ``direction`` selects the curve (see :mod:`fdp_audit.accounting.pld`): ``"symmetric"`` (default, the lower
    convex envelope of both directions, conservative), ``"remove"`` (Theorem 5's ``T(N(0,1)^T, mixture^T)``, the
    simulator direction of Theorem 4) or ``"add"``. ε(δ) and δ(ε) are the usual DP quantities, maximised over
    both directions (dp_accounting's convention), which is also what Theorem 2 gives for the symmetric curve.
    """

    name: ClassVar[str]  # its name in :data:`ACCOUNTANTS`
    discretization: float = DEFAULT_DISCRETIZATION  # the PLD loss grid, where there is one

    def __init__(self, spec: MechanismSpec, discretization: float | None = None):
        """The accountant of ``spec`` (use :func:`accountant_for`, which picks the subclass).

        Args:
            spec: the claim; its event must be one the subclass :meth:`supports`.
            discretization: the PLD loss grid, for accountants that have one (None: chosen for the claim).
        """
        self.spec = spec

    @classmethod
    @abstractmethod
    def supports(cls, event: PrivacyEvent) -> bool:
        """Whether this accountant accounts ``event``.

        Args:
            event: what a mechanism releases.

        Returns:
            True when :meth:`curve`, :meth:`epsilon` and :meth:`delta` are exact (or pessimistic) for it.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"

    @property
    def relation(self) -> Relation:
        return self.spec.relation

    @abstractmethod
    def curve(self, direction: Direction = "symmetric", pessimistic: bool = True) -> TradeoffCurve:
        """The trade-off curve.

        Args:
            direction: ``"symmetric"``, ``"remove"`` or ``"add"`` (class docstring).
            pessimistic: False gives the optimistic curve, an upper bound on the true f (for the tightness band).

        Returns:
            The curve f.
        """

    @abstractmethod
    def _epsilon(self, deltas: np.ndarray) -> np.ndarray:
        """ε(δ) at every entry of ``deltas`` (checked to lie in (0, 1))."""

    @abstractmethod
    def _delta(self, epsilons: np.ndarray) -> np.ndarray:
        """δ(ε) at every entry of ``epsilons`` (checked to be >= 0)."""

    def f(self, alpha: npt.ArrayLike, direction: Direction = "symmetric") -> float | np.ndarray:
        """The trade-off function.

        Args:
            alpha: type-I errors α in [0, 1] (any shape).
            direction: the curve's direction (class docstring).

        Returns:
            ``f(α)``, a float for a scalar α.
        """
        return self.curve(direction)(alpha)

    def bound(self, ball: npt.ArrayLike, direction: Direction = "symmetric") -> float | np.ndarray:
        """Theorem 4: an attribute-inference adversary succeeds with probability at most ``1 - f(Ball)``.

        Args:
            ball: the prior's Ball values in [0, 1] (any shape).
            direction: the curve's direction (class docstring).

        Returns:
            ``1 - f(Ball)``, a float for a scalar Ball.
        """
        return theorem4_bound(self.curve(direction), ball)

    def tightness_band(
        self, alpha: npt.ArrayLike, direction: Direction = "symmetric"
    ) -> tuple[float | np.ndarray, float | np.ndarray]:
        """Where the true f lies.

        Args:
            alpha: type-I errors α in [0, 1].
            direction: the curve's direction (class docstring).

        Returns:
            ``(f_pessimistic(α), f_optimistic(α))``: the true f lies between them.
        """
        return self.curve(direction)(alpha), self.curve(direction, pessimistic=False)(alpha)

    def epsilon(self, delta: npt.ArrayLike) -> float | np.ndarray:
        """ε(δ), dp_accounting's ``get_epsilon_for_delta``.

        Args:
            delta: δ values in (0, 1) (any shape).

        Returns:
            The smallest ε with δ(ε) <= δ (+inf when no finite ε exists), a float for a scalar δ.

        Raises:
            InvalidParameterError: a δ outside (0, 1).
        """
        out = self._epsilon(_validate.deltas(delta))
        return float(out) if np.ndim(delta) == 0 else out

    def delta(self, epsilon: npt.ArrayLike) -> float | np.ndarray:
        """δ(ε), the maximum over both directions of the hockey-stick divergence.

        Args:
            epsilon: ε values >= 0 (any shape).

        Returns:
            δ(ε), a float for a scalar ε.

        Raises:
            InvalidParameterError: a negative ε.
        """
        out = self._delta(_validate.epsilons(epsilon))
        return float(out) if np.ndim(epsilon) == 0 else out

    def gdp_clt_mu(self) -> float | None:
        """APPROXIMATION for labelled comparisons only (docs/accounting.md).

        Returns:
            The μ of a Gaussian trade-off close to f, or None when there is none.
        """
        return None


class ClosedFormAccountant(MechanismAccountant):
    """No privacy (f ≡ 0) and perfect privacy of the private features (f(α) = 1 − α), in closed form."""

    name = "closed_form"

    @classmethod
    def supports(cls, event: PrivacyEvent) -> bool:
        """Whether ``event`` releases nothing private at all or only the public part Ψ of the features.

        Args:
            event: what a mechanism releases.

        Returns:
            True for a :class:`NonPrivateEvent` (f ≡ 0) or a :class:`PublicOnlyEvent` (f(α) = 1 − α).
        """
        return isinstance(event, NonPrivateEvent | PublicOnlyEvent)

    @property
    def _private(self) -> bool:
        return isinstance(self.spec.event, NonPrivateEvent)

    def curve(self, direction: Direction = "symmetric", pessimistic: bool = True) -> TradeoffCurve:
        """The closed-form curve, the same in every direction and exact (no pessimistic/optimistic gap).

        Args:
            direction: ``"symmetric"``, ``"remove"`` or ``"add"`` (checked, not used).
            pessimistic: not used: the curve is exact.

        Returns:
            :meth:`TradeoffCurve.no_privacy` for a non-private event, :meth:`TradeoffCurve.perfect_privacy` for a
            public-only one.

        Raises:
            InvalidParameterError: an unknown direction.
        """
        check_direction(direction)
        return TradeoffCurve.no_privacy() if self._private else TradeoffCurve.perfect_privacy()

    def _epsilon(self, deltas: np.ndarray) -> np.ndarray:
        return np.full(deltas.shape, math.inf) if self._private else np.zeros(deltas.shape)

    def _delta(self, epsilons: np.ndarray) -> np.ndarray:
        return np.ones(epsilons.shape) if self._private else np.zeros(epsilons.shape)


class PldAccountant(MechanismAccountant):
    """The composed Poisson-subsampled Gaussian mechanism by its pessimistic PLD (docs/accounting.md).

    ``discretization`` None means the PLD grid of :func:`~fdp_audit.accounting.pld.resolve_discretization` (1e-4
    in all usual settings)."""

    name = "pld"

    def __init__(self, spec: MechanismSpec, discretization: float | None = None):
        super().__init__(spec)
        # The loss grid: docs/accounting.md's 1e-4 unless the per-step loss is too small for it (pld module).
        self.discretization = resolve_discretization(spec.segments(), discretization)

    @classmethod
    def supports(cls, event: PrivacyEvent) -> bool:
        """Whether ``event`` is composed Poisson-subsampled Gaussian steps.

        Args:
            event: what a mechanism releases.

        Returns:
            True for a :class:`SubsampledGaussianEvent`.
        """
        return isinstance(event, SubsampledGaussianEvent)

    def curve(self, direction: Direction = "symmetric", pessimistic: bool = True) -> TradeoffCurve:
        """The trade-off curve of the composed PLD (docs/accounting.md; the directions are those of
        :mod:`fdp_audit.accounting.pld`).

        Args:
            direction: ``"symmetric"``, ``"remove"`` or ``"add"``.
            pessimistic: True for the connect-the-dots curve, a lower bound on the true f (what verdicts use); False
                for the optimistic one, an upper bound (for the tightness band).

        Returns:
            The curve f (cached per schedule, relation and grid).

        Raises:
            InvalidParameterError: an unknown direction, or a PLD too large to hold.
        """
        check_direction(direction)
        curves = schedule_curves(self.spec.segments(), self.relation, pessimistic, self.discretization)
        return curves[direction]

    def _epsilon(self, deltas: np.ndarray) -> np.ndarray:
        pld = composed_pld(self.spec.segments(), self.relation, True, self.discretization)
        return np.array([pld.get_epsilon_for_delta(float(x)) for x in deltas.ravel()]).reshape(deltas.shape)

    def _delta(self, epsilons: np.ndarray) -> np.ndarray:
        """Read off the symmetric curve (its conjugate, exact for the discrete pair and equal to dp_accounting's
        ``get_delta_for_epsilon`` to ~1e-12, which loops in Python over the PMF)."""
        flat = epsilons.ravel()
        order = np.argsort(flat)
        ascending = np.asarray(self.curve().delta(flat[order]), dtype=float)
        # δ is non-increasing in ε; enforce it against rounding with the conservative running maximum from the right.
        values = np.empty_like(flat)
        values[order] = np.maximum.accumulate(ascending[::-1])[::-1]
        return values.reshape(epsilons.shape)

    def gdp_clt_mu(self) -> float | None:
        """APPROXIMATION for labelled comparisons only (docs/accounting.md): ``μ ≈ p sqrt(T (e^{1/z²} - 1))``,
        composed over segments as ``sqrt(Σ μ_t²)``.

        Returns:
            The central-limit μ of the schedule.
        """
        return math.sqrt(sum(gdp_clt_mu_approximation(s.noise_multiplier, s.sample_rate, s.steps) ** 2
                             for s in self.spec.segments()))


# every accountant by name; accountant_for asks the last registered first
ACCOUNTANTS: Registry[type[MechanismAccountant]] = Registry("accountant", None, (
    Rule(lambda entry, _: isinstance(entry, type) and issubclass(entry, MechanismAccountant),
         "must be a MechanismAccountant subclass"),
))


def register_accountant(accountant: type[MechanismAccountant]) -> type[MechanismAccountant]:
    """Account a new kind of privacy event: ``accountant`` is asked before the ones registered earlier.

    Args:
        accountant: a :class:`MechanismAccountant` subclass with its own ``name``, implementing
            :meth:`MechanismAccountant.supports`.

    Returns:
        ``accountant`` (usable as a class decorator).

    Raises:
        ValueError: it is not a :class:`MechanismAccountant` subclass, or its name is another accountant's.
    """
    ACCOUNTANTS.register(accountant)
    accountant_for.cache_clear()  # a claim may now be accounted by the new entry
    return accountant


def unregister_accountant(name: str) -> None:
    """Remove the accountant ``name`` (one registered for a test, or a plugin's replaced); the claims it accounted
    are accounted again by the others.

    Args:
        name: the accountant's name; an unknown name is ignored.
    """
    ACCOUNTANTS.unregister(name)
    accountant_for.cache_clear()


@functools.lru_cache(maxsize=64)
def accountant_for(spec: MechanismSpec, discretization: float | None = None) -> MechanismAccountant:
    """The accountant of a claimed mechanism, chosen by what it releases (the first registered accountant that
    supports ``spec.event``). One per process for each claim: a claim re-derived from what a results file states
    (the gate, the report) gets the accountant its audit used.

    Args:
        spec: the claim.
        discretization: the PLD loss grid of a Gaussian claim; None chooses it
            (:func:`~fdp_audit.accounting.pld.resolve_discretization`).

    Returns:
        The accountant.

    Raises:
        InvalidParameterError: no registered accountant supports the event.
    """
    for accountant in reversed(list(ACCOUNTANTS.values())):
        if accountant.supports(spec.event):
            return accountant(spec, discretization)
    raise _validate.InvalidParameterError(f"no accountant supports {spec.event!r}", "event")


register_accountant(ClosedFormAccountant)
register_accountant(PldAccountant)
