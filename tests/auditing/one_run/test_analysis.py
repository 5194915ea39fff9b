"""Known-answer and Monte Carlo checks of the one-run analyses."""

import math

import numpy as np
import pytest
from scipy import stats

from fdp_audit.accounting import accountant_for
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.accounting.tradeoff import TradeoffCurve, gaussian_power
from fdp_audit.auditing.one_run.analysis import (
    critical_count,
    curve_inverse_power,
    eps_delta_family,
    eps_delta_inverse_power,
    family_epsilon,
    fdp_rejects,
    fdp_statistic,
    gaussian_inverse_power,
    gdp_mu_lower_bound,
    steinke_epsilon,
    steinke_p_value,
)
from fdp_audit.auditing.one_run.ceiling import flagged_critical_count
from fdp_audit.auditing.one_run.guesser import RankedGuesses, rank_guesses


def test_steinke_p_value_is_the_binomial_tail_without_delta():
    q = math.exp(1.0) / (1 + math.exp(1.0))
    assert steinke_p_value(1000, 100, 80, 1.0, 0.0) == pytest.approx(stats.binom.sf(79, 100, q), rel=1e-12)
    assert steinke_p_value(1000, 100, 80, 1.0, 1e-5) > steinke_p_value(1000, 100, 80, 1.0, 0.0)


def test_steinke_delta_term_matches_the_theorem_with_an_interior_maximum():
    """Theorem 3 of Steinke et al. transcribed from the paper with scipy's binomial: p = β(v) + 2mδ ·
    max_{i in [m]} (β(v-i) - β(v)) / i, β(u) = P[Binomial(c, e^ε/(1+e^ε)) >= u] (= 1 for u <= 0), the maximum
    over all of [m] as in the paper (the code's max over 1…v equals it). Here the maximum falls at an interior
    i (17 of v = 75) and the δ term is twice the tail, so mδ in place of 2mδ, or i = 1 alone, would change p by
    far more than the tolerance."""
    m, guesses, correct, epsilon, delta = 1000, 100, 75, 0.5, 1e-4
    q = math.exp(epsilon) / (1 + math.exp(epsilon))

    def beta(u: int) -> float:
        return 1.0 if u <= 0 else float(stats.binom.sf(u - 1, guesses, q))

    ratios = [(beta(correct - i) - beta(correct)) / i for i in range(1, m + 1)]
    best = int(np.argmax(ratios)) + 1
    assert 1 < best < correct
    expected = beta(correct) + 2 * m * delta * ratios[best - 1]
    assert steinke_p_value(m, guesses, correct, epsilon, delta) == pytest.approx(expected, rel=1e-9)
    assert expected > 2.5 * beta(correct)
    half_delta = beta(correct) + m * delta * ratios[best - 1]
    only_first = beta(correct) + 2 * m * delta * ratios[0]
    assert expected > 1.4 * half_delta and expected > 2.5 * only_first


def test_steinke_epsilon_is_where_the_p_value_crosses_alpha():
    eps = steinke_epsilon(1000, 200, 180, 1e-5, 0.05)
    assert steinke_p_value(1000, 200, 180, eps, 1e-5) <= 0.05 < steinke_p_value(1000, 200, 180, eps + 1e-3, 1e-5)


@pytest.mark.parametrize("m,guesses,correct", [(1000, 100, 90), (1000, 1000, 700), (10_000, 500, 480),
                                               (100, 100, 100), (1000, 50, 50)])
def test_fdp_analysis_with_pure_dp_curve_reproduces_steinke(m, guesses, correct):
    """k = 2 and f = f_{ε,0}: the f-DP recursion and the binomial bound give the same ε to 1.5 %."""
    steinke = steinke_epsilon(m, guesses, correct, 0.0, 0.05)
    fdp = family_epsilon(eps_delta_family(0.0), m, guesses, correct, 2, 0.05, 1e-5)
    assert fdp == pytest.approx(steinke, rel=0.015)


@pytest.mark.parametrize("k", [2, 3, 4, 8])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
@pytest.mark.parametrize("guesses,m", [(50, 1000), (200, 400), (20, 20)])
@pytest.mark.parametrize("alpha", [0.05, 0.003])
def test_k_ary_randomized_response_false_alarm_is_exact_and_tight(k, epsilon, guesses, m, alpha):
    """Under pure ε-DP the extremal k-ary mechanism is k-ary randomized response (the true secret w.p.
    e^ε/(e^ε+k-1), each other value w.p. 1/(e^ε+k-1)), so the correct count of c guesses is exactly
    W ~ Binomial(c, e^ε/(e^ε+k-1)). The exact false-alarm probability of the test of f_{ε,0} (the pmf summed over
    the rejecting counts, no sampling) is <= α, and the first rejecting count is at most the binomial critical
    value + 2: the recursion is sound and not loose. These settings (m >> c, Bonferroni-sized α, small ε) are
    the ones where an off-by-one ``(i+1)/(c-i)`` exceeds α (1.15α at k = 4, ε = 0.1, c = 50, m = 1000,
    α = 0.05; 1.03α at k = 2, ε = 1, α = 0.003) and where ``k`` in place of ``k - 1`` exceeds it many times."""
    inverse = eps_delta_inverse_power(epsilon, 0.0)
    q = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    rejecting = [w for w in range(guesses + 1) if fdp_rejects(inverse, m, guesses, w, k, alpha)]
    false_alarm = float(sum(stats.binom.pmf(rejecting, guesses, q)))
    assert false_alarm <= alpha
    critical = next(v for v in range(guesses + 2) if stats.binom.sf(v - 1, guesses, q) <= alpha)
    assert min(rejecting, default=guesses + 1) <= critical + 2


def test_monotone_in_the_claim_and_in_the_evidence():
    values = [fdp_statistic(gaussian_inverse_power(mu), 1000, 100, 90, 2, 0.05) for mu in (0.0, 0.5, 1.0, 2.0)]
    assert values == sorted(values, reverse=True)
    eps = [family_epsilon(eps_delta_family(1e-5), 1000, 100, c, 2, 0.05) for c in (55, 70, 80, 90, 100)]
    assert eps == sorted(eps) and eps[0] == 0.0 and eps[-1] > 2.0


def test_perfect_privacy_and_no_evidence_edge_cases():
    identity = eps_delta_inverse_power(0.0, 0.0)
    assert not fdp_rejects(identity, 100, 0, 0, 2, 0.05)
    assert not fdp_rejects(identity, 100, 100, 55, 2, 0.05)  # 55 of 100 fair coins: p = 0.18
    assert fdp_rejects(identity, 100, 100, 90, 2, 0.05)
    assert gdp_mu_lower_bound(100, 100, 50, 2, 0.05) == 0.0
    assert steinke_epsilon(100, 100, 50, 0.0, 0.05) == 0.0


def test_curve_inverse_power_matches_the_gaussian_closed_form():
    """The PLD curve of one unsampled Gaussian step (z = 1) is G_1; its f̄⁻¹ agrees with Φ(Φ⁻¹(y) - 1)."""
    curve = accountant_for(MechanismSpec.gaussian("dp_sgd", 1.0, 1.0, 1)).curve()
    inverse, exact = curve_inverse_power(curve), gaussian_inverse_power(1.0)
    for y in (0.01, 0.1, 0.5, 0.9, 0.99):
        assert inverse(y) == pytest.approx(exact(y), abs=2e-3)


def test_inverse_powers_are_vectorised():
    """Every f̄⁻¹ takes arrays (the recursion of every count runs at once) and gives the scalar values."""
    curve = accountant_for(MechanismSpec.gaussian("dp_sgd", 1.0, 0.1, 20)).curve()
    y = np.array([0.0, 1e-9, 0.003, 0.2, 0.7, 1.0])
    for inverse in (gaussian_inverse_power(1.3), eps_delta_inverse_power(1.0, 1e-5), curve_inverse_power(curve)):
        assert np.array_equal(inverse(y), np.array([inverse(float(v)) for v in y]))
        assert np.all(np.diff(inverse(y)) >= 0)


@pytest.mark.parametrize("m,guesses,k,alpha", [(1000, 100, 2, 0.05), (1000, 250, 2, 0.01), (500, 50, 4, 0.05),
                                               (100, 100, 2, 0.05), (40, 7, 3, 0.2)])
def test_critical_count_is_the_smallest_count_the_recursion_rejects(m, guesses, k, alpha):
    """The vectorised recursion over every starting count agrees with the scalar recursion run count by count."""
    curve = accountant_for(MechanismSpec.gaussian("dp_sgd", 0.8, 0.05, 60)).curve()
    for inverse in (gaussian_inverse_power(1.0), eps_delta_inverse_power(1.0, 1e-5), curve_inverse_power(curve)):
        first = next((w for w in range(guesses + 1) if fdp_rejects(inverse, m, guesses, w, k, alpha)), guesses + 1)
        assert critical_count(inverse, m, guesses, k, alpha) == first


@pytest.mark.parametrize("z,rate,steps", [(1.0, 1.0, 1), (0.968, 0.017, 300)])
def test_guessing_every_canary_of_the_product_mechanism_is_an_exact_null(z, rate, steps):
    """Known answer: m = 2,000 independent canaries of the mechanism itself (each an f-DP pair), every one
    guessed by Neyman–Pearson. Each guess is right with the Bayes accuracy ``(1 + max_α (f̄(α) - α))/2``
    independently, so ``W ~ Binomial(m, accuracy)`` exactly, and the recursion's critical count must leave at
    most α above it: the unsampled Gaussian mechanism (``accuracy = Φ(1/(2z))``, checked against the curve) and
    the composed subsampled Gaussian of the Adult setting at ε = 2. A validity check only: the recursion's
    critical counts (1,854 and 1,477) sit far above the binomial's (1,418 and 1,193), because a mechanism that
    correlates its canaries reaches far more (the flagged-mechanism test below measures how much)."""
    m = 2000
    curve = accountant_for(MechanismSpec.gaussian("dp_sgd", z, rate, steps)).curve()
    accuracy = (1 + float(np.max(np.asarray(curve.power) - np.asarray(curve.alpha)))) / 2
    if rate == 1.0:
        assert accuracy == pytest.approx(stats.norm.cdf(1 / (2 * z)), abs=1e-3)
    critical = critical_count(curve_inverse_power(curve), m, m, 2, 0.05)
    assert stats.binom.sf(critical - 1, m, accuracy) <= 0.05


@pytest.mark.parametrize("claim", ["gaussian", "subsampled"])
def test_recursion_is_not_below_what_a_flagged_mechanism_reaches(claim):
    """The flagged mechanism of :mod:`fdp_audit.auditing.one_run.ceiling` satisfies the claimed curve and makes many
    right guesses with probability above α, so no valid test of W_c can have a smaller critical count than its
    bound. Claims: 1-GDP (the closed-form curve ``Φ(Φ⁻¹(α) + 1)``) and the subsampled Gaussian of the Adult
    setting at ε = 4.7 (z = 0.7, p = 0.017, T = 300). The recursion stays above the bound and within 3 % of it
    (measured, c = 30, 60, 120, 250, 1,000 of m = 1,000: 31/60/118/240/927 against 31/59/116/236/912 for
    1-GDP; c = 30 … 250: 31/60/116/234 against 30/58/113/229 for the subsampled curve), so no analysis of the
    same counts could certify much more. Error: each bound holds with confidence 0.99 per count and flag rate
    (Clopper–Pearson over 400 draws); the seed is fixed."""
    if claim == "gaussian":
        grid = np.concatenate([[0.0], np.geomspace(1e-15, 1.0, 20_000)])
        curve, counts = TradeoffCurve(grid, gaussian_power(grid, 1.0)), [30, 60, 120, 250, 1000]
    else:
        curve = accountant_for(MechanismSpec.gaussian("dp_sgd", 0.7, 0.017, 300), discretization=1e-3).curve()
        counts = [30, 60, 120, 250]
    flagged = flagged_critical_count(curve, 1000, counts, 0.05, 400, np.random.default_rng(0))
    recursion = np.array([critical_count(curve_inverse_power(curve), 1000, c, 2, 0.05) for c in counts])
    assert np.all(recursion >= flagged) and np.all(recursion <= 1.03 * flagged + 1)


def _gaussian_k_ary_audit(rng: np.random.Generator, m: int, k: int, mu: float) -> RankedGuesses:
    """m canaries, secret v uniform on k values, release y = (μ/√2) e_v + N(0, I_k): any two secrets are
    μ-GDP apart (distance μ). Guesses ranked by margin."""
    secrets = rng.integers(0, k, size=m)
    y = rng.standard_normal((m, k))
    y[np.arange(m), secrets] += mu / math.sqrt(2)
    return rank_guesses(y, secrets)


@pytest.mark.parametrize("k", [2, 4])
def test_monte_carlo_false_alarms_of_the_k_ary_gaussian_game(k):
    """400 simulated audits of a μ-GDP k-ary game judged against μ-GDP at a fixed guess count (a quarter of the
    canaries): at most α = 0.05 false alarms. The test fails if more than 35 of 400 reject, which a correct
    analysis (rate <= 0.05) does with probability < 1e-3. An end-to-end null check of the margin guesser,
    abstention and the Gaussian f̄⁻¹; its counts sit far below the rejection threshold, so it cannot see a
    wrong constant in the recursion (the exact tests above do)."""
    rng = np.random.default_rng(7)
    critical = critical_count(gaussian_inverse_power(1.0), 500, 125, k, 0.05)
    alarms = sum(_gaussian_k_ary_audit(rng, 500, k, 1.0).correct_among(125) >= critical for _ in range(400))
    assert alarms <= 35


def test_monte_carlo_detects_a_weaker_mechanism():
    """The same game at μ = 3 judged against μ = 1 is rejected in (almost) every run."""
    rng = np.random.default_rng(8)
    critical = critical_count(gaussian_inverse_power(1.0), 1000, 250, 2, 0.05)
    caught = sum(_gaussian_k_ary_audit(rng, 1000, 2, 3.0).correct_among(250) >= critical for _ in range(20))
    assert caught >= 19
