"""Black-box meta-classifier on shadow models (docs/games.md), in the ``isolated`` known-answer setting of
conftest.py: only the inserted target moves the weights of the protected columns, so a shadow model's
outputs on the two candidate completions reveal the inserted value, and the classifier learns that."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from scipy.stats import binom

from attacks import Knowledge, View
from attacks.shadow import ShadowModelAttack, output_features
from fdp_audit.errors import BadInputError


@pytest.fixture(scope="module")
def shadow_problem(isolated):
    """The target's mechanism run on the population split (protected columns zeroed, as in S)."""
    x = torch.as_tensor(isolated.data.population.x).clone()
    x[:, isolated.group.start:isolated.group.stop] = 0.0
    return replace(isolated.problem, x=x, y=torch.as_tensor(isolated.data.population.y))


def fitted(isolated, shadow_problem, targets, prior=(0.5, 0.5)) -> ShadowModelAttack:
    knowledge = Knowledge(isolated.problem.model, targets.candidates[0], int(targets.labels[0]), torch.tensor(prior),
                          shadow_problem=shadow_problem, shadow_models=32, shadow_seed=1)
    return ShadowModelAttack().fit(knowledge)


def test_features_are_centred_class_log_probabilities(isolated) -> None:
    params = isolated.train(None, 2)
    candidates = isolated.targets(1, seed=0).candidates[0]
    features = torch.as_tensor(output_features(isolated.problem.model, params, candidates))
    logit = params["layer0.weight"][:, 0, :] @ candidates.T + params["layer0.bias"]  # [R, V]
    expected = torch.stack([torch.nn.functional.logsigmoid(-logit), torch.nn.functional.logsigmoid(logit)], dim=-1)
    expected = expected - expected.mean(dim=1, keepdim=True)  # centred over the candidates, per class
    torch.testing.assert_close(features, expected.flatten(1).double(), rtol=1e-6, atol=1e-6)


def test_recovers_the_value_a_nonprivate_model_was_trained_on(isolated, shadow_problem) -> None:
    """One target, 24 models each trained with it under a value drawn per model: every guess is right."""
    targets = isolated.targets(24, seed=6)
    shared = replace(targets, candidates=targets.candidates[:1].expand(24, -1, -1),
                     labels=targets.labels[:1].expand(24))
    assert 0 < int(targets.truth.sum()) < 24
    attack = fitted(isolated, shadow_problem, shared)
    out = attack.infer(View(isolated.train(shared, 24)))
    assert out.scores.shape == (24, 2)
    assert torch.equal(out.guess, shared.truth)


def test_no_better_than_the_prior_without_the_target(isolated, shadow_problem) -> None:
    """Models trained without the target are independent of its secret: successes above the 0.999 quantile
    of Bin(200, 0.7) would be a leak (probability ≤ 1e-3 without one)."""
    prior, count = (0.7, 0.3), 200
    targets = isolated.targets(count, seed=8, prior=prior)
    attack = fitted(isolated, shadow_problem, targets, prior)
    guess = attack.infer(View(isolated.train(None, count, seed=12))).guess
    assert int((guess == targets.truth).sum()) <= binom.ppf(0.999, count, max(prior))


def test_needs_shadow_knowledge(isolated, shadow_problem) -> None:
    candidates = isolated.targets(1, seed=0).candidates[0]
    base = Knowledge(isolated.problem.model, candidates, 0, torch.tensor([0.5, 0.5]))
    with pytest.raises(BadInputError, match="shadow_problem"):
        ShadowModelAttack().fit(base)
    with pytest.raises(BadInputError, match="two shadow models per candidate"):
        ShadowModelAttack().fit(replace(base, shadow_problem=shadow_problem, shadow_models=3))
    with pytest.raises(BadInputError, match="one target"):
        ShadowModelAttack().fit(replace(base, candidates=candidates[None].expand(2, -1, -1),
                                        shadow_problem=shadow_problem))
