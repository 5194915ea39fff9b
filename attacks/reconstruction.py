"""``white_box`` informed reconstruction of continuous protected features in closed form (docs/games.md).

The informed residual r(θ) of :mod:`attacks.informed` is the target's loss gradient at an optimum. For a
first layer that is linear with a bias, ``h = W x + b``, that gradient is rank one:

    ∇_W ℓ = δ x̃ᵀ restricted to the inputs, ∇_b ℓ = δ,   with x̃ = (u, v, 1), δ = ∂ℓ/∂h ∈ R^H,

for logistic regression (H = number of logits, δ = σ(wᵀx + b) − y), linear regression and the first layer
of an MLP alike. The residual is therefore proportional to the target's feature vector, and the known
coordinates (u, 1) -- Ψ(x) = u and the bias input -- fix the scale: least squares over them gives
``δ̂ = (R_W[:, pub] u + r_b) / (‖u‖² + 1)`` and then ``v̂ = R_W[:, prot]ᵀ δ̂ / ‖δ̂‖²``. At an exact optimum
this is exact; when δ̂ vanishes (the target is fitted perfectly, nothing to read) the estimate is the
prior's centre. Like :mod:`attacks.informed` it reads no claimed privacy parameter.
"""

from __future__ import annotations

import torch

from attacks.base import Attack, AttackOutput, Knowledge, View
from attacks.informed import informed_residual
from fdp_audit.errors import BadInputError
from fdp_audit.training.interface import unflatten

FIRST_LAYER_KINDS = ("logistic", "mlp")


class ClosedFormReconstruction(Attack):
    """The ``reconstruction`` attack (white box, informed; module docstring, docs/games.md): reconstructs continuous
    protected features in closed form from the rank-one first-layer part of the informed residual,
    ``δ̂ = (R_W[:, pub] u + r_b) / (‖u‖² + 1)`` and ``v̂ = R_W[:, prot]ᵀ δ̂ / ‖δ̂‖²``; exact at an optimum."""

    name = "reconstruction"
    title = "informed closed-form reconstruction"
    threat_model = "white_box"
    supports = frozenset({"continuous"})
    needs = ("rest_x", "rest_y")

    def fit(self, knowledge: Knowledge) -> ClosedFormReconstruction:
        """Check that the model has a linear first layer and the knowledge what the attack needs.

        Args:
            knowledge: a continuous target with its protected coordinates and the other records.

        Returns:
            The attack itself.

        Raises:
            BadInputError: the model kind has no linear first layer (not one of :data:`FIRST_LAYER_KINDS`),
                ``rest_x``/``rest_y`` are missing, or the protected coordinates are missing or invalid.
        """
        if knowledge.model.kind not in FIRST_LAYER_KINDS:
            raise BadInputError(f"attack {self.name!r} needs a linear first layer, not a {knowledge.model.kind}",
                                "model.kind")
        super().fit(knowledge)
        knowledge.protected_index()
        return self

    def infer(self, view: View) -> AttackOutput:
        """The protected values read off the informed residual r(θ) through the first layer (module docstring).

        Args:
            view: the final parameters ``[R, ...]``.

        Returns:
            An estimate ``[R, k]`` (float64) of the protected coordinates.
        """
        assert view.params is not None
        residual = informed_residual(self.knowledge, view.params)
        return AttackOutput(estimate=read_first_layer(self.knowledge, residual))


def read_first_layer(knowledge: Knowledge, target_gradient: torch.Tensor) -> torch.Tensor:
    """The protected values read off a target's loss gradient through the rank-one first layer, with the scale fixed
    by the known coordinates (u, 1): ``δ̂ = (R_W[:, pub] u + r_b) / (‖u‖² + 1)``, ``v̂ = R_W[:, prot]ᵀ δ̂ / ‖δ̂‖²``
    (module docstring); the prior's centre where δ̂ = 0.

    Args:
        knowledge: the target (its template row and protected coordinates) and the model, whose first layer is
            ``layer0``.
        target_gradient: the target's loss gradient ``[R, P]`` (flattened parameters), e.g. the informed
            residual.

    Returns:
        The estimate ``[R, k]`` (float64).
    """
    gradient = unflatten(target_gradient.double(), knowledge.model)
    weight, bias = gradient["layer0.weight"], gradient["layer0.bias"]  # [R, H, d], [R, H]
    protected = knowledge.protected_index()
    public = torch.tensor([j for j in range(weight.shape[-1]) if j not in set(protected.tolist())], dtype=torch.long)
    u = knowledge.templates(bias.shape[0])[:, public]  # [R, d - k]
    delta = (torch.einsum("rhj,rj->rh", weight[:, :, public], u) + bias) / ((u * u).sum(dim=1) + 1.0)[:, None]
    size = (delta * delta).sum(dim=1)  # [R]
    estimate = torch.einsum("rh,rhk->rk", delta, weight[:, :, protected]) / size.clamp_min(1e-300)[:, None]
    return torch.where((size > 0)[:, None], estimate, knowledge.prior_centre(estimate.shape[0]))
