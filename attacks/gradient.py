"""``white_box`` gradient attribute inference (docs/games.md): the candidate completion at which the final model's
loss gradient is smallest is the one it was trained on (training drives the trained records' gradients
towards zero). Scores are negative gradient norms. No claimed privacy parameter enters them; the audit fits
the decision rule (orientation, per-value offsets) on a selection split of the trials."""

from __future__ import annotations

from torch.func import grad, vmap

from attacks.base import Attack, AttackOutput, View
from fdp_audit.training.interface import example_loss, flatten


class GradientNormAttack(Attack):
    """The ``gradient`` attack (white box, final weights; module docstring, docs/games.md): infers the protected
    attribute as the candidate completion at which the final model's loss gradient is smallest, scoring each by
    its negative gradient norm ``−‖∇_θ ℓ(θ; x_v)‖``."""

    name = "gradient"
    title = "smallest loss gradient of the final model"
    threat_model = "white_box"

    def infer(self, view: View) -> AttackOutput:
        """``score_v = −‖∇_θ ℓ(θ; x_v, y)‖₂`` for every trial's final model θ and candidate completion x_v.

        Args:
            view: the final parameters ``[R, ...]``.

        Returns:
            Scores ``[R, V]``.
        """
        k = self.knowledge
        assert view.params is not None
        labels = k.labels(next(iter(view.params.values())).shape[0])

        def loss(params, x, label):
            return example_loss(k.model.forward(params, x), label)

        per_model = vmap(grad(loss), in_dims=(None, 0, None))  # over candidates
        per_candidate = vmap(per_model, in_dims=(0, 0 if k.per_trial else None, 0))(view.params, k.candidates, labels)
        return AttackOutput(-flatten(per_candidate, lead=2).norm(dim=-1))
