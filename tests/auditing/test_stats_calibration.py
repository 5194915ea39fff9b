"""Calibration of the distinguishing-game estimators over many simulated audits: on null scores (both worlds
identical, true ε = 0) and on exact Gaussian-mechanism scores (the Bayes-optimal log-likelihood ratio of
N(0,1) against N(μ,1), true curve G_μ), a TRUE claim is rejected at most α of the time, and neither the
family ε nor the Clopper–Pearson ε exceeds the true ε more than α of the time.

Each check is a one-sided binomial test: with R audits and a valid estimator the count of bad outcomes is
stochastically below Binomial(R, α), so it exceeds the 1 − 1e-3 quantile of Binomial(R, α) with probability
≤ 1e-3 (seeds are fixed, so the outcome is reproducible). In practice the counts are far below α·R: the
Clopper–Pearson box is conservative."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from fdp_audit.accounting import NonPrivateEvent, accountant_for
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.accounting.tradeoff import gaussian_epsilon
from fdp_audit.auditing.stats import (
    curve_rejected,
    epsilon_lower_bound,
    family_epsilon,
    roc_counts,
    select_test,
    threshold_split,
)

AUDITS, ALPHA, DELTA = 200, 0.1, 1e-5
ALLOWED = int(binom.ppf(1 - 1e-3, AUDITS, ALPHA))


def audit(scores: np.ndarray, labels: np.ndarray, claim: MechanismSpec,
          family: MechanismSpec | None = None) -> tuple[bool, float, float]:
    """One audit as the runner and the gate do it: (the claim is rejected, family ε, Clopper–Pearson ε). The
    family ε is that of the claim's own family unless ``family`` names another (a non-Gaussian spec: the
    μ-GDP family)."""
    selection, evaluation = threshold_split(len(labels))
    test = select_test(scores[selection], labels[selection], ALPHA / 2)
    counts = roc_counts(test.orientation * scores[evaluation], labels[evaluation], np.array([test.threshold]))
    rejected = curve_rejected(counts, accountant_for(claim).curve(), ALPHA)
    found = family_epsilon(family or claim, counts, ALPHA, DELTA).epsilon
    return rejected, found, epsilon_lower_bound(counts, DELTA, ALPHA)[0]


@pytest.mark.slow
def test_null_scores_reject_nothing_and_certify_no_leakage() -> None:
    """Both worlds identical (true ε = 0): any claim is true, so rejecting the claim, or a positive ε lower
    bound of either kind, is a false alarm; each happens in at most α of 200 audits of 600 trials."""
    rng = np.random.default_rng(11)
    claim = MechanismSpec.gaussian("dp_sgd", 1.0, 1.0, 1)  # G_1
    outcomes = [audit(rng.standard_normal(600), rng.random(600) < 0.5, claim) for _ in range(AUDITS)]
    rejected, family, cp = (np.array(x) for x in zip(*outcomes, strict=True))
    assert rejected.sum() <= ALLOWED and (family > 0).sum() <= ALLOWED and (cp > 0).sum() <= ALLOWED


@pytest.mark.slow
@pytest.mark.parametrize(("mu", "family"), [(1.0, None), (2.0, MechanismSpec("nonprivate", NonPrivateEvent()))])
def test_gaussian_scores_true_claim_is_rarely_rejected(mu: float, family: MechanismSpec | None) -> None:
    """Exact μ-GDP scores against the true claim G_μ (one Gaussian step with z = 1/μ), 200 audits of 2,000
    trials: the claim is rejected, and the family or Clopper–Pearson ε exceeds the true ε(δ), in at most α of
    them. The family ε also has to be informative: its median reaches half the truth. At μ = 1 the family is
    the claim's own (noise multiplier z′, PLD bisection); at μ = 2 the μ-GDP family (closed-form curves), the
    same family at p = 1, which keeps the test fast."""
    rng = np.random.default_rng(12)
    claim, truth = MechanismSpec.gaussian("dp_sgd", 1 / mu, 1.0, 1), gaussian_epsilon(DELTA, mu)
    outcomes = []
    for _ in range(AUDITS):
        labels = rng.random(2_000) < 0.5
        outcomes.append(audit(rng.standard_normal(2_000) + mu * labels, labels, claim, family))
    rejected, family, cp = (np.array(x) for x in zip(*outcomes, strict=True))
    assert rejected.sum() <= ALLOWED
    assert (family > truth).sum() <= ALLOWED and (cp > truth).sum() <= ALLOWED
    assert np.median(family) >= 0.5 * truth
