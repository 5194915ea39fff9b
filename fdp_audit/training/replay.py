"""What an informed adversary recomputes of a training run (:mod:`attacks.iterates_matching`): the logits of many
models on their own inputs, and the clipped private gradient sum of the whole data set S at given parameters,
through the engine's fast paths (grouped convolutions and per-layer norms of a layer plan, docs/images.md) where
the model has one, ``torch.func`` otherwise."""

from __future__ import annotations

import torch
from torch.func import grad, vmap

from fdp_audit.training import conv_ghost, ghost
from fdp_audit.training.engine import TrainingProblem, flatten
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss


def models_logits(model: Model, params: Params, x: torch.Tensor) -> torch.Tensor:
    """Logits ``[R, N, O]`` of R models, each on its own inputs ``x`` ``[R, N, d]``: the layer plan's grouped
    forward pass (:func:`fdp_audit.training.conv_ghost.forward`) where the model has one, ``vmap`` otherwise.

    Args:
        model: the architecture.
        params: the stacked parameters by name, ``[R, *shape]``.
        x: each model's inputs ``[R, N, d]``.

    Returns:
        Logits ``[R, N, O]``.
    """
    if conv_ghost.supports(model):
        return conv_ghost.forward(model, params, x)
    return vmap(model.forward)(params, x)


def public_inputs(problem: TrainingProblem, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The public loss's model inputs for records ``x`` ``[..., d]`` (ℓ_pub∘Ψ reads Ψ(x) only); a public loss
    with fresh padding noise has none fixed.

    Args:
        problem: the training problem, with a public loss that draws no padding noise.
        x: records ``[..., d]``.
        y: their labels ``[...]``.

    Returns:
        The public loss's inputs ``[..., n_inputs]``, in ``x``'s dtype.
    """
    assert problem.public_loss is not None and not problem.public_loss.pad_width
    flat = x.reshape(-1, x.shape[-1])
    inputs = problem.public_loss.inputs(problem.public_map(flat, y.reshape(-1)))
    return inputs.to(x.dtype).reshape(*x.shape[:-1], -1)


def private_losses(problem: TrainingProblem, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``ℓ_priv`` ``[R, N]`` of R models on their own records ``x`` ``[R, N, d]``: ``ℓ − ℓ_pub∘Ψ`` for a
    decomposed recipe, ``ℓ`` otherwise.

    Args:
        problem: the training problem (recipe and public loss).
        params: the stacked parameters by name, ``[R, *shape]``.
        x: each model's records ``[R, N, d]``.
        y: their labels ``[R, N]``.

    Returns:
        The private losses ``[R, N]``.
    """
    loss = example_loss(models_logits(problem.model, params, x), y)
    public = problem.public_loss
    if problem.recipe.private_loss != "decomposed" or public is None:
        return loss
    logits = models_logits(problem.model, params, public_inputs(problem, x, y))
    return loss - (label_free_loss(logits) if public.label_free else example_loss(logits, y))


def clipped_private_sums(problem: TrainingProblem, params: Params, clip_norm: float) -> torch.Tensor:
    """``Σ_{x ∈ S} clip_C(∇ℓ_priv(θ_r; x))`` for every model r, ``[R, P]``, over the problem's whole data set.

    Args:
        problem: the training problem whose data set S is summed over.
        params: the stacked parameters by name, ``[R, *shape]``.
        clip_norm: the clipping norm C.

    Returns:
        The clipped sums, flattened in parameter order, ``[R, P]``.
    """
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
