"""The iterates gradient-matching attack (attacks.iterates_matching): its replay of the training trajectory and
its estimates of what it is not told (the update's scale, the sampling rate, the noise)."""

from __future__ import annotations

import math

import pytest
import torch

from attacks.iterates_matching import others_clipped_sums, replay_trajectory
from fdp_audit.auditing.games import ImageReconstructionGame
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.training.engine import flatten, train_models


@pytest.mark.parametrize(("momentum", "schedule", "rate"), [(0.9, "constant", 1.0), (0.0, "cosine", 0.3)])
def test_replayed_trajectory_is_the_trained_one(momentum: float, schedule: str, rate: float) -> None:
    """θ_t from θ₀, the released sums and public gradients, and ĉ fitted on θ_T, equals every parameter vector the
    engine trained through (float32 training: to 1e-5), without reading the sampling rate or noise multiplier;
    and p̂ recovers the sampling rate (within 0.1 at p = 0.3: 6 steps of ~35 records each)."""
    raw = {"seed": 0, "data": {"dataset": "digits", "protected": [], "public_map": "downsample",
                               "downsample_factor": 2, "max_rows": 150},
           "model": {"kind": "cnn", "hidden": [4, 8]},
           "mechanism": {"name": "fdp_sgd", "public_loss": "public_image", "sample_rate": rate, "steps": 6,
                         "noise_multiplier": 1.0, "public_batch_size": 16,
                         "optimizer": {"name": "sgd", "lr": 0.2, "momentum": momentum, "schedule": schedule}},
           "audit": {"games": ["image_reconstruction"], "attacks": ["gradient_matching_iterates"]}}
    config = config_from_dict(raw)
    game = ImageReconstructionGame()
    setup = game.setup(config, prepare_data(config.data, config.seed))
    indices = game.trial_indices(3)
    seen: list[torch.Tensor] = []
    (chunk,) = train_models(setup.problem, config.seed, indices, game.canaries(config, setup, indices),
                            record_iterates=True, on_step=lambda _, params: seen.append(flatten(params, lead=1)))
    released = chunk.iterates.noisy_private_sums.double()
    known = setup.knowledge.procedure  # what the attack is given: the claim's z and p are NaN there
    assert math.isnan(known.hyper.noise_multiplier) and math.isnan(known.hyper.sample_rate)
    thetas = replay_trajectory(known, released, chunk.iterates.public_gradients.double(),
                               flatten(chunk.params, lead=1).double())
    start = flatten({k: v[None] for k, v in setup.problem.initial_params.items()}, lead=1).double()
    torch.testing.assert_close(thetas[:, 0], start.expand(3, -1), rtol=0, atol=1e-12)
    torch.testing.assert_close(thetas[:, 1:], torch.stack(seen[:-1], dim=1).double(), rtol=1e-5, atol=1e-5)
    others = others_clipped_sums(known, thetas.float(), known.hyper.clip_norm).double()
    estimated = (released * others).sum(dim=(1, 2)) / others.square().sum(dim=(1, 2))
    assert torch.all((estimated - rate).abs() < 0.1)
