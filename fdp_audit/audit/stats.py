"""Statistics of a verdict (SPEC 2.6).

Success counts k of N independent trials get exact Clopper–Pearson intervals; the verdict uses the
one-sided lower bound at level 1 − α/m (Bonferroni over the m comparisons of one audit). A distinguishing
game gives an ε lower bound from upper confidence bounds on its false-positive and false-negative rates at
thresholds fixed before those rates are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.proportion import proportion_confint


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided 1 − α interval."""
    lo, hi = proportion_confint(successes, trials, alpha=alpha, method="beta")
    return float(np.nan_to_num(lo, nan=0.0)), float(np.nan_to_num(hi, nan=1.0))


def lower_confidence_bound(successes: int, trials: int, alpha: float) -> float:
    """Exact one-sided lower bound at level 1 − α (the lower end of the two-sided 1 − 2α interval)."""
    return clopper_pearson(successes, trials, 2 * alpha)[0]


def upper_confidence_bound(successes: int, trials: int, alpha: float) -> float:
    """Exact one-sided upper bound at level 1 − α."""
    return clopper_pearson(successes, trials, 2 * alpha)[1]


def tightness(rate: float, ball: float, bound: float) -> float | None:
    """Share of the advantage Theorem 4 allows that the attack realises: (rate − Ball)/(bound − Ball)."""
    return None if bound - ball <= 1e-12 else (rate - ball) / (bound - ball)


@dataclass(frozen=True)
class RocCounts:
    """Error counts of a score threshold test on a distinguishing game: the test says "positive" when the
    score is at least the threshold."""

    thresholds: np.ndarray
    false_positives: np.ndarray
    false_negatives: np.ndarray
    negatives: int
    positives: int


def roc_counts(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> RocCounts:
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    negative, positive = scores[~labels], scores[labels]
    fp = (negative[None, :] >= thresholds[:, None]).sum(axis=1)
    fn = (positive[None, :] < thresholds[:, None]).sum(axis=1)
    return RocCounts(np.asarray(thresholds, float), fp, fn, int(len(negative)), int(len(positive)))


def selection_thresholds(scores: np.ndarray, count: int = 15) -> np.ndarray:
    """Thresholds at quantiles of the selection half's scores (never the scores they are evaluated on)."""
    scores = np.asarray(scores, float)
    return np.unique(np.quantile(scores, np.linspace(0.02, 0.98, count)))


def epsilon_lower_bound(counts: RocCounts, delta: float, alpha: float) -> tuple[float, list[dict]]:
    """``max_t max(log((1 − δ − FNR_ub)/FPR_ub), log((1 − δ − FPR_ub)/FNR_ub))`` with Clopper–Pearson upper
    bounds, Bonferroni-corrected over the 2·(number of thresholds) bounds, holding jointly at level 1 − α."""
    level = alpha / (2 * max(len(counts.thresholds), 1))
    best, points = 0.0, []
    for t, fp, fn in zip(counts.thresholds, counts.false_positives, counts.false_negatives):
        fpr_ub = upper_confidence_bound(int(fp), counts.negatives, level)
        fnr_ub = upper_confidence_bound(int(fn), counts.positives, level)
        for a, b in ((fnr_ub, fpr_ub), (fpr_ub, fnr_ub)):
            if b > 0 and 1 - delta - a > 0:
                best = max(best, math.log((1 - delta - a) / b))
        points.append({"threshold": float(t), "fpr": fp / max(counts.negatives, 1),
                       "fnr": fn / max(counts.positives, 1), "fpr_ub": fpr_ub, "fnr_ub": fnr_ub})
    return best, points
