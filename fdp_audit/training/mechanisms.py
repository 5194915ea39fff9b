"""The mechanism registry (docs/training.md): one place says how each mechanism computes a step and how it
is accounted. Known-faulty mechanisms exist to prove the audit catches them; each is marked ``faulty``
and the config refuses them unless ``faulty: true`` is set explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Recipe:
    """What one training step does.

    private_loss: gradient of nothing, the full loss ℓ (DP-SGD), or ℓ_priv = ℓ − ℓ_pub∘Ψ (Algorithm 1).
    public_batch: no public gradient, an independent uniform batch (stream B), or the private Poisson
      batch itself (Proposition 3: reveals which records were sampled).
    public_reads_protected: the public loss is evaluated on the full record instead of Ψ(x).
    clip, noise_factor, rate_factor: what is really done, against what is accounted.
    """

    private_loss: Literal["none", "full", "decomposed"]
    public_batch: Literal["none", "independent", "shared"]
    public_reads_protected: bool = False
    clip: bool = True
    noise_factor: float = 1.0
    rate_factor: float = 1.0
    private: bool = True


@dataclass(frozen=True)
class MechanismInfo:
    name: str
    recipe: Recipe
    description: str
    faulty: bool = False


_ENTRIES = (
    MechanismInfo("nonprivate", Recipe("full", "none", clip=False, private=False),
                  "SGD on ℓ without clipping or noise: no privacy."),
    MechanismInfo("public_only", Recipe("none", "independent", private=False),
                  "SGD on ℓ_pub∘Ψ only: (0,0)-FDP."),
    MechanismInfo("dp_sgd", Recipe("full", "none"),
                  "DP-SGD: Poisson sampling, per-example clipping of ∇ℓ, Gaussian noise."),
    MechanismInfo("fdp_sgd", Recipe("decomposed", "independent"),
                  "Algorithm 1: clipped, noised ℓ_priv on a Poisson batch plus ℓ_pub∘Ψ on an independent batch."),
    MechanismInfo("fdp_dpsgd", Recipe("full", "none"),
                  "Public pre-training on ℓ_pub∘Ψ, then DP-SGD (the paper's FDP (DP-SGD))."),
    MechanismInfo("corrdp_sgd", Recipe("full", "none"),
                  "CorrDP-SGD (docs/corrdp.md); trained by fdp_audit.corrdp."),
    MechanismInfo("fdp_sgd_shared_batch", Recipe("decomposed", "shared"),
                  "FAULTY (Proposition 3): the public gradient uses the private Poisson batch, revealing "
                  "which records were sampled, but is accounted with amplification.", faulty=True),
    MechanismInfo("dp_sgd_half_noise", Recipe("full", "none", noise_factor=0.5),
                  "FAULTY: adds noise with multiplier z/2 but reports z.", faulty=True),
    MechanismInfo("dp_sgd_no_clip", Recipe("full", "none", clip=False),
                  "FAULTY: skips per-example clipping.", faulty=True),
    MechanismInfo("fdp_sgd_leaky_public", Recipe("decomposed", "independent", public_reads_protected=True),
                  "FAULTY: the public loss reads the protected columns (it is the full loss ℓ).", faulty=True),
    MechanismInfo("dp_sgd_wrong_rate", Recipe("full", "none", rate_factor=4.0),
                  "FAULTY: samples at rate 4p but is accounted at p.", faulty=True),
)

MECHANISMS: dict[str, MechanismInfo] = {entry.name: entry for entry in _ENTRIES}
FAULTY_MECHANISMS = frozenset(name for name, entry in MECHANISMS.items() if entry.faulty)
