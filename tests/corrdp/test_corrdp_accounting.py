"""Realised privacy by exact Gaussian accounting (docs/corrdp.md): closed forms against direct computations,
the Eq. 4 figures of docs/corrdp.md, and the Theorem 3.9 check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.privacy_accountant import NeighboringRelation
from scipy.integrate import quad
from scipy.stats import norm

from fdp_audit.corrdp.accounting import (
    calibration_crossover,
    composed_epsilon,
    eq4_calibration,
    gdp_delta,
    gdp_epsilon,
    realised_privacy,
    theorem_3_9_check,
)
from fdp_audit.corrdp.noise import INTERCEPT, eq4_variance


def _hockey_stick(epsilon: float, shift: float, scale: float) -> float:
    """δ(ε) = ∫ max(0, p − e^ε q) for p = N(shift, scale²), q = N(0, scale²), by quadrature."""
    def integrand(t: float) -> float:
        return max(0.0, norm.pdf(t, shift, scale) - math.exp(epsilon) * norm.pdf(t, 0.0, scale))

    lo, hi = -12 * scale, shift + 12 * scale
    return quad(integrand, lo, hi, points=[shift / 2 + epsilon * scale**2 / shift], limit=200)[0]


def test_gdp_profile_matches_quadrature() -> None:
    for mu in (0.3, 1.0, 2.5):
        for eps in (0.0, 0.5, 2.0):
            assert gdp_delta(eps, mu) == pytest.approx(_hockey_stick(eps, mu, 1.0), abs=1e-9)


def test_one_coordinate_realised_epsilon_against_direct_computation() -> None:
    # One sensitive coordinate, full-batch GD: T steps of N(·, σ²) whose mean moves by L/n. The sum of
    # the T outputs is sufficient, N(0, Tσ²) vs N(T L/n, Tσ²); find ε where its hockey stick equals δ.
    epsilon, delta, lipschitz, steps, n = 2.0, 1e-5, 1.5, 50, 400
    sigma = math.sqrt(eq4_variance(epsilon, delta, lipschitz, steps, n))
    rows = realised_privacy(
        "standard", np.array([sigma]), ("s",), frozenset({"s"}), {}, epsilon, delta, lipschitz, n, steps
    )
    realised = rows[0].realised["paper"]
    shift, scale = steps * lipschitz / n, math.sqrt(steps) * sigma
    lo, hi = 0.0, 20.0
    for _ in range(60):  # bisection on the decreasing δ(ε)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _hockey_stick(mid, shift, scale) > delta else (lo, mid)
    assert realised == pytest.approx(lo, abs=1e-6)
    # and dp_accounting's PLD of the T-fold composition (pessimistic, so from above)
    step = pld.from_gaussian_mechanism(sigma, sensitivity=lipschitz / n, value_discretization_interval=1e-4)
    pld_eps = step.self_compose(steps).get_epsilon_for_delta(delta)
    assert realised <= pld_eps <= realised + 0.01


def test_spec_eq4_figures() -> None:
    # docs/corrdp.md: nominal 5 → about 6.6, 2 → 2.3, 1 → 1.06 at δ = 1e-5.
    rows = {r["nominal_epsilon"]: r for r in eq4_calibration((5.0, 2.0, 1.0), 1e-5)}
    assert rows[5.0]["realised_epsilon"] == pytest.approx(6.6, abs=0.05)
    assert rows[2.0]["realised_epsilon"] == pytest.approx(2.3, abs=0.02)
    assert rows[1.0]["realised_epsilon"] == pytest.approx(1.06, abs=0.005)
    assert all(r["sigma_ratio"] < 1 for r in rows.values())  # Eq. 4 adds too little noise for these ε
    assert 0.5 < calibration_crossover(1e-5) < 0.6  # over-delivers only below ε ≈ 0.54


def test_subsampled_path_uses_the_matching_replace_one_convention() -> None:
    # At q = 1 dp_accounting's REPLACE_ONE with contribution s/2 is the Gaussian with difference s.
    step_mu, steps, delta = 0.2, 30, 1e-5
    full = pld.from_gaussian_mechanism(
        1.0, sensitivity=step_mu / 2, sampling_prob=1.0, neighboring_relation=NeighboringRelation.REPLACE_ONE
    )
    assert full.self_compose(steps).get_epsilon_for_delta(delta) == pytest.approx(
        composed_epsilon(step_mu, steps, delta), abs=0.01
    )
    assert composed_epsilon(step_mu, steps, delta, sample_rate=0.1) < composed_epsilon(step_mu, steps, delta)
    assert gdp_epsilon(delta, 0.0) == 0.0


def test_realised_privacy_per_neighbour_type() -> None:
    groups = ("s", "s", "u", INTERCEPT)
    sensitive = frozenset({"s"})
    tv = {"u": 0.25}
    sigma = math.sqrt(eq4_variance(1.0, 1e-5, 1.0, 100, 1000))
    std = sigma * np.sqrt(np.array([1.0, 1.0, 0.25, 1.0]))
    corr = {r.neighbour: r for r in realised_privacy("corrdp", std, groups, sensitive, tv, 1.0, 1e-5, 1.0, 1000, 100)}
    assert set(corr) == {"sensitive", "insensitive:u"}
    assert corr["insensitive:u"].nominal_epsilon == pytest.approx(4.0)
    # σ_U = σ_S/2 doubles μ for the insensitive change; unconfined: any change can hit the u coordinate
    doubled_mu = 2 * 1.0 / math.sqrt(math.log(1e5) + 1)
    assert corr["insensitive:u"].realised["paper"] == pytest.approx(gdp_epsilon(1e-5, doubled_mu))
    assert corr["sensitive"].realised["unconfined"] == corr["insensitive:u"].realised["unconfined"]
    assert corr["sensitive"].realised["unconfined"] > corr["sensitive"].realised["paper_replace"]
    semi_std = sigma * np.array([1.0, 1.0, 0.0, 1.0])
    semi_rows = realised_privacy("semi", semi_std, groups, sensitive, tv, 1.0, 1e-5, 1.0, 1000, 100)
    semi = {r.neighbour: r for r in semi_rows}
    assert semi["insensitive:u"].nominal_epsilon is None and semi["insensitive:u"].realised["paper"] is None
    assert semi["sensitive"].realised["unconfined"] is None  # a sensitive change can move the un-noised coordinate


def test_theorem_3_9_conflicts_with_its_lower_bound() -> None:
    check = theorem_3_9_check([1.0] * 99, m=100, m_s=1, n=1000, epsilon=1.0, delta=1e-5)
    assert check["conflict"] and check["corrected_consistent"]
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(2, 60))
        m_s = int(rng.integers(1, m))
        tv = rng.random(m - m_s) ** rng.uniform(0.2, 5)
        assert theorem_3_9_check(tv, m, m_s, 500, 1.0, 1e-5)["corrected_consistent"]
