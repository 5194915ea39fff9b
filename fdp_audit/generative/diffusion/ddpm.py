"""Denoising diffusion (Ho, Jain & Abbeel 2020, "DDPM"): the forward process, the per-example training loss,
and ancestral sampling (docs/generative.md).

Forward process with T steps and the cosine schedule of Nichol & Dhariwal (2021):
``ᾱ_t = cos²(((t/T) + s) / (1 + s) · π/2) / cos²(s / (1 + s) · π/2)``, ``β_t = 1 - ᾱ_t / ᾱ_{t-1}`` (clipped at
0.999), ``x_t = √ᾱ_t x_0 + √(1 - ᾱ_t) ε`` with ε ~ N(0, I).

Loss of one example (the "simple" objective, Ho et al. eq. 14), with its own t ~ U{1..T} and ε:
``ℓ(θ; x_0, y, t, ε) = mean_pixels (ε_θ(x_t, t/T, y) - ε)²``. The time and the noise are inputs, drawn by the
trainer independently of the data, so the same (t, ε) can be applied to two images: Algorithm 1's private loss
``ℓ(θ; x) - ℓ(θ; Ψ̃(x))`` is evaluated at one (t, ε) for both terms.

Ancestral sampling through the posterior q(x_{t-1} | x_t, x̂_0) (Ho et al. eqs. 6-7) with the predicted clean image
clipped to the data range, as in Ho et al.'s released sampler: ``x_T ~ N(0, I)``, then for t = T … 1
``x̂_0 = clip((x_t - √(1 - ᾱ_t) ε_θ(x_t, t/T, y)) / √ᾱ_t, -1, 1)``,
``x_{t-1} = √ᾱ_{t-1} β_t / (1 - ᾱ_t) · x̂_0 + √α_t (1 - ᾱ_{t-1}) / (1 - ᾱ_t) · x_t + σ_t z`` with
``σ_t² = β_t (1 - ᾱ_{t-1}) / (1 - ᾱ_t)`` and ᾱ_0 = 1 (so the last step returns x̂_0). Without the clip, the last
β_t of the cosine schedule (0.999 at few steps) multiplies the denoiser's error at t = T by 1/√α_T ≈ 32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class NoiseSchedule:
    """β_t, α_t = 1 - β_t and ᾱ_t for t = 1 … T (index t - 1), float32 on ``device``."""

    betas: torch.Tensor
    alphas: torch.Tensor
    alpha_bars: torch.Tensor

    @property
    def steps(self) -> int:
        return self.betas.shape[0]

    def to(self, device: torch.device | str) -> NoiseSchedule:
        """The schedule on ``device``.

        Args:
            device: the target device.

        Returns:
            A new schedule with the same values.
        """
        return NoiseSchedule(self.betas.to(device), self.alphas.to(device), self.alpha_bars.to(device))


def cosine_schedule(steps: int, offset: float = 0.008, max_beta: float = 0.999) -> NoiseSchedule:
    """The cosine schedule (module doc), computed in float64.

    Args:
        steps: the number of diffusion steps T (≥ 1).
        offset: the offset s of the cosine.
        max_beta: the clip of β_t.

    Returns:
        β_t, α_t and ᾱ_t for t = 1 … T, float32.

    Raises:
        ValueError: ``steps`` is below 1.
    """
    if steps < 1:
        raise ValueError(f"need at least one diffusion step, got {steps}")
    grid = torch.arange(steps + 1, dtype=torch.float64) / steps
    f = torch.cos((grid + offset) / (1 + offset) * math.pi / 2) ** 2
    bars = f / f[0]
    betas = torch.clamp(1 - bars[1:] / bars[:-1], max=max_beta)
    alphas = 1 - betas
    return NoiseSchedule(betas.float(), alphas.float(), torch.cumprod(alphas, 0).float())


def diffuse(schedule: NoiseSchedule, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """``x_t = √ᾱ_t x_0 + √(1 - ᾱ_t) ε`` for integer times ``t`` ∈ {1..T} (one per example).

    Args:
        schedule: the noise schedule.
        x0: clean images ``[B, ...]``.
        t: integer times in {1..T}, ``[B]``.
        noise: the noise ε, shaped like ``x0``.

    Returns:
        The diffused images x_t, shaped like ``x0``.
    """
    bar = schedule.alpha_bars[t - 1].reshape(-1, *([1] * (x0.dim() - 1)))
    return bar.sqrt() * x0 + (1 - bar).sqrt() * noise


def denoising_loss(predict: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                   schedule: NoiseSchedule, x0: torch.Tensor, y: torch.Tensor, t: torch.Tensor,
                   noise: torch.Tensor) -> torch.Tensor:
    """Per-example losses ``[B]``: ``mean_pixels (ε_θ(x_t, t/T, y) - ε)²`` (module doc); ``predict`` is the
    denoiser (a module, or its functional form under ``torch.func``).

    Args:
        predict: the denoiser, called as ``predict(x_t, t/T, y)``.
        schedule: the noise schedule.
        x0: clean images ``[B, ...]``.
        y: class labels ``[B]``.
        t: integer times in {1..T}, ``[B]``.
        noise: the noise ε, shaped like ``x0``.

    Returns:
        The losses ``[B]``.
    """
    predicted = predict(diffuse(schedule, x0, t, noise), t.float() / schedule.steps, y)
    return (predicted - noise).pow(2).flatten(1).mean(1)


@torch.no_grad()
def sample(model: nn.Module, schedule: NoiseSchedule, y: torch.Tensor, shape: tuple[int, ...],
           generator: torch.Generator, batch: int = 1000) -> torch.Tensor:
    """Ancestral samples ``[len(y), *shape]`` of the classes ``y`` (module doc), ``batch`` at a time.

    Args:
        model: the denoiser (put in eval mode while sampling, then back).
        schedule: the noise schedule.
        y: the class of each sample, on the device to sample on.
        shape: one image's shape ``(C, H, W)``.
        generator: the source of x_T and of every step's noise, on the same device.
        batch: samples drawn together.

    Returns:
        The samples ``[len(y), *shape]``, each pixel in [-1, 1] (the last step returns the clipped x̂_0).
    """
    was_training = model.training
    model.eval()
    device = y.device
    out = []
    for start in range(0, len(y), batch):
        labels = y[start:start + batch]
        x = torch.randn((len(labels), *shape), generator=generator, device=device)
        for t in range(schedule.steps, 0, -1):
            times = torch.full((len(labels),), t / schedule.steps, device=device)
            eps = model(x, times, labels)
            beta, alpha, bar = schedule.betas[t - 1], schedule.alphas[t - 1], schedule.alpha_bars[t - 1]
            previous = schedule.alpha_bars[t - 2] if t > 1 else torch.ones((), device=device)
            x0 = ((x - (1 - bar).sqrt() * eps) / bar.sqrt()).clamp(-1.0, 1.0)
            x = (previous.sqrt() * beta * x0 + alpha.sqrt() * (1 - previous) * x) / (1 - bar)
            if t > 1:
                spread = (beta * (1 - previous) / (1 - bar)).sqrt()
                x = x + spread * torch.randn(x.shape, generator=generator, device=device)
        out.append(x)
    model.train(was_training)
    return torch.cat(out)
