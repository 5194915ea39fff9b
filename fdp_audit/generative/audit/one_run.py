"""The audit of a generative model's training (docs/generative.md): the image game with gradient canaries, played
in one training run of the denoiser through the same training step as every experiment.

The game. M canaries are images whose K candidate residuals share one public image, so Ψ is fixed and the secret
is which residual the record carries (a uniform prior: Ball = 1/K). A gradient canary stands for such a record:
its private gradient is ``a·u_v`` on a coordinate of its own (``u_v = 2v/(K-1) - 1`` for candidate v, as in
:func:`fdp_audit.auditing.one_run.canaries.canary_block`), its public gradient (the gradient of the loss on the public
completion, the same for every candidate) is ``a`` on a second coordinate, and M further coordinates receive only
the mechanism's noise. The canaries are Poisson-sampled with the real images, clipped, noised and normalised by
:func:`fdp_audit.generative.training.trainer.train_diffusion`, and the per-step updates of their coordinates are
released (the white-box threat model of every update: checkpointed or federated training).

The auditor (:mod:`fdp_audit.auditing.one_run.guesser`) reads the noise scale off the null coordinates, scores the
candidates of every canary (Poisson-mixture likelihood of the updates; and the updates at the steps where the
canary's public coordinate moved), guesses the most confident ones and abstains on the rest; the counts are tested
against the claimed trade-off curve in the replace-one relation with the one-run f-DP analysis
(:func:`fdp_audit.auditing.one_run.evaluation.judge_scores`). The comparisons go to results.json in the gate's
``one_run`` form, so ``fdp-audit gate`` judges them again: VIOLATION when the conformance test or the count
test rejects the claim.

What it sees: the private step's sampling, clipping, noise and normalisation, and whether the public gradient
reveals the private batch (Proposition 3). What it does not see: leakage through the denoiser's own gradients of
real images (the canaries' gradients are fixed vectors), for which record canaries would be needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from fdp_audit.accounting.events import Relation, SubsampledGaussianEvent
from fdp_audit.auditing.one_run.canaries import canary_block, draw_secrets
from fdp_audit.auditing.one_run.evaluation import judge_scores, section_comparisons
from fdp_audit.auditing.one_run.guesser import Release, candidate_pattern, threat_scores
from fdp_audit.claim import Claim
from fdp_audit.errors import BadInputError
from fdp_audit.generative.training.trainer import DiffusionSetup, LabelledImages, train_diffusion
from fdp_audit.mechanisms import MECHANISMS

GAME = "value"


@dataclass(frozen=True)
class AuditPlan:
    """The audited training: claimed z, expected batch (p = batch / n), T, and the game's M canaries, K candidates,
    canary magnitude (``magnitude_factor`` × C) and level α."""

    noise_multiplier: float = 1.0
    batch_size: int = 32
    steps: int = 60
    canaries: int = 1000
    candidates: int = 2
    magnitude_factor: float = 2.0
    delta: float = 1e-5
    alpha: float = 0.05
    # Algorithm 1's private weight in the audited training. α scales the noise on every block coordinate, the
    # canaries' public ones included, so at α > 1 the shared-batch fault's public hits sink below the guesser's
    # threshold (measured: not caught at α = 4, caught at α = 1); α is post-processing and leaves the claim as it is.
    private_weight: float = 1.0


def audit_generative(mechanism: str, data: LabelledImages, setup: DiffusionSetup, plan: AuditPlan, seed: int,
                     device: torch.device | str = "cpu", init: dict[str, torch.Tensor] | None = None
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Train once with the canaries and judge the guesses (module doc): the one-run section and its comparisons in
    the gate's form.

    Args:
        mechanism: a registered private Gaussian mechanism of the generative study (a faulty one is judged
            against the claim of the mechanism it imitates).
        data: the training images with their public completions.
        setup: the training settings (steps, batch, δ and private weight are taken from ``plan``).
        plan: the audit: claimed z, expected batch, T, the M canaries, K candidates, magnitude and level α.
        seed: the seed of the secrets and of the training.
        device: where the denoiser trains.
        init: a state dict to start from, or None.

    Returns:
        ``(one-run section, comparisons)``: the judged guesses with the claim's parameters, the plan and the training
        time, and the comparisons ``fdp-audit gate`` judges again.

    Raises:
        BadInputError: the mechanism is unknown, not private, or does not release subsampled Gaussian steps.
    """
    entry = MECHANISMS.get(mechanism)
    if entry is None or not entry.recipe.private or not issubclass(entry.releases, SubsampledGaussianEvent):
        raise BadInputError(f"the generative audit needs a private Gaussian mechanism, got {mechanism!r}", "mechanism")
    m, k = plan.canaries, plan.candidates
    secrets = draw_secrets(seed, m, k)
    block = canary_block(GAME, k, secrets, plan.magnitude_factor * setup.clip_norm)
    audited = replace(setup, steps=plan.steps, batch_size=plan.batch_size, delta=plan.delta,
                      private_weight=plan.private_weight)
    trained = train_diffusion(mechanism, data, audited, seed, device, init=init, block=block,
                              noise_multiplier=plan.noise_multiplier)
    assert trained.release is not None and trained.sample_rate is not None
    updates = trained.release.double().numpy()
    has_public = entry.recipe.public_batch != "none"
    release = Release(updates[:, :m].sum(0), updates[:, 2 * m:].sum(0), updates[:, :m], updates[:, 2 * m:],
                      updates[:, m:2 * m] if has_public else None)
    pattern = candidate_pattern(GAME, k)
    claimed = entry.claimed_as  # a known-faulty mechanism claims the correct one's guarantee
    parameters = {"mechanism": claimed, "noise_multiplier": plan.noise_multiplier, "sample_rate": trained.sample_rate,
                  "steps": plan.steps, "delta": plan.delta, "relation": Relation.REPLACE}
    claim = Claim.stated(claimed, plan.noise_multiplier, trained.sample_rate, plan.steps,
                         plan.delta).one_run_curve(Relation.REPLACE)
    section = judge_scores(threat_scores(release, pattern), secrets, claim, plan.alpha, family_search=False)
    section.update({"game": GAME, "kind": "gradient", "mechanism": mechanism,
                    "magnitude": plan.magnitude_factor * setup.clip_norm, "claim_parameters": parameters,
                    "plan": asdict(plan), "train_seconds": trained.seconds})
    return section, section_comparisons(section, parameters)
