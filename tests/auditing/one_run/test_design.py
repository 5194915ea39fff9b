"""The guess count of a one-run audit, fixed from the claim before looking."""

import numpy as np
import pytest

from fdp_audit.auditing.one_run.analysis import family_epsilon
from fdp_audit.auditing.one_run.design import candidate_counts, designed_guess_count, predicted_correct
from fdp_audit.auditing.one_run.guesser import StepModel, candidate_pattern, mixture_scores, rank_guesses
from fdp_audit.auditing.one_run.simulation import simulate_release
from fdp_audit.claim import Claim


def test_prediction_is_the_neyman_pearson_guesser_on_the_claimed_mechanism():
    """The predicted right guesses among the c most confident match an independent simulation of the same
    mechanism and guesser (other seeds) within 4 standard errors of the 8-seed mean."""
    claim = Claim.stated("dp_sgd", 1.0, 0.05, 100, 1e-5).one_run_curve("add_remove")
    predicted = predicted_correct(claim.spec, 1000, 2)
    rng = np.random.default_rng(99)
    pattern = candidate_pattern("inclusion", 2)
    runs = []
    for _ in range(8):
        release, secrets = simulate_release(rng, 1000, "inclusion", 2, 1.0, 0.05, 100, updates=True)
        runs.append(rank_guesses(mixture_scores(-release.updates, pattern, StepModel(0.05, 1.0)), secrets).correct)
    runs = np.array(runs)
    for c in (50, 200, 1000):
        error = np.std(runs[:, c - 1]) * np.sqrt(1 / 8 + 1 / 2) + 1
        assert abs(predicted[c - 1] - runs[:, c - 1].mean()) <= 4 * error


def test_designed_count_is_fixed_by_the_claim_alone():
    """Same claim, canaries and level: the same count (it is cached, and recomputed equal); it lies on the
    candidate grid, and at the claimed mechanism's predicted counts it certifies a family ε at least that of the
    smallest and of the largest candidate count (up to the design grid's 3.5 % steps in 1/z)."""
    claim = Claim.stated("dp_sgd", 1.0, 0.05, 100, 1e-5).one_run_curve("add_remove")
    count = designed_guess_count(claim.spec, claim.family, 1000, 2, 0.05)
    assert count in candidate_counts(1000)
    again = Claim.stated("dp_sgd", 1.0 + 1e-12, 0.05, 100, 1e-5).one_run_curve("add_remove")
    assert designed_guess_count(again.spec, again.family, 1000, 2, 0.05) == count
    predicted = predicted_correct(claim.spec, 1000, 2)
    certified = {c: family_epsilon(claim.family, 1000, c, int(round(predicted[c - 1])), 2, 0.05, 0.035)
                 for c in (count, 8, 1000)}
    assert certified[count] > 0 and certified[count] >= 0.95 * max(certified[8], certified[1000])


def test_bad_design_inputs_are_refused():
    claim = Claim.stated("dp_sgd", 1.0, 0.05, 100, 1e-5).one_run_curve("add_remove")
    with pytest.raises(ValueError):
        designed_guess_count(claim.spec, claim.family, 1000, 2, 1.5)
