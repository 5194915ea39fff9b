"""Attacks on models trained with (feature) differential privacy (docs/games.md). Adding an attack means adding
one module here and one :func:`register_attack` line below (docs/extending.md)."""

from __future__ import annotations

from dataclasses import fields

from attacks.base import ATTRIBUTE_KINDS, FINAL_MODEL, THREAT_MODELS, Attack, AttackOutput, Knowledge, View
from attacks.gradient import GradientNormAttack
from attacks.gradient_matching import GradientMatchingReconstruction
from attacks.informed import InformedGradientAttack
from attacks.input_canary import CanaryLogitAttack, NoiseScaleAttack
from attacks.iterates import IteratesAttack, PublicAlignedIteratesAttack
from attacks.iterates_matching import IteratesGradientMatching
from attacks.likelihood import LikelihoodAttack
from attacks.prior import PriorAttack
from attacks.reconstruction import ClosedFormReconstruction
from attacks.shadow import ShadowModelAttack
from fdp_audit.registry import Has, Registry, Rule

_KNOWLEDGE = frozenset(f.name for f in fields(Knowledge))

ATTACKS: Registry[type[Attack]] = Registry("attack", "audit.attacks", (
    Has("title", str),
    Has("threat_model", str, choices=THREAT_MODELS),
    Rule(lambda attack, _: bool(attack.supports) and set(attack.supports) <= set(ATTRIBUTE_KINDS),
         f"supports must name attribute kinds among {', '.join(ATTRIBUTE_KINDS)}"),
    Rule(lambda attack, _: set(attack.needs) <= _KNOWLEDGE, "needs must name fields of attacks.Knowledge"),
))


def register_attack(cls: type[Attack]) -> type[Attack]:
    """Make an attack configurable by its ``name`` in ``audit.attacks``; usable as a class decorator.

    Args:
        cls: an :class:`~attacks.base.Attack` subclass with a ``title``, a ``threat_model`` and the attribute
            kinds it ``supports``.

    Returns:
        ``cls`` itself.

    Raises:
        ValueError: the name is taken, or its metadata is missing or malformed.
    """
    return ATTACKS.register(cls)


def unregister_attack(name: str) -> None:
    """Remove a registered attack (an attack defined for one test).

    Args:
        name: the attack's ``name``; an unknown name is ignored.
    """
    ATTACKS.unregister(name)


def checkpoint_attacks() -> tuple[str, ...]:
    """The attacks the checkpoint audit runs on a checkpoint's real records, in registration order: every
    categorical attack under the prior or a final-model threat model that needs no canary and nothing of
    :class:`Knowledge` beyond the target, and accepts one target per trial (a record each).

    Returns:
        Their names; the prior's comes first.
    """
    return tuple(name for name, attack in ATTACKS.items()
                 if "categorical" in attack.supports and attack.threat_model in FINAL_MODEL | {"prior"}
                 and not (attack.needs or attack.needs_gradient_canary or attack.needs_input_canary)
                 and attack.per_trial)


register_attack(PriorAttack)
register_attack(LikelihoodAttack)
register_attack(ShadowModelAttack)
register_attack(GradientNormAttack)
register_attack(InformedGradientAttack)
register_attack(ClosedFormReconstruction)
register_attack(GradientMatchingReconstruction)
register_attack(IteratesAttack)
register_attack(PublicAlignedIteratesAttack)
register_attack(IteratesGradientMatching)
register_attack(CanaryLogitAttack)
register_attack(NoiseScaleAttack)

__all__ = ["ATTACKS", "Attack", "AttackOutput", "Knowledge", "View", "checkpoint_attacks", "register_attack",
           "unregister_attack"]
