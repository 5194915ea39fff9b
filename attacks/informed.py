"""``white_box`` informed gradient attribute inference (docs/games.md): the adversary knows S \\ {x} and the objective
``Σ_{x∈S} ℓ(θ; x) + (λ/2)‖θ‖²``. At an optimum θ of the objective on S the gradient vanishes, so the target's
loss gradient equals the *residual*

    r(θ) = −(Σ_{x' ∈ S \\ {x}} ∇ℓ(θ; x') + λθ),

which the adversary computes without the target. Each candidate completion x_v is scored by how well its
own gradient matches: ``score_v = −‖∇ℓ(θ; x_v) − r(θ)‖``. For a model trained to its optimum the true
candidate matches exactly (score 0 up to the optimiser's tolerance); for a noisy model the residual carries
the training noise and the attack degrades gracefully. What it knows is S \\ {x}, the objective and λ (the
trainer's, not a privacy claim); it reads no noise multiplier or sampling rate.
"""

from __future__ import annotations

import torch
from torch.func import grad, vmap

from attacks.base import Attack, AttackOutput, Knowledge, View
from fdp_audit.training.interface import Params, example_loss, flatten


def as_double(params: Params) -> Params:
    """The parameters in float64 (the informed attacks match gradients to the optimiser's tolerance).

    Args:
        params: named parameter tensors (any leading model dimension).

    Returns:
        The same names, each tensor cast to float64.
    """
    return {name: value.double() for name, value in params.items()}


def informed_residual(knowledge: Knowledge, params: Params) -> torch.Tensor:
    """The informed residual ``r(θ) = −(Σ_{x' ∈ S∖{x}} ∇ℓ(θ; x') + λθ)`` of every model (module docstring): the
    target's loss gradient at an optimum of the objective. One vmapped backward pass of the summed loss per model
    (no per-example gradients).

    Args:
        knowledge: the adversary's knowledge, with the other records ``rest_x``, ``rest_y`` and λ
            (``l2_regularization``).
        params: the models' parameters ``[R, ...]``.

    Returns:
        ``[R, P]`` (float64), P the number of parameters, flattened in the model's order.

    Raises:
        BadInputError: ``knowledge`` lacks ``rest_x`` or ``rest_y``.
    """
    knowledge.require("informed white-box attack", "rest_x", "rest_y")
    params = as_double(params)
    x, y = knowledge.rest_x.double(), knowledge.rest_y

    def others_loss(p: Params) -> torch.Tensor:
        return example_loss(knowledge.model.forward(p, x), y).sum()

    others = flatten(vmap(grad(others_loss))(params), lead=1)
    return -(others + knowledge.l2_regularization * flatten(params, lead=1))


def candidate_gradients(knowledge: Knowledge, params: Params) -> torch.Tensor:
    """``∇_θ ℓ(θ_r; x_v, y)`` for every model r and candidate completion x_v of its target.

    Args:
        knowledge: the target's candidates (``[V, d]``, or ``[R, V, d]`` for a target per trial) and label.
        params: the models' parameters ``[R, ...]``.

    Returns:
        ``[R, V, P]`` (float64), flattened parameters.
    """
    labels = knowledge.labels(next(iter(params.values())).shape[0])

    def loss(p: Params, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return example_loss(knowledge.model.forward(p, x), label)

    per_model = vmap(grad(loss), in_dims=(None, 0, None))  # over candidates
    per_candidate = vmap(per_model, in_dims=(0, 0 if knowledge.per_trial else None, 0))(
        as_double(params), knowledge.candidates.double(), labels)
    return flatten(per_candidate, lead=2)


class InformedGradientAttack(Attack):
    """The ``informed_gradient`` attack (white box, informed adversary knowing S ∖ {x}; module docstring,
    docs/games.md): infers the protected attribute by scoring each candidate completion x_v with
    ``−‖∇ℓ(θ; x_v) − r(θ)‖``, r(θ) = −(Σ_{x' ∈ S∖{x}} ∇ℓ(θ; x') + λθ) the residual the target's gradient equals at
    an optimum."""

    name = "informed_gradient"
    title = "informed match of the gradient residual"
    threat_model = "white_box"
    needs = ("rest_x", "rest_y")

    def infer(self, view: View) -> AttackOutput:
        """``score_v = −‖∇ℓ(θ; x_v) − r(θ)‖₂`` for every trial's final model θ (module docstring).

        Args:
            view: the final parameters ``[R, ...]``.

        Returns:
            Scores ``[R, V]`` (float64).
        """
        k = self.knowledge
        assert view.params is not None
        residual = informed_residual(k, view.params)  # [R, P]
        gradients = candidate_gradients(k, view.params)  # [R, V, P]
        return AttackOutput(-(gradients - residual[:, None, :]).norm(dim=-1))
