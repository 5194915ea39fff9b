"""Statistics of a verdict: exact Clopper–Pearson intervals, their one-sided coverage, the test chosen on a
selection split, the curve test, the family ε and the Clopper–Pearson ε of a distinguishing game (their
calibration over many simulated audits is in test_stats_calibration.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binom, norm

from fdp_audit.accounting import NonPrivateEvent
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.accounting.tradeoff import gaussian_tradeoff
from fdp_audit.auditing.stats import (
    RocCounts,
    SelectedTest,
    clopper_pearson,
    curve_p_value,
    curve_rejected,
    epsilon_lower_bound,
    error_bounds,
    evaluation_trials_for_power,
    family_epsilon,
    gdp_mu_lower_bound,
    lower_confidence_bound,
    roc_counts,
    select_test,
    threshold_split,
    tightness,
    upper_confidence_bound,
    upper_confidence_bounds,
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


def test_roc_counts_match_brute_force_with_ties() -> None:
    rng = np.random.default_rng(3)
    scores, labels = rng.integers(0, 6, 300).astype(float), rng.random(300) < 0.4
    thresholds = np.arange(-1.0, 8.0, 0.5)
    counts = roc_counts(scores, labels, thresholds)
    assert counts.false_positives.tolist() == [int((scores[~labels] >= t).sum()) for t in thresholds]
    assert counts.false_negatives.tolist() == [int((scores[labels] < t).sum()) for t in thresholds]


def test_vectorised_upper_bounds_match_the_scalar_ones() -> None:
    errors = np.array([0, 1, 7, 49, 50])
    expected = [upper_confidence_bound(int(k), 50, 0.01) for k in errors]
    assert upper_confidence_bounds(errors, 50, 0.01) == pytest.approx(expected, abs=1e-10)
    assert upper_confidence_bounds(np.array([0]), 0, 0.01).tolist() == [1.0]  # no trials: no information


def gaussian_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP from its closed-form profile (Dong, Roth, Su, Corollary 2.13)
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), solved for ε by bisection (independent of the package's
    implementation)."""

    def delta_of(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_of(mid) > delta else (lo, mid)
    return hi


def gaussian_game(rng: np.random.Generator, mu: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the Bayes-optimal test of N(0,1) against N(μ,1) (the log-likelihood ratio is increasing in
    x): exactly a μ-GDP mechanism, whose trade-off curve is G_μ."""
    labels = rng.random(n) < 0.5
    return rng.standard_normal(n) + mu * labels, labels


def gaussian_claim(mu: float) -> MechanismSpec:
    """One full-batch Gaussian step with z = 1/μ (add/remove): exactly G_μ."""
    return MechanismSpec.gaussian("dp_sgd", 1 / mu, 1.0, 1)


def split_audit(scores: np.ndarray, labels: np.ndarray, level: float) -> RocCounts:
    """As the runner does it: the test chosen on every fourth trial, its errors counted on the others."""
    selection, evaluation = threshold_split(len(labels))
    test = select_test(scores[selection], labels[selection], level / 2)
    return roc_counts(test.orientation * scores[evaluation], labels[evaluation], np.array([test.threshold]))


def test_select_test_finds_the_mirrored_orientation() -> None:
    """A ROC below the diagonal is leakage as well: −score separates the worlds, and the test picks it."""
    scores, labels = gaussian_game(np.random.default_rng(1), -2.0, 2_000)
    test = select_test(scores, labels, 0.01)
    assert test.orientation == -1 and test.threshold in set(-scores)
    counts = roc_counts(-scores, labels, np.array([test.threshold]))
    assert counts.false_positives[0] / counts.negatives + counts.false_negatives[0] / counts.positives < 0.5


def test_select_test_without_both_worlds_is_harmless() -> None:
    assert select_test(np.arange(5.0), np.ones(5, bool), 0.05) == SelectedTest(1, 2.0)


def test_gdp_mu_lower_bound_inverts_the_gaussian_curve() -> None:
    for mu in (0.3, 1.0, 2.5):
        a = np.array([1e-4, 0.05, 0.3, 0.7])
        assert gdp_mu_lower_bound(a, gaussian_tradeoff(a, mu)) == pytest.approx(mu, abs=1e-9)
        assert gdp_mu_lower_bound(gaussian_tradeoff(a, mu), a) == pytest.approx(mu, abs=1e-9)  # symmetric


def counts_of(fp: int, fn: int, n: int) -> RocCounts:
    return RocCounts(np.array([0.0]), np.array([fp]), np.array([fn]), n, n)


@pytest.mark.parametrize(("mu", "n"), [(1.0, 60), (2.0, 40)])
def test_curve_test_exact_false_rejection_rate(mu: float, n: int) -> None:
    """Exact, no simulation: a test whose (α_φ, β_φ) lies ON the claimed curve G_μ (the worst case for a true
    claim) is rejected with probability Σ Bin(k0; n, α_φ) Bin(k1; n, β_φ) 1[p-value(k0, k1) ≤ level] ≤ level,
    for every such point on a grid."""
    level = 0.05
    k0, k1 = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    every = RocCounts(np.zeros(k0.size), k0.ravel(), k1.ravel(), n, n)
    reject = (curve_p_value(every, lambda a: gaussian_tradeoff(a, mu)) <= level).reshape(k0.shape)
    assert reject.any()  # the test has power somewhere
    counts = np.arange(n + 1)
    for alpha_phi in np.linspace(0.005, 0.95, 80):
        beta_phi = gaussian_tradeoff(alpha_phi, mu)
        probability = binom.pmf(counts, n, alpha_phi) @ reject @ binom.pmf(counts, n, beta_phi)
        assert probability <= level + 1e-12, (alpha_phi, probability)


def test_curve_test_is_stronger_than_the_box() -> None:
    """Where the Clopper–Pearson box (level/2 per side) still touches G_1, the joint region is already below it;
    the reverse never happens on this grid of counts."""
    n, level, f = 500, 0.05, (lambda a: gaussian_tradeoff(a, 1.0))
    stronger = 0
    for fp in range(0, 200, 7):
        for fn in range(0, 200, 7):
            counts = counts_of(fp, fn, n)
            fpr_ub, fnr_ub = error_bounds(counts, level)
            box = bool(fnr_ub[0] < f(fpr_ub[0]))
            joint = curve_rejected(counts, f, level)
            assert joint or not box
            stronger += joint and not box
    assert stronger > 10


def test_curve_p_value_by_hand() -> None:
    """No errors in 10 + 10 trials against f(α) = 1 − α: P0(α)·P1(1 − α) = (1 − α)^10 α^10, largest at ½. The
    grid bound may only overstate the p-value (conservative): by (1.018)^20 ≈ 1.2 at most here (20 factors, each
    read at the far end of a 1.8% step)."""
    p = curve_p_value(counts_of(0, 0, 10), lambda a: 1 - np.asarray(a))[0]
    x = 0.5 ** 20
    assert x * (1 - math.log(x)) <= p <= 1.25 * x * (1 - math.log(x))


def test_family_epsilon_known_answer_with_many_trials() -> None:
    """With 10⁶ trials per world the joint region shrinks to the observed point, so the family of a full-batch
    Gaussian claim (exactly {G_μ'}) must return about the μ whose curve passes through it, and ε(δ) of G_μ from
    the closed-form profile (within the bisection's 2.2% in z, the α grid's 1.8% and the region's width)."""
    n, mu = 1_000_000, 1.0
    fp = 20_000
    fn = round(n * float(gaussian_tradeoff(fp / n, mu)))
    found = family_epsilon(gaussian_claim(1.5), counts_of(fp, fn, n), 0.05, 1e-5)
    assert 1 / found.parameter == pytest.approx(mu, rel=0.04) and not found.capped
    assert found.epsilon == pytest.approx(gaussian_epsilon(mu, 1e-5), rel=0.05)
    assert found.epsilon <= gaussian_epsilon(mu, 1e-5)  # the conservative end of the bracket
    assert "smaller noise multiplier" in found.family


@pytest.mark.parametrize(("fp", "fn"), [(10, 60), (30, 30), (2, 150)])
def test_family_epsilon_full_batch_equals_the_gdp_family(fp: int, fn: int) -> None:
    """p = 1: the claimed family {one Gaussian step with noise z'} is exactly {G_{1/z'}}, so the PLD bisection
    over z' and the μ-GDP bisection (used for claims without a noise multiplier) agree, up to the z grid."""
    counts = counts_of(fp, fn, 300)
    pld = family_epsilon(gaussian_claim(1.5), counts, 0.05, 1e-5)
    gdp = family_epsilon(MechanismSpec("nonprivate", NonPrivateEvent()), counts, 0.05, 1e-5)
    assert "μ-GDP" in gdp.family and gdp.parameter > 0 and not pld.capped
    assert gdp.epsilon == pytest.approx(gaussian_epsilon(gdp.parameter, 1e-5), abs=1e-9)
    assert 1 / pld.parameter == pytest.approx(gdp.parameter, rel=0.025)
    assert pld.epsilon <= gdp.epsilon + 0.01


def test_family_epsilon_ends_of_the_search() -> None:
    claim = gaussian_claim(1.0)
    nothing = family_epsilon(claim, counts_of(50, 50, 100), 0.05, 1e-5)  # on the diagonal: no leakage
    assert nothing.epsilon == 0.0 and math.isinf(nothing.parameter)
    extreme = family_epsilon(claim, counts_of(0, 0, 1000), 0.05, 1e-5)  # far beyond z/2
    assert extreme.capped and extreme.parameter == pytest.approx(0.5)
    assert extreme.epsilon == pytest.approx(gaussian_epsilon(2.0, 1e-5), abs=0.01)


def test_family_epsilon_exceeds_the_claim_exactly_when_the_curve_test_rejects_it() -> None:
    claim = gaussian_claim(1.0)
    claimed = gaussian_epsilon(1.0, 1e-5)
    for fn in (20, 30, 40, 50):
        counts = counts_of(10, fn, 100)
        rejected = curve_rejected(counts, lambda a: gaussian_tradeoff(a, 1.0), 0.05)
        assert (family_epsilon(claim, counts, 0.05, 1e-5).epsilon > claimed - 0.01) == rejected


@pytest.mark.parametrize("mu", [1.0, pytest.param(2.0, marks=pytest.mark.slow)])
def test_family_epsilon_on_gaussian_scores(mu: float) -> None:
    """Scores N(0,1) against N(μ,1), 4,000 trials: the family ε stays below the true ε(δ) (violated with
    probability ≤ α = 0.05) and reaches ≥ 0.55 of it (0.7–0.9 in simulation at μ = 1 and 2; fixed seed), far
    above the Clopper–Pearson ε of the same test."""
    delta, level = 1e-5, 0.05
    counts = split_audit(*gaussian_game(np.random.default_rng(7), mu, 4_000), level)
    truth = gaussian_epsilon(mu, delta)
    found = family_epsilon(gaussian_claim(mu), counts, level, delta).epsilon
    cp = epsilon_lower_bound(counts, delta, level)[0]
    assert 0.55 * truth <= found <= truth and cp < found


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


def test_selection_split_is_a_partition() -> None:
    selection, evaluation = threshold_split(10)
    assert selection.tolist() == [0, 4, 8] and evaluation.tolist() == [1, 2, 3, 5, 6, 7, 9]


def test_a_roc_below_the_diagonal_is_leakage() -> None:
    """Regression: scores that separate the worlds in the "wrong" direction (AUC ≈ 0.08) certified ε = 0
    when only the score's own orientation was tested — every threshold then has FPR + FNR ≥ 1 (up to
    sampling), as the last checks show. With the orientation chosen on the selection trials the mirrored test
    rejects the claim G_{1/2} and both ε lower bounds are positive (seeded)."""
    scores, labels = gaussian_game(np.random.default_rng(5), -2.0, 2_000)
    counts = split_audit(scores, labels, 0.05)
    assert curve_rejected(counts, lambda a: gaussian_tradeoff(a, 0.5), 0.05)
    assert family_epsilon(gaussian_claim(0.5), counts, 0.05, 1e-5).epsilon > 0
    assert epsilon_lower_bound(counts, 1e-5, 0.05)[0] > 0
    _, evaluation = threshold_split(len(labels))
    own = roc_counts(scores[evaluation], labels[evaluation], np.unique(scores[evaluation]))
    assert np.all(own.false_positives / own.negatives + own.false_negatives / own.positives >= 0.9)
    assert epsilon_lower_bound(own, 1e-5, 0.05)[0] == 0.0


@pytest.mark.parametrize(("rate", "bound", "level", "miss"), [(0.85, 0.63, 0.025, 1e-3), (0.7, 0.57, 0.0125, 1e-2),
                                                              (0.97, 0.8746, 0.025, 1e-3)])
def test_evaluation_trials_for_power_are_the_fewest_with_that_power(rate, bound, level, miss) -> None:
    """At the returned N the gate's rate comparison (Clopper–Pearson lower bound above the bound), summed over
    every outcome k of Binomial(N, rate), fires with probability ≥ 1 − miss; at N − 1 it does not."""
    trials = evaluation_trials_for_power(rate, bound, level, miss)

    def power(n: int) -> float:
        return sum(binom.pmf(k, n, rate) for k in range(n + 1) if lower_confidence_bound(k, n, level) > bound)

    assert power(trials) >= 1 - miss > power(trials - 1)


def test_evaluation_trials_for_power_of_a_perfect_attack_and_of_none() -> None:
    """A perfect attack needs the N of ln(level)/ln(bound) (its lower bound is level^(1/N)); an attack at or
    below the bound never has power."""
    level, bound = 0.025, 0.63
    assert evaluation_trials_for_power(1.0, bound, level, 1e-3) == math.floor(math.log(level) / math.log(bound)) + 1
    assert evaluation_trials_for_power(bound, bound, level, 1e-3) is None
