"""Decision rules fitted on a selection split (fdp_audit.auditing.decision): the exact best threshold in either
orientation for two candidates, offsets for more, and no invented leakage on null scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from fdp_audit.auditing.decision import DecisionRule, fit_decision_rule, selection_split
from fdp_audit.auditing.games import GameRecord
from fdp_audit.auditing.games.categorical import rate_comparisons
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.stats import lower_confidence_bound


def binary_scores(difference: np.ndarray) -> np.ndarray:
    return np.stack([np.zeros_like(difference), difference], axis=1)


def brute_force_best(difference: np.ndarray, labels: np.ndarray) -> int:
    """Most successes of any rule "guess 1 iff o·difference > t" over every orientation and threshold."""
    best = 0
    for o in (1, -1):
        d = o * difference
        for t in np.concatenate([[-np.inf], np.sort(d)]):
            best = max(best, int(((d > t) == labels.astype(bool)).sum()))
    return best


@pytest.mark.parametrize("seed", range(5))
def test_two_candidates_get_the_best_threshold_in_either_orientation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 301)
    difference = rng.normal(size=301) + (0.8 if seed % 2 else -0.8) * labels  # odd seeds: below the diagonal
    rule = fit_decision_rule(binary_scores(difference), labels)
    assert rule.successes(binary_scores(difference), labels) == brute_force_best(difference, labels)
    assert rule.orientation == (1 if seed % 2 else -1)


def test_an_attack_that_always_answers_the_same_way_gets_a_threshold() -> None:
    """The simulator game's likelihood ratio under a wrong claimed noise: always below 0 (argmax: always
    "simulator", success ½), yet larger in the real world. The fitted offset recovers the separation."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    difference = -8.0 + 2.0 * labels + rng.normal(size=400)
    scores = binary_scores(difference)
    assert DecisionRule(1, np.zeros(2)).successes(scores, labels) == int((labels == 0).sum())
    rule = fit_decision_rule(scores[::2], labels[::2])
    assert rule.successes(scores[1::2], labels[1::2]) >= 0.75 * 200  # Φ(1) = 0.84 expected


def test_offsets_for_several_candidates_improve_on_the_argmax() -> None:
    """Three candidates whose scores carry a per-candidate bias: the offsets undo it on selection trials."""
    rng = np.random.default_rng(1)
    labels = rng.choice(3, size=600, p=[0.5, 0.3, 0.2])
    scores = rng.normal(size=(600, 3)) + 2.0 * np.eye(3)[labels] + np.array([0.0, 3.0, -3.0])
    plain = DecisionRule(1, np.zeros(3))
    rule = fit_decision_rule(scores[::2], labels[::2])
    assert rule.successes(scores[::2], labels[::2]) > plain.successes(scores[::2], labels[::2])
    assert rule.successes(scores[1::2], labels[1::2]) > plain.successes(scores[1::2], labels[1::2]) + 60


def test_non_finite_scores_give_a_finite_rule() -> None:
    scores = np.array([[0.0, np.inf], [np.nan, 1.0], [-np.inf, 0.0], [0.0, 0.0]])
    rule = fit_decision_rule(scores, np.array([1, 1, 1, 0]))
    assert np.isfinite(rule.offsets).all() and rule.successes(scores, np.array([1, 1, 1, 0])) == 4


def test_no_selection_trials_keep_the_argmax() -> None:
    rule = fit_decision_rule(np.zeros((0, 2)), np.zeros(0, dtype=int))
    assert rule.orientation == 1 and rule.offsets.tolist() == [0.0, 0.0]


def test_split_is_even_and_odd() -> None:
    selection, evaluation = selection_split(7)
    assert selection.tolist() == [0, 2, 4, 6] and evaluation.tolist() == [1, 3, 5]


def test_null_scores_do_not_invent_leakage() -> None:
    """200 simulated audits with scores independent of the secret (prior 0.7/0.3, Ball = 0.7): the rule fitted
    on the selection half succeeds on the evaluation half with probability ≤ Ball, so the one-sided 95% lower
    bound exceeds Ball in at most 5% of them; the binomial test rejects that at level 1e-3 only by chance."""
    rng = np.random.default_rng(2)
    exceed = 0
    for _ in range(200):
        labels = (rng.random(200) < 0.3).astype(int)
        scores = rng.normal(size=(200, 2))
        rule = fit_decision_rule(scores[::2], labels[::2])
        successes = rule.successes(scores[1::2], labels[1::2])
        exceed += lower_confidence_bound(successes, 100, 0.05) > 0.7
    assert binomtest(exceed, 200, 0.05, alternative="greater").pvalue >= 1e-3, exceed


def test_leakage_below_the_diagonal_is_a_violation() -> None:
    """Regression: an attack whose ROC lies below the diagonal (it prefers the wrong candidate 95% of the time)
    distinguishes the worlds as well as its mirror image. The gate used to count its argmax successes (5%) and
    pass; now the orientation fitted on the selection trials is judged on the others. 400 trials: the mirrored
    rule succeeds in about 190 of 200 evaluation trials, against a bound of 0.76 (a miss has probability
    below 1e-9)."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    flipped = np.where(rng.random(400) < 0.95, 1 - labels, labels)
    scores = np.eye(2)[flipped] + 0.01 * rng.normal(size=(400, 2))
    record = GameRecord("distinguishing", labels, {"prior": np.zeros((400, 2)), "iterates": scores},
                        np.array([0.5, 0.5]), {"prior": "prior", "iterates": "iterates"}, ("x0", "x1"))
    (row,) = [c.row() for c in rate_comparisons(record, 0.76, "distinguishing-attribute")]
    assert row["trials"] == 200 and row["orientation"] == -1 and row["successes"] > 180
    verdict, _ = judge([row], 0.05)
    assert verdict["status"] == "VIOLATION"
