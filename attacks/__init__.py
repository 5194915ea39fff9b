"""Attacks on models trained with (feature) differential privacy (SPEC 3). Adding an attack means adding
one module here and one line to :data:`ATTACKS`."""

from attacks.base import Attack, AttackOutput, Knowledge, View
from attacks.gradient import GradientNormAttack
from attacks.iterates import IteratesAttack, PublicAlignedIteratesAttack
from attacks.likelihood import LikelihoodAttack
from attacks.prior import PriorAttack

ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls
    for cls in (PriorAttack, LikelihoodAttack, GradientNormAttack, IteratesAttack, PublicAlignedIteratesAttack)
}

__all__ = ["ATTACKS", "Attack", "AttackOutput", "Knowledge", "View"]
