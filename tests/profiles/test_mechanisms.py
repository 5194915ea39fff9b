"""Output perturbation (docs/profiles.md): radial Laplace sampling, densities, the stable loss, Gaussian calibration."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.integrate import quad

from fdp_audit.profiles.mechanisms import (
    GaussianOutputPerturbation,
    LaplaceOutputPerturbation,
    _log_delta,
    gaussian_sigma,
    laplace_beta,
)


def test_beta_is_n_lambda_epsilon_over_two():
    assert laplace_beta(2.0, 32_561, 1.0) == 32_561.0
    assert LaplaceOutputPerturbation.from_epsilon(0.5, 100, 2.0).beta == 50.0


@pytest.mark.parametrize("d", [1, 2, 6])
def test_laplace_radius_is_gamma_and_direction_uniform(d, rng):
    mech = LaplaceOutputPerturbation(beta=7.0)
    noise = mech.sample_noise(20_000, d, rng)
    radius = np.linalg.norm(noise, axis=1)
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / 7.0).cdf).pvalue > 1e-3
    assert np.abs((noise / radius[:, None]).mean(axis=0)).max() < 0.03


def test_laplace_noise_is_not_per_coordinate_laplace(rng):
    """i.i.d. per-coordinate Laplace has density ∝ exp(-β‖b‖₁): its radius law is not Gamma(d, 1/β)."""
    per_coordinate = rng.laplace(scale=1.0, size=(20_000, 3))
    assert stats.kstest(np.linalg.norm(per_coordinate, axis=1), stats.gamma(a=3).cdf).pvalue < 1e-6


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_laplace_density_is_normalised(d):
    mech = LaplaceOutputPerturbation(beta=3.0)
    sphere = 2 * math.pi ** (d / 2) / math.gamma(d / 2)  # surface of the unit sphere in R^d

    def radial(r: float) -> float:
        return sphere * r ** (d - 1) * math.exp(mech.log_density(np.array([[r] + [0.0] * (d - 1)]))[0])

    assert quad(radial, 0, np.inf)[0] == pytest.approx(1.0, rel=1e-9)


def test_laplace_loss_equals_the_density_ratio(rng):
    mech = LaplaceOutputPerturbation(beta=11.0)
    deltas, noise = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    direct = mech.log_density(noise[:, None, :]) - mech.log_density(noise[:, None, :] - deltas[None, :, :])
    assert np.allclose(mech.privacy_loss(deltas, noise), direct, rtol=1e-12, atol=1e-12)


def test_stable_loss_survives_noise_far_larger_than_the_offset():
    """‖b‖ = 1e9‖Δ‖: the naive β(‖Δ - b‖ - ‖b‖) loses every digit, the stable form keeps them."""
    getcontext().prec = 60
    delta, b = np.array([[3e-9, -4e-9]]), np.array([[1.0, 2.0]])
    mech = LaplaceOutputPerturbation(beta=1e6)
    dx, dy = (Decimal(float(v)) for v in delta[0])
    bx, by = (Decimal(float(v)) for v in b[0])
    exact = Decimal(1e6) * (((dx - bx) ** 2 + (dy - by) ** 2).sqrt() - (bx**2 + by**2).sqrt())
    assert mech.privacy_loss(delta, b)[0, 0] == pytest.approx(float(exact), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    # Components whose squares underflow would make the reference norm itself 0.
    st.lists(st.floats(-1, 1).filter(lambda v: v == 0 or abs(v) > 1e-150), min_size=3, max_size=3),
    st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=3),
    st.floats(1e-3, 1e6),
)
def test_loss_is_bounded_by_beta_times_offset(delta, b, beta):
    """|l| = β|‖Δ - b‖ - ‖b‖| <= β‖Δ‖ (triangle inequality)."""
    delta_arr = np.array([delta])
    loss = LaplaceOutputPerturbation(beta).privacy_loss(delta_arr, np.array([b]))[0, 0]
    assert abs(loss) <= beta * np.linalg.norm(delta_arr) * (1 + 1e-12) + 1e-300


@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-5), (1.0, 1e-5), (10.0, 1e-6), (200.0, 1e-5)])
def test_gaussian_calibration_is_exact(epsilon, delta):
    sigma = gaussian_sigma(epsilon, delta, 2.0)
    assert math.exp(_log_delta(sigma, epsilon, 2.0)) == pytest.approx(delta, rel=1e-8)
    # Smallest such σ: a little less noise breaks (ε, δ).
    assert math.exp(_log_delta(0.99 * sigma, epsilon, 2.0)) > delta
    if epsilon < 1:  # the classical calibration is valid (and looser) there
        assert sigma < 2.0 * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def test_gaussian_loss_and_density(rng):
    mech = GaussianOutputPerturbation.from_epsilon(1.0, 1000, 1.0, 1e-5)
    deltas, noise = rng.normal(size=(4, 2)) * 1e-3, rng.normal(size=(3, 2)) * mech.sigma
    direct = mech.log_density(noise[:, None, :]) - mech.log_density(noise[:, None, :] - deltas[None, :, :])
    assert np.allclose(mech.privacy_loss(deltas, noise), direct, rtol=1e-9, atol=1e-12)
    assert mech.scale == pytest.approx(1 / mech.sigma)
