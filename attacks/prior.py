"""``prior`` threat model: the Bayes-optimal guess from Pr[v | u] without looking at the model. Its success
is Ball (docs/accounting.md) and it is the baseline other attacks are reported against. For continuous protected
features the guess is the prior's centre (the centre of the Ball-maximising ball for the Gaussian and box
priors of docs/accounting.md), and for a protected subspace of an image its mean, the visible part alone."""

from __future__ import annotations

import torch

from attacks.base import Attack, AttackOutput, View


class PriorAttack(Attack):
    """The ``prior`` attack (no model; module docstring, docs/accounting.md): the Bayes-optimal guess from
    Pr[v | u] alone (the prior's centre for continuous features, the visible part for an image's protected
    subspace), whose success is Ball: the baseline every other attack is reported against."""

    name = "prior"
    title = "the prior's best guess, without the model"
    threat_model = "prior"
    supports = frozenset({"categorical", "continuous", "subspace"})

    def infer(self, view: View) -> AttackOutput:
        """The prior's guess in every trial, whatever the view holds: ``score_v = log Pr[v | u]`` for a
        categorical attribute (its argmax is the Bayes-optimal guess, success Ball, docs/accounting.md), the prior's
        centre for continuous protected coordinates, and 0 (the prior's mean) for a protected subspace.

        Args:
            view: any view; only its leading trial dimension R is read.

        Returns:
            Scores ``[R, V]`` (float64), or an estimate ``[R, k]`` (continuous) or ``[R, m]`` (subspace coordinates).
        """
        trials = _trial_count(view)
        subspace = self.knowledge.protected_subspace
        if subspace is not None:  # coordinates in the protected subspace: the prior's mean is 0
            return AttackOutput(estimate=torch.zeros(trials, subspace.dimension, dtype=torch.float64))
        if self.knowledge.protected_coordinates is not None:
            return AttackOutput(estimate=self.knowledge.prior_centre(trials).clone())
        return AttackOutput(torch.log(self.knowledge.prior.double().clamp_min(1e-300)).expand(trials, -1).clone())


def _trial_count(view: View) -> int:
    for value in (view.noisy_private_sums, view.public_gradients):
        if value is not None:
            return value.shape[0]
    assert view.params is not None
    return next(iter(view.params.values())).shape[0]
