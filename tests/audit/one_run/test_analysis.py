"""Known-answer and Monte Carlo checks of the one-run analyses."""

import math

import numpy as np
import pytest
from scipy import stats

from fdp_audit.accounting import accountant_for
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.audit.one_run.analysis import (
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
from fdp_audit.audit.one_run.guesser import score_guesses


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


def _gaussian_k_ary_audit(rng: np.random.Generator, m: int, k: int, mu: float) -> tuple[int, int]:
    """m canaries, secret v uniform on k values, release y = (μ/√2) e_v + N(0, I_k): any two secrets are
    μ-GDP apart (distance μ). Guess argmax with margin; the grid's best count at level α/|grid|."""
    secrets = rng.integers(0, k, size=m)
    y = rng.standard_normal((m, k))
    y[np.arange(m), secrets] += mu / math.sqrt(2)
    return score_guesses(y, secrets), secrets


@pytest.mark.parametrize("k", [2, 4])
def test_monte_carlo_false_alarms_of_the_k_ary_gaussian_game(k):
    """400 simulated audits of a μ-GDP k-ary game judged against μ-GDP: at most α = 0.05 false alarms. The test
    fails if more than 35 of 400 reject, which a correct analysis (rate <= 0.05) does with probability < 1e-3.
    An end-to-end null check of the pipeline (margin guesser, abstention, Bonferroni over the grid, Gaussian
    f̄⁻¹); its counts sit far below the rejection thresholds, so it cannot see a wrong constant in the recursion
    (the exact randomized-response test above does)."""
    rng = np.random.default_rng(7)
    inverse = gaussian_inverse_power(1.0)
    alarms = 0
    for _ in range(400):
        guesses, _ = _gaussian_k_ary_audit(rng, 500, k, 1.0)
        level = 0.05 / len(guesses.counts)
        alarms += any(fdp_rejects(inverse, 500, c, w, k, level) for c, w in zip(guesses.counts, guesses.correct))
    assert alarms <= 35


def test_monte_carlo_detects_a_weaker_mechanism():
    """The same game at μ = 3 judged against μ = 1 is rejected in (almost) every run."""
    rng = np.random.default_rng(8)
    inverse = gaussian_inverse_power(1.0)
    caught = 0
    for _ in range(20):
        guesses, _ = _gaussian_k_ary_audit(rng, 1000, 2, 3.0)
        level = 0.05 / len(guesses.counts)
        caught += any(fdp_rejects(inverse, 1000, c, w, 2, level) for c, w in zip(guesses.counts, guesses.correct))
    assert caught >= 19
