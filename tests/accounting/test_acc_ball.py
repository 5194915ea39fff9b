"""Ball helpers (docs/accounting.md; FDP paper Definition 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from fdp_audit.accounting import (
    InvalidParameterError,
    ball_discrete,
    ball_gaussian,
    ball_monte_carlo,
    ball_uniform_box,
    circle_rectangle_area,
)
from fdp_audit.accounting.ball import gaussian_radius


def test_discrete_prior_and_conditional_table():
    assert ball_discrete([0.2, 0.5, 0.3]) == 0.5
    table = np.array([[0.9, 0.1], [0.4, 0.6], [0.5, 0.5]])  # Pr[v | u], one row per u
    np.testing.assert_allclose(ball_discrete(table), [0.9, 0.6, 0.5])
    for bad in ([0.5, 0.6], [-0.1, 1.1], [[0.5, 0.4]], []):
        with pytest.raises(InvalidParameterError):
            ball_discrete(bad)


def test_gaussian_ball_is_chi_square_cdf():
    assert ball_gaussian(1.0, 1.0, 2) == pytest.approx(1 - math.exp(-0.5))  # χ²_2 cdf = 1 - e^{-x/2}
    assert ball_gaussian(0.0, 2.0, 3) == 0.0
    rng = np.random.default_rng(1)
    x = rng.normal(scale=0.7, size=(200_000, 3))
    empirical = np.mean(np.linalg.norm(x, axis=1) <= 1.0)
    assert ball_gaussian(1.0, 0.7, 3) == pytest.approx(empirical, abs=4e-3)
    radii = np.array([0.1, 1.0, 3.0])
    assert np.all(np.diff(ball_gaussian(radii, 1.0, 5)) > 0)


def test_gaussian_radius_inverts_the_ball():
    """ρ(q) = s·sqrt(F⁻¹_{χ²_k}(q)) is the radius at which Ball is q; closed form for k = 2: ρ² = −2s² log(1 − q)."""
    levels = np.array([0.05, 0.25, 0.5, 0.9])
    for dim in (1, 4, 48):
        np.testing.assert_allclose(ball_gaussian(gaussian_radius(levels, 0.3, dim), 0.3, dim), levels, rtol=1e-10)
    np.testing.assert_allclose(gaussian_radius(levels, 0.3, 2), 0.3 * np.sqrt(-2 * np.log1p(-levels)), rtol=1e-10)
    with pytest.raises(InvalidParameterError):
        gaussian_radius(1.5, 1.0, 2)


def test_circle_rectangle_area_closed_form():
    width, height = 2.0, 1.0
    h1, h2 = width / 2, height / 2
    for r in (0.0, 0.3, 0.5, 0.8, 1.0, 1.1, 1.2, 5.0):
        numeric, _ = integrate.quad(lambda x, r=r: min(h2, math.sqrt(max(r * r - x * x, 0.0))), 0, min(h1, r))
        assert circle_rectangle_area(r, width, height) == pytest.approx(4 * numeric, abs=1e-7)  # quad: kink
    assert circle_rectangle_area(0.4, 2.0, 1.0) == pytest.approx(math.pi * 0.16)  # disk inside
    assert circle_rectangle_area(10.0, 2.0, 1.0) == pytest.approx(2.0)  # rectangle inside


def test_uniform_box_exact_in_one_and_two_dimensions():
    est = ball_uniform_box(0.1, [1.0])
    assert est.method == "exact" and est.estimate == est.upper == pytest.approx(0.2)
    assert ball_uniform_box(0.7, [1.0]).estimate == 1.0
    est = ball_uniform_box(0.3, [1.0, 2.0])
    assert est.method == "exact" and est.estimate == pytest.approx(math.pi * 0.09 / 2)
    # The box centre maximises the covered area: no other centre does better.
    rng = np.random.default_rng(2)
    points = (rng.random((400_000, 2)) - 0.5) * [1.0, 2.0]
    for shift in ([0.2, 0.0], [0.0, 0.7], [0.35, 0.4]):
        off_centre = np.mean(np.linalg.norm(points - shift, axis=1) <= 0.6)
        assert off_centre <= ball_uniform_box(0.6, [1.0, 2.0]).estimate + 3e-3
    np.testing.assert_allclose(
        ball_uniform_box(0.6, [1.0, 2.0]).estimate, np.mean(np.linalg.norm(points, axis=1) <= 0.6), atol=3e-3
    )
    assert ball_uniform_box(0.3, [1.0, 1.0, 1.0], metric="linf").estimate == pytest.approx(0.6**3)


def test_uniform_box_monte_carlo_beyond_two_dimensions():
    est = ball_uniform_box(0.5, [1.0, 1.0, 1.0], samples=100_000)
    assert est.method == "monte-carlo"
    assert est.estimate == pytest.approx(4 / 3 * math.pi * 0.125, abs=4 * est.standard_error)  # ball inside
    assert est.estimate < est.upper < est.estimate + 5 * est.standard_error


def test_general_prior_monte_carlo():
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(40_000, 2))
    est = ball_monte_carlo(samples, 1.0)
    exact = ball_gaussian(1.0, 1.0, 2)  # the best centre is the mean
    assert est.method == "monte-carlo" and est.samples == 40_000 - 256
    assert est.estimate <= exact + 4 * est.standard_error
    assert est.upper >= exact - 0.02  # candidates near the mode get close to the supremum
    assert est.upper > est.estimate
    given = ball_monte_carlo(samples, 1.0, candidates=np.zeros((1, 2)))
    assert given.estimate == pytest.approx(exact, abs=4 * given.standard_error)
    one_d = ball_monte_carlo(rng.uniform(size=10_000), 0.1, candidates=[[0.5]])
    assert one_d.estimate == pytest.approx(0.2, abs=0.02)


def test_monte_carlo_upper_bound_covers_the_truth():
    """The one-sided 95 % upper bound misses the exact Ball in about 5 % of repetitions or fewer."""
    rng = np.random.default_rng(4)
    exact = ball_gaussian(0.5, 1.0, 2)
    misses = sum(
        ball_monte_carlo(rng.normal(size=(2_000, 2)), 0.5, candidates=np.zeros((1, 2))).upper < exact
        for _ in range(200)
    )
    assert misses <= 20
