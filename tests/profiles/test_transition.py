"""The ε sweep and the transition rule (docs/profiles.md; paper Figs. 5-7)."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.profiles.neighbours import removal_neighbours, worst_case_points
from fdp_audit.profiles.transition import (
    EpsilonSweep,
    beta_star,
    detect_transition,
    epsilon_sweep,
    rank_positions,
)


def _synthetic_sweep(onsets: list[float], widths: list[float]) -> EpsilonSweep:
    """Curves that rise smoothly (in log β) from 1 to 3 between β = onset and β = onset·width."""
    epsilons = np.geomspace(1e-2, 1e4, 61)
    scales = epsilons * 50.0
    profiles = []
    for onset, width in zip(onsets, widths):
        x = np.clip(np.log(scales / onset) / np.log(width), 0, 1)
        profiles.append((1 + 2 * (3 * x**2 - 2 * x**3)) * scales)  # smoothstep, times β
    return EpsilonSweep("laplace", epsilons, scales, np.array(profiles).T, np.zeros((61, 2)), np.zeros((61, 2)), 10)


def test_rule_finds_onsets_and_ends_of_known_curves():
    sweep = _synthetic_sweep([1e2, 3e2], [100.0, 10.0])
    tr = detect_transition(sweep, np.array([0, 1]), tau=0.05)
    # smoothstep reaches 0.05 at x = 0.1311 and 0.95 at x = 0.8689.
    assert tr.onset_scale == pytest.approx([1e2 * 100**0.1311, 3e2 * 10**0.1311], rel=0.03)
    assert tr.end_scale == pytest.approx([1e2 * 100**0.8689, 3e2 * 10**0.8689], rel=0.03)
    assert tr.scale_low == pytest.approx(tr.onset_scale.min()) and tr.scale_high == pytest.approx(tr.end_scale.max())
    assert tr.epsilon_low == pytest.approx(tr.scale_low / 50.0, rel=1e-9)  # ε = β/50 in this sweep
    assert tr.low_plateau_reached.all() and tr.high_plateau_reached.all()


def test_rule_flags_a_plateau_outside_the_grid():
    sweep = _synthetic_sweep([1e5, 1e2], [1e3, 10.0])  # the first curve still rises at the top of the grid
    tr = detect_transition(sweep, np.array([0, 1]))
    assert not tr.high_plateau_reached[0] and tr.high_plateau_reached[1]


def test_rank_positions():
    assert rank_positions(100, np.array([0.0, 0.01, 0.5, 1.0])).tolist() == [0, 0, 49, 99]


def test_sweep_plateaus_on_adult(adult_small, fitted, rng):
    """The two plateaus of the typical |l|/β: at large β the sorted ‖Δ_i‖; at small β the mean over
    directions û of the sorted |Δ_i·û|, whose top is at most the largest ‖Δ_i‖."""
    w = fitted["adult_small"]
    deltas = worst_case_points(adult_small.X, adult_small.y, w, 1.0, removal_neighbours(adult_small.n)) - w
    sweep = epsilon_sweep("laplace", deltas, adult_small.n, 1.0, np.geomspace(1e-2, 1e6, 25), 400, rng)
    norms = np.sort(np.linalg.norm(deltas, axis=1))
    assert np.allclose(sweep.profiles[-1] / sweep.scales[-1], norms, rtol=1e-3)
    top = sweep.at_positions(np.array([adult_small.n - 1]))[0]
    assert top[0] < 0.9 * norms[-1] and np.ptp(top[:5]) < 1e-3 * top[0]
    tr = detect_transition(sweep, rank_positions(adult_small.n, np.array([0.5, 1.0])))
    assert tr.low_plateau_reached.all() and tr.high_plateau_reached.all()
    assert sweep.epsilons[0] < tr.epsilon_low < tr.epsilon_high < sweep.epsilons[-1]
    b_star, i = beta_star(deltas)
    assert i == np.argmax(np.linalg.norm(deltas, axis=1)) and b_star == pytest.approx(1 / norms[-1])
