"""What an informed adversary recomputes of a training run (:mod:`attacks.iterates_matching`): the logits of many
models on their own inputs, and the clipped private gradient sum of the whole data set S at given parameters,
through the engine's fast paths (grouped convolutions and per-layer norms for the CNN, docs/images.md) where
the model has one, ``torch.func`` otherwise."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from fdp_audit.training import conv_ghost, ghost
from fdp_audit.training.engine import TrainingProblem, flatten
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss, norm_groups


def models_logits(model: Model, params: Params, x: torch.Tensor) -> torch.Tensor:
    """Logits ``[R, N, O]`` of R models, each on its own inputs ``x`` ``[R, N, d]``; differentiable twice (in the
    parameters and the inputs). The CNN's convolutions are batched matrix products over unfolded patches rather
    than grouped convolutions: the same layers (:meth:`Model.forward`), and a double backward pass through them
    is a few batched products where a grouped convolution's runs one convolution per group."""
    if not conv_ghost.supports(model):
        return vmap(model.forward)(params, x)
    r, n = x.shape[:2]
    side = model.image_side
    h = x.reshape(r * n, 1, side, side)
    for i, width in enumerate(model.channels, start=1):
        patches = F.unfold(h, 3, padding=1).reshape(r, n, h.shape[1] * 9, side * side)
        weight = params[f"conv{i}.weight"].reshape(r, width, -1)
        z = torch.einsum("rok,rnkl->rnol", weight, patches) + params[f"conv{i}.bias"][:, None, :, None]
        z = F.group_norm(z.reshape(r * n, width, side, side), norm_groups(width)).reshape(r, n, width, side, side)
        z = z * params[f"norm{i}.weight"][:, None, :, None, None] + params[f"norm{i}.bias"][:, None, :, None, None]
        h = F.avg_pool2d(F.relu(z.reshape(r * n, width, side, side)), 2)
        side //= 2
    features = h.reshape(r, n, -1)
    return torch.baddbmm(params["fc.bias"][:, None, :], features, params["fc.weight"].transpose(1, 2))


def public_inputs(problem: TrainingProblem, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The public loss's model inputs for records ``x`` ``[..., d]`` (ℓ_pub∘Ψ reads Ψ(x) only); a public loss
    with fresh padding noise has none fixed."""
    assert problem.public_loss is not None and not problem.public_loss.pad_width
    flat = x.reshape(-1, x.shape[-1])
    inputs = problem.public_loss.inputs(problem.feature_map(flat, y.reshape(-1)))
    return inputs.to(x.dtype).reshape(*x.shape[:-1], -1)


def private_losses(problem: TrainingProblem, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``ℓ_priv`` ``[R, N]`` of R models on their own records ``x`` ``[R, N, d]``: ``ℓ − ℓ_pub∘Ψ`` for a
    decomposed recipe, ``ℓ`` otherwise."""
    loss = example_loss(models_logits(problem.model, params, x), y)
    public = problem.public_loss
    if problem.recipe.private_loss != "decomposed" or public is None:
        return loss
    logits = models_logits(problem.model, params, public_inputs(problem, x, y))
    return loss - (label_free_loss(logits) if public.label_free else example_loss(logits, y))


def clipped_private_sums(problem: TrainingProblem, params: Params, clip_norm: float) -> torch.Tensor:
    """``Σ_{x ∈ S} clip_C(∇ℓ_priv(θ_r; x))`` for every model r, ``[R, P]``, over the problem's whole data set."""
    model = problem.model
    r = next(iter(params.values())).shape[0]
    x = problem.x.to(next(iter(params.values())).device)
    y = problem.y.to(x.device)
    decomposed = problem.recipe.private_loss == "decomposed" and problem.public_loss is not None
    if conv_ghost.supports(model):
        public = ghost.PublicTerm(public_inputs(problem, x, y).expand(r, -1, -1), problem.public_loss.label_free
                                  ) if decomposed else None
        batch = ghost.PrivateBatch(x.expand(r, -1, -1), y.expand(r, -1), torch.ones(r, len(x), dtype=torch.bool,
                                                                                    device=x.device), public)
        return conv_ghost.clipped_private_sum(model, params, batch, clip_norm)

    def one(p: Params, record: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return private_losses(problem, {k: v[None] for k, v in p.items()}, record[None, None], label[None, None])[0, 0]

    per_example = flatten(vmap(vmap(grad(one), in_dims=(None, 0, 0)), in_dims=(0, None, None))(params, x, y), lead=2)
    norms = per_example.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (per_example * (clip_norm / norms).clamp(max=1.0)).sum(dim=1)
