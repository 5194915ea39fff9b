"""Training the denoiser under the mechanisms of the FDP paper's diffusion experiment (Section 6.3;
docs/generative.md).

The mechanisms are those of the registry :data:`fdp_audit.mechanisms.MECHANISMS`, whose recipe says what
a step does; here the loss is the denoising loss ℓ(θ; x, y, t, ε) of :mod:`fdp_audit.generative.diffusion.ddpm`
and Ψ̃(x) is the Ψ-completed image (the public feature as a full image, e.g. the blurred image):

* ``nonprivate`` — Adam on the mean of ℓ over uniform batches of the private images;
* ``public_only`` — the same on Ψ̃(x): (0, 0)-FDP, the paper's "Public" baseline;
* ``dp_sgd`` — DP-SGD from scratch: Poisson batch at rate p (stream A), per-example gradients of ℓ from
  ``torch.func`` (``vmap`` of ``grad``), each clipped to C, summed, plus N(0, z²C²I), divided by the expected
  batch size p·n (never the realised one);
* ``fdp_dpsgd`` — the same DP-SGD started from the public model: FDP by Proposition 2 (a DP mechanism is FDP
  for every Ψ) with training on Ψ̃ costing nothing;
* ``fdp_sgd`` — Algorithm 1 started from the public model: the private loss ``ℓ(θ; x) - ℓ(θ; Ψ̃(x))`` at one
  shared (t, ε) per example, clipped and noised as above on the Poisson batch, plus the public gradient
  ``(1/m') Σ ∇ℓ(θ; Ψ̃(x))`` over m' records drawn uniformly from the data (stream B, independent of A);
* the known-faulty ``fdp_sgd_shared_batch`` (the public gradient on the private Poisson batch: Proposition 3)
  and ``dp_sgd_half_noise`` (noise z/2, accounted z), for the audit to catch.

The noise multiplier z is calibrated by :func:`fdp_audit.accounting.calibrate_noise_multiplier` on the exact PLD
accountant for (ε, δ) at the claimed (p, T), add/remove relation. The diffusion times and noises are drawn from
a torch generator of their own, independently of the data, the Poisson masks and the privacy noise.

A *canary block* (the audit hook, :class:`fdp_audit.training.engine.CanaryBlock`) appends 2M + M₀ coordinates
that the denoiser never reads; its M gradient canaries are records of the Poisson population (slots n … n+M-1)
and of the public population, sampled, clipped, noised and normalised by this same step. The block's released
update of each step is the negated gradient that step hands the optimiser on those coordinates.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fdp_audit.accounting import calibrate_noise_multiplier
from fdp_audit.errors import BadInputError
from fdp_audit.generative.denoiser.unet import TinyUNet, n_parameters
from fdp_audit.generative.diffusion.ddpm import NoiseSchedule, cosine_schedule, denoising_loss
from fdp_audit.mechanisms import MECHANISMS, Recipe
from fdp_audit.threads import threads_for
from fdp_audit.training import streams
from fdp_audit.training.engine import CanaryBlock

GENERATIVE_MECHANISMS = ("nonprivate", "public_only", "dp_sgd", "fdp_dpsgd", "fdp_sgd", "fdp_sgd_shared_batch",
                         "dp_sgd_half_noise")
STARTS_FROM_PUBLIC = ("fdp_dpsgd", "fdp_sgd", "fdp_sgd_shared_batch")


@dataclass(frozen=True)
class LabelledImages:
    """Images ``[n, C, H, W]`` scaled to [-1, 1], integer labels ``[n]``, and the public completions Ψ̃(x)
    ``[n, C, H, W]`` (the only thing a public loss reads)."""

    images: torch.Tensor
    labels: torch.Tensor
    public: torch.Tensor
    n_classes: int

    def __post_init__(self) -> None:
        if self.images.dim() != 4 or self.public.shape != self.images.shape or len(self.labels) != len(self.images):
            raise BadInputError("images must be [n, C, H, W] with one label and one public completion each", "data")

    @property
    def n(self) -> int:
        return self.images.shape[0]

    def to(self, device: torch.device | str) -> LabelledImages:
        """The images, labels and completions on ``device``.

        Args:
            device: the target device.

        Returns:
            A new set with the same contents.
        """
        return LabelledImages(self.images.to(device), self.labels.to(device), self.public.to(device), self.n_classes)


@dataclass(frozen=True)
class DiffusionSetup:
    """Architecture, diffusion and optimisation settings shared by every mechanism of one experiment.

    ``steps`` is T for every mechanism (the private steps of the private ones, plain steps of the others);
    ``batch_size`` the batch of the non-private ones and the expected Poisson batch p·n of the private ones;
    ``microbatch`` bounds how many per-example gradients are held at once (memory, not the result)."""

    widths: tuple[int, ...] = (16, 32)
    embedding: int = 64
    diffusion_steps: int = 100
    steps: int = 400
    batch_size: int = 128
    public_batch_size: int = 128
    learning_rate: float = 2e-3
    clip_norm: float = 1.0
    epsilon: float = 8.0
    delta: float = 1e-5
    private_weight: float = 1.0
    microbatch: int = 256

    def sample_rate(self, n: int) -> float:
        """The Poisson rate p = batch_size / n of the private mechanisms (at most 1).

        Args:
            n: the number of training images.

        Returns:
            p.
        """
        return min(1.0, self.batch_size / n)


@dataclass
class TrainedDiffusion:
    """A trained denoiser with its mechanism, accounting parameters and cost; ``release`` holds the canary
    block's per-step updates ``[T, 2M + M₀]`` when a block was inserted."""

    mechanism: str
    model: TinyUNet
    schedule: NoiseSchedule
    noise_multiplier: float | None
    sample_rate: float | None
    steps: int
    seconds: float
    release: torch.Tensor | None = None


def build_denoiser(setup: DiffusionSetup, n_classes: int, channels: int, seed: int) -> TinyUNet:
    """A freshly initialised denoiser; its initial weights depend on ``seed`` only (CPU generator).

    Args:
        setup: the architecture settings (widths, embedding).
        n_classes: the number of classes.
        channels: image channels.
        seed: the seed of the initialisation.

    Returns:
        The denoiser, on the CPU.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyUNet(n_classes, channels, setup.widths, setup.embedding)


@functools.lru_cache(maxsize=64)
def calibrated_noise(setup: DiffusionSetup, n: int) -> float:
    """z with ε(δ) ≤ ``setup.epsilon`` for T Poisson-subsampled Gaussian steps at p (exact PLD, add/remove); cached,
    since every seed of an experiment asks for the same z.

    Args:
        setup: the settings (ε, δ, T and the batch size that fixes p).
        n: the number of training images.

    Returns:
        The noise multiplier z.
    """
    return calibrate_noise_multiplier(setup.epsilon, setup.delta, setup.sample_rate(n), setup.steps)


class _Gradients:
    """Flat gradients of the denoising losses for one model: batch means (non-private and public terms) and
    clipped per-example sums (private terms, ``torch.func``)."""

    def __init__(self, model: TinyUNet, schedule: NoiseSchedule, decomposed: bool):
        self.model, self.schedule = model, schedule
        self.names = [name for name, _ in model.named_parameters()]

        def example_loss(params, x, y, t, noise, x_public):
            def predict(x_t, times, labels):
                return functional_call(model, params, (x_t, times, labels))

            loss = denoising_loss(predict, schedule, x[None], y[None], t[None], noise[None])[0]
            if decomposed:  # ℓ_priv = ℓ(x) - ℓ(Ψ̃(x)) at the same (t, ε)
                loss = loss - denoising_loss(predict, schedule, x_public[None], y[None], t[None], noise[None])[0]
            return loss

        self.per_example = vmap(grad(example_loss), in_dims=(None, 0, 0, 0, 0, 0))

    def params(self) -> dict[str, torch.Tensor]:
        return {name: p.detach() for name, p in self.model.named_parameters()}

    def batch_sum(self, x: torch.Tensor, y: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``Σ_i ∇ℓ(θ; x_i)`` over the batch, flat ``[P]``."""
        self.model.zero_grad(set_to_none=True)
        denoising_loss(self.model, self.schedule, x, y, t, noise).sum().backward()
        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    def clipped_sum(self, x: torch.Tensor, y: torch.Tensor, t: torch.Tensor, noise: torch.Tensor,
                    x_public: torch.Tensor, clip_norm: float | None, microbatch: int) -> torch.Tensor:
        """``Σ_i clip_C(∇ℓ_i)`` flat ``[P]`` from per-example gradients, ``microbatch`` examples at a time."""
        params = self.params()
        total = torch.zeros(sum(p.numel() for p in params.values()), device=x.device)
        for start in range(0, len(x), microbatch):
            part = slice(start, start + microbatch)
            grads = self.per_example(params, x[part], y[part], t[part], noise[part], x_public[part])
            flat = torch.cat([grads[name].reshape(len(x[part]), -1) for name in self.names], dim=1)
            weights = torch.ones(len(flat), device=x.device)
            if clip_norm is not None:
                weights = torch.clamp(clip_norm / flat.norm(dim=1).clamp_min(1e-12), max=1.0)
            total += weights @ flat
        return total

    def apply(self, flat: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        start = 0
        for p in self.model.parameters():
            p.grad = flat[start:start + p.numel()].view_as(p).clone()
            start += p.numel()
        optimizer.step()


def _diffusion_draws(generator: torch.Generator, count: int, image_shape: tuple[int, ...], steps: int,
                     device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example diffusion times t ~ U{1..T} and noises ε ~ N(0, I), independent of the data."""
    t = torch.randint(1, steps + 1, (count,), generator=generator, device=device)
    return t, torch.randn((count, *image_shape), generator=generator, device=device)


def train_diffusion(mechanism: str, data: LabelledImages, setup: DiffusionSetup, seed: int,
                    device: torch.device | str = "cpu", init: dict[str, torch.Tensor] | None = None,
                    block: CanaryBlock | None = None, noise_multiplier: float | None = None) -> TrainedDiffusion:
    """Train one denoiser with ``mechanism`` (module doc) for ``setup.steps`` steps.

    ``init``: a state dict to start from (the public model, for the mechanisms of :data:`STARTS_FROM_PUBLIC`).
    ``noise_multiplier``: the claimed z (default: calibrated to ``setup.epsilon`` at ``setup.delta``).
    ``block``: gradient canaries (private mechanisms only); their per-step updates come back in ``release``.

    Args:
        mechanism: one of :data:`GENERATIVE_MECHANISMS`.
        data: the training images with their public completions.
        setup: the training settings.
        seed: the seed of the initialisation, the diffusion draws and the sampling streams.
        device: where the denoiser trains.
        init: a state dict to start from, or None.
        block: gradient canaries, or None.
        noise_multiplier: the claimed z, or None to calibrate it.

    Returns:
        The trained denoiser (in eval mode) with its schedule, z and p (None for a non-private mechanism), T, the
        training time, and the canary block's per-step updates ``[T, 2M + M₀]`` when one was inserted.

    Raises:
        BadInputError: the mechanism is unknown, or canaries are given to a non-private one.
    """
    if mechanism not in GENERATIVE_MECHANISMS:
        raise BadInputError(f"unknown mechanism {mechanism!r} (known: {', '.join(GENERATIVE_MECHANISMS)})",
                            "mechanism")
    recipe = MECHANISMS[mechanism].recipe
    if block is not None and not recipe.private:
        raise BadInputError("gradient canaries need a private mechanism", "mechanism")
    device = torch.device(device)
    data = data.to(device)
    schedule = cosine_schedule(setup.diffusion_steps).to(device)
    model = build_denoiser(setup, data.n_classes, data.images.shape[1], seed).to(device)
    if init is not None:
        model.load_state_dict(init)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed * 1_000_003 + GENERATIVE_MECHANISMS.index(mechanism))
    keys = streams.model_keys(seed, [0])
    gradients = _Gradients(model, schedule, recipe.private_loss == "decomposed")
    z = None
    if recipe.private:
        z = noise_multiplier if noise_multiplier is not None else calibrated_noise(setup, data.n)
    step_fn = _PrivateStep(recipe, data, setup, z, keys, generator, gradients, block) if recipe.private else None
    release = []
    start = time.perf_counter()
    with threads_for(step_work(model, data, setup)):
        for step in range(setup.steps):
            if step_fn is None:
                flat = _plain_gradient(recipe, data, setup, keys, step, generator, gradients)
            else:
                flat, block_gradient = step_fn(step)
                if block_gradient is not None:
                    release.append(-block_gradient.cpu())
            gradients.apply(flat, optimizer)
    seconds = time.perf_counter() - start
    model.eval()
    return TrainedDiffusion(mechanism, model, schedule, z, setup.sample_rate(data.n) if recipe.private else None,
                            setup.steps, seconds, torch.stack(release) if release else None)


def step_work(model: nn.Module, data: LabelledImages, setup: DiffusionSetup) -> int:
    """Multiply-adds of a step, bounded above by every weight used at every pixel of every example of a batch
    (what :func:`fdp_audit.threads.threads_for` needs to choose one thread for small steps).

    Args:
        model: the denoiser.
        data: the training images.
        setup: the settings (the batch size).

    Returns:
        The bound.
    """
    return n_parameters(model) * math.prod(data.images.shape[1:]) * setup.batch_size


def _plain_gradient(recipe: Recipe, data: LabelledImages, setup: DiffusionSetup, keys: torch.Tensor, step: int,
                    generator: torch.Generator, gradients: _Gradients) -> torch.Tensor:
    """The mean gradient of ℓ on private images (non-private) or on Ψ̃(x) (public-only) over a uniform batch."""
    device = data.images.device
    idx = streams.uniform_indices(keys, step, streams.Stream.PUBLIC_SAMPLE, setup.batch_size,
                                  torch.tensor([data.n]), device)[0]
    source = data.public if recipe.private_loss == "none" else data.images
    t, noise = _diffusion_draws(generator, len(idx), tuple(data.images.shape[1:]), setup.diffusion_steps, device)
    return gradients.batch_sum(source[idx], data.labels[idx], t, noise) / len(idx)


class _PrivateStep:
    """One step of a private mechanism (module doc): ``(gradient handed to the optimiser [P], block part)``."""

    def __init__(self, recipe: Recipe, data: LabelledImages, setup: DiffusionSetup, z: float, keys: torch.Tensor,
                 generator: torch.Generator, gradients: _Gradients, block: CanaryBlock | None):
        self.recipe, self.data, self.setup, self.keys, self.generator = recipe, data, setup, keys, generator
        self.gradients, self.block = gradients, block
        self.device = data.images.device
        self.rate = min(1.0, setup.sample_rate(data.n) * recipe.rate_factor)
        self.expected_batch = self.rate * data.n
        self.sigma = z * recipe.noise_factor * setup.clip_norm
        self.clip = setup.clip_norm if recipe.clip else None
        self.n_params = sum(p.numel() for p in gradients.model.parameters())
        self.canaries = 0 if block is None else block.count
        if block is not None:
            self.block = CanaryBlock(block.private_values.to(self.device), block.public_values.to(self.device),
                                     block.in_private.to(self.device), block.null)

    def _on_block(self, ids: torch.Tensor, values: torch.Tensor, offset: int) -> torch.Tensor:
        assert self.block is not None
        return torch.zeros(self.block.size, device=self.device).scatter_add_(0, ids + offset, values)

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        data, shape = self.data, tuple(self.data.images.shape[1:])
        idx, valid = streams.poisson_sample(self.keys, step, data.n + self.canaries, self.rate, self.device)
        idx = idx[0][valid[0]]
        real, canary_ids = idx[idx < data.n], idx[idx >= data.n] - data.n
        t, noise = _diffusion_draws(self.generator, len(real), shape, self.setup.diffusion_steps, self.device)
        private = self.gradients.clipped_sum(data.images[real], data.labels[real], t, noise, data.public[real],
                                             self.clip, self.setup.microbatch)
        if self.block is not None:
            hits = self.block.in_private[0, canary_ids]
            values = self.block.private_values[0, canary_ids] * hits
            if self.clip is not None:  # a canary's gradient lies on one coordinate: its norm is |value|
                values = values * torch.clamp(self.clip / values.abs().clamp_min(1e-12), max=1.0)
            private = torch.cat([private, self._on_block(canary_ids, values, 0)])
        noise_vector = streams.normal(self.keys, step, streams.Stream.NOISE, private.shape[0], self.device)[0]
        gradient = self.setup.private_weight * (private + self.sigma * noise_vector) / self.expected_batch
        if self.recipe.public_batch != "none":
            gradient = gradient + self._public(step, real, canary_ids)
        if self.block is None:
            return gradient, None
        return gradient[:self.n_params], gradient[self.n_params:]

    def _public(self, step: int, private_real: torch.Tensor, private_canaries: torch.Tensor) -> torch.Tensor:
        """``(1/m') Σ ∇ℓ(θ; Ψ̃(x))`` over a uniform batch (stream B), or over the private Poisson batch divided
        by its expected size for the shared-batch fault; block canaries add their public value."""
        data, shape = self.data, tuple(self.data.images.shape[1:])
        if self.recipe.public_batch == "shared":
            real, canary_ids, denominator = private_real, private_canaries, self.expected_batch
        else:
            idx = streams.uniform_indices(self.keys, step, streams.Stream.PUBLIC_SAMPLE, self.setup.public_batch_size,
                                          torch.tensor([data.n + self.canaries]), self.device)[0]
            real, canary_ids, denominator = idx[idx < data.n], idx[idx >= data.n] - data.n, len(idx)
        t, noise = _diffusion_draws(self.generator, len(real), shape, self.setup.diffusion_steps, self.device)
        if len(real):
            public = self.gradients.batch_sum(data.public[real], data.labels[real], t, noise)
        else:
            public = torch.zeros(self.n_params, device=self.device)
        if self.block is not None:
            values = self.block.public_values[0, canary_ids]
            public = torch.cat([public, self._on_block(canary_ids, values, self.block.count)])
        return public / denominator


def state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the module's weights (the public model handed to the fine-tuning mechanisms).

    Args:
        model: the trained module.

    Returns:
        Its state dict, every tensor cloned.
    """
    return {name: value.detach().clone() for name, value in model.state_dict().items()}
