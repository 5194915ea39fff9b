"""Black-box likelihood attribute inference (docs/games.md): ``score_v = log P_model(y | u, v) + log Pr[v | u]``."""

from __future__ import annotations

import torch
from scipy.stats import binom

from attacks import Knowledge, View
from attacks.likelihood import LikelihoodAttack


def test_scores_are_log_likelihood_plus_log_prior(isolated) -> None:
    targets = isolated.targets(4, seed=3)
    params = isolated.train(targets, 4)
    prior = torch.tensor([0.8, 0.2])
    for label in (0, 1):
        knowledge = Knowledge(isolated.problem.model, targets.candidates[0], label, prior)
        scores = LikelihoodAttack().fit(knowledge).infer(View(params)).scores
        logit = params["layer0.weight"][:, 0, :] @ targets.candidates[0].T + params["layer0.bias"]  # [R, V]
        log_likelihood = torch.nn.functional.logsigmoid(logit if label == 1 else -logit)
        torch.testing.assert_close(scores, log_likelihood + prior.log(), rtol=1e-5, atol=1e-5, check_dtype=False)


def test_impossible_values_get_a_finite_score(isolated) -> None:
    params = isolated.train(None, 2)
    candidates = isolated.targets(1, seed=0).candidates[0]
    knowledge = Knowledge(isolated.problem.model, candidates, 1, torch.tensor([1.0, 0.0]))
    out = LikelihoodAttack().fit(knowledge).infer(View(params))
    assert torch.isfinite(out.scores).all() and out.guess.tolist() == [0, 0]


def test_recovers_the_value_a_nonprivate_model_was_trained_on(isolated) -> None:
    targets = isolated.targets(24, seed=4)
    params = isolated.train(targets, 24)
    guesses = []
    for r in range(24):
        knowledge = Knowledge(isolated.problem.model, targets.candidates[r], int(targets.labels[r]),
                              torch.tensor([0.5, 0.5]))
        view = View({name: p[r:r + 1] for name, p in params.items()})
        guesses.append(int(LikelihoodAttack().fit(knowledge).infer(view).guess[0]))
    assert guesses == targets.truth.tolist()


def test_no_better_than_the_prior_without_the_target(population_model) -> None:
    """A model trained without the target is independent of its secret, so no attack beats Ball = 0.7. The
    models (200 independent SGD runs) have learnt the population link between the protected value and the
    label, which pulls the likelihood attack away from the prior's guess; it must still not beat the prior.
    Successes above the 0.999 quantile of Bin(200, 0.7) would be a leak: probability ≤ 1e-3 without one."""
    prior, count = (0.7, 0.3), 200
    targets = population_model.targets(count, seed=5, prior=prior)
    params = population_model.train(None, count, seed=11)
    successes = 0
    for r in range(count):
        knowledge = Knowledge(population_model.problem.model, targets.candidates[r], int(targets.labels[r]),
                              torch.tensor(prior))
        view = View({name: p[r:r + 1] for name, p in params.items()})
        successes += int(LikelihoodAttack().fit(knowledge).infer(view).guess[0] == targets.truth[r])
    assert successes <= binom.ppf(0.999, count, max(prior))
