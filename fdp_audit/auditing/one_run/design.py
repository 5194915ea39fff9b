"""How many of the most confident guesses a one-run audit judges, fixed from the claim before anything is seen
(docs/one_run.md, "The guess count is fixed by the claim").

The f-DP analysis (:mod:`fdp_audit.auditing.one_run.analysis`) bounds ``P[W_c >= v]``, the probability that at least
v of the c guesses an auditor makes are right, for a *fixed* c. Choosing c after seeing the release would need a
correction for the choice (a Bonferroni grid over counts paid a factor of 8 in level); a count that depends on
the release through its correlation with the secrets is not covered at all. So c is a function of the claim, the
number of canaries and the level only: the c at which the claimed mechanism itself, audited by the
Neyman–Pearson guesser, would certify the largest claim of its family. Nothing in that choice reads the release,
so every (c, level) pair it can produce is a valid test, and a mechanism that leaks more than it claims is still
rejected at that c (its top guesses are more accurate than the claim allows).

The prediction: ``DESIGN_SEEDS`` exact simulated releases of the claimed mechanism (the per-step model of
:mod:`fdp_audit.auditing.one_run.simulation` with the claimed z, p and T, in the game that the claim's relation
names), each scored with the Poisson-mixture likelihood ratio at the claimed parameters and ranked as a real
audit ranks; ``W(c)`` is the mean number of right guesses among the c most confident. The candidates are the
counts of a geometric grid that could reject the claim at all (all their guesses right would); for each, the
largest family parameter (on a grid of :data:`FAMILY_POINTS` claims from the claimed one down to a third of its
``1/z``) that ``W(c)`` would reject at the level is found by bisection; the chosen c is the middle of the counts
that reach the best one (the optimum is flat, and its middle is the least sensitive to where the realised counts
fall). When no count would certify even the weakest claim of that grid (a few dozen canaries), or none could
reject the claim, every canary is guessed: that keeps the most power against gross faults. The draws use a
fixed seed, so the same inputs give the same c.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.auditing.one_run.analysis import Family, fdp_rejects
from fdp_audit.auditing.one_run.simulation import game_of, oracle_correct

DESIGN_SEEDS = 2
DESIGN_SEED = 20_250_908
COUNT_POINTS = 40  # candidate guess counts, geometric between MIN_COUNT and m
MIN_COUNT = 8
FAMILY_POINTS = 32
FAMILY_SPAN = 3.0  # the family grid reaches claims with 1/z a third of the claimed one


def predicted_correct(spec: MechanismSpec, m: int, k: int) -> np.ndarray:
    """``[m]`` mean right guesses among the c most confident (c = 1 … m) of the Neyman–Pearson guesser on exact
    releases of ``spec`` with m canaries and k candidates (module doc).

    Args:
        spec: the claimed Gaussian mechanism (its z, p, T and relation).
        m: the number of canaries.
        k: the number of candidate values.

    Returns:
        The mean counts, shape (m,).
    """
    assert spec.noise_multiplier is not None and spec.sample_rate is not None
    return oracle_correct(np.random.default_rng(DESIGN_SEED), m, game_of(spec.relation), k, spec.noise_multiplier,
                          spec.sample_rate, spec.steps, DESIGN_SEEDS).mean(axis=0)


def candidate_counts(m: int) -> np.ndarray:
    """The geometric grid of guess counts the design chooses from.

    Args:
        m: the number of canaries.

    Returns:
        Distinct guess counts from min(8, m) to m, ascending.
    """
    return np.unique(np.geomspace(min(MIN_COUNT, m), m, COUNT_POINTS).astype(int))


def _largest_rejected_index(family: Family, parameters: np.ndarray, m: int, count: int, correct: int, k: int,
                            level: float) -> int:
    """Index of the weakest claim on the (ascending) parameter grid that ``correct`` of ``count`` reject; -1 if
    none. Rejection is monotone along the family (a weaker claim is harder to reject)."""
    low, high = -1, len(parameters)  # parameters[:low+1] rejected, parameters[high:] not
    while high - low > 1:
        middle = (low + high) // 2
        if fdp_rejects(family.inverse_power(float(parameters[middle])), m, count, correct, k, level):
            low = middle
        else:
            high = middle
    return low


@lru_cache(maxsize=64)
def _designed_count(spec: MechanismSpec, family: Family, m: int, k: int, level: float) -> int:
    claimed = family.inverse_power(family.start)
    counts = [int(c) for c in candidate_counts(m) if fdp_rejects(claimed, m, int(c), int(c), k, level)]
    if not counts:  # no count can reject the claim at all: guess every canary (the gate will say so)
        return m
    correct = predicted_correct(spec, m, k)
    parameters = np.geomspace(family.start / FAMILY_SPAN, family.start, FAMILY_POINTS)
    reach = np.array([_largest_rejected_index(family, parameters, m, c, int(round(correct[c - 1])), k, level)
                      for c in counts])
    if reach.max() < 0:  # too few canaries to certify anything: guess all, the most power against gross faults
        return m
    best = np.flatnonzero(reach == reach.max())
    return counts[best[len(best) // 2]]


def designed_guess_count(spec: MechanismSpec, family: Family, m: int, k: int, level: float) -> int:
    """The guess count of a one-run audit of ``spec`` with m canaries and k candidates at per-comparison
    ``level`` (module doc).

    Args:
        spec: the claimed mechanism (a Poisson-subsampled Gaussian: noise multiplier, sample rate, steps, relation).
        family: the claimed mechanism's family (weaker claims as the parameter grows; ``family.start`` is the
            claim's own parameter).
        m: canaries.
        k: candidates per canary.
        level: the level each comparison is tested at.

    Returns:
        The number of most confident guesses to judge, between 1 and m.

    Raises:
        ValueError: m < 1, k < 2 or a level outside (0, 1).
    """
    if m < 1 or k < 2 or not 0 < level < 1:
        raise ValueError(f"need m >= 1, k >= 2 and a level in (0, 1) (m={m}, k={k}, level={level})")
    return _designed_count(spec, family, m, k, level)
