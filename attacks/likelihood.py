"""``black_box`` likelihood attribute inference (docs/games.md): for each candidate value v,
``score_v = log P_model(y | u, v) + log Pr[v | u]`` — predictions only, no weights. It reads no claimed privacy
parameter: the model's predictions and the known prior are all it uses, and the audit fits its decision rule
(orientation, per-value offsets) on a selection split of the trials."""

from __future__ import annotations

import torch
from torch.func import vmap

from attacks.base import Attack, AttackOutput, View
from fdp_audit.training.interface import example_loss, predict_logits


class LikelihoodAttack(Attack):
    """The ``likelihood`` attack (black box; module docstring, docs/games.md): infers the protected attribute from
    the model's predictions, ``score_v = log P_model(y | u, v) + log Pr[v | u]`` for each candidate value v."""

    name = "likelihood"
    title = "likelihood of the label under the model's predictions"
    threat_model = "black_box"

    def infer(self, view: View) -> AttackOutput:
        """``score_v = log P_θ(y | u, v) + log Pr[v | u]`` for every trial's model and candidate (module docstring).

        Args:
            view: the final parameters ``[R, ...]`` (only queried through the model's predictions).

        Returns:
            Scores ``[R, V]`` (float64).
        """
        k = self.knowledge
        assert view.params is not None
        if k.per_trial:  # trial r's model on trial r's candidates
            logits = vmap(k.model.forward)(view.params, k.candidates)  # [R, V, out]
        else:
            logits = predict_logits(k.model, view.params, k.candidates)  # [R, V, out]
        labels = k.labels(logits.shape[0])[:, None].expand(logits.shape[:2])
        log_likelihood = -example_loss(logits, labels)
        return AttackOutput(log_likelihood + torch.log(k.prior.double().clamp_min(1e-300)))
