"""Decision rules fitted on a selection split (docs/games.md, "Decision rules").

An attack's scores are a statistic; how they are turned into a guess is part of the adversary, and it must not
be tuned on the trials that judge it. The rules considered are

    guess(r) = argmax_v (o · score[r, v] + b_v),   o ∈ {+1, −1}, b_0 = 0,

i.e. for a binary game a threshold on the score difference in either orientation (an attack whose ROC lies
below the diagonal leaks as much as its mirror image), and for V candidates a per-candidate offset (the
attack's calibration). Both are fitted on the *selection* trials to maximise their successes, then applied
unchanged to the *evaluation* trials, whose successes alone are compared with Theorem 4's bound: given the
selection trials the rule is a fixed function of the release, so it is an adversary like any other and its
success on independent trials is bounded by 1 − f(Ball). The split is by trial index (even trials select, odd
trials evaluate), independent of the secrets, so the evaluation trials' secrets are still drawn from the known
prior and Ball is exact on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCORE_LIMIT = 1e150  # finite stand-in for ±inf (and NaN, as the lowest score) so that offsets stay finite
SWEEPS = 3  # coordinate-ascent passes over the offsets (one is exact for two candidates)


def selection_split(trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Trial positions that select (even) and that evaluate (odd).

    Args:
        trials: the number of trials.

    Returns:
        ``(selection, evaluation)``: the even and the odd positions.
    """
    return np.arange(0, trials, 2), np.arange(1, trials, 2)


@dataclass(frozen=True)
class DecisionRule:
    """``argmax_v (orientation · score_v + offsets_v)``; ties go to the lowest candidate index."""

    orientation: int
    offsets: np.ndarray  # [V]

    def guess(self, scores: np.ndarray) -> np.ndarray:
        """Each trial's guess, ``argmax_v (orientation · score_v + offsets_v)`` (NaN scores lowest, infinite ones
        capped).

        Args:
            scores: the attack's scores, shape (R, V).

        Returns:
            The guessed candidate indices, shape (R,).
        """
        return np.argmax(_finite(self.orientation * np.asarray(scores, float)) + self.offsets[None, :], axis=1)

    def successes(self, scores: np.ndarray, labels: np.ndarray) -> int:
        """How many trials the rule guesses right.

        Args:
            scores: the attack's scores, shape (R, V).
            labels: the true candidate indices, shape (R,).

        Returns:
            The count.
        """
        return int((self.guess(scores) == np.asarray(labels)).sum())


def _finite(scores: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(scores, nan=-SCORE_LIMIT), -SCORE_LIMIT, SCORE_LIMIT)


def _best_offset(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray, v: int) -> float:
    """The offset of candidate v that maximises successes with the other offsets fixed.

    Trial r guesses v exactly when ``b_v > t_r = max_{w≠v}(s_rw + b_w) − s_rv`` (ties go to the lower index,
    approximated by strictness on one side), so successes are a step function of b_v: the trials labelled v
    with ``t_r < b_v`` plus the trials labelled otherwise, correctly guessed among the others, with
    ``t_r ≥ b_v``. Its maximum is attained between two consecutive sorted ``t_r``; the midpoint is taken."""
    shifted = scores + offsets[None, :]
    others = np.delete(shifted, v, axis=1)
    other_index = np.delete(np.arange(scores.shape[1]), v)[np.argmax(others, axis=1)]
    t = others.max(axis=1) - scores[:, v]
    wins_with_v = labels == v
    wins_without_v = (labels != v) & (other_index == labels)
    order = np.argsort(t, kind="stable")
    t_sorted = t[order]
    # b_v just above t_sorted[k]: trials 0..k choose v, trials k+1.. do not
    gained = np.concatenate([[0], np.cumsum(wins_with_v[order])])
    kept = np.concatenate([np.cumsum(wins_without_v[order][::-1])[::-1], [0]])
    total = gained + kept  # index k: the first k sorted trials choose v
    best = int(np.argmax(total))
    if best == 0:
        return float(t_sorted[0] - 1.0) if len(t_sorted) else float(offsets[v])
    if best == len(t_sorted):
        return float(t_sorted[-1] + 1.0)
    return float((t_sorted[best - 1] + t_sorted[best]) / 2)


def fit_decision_rule(scores: np.ndarray, labels: np.ndarray) -> DecisionRule:
    """The rule (orientation, offsets) with the most successes on the given (selection) trials that coordinate
    ascent over the offsets finds (exact for two candidates, :data:`SWEEPS` passes for more); with no trials, the
    attack's own argmax.

    Args:
        scores: the selection trials' scores, shape (R, V).
        labels: their true candidate indices, shape (R,).

    Returns:
        The rule; the attack's own argmax (orientation 1, zero offsets) unless another has more successes.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels)
    values = scores.shape[1]
    best = DecisionRule(1, np.zeros(values))
    if len(labels) == 0:
        return best
    best_successes = best.successes(scores, labels)
    for orientation in (1, -1):
        oriented = _finite(orientation * scores)
        offsets = np.zeros(values)
        for _ in range(SWEEPS if values > 2 else 1):
            for v in range(1, values):
                offsets[v] = _best_offset(oriented, labels, offsets, v)
        rule = DecisionRule(orientation, offsets)
        successes = rule.successes(scores, labels)
        if successes > best_successes:
            best, best_successes = rule, successes
    return best
