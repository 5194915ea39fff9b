"""Monte Carlo coverage from sampled models (docs/profiles.md), tested where the answer is known: Gaussian output
perturbation, whose ball coverage is a non-central χ² probability and whose density gives the loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fdp_audit.profiles.mechanisms import GaussianOutputPerturbation
from fdp_audit.profiles.monte_carlo import default_cutoff, monte_carlo_privacy_loss


def _ball(centre: np.ndarray, point: np.ndarray, cutoff: float, sigma: float) -> float:
    return stats.ncx2.cdf(cutoff**2 / sigma**2, centre.size, np.sum((centre - point) ** 2) / sigma**2)


@pytest.fixture
def setting(rng):
    """Samples of 𝒜(D) and of three neighbours, as a training engine would hand them over ([K, d] each)."""
    sigma, d, k = 0.2, 3, 40_000
    mech = GaussianOutputPerturbation(sigma)
    base_model = np.array([0.5, -0.3, 0.1])
    offsets = np.array([[0.02, 0.0, 0.0], [0.0, 0.15, 0.0], [-0.1, 0.1, 0.2]])
    base = base_model + mech.sample_noise(k, d, rng)
    neighbours = base_model + offsets[:, None, :] + mech.sample_noise(3 * k, d, rng).reshape(3, k, d)
    point = base_model + np.array([0.1, 0.05, -0.05])
    return mech, base_model, offsets, base, neighbours, point


def test_estimate_matches_the_exact_ball_loss(setting):
    mech, base_model, offsets, base, neighbours, point = setting
    cutoff = 0.1
    result = monte_carlo_privacy_loss(base, neighbours, point[None, :], cutoff)
    exact = [
        math.log(_ball(base_model, point, cutoff, mech.sigma) / _ball(base_model + o, point, cutoff, mech.sigma))
        for o in offsets
    ]
    assert result.label == "Monte Carlo estimate" and result.cutoff == cutoff
    assert result.base_samples == result.neighbour_samples == base.shape[0]
    assert np.all(np.abs(result.loss[0] - exact) < 4 * result.standard_error[0])


def test_estimate_tends_to_the_density_loss(setting):
    """With a small cutoff the estimate approaches the analytic (density) loss (paper Eq. 8)."""
    mech, base_model, offsets, base, neighbours, point = setting
    result = monte_carlo_privacy_loss(base, neighbours, point[None, :], 0.04)
    analytic = mech.privacy_loss(offsets, (point - base_model)[None, :])[0]
    assert np.all(np.abs(result.loss[0] - analytic) < 4 * result.standard_error[0] + 0.02)
    assert result.profile().rows[-1] == int(np.argmax(np.abs(analytic)))


def test_default_cutoff_holds_about_sqrt_k_base_samples(setting):
    _, _, _, base, neighbours, point = setting
    cutoff = default_cutoff(base, point)
    result = monte_carlo_privacy_loss(base, neighbours, point[None, :])
    assert result.cutoff == cutoff
    # The ⌈√K⌉-th sample sits on the sphere: whether rounding puts it inside is immaterial.
    assert abs(result.base_counts[0] - math.ceil(math.sqrt(base.shape[0]))) <= 1


def test_unresolved_coverage_is_flagged_not_hidden(rng):
    base = rng.normal(size=(1000, 2))
    far = 50.0 + rng.normal(size=(1, 1000, 2))
    result = monte_carlo_privacy_loss(base, far, np.zeros((1, 2)), cutoff=0.5)
    assert result.neighbour_counts[0, 0] == 0 and not result.resolved[0, 0]
    assert result.loss[0, 0] == np.inf
