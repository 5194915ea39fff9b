"""CorrDP-SGD (paper Algorithm 1; docs/corrdp.md): projected noisy (S)GD with per-coordinate Gaussian noise.

Per step t: a Poisson batch B (each record with probability q; q = 1 is full-batch GD), per-example
gradients clipped to ℓ2 norm L (this *enforces* the Lipschitz bound of Assumption 3.2 that the noise
calibration of Eq. 4 relies on), averaged over the expected batch size q·n (never the realised size,
so the sensitivity is data-independent), plus b ~ N(0, diag(σ²)), then a step and the projection
Π_Θ onto an ℓ2 ball:

    θ_{t+1} = Π_Θ(θ_t − α (1/(q n) Σ_{i∈B} clip_L(∇ℓ(θ_t; x_i, y_i)) + 2λθ_t + b)).

A data-independent ridge term λ‖θ‖² (the synthetic experiment's (1/n)‖θ‖²) is identical for
neighbours, so it is added outside the clipping. GLMs run many independent runs at once (a leading run
dimension, each run with its own noise scale, column mask, Poisson masks and noise) using the GLM
structure ∇ℓ = ℓ'(θᵀx, y) x, so per-example norms are |ℓ'|·‖x‖ and no per-example gradient is
materialised. MLPs use per-example gradients from ``torch.func`` (``vmap`` over ``grad``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fdp_audit.threads import threads_for

Loss = Literal["squared", "logistic"]



@dataclass(frozen=True)
class SGDSettings:
    """The hyper-parameters of one CorrDP-SGD run (module docstring's update; docs/corrdp.md).

    Attributes:
        steps: steps T.
        learning_rate: the step size α.
        clip_norm: the per-example clipping norm L (the enforced Lipschitz bound).
        sample_rate: the Poisson sampling rate q in (0, 1]; 1 is full-batch gradient descent.
        projection_radius: the radius of the ℓ2 ball Θ the parameters are projected onto; None: no projection.
        ridge: the data-independent ridge coefficient λ of λ‖θ‖², at least 0.
    """

    steps: int
    learning_rate: float
    clip_norm: float
    sample_rate: float = 1.0
    projection_radius: float | None = None
    ridge: float = 0.0


def pointwise_loss(z: torch.Tensor, y: torch.Tensor, loss: Loss) -> torch.Tensor:
    """ℓ(z, y) for a linear predictor z: (y − z)² or the logistic loss log(1 + e^z) − y z, y ∈ {0, 1}.

    Args:
        z: the predictions θᵀx.
        y: the targets (0/1 for the logistic loss), broadcastable against ``z``.
        loss: ``"squared"`` or ``"logistic"``.

    Returns:
        The losses, element-wise.
    """
    if loss == "squared":
        return (y - z) ** 2
    return nn.functional.softplus(z) - y * z


def _loss_derivative(z: torch.Tensor, y: torch.Tensor, loss: Loss) -> torch.Tensor:
    """∂ℓ/∂z, so that ∇_θ ℓ(θ; x, y) = ℓ'(θᵀx, y) x for a GLM."""
    return 2.0 * (z - y) if loss == "squared" else torch.sigmoid(z) - y


def glm_objective(theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, loss: Loss, ridge: float) -> torch.Tensor:
    """F(θ, D) = (1/n) Σ ℓ(θᵀx_i, y_i) + λ‖θ‖² for each run (row) of ``theta``.

    Args:
        theta: the parameters of R runs, (R, p).
        x: the design, (n, p).
        y: the targets, (n,).
        loss: ``"squared"`` or ``"logistic"``.
        ridge: λ.

    Returns:
        F of each run, (R,).
    """
    z = theta @ x.T
    return pointwise_loss(z, y, loss).mean(dim=1) + ridge * (theta**2).sum(dim=1)


def _project(theta: torch.Tensor, radius: float | None) -> torch.Tensor:
    if radius is None:
        return theta
    norms = theta.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return theta * (radius / norms).clamp(max=1.0)


def train_glm(
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Loss,
    noise_std: torch.Tensor,
    masks: torch.Tensor,
    settings: SGDSettings,
    generator: torch.Generator,
) -> torch.Tensor:
    """Run R independent CorrDP-SGD runs of a GLM and return their final parameters (R × p).

    ``noise_std`` (R × p) is the per-coordinate noise standard deviation of each run; ``masks`` (R × p)
    zeroes the columns a run does not use (the *Partial* baseline), which also removes them from the
    per-example norm so the clipping acts on the model actually trained.

    Args:
        x: the design, (n, p).
        y: the targets, (n,).
        loss: ``"squared"`` or ``"logistic"``.
        noise_std: each run's per-coordinate noise standard deviation, (R, p).
        masks: each run's 0/1 column mask, (R, p).
        settings: steps T, learning rate α, clip L, sampling rate q, projection radius and ridge λ.
        generator: the source of the Poisson masks and the noise.

    Returns:
        The final parameters, (R, p).
    """
    n, p = x.shape
    runs = noise_std.shape[0]
    theta = torch.zeros(runs, p, dtype=x.dtype)
    column_norms2 = x**2
    example_norms = torch.sqrt(masks @ column_norms2.T)  # ‖x_i restricted to the run's columns‖
    denominator = settings.sample_rate * n
    with threads_for(runs * n * p):
        for _ in range(settings.steps):
            theta = _glm_step(theta, x, y, loss, noise_std, masks, example_norms, denominator, settings, generator)
    return theta


def _glm_step(
    theta: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Loss,
    noise_std: torch.Tensor,
    masks: torch.Tensor,
    example_norms: torch.Tensor,
    denominator: float,
    settings: SGDSettings,
    generator: torch.Generator,
) -> torch.Tensor:
    """One update of the module docstring for all runs at once."""
    runs, n = example_norms.shape
    z = theta @ x.T
    slope = _loss_derivative(z, y, loss)
    factor = (settings.clip_norm / (slope.abs() * example_norms)).clamp(max=1.0)
    weights = slope * factor
    if settings.sample_rate < 1.0:
        weights = weights * (torch.rand(runs, n, generator=generator, dtype=x.dtype) < settings.sample_rate)
    gradient = (weights @ x) / denominator * masks + 2.0 * settings.ridge * theta
    noise = torch.randn(theta.shape, generator=generator, dtype=x.dtype) * noise_std
    return _project((theta - settings.learning_rate * (gradient + noise)) * masks, settings.projection_radius)


class MLP(nn.Module):
    """One hidden layer with Softplus (the paper's Sepsis / Medical Cost network) and one output."""

    def __init__(self, inputs: int, hidden: int, generator: torch.Generator, dtype: torch.dtype):
        super().__init__()
        self.first = nn.Linear(inputs, hidden, dtype=dtype)
        self.second = nn.Linear(hidden, 1, dtype=dtype)
        with torch.no_grad():  # PyTorch's default uniform(±1/sqrt(fan_in)) init, from our generator
            for layer, fan_in in ((self.first, inputs), (self.second, hidden)):
                bound = 1.0 / math.sqrt(fan_in)
                for tensor in (layer.weight, layer.bias):
                    tensor.copy_((torch.rand(tensor.shape, generator=generator, dtype=dtype) * 2 - 1) * bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output: ``second(softplus(first(x)))``, one value per example.

        Args:
            x: inputs ``[..., inputs]``.

        Returns:
            Outputs ``[...]``.
        """
        return self.second(nn.functional.softplus(self.first(x))).squeeze(-1)


def train_mlp(
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Loss,
    hidden: int,
    first_layer_std: torch.Tensor,
    other_std: float,
    settings: SGDSettings,
    generator: torch.Generator,
) -> MLP:
    """CorrDP-SGD for a one-hidden-layer network (paper Eq. 5): the first-layer weight column of input
    i gets noise std ``first_layer_std[i]``, every other parameter (first-layer bias included: its
    gradient moves under any change) ``other_std``. Inputs with zero std and zero column in ``x``
    (the *Partial* baseline) are simply never used.

    Args:
        x: the inputs, (n, m).
        y: the targets, (n,).
        loss: ``"squared"`` or ``"logistic"``.
        hidden: the hidden width.
        first_layer_std: the noise std of each input's first-layer weight column, (m,).
        other_std: the noise std of every other parameter (σ_S).
        settings: steps T, learning rate α, clip L, sampling rate q, projection radius and ridge λ.
        generator: the source of the initialisation, the Poisson masks and the noise.

    Returns:
        The trained network.
    """
    n, m = x.shape
    model = MLP(m, hidden, generator, x.dtype)
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    stds = {name: torch.full_like(p, other_std) for name, p in params.items()}
    stds["first.weight"] = first_layer_std.to(x.dtype).expand(hidden, m).clone()

    def example_loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return pointwise_loss(functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0), yi, loss)

    per_example = vmap(grad(example_loss), in_dims=(None, 0, 0))
    denominator = settings.sample_rate * n
    work = n * sum(v.numel() for v in params.values())
    with threads_for(work), torch.no_grad():
        for _ in range(settings.steps):
            if settings.sample_rate < 1.0:
                chosen = torch.rand(n, generator=generator, dtype=x.dtype) < settings.sample_rate
                xb, yb = x[chosen], y[chosen]
            else:
                xb, yb = x, y
            grads = per_example(params, xb, yb)
            norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(dim=1) for g in grads.values()))
            factor = (settings.clip_norm / norms.clamp_min(1e-300)).clamp(max=1.0)
            for name, g in grads.items():
                clipped = (g * factor.view(-1, *([1] * (g.dim() - 1)))).sum(dim=0) / denominator
                noise = torch.randn(g.shape[1:], generator=generator, dtype=x.dtype) * stds[name]
                step = clipped + 2.0 * settings.ridge * params[name] + noise
                params[name] = params[name] - settings.learning_rate * step
            if settings.projection_radius is not None:
                flat = _project(torch.cat([v.flatten() for v in params.values()]), settings.projection_radius)
                offset = 0
                for name, value in params.items():
                    params[name] = flat[offset : offset + value.numel()].view_as(value)
                    offset += value.numel()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
    return model
