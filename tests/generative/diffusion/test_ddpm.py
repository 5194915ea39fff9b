"""DDPM math: the schedule, the forward process's moments, and the sampler against the exact denoiser of a Gaussian
data distribution (a known answer: sampling with it must return that distribution)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from fdp_audit.generative.diffusion.ddpm import cosine_schedule, denoising_loss, diffuse, sample


def test_cosine_schedule_decreases_to_noise():
    schedule = cosine_schedule(100)
    bars = schedule.alpha_bars
    assert schedule.steps == 100 and bool((bars[1:] < bars[:-1]).all())
    assert bars[0] > 0.99 and bars[-1] < 1e-3
    assert float(schedule.betas.max()) <= 0.999 + 1e-6
    assert torch.allclose(torch.cumprod(schedule.alphas.double(), 0).float(), bars, rtol=1e-5)
    with pytest.raises(ValueError):
        cosine_schedule(0)


def test_forward_process_has_the_stated_moments():
    """x_t | x_0 ~ N(√ᾱ_t x_0, 1 − ᾱ_t): 200,000 draws, standard errors about 2e-3; tolerance 1e-2 (5 s.e.)."""
    schedule = cosine_schedule(50)
    generator = torch.Generator().manual_seed(0)
    t = torch.full((200_000,), 20)
    x0 = torch.full((200_000, 1), 0.7)
    xt = diffuse(schedule, x0, t, torch.randn(x0.shape, generator=generator))
    bar = float(schedule.alpha_bars[19])
    assert float(xt.mean()) == pytest.approx(math.sqrt(bar) * 0.7, abs=1e-2)
    assert float(xt.var()) == pytest.approx(1 - bar, abs=1e-2)


class ExactGaussianDenoiser(nn.Module):
    """The Bayes-optimal ε-predictor when every pixel is N(m, s²) independently:
    E[ε | x_t] = √(1 − ᾱ) (x_t − √ᾱ m) / (ᾱ s² + 1 − ᾱ)."""

    def __init__(self, schedule, mean: float, sd: float):
        super().__init__()
        self.schedule, self.mean, self.sd = schedule, mean, sd

    def forward(self, x, t, y):
        step = torch.round(t * self.schedule.steps).long()
        bar = self.schedule.alpha_bars[step - 1].reshape(-1, 1, 1, 1)
        return (1 - bar).sqrt() * (x - bar.sqrt() * self.mean) / (bar * self.sd ** 2 + 1 - bar)


def test_sampler_with_the_exact_denoiser_returns_the_data_distribution():
    """Known answer: with the exact denoiser of N(0.2, 0.15²) pixels the sampler's output is that distribution up to
    the discretisation. The posterior variance β̃_t leaves out Var(x_0 | x_t), so the spread falls short by O(1/T):
    measured sd 0.136, 0.146, 0.148 at T = 100, 400, 1000 (mean 0.200 throughout). At T = 1000, 4 × 4 images of
    4,000 samples give 64,000 pixels: standard errors 6e-4 (mean) and 4e-4 (sd); tolerances 5e-3."""
    schedule = cosine_schedule(1000)
    model = ExactGaussianDenoiser(schedule, 0.2, 0.15)
    out = sample(model, schedule, torch.zeros(4_000, dtype=torch.long), (1, 4, 4), torch.Generator().manual_seed(1))
    assert float(out.mean()) == pytest.approx(0.2, abs=5e-3)
    assert float(out.std()) == pytest.approx(0.15, abs=5e-3)


def test_loss_of_the_exact_denoiser_is_below_a_wrong_one():
    schedule = cosine_schedule(100)
    generator = torch.Generator().manual_seed(2)
    x0 = 0.2 + 0.15 * torch.randn(20_000, 1, 2, 2, generator=generator)
    t = torch.randint(1, 101, (20_000,), generator=generator)
    noise = torch.randn(x0.shape, generator=generator)
    y = torch.zeros(20_000, dtype=torch.long)
    exact = denoising_loss(ExactGaussianDenoiser(schedule, 0.2, 0.15), schedule, x0, y, t, noise).mean()
    wrong = denoising_loss(ExactGaussianDenoiser(schedule, -0.2, 0.15), schedule, x0, y, t, noise).mean()
    assert float(exact) < float(wrong)
