"""Example third-party mechanisms for the game audit (docs/games.md): a DP-SGD written from scratch, as an
outside team would write it, with the signature of :mod:`fdp_audit.auditing.third_party` — and the same code with
a classic bug, the noise divided by the expected batch size before the sum is (so twice), and with 0.3 of the
claimed noise, which the gate must catch. ``configs/third_party_dp_sgd.yaml`` and
``configs/third_party_leaky.yaml`` audit them."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch.func import grad, vmap

from fdp_audit.auditing.third_party import MechanismOutput
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.engine import Canaries, TrainingProblem, train_models
from fdp_audit.training.models import example_loss


def _dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries, noise_divisor: float = 1.0,
            shared_noise: bool = False, normaliser: str = "expected", batches: str = "poisson") -> MechanismOutput:
    """DP-SGD of ``problem.model`` from ``problem.initial_params`` (zeros when not given): clip each example's
    gradient to C, add N(0, (zC)²) noise (divided by ``noise_divisor``; one draw for every coordinate if
    ``shared_noise``), step by the noisy sum over the ``normaliser``: the expected batch size p·n of the data
    set as given (``expected``, a constant), p times the size of the data set trained on, canary included
    (``dataset``, as an expected batch size computed from a data loader's length), or the realised batch size
    (``realised``, as a mean over the batch), or the noisy sum's own norm (``own_norm``: normalised SGD, a
    post-processing of the release). ``batches``: Poisson samples at rate p, or (``shuffled``)
    consecutive batches of round(p·n) records of a permutation drawn every epoch."""
    model, h = problem.model, problem.hyper
    generator = torch.Generator().manual_seed(seed)
    x, y = problem.x.float(), problem.y
    in_private = bool(canary.in_private[0])
    if in_private:  # the canary joins the Poisson-sampled population as its last record
        x, y = torch.cat([x, canary.x.float()]), torch.cat([y, canary.y])
    shapes = model.shapes()
    params = ({name: torch.zeros(shape) for name, shape in shapes.items()} if problem.initial_params is None
              else {name: value.float().clone() for name, value in problem.initial_params.items()})

    def loss(p, xi, yi):
        return example_loss(model.forward(p, xi), yi)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    expected_batch = h.sample_rate * (len(x) if normaliser == "dataset" else problem.n)
    batch_size, order = max(1, round(h.sample_rate * problem.n)), torch.zeros(0, dtype=torch.long)
    sums, width = [], sum(math.prod(s) for s in shapes.values())
    for _ in range(h.steps):
        if batches == "shuffled":
            if not len(order):
                order = torch.randperm(len(x), generator=generator)
            batch, order = order[:batch_size], order[batch_size:]
        else:
            batch = torch.nonzero(torch.rand(len(x), generator=generator) < h.sample_rate)[:, 0]
        grads = per_example(params, x[batch], y[batch])
        flat = torch.cat([grads[name].reshape(len(batch), math.prod(shapes[name])) for name in shapes], dim=1)
        if in_private and canary.private_gradient is not None:  # the audit hook: the canary's fixed gradient
            flat[batch == len(x) - 1] = canary.private_gradient[0].float()
        clipped = flat * torch.clamp(h.clip_norm / flat.norm(dim=1, keepdim=True).clamp_min(1e-12), max=1.0)
        draws = torch.randn(1, generator=generator).expand(width) if shared_noise else torch.randn(
            width, generator=generator)
        noise = h.noise_multiplier * h.clip_norm * draws / noise_divisor
        noisy = clipped.sum(dim=0) + noise
        sums.append(noisy)
        divisor = {"realised": max(len(batch), 1), "own_norm": noisy.norm()}.get(normaliser, expected_batch)
        step, start = noisy / divisor, 0
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


def dataset_size_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """Divides the noisy sum by p·|D| with |D| the data set trained on (an expected batch size computed from the
    data loader's length): the update's scale, noise included, shows whether the canary was added."""
    return _dp_sgd(problem, seed, canary, normaliser="dataset")


def realised_batch_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """Divides the noisy sum by the realised Poisson batch size (a mean over the batch): each step's scale
    counts the records sampled, un-noised."""
    return _dp_sgd(problem, seed, canary, normaliser="realised")


def shuffled_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """Fixed-size batches of a permutation drawn every epoch, claimed as Poisson sampling at rate p: a record in
    the data set is trained on exactly once an epoch, never skipped as Poisson sampling may skip it."""
    return _dp_sgd(problem, seed, canary, batches="shuffled")


def self_normalised_dp_sgd(problem: TrainingProblem, seed: int, canary: Canaries) -> MechanismOutput:
    """Steps along the noisy sum divided by its own norm: data-dependent, but a function of the release only
    (post-processing), so it keeps DP-SGD's guarantee and must pass."""
    return _dp_sgd(problem, seed, canary, normaliser="own_norm")


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
