"""Example third-party mechanisms for the game audit (docs/games.md): a DP-SGD written from scratch, as an
outside team would write it, with the signature of :mod:`fdp_audit.audit.third_party` — and the same code with
a classic bug, the noise divided by the expected batch size before the sum is (so twice), and with 0.3 of the
claimed noise, which the gate must catch. ``configs/third_party_dp_sgd.yaml`` and
``configs/third_party_leaky.yaml`` audit them."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch.func import grad, vmap

from fdp_audit.audit.third_party import MechanismOutput
from fdp_audit.training.engine import Canaries, TrainingProblem, train_models
from fdp_audit.training.mechanisms import MECHANISMS
from fdp_audit.training.models import example_loss


def _dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries, noise_divisor: float,
            shared_noise: bool = False) -> MechanismOutput:
    """Poisson-sampled DP-SGD of ``problem.model``: clip each example's gradient to C, add N(0, (zC)²) noise
    (divided by ``noise_divisor``; one draw for every coordinate if ``shared_noise``), step by the noisy sum
    over the expected batch size p·n."""
    model, h = problem.model, problem.hyper
    generator = torch.Generator().manual_seed(seed)
    x, y = problem.x.float(), problem.y
    in_private = bool(canary.in_private[0])
    if in_private:  # the canary joins the Poisson-sampled population as its last record
        x, y = torch.cat([x, canary.x.float()]), torch.cat([y, canary.y])
    shapes = model.shapes()
    params = {name: torch.zeros(shape) for name, shape in shapes.items()}

    def loss(p, xi, yi):
        return example_loss(model.forward(p, xi), yi)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    expected_batch = h.sample_rate * problem.n
    sums, width = [], sum(math.prod(s) for s in shapes.values())
    for _ in range(h.steps):
        batch = torch.nonzero(torch.rand(len(x), generator=generator) < h.sample_rate)[:, 0]
        grads = per_example(params, x[batch], y[batch])
        flat = torch.cat([grads[name].reshape(len(batch), -1) for name in shapes], dim=1)
        if in_private and canary.private_gradient is not None:  # the audit hook: the canary's fixed gradient
            flat[batch == len(x) - 1] = canary.private_gradient[0].float()
        clipped = flat * torch.clamp(h.clip_norm / flat.norm(dim=1, keepdim=True).clamp_min(1e-12), max=1.0)
        draws = torch.randn(1, generator=generator).expand(width) if shared_noise else torch.randn(
            width, generator=generator)
        noise = h.noise_multiplier * h.clip_norm * draws / noise_divisor
        noisy = clipped.sum(dim=0) + noise
        sums.append(noisy)
        step, start = noisy / expected_batch, 0
        for name, shape in shapes.items():
            size = math.prod(shape)
            params[name] = params[name] - h.optimizer.lr * step[start:start + size].reshape(shape)
            start += size
    sums_tensor = torch.stack(sums)
    return MechanismOutput(params, sums_tensor, torch.zeros_like(sums_tensor), torch.zeros(h.steps))


def honest_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    return _dp_sgd(problem, seed, canary, noise_divisor=1.0)


def leaky_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """The bug: ``noise / m`` added to the *sum*, which is divided by m again — z is in effect z/m."""
    return _dp_sgd(problem, seed, canary, noise_divisor=problem.hyper.sample_rate * problem.n)


def quiet_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """Silently adds 0.3 of the claimed noise: every step, and its release, looks like DP-SGD's."""
    return _dp_sgd(problem, seed, canary, noise_divisor=1 / 0.3)


def shared_noise_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """The classic bug ``randn(1)`` for ``randn(width)``: one N(0, (zC)²) draw per step added to every
    coordinate, so any coordinate minus another is the clipped sum's difference, un-noised."""
    return _dp_sgd(problem, seed, canary, noise_divisor=1.0, shared_noise=True)


def final_model_only(problem: TrainingProblem, seed: int, canary: Canaries) -> dict[str, torch.Tensor]:
    """Returns the final model alone: enough for the attribute game, not for the gradient-canary games."""
    return honest_dp_sgd(problem, seed, canary).params


def nan_model(problem: TrainingProblem, seed: int, canary: Canaries) -> dict[str, torch.Tensor]:
    """A broken mechanism: NaN weights would make every attack guess the first candidate."""
    return {name: torch.full(shape, float("nan")) for name, shape in problem.model.shapes().items()}


def calls_raise(problem: TrainingProblem, seed: int, canary: Canaries) -> dict[str, torch.Tensor]:
    """Proves that a game used the function: it fails as soon as it is called."""
    raise RuntimeError("third-party mechanism called")


def exits_zero(problem: TrainingProblem, seed: int, canary: Canaries) -> dict[str, torch.Tensor]:
    """Ends the process with status 0 instead of returning a model."""
    raise SystemExit(0)


def nonprivate_claimed_as_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> dict[str, torch.Tensor]:
    """Claims the configured DP-SGD but trains without clipping or noise (the engine's non-private recipe):
    every game must be able to catch it."""
    plain = replace(problem, recipe=MECHANISMS["nonprivate"].recipe)
    (chunk,) = train_models(plain, seed, [0], canary)
    return {name: value[0] for name, value in chunk.params.items()}
