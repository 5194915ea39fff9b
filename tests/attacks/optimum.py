"""Known-answer models for the informed white-box attacks: L2-regularised logistic regression trained to its
unique optimum by Newton's method in float64, so the optimality condition
``Σ_{x∈S∪{target}} ∇ℓ(θ; x) + λθ = 0`` holds to machine precision."""

from __future__ import annotations

import torch
from torch.func import grad, hessian, vmap

from fdp_audit.training.engine import unflatten
from fdp_audit.training.models import Model, Params, example_loss

NEWTON_STEPS = 30


def objective(model: Model, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, l2: float) -> torch.Tensor:
    """``Σ ℓ(θ; x_i, y_i) + (λ/2)‖θ‖²`` for one model's flat parameters."""
    return example_loss(model.forward(unflatten(theta, model), x), y).sum() + 0.5 * l2 * theta.pow(2).sum()


def train_to_optimum(model: Model, rest_x: torch.Tensor, rest_y: torch.Tensor, target_x: torch.Tensor,
                     target_y: torch.Tensor, l2: float) -> Params:
    """One model per target row, each trained on ``rest ∪ {target_r}``: parameters ``[R, ...]`` (float64).
    The objective is strictly convex, so Newton from zero converges quadratically; the gradient norm is
    checked to 1e-9."""
    x = torch.cat([rest_x.double().expand(len(target_x), -1, -1), target_x.double()[:, None, :]], dim=1)
    y = torch.cat([rest_y.expand(len(target_y), -1), target_y[:, None]], dim=1)
    theta = torch.zeros(len(target_x), model.n_parameters, dtype=torch.float64)
    gradient = vmap(grad(lambda t, xs, ys: objective(model, t, xs, ys, l2)))
    curvature = vmap(hessian(lambda t, xs, ys: objective(model, t, xs, ys, l2)))
    for _ in range(NEWTON_STEPS):
        theta = theta - torch.linalg.solve(curvature(theta, x, y), gradient(theta, x, y))
    assert float(gradient(theta, x, y).norm(dim=1).max()) < 1e-9
    return unflatten(theta, model)

