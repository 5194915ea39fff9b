"""Theorem 4 bound and property tests of the trade-off curves (hypothesis, small example counts)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdp_audit.accounting import (
    BallEstimate,
    InvalidParameterError,
    MechanismAccountant,
    MechanismSpec,
    accountant_for,
    gaussian_tradeoff,
    mean_theorem4_bound,
    theorem4_bound,
    theorem4_bound_from_estimate,
)

# Parameters drawn from small sets so that examples share the cached PLDs.
NOISE = st.sampled_from([1.0, 2.0])
RATE = st.sampled_from([0.05, 1.0])
STEPS = st.sampled_from([1, 10])
RELATION = st.sampled_from(["add_remove", "replace"])
DIRECTION = st.sampled_from(["symmetric", "remove", "add"])
PROPERTY = settings(max_examples=10, deadline=None)


def _accountant(z: float, p: float, steps: int, relation: str = "add_remove") -> MechanismAccountant:
    return accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps, relation=relation))


@PROPERTY
@given(z=NOISE, p=RATE, steps=STEPS, relation=RELATION, direction=DIRECTION)
def test_curves_are_tradeoff_functions(z, p, steps, relation, direction):
    f = _accountant(z, p, steps, relation).curve(direction)
    grid = np.linspace(0.0, 1.0, 1001)
    values = f(grid)
    assert np.all(np.diff(values) <= 1e-12)  # non-increasing
    assert np.all(values <= 1 - grid + 1e-15) and np.all(values >= 0)  # f(α) <= 1 - α
    assert np.min(values[2:] - 2 * values[1:-1] + values[:-2]) >= -1e-9  # convex on the grid


@PROPERTY
@given(z=NOISE, p=RATE, steps=STEPS, balls=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_bound_is_monotone_in_ball(z, p, steps, balls):
    b = np.sort(np.array(balls))
    bounds = _accountant(z, p, steps).bound(b)
    assert np.all(np.diff(bounds) >= -1e-12)
    assert np.all(bounds >= b - 1e-15) and np.all(bounds <= 1)  # never below the prior's own success


@PROPERTY
@given(z=NOISE, p=RATE, steps=STEPS, ball=st.floats(1e-6, 0.999))
def test_bound_is_monotone_in_noise(z, p, steps, ball):
    assert _accountant(2 * z, p, steps).bound(ball) <= _accountant(z, p, steps).bound(ball) + 1e-9


def test_bound_for_gaussian_dp_is_phi_of_mu():
    """p = 1: the bound at Ball = 1/2 is 1 - G_μ(1/2) = Φ(μ), the Bayes-optimal success for a uniform
    binary attribute, where Theorem 4 is tight (docs/games.md)."""
    acc = _accountant(2.0, 1.0, 16)  # μ = sqrt(16) / 2 = 2
    assert acc.bound(0.5) == pytest.approx(stats.norm.cdf(2.0), abs=1e-4)


def test_bound_helpers():
    f = lambda a: gaussian_tradeoff(a, 1.0)  # noqa: E731 - a closed-form trade-off function
    assert theorem4_bound(f, 0.5) == pytest.approx(1 - gaussian_tradeoff(0.5, 1.0))
    assert theorem4_bound(f, np.array([0.1, 0.5])).shape == (2,)
    assert mean_theorem4_bound(f, [0.1, 0.5]) == pytest.approx(np.mean(theorem4_bound(f, np.array([0.1, 0.5]))))
    estimate = BallEstimate(0.30, 0.01, 0.32, 0.95, 10_000, "monte-carlo")
    assert theorem4_bound_from_estimate(f, estimate) == pytest.approx(theorem4_bound(f, 0.32))
    with pytest.raises(InvalidParameterError):
        theorem4_bound(f, 1.2)
    with pytest.raises(InvalidParameterError):
        mean_theorem4_bound(f, [])
