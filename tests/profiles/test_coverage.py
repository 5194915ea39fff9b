"""Coverage and mean loss against closed forms (docs/profiles.md; paper Eqs. 5-9, footnote 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from fdp_audit.profiles.coverage import (
    analytic_log_coverage,
    empirical_coverage,
    gaussian_kl,
    laplace_mean_abs_loss,
    laplace_mean_loss,
    mean_loss,
)
from fdp_audit.profiles.mechanisms import GaussianOutputPerturbation, LaplaceOutputPerturbation


def test_one_dimensional_mean_loss_is_s_minus_one_plus_exp_minus_s():
    s = np.array([1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 50.0])
    assert np.allclose(laplace_mean_loss(s, 1), s - 1 + np.exp(-s), rtol=1e-7)


def test_three_dimensional_mean_loss_against_the_shell_average():
    """In d = 3 the mean distance from a point at s to a sphere of radius r is max(r, s) + min(r, s)²/(3 max)."""

    def kappa3(s: float) -> float:
        def shell(r: float) -> float:
            big, small = max(r, s), min(r, s)
            return (big + small**2 / (3 * big)) * stats.gamma.pdf(r, 3)

        return quad(shell, 0, s)[0] + quad(shell, s, np.inf)[0] - 3.0

    for s in (0.05, 1.0, 4.0, 20.0):
        assert laplace_mean_loss(s, 3) == pytest.approx(kappa3(s), rel=1e-7)


@pytest.mark.parametrize("d", [1, 2, 3, 6, 20])
def test_small_s_limit_is_s_squared_over_two_d(d):
    s = np.array([1e-4, 1e-3])
    assert np.allclose(laplace_mean_loss(s, d) / (s**2 / (2 * d)), 1.0, atol=1e-3)


@pytest.mark.parametrize("d", [2, 3, 6])
def test_small_s_limit_by_monte_carlo(d, rng):
    """The sampled mean loss itself (antithetic pairs), not only the quadrature, approaches s²/(2d)."""
    s, beta = 0.02, 1.0
    delta = np.zeros((1, d))
    delta[0, 0] = s / beta
    estimate, error = mean_loss(LaplaceOutputPerturbation(beta), delta, 200_000, rng)
    assert error[0] < 0.01 * estimate[0]
    assert estimate[0] == pytest.approx(s**2 / (2 * d), rel=0.03)


@pytest.mark.parametrize("d", [1, 3])
def test_monte_carlo_mean_loss_matches_the_quadrature(d, rng):
    beta = 40.0
    s = np.array([0.1, 1.0, 5.0])
    directions = rng.normal(size=(3, d))
    deltas = directions / np.linalg.norm(directions, axis=1, keepdims=True) * (s / beta)[:, None]
    estimate, error = mean_loss(LaplaceOutputPerturbation(beta), deltas, 100_000, rng)
    assert np.all(np.abs(estimate - laplace_mean_loss(s, d)) < 4 * error)


def test_curves_collapse_against_beta_times_offset(rng):
    """Two neighbours with different offsets and directions, at β chosen so that β‖Δ‖ is equal, have the
    same mean loss and mean |l| (up to Monte Carlo error): both depend on s = β‖Δ‖ only."""
    d = 4
    short, long_ = rng.normal(size=d), rng.normal(size=d)
    short *= 1e-5 / np.linalg.norm(short)
    long_ *= 7e-5 / np.linalg.norm(long_)
    for s in (0.3, 3.0):
        means, abs_means = [], []
        for delta in (short, long_):
            mech = LaplaceOutputPerturbation(s / np.linalg.norm(delta))
            noise = mech.sample_noise(100_000, d, rng, antithetic=True)
            loss = mech.privacy_loss(delta[None, :], noise)[:, 0]
            means.append(loss.mean())
            abs_means.append(np.abs(loss).mean())
        assert means[0] == pytest.approx(means[1], rel=0.03)
        assert abs_means[0] == pytest.approx(abs_means[1], rel=0.01)
        assert abs_means[0] == pytest.approx(laplace_mean_abs_loss(s, d), rel=0.01)


def test_gaussian_mean_loss_is_the_kl_divergence(rng):
    mech = GaussianOutputPerturbation(sigma=0.3)
    deltas = rng.normal(size=(5, 3)) * 0.1
    estimate, _ = mean_loss(mech, deltas, 10, rng)
    # Antithetic pairs cancel the linear term exactly, leaving ‖Δ‖²/(2σ²).
    assert np.allclose(estimate, gaussian_kl(np.linalg.norm(deltas, axis=1), 0.3), rtol=1e-12)


def test_empirical_coverage_matches_the_exact_ball_probability(rng):
    """Gaussian output perturbation: Pr[‖𝒜(y) - M‖ < c] is a non-central χ² probability."""
    sigma, d, k = 0.5, 3, 200_000
    centre, point = np.zeros(d), np.array([[0.4, -0.2, 0.1]])
    samples = centre + GaussianOutputPerturbation(sigma).sample_noise(k, d, rng)
    for cutoff in (0.1, 0.3, 1.0):
        exact = stats.ncx2.cdf(cutoff**2 / sigma**2, d, np.sum((point - centre) ** 2) / sigma**2)
        estimate = empirical_coverage(samples, point, cutoff)[0]
        assert abs(estimate - exact) < 5 * math.sqrt(exact * (1 - exact) / k)


def test_coverage_tends_to_the_density_as_the_cutoff_shrinks():
    """C(y, M) / vol(ball_c) → f_y(M) as c → 0 (paper Eq. 7), checked with the exact ball probability."""
    sigma, d = 0.5, 3
    mech = GaussianOutputPerturbation(sigma)
    centre, point = np.zeros((1, d)), np.array([[0.4, -0.2, 0.1]])
    density = math.exp(analytic_log_coverage(mech, centre, point)[0, 0])
    ratios = []
    for cutoff in (0.1, 0.01, 0.001):
        volume = math.pi ** (d / 2) / math.gamma(d / 2 + 1) * cutoff**d
        ratios.append(stats.ncx2.cdf(cutoff**2 / sigma**2, d, np.sum(point**2) / sigma**2) / volume / density)
    assert abs(ratios[-1] - 1) < 1e-5 and abs(ratios[0] - 1) > abs(ratios[1] - 1) > abs(ratios[2] - 1)


def test_empirical_loss_tends_to_the_analytic_laplace_loss(rng):
    """log Ĉ(D, M) - log Ĉ(y, M) from samples → β(‖A(y) - M‖ - ‖A(D) - M‖) as K grows and c shrinks."""
    beta, d, k = 2.0, 2, 4_000_000
    mech = LaplaceOutputPerturbation(beta)
    delta = np.array([[0.6, 0.2]])
    point = np.array([[0.2, -0.2]])  # M - A(D)
    analytic = mech.privacy_loss(delta, point)[0, 0]
    base = mech.sample_noise(k, d, rng)
    neighbour = delta + mech.sample_noise(k, d, rng)
    cutoff = 0.05
    p, q = empirical_coverage(base, point, cutoff)[0], empirical_coverage(neighbour, point, cutoff)[0]
    error = math.sqrt((1 - p) / (k * p) + (1 - q) / (k * q))
    assert abs(math.log(p / q) - analytic) < 4 * error + 0.01  # 0.01: the ball's bias at c = 0.05
