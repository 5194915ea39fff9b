"""CorrDP-SGD (paper Algorithm 1): convergence without noise, the clipping bound on a step's
sensitivity, the noise actually added, and per-example gradients of the MLP against a plain loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fdp_audit.corrdp.sgd import MLP, SGDSettings, glm_objective, pointwise_loss, train_glm, train_mlp


def _data(n: int = 300, p: int = 5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = x @ torch.linspace(-1, 1, p, dtype=torch.float64) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return x, y


def test_noiseless_unclipped_gd_reaches_the_ridge_optimum() -> None:
    x, y = _data()
    ridge = 1.0 / len(y)
    settings = SGDSettings(steps=200, learning_rate=0.2, clip_norm=1e9, ridge=ridge)
    theta = train_glm(x, y, "squared", torch.zeros(1, 5, dtype=x.dtype), torch.ones(1, 5, dtype=x.dtype), settings,
                      torch.Generator().manual_seed(0))
    exact = torch.linalg.solve(x.T @ x / len(y) + ridge * torch.eye(5, dtype=x.dtype), x.T @ y / len(y))
    torch.testing.assert_close(theta[0], exact, atol=1e-8, rtol=0)
    reached, best = (glm_objective(t, x, y, "squared", ridge)[0] for t in (theta, exact[None]))
    assert reached <= best + 1e-12


def test_one_step_sensitivity_is_bounded_by_the_clip_norm() -> None:
    # Changing one record moves the averaged, clipped gradient by at most 2L/n.
    x, y = _data(n=50)
    x2 = x.clone()
    x2[0] = 40.0 * torch.randn(5, generator=torch.Generator().manual_seed(1), dtype=x.dtype)
    settings = SGDSettings(steps=1, learning_rate=1.0, clip_norm=0.7)
    zeros, ones = torch.zeros(1, 5, dtype=x.dtype), torch.ones(1, 5, dtype=x.dtype)
    a = train_glm(x, y, "logistic", zeros, ones, settings, torch.Generator())
    b = train_glm(x2, y, "logistic", zeros, ones, settings, torch.Generator())
    assert (a - b).norm() <= 2 * 0.7 / 50 + 1e-12


def test_noise_std_and_partial_mask() -> None:
    # Zero features give a zero gradient, so one step with rate 1 moves θ by exactly −noise.
    x = torch.zeros(10, 3, dtype=torch.float64)
    y = torch.zeros(10, dtype=torch.float64)
    std = torch.tensor([[2.0, 0.5, 0.0]] * 4000, dtype=torch.float64)
    masks = torch.ones_like(std)
    masks[:, 0] = torch.tensor([1.0, 0.0]).repeat(2000)  # half the runs drop column 0 (Partial)
    theta = train_glm(x, y, "squared", std, masks, SGDSettings(1, 1.0, 1.0), torch.Generator().manual_seed(3))
    kept = theta[masks[:, 0] == 1]
    assert kept[:, 0].std().item() == pytest.approx(2.0, rel=0.06)
    assert theta[:, 1].std().item() == pytest.approx(0.5, rel=0.06)
    assert theta[:, 2].abs().max().item() == 0.0
    assert theta[masks[:, 0] == 0, 0].abs().max().item() == 0.0


def test_poisson_sampling_and_projection() -> None:
    x, y = _data()
    settings = SGDSettings(steps=200, learning_rate=0.1, clip_norm=1.0, sample_rate=0.2, projection_radius=0.5)
    theta = train_glm(x, y, "squared", 0.01 * torch.ones(3, 5, dtype=x.dtype), torch.ones(3, 5, dtype=x.dtype),
                      settings, torch.Generator().manual_seed(0))
    assert torch.all(theta.norm(dim=1) <= 0.5 + 1e-12)
    assert not torch.allclose(theta[0], theta[1])  # independent noise and batches per run


def test_mlp_step_matches_a_per_example_loop() -> None:
    x, y = _data(n=40, p=4)
    y = (y > 0).double()
    settings = SGDSettings(steps=1, learning_rate=0.3, clip_norm=0.2)
    trained = train_mlp(x, y, "logistic", 6, torch.zeros(4), 0.0, settings, torch.Generator().manual_seed(5))
    reference = MLP(4, 6, torch.Generator().manual_seed(5), torch.float64)
    total = [torch.zeros_like(p) for p in reference.parameters()]
    for i in range(len(y)):
        reference.zero_grad()
        pointwise_loss(reference(x[i : i + 1])[0], y[i], "logistic").backward()
        grads = [p.grad.clone() for p in reference.parameters()]
        norm = math.sqrt(sum(float((g**2).sum()) for g in grads))
        for t, g in zip(total, grads):
            t += g * min(1.0, 0.2 / norm)
    with torch.no_grad():
        for p, t in zip(reference.parameters(), total):
            p -= 0.3 * t / len(y)
    for a, b in zip(trained.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_mlp_first_layer_noise_per_input() -> None:
    # Zero inputs: the first-layer weights receive no gradient, only their per-input noise.
    x = torch.zeros(8, 3, dtype=torch.float64)
    y = torch.zeros(8, dtype=torch.float64)
    first = torch.tensor([1.0, 0.1, 0.0], dtype=torch.float64)
    g0 = torch.Generator().manual_seed(11)
    before = MLP(3, 3000, torch.Generator().manual_seed(11), torch.float64).first.weight.detach()
    model = train_mlp(x, y, "squared", 3000, first, 0.0, SGDSettings(1, 1.0, 1.0), g0)
    moved = (model.first.weight.detach() - before).numpy()
    np.testing.assert_allclose(moved.std(axis=0), [1.0, 0.1, 0.0], rtol=0.05, atol=1e-15)
