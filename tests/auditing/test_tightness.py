"""The tightness table (docs/games.md): the Bayes-optimal success of the ±C-canary game in closed form,
the trial count behind a ±0.1 interval, and a small run of the iterates attack against the optimum."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binom, norm

from fdp_audit.auditing.games.gradient_canary import bayes_optimal_success
from fdp_audit.auditing.stats import clopper_pearson, tightness
from fdp_audit.auditing.tightness import (
    tightness_config,
    tightness_markdown,
    tightness_row,
    trials_for_half_width,
)
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict


@pytest.mark.parametrize(("z", "steps"), [(2.0, 2), (1.0, 1), (4.0, 10)])
def test_optimum_is_the_gaussian_closed_form_at_full_batch(z: float, steps: int) -> None:
    """At p = 1 the two outputs are N(∓1, z²)^T (units of C): TV = 2Φ(√T/z) − 1, so the optimum is Φ(√T/z), and
    Theorem 4 is exact there (bound = optimum, tightness 1); PLD discretisation error stays below 1e-3."""
    mech = config_from_dict({"mechanism": {"name": "fdp_sgd", "noise_multiplier": z, "sample_rate": 1.0,
                                           "steps": steps}}).mechanism
    optimum = bayes_optimal_success(Claim.of(mech).replace_one)
    assert optimum == pytest.approx(norm.cdf(math.sqrt(steps) / z), abs=1e-3)
    assert tightness(optimum, 0.5, float(Claim.of(mech).add_remove.bound(0.5))) == pytest.approx(1.0, abs=5e-3)


@pytest.mark.parametrize("optimum", [0.5952, 0.6549, 0.7264, 0.8067])
def test_trial_count_gives_the_requested_interval(optimum: float) -> None:
    """With the computed number of trials and the success at the optimum, the 95% Clopper–Pearson interval of
    the advantage share is ±0.1 or narrower (and not needlessly narrower than ±0.09)."""
    n = trials_for_half_width(optimum, 0.1)
    low, high = clopper_pearson(round(n * optimum), n, 0.05)
    half = (tightness(high, 0.5, optimum) - tightness(low, 0.5, optimum)) / 2
    assert 0.09 <= half <= 0.1 and n % 2 == 0


@pytest.mark.slow
def test_iterates_attack_realises_the_optimal_advantage() -> None:
    """fdp_sgd at ε = 8 (p = 1/16, T = 100), 400 trials. If the attack realises the share s of the optimal
    advantage, its successes are Binomial(400, ½ + s·(optimum − ½)). The test fails only if the successes fall
    below the 1e-4 quantile for s = 0.9 (probability ≤ 1e-4 when s ≥ 0.9; a share of 0.6 is caught with
    probability about 2/3) or above the 1 − 1e-4 quantile at the optimum (no attack can beat it)."""
    row = tightness_row(tightness_config(8.0), trials=400)
    n, k, optimum = row["trials"], row["successes"], row["optimal_success"]
    assert row["epsilon"] == pytest.approx(8.0, abs=0.01) and 0.78 < row["theorem4_tightness"] < 0.85
    assert binom.ppf(1e-4, n, 0.5 + 0.9 * (optimum - 0.5)) <= k <= binom.ppf(1 - 1e-4, n, optimum)
    assert row["ci"][0] <= row["attack_advantage_share"] <= row["ci"][1]
    # each game's ε lower bounds exceed the claimed ε with probability ≤ α = 0.05 (the gate's promise)
    for key in ("epsilon_lower_bound_ratio", "epsilon_lower_bound_ratio_cp", "simulator_epsilon_ratio",
                "simulator_epsilon_ratio_cp"):
        assert 0 <= row[key] <= 1
    # the family bound is informative at 400 trials (seeded, so deterministic on CPU; the value is in the report)
    assert row["epsilon_lower_bound_ratio"] > 0.2
    table = tightness_markdown([row])
    assert table.count("\n| fdp_sgd | 8 (1e-05) |") == 1 and "p = 0.0625, T = 100" in table
