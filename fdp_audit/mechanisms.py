"""The mechanism registry (docs/training.md, docs/extending.md): one table says, for every mechanism, what a
training step does (its :class:`Recipe`), what it releases about the private features (a privacy event, from
which the accountant is chosen: :func:`fdp_audit.accounting.mechanism.accountant_for`), which command trains it
and whether it is a known fault. The config's allowed names, the claim, the trainer and the audit all read this
table; :func:`register_mechanism` adds a row. It is data only, below the configuration and the training layer.

Known-faulty mechanisms exist to prove the audit catches them: each claims the guarantee of a correct
mechanism (``claims``), is accounted exactly as that one, and the config refuses it unless ``faulty: true``
is set explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fdp_audit.accounting.events import NonPrivateEvent, PrivacyEvent, PublicOnlyEvent, SubsampledGaussianEvent
from fdp_audit.registry import Has, Registry, Rule

ENGINE = "fdp-audit train"


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
class Mechanism:
    """One row of the registry.

    releases: the kind of privacy event it releases under its claimed (z, p, T): the private features
      unprotected (:class:`NonPrivateEvent`), only Ψ(x) (:class:`PublicOnlyEvent`), or composed
      Poisson-subsampled Gaussian steps (:class:`SubsampledGaussianEvent`, FDP paper Theorem 5).
    claims: for a known-faulty mechanism, the correct mechanism whose guarantee it claims; None otherwise.
    trained_by: the command that trains it; :data:`ENGINE` is :mod:`fdp_audit.training.engine`.
    needs_public_pretraining: the config must give ``public_pretrain_steps > 0``.
    """

    name: str
    recipe: Recipe
    description: str
    releases: type[PrivacyEvent] = SubsampledGaussianEvent
    claims: str | None = None
    trained_by: str = ENGINE
    needs_public_pretraining: bool = False

    @property
    def faulty(self) -> bool:
        return self.claims is not None

    @property
    def claimed_as(self) -> str:
        """The correct mechanism whose guarantee this one claims (itself unless known-faulty)."""
        return self.claims or self.name

    def claimed_event(self, noise_multiplier: float | None, sample_rate: float | None, steps: int) -> PrivacyEvent:
        """What the mechanism releases under the claimed parameters (a known-faulty one: what it claims to).

        Args:
            noise_multiplier: the claimed z (used by Gaussian mechanisms only).
            sample_rate: the claimed Poisson sampling rate p.
            steps: the claimed number of private steps T.

        Returns:
            The privacy event its accountant is chosen by.
        """
        return self.releases.claimed(noise_multiplier, sample_rate, steps)


MECHANISMS: Registry[Mechanism] = Registry("mechanism", "mechanism.name", (
    Has("recipe", Recipe),
    Has("description", str),
    Rule(lambda entry, others: isinstance(entry.releases, type) and issubclass(entry.releases, PrivacyEvent),
         "releases must be a PrivacyEvent subclass"),
    Rule(lambda entry, others: entry.claims is None or (
        entry.claims in others and not others[entry.claims].faulty
        and others[entry.claims].releases is entry.releases),
         "must claim a registered correct mechanism accounted alike"),
))


def register_mechanism(mechanism: Mechanism) -> Mechanism:
    """Make a mechanism nameable in ``mechanism.name``.

    Args:
        mechanism: the entry; a known-faulty one must claim a registered correct mechanism accounted alike.

    Returns:
        ``mechanism`` itself.

    Raises:
        ValueError: the name is taken or the entry is malformed.
    """
    return MECHANISMS.register(mechanism)


def faulty_mechanisms() -> frozenset[str]:
    """The known-faulty mechanisms registered so far.

    Returns:
        Their names.
    """
    return frozenset(name for name, entry in MECHANISMS.items() if entry.faulty)


for _entry in (
    Mechanism("nonprivate", Recipe("full", "none", clip=False, private=False),
              "SGD on ℓ without clipping or noise: no privacy.", releases=NonPrivateEvent),
    Mechanism("public_only", Recipe("none", "independent", private=False),
              "SGD on ℓ_pub∘Ψ only: (0,0)-FDP.", releases=PublicOnlyEvent),
    Mechanism("dp_sgd", Recipe("full", "none"),
              "DP-SGD: Poisson sampling, per-example clipping of ∇ℓ, Gaussian noise."),
    Mechanism("fdp_sgd", Recipe("decomposed", "independent"),
              "Algorithm 1: clipped, noised ℓ_priv on a Poisson batch plus ℓ_pub∘Ψ on an independent batch."),
    Mechanism("fdp_dpsgd", Recipe("full", "none"),
              "Public pre-training on ℓ_pub∘Ψ, then DP-SGD (the paper's FDP (DP-SGD)).",
              needs_public_pretraining=True),
    # A Gaussian mechanism for a sensitive-feature neighbour: the caller passes the effective noise multiplier
    # σ / Δ_2 (sample rate 1 for full-batch GD); insensitive-feature neighbours are accounted by fdp_audit.corrdp.
    Mechanism("corrdp_sgd", Recipe("full", "none"),
              "CorrDP-SGD (docs/corrdp.md); trained by fdp_audit.corrdp.", trained_by="fdp-audit corrdp train"),
    Mechanism("fdp_sgd_shared_batch", Recipe("decomposed", "shared"),
              "FAULTY (Proposition 3): the public gradient uses the private Poisson batch, revealing "
              "which records were sampled, but is accounted with amplification.", claims="fdp_sgd"),
    Mechanism("dp_sgd_half_noise", Recipe("full", "none", noise_factor=0.5),
              "FAULTY: adds noise with multiplier z/2 but reports z.", claims="dp_sgd"),
    Mechanism("dp_sgd_no_clip", Recipe("full", "none", clip=False),
              "FAULTY: skips per-example clipping.", claims="dp_sgd"),
    Mechanism("fdp_sgd_leaky_public", Recipe("decomposed", "independent", public_reads_protected=True),
              "FAULTY: the public loss reads the protected columns (it is the full loss ℓ).", claims="fdp_sgd"),
    Mechanism("dp_sgd_wrong_rate", Recipe("full", "none", rate_factor=4.0),
              "FAULTY: samples at rate 4p but is accounted at p.", claims="dp_sgd"),
):
    register_mechanism(_entry)
