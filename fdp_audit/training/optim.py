"""Optimisers, learning-rate schedules and projection on stacked parameters ``[R, ...]`` (docs/training.md step 5:
post-processing of the noisy gradient, so they cost no privacy)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from fdp_audit.config import OptimizerConfig

Params = dict[str, torch.Tensor]


def learning_rate(config: OptimizerConfig, step: int, total_steps: int) -> float:
    """The learning rate at ``step``: constant, multiplied by ``step_gamma`` every ``step_every`` steps (``step``), or
    ``lr·(1 + cos(π·step/T))/2`` (``cosine``).

    Args:
        config: the mechanism's ``optimizer`` section (``lr``, ``schedule``, ``step_gamma``, ``step_every``).
        step: the steps taken so far (0 for the first).
        total_steps: the run's step count T (the cosine schedule's period).

    Returns:
        The learning rate.
    """
    if config.schedule == "step":
        return config.lr * config.step_gamma ** (step // config.step_every)
    if config.schedule == "cosine":
        return config.lr * 0.5 * (1.0 + math.cos(math.pi * step / max(total_steps, 1)))
    return config.lr


@dataclass
class Optimizer:
    """SGD with (heavy-ball) momentum, or Adam, applied to every model of a batch at once."""

    config: OptimizerConfig
    state: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    steps_taken: int = 0

    def step(self, params: Params, grads: Params, lr: float) -> Params:
        """One update of every model's parameters from its (noisy) gradient: ``θ − η·g`` (SGD), ``θ − η·b`` with
        ``b ← μ·b + g`` (heavy-ball momentum μ), or Adam (β₁ = 0.9, β₂ = 0.999, ε = 1e-8, bias-corrected moments).

        Args:
            params: the stacked parameters by name, ``[R, *shape]``.
            grads: the gradients, same names and shapes.
            lr: the learning rate of this step.

        Returns:
            The updated parameters (new tensors; the optimiser's own state is updated in place).
        """
        self.steps_taken += 1
        updated = {}
        for name, value in params.items():
            g = grads[name]
            slot = self.state.setdefault(name, {})
            if self.config.name == "adam":
                b1, b2, eps = 0.9, 0.999, 1e-8
                m = slot["m"] = slot.get("m", torch.zeros_like(g)) * b1 + (1 - b1) * g
                v = slot["v"] = slot.get("v", torch.zeros_like(g)) * b2 + (1 - b2) * g * g
                m_hat = m / (1 - b1 ** self.steps_taken)
                v_hat = v / (1 - b2 ** self.steps_taken)
                updated[name] = value - lr * m_hat / (v_hat.sqrt() + eps)
            elif self.config.momentum > 0:
                buf = slot["buf"] = slot.get("buf", torch.zeros_like(g)) * self.config.momentum + g
                updated[name] = value - lr * buf
            else:
                updated[name] = value - lr * g
        return updated


def project_l2(params: Params, radius: float) -> Params:
    """Project each model's full parameter vector onto the ℓ2 ball of ``radius``: ``θ·min(1, radius/‖θ‖₂)``.

    Args:
        params: the stacked parameters by name, ``[R, *shape]``.
        radius: the ball's radius (> 0).

    Returns:
        The projected parameters, same names and shapes.
    """
    r = next(iter(params.values())).shape[0]
    norm_sq = sum(v.reshape(r, -1).pow(2).sum(dim=1) for v in params.values())
    scale = torch.clamp(radius / norm_sq.sqrt().clamp_min(1e-30), max=1.0)
    return {k: v * scale.view(r, *([1] * (v.dim() - 1))) for k, v in params.items()}
