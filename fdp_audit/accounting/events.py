"""What a mechanism releases, described as data (docs/accounting.md, docs/design.md): the privacy events that the
accountants of :mod:`fdp_audit.accounting.mechanism` account, in the spirit of dp_accounting's ``DpEvent``. An
event says what the mechanism *is* (how it touches the private features); which accountant applies is decided by
the accountant (its ``supports(event)``), never by a name.

* :class:`NonPrivateEvent` -- the private features are released unprotected: f ≡ 0.
* :class:`PublicOnlyEvent` -- only ``Ψ(x)`` is read: (0, 0)-FDP, ``f(α) = 1 − α``.
* :class:`SubsampledGaussianEvent` -- a composition of Poisson-subsampled Gaussian steps, a schedule of
  :class:`Segment` ``(z_t, p_t, count)`` (FDP paper Theorem 5: Algorithm 1 and DP-SGD alike).

This module loads no accounting library, so that the mechanism registry and the configuration can say what a
mechanism releases without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from fdp_audit.accounting import parameters


class Relation(StrEnum):
    """The neighbouring relation of a claim, spelled as results files store it (``"add_remove"``, ``"replace"``).

    A member is a ``str``: it compares equal to its value and is written to JSON as it.
    """

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"

    @property
    def words(self) -> str:
        """The relation for a person to read: ``add/remove`` or ``replace-one``."""
        return "add/remove" if self is Relation.ADD_REMOVE else "replace-one"


RELATIONS: tuple[Relation, ...] = tuple(Relation)


def check_relation(relation: str) -> Relation:
    """``relation`` if it is a neighbouring relation the accountants know, as a :class:`Relation`.

    Args:
        relation: ``"add_remove"`` or ``"replace"``.

    Returns:
        The relation.

    Raises:
        InvalidParameterError: any other value.
    """
    if relation not in RELATIONS:
        raise parameters.InvalidParameterError(f"must be one of {', '.join(RELATIONS)}, got {relation!r}", "relation")
    return Relation(relation)


# The one place the other spelling is read: before code and files spelled the relation one way, one-run results
# and manifests, `fdp-audit account`/`calibrate --relation` and `fdp_audit.account(relation=...)` said "add-remove".
_OLD_SPELLINGS = {"add-remove": Relation.ADD_REMOVE}


def relation_named(name: object) -> Relation:
    """The neighbouring relation a stored file or a user's input names (docs/files.md): the relation's own spelling,
    or ``"add-remove"``, which older results files, one-run manifests and command lines use for ``"add_remove"``.

    Args:
        name: ``"add_remove"``, ``"add-remove"`` or ``"replace"``.

    Returns:
        The relation.

    Raises:
        InvalidParameterError: any other value.
    """
    if isinstance(name, str) and name in _OLD_SPELLINGS:
        return _OLD_SPELLINGS[name]
    if not isinstance(name, str) or name not in RELATIONS:
        raise parameters.InvalidParameterError(f"must be one of {', '.join(RELATIONS)}, got {name!r}", "relation")
    return Relation(name)


@dataclass(frozen=True)
class Segment:
    """``steps`` steps of the Gaussian mechanism with noise multiplier ``noise_multiplier`` (noise std
    divided by the clip norm) on a Poisson sample of rate ``sample_rate``."""

    noise_multiplier: float
    sample_rate: float
    steps: int

    def __post_init__(self) -> None:
        z = parameters.noise_multiplier(self.noise_multiplier)
        object.__setattr__(self, "noise_multiplier", z)
        object.__setattr__(self, "sample_rate", parameters.rate(self.sample_rate, "sample_rate"))
        object.__setattr__(self, "steps", parameters.step_count(self.steps, "steps"))


Schedule = tuple[Segment, ...]


class PrivacyEvent:
    """What a mechanism releases about the private features. Subclasses are frozen dataclasses (hashable: an
    event keys the accountants' caches).

    ``needs_noise_multiplier``: the event is built from a noise multiplier, so a claim of it must state one
    (or a target ε to calibrate it to)."""

    needs_noise_multiplier: ClassVar[bool] = False

    @classmethod
    def claimed(cls, noise_multiplier: float | None, sample_rate: float | None, steps: int) -> PrivacyEvent:
        """The event a mechanism of this kind releases under the claimed parameters.

        Args:
            noise_multiplier: the claimed z (noise std / clip norm), for events that need one.
            sample_rate: the claimed Poisson sampling rate p.
            steps: the claimed number of private steps T.

        Returns:
            The event.
        """
        return cls()


@dataclass(frozen=True)
class NonPrivateEvent(PrivacyEvent):
    """The private features are released without protection: f ≡ 0 (ε = ∞ for every δ < 1)."""


@dataclass(frozen=True)
class PublicOnlyEvent(PrivacyEvent):
    """Only the public part ``Ψ(x)`` is read (training on ``ℓ_pub∘Ψ``): (0, 0)-FDP, ``f(α) = 1 − α``."""


@dataclass(frozen=True)
class SubsampledGaussianEvent(PrivacyEvent):
    """The composition of Poisson-subsampled Gaussian steps given by ``schedule`` (FDP paper Theorem 5): its f is
    ``T(N(0,1)^T, ((1-p) N(0,1) + p N(1/z, 1))^T)`` for a constant schedule. Public-only steps cost nothing and
    are not part of the schedule."""

    schedule: Schedule
    needs_noise_multiplier: ClassVar[bool] = True

    def __post_init__(self) -> None:
        schedule = tuple(self.schedule)
        if not schedule or not all(isinstance(s, Segment) for s in schedule):
            raise parameters.InvalidParameterError("must be a non-empty sequence of Segment", "schedule")
        object.__setattr__(self, "schedule", schedule)

    @classmethod
    def claimed(cls, noise_multiplier: float | None, sample_rate: float | None,
                steps: int) -> SubsampledGaussianEvent:
        """``steps`` steps at noise multiplier ``noise_multiplier`` and sampling rate ``sample_rate``.

        Args:
            noise_multiplier: z > 0.
            sample_rate: p in (0, 1].
            steps: T >= 1.

        Returns:
            The event of a constant schedule.

        Raises:
            InvalidParameterError: a parameter is missing or out of range.
        """
        if noise_multiplier is None or sample_rate is None:
            raise parameters.InvalidParameterError("a subsampled Gaussian mechanism needs noise_multiplier, "
                                                  "sample_rate and steps", "noise_multiplier")
        return cls((Segment(noise_multiplier, sample_rate, steps),))

    @property
    def constant(self) -> Segment | None:
        """The single segment of a constant schedule, None for a schedule of several."""
        return self.schedule[0] if len(self.schedule) == 1 else None

    @property
    def total_steps(self) -> int:
        """The number of private steps T."""
        return sum(s.steps for s in self.schedule)

    def with_noise_scaled(self, factor: float) -> SubsampledGaussianEvent:
        """The same schedule with every noise multiplier multiplied by ``factor`` (a weaker claim for factor < 1).

        Args:
            factor: the multiplier of every segment's z, > 0.

        Returns:
            The scaled event.
        """
        return SubsampledGaussianEvent(tuple(Segment(s.noise_multiplier * factor, s.sample_rate, s.steps)
                                             for s in self.schedule))
