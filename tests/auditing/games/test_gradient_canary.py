"""The gradient-canary games' limits (docs/games.md): the most a claim allows in a binary game, against closed forms
at full sampling and a Monte Carlo of the likelihood-ratio test under Poisson sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from fdp_audit.accounting import accountant_for
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec
from fdp_audit.auditing.games.gradient_canary import binary_game_bound


def _accountants(z: float, p: float, steps: int) -> tuple[MechanismAccountant, MechanismAccountant]:
    """The claim's add/remove and replacement accountants (DP-SGD, z, p, T)."""
    return (accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps)),
            accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps, relation="replace")))


@pytest.mark.parametrize(("z", "steps"), [(1.5, 4), (2.0, 9), (1.0, 1)])
def test_binary_game_bound_closed_form_at_full_sampling(z: float, steps: int) -> None:
    """p = 1, μ = √T/z: the simulator game (insertion or deletion of a C-canary seen as N(1, z²) per step) is
    won at most with Φ(μ/2), the distinguishing game (±C, replacement) with Φ(μ). The PLD is pessimistic and
    discretised: its error stays below 1e-3."""
    add_remove, replace_one = _accountants(z, 1.0, steps)
    mu = math.sqrt(steps) / z
    assert binary_game_bound(add_remove, add_remove) == pytest.approx(norm.cdf(mu / 2), abs=1e-3)
    assert binary_game_bound(add_remove, replace_one) == pytest.approx(norm.cdf(mu), abs=1e-3)


def test_binary_game_bound_matches_monte_carlo_under_sampling() -> None:
    """z = 1.5, p = 0.5, T = 4: the bound is the Bayes-optimal success ½ + TV/2, which the likelihood-ratio
    test realises. Monte Carlo of that test over 200,000 draws of each world: standard error ≤ 0.0008, so the
    tolerance 0.005 (the PLD's discretisation error ≤ 1e-3 plus 5 standard errors) fails with probability
    below 1e-6. Measured: simulator 0.6301, distinguishing 0.7363."""
    z, p, steps, draws = 1.5, 0.5, 4, 200_000
    rng = np.random.default_rng(0)

    def log_density(y: np.ndarray, sign: float) -> np.ndarray:
        """log Π_t [(1 − p) φ(y_t/z) + p φ((y_t − s)/z)] up to a constant shared by every sign."""
        per_step = logsumexp([-0.5 * (y / z) ** 2 + math.log1p(-p), -0.5 * ((y - sign) / z) ** 2 + math.log(p)],
                             axis=0) if sign else -0.5 * (y / z) ** 2
        return per_step.sum(axis=1)

    def optimal_success(sign0: float, sign1: float) -> float:
        wins = 0
        for truth, sign in enumerate((sign0, sign1)):
            y = z * rng.standard_normal((draws, steps)) + sign * (rng.random((draws, steps)) < p)
            says_one = log_density(y, sign1) > log_density(y, sign0)
            wins += int((says_one == bool(truth)).sum())
        return wins / (2 * draws)

    add_remove, replace_one = _accountants(z, p, steps)
    assert binary_game_bound(add_remove, add_remove) == pytest.approx(optimal_success(0.0, 1.0), abs=5e-3)
    assert binary_game_bound(add_remove, replace_one) == pytest.approx(optimal_success(-1.0, 1.0), abs=5e-3)
