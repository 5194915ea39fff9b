"""Privacy profiles of DP-SGD / FDP-SGD by Monte Carlo over trained models (docs/profiles.md).

The known-answer case: one full-batch step (p = 1, T = 1) from zero, with every per-example gradient
inside the clip norm, is Gaussian output perturbation in closed form. With the engine's logistic model
(weights and bias θ = [w, b]) and labels y₀₁ ∈ {0, 1} the gradient at zero is g_j = (1/2 - y₀₁_j)[x_j, 1]
(‖g_j‖ <= √2/2 < C = 1 since ‖x_j‖ <= 1), so one SGD step of rate η gives

    𝒜(S) = N(-(η/|S|) Σ_{j∈S} g_j,  (η z C/|S|)² I),

for D (|S| = n) and for a removal (n - 1) or replacement (n) neighbour. The ball coverage of an isotropic
Gaussian is a non-central χ² probability, so the loss estimated from engine-trained models is checked
against the exact loss for the same cutoff.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from fdp_audit.config import config_from_dict
from fdp_audit.profiles.design import design_from_table
from fdp_audit.profiles.monte_carlo import monte_carlo_privacy_loss
from fdp_audit.profiles.neighbours import removal_neighbours, replacement_neighbours
from fdp_audit.profiles.trained import (
    neighbour_problem,
    profile_data,
    sample_models,
    training_problem,
    typical_estimate,
)

ETA, Z, C, N_ROWS, K = 1.0, 0.25, 1.0, 50, 4000


def _config(neighbour: str, mechanism: str = "dp_sgd"):
    return config_from_dict(
        {
            "device": "cpu",
            "mechanism": {"name": mechanism, "noise_multiplier": Z, "sample_rate": 1.0, "steps": 1,
                          "clip_norm": C, "optimizer": {"lr": ETA}},
            "profile": {"columns": ["age", "education-num"], "rows": N_ROWS, "mechanism": mechanism,
                        "neighbour": neighbour, "protected": ["education-num"]},
        }
    )


@pytest.fixture(scope="module")
def design(adult_table):
    return design_from_table(adult_table, ("age", "education-num"), "income", N_ROWS)


def _gaussian(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Mean and per-coordinate standard deviation of one noisy full-batch step from zero."""
    g = (0.5 - (y > 0))[:, None] * np.hstack([X, np.ones((X.shape[0], 1))])
    return -ETA * g.sum(axis=0) / X.shape[0], ETA * Z * C / X.shape[0]


def _ball(mean: np.ndarray, sd: float, point: np.ndarray, cutoff: float) -> float:
    return stats.ncx2.cdf(cutoff**2 / sd**2, mean.size, np.sum((mean - point) ** 2) / sd**2)


@pytest.mark.parametrize("kind", ["remove", "replace"])
def test_engine_samples_give_the_closed_form_loss(design, kind):
    torch.set_num_threads(1)
    config = _config(kind)
    problem = training_problem(config, config.profile, design, "income")
    if kind == "remove":
        neighbours = removal_neighbours(design.n)
        position = int(np.argmax(np.linalg.norm(design.X, axis=1)))
        X_y, y_y = np.delete(design.X, position, axis=0), np.delete(design.y, position)
    else:
        neighbours = replacement_neighbours(design.X, design.feature_mask(["education-num"]), design.reference)
        position = int(np.argmax(np.linalg.norm(neighbours.replacement - design.X, axis=1)))
        X_y, y_y = design.X.copy(), design.y
        X_y[position] = neighbours.replacement[position]
    mean_d, sd_d = _gaussian(design.X, design.y)
    mean_y, sd_y = _gaussian(X_y, y_y)

    base = sample_models(problem, 0, np.arange(K), torch.device("cpu"))
    other = sample_models(neighbour_problem(problem, neighbours, position), 0, K + np.arange(K), torch.device("cpu"))
    # The model law itself: mean within 5 standard errors per coordinate, variance within 10% (4.5 s.e. of
    # a variance from 4,000 draws); each fails by chance with probability below 1e-5.
    for samples, mean, sd in ((base, mean_d, sd_d), (other, mean_y, sd_y)):
        np.testing.assert_allclose(samples.mean(axis=0), mean, atol=5 * sd / math.sqrt(K))
        np.testing.assert_allclose(samples.var(axis=0), sd**2, rtol=0.1)
    assert not np.allclose(base[:10], other[:10])  # independent draws, not a shared seed

    # The loss at M = A(D)'s mean for a fixed cutoff: within 4 delta-method standard errors of the exact
    # ball loss (two-sided error probability about 6e-5); the shift makes the loss clearly non-zero.
    point, cutoff = mean_d, sd_d
    estimate = monte_carlo_privacy_loss(base, other[None], point[None, :], cutoff)
    exact = math.log(_ball(mean_d, sd_d, point, cutoff) / _ball(mean_y, sd_y, point, cutoff))
    assert exact > 0.3
    assert abs(estimate.loss[0, 0] - exact) <= 4 * estimate.standard_error[0, 0]


def test_profile_data_and_neighbour_problems(adult_table):
    design = design_from_table(adult_table, ("age", "marital-status"), "income", 30)
    data = profile_data(design, "income", ("marital-status",))
    assert [g.feature for g in data.public_map.groups] == ["age", "marital-status"]
    assert [g.kind for g in data.public_map.groups] == ["numeric", "categorical"]
    assert data.public_map.public_columns.tolist() == [0]  # Ψ is age alone
    assert set(data.train.y.tolist()) <= {0, 1} and (data.train.y == (design.y > 0)).all()

    config = _config("replace", "fdp_sgd")
    config = config_from_dict({**config.to_dict(), "profile": {**config.to_dict()["profile"],
                                                               "columns": ["age", "marital-status"],
                                                               "protected": ["marital-status"], "rows": 30}})
    problem = training_problem(config, config.profile, design, "income")
    assert problem.public_loss is not None and problem.public_loss.name == "mask"
    removed = neighbour_problem(problem, removal_neighbours(design.n), 7)
    assert removed.n == design.n - 1
    assert torch.equal(removed.x, torch.cat([problem.x[:7], problem.x[8:]]))
    neighbours = replacement_neighbours(design.X, design.feature_mask(["marital-status"]), design.reference)
    replaced = neighbour_problem(problem, neighbours, 7)
    changed = (replaced.x != problem.x).any(dim=1)
    assert changed.nonzero().flatten().tolist() in ([7], [])
    assert torch.equal(replaced.x[7, 0], problem.x[7, 0])  # the public column is kept
    assert torch.equal(replaced.y, problem.y)


def test_typical_estimate_averages_sorted_magnitudes_and_counts_unresolved():
    losses = np.array([[0.1, -0.3, 0.2], [0.5, 0.0, -0.1], [np.inf, 0.2, 0.1]])
    profile, unresolved = typical_estimate(losses[:2])
    np.testing.assert_allclose(profile, [(0.1 + 0.0) / 2, (0.2 + 0.1) / 2, (0.3 + 0.5) / 2])
    assert unresolved == 0
    profile, unresolved = typical_estimate(losses)
    assert unresolved == 1 and np.isinf(profile[-1]) and np.isfinite(profile[:-1]).all()


def test_every_neighbour_model_names_how_its_ranking_was_made():
    """results.json says which A(y_i) ranked the studied neighbours: exact Newton models or the Okumura sphere's
    worst-case points (it had said "exact Newton" for both)."""
    import typing

    from fdp_audit.config import ProfileConfig
    from fdp_audit.profiles.trained import _OFFSET_SOURCES

    models = typing.get_args(typing.get_type_hints(ProfileConfig)["neighbour_model"])
    assert set(models) == set(_OFFSET_SOURCES)
    assert "Okumura" in _OFFSET_SOURCES["okumura"] and "Newton" in _OFFSET_SOURCES["exact"]
