"""The denoiser's training mechanisms: per-example gradients against autograd one example at a time, clipping,
Algorithm 1's private loss, Poisson sampling, noise scale and the shared-batch fault seen through a canary
block, and the calibration of z."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from fdp_audit.accounting import MechanismSpec, accountant_for
from fdp_audit.errors import BadInputError
from fdp_audit.generative.diffusion.ddpm import cosine_schedule, denoising_loss
from fdp_audit.generative.training.trainer import (
    DiffusionSetup,
    LabelledImages,
    _Gradients,
    build_denoiser,
    calibrated_noise,
    train_diffusion,
)
from fdp_audit.training.engine import CanaryBlock

SETUP = DiffusionSetup(widths=(4, 8), embedding=8, diffusion_steps=10, steps=3, batch_size=8, public_batch_size=8)


def _images(n: int = 40, seed: int = 0) -> LabelledImages:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 4, 4, generator=generator) * 2 - 1
    return LabelledImages(x, torch.arange(n) % 3, x.flip(-1), 3)


def _draws(n: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, 11, (n,), generator=generator), torch.randn(n, 1, 4, 4, generator=generator)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to float32 rounding of sums over examples, relative to the vector's norm."""
    return float((a - b).norm()) <= 1e-4 * float(b.norm())


def _loop_gradient(model, schedule, x, y, t, noise, x_public=None) -> torch.Tensor:
    """One example's flat gradient by plain autograd (the reference for the vmap path)."""
    model.zero_grad(set_to_none=True)
    loss = denoising_loss(model, schedule, x[None], y[None], t[None], noise[None])[0]
    if x_public is not None:
        loss = loss - denoising_loss(model, schedule, x_public[None], y[None], t[None], noise[None])[0]
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("decomposed", [False, True])
def test_clipped_per_example_sum_matches_autograd_example_by_example(decomposed):
    data = _images()
    schedule = cosine_schedule(10)
    model = build_denoiser(SETUP, 3, 1, seed=0)
    t, noise = _draws(data.n)
    gradients = _Gradients(model, schedule, decomposed)
    reference = torch.stack([_loop_gradient(model, schedule, data.images[i], data.labels[i], t[i], noise[i],
                                            data.public[i] if decomposed else None) for i in range(data.n)])
    clip = float(reference.norm(dim=1).median())  # half the examples are clipped
    expected = (reference * torch.clamp(clip / reference.norm(dim=1), max=1.0)[:, None]).sum(0)
    got = gradients.clipped_sum(data.images, data.labels, t, noise, data.public, clip, microbatch=7)
    assert _close(got, expected)
    unclipped = gradients.clipped_sum(data.images, data.labels, t, noise, data.public, None, microbatch=64)
    assert _close(unclipped, reference.sum(0))
    if not decomposed:
        assert _close(gradients.batch_sum(data.images, data.labels, t, noise), reference.sum(0))


def test_algorithm_1_private_loss_vanishes_when_the_public_completion_is_the_image():
    """ℓ_priv = ℓ(x) − ℓ(Ψ̃(x)) at one (t, ε) is identically zero when Ψ̃(x) = x: nothing private is left."""
    data = _images()
    t, noise = _draws(data.n)
    gradients = _Gradients(build_denoiser(SETUP, 3, 1, seed=0), cosine_schedule(10), decomposed=True)
    got = gradients.clipped_sum(data.images, data.labels, t, noise, data.images, None, microbatch=64)
    assert float(got.abs().max()) == 0.0


def _block(count: int, private: float = 5.0, public: float = 5.0) -> CanaryBlock:
    return CanaryBlock(torch.full((1, count), private), torch.full((1, count), public),
                       torch.ones(1, count, dtype=torch.bool), count)


def test_canaries_are_poisson_sampled_clipped_and_noised_as_claimed():
    """Near-zero noise (z = 1e-6): a canary's private coordinate moves by clip/(p·n) exactly when sampled. Over
    T·M = 30 × 100 canary-steps at p = 0.2 the sampled fraction has standard error 0.0073: tolerance 0.04 (5.5 s.e.).
    Then with z = 2, the null coordinates carry noise of sd z·C/(p·n) (half that for the half-noise fault):
    3,000 draws, relative standard error 1.3 %, tolerance 8 %."""
    data = _images(n=40)
    setup = replace(SETUP, steps=30, batch_size=8)  # p = 0.2
    expected_batch = setup.sample_rate(data.n) * data.n
    trained = train_diffusion("dp_sgd", data, setup, seed=0, block=_block(100), noise_multiplier=1e-6)
    private = -trained.release[:, :100]
    sampled = private > 1e-3
    assert float(sampled.float().mean()) == pytest.approx(0.2, abs=0.04)
    assert torch.allclose(private[sampled], torch.full_like(private[sampled], setup.clip_norm / expected_batch),
                          rtol=1e-3)
    assert float(trained.release[:, 100:200].abs().max()) < 1e-3  # dp_sgd has no public gradient
    for mechanism, factor in (("dp_sgd", 1.0), ("dp_sgd_half_noise", 0.5)):
        noisy = train_diffusion(mechanism, data, setup, seed=0, block=_block(100), noise_multiplier=2.0)
        null = noisy.release[:, 200:]
        assert float(null.std()) == pytest.approx(factor * 2.0 * setup.clip_norm / expected_batch, rel=0.08)


def test_shared_batch_fault_reveals_the_private_batch_and_algorithm_1_does_not():
    """A canary's public coordinate moves exactly at the steps it is privately sampled under the shared-batch fault;
    under Algorithm 1 its public batches are drawn independently (stream B)."""
    data = _images(n=40)
    setup = replace(SETUP, steps=20, batch_size=8)
    for mechanism in ("fdp_sgd_shared_batch", "fdp_sgd"):
        trained = train_diffusion(mechanism, data, setup, seed=0, block=_block(30), noise_multiplier=1e-6)
        private_hits = trained.release[:, :30].abs() > 1e-3
        public_hits = trained.release[:, 30:60].abs() > 1e-3
        agree = bool((private_hits == public_hits).all())
        assert agree == (mechanism == "fdp_sgd_shared_batch")
        assert 0 < int(private_hits.sum()) < private_hits.numel()


def test_calibrated_noise_meets_the_budget_exactly():
    n = 1_000
    z = calibrated_noise(DiffusionSetup(steps=200, batch_size=100), n)
    spec = MechanismSpec.gaussian("dp_sgd", noise_multiplier=z, sample_rate=0.1, steps=200)
    assert accountant_for(spec).epsilon(1e-5) <= 8.0
    looser = MechanismSpec.gaussian("dp_sgd", noise_multiplier=z * 0.99, sample_rate=0.1, steps=200)
    assert accountant_for(looser).epsilon(1e-5) > 8.0


def test_training_is_reproducible_and_starts_from_the_given_weights():
    data = _images()
    first = train_diffusion("fdp_sgd", data, SETUP, seed=3)
    again = train_diffusion("fdp_sgd", data, SETUP, seed=3)
    for a, b in zip(first.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert first.noise_multiplier is not None and math.isfinite(first.noise_multiplier)
    zero = {name: torch.zeros_like(v) for name, v in first.model.state_dict().items()}
    moved = train_diffusion("public_only", data, replace(SETUP, steps=1), seed=3, init=zero)
    assert max(float(p.detach().abs().max()) for p in moved.model.parameters()) <= SETUP.learning_rate * 1.01


def test_bad_requests_are_refused():
    with pytest.raises(BadInputError):
        train_diffusion("corrdp_sgd", _images(), SETUP, seed=0)
    with pytest.raises(BadInputError):
        train_diffusion("nonprivate", _images(), SETUP, seed=0, block=_block(2))
    with pytest.raises(BadInputError):
        LabelledImages(torch.zeros(3, 4, 4), torch.zeros(3), torch.zeros(3, 4, 4), 2)
