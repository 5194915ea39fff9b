"""The image games' building blocks (docs/images.md): the canary block of K gradient canaries, and the Bayes-optimal
success of the gradient-canary game against closed forms; the attribute game on images through the registry."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import norm

from fdp_audit.auditing import image_games


def test_the_canary_block_puts_only_the_secret_in_the_private_population():
    block = image_games.gradient_canary_block(np.array([2, 0, 3]), 4, 10.0)
    assert block.in_private.tolist() == [[False, False, True, False], [True, False, False, False],
                                         [False, False, False, True]]
    torch.testing.assert_close(block.private_values, 10.0 * block.in_private.float())
    torch.testing.assert_close(block.public_values, torch.full((3, 4), 10.0))  # one public image for all K
    assert block.size == 2 * 4 + image_games.NOISE_COORDINATES


def test_bayes_optimal_success_matches_the_closed_form_without_subsampling():
    """p = 1, T = 1, K = 2: the optimal guess is the larger of y₀ ~ N(1, σ²) and y₁ ~ N(0, σ²), right with
    probability Φ(1/(σ√2)). The Monte Carlo estimate is within 5 standard errors (error probability < 1e-6)."""
    for sigma in (0.5, 1.0, 2.0):
        rate, error = image_games.bayes_optimal_success(1.0, sigma, 1, 2, draws=100_000, seed=1)
        assert abs(rate - norm.cdf(1 / (sigma * math.sqrt(2)))) < 5 * error


def test_bayes_optimal_success_of_k_orthogonal_canaries_without_subsampling():
    """p = 1, T = 1: success = P(y₀ > max of K − 1 standard normals) = ∫ φ(t) Φ(t + 1/σ)^{K−1} … computed by
    quadrature; within 5 standard errors."""
    sigma, k = 0.8, 4
    t = np.linspace(-10, 10, 20_001)
    exact = np.trapezoid(norm.pdf(t) * norm.cdf(t + 1 / sigma) ** (k - 1), t)
    rate, error = image_games.bayes_optimal_success(1.0, sigma, 1, k, draws=100_000, seed=2)
    assert abs(rate - exact) < 5 * error


@pytest.mark.slow
def test_an_image_audit_runs_through_the_game_registry(tmp_path):
    """configs/images_audit.yaml: the registered attribute game draws its canary among four images sharing a
    public image (the image map's canary_candidates) and audits Algorithm 1 on the CNN; 40 seeded trials pass."""
    from fdp_audit.cli import main

    config = Path(__file__).resolve().parents[2] / "configs" / "images_audit.yaml"
    assert main(["audit", str(config), "--trials", "40", "--out", str(tmp_path)]) == 0
    results = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert '"attribute"' in results and "pattern 3" in results
