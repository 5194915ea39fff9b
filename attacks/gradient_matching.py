"""``white_box`` informed reconstruction of continuous protected features by gradient matching (docs/games.md), for
any differentiable model (MLPs, CNNs): find the protected values v whose loss gradient matches the informed
residual r(θ) of :mod:`attacks.informed`,

    v̂ = argmin_v ‖∇_θ ℓ(θ; x(v), y) − r(θ)‖²,   x(v) = the target with protected coordinates v,

a nonlinear least-squares problem in k unknowns, solved by Levenberg–Marquardt (Gauss–Newton steps on the
Jacobian ∂∇_θℓ/∂v with Marquardt's diagonal damping, a step kept only when it lowers the mismatch). Every
model runs its own iteration with its own damping, all batched under ``vmap``. At an exact optimum the true
value is a zero of the mismatch, which the iteration reaches quadratically once close.

The mismatch is not convex in v for an MLP, so the search runs from two starts and keeps, per model, the
end point with the smaller mismatch: the prior's centre (the best guess before seeing θ) and, for a linear
first layer, the closed-form reading of :mod:`attacks.reconstruction` (exact at an optimum, but it uses the
first layer only; matching every layer's gradient averages the noise of a private model over all of them).
"""

from __future__ import annotations

import torch
from torch.func import grad, jacfwd, vmap

from attacks.base import Attack, AttackOutput, Knowledge, View
from attacks.informed import as_double, informed_residual
from attacks.reconstruction import FIRST_LAYER_KINDS, read_first_layer
from fdp_audit.training.interface import Params, example_loss, flatten

MAX_ITERATIONS = 200
INITIAL_DAMPING = 1e-3
# Iteration stops once every model's proposed step is below this, relative to its estimate's size (plus one).
STEP_TOLERANCE = 1e-12


class GradientMatchingReconstruction(Attack):
    """The ``gradient_matching`` attack (white box, informed; module docstring, docs/games.md): reconstructs the
    continuous protected values as ``v̂ = argmin_v ‖∇_θ ℓ(θ; x(v), y) − r(θ)‖²`` with r the informed residual of
    :mod:`attacks.informed`, by batched Levenberg–Marquardt from the prior's centre and the closed-form reading."""

    name = "gradient_matching"
    title = "informed gradient-matching reconstruction"
    threat_model = "white_box"
    supports = frozenset({"continuous"})
    needs = ("rest_x", "rest_y")

    def fit(self, knowledge: Knowledge) -> GradientMatchingReconstruction:
        """Check that the knowledge has what the attack needs.

        Args:
            knowledge: a continuous target with its protected coordinates and the other records.

        Returns:
            The attack itself.

        Raises:
            BadInputError: ``rest_x``/``rest_y`` are missing, or the protected coordinates are missing or invalid.
        """
        super().fit(knowledge)
        knowledge.protected_index()
        return self

    def infer(self, view: View) -> AttackOutput:
        """``v̂ = argmin_v ‖∇_θ ℓ(θ; x(v), y) − r(θ)‖²`` per trial, the better (smaller mismatch) of the searches
        from the prior's centre and, for a linear first layer, from the closed-form reading (module docstring).

        Args:
            view: the final parameters ``[R, ...]``.

        Returns:
            An estimate ``[R, k]`` (float64) of the protected coordinates.
        """
        k = self.knowledge
        assert view.params is not None
        residual = informed_residual(k, view.params)
        starts = [k.prior_centre(residual.shape[0])]
        if k.model.kind in FIRST_LAYER_KINDS:
            starts.append(read_first_layer(k, residual))
        ends = [match_gradient(k, view.params, residual, start) for start in starts]
        costs = torch.stack([cost for _, cost in ends])  # [starts, R]; NaN never wins
        best = torch.where(torch.isnan(costs), torch.inf, costs).argmin(dim=0)
        estimates = torch.stack([v for v, _ in ends])  # [starts, R, k]
        return AttackOutput(estimate=estimates[best, torch.arange(len(best))])


def match_gradient(knowledge: Knowledge, params: Params, target_gradient: torch.Tensor,
                   start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``argmin_v ‖∇_θ ℓ(θ_r; x(v), y) − g_r‖²`` for every model r by batched Levenberg–Marquardt (module
    docstring), at most :data:`MAX_ITERATIONS` steps.

    Args:
        knowledge: the target (template row, protected coordinates, label) and the model.
        params: the models' parameters ``[R, ...]``.
        target_gradient: the gradients g to match ``[R, P]`` (flattened parameters).
        start: the starting protected values ``[R, k]``.

    Returns:
        The protected values ``[R, k]`` (float64) whose gradient best matches g, and their remaining squared
        mismatch ``[R]``.
    """
    params = as_double(params)
    target_gradient = target_gradient.double()
    trials = target_gradient.shape[0]
    protected, templates, labels = knowledge.protected_index(), knowledge.templates(trials), knowledge.labels(trials)

    def mismatch(p: Params, v: torch.Tensor, g: torch.Tensor, template: torch.Tensor,
                 label: torch.Tensor) -> torch.Tensor:
        x = template.index_put((protected,), v)
        return flatten(grad(lambda q: example_loss(knowledge.model.forward(q, x), label))(p), lead=0) - g

    def error(v: torch.Tensor) -> torch.Tensor:
        return vmap(mismatch)(params, v, target_gradient, templates, labels)

    def jacobian(v: torch.Tensor) -> torch.Tensor:
        return vmap(jacfwd(mismatch, argnums=1))(params, v, target_gradient, templates, labels)

    v = start.double().clone()
    damping = torch.full((v.shape[0],), INITIAL_DAMPING, dtype=torch.float64)
    for _ in range(MAX_ITERATIONS):
        e, j = error(v), jacobian(v)  # [R, P], [R, P, k]
        normal = j.transpose(1, 2) @ j  # JᵀJ, [R, k, k]
        scaled = torch.diag_embed(normal.diagonal(dim1=1, dim2=2) + 1e-30)
        step = torch.linalg.solve(normal + damping[:, None, None] * scaled, -(j.transpose(1, 2) @ e[..., None]))[..., 0]
        candidate = v + step
        better = error(candidate).pow(2).sum(dim=1) < e.pow(2).sum(dim=1)  # NaN: never
        v = torch.where(better[:, None], candidate, v)
        damping = torch.where(better, damping / 3, damping * 4).clamp(1e-12, 1e12)
        # a proposed step this small means a stationary point (or a model stuck at maximal damping)
        if bool(torch.all(step.norm(dim=1) < STEP_TOLERANCE * (v.norm(dim=1) + 1.0))):
            break
    return v, error(v).pow(2).sum(dim=1)
