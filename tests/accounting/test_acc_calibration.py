"""Noise calibration and the step budget (docs/files.md ``calibrate``)."""

from __future__ import annotations

import pytest

from fdp_audit.accounting import (
    InvalidParameterError,
    MechanismSpec,
    accountant_for,
    calibrate_noise_multiplier,
    gaussian_epsilon,
    max_steps_for_budget,
)


def _epsilon(z: float, p: float, steps: int, delta: float) -> float:
    return accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps)).epsilon(delta)


def test_calibrated_noise_meets_the_budget_tightly():
    p, steps, delta, target = 0.05, 100, 1e-5, 1.0
    z = calibrate_noise_multiplier(target, delta, p, steps)
    assert _epsilon(z, p, steps, delta) <= target
    assert _epsilon(z / (1 + 2e-3), p, steps, delta) > target  # relative tolerance 1e-3


def test_calibration_full_batch_matches_gaussian_closed_form():
    """p = 1: ε(δ) of G_{sqrt(T)/z}; invert the closed form for the expected z."""
    steps, delta, target = 25, 1e-5, 2.0
    z = calibrate_noise_multiplier(target, delta, 1.0, steps)
    assert gaussian_epsilon(delta, steps**0.5 / z) == pytest.approx(target, rel=5e-3)


def test_max_steps_is_the_largest_affordable():
    z, p, delta, target = 1.0, 0.05, 1e-5, 2.0
    steps = max_steps_for_budget(target, delta, z, p)
    assert steps >= 1
    assert _epsilon(z, p, steps, delta) <= target < _epsilon(z, p, steps + 1, delta)


def test_max_steps_edges():
    assert max_steps_for_budget(1e-3, 1e-5, 0.5, 1.0) == 0  # one step already exceeds the budget
    assert max_steps_for_budget(10.0, 1e-5, 50.0, 0.01, max_steps=64) == 64  # never exhausted


def test_calibration_rejects_bad_targets():
    with pytest.raises(InvalidParameterError) as info:
        calibrate_noise_multiplier(0.0, 1e-5, 0.1, 10)
    assert info.value.field == "epsilon"
    with pytest.raises(InvalidParameterError):
        calibrate_noise_multiplier(1.0, 1.0, 0.1, 10)
    with pytest.raises(InvalidParameterError):
        calibrate_noise_multiplier(1.0, 1e-5, 0.0, 10)
    with pytest.raises(InvalidParameterError):
        max_steps_for_budget(1.0, 1e-5, -1.0, 0.1)
