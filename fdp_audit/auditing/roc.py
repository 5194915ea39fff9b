"""What the field reads off an attack's ROC (docs/statistics.md, "ROC summaries"): the area under it and the
true-positive rate at a low false-positive rate, each with a confidence interval. They describe a binary game's
attack over all its trials; the gate judges the selected threshold test, not these.

AUC is the Mann–Whitney statistic ``Â = (1/(n₀n₁)) Σᵢ Σⱼ ψ(yⱼ, xᵢ)`` over the n₁ positive scores yⱼ and n₀
negative scores xᵢ, with ψ = 1 when yⱼ > xᵢ, ½ on a tie, 0 otherwise (the area under the empirical ROC). Its
variance is DeLong's (DeLong, DeLong & Clarke-Pearson, Biometrics 1988): with the structural components
``V₁ⱼ = (1/n₀) Σᵢ ψ(yⱼ, xᵢ)`` and ``V₀ᵢ = (1/n₁) Σⱼ ψ(yⱼ, xᵢ)``, ``Var Â ≈ s²(V₁)/n₁ + s²(V₀)/n₀``; the
interval is ``Â ± z·√Var`` clipped to [0, 1].

TPR at FPR ≤ t: the threshold is the lowest score at which at most ``⌊t·n₀⌋`` negatives score as high (the
empirical FPR is then ≤ t), and the TPR is the share of positives at or above it, with its Clopper–Pearson
interval given that threshold. With fewer than ``1/t`` negatives no false positive is allowed at all: the value is
the TPR at zero false positives, and ``resolved`` is false.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import norm, rankdata

from fdp_audit.auditing.stats import clopper_pearson

TARGET_FPRS = (0.001, 0.01)  # the rates the field reports (ML Privacy Meter, Carlini et al. 2022)
CONFIDENCE = 0.95


def auc_with_interval(scores: np.ndarray, labels: np.ndarray, confidence: float = CONFIDENCE
                      ) -> tuple[float, float, float] | None:
    """(AUC, lower, upper) of ``scores`` for the boolean ``labels`` (positives score high), DeLong's interval at
    ``confidence``; None without both a positive and a negative.

    Args:
        scores: one score per trial.
        labels: True for the positive trials.
        confidence: two-sided confidence of the interval.

    Returns:
        The empirical AUC and its interval, or None.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    positive, negative = scores[labels], scores[~labels]
    n1, n0 = len(positive), len(negative)
    if n1 == 0 or n0 == 0:
        return None
    # midranks give ψ's ½ for ties: V₁ⱼ = (rank of yⱼ among all − rank among positives) / n₀, likewise V₀ᵢ
    ranks = rankdata(np.concatenate([positive, negative]))
    v1 = (ranks[:n1] - rankdata(positive)) / n0
    v0 = 1 - (ranks[n1:] - rankdata(negative)) / n1
    auc = float(v1.mean())
    variance = (v1.var(ddof=1) / n1 if n1 > 1 else 0.0) + (v0.var(ddof=1) / n0 if n0 > 1 else 0.0)
    half = float(norm.ppf(0.5 + confidence / 2)) * math.sqrt(variance)
    return auc, max(0.0, auc - half), min(1.0, auc + half)


def tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, target: float, confidence: float = CONFIDENCE
               ) -> dict[str, Any] | None:
    """The TPR at empirical FPR ≤ ``target`` (module docstring) with its Clopper–Pearson interval; None without
    both a positive and a negative.

    Args:
        scores: one score per trial.
        labels: True for the positive trials.
        target: the false-positive rate, in (0, 1).
        confidence: two-sided confidence of the interval.

    Returns:
        ``{"fpr": target, "tpr", "ci_low", "ci_high", "true_positives", "positives", "false_positives",
        "negatives", "resolved"}``, or None.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    positive, negative = scores[labels], np.sort(scores[~labels])[::-1]
    if len(positive) == 0 or len(negative) == 0:
        return None
    allowed = math.floor(target * len(negative))
    # the threshold just above the (allowed+1)-th highest negative: at most `allowed` negatives reach it
    if allowed < len(negative):
        above = positive > negative[allowed]
        false_positives = int((negative > negative[allowed]).sum())
    else:
        above = np.ones(len(positive), dtype=bool)
        false_positives = len(negative)
    hits = int(above.sum())
    low, high = clopper_pearson(hits, len(positive), 1 - confidence)
    return {"fpr": target, "tpr": hits / len(positive), "ci_low": float(low), "ci_high": float(high),
            "true_positives": hits, "positives": int(len(positive)), "false_positives": false_positives,
            "negatives": int(len(negative)), "resolved": allowed >= 1}


def roc_summary(scores: np.ndarray, labels: np.ndarray, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """AUC with its interval and the TPR at each of :data:`TARGET_FPRS`, as a game section stores them.

    Args:
        scores: one score per trial (positives score high).
        labels: True for the positive trials.
        confidence: two-sided confidence of every interval.

    Returns:
        ``{"auc", "auc_ci": [low, high], "confidence", "tpr_at_fpr": [...]}`` (AUC null without both classes).
    """
    found = auc_with_interval(scores, labels, confidence)
    return {"auc": None if found is None else found[0], "auc_ci": None if found is None else list(found[1:]),
            "confidence": confidence,
            "tpr_at_fpr": [row for t in TARGET_FPRS if (row := tpr_at_fpr(scores, labels, t, confidence))]}
