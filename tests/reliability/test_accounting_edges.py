"""Numerical edge cases that break other accountants: δ = 1e-12, ε = 50, p = 1, T = 1 and noise
multipliers from 0.3 to 100, through :class:`MechanismAccountant` and the ``account`` / ``calibrate`` commands.
Answers are finite, monotone in z, T and p, and — where a closed form exists (p = 1, T = 1: one Gaussian
mechanism of sensitivity 1, Balle & Wang 2018, Theorem 8) — within the discretisation of the exact value;
parameters with no meaningful answer are refused with exit code 2 and one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from fdp_audit.accounting import MechanismSpec, accountant_for

Z_GRID = (0.3, 0.5, 1.0, 3.0, 10.0, 100.0)
DELTA, EPSILON = 1e-12, 50.0


def gaussian_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of the Gaussian mechanism with μ = sensitivity / σ (Balle & Wang 2018, Theorem 8)."""
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2))


def gaussian_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 200.0, xtol=1e-12)


@pytest.mark.parametrize("z", Z_GRID)
def test_one_full_batch_step_matches_the_gaussian_mechanism(z: float) -> None:
    """p = 1, T = 1 is one Gaussian mechanism: the pessimistic PLD is an upper bound within 1% + 1e-3 of the exact
    ε(1e-12), from ε ≈ 0.07 (z = 100) to ε ≈ 28 (z = 0.3)."""
    exact = gaussian_epsilon(DELTA, 1 / z)
    got = float(accountant_for(MechanismSpec.gaussian("fdp_sgd", z, 1.0, 1)).epsilon(DELTA))
    assert exact <= got <= exact * 1.01 + 1e-3


@pytest.mark.parametrize(("p", "steps"), [(1.0, 1), (0.01, 100)])
def test_finite_and_monotone_in_the_noise(p: float, steps: int) -> None:
    eps, delta = [], []
    for z in (0.3, 1.0, 10.0, 100.0):
        acc = accountant_for(MechanismSpec.gaussian("fdp_sgd", z, p, steps))
        eps.append(float(acc.epsilon(DELTA)))
        delta.append(float(acc.delta(EPSILON)))
    assert np.all(np.isfinite(eps)) and np.all(np.asarray(eps) >= 0)
    assert np.all(np.diff(eps) < 0), eps  # more noise, less leakage
    assert np.all((np.asarray(delta) >= 0) & (np.asarray(delta) <= 1)) and np.all(np.diff(delta) <= 0), delta


def test_monotone_in_steps_and_rate() -> None:
    def epsilon(p: float, steps: int) -> float:
        return float(accountant_for(MechanismSpec.gaussian("fdp_sgd", 1.0, p, steps)).epsilon(DELTA))

    by_steps = [epsilon(0.01, t) for t in (1, 10, 100)]
    by_rate = [epsilon(p, 10) for p in (0.01, 0.1, 1)]
    assert np.all(np.diff(by_steps) > 0) and np.all(np.diff(by_rate) > 0)


def test_account_cli_at_the_edges(cli) -> None:
    epsilons = []
    for z in (0.3, 1.0, 100.0):
        result = cli("account", "--noise-multiplier", z, "--sample-rate", 1, "--steps", 1, "--delta", DELTA,
                     "--epsilon", EPSILON, "--json")
        assert result.code == 0, result.err
        out = json.loads(result.out)
        epsilons.append(out["epsilon"]["1e-12"])
        assert 0 <= out["delta"]["50.0"] <= 1e-12
        assert all(math.isfinite(v) for v in (*out["f"].values(), *out["bound"].values()))
    assert epsilons == sorted(epsilons, reverse=True)


def test_calibrate_cli_at_the_edges(cli) -> None:
    """At δ = 1e-12 and p = 1: the z calibrated for one step meets a tight ε = 0.01, and z = 0.3 affords two
    steps within ε = 50 (one step costs about 28, so the answer is exactly 2, checked against the closed form)."""
    result = cli("calibrate", "--epsilon", 0.01, "--delta", DELTA, "--sample-rate", 1, "--steps", 1, "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    z = out["noise_multiplier"]
    assert math.isfinite(z) and out["achieved_epsilon"] <= 0.01
    assert gaussian_epsilon(DELTA, 1 / z) <= 0.01 <= gaussian_epsilon(DELTA, 1 / (0.99 * z))
    result = cli("calibrate", "--max-steps", "--noise-multiplier", 0.3, "--epsilon", EPSILON, "--delta", DELTA,
                 "--sample-rate", 1, "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    # T steps of a full-batch Gaussian mechanism compose to one with μ = sqrt(T) / z
    assert out["max_steps"] == 2 and gaussian_epsilon(DELTA, math.sqrt(3) / 0.3) > EPSILON
    assert gaussian_epsilon(DELTA, math.sqrt(2) / 0.3) <= out["achieved_epsilon"] <= EPSILON


@pytest.mark.parametrize("argv", [
    ["account", "--noise-multiplier", "0", "--sample-rate", "1", "--steps", "1"],
    ["account", "--noise-multiplier", "inf", "--sample-rate", "1", "--steps", "1"],
    ["account", "--noise-multiplier", "1", "--sample-rate", "1", "--steps", "1", "--delta", "1e-400"],
    ["account", "--noise-multiplier", "1", "--sample-rate", "1", "--steps", "1", "--epsilon", "nan"],
    ["calibrate", "--epsilon", "inf", "--delta", "1e-12", "--sample-rate", "1", "--steps", "1"],
    ["calibrate", "--epsilon", "1", "--delta", "nan", "--sample-rate", "1", "--steps", "1"],
    # a tiny z asks dp_accounting for a one-step PMF of 10^9 points or more; 1/z² overflows at z = 1e-200
    ["account", "--noise-multiplier", "0.001", "--sample-rate", "0.017", "--steps", "300"],
    ["account", "--noise-multiplier", "1e-200", "--sample-rate", "1", "--steps", "1"],
    ["calibrate", "--max-steps", "--noise-multiplier", "1e-200", "--epsilon", "1", "--delta", "1e-5",
     "--sample-rate", "0.01"],
], ids=["z=0", "z=inf", "delta underflows to 0", "epsilon nan", "epsilon inf", "delta nan", "z=0.001", "z=1e-200",
        "calibrate z=1e-200"])
def test_meaningless_parameters_are_refused(cli, one_line_error, argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 2 and result.out == ""
    one_line_error(result.err)


@pytest.mark.parametrize("z", [0.037, 0.03, 1e-200])
def test_the_grid_of_a_tiny_noise_multiplier_does_not_overflow(z: float) -> None:
    """e^{1/z²} overflows a float below z ≈ 0.0375 (an OverflowError, exit 3, in account, calibrate and train):
    such a step's loss scale exceeds every grid, so the default grid is kept and the size check decides."""
    from fdp_audit.accounting.pld import DEFAULT_DISCRETIZATION, Segment, resolve_discretization

    assert resolve_discretization((Segment(z, 0.017, 300),)) == DEFAULT_DISCRETIZATION
