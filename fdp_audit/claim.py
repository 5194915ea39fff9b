"""The privacy claim under audit (docs/design.md): built once from a configuration, or from the configuration a
results file states, and passed down to the training, the games, the gate and the report.

A claim is the configured mechanism's guarantee: the mechanism it claims to be (a known-faulty mechanism claims
the correct one it imitates), what that mechanism releases under the claimed z, p and T (a privacy event,
:mod:`fdp_audit.accounting.events`), its δ, and the accountant of each neighbouring relation, chosen by the event
(:func:`fdp_audit.accounting.mechanism.accountant_for`) and built at most once per claim.

A one-run audit tests the same claim: :meth:`Claim.one_run_curve` is what it reads of it under one relation (the
curve's inverse power, ε at δ, and the family of weaker claims its empirical ε is read in, docs/one_run.md).

The claimed z is the configured ``noise_multiplier``, or the one calibrated to ``target_epsilon`` at ``delta``
(docs/files.md, ``calibrate``); a calibration costs seconds of accounting, so each process keeps the ones it
computed (:func:`noise_multiplier`), and a cluster's worker adopts the driver's (:func:`adopt_noise_multiplier`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fdp_audit.accounting.calibration import calibrate_noise_multiplier
from fdp_audit.accounting.events import Relation, relation_named
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec, accountant_for
from fdp_audit.accounting.tradeoff import TradeoffCurve
from fdp_audit.config import Config, MechanismConfig
from fdp_audit.mechanisms import MECHANISMS, Mechanism

if TYPE_CHECKING:
    from fdp_audit.auditing.one_run.analysis import Family, InversePower
    from fdp_audit.auditing.one_run.order_statistics import ErrorProfile

MIN_FAMILY_NOISE = 0.25  # a one-run family search stops at z = 0.25 (PLDs of smaller z are slow and ε there is huge)
# The loss grid of a one-run family's members: a coarser pessimistic PLD is still a dominating pair, so it states a
# weaker claim than the member's exact curve, and rejecting it rejects the member (docs/one_run.md).
FAMILY_DISCRETIZATION = 1e-3

# per process, by (ε, δ, p, T): a calibration costs seconds of accounting and an audit asks for it many times
_CALIBRATED: dict[tuple[float, float, float, int], float] = {}

def _calibration_key(mech: MechanismConfig) -> tuple[float, float, float, int]:
    return (mech.target_epsilon, mech.delta, mech.sample_rate, mech.steps)


def noise_multiplier(mech: MechanismConfig) -> float:
    """The claimed noise multiplier of a mechanism section.

    Args:
        mech: the configuration's ``mechanism`` section.

    Returns:
        The configured z, the z calibrated to ``target_epsilon`` at ``delta`` (docs/files.md ``calibrate``), or 0
        when neither is given (a mechanism without noise).
    """
    if mech.target_epsilon is not None:
        key = _calibration_key(mech)
        if key not in _CALIBRATED:
            _CALIBRATED[key] = calibrate_noise_multiplier(*key)
        return _CALIBRATED[key]
    if mech.noise_multiplier is None:
        return 0.0
    return mech.noise_multiplier


def adopt_noise_multiplier(mech: MechanismConfig, z: float) -> None:
    """Take ``z`` as this process's calibration of ``mech`` (nothing to take without a ``target_epsilon``): a
    worker given the driver's z skips seconds of accounting that would give it the same number, as it runs the
    driver's code (:mod:`fdp_audit.execution.dask` checks that before a chunk runs).

    Args:
        mech: the configuration's ``mechanism`` section.
        z: the driver's calibrated noise multiplier.
    """
    if mech.target_epsilon is not None:
        _CALIBRATED[_calibration_key(mech)] = z


@dataclass(frozen=True, eq=False)
class Claim:
    """The privacy claim of a configured mechanism, with its accountants (built on first use, once).

    Attributes:
        mechanism: the configuration's ``mechanism`` section the claim is read from.
        noise_multiplier: the claimed z (configured, or calibrated to the target ε; 0 without noise).
        user_code: how reports name the user's own training or third-party function audited against the claim,
            or None for a built-in mechanism.
    """

    mechanism: MechanismConfig
    noise_multiplier: float
    user_code: str | None = None

    @classmethod
    def from_config(cls, config: Config) -> Claim:
        """The claim a configuration states.

        Args:
            config: a validated configuration (with ``mechanism.integration``, the one whose unstated claim was
                read from the user's engine).

        Returns:
            The claim; calibrating a target ε is the only accounting done here.
        """
        mech = config.mechanism
        return cls.of(mech, mech.third_party or (None if mech.training is None
                                                 else f"{mech.training} on {config.model.factory}"))

    @classmethod
    def stated(cls, mechanism: str, noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> Claim:
        """The claim of a registered mechanism at stated parameters (a checkpoint's, a one-run comparison's, a
        simulation's), without the rest of a configuration.

        Args:
            mechanism: the mechanism's registered name.
            noise_multiplier: z.
            sample_rate: p.
            steps: T.
            delta: the δ at which ε is read.

        Returns:
            The claim.

        Raises:
            BadInputError: a parameter is out of the configuration's range, naming its ``mechanism.*`` field.
        """
        return cls.of(MechanismConfig(name=mechanism, noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                                      steps=steps, delta=delta))

    @classmethod
    def of(cls, mech: MechanismConfig, user_code: str | None = None) -> Claim:
        """The claim of a configuration's ``mechanism`` section.

        Args:
            mech: the section.
            user_code: how reports name the user's code audited against the claim, if any.

        Returns:
            The claim.
        """
        return cls(mech, noise_multiplier(mech), user_code)

    @property
    def row(self) -> Mechanism:
        """The configured mechanism's row in the registry."""
        return MECHANISMS[self.mechanism.name]

    @property
    def claimed_as(self) -> str:
        """The correct mechanism whose guarantee is claimed (the configured one unless known-faulty)."""
        return self.row.claimed_as

    @property
    def delta(self) -> float:
        return self.mechanism.delta

    @property
    def sample_rate(self) -> float:
        return self.mechanism.sample_rate

    @property
    def steps(self) -> int:
        return self.mechanism.steps

    def spec(self, relation: str = Relation.ADD_REMOVE) -> MechanismSpec:
        """The claimed mechanism as the accountants take it: the claimed mechanism's name, the event it releases
        under the claimed (z, p, T), and the neighbouring relation.

        Args:
            relation: a :class:`~fdp_audit.accounting.events.Relation` or its name, as comparisons store it.

        Returns:
            The spec.
        """
        event = self.row.claimed_event(self.noise_multiplier, self.sample_rate, self.steps)
        return MechanismSpec(self.claimed_as, event, relation_named(relation), self.mechanism.public_pretrain_steps)

    @functools.cached_property
    def add_remove(self) -> MechanismAccountant:
        """The accountant under add/remove neighbours.

        Returns:
            The accountant of :meth:`spec` for add/remove (built on first use, then kept).
        """
        return accountant_for(self.spec(Relation.ADD_REMOVE))

    @functools.cached_property
    def replace_one(self) -> MechanismAccountant:
        """The accountant under replace-one neighbours.

        Returns:
            The accountant of :meth:`spec` for replace-one (built on first use, then kept).
        """
        return accountant_for(self.spec(Relation.REPLACE))

    def accountant(self, relation: str = Relation.ADD_REMOVE) -> MechanismAccountant:
        """The accountant of a neighbouring relation.

        Args:
            relation: a :class:`~fdp_audit.accounting.events.Relation` or its name, as comparisons store it.

        Returns:
            :attr:`add_remove` or :attr:`replace_one`.
        """
        return self.replace_one if relation_named(relation) == Relation.REPLACE else self.add_remove

    def one_run_curve(self, relation: Relation | str) -> OneRunCurve:
        """The claim as a one-run audit tests it under one neighbouring relation (docs/one_run.md).

        Args:
            relation: ``Relation.ADD_REMOVE`` (the inclusion game) or ``Relation.REPLACE`` (the value game), or a
                spelling :func:`~fdp_audit.accounting.events.relation_named` reads.

        Returns:
            The curve, the same object for the same claimed numbers (its guess count is designed once).

        Raises:
            ValueError: the claimed mechanism does not release Poisson-subsampled Gaussian steps.
        """
        spec = self.spec(relation)
        if not spec.is_gaussian or spec.noise_multiplier is None or spec.sample_rate is None:
            raise ValueError(f"a one-run audit tests a subsampled Gaussian claim, not {spec.event!r}")
        return _one_run_curve(spec.name, spec.noise_multiplier, spec.sample_rate, spec.steps, self.delta,
                              spec.relation)

    @functools.cached_property
    def epsilon(self) -> float:
        """ε at the claim's δ under add/remove neighbours (∞ for a non-private mechanism).

        Returns:
            ε(δ) of :attr:`add_remove`, computed once.
        """
        return float(self.add_remove.epsilon(self.delta))

    def section(self) -> dict[str, Any]:
        """The ``mechanism`` section of ``results.json`` (docs/files.md): the claimed mechanism's name,
        description, z, p, T, C, δ and ε(δ); the user's code is described as the claim of the mechanism it names.

        Returns:
            The section (ε may be infinite; results files write it as null).
        """
        mech, row = self.mechanism, self.row
        if self.user_code is not None:
            return {"name": f"third-party {self.user_code}", "faulty": False,
                    "description": f"A user-supplied training function, audited against the claim of {mech.name}: "
                                   f"{row.description}", "claimed_as": mech.name,
                    "noise_multiplier": self.noise_multiplier, "sample_rate": mech.sample_rate, "steps": mech.steps,
                    "clip_norm": mech.clip_norm, "delta": mech.delta, "epsilon": self.epsilon}
        return {"name": mech.name, "faulty": row.faulty, "description": row.description,
                "noise_multiplier": self.noise_multiplier, "sample_rate": mech.sample_rate, "steps": mech.steps,
                "clip_norm": mech.clip_norm, "delta": mech.delta, "public_batch_size": mech.public_batch_size,
                "private_weight": mech.private_weight, "public_pretrain_steps": mech.public_pretrain_steps,
                "public_loss": mech.public_loss, "epsilon": self.epsilon}



@dataclass(frozen=True)
class OneRunCurve:
    """What a one-run audit tests of a claim under one neighbouring relation (:meth:`Claim.one_run_curve`): the
    claimed curve's f̄⁻¹, ε at δ, and the family the empirical ε is read in.

    Attributes:
        description: the claim in words, with its relation.
        spec: the claimed mechanism under the relation.
        inverse_power: f̄⁻¹ of the claimed curve.
        epsilon: ε at ``delta`` under the relation.
        delta: the claim's δ.
        family: the claimed mechanism with the same p and T and a smaller noise multiplier, indexed by ``1/z`` so
            that larger means weaker.
    """

    description: str
    spec: MechanismSpec
    inverse_power: InversePower
    epsilon: float
    delta: float
    family: Family


@functools.lru_cache(maxsize=256)
def _gaussian_accountant(name: str, noise_multiplier: float, sample_rate: float, steps: int, relation: Relation,
                         discretization: float | None = None) -> MechanismAccountant:
    return accountant_for(MechanismSpec.gaussian(name, noise_multiplier, sample_rate, steps, relation),
                          discretization)


@functools.lru_cache(maxsize=256)
def _member_inverse(name: str, sample_rate: float, steps: int, relation: Relation, inverse_z: float) -> InversePower:
    from fdp_audit.auditing.one_run.analysis import curve_inverse_power

    if inverse_z == 0.0:  # infinite noise: perfect privacy, f̄(α) = α
        return lambda y: y
    accountant = _gaussian_accountant(name, 1.0 / inverse_z, sample_rate, steps, relation, FAMILY_DISCRETIZATION)
    return curve_inverse_power(accountant.curve())


@functools.lru_cache(maxsize=256)
def _member_profile(name: str, sample_rate: float, steps: int, relation: Relation, inverse_z: float) -> ErrorProfile:
    from fdp_audit.auditing.one_run.order_statistics import error_profile

    if inverse_z == 0.0:
        return error_profile(TradeoffCurve.perfect_privacy())
    accountant = _gaussian_accountant(name, 1.0 / inverse_z, sample_rate, steps, relation, FAMILY_DISCRETIZATION)
    return error_profile(accountant.curve())


@functools.lru_cache(maxsize=64)
def _one_run_curve(name: str, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                   relation: Relation) -> OneRunCurve:
    from fdp_audit.auditing.one_run.analysis import Family, curve_inverse_power

    accountant = _gaussian_accountant(name, noise_multiplier, sample_rate, steps, relation)
    words = relation.words
    family = Family(f"{name} with the same p and T and a smaller noise multiplier ({words})",
                    lambda t: _member_inverse(name, sample_rate, steps, relation, t),
                    lambda t: float(_gaussian_accountant(name, 1.0 / t, sample_rate, steps, relation).epsilon(delta)),
                    start=1.0 / noise_multiplier, limit=MIN_FAMILY_NOISE ** -1,
                    error_profile=lambda t: _member_profile(name, sample_rate, steps, relation, t))
    return OneRunCurve(f"{name} z={noise_multiplier:.4g} p={sample_rate:g} T={steps} ({words})", accountant.spec,
                       curve_inverse_power(accountant.curve()), float(accountant.epsilon(delta)), delta, family)
