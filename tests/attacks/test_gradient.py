"""White-box gradient attribute inference (docs/games.md): the candidate completion with the smallest loss gradient
at the final weights is the one the model was trained on."""

from __future__ import annotations

import torch

from attacks import Knowledge, View
from attacks.gradient import GradientNormAttack


def scores_per_target(setting, targets, params) -> torch.Tensor:
    """One Knowledge per target (its own candidates and label); ``[R, V]``."""
    rows = []
    for r in range(len(targets.truth)):
        knowledge = Knowledge(setting.problem.model, targets.candidates[r], int(targets.labels[r]),
                              torch.tensor([0.5, 0.5]))
        view = View({name: p[r:r + 1] for name, p in params.items()})
        rows.append(GradientNormAttack().fit(knowledge).infer(view).scores[0])
    return torch.stack(rows)


def test_scores_are_negative_gradient_norms_in_closed_form(isolated) -> None:
    """Logistic loss: ∇_w ℓ = (σ(wᵀx + b) − y)·x and ∇_b ℓ = σ(wᵀx + b) − y, for every model and candidate."""
    targets = isolated.targets(3, seed=1)
    params = isolated.train(targets, 3)
    knowledge = Knowledge(isolated.problem.model, targets.candidates[0], int(targets.labels[0]),
                          torch.tensor([0.5, 0.5]))
    scores = GradientNormAttack().fit(knowledge).infer(View(params)).scores
    w, b = params["layer0.weight"][:, 0, :], params["layer0.bias"][:, 0]
    x = targets.candidates[0]
    residual = torch.sigmoid(w @ x.T + b[:, None]) - float(targets.labels[0])  # [R, V]
    expected = residual.abs() * torch.sqrt((x**2).sum(dim=1) + 1.0)[None, :]
    torch.testing.assert_close(scores, -expected, rtol=1e-5, atol=1e-6)


def test_recovers_the_value_a_nonprivate_model_was_trained_on(isolated) -> None:
    """Known answer (see the ``isolated`` fixture): trained with the target, the true value wins for every
    one of 24 targets; trained without it, no candidate is preferred (equal scores)."""
    targets = isolated.targets(24, seed=2)
    assert 0 < int(targets.truth.sum()) < 24  # both values occur
    with_target = scores_per_target(isolated, targets, isolated.train(targets, 24))
    assert torch.equal(with_target.argmax(dim=1), targets.truth)
    without = scores_per_target(isolated, targets, isolated.train(targets, 24, include=False))
    torch.testing.assert_close(without[:, 0], without[:, 1])
