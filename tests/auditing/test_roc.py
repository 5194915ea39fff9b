"""ROC summaries (fdp_audit/auditing/roc.py): AUC against scikit-learn and a known answer, DeLong's interval against
its coverage on binormal scores, TPR at a low FPR by hand, and null data that must not show leakage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from fdp_audit.auditing.roc import auc_with_interval, roc_summary, tpr_at_fpr
from fdp_audit.auditing.stats import clopper_pearson


def test_auc_is_scikit_learns_with_ties() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, 300).astype(float)  # many ties
    labels = rng.random(300) < 0.4
    auc, low, high = auc_with_interval(scores + labels, labels)
    assert auc == pytest.approx(roc_auc_score(labels, scores + labels), abs=1e-12)
    assert low < auc < high


def test_a_perfect_and_a_reversed_attack() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1], bool)
    assert auc_with_interval(np.arange(6.0), labels) == (1.0, 1.0, 1.0)
    assert auc_with_interval(-np.arange(6.0), labels) == (0.0, 0.0, 0.0)
    assert auc_with_interval(np.arange(3.0), np.ones(3, bool)) is None


def test_delong_known_answer() -> None:
    """Positives 2, 4; negatives 1, 3: ψ = [[1, 0], [1, 1]], AUC ¾; V₁ = (½, 1), V₀ = (1, ½), so Var = ⅛/2 + ⅛/2."""
    auc, low, high = auc_with_interval(np.array([2.0, 4.0, 1.0, 3.0]), np.array([1, 1, 0, 0], bool))
    half = norm.ppf(0.975) * np.sqrt(0.125)
    assert (auc, low, high) == pytest.approx((0.75, 0.75 - half, 1.0))


def test_delong_interval_covers_the_binormal_auc() -> None:
    """Binormal scores (positives shifted by d = 1): AUC = Φ(d/√2) = 0.760. Over 400 seeded samples of 80 + 80
    trials the 95 % interval covers it 95 % of the time up to DeLong's asymptotics; the band [0.91, 0.98] fails a
    correct interval with probability about 0.2 % (binomial sd 1.1 points)."""
    rng = np.random.default_rng(1)
    truth = norm.cdf(1 / np.sqrt(2))
    labels = np.repeat([False, True], 80)
    covered = 0
    for _ in range(400):
        scores = rng.normal(size=160) + labels
        _, low, high = auc_with_interval(scores, labels)
        covered += low <= truth <= high
    assert 0.91 <= covered / 400 <= 0.98


def test_tpr_at_a_low_fpr_by_hand() -> None:
    """200 negatives at 0 … 199 and 100 positives at 150 … 249: at FPR ≤ 1 % two negatives may score as high, so
    the threshold lies above the third-highest negative, 197: positives 198 … 249 pass, 52 of 100."""
    negatives, positives = np.arange(200.0), np.arange(150.0, 250.0)
    scores = np.concatenate([negatives, positives])
    labels = np.concatenate([np.zeros(200, bool), np.ones(100, bool)])
    row = tpr_at_fpr(scores, labels, 0.01)
    low, high = clopper_pearson(52, 100, 0.05)
    assert row == pytest.approx({"fpr": 0.01, "tpr": 0.52, "ci_low": low, "ci_high": high, "true_positives": 52,
                                 "positives": 100, "false_positives": 2, "negatives": 200, "resolved": True})
    strict = tpr_at_fpr(scores, labels, 0.001)  # 200 negatives cannot resolve 0.1 %: none may be a false positive
    assert strict["tpr"] == 0.5 and strict["false_positives"] == 0 and strict["resolved"] is False


def test_null_scores_show_no_leakage() -> None:
    """Scores independent of the labels: the AUC interval holds ½ and the TPR at 1 % FPR is near 1 % (2,000
    negatives and positives; each check fails a correct implementation with probability below 1e-3)."""
    rng = np.random.default_rng(2)
    labels = rng.random(4000) < 0.5
    summary = roc_summary(rng.normal(size=4000), labels)
    assert summary["auc_ci"][0] <= 0.5 <= summary["auc_ci"][1]
    one_percent = summary["tpr_at_fpr"][1]
    assert one_percent["fpr"] == 0.01 and one_percent["tpr"] < 0.025 and one_percent["resolved"]
