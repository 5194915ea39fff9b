"""``black_box`` membership attacks on a crafted input-space canary (docs/games.md, the membership game).

The canary is a record the auditor built: zero everywhere except a large value M on an input column that no
other record has a value in, with a label the initial model gets badly wrong (Annamalai & De Cristofaro,
NeurIPS 2024: worst-case initial parameters and a crafted canary make a final-model audit nearly tight). The
attacks only query the final model on inputs of their choice — no weights, no iterates — and read no claimed
privacy parameter; the audit fits each one's orientation and threshold on a selection split of the trials.

* ``canary_logit``: how much the canary's label gains at the canary over the same input without its crafted
  coordinate, ``Δ_y − mean_{j≠y} Δ_j`` with ``Δ = f(x_c) − f(x_ref)`` the logits' change (one logit: ``Δ``, the
  canary's label being the positive class). For a linear model this is M times the canary column's weights (the
  bias cancels): the sum of the canary's clipped contributions and of the noise along that coordinate, over
  every step — all the final model retains of the release there. (Annamalai & De Cristofaro score the canary's
  loss; far from its label the loss is this logit up to the bias, which adds the other records' influence.)
* ``noise_scale``: the scale of the model's response along input columns that no record touches,
  ``−½ log mean_{j,o} (f_o(x_ref + e_j) − f_o(x_ref))²``: for a linear model the RMS of those columns'
  weights, which hold nothing but the noise after whatever normalisation the mechanism applied. An honest
  mechanism divides by constants, so this does not depend on the data; a mechanism that normalises by the
  data set's size, the realised batch size or the data shows the canary's presence in it.

Scores are ``[R, 2]``: candidate 0 is the canary's absence (score 0), candidate 1 its presence.
"""

from __future__ import annotations

import torch

from attacks.base import Attack, AttackOutput, View
from fdp_audit.training.interface import predict_logits


def _device(view: View) -> torch.device:
    """Where the models are (the queries are built there: a model trained on a GPU is queried on it)."""
    assert view.params is not None
    return next(iter(view.params.values())).device


def _presence_scores(statistic: torch.Tensor) -> AttackOutput:
    statistic = statistic.double().cpu()
    return AttackOutput(torch.stack([torch.zeros_like(statistic), statistic], dim=1))


class CanaryLogitAttack(Attack):
    """The ``canary_logit`` attack (black box; module docstring, docs/games.md's membership game): infers whether the
    crafted canary was trained on from how much its label's logit gains at the canary over the same input without
    the crafted coordinate, ``Δ_y − mean_{j≠y} Δ_j`` with ``Δ = f(x_c) − f(x_ref)``."""

    name = "canary_logit"
    title = "change of the canary's logit"
    threat_model = "black_box"
    needs_input_canary = True

    def infer(self, view: View) -> AttackOutput:
        """The canary's presence score ``Δ_y − mean_{j≠y} Δ_j`` with ``Δ = f(x_c) − f(x_ref)`` (``Δ`` itself for
        one logit), from two queries of each final model (module docstring).

        Args:
            view: the final parameters ``[R, ...]`` (queried on the canary and its reference input only).

        Returns:
            Scores ``[R, 2]`` (float64, on the CPU): 0 for the canary's absence, the statistic for its presence.
        """
        k = self.knowledge
        logits = predict_logits(k.model, view.params, k.candidates.float().to(_device(view))).double()
        change = logits[:, 1] - logits[:, 0]  # [R, out]
        if change.shape[1] == 1:
            return _presence_scores(change[:, 0])
        label = int(k.label)
        others = torch.cat([change[:, :label], change[:, label + 1:]], dim=1)
        return _presence_scores(change[:, label] - others.mean(dim=1))


class NoiseScaleAttack(Attack):
    """The ``noise_scale`` attack (black box; module docstring, docs/games.md's membership game): infers whether the
    canary was trained on from the scale of the model's response along input columns no record touches,
    ``−½ log mean_{j,o} (f_o(x_ref + e_j) − f_o(x_ref))²``, which shows a normalisation by the data set's size, the
    realised batch size or the data."""

    name = "noise_scale"
    title = "model's response on the noise-only inputs"
    threat_model = "black_box"
    needs_input_canary = True
    needs = ("noise_inputs",)

    def infer(self, view: View) -> AttackOutput:
        """The presence score ``−½ log mean_{j,o} (f_o(x_ref + e_j) − f_o(x_ref))²`` over the noise-only input
        columns j and outputs o (module docstring), from K + 1 queries of each final model.

        Args:
            view: the final parameters ``[R, ...]``.

        Returns:
            Scores ``[R, 2]`` (float64, on the CPU): 0 for the canary's absence, the statistic for its presence.
        """
        k = self.knowledge
        assert k.noise_inputs is not None
        reference = k.candidates[0].float().to(_device(view))
        probes = reference.repeat(len(k.noise_inputs) + 1, 1)
        rows = torch.arange(1, len(probes), device=probes.device)
        probes[rows, torch.as_tensor(k.noise_inputs, device=probes.device)] += 1.0
        logits = predict_logits(k.model, view.params, probes).double()  # [R, K + 1, out]
        response = logits[:, 1:] - logits[:, :1]
        return _presence_scores(-0.5 * torch.log(response.square().mean(dim=(1, 2)).clamp_min(1e-300)))
