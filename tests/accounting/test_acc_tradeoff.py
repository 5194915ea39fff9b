"""Closed forms and conversions of trade-off functions (docs/accounting.md; FDP paper Theorem 2, Prop. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fdp_audit.accounting import (
    InvalidParameterError,
    TradeoffCurve,
    compose_gaussian,
    delta_from_tradeoff,
    eps_delta_tradeoff,
    epsilon_from_tradeoff,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_power,
    gaussian_tradeoff,
    gdp_clt_mu_approximation,
    replacement_from_insertion,
    tradeoff_from_profile,
)
from fdp_audit.errors import BadInputError

ALPHAS = np.array([0.0, 1e-12, 1e-6, 1e-3, 0.01, 0.1, 0.25, 0.5, 0.9, 1.0])


def test_gaussian_tradeoff_values():
    assert gaussian_tradeoff(0.5, 1.0) == pytest.approx(stats.norm.cdf(-1.0), abs=1e-15)
    np.testing.assert_allclose(gaussian_tradeoff(ALPHAS, 0.0), 1 - ALPHAS, atol=1e-15)
    assert gaussian_tradeoff(0.0, 3.0) == 1.0 and gaussian_tradeoff(1.0, 3.0) == 0.0
    # The power keeps relative precision where 1 - G_μ(α) is far below machine epsilon.
    tiny = gaussian_power(1e-300, 1.0)
    assert 1e-300 < tiny < 1e-280  # Φ(1 - Φ^{-1}(1 - 1e-300)) ≈ 7.7e-285
    np.testing.assert_allclose(gaussian_power(ALPHAS, 2.0), 1 - gaussian_tradeoff(ALPHAS, 2.0), atol=1e-15)


def test_gaussian_composition():
    assert compose_gaussian([3.0, 4.0]) == pytest.approx(5.0)
    assert compose_gaussian([0.5] * 100) == pytest.approx(5.0)


def test_gaussian_profile_and_epsilon_roundtrip():
    for mu in (0.1, 1.0, 3.0):
        for delta in (1e-3, 1e-5, 1e-12):
            eps = gaussian_epsilon(delta, mu)
            assert math.isfinite(eps) and eps >= 0
            assert gaussian_delta(eps, mu) == pytest.approx(delta, rel=1e-6)
    # Large ε: no overflow, δ tiny but finite and non-negative.
    assert 0 <= gaussian_delta(50.0, 1.0) < 1e-200
    assert gaussian_delta(np.array([0.0, 1.0, np.inf]), 1.0)[-1] == 0.0


def test_eps_delta_tradeoff():
    f = eps_delta_tradeoff(0.01, 1.0, 0.1)
    assert f == pytest.approx(max(0.9 - math.e * 0.01, (0.89) / math.e))
    np.testing.assert_allclose(eps_delta_tradeoff(ALPHAS, 0.0, 0.0), 1 - ALPHAS, atol=1e-15)
    # Symmetric: its own inverse, i.e. f(f(α)) = α where f(α) > 0.
    a = np.linspace(0, 0.3, 31)
    np.testing.assert_allclose(eps_delta_tradeoff(eps_delta_tradeoff(a, 1.0, 0.05), 1.0, 0.05), a, atol=1e-12)


def test_theorem2_conversion_recovers_eps_of_eps_delta_curve():
    for eps, delta in ((0.5, 1e-5), (2.0, 1e-3), (8.0, 1e-8)):
        got = epsilon_from_tradeoff(lambda a, e=eps, d=delta: eps_delta_tradeoff(a, e, d), delta)
        assert got == pytest.approx(eps, abs=1e-3)  # callables: 1 - δ - f(α) rounds at ~1e-16
        # Exact for a piecewise-linear curve with the same vertices.
        knee = (1 - delta) / (math.exp(eps) + 1)
        curve = TradeoffCurve([0.0, knee, 1 - delta, 1.0], [delta, delta + math.exp(eps) * knee, 1.0, 1.0])
        assert curve.epsilon(delta) == pytest.approx(eps, rel=1e-12)


def test_theorem2_conversion_matches_gaussian_closed_form():
    for mu in (0.5, 1.0, 2.0):
        for delta in (1e-3, 1e-5, 1e-10):
            numeric = epsilon_from_tradeoff(lambda a, m=mu: gaussian_tradeoff(a, m), delta)
            assert numeric == pytest.approx(gaussian_epsilon(delta, mu), rel=1e-3)
        for eps in (0.0, 1.0, 4.0):
            numeric = delta_from_tradeoff(lambda a, m=mu: gaussian_tradeoff(a, m), eps)
            assert numeric == pytest.approx(gaussian_delta(eps, mu), rel=1e-3, abs=1e-12)


def test_profile_route_reproduces_gaussian_curve():
    """docs/accounting.md: f(α) = sup_ε f_{ε, δ(ε)}(α) from the profile on a grid of ε (public-API route)."""
    eps = np.linspace(0, 20, 4001)
    for mu in (0.5, 2.0):
        alpha = np.array([1e-6, 1e-3, 0.05, 0.3, 0.7])
        f = tradeoff_from_profile(alpha, eps, gaussian_delta(eps, mu))
        exact = gaussian_tradeoff(alpha, mu)
        assert np.all(f <= exact + 1e-12)  # a sup over a sub-grid is conservative
        np.testing.assert_allclose(f, exact, atol=1e-4)


def test_proposition1_corrected_composition():
    """f-DP_i ⇒ (α ↦ f(1 - f(α)))-DP_r; for Gaussians G_μ → G_{2μ}."""
    a = np.array([1e-4, 0.01, 0.1, 0.5, 0.9])
    for mu in (0.3, 1.0, 2.5):
        f_r = replacement_from_insertion(lambda x, m=mu: gaussian_tradeoff(x, m))
        np.testing.assert_allclose(f_r(a), gaussian_tradeoff(a, 2 * mu), atol=1e-12)
    identity = replacement_from_insertion(lambda x: 1 - np.asarray(x))
    np.testing.assert_allclose(identity(a), 1 - a)
    # The paper's literal f∘f is not a trade-off function: for f = 1 - α it gives α > 1 - α.
    literal = 1 - (1 - a)
    assert np.any(literal > 1 - a)


def test_gdp_clt_mu_is_the_labelled_formula():
    assert gdp_clt_mu_approximation(1.0, 1 / 16, 100) == pytest.approx(0.0625 * math.sqrt(100 * (math.e - 1)))


def test_tradeoff_curve_closed_cases_and_inverse():
    perfect, none = TradeoffCurve.perfect_privacy(), TradeoffCurve.no_privacy()
    np.testing.assert_allclose(perfect(ALPHAS), 1 - ALPHAS)
    np.testing.assert_allclose(none(ALPHAS), 0.0)
    assert perfect.epsilon(1e-5) == 0.0 and none.epsilon(1e-5) == math.inf
    assert perfect.delta(0.0) == 0.0 and none.delta(5.0) == 1.0
    # A curve from vertices of G_1: inverse of inverse is the curve; G_μ is symmetric.
    grid = np.linspace(0, 1, 2001)
    curve = TradeoffCurve(grid, gaussian_power(grid, 1.0))
    np.testing.assert_allclose(curve.inverse()(grid), curve(grid), atol=2e-4)
    np.testing.assert_allclose(curve.inverse().inverse()(grid), curve(grid), atol=1e-12)


def test_tradeoff_curve_repairs_ends():
    # power above 1, a vertex beyond α = 1 and a curve that does not reach f = 0 by α = 1.
    curve = TradeoffCurve([0.0, 0.2, 0.6, 1.3], [0.1, 0.7, 1.05, 1.2])
    assert curve.alpha[-1] == 1.0 and curve.power[-1] == 1.0
    assert np.all(np.diff(curve.alpha) > 0)
    a = np.linspace(0, 1, 101)
    assert np.all(curve(a) <= 1 - a + 1e-15) and np.all(curve(a) >= 0)
    slopes = np.diff(curve.power) / np.diff(curve.alpha)
    assert np.all(np.diff(slopes) <= 1e-12)  # still concave power = convex f


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_alpha_outside_unit_interval_is_rejected(bad):
    with pytest.raises(InvalidParameterError) as info:
        gaussian_tradeoff(bad, 1.0)
    assert isinstance(info.value, ValueError) and isinstance(info.value, BadInputError)
    assert info.value.field == "alpha"


def test_bad_delta_is_rejected():
    for bad in (0.0, 1.0, -1e-5):
        with pytest.raises(InvalidParameterError):
            gaussian_epsilon(bad, 1.0)
