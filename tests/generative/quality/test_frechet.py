"""The Fréchet distance: closed forms, an independent matrix square root (scipy), sample estimates of Gaussians
with a known distance, and null data (two samples of one distribution) that must not show a distance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg

from fdp_audit.generative.quality.frechet import (
    frechet_distance,
    gaussian_frechet,
    null_distances,
    per_class_distances,
)


def _spd(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return a @ a.T + 0.1 * np.eye(d)


def test_commuting_covariances_give_the_closed_form():
    """Diagonal covariances: d² = ‖μ₁ − μ₂‖² + Σ_j (√a_j − √b_j)²."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 3, 6), rng.uniform(0.1, 3, 6)
    m1, m2 = rng.normal(size=6), rng.normal(size=6)
    expected = np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert gaussian_frechet(m1, np.diag(a), m2, np.diag(b)) == pytest.approx(expected, rel=1e-10)
    assert gaussian_frechet([1.0], [[4.0]], [0.0], [[1.0]]) == pytest.approx(1.0 + 1.0)  # 1-D: Δμ² + (s₁ − s₂)²


@pytest.mark.parametrize("d", [2, 5, 16])
def test_general_covariances_agree_with_scipy_sqrtm(d):
    """tr(Σ₁ + Σ₂ − 2 (Σ₁Σ₂)^{1/2}) with scipy's general matrix square root, for non-commuting covariances."""
    rng = np.random.default_rng(d)
    s1, s2 = _spd(rng, d), _spd(rng, d)
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    reference = np.sum((m1 - m2) ** 2) + np.trace(s1 + s2 - 2 * linalg.sqrtm(s1 @ s2).real)
    assert gaussian_frechet(m1, s1, m2, s2) == pytest.approx(reference, rel=1e-8)
    assert gaussian_frechet(m1, s1, m2, s2) == pytest.approx(gaussian_frechet(m2, s2, m1, s1), rel=1e-8)


def test_identical_and_singular_distributions_are_at_distance_zero():
    rng = np.random.default_rng(1)
    low_rank = rng.normal(size=(6, 2)) @ rng.normal(size=(2, 6))
    cov = low_rank @ low_rank.T  # rank 2
    assert gaussian_frechet(np.zeros(6), cov, np.zeros(6), cov) == pytest.approx(0.0, abs=1e-9)


def test_sample_estimate_converges_to_the_gaussian_distance():
    """Two Gaussians in d = 4 with d² = ‖Δμ‖² + Σ(√a − √b)² = 1 + 1 = 2; 40,000 draws each. The estimator's bias is
    O(d²/n) ≈ 4e-4 and its standard deviation over 20 seeds was 0.018, so the tolerance 0.1 is five standard
    deviations; the seed is fixed, so the test is deterministic."""
    rng = np.random.default_rng(2)
    a, b, shift = np.array([1.0, 1.0, 4.0, 1.0]), np.ones(4), np.array([1.0, 0.0, 0.0, 0.0])
    exact = gaussian_frechet(np.zeros(4), np.diag(a), shift, np.diag(b))
    assert exact == pytest.approx(2.0)
    x = rng.normal(size=(40_000, 4)) * np.sqrt(a)
    y = shift + rng.normal(size=(40_000, 4)) * np.sqrt(b)
    assert frechet_distance(x, y) == pytest.approx(exact, abs=0.1)


def test_null_data_show_only_the_finite_sample_floor():
    """Two disjoint halves of one Gaussian sample (d = 8, 1,000 rows each): their mean d² was 0.057 over 20 splits; a
    mean shift of 0.5 in one coordinate (d² = 0.25) lies far above every null repetition. Fixed seeds."""
    rng = np.random.default_rng(3)
    features = rng.normal(size=(2_000, 8))
    floor = null_distances(features, 1_000, 1_000, repeats=20, seed=0)
    assert floor.max() < 0.1 and floor.min() > 0
    shifted = features[1_000:] + np.eye(8)[0] * 0.5
    assert frechet_distance(features[:1_000], shifted) > floor.max() + 0.1


def test_per_class_distances_compare_like_with_like():
    rng = np.random.default_rng(4)
    labels = np.repeat([0, 1], 500)
    features = rng.normal(size=(1_000, 3)) + labels[:, None] * 3.0
    reference = rng.normal(size=(1_000, 3)) + labels[:, None] * 3.0
    per_class = per_class_distances(features, labels, reference, labels, [0, 1])
    assert set(per_class) == {0, 1} and max(per_class.values()) < 0.1
    assert frechet_distance(features, reference) < 0.1
    swapped = per_class_distances(features, 1 - labels, reference, labels, [0, 1])
    assert min(swapped.values()) > 20  # classes exchanged: 3² per coordinate


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        frechet_distance(np.zeros((5, 3)), np.zeros((5, 4)))
    with pytest.raises(ValueError):
        null_distances(np.zeros((10, 2)), 6, 6, 1, 0)
