"""Statistics of a verdict (SPEC 2.6): exact Clopper–Pearson intervals, their one-sided coverage, the ε lower
bound of a distinguishing game, and Bonferroni over the comparisons of one audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binom, norm

from fdp_audit.audit.stats import (
    clopper_pearson,
    epsilon_lower_bound,
    lower_confidence_bound,
    roc_counts,
    selection_thresholds,
    tightness,
    upper_confidence_bound,
)

CASES = [(0, 10, 0.05), (1, 10, 0.05), (5, 10, 0.05), (10, 10, 0.05), (37, 100, 0.01), (999, 1000, 0.001),
         (3, 7, 0.2), (250, 400, 0.05 / 12)]


@pytest.mark.parametrize(("k", "n", "alpha"), CASES)
def test_clopper_pearson_matches_beta_quantiles(k: int, n: int, alpha: float) -> None:
    lo, hi = clopper_pearson(k, n, alpha)
    expected_lo = 0.0 if k == 0 else beta.ppf(alpha / 2, k, n - k + 1)
    expected_hi = 1.0 if k == n else beta.ppf(1 - alpha / 2, k + 1, n - k)
    assert lo == pytest.approx(expected_lo, abs=1e-10)
    assert hi == pytest.approx(expected_hi, abs=1e-10)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


@pytest.mark.parametrize(("k", "n", "alpha"), CASES)
def test_one_sided_bounds_match_beta_quantiles(k: int, n: int, alpha: float) -> None:
    expected_lo = 0.0 if k == 0 else beta.ppf(alpha, k, n - k + 1)
    expected_hi = 1.0 if k == n else beta.ppf(1 - alpha, k + 1, n - k)
    assert lower_confidence_bound(k, n, alpha) == pytest.approx(expected_lo, abs=1e-10)
    assert upper_confidence_bound(k, n, alpha) == pytest.approx(expected_hi, abs=1e-10)


@pytest.mark.parametrize("n", [20, 100, 400])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_lower_bound_exact_coverage(n: int, alpha: float) -> None:
    """Exact, no simulation: Pr_p[LB(K) > p] = Σ_k Bin(k; n, p)·1[LB(k) > p] ≤ α for every p on a grid."""
    bounds = np.array([lower_confidence_bound(k, n, alpha) for k in range(n + 1)])
    for p in np.linspace(0.005, 0.995, 199):
        exceed = binom.pmf(np.arange(n + 1), n, p)[bounds > p].sum()
        assert exceed <= alpha + 1e-12, (p, exceed)


def test_lower_bound_simulated_coverage() -> None:
    """Simulated binomials: the one-sided bound exceeds p at most α of the time. 20,000 draws per p; the
    allowance of 4 binomial standard deviations above α fails with probability < 1e-4 for a correct bound
    (fixed seed, so the outcome is reproducible)."""
    rng = np.random.default_rng(20240611)
    alpha, n, draws = 0.05, 60, 20_000
    bounds = np.array([lower_confidence_bound(k, n, alpha) for k in range(n + 1)])
    for p in (0.1, 0.5, 0.77, 0.95):
        exceed = (bounds[rng.binomial(n, p, draws)] > p).mean()
        assert exceed <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / draws)


def test_tightness() -> None:
    assert tightness(0.75, 0.5, 1.0) == pytest.approx(0.5)
    assert tightness(0.5, 0.5, 0.8) == 0.0
    assert tightness(0.6, 0.5, 0.5) is None  # no advantage allowed: undefined, not a division by zero


def test_roc_counts_by_hand() -> None:
    scores = np.array([0.1, 0.4, 0.35, 0.8, 0.9, 0.2])
    labels = np.array([0, 0, 1, 1, 1, 0])
    counts = roc_counts(scores, labels, np.array([0.3, 0.5]))
    # threshold 0.3: negatives ≥ 0.3 → {0.4}: 1 FP; positives < 0.3 → none
    # threshold 0.5: negatives ≥ 0.5 → none; positives < 0.5 → {0.35}: 1 FN
    assert counts.false_positives.tolist() == [1, 0]
    assert counts.false_negatives.tolist() == [0, 1]
    assert (counts.negatives, counts.positives) == (3, 3)


def test_selection_thresholds_are_quantiles_of_the_given_scores() -> None:
    scores = np.arange(101, dtype=float)
    thresholds = selection_thresholds(scores, count=5)
    assert thresholds.tolist() == pytest.approx([2.0, 26.0, 50.0, 74.0, 98.0])
    assert len(selection_thresholds(np.ones(10))) == 1  # ties collapse


def gaussian_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (Dong, Roth, Su, Corollary 2.13), solved for ε by bisection."""

    def delta_of(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_of(mid) > delta else (lo, mid)
    return hi


def gaussian_game(rng: np.random.Generator, mu: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.random(n) < 0.5
    return rng.standard_normal(n) + mu * labels, labels


def split_lower_bound(scores: np.ndarray, labels: np.ndarray, delta: float, alpha: float) -> float:
    """As the runner does it: thresholds from even trials, error counts on odd trials."""
    thresholds = selection_thresholds(scores[::2])
    return epsilon_lower_bound(roc_counts(scores[1::2], labels[1::2], thresholds), delta, alpha)[0]


def population_epsilon(thresholds: np.ndarray, mu: float, delta: float) -> float:
    """The ε the thresholds could certify with infinitely many trials (exact Gaussian error rates)."""
    return max(max(math.log((1 - delta - norm.cdf(t - mu)) / norm.cdf(-t)),
                   math.log((1 - delta - norm.cdf(-t)) / norm.cdf(t - mu))) for t in thresholds)


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_epsilon_lower_bound_on_gaussian_scores(mu: float) -> None:
    """Scores N(0,1) against N(μ,1) realise μ-GDP exactly. The ε lower bound stays below the true ε(δ)
    (violated with probability ≤ α = 0.01) and recovers a fair share of what its thresholds could certify
    with unlimited trials: about 0.6–0.75 of it over seeds 0–4 at 40,000 trials; the check asks 0.45, which a
    correct bound misses with negligible probability (fixed seed)."""
    delta, alpha = 1e-5, 0.01
    scores, labels = gaussian_game(np.random.default_rng(7), mu, 40_000)
    eps_lb = split_lower_bound(scores, labels, delta, alpha)
    assert eps_lb <= gaussian_epsilon(mu, delta)
    assert eps_lb >= 0.45 * population_epsilon(selection_thresholds(scores[::2]), mu, delta)


def test_epsilon_lower_bound_is_zero_without_signal() -> None:
    """μ = 0: the two score distributions are equal and the true ε is 0; at α = 0.001 a positive lower bound
    has probability ≤ 0.001."""
    scores, labels = gaussian_game(np.random.default_rng(8), 0.0, 4_000)
    assert split_lower_bound(scores, labels, 1e-5, 0.001) == 0.0


def test_epsilon_lower_bound_coverage() -> None:
    """Over 300 independent small games with μ = 1 the bound exceeds the true ε(δ = 1e-3) at most α = 0.1 of
    the time: the check allows α + 3 binomial standard deviations (failure probability < 2e-3 for a valid
    bound, which in practice is conservative: the observed rate is far below α)."""
    rng = np.random.default_rng(9)
    mu, delta, alpha, reps = 1.0, 1e-3, 0.1, 300
    truth = gaussian_epsilon(mu, delta)
    exceed = sum(split_lower_bound(*gaussian_game(rng, mu, 400), delta, alpha) > truth for _ in range(reps))
    assert exceed / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_epsilon_lower_bound_points_report_the_upper_bounds() -> None:
    scores = np.r_[np.zeros(20), np.ones(20)]
    counts = roc_counts(scores, np.r_[np.zeros(20), np.ones(20)], np.array([0.5]))
    eps, points = epsilon_lower_bound(counts, 0.0, 0.1)
    (point,) = points
    # one threshold → Bonferroni over two one-sided bounds, each at level α/2; no errors among 20 of each
    assert point["fpr"] == 0.0 and point["fnr"] == 0.0
    assert point["fpr_ub"] == pytest.approx(1 - 0.05 ** (1 / 20))
    assert point["fnr_ub"] == pytest.approx(point["fpr_ub"])
    assert eps == pytest.approx(math.log((1 - point["fnr_ub"]) / point["fpr_ub"]))
    assert epsilon_lower_bound(counts, 0.0, 0.1 / 50)[0] < eps  # a smaller α certifies less
