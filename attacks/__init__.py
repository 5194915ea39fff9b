"""Attacks on models trained with (feature) differential privacy (docs/games.md). Adding an attack means adding
one module here and one line to :data:`ATTACKS`."""

from attacks.base import Attack, AttackOutput, Knowledge, View
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

ATTACKS: dict[str, type[Attack]] = {
    PriorAttack.name: PriorAttack,
    LikelihoodAttack.name: LikelihoodAttack,
    ShadowModelAttack.name: ShadowModelAttack,
    GradientNormAttack.name: GradientNormAttack,
    InformedGradientAttack.name: InformedGradientAttack,
    ClosedFormReconstruction.name: ClosedFormReconstruction,
    GradientMatchingReconstruction.name: GradientMatchingReconstruction,
    IteratesAttack.name: IteratesAttack,
    PublicAlignedIteratesAttack.name: PublicAlignedIteratesAttack,
    IteratesGradientMatching.name: IteratesGradientMatching,
    CanaryLogitAttack.name: CanaryLogitAttack,
    NoiseScaleAttack.name: NoiseScaleAttack,
}

__all__ = ["ATTACKS", "Attack", "AttackOutput", "Knowledge", "View"]
