"""``black_box`` likelihood attribute inference (SPEC 3): for each candidate value v,
``score_v = log P_model(y | u, v) + log Pr[v | u]`` — predictions only, no weights."""

from __future__ import annotations

import torch

from attacks.base import Attack, AttackOutput, View
from fdp_audit.training.engine import predict_logits
from fdp_audit.training.models import example_loss


class LikelihoodAttack(Attack):
    name = "likelihood"
    threat_model = "black_box"

    def infer(self, view: View) -> AttackOutput:
        k = self.knowledge
        assert view.params is not None
        logits = predict_logits(k.model, view.params, k.candidates)  # [R, V, out]
        labels = torch.full(logits.shape[:2], k.label, dtype=torch.long)
        log_likelihood = -example_loss(logits, labels)
        return AttackOutput(log_likelihood + torch.log(k.prior.double().clamp_min(1e-300)))
