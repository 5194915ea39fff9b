"""TV(j) estimators (docs/corrdp.md; paper App. D): closed form vs Monte Carlo, convergence rates, the
upper-confidence bound and the mixed-table dispatch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from fdp_audit.corrdp.tv import (
    TVEstimate,
    feature_tv,
    gaussian_regression,
    gaussian_tv,
    tv_discrete,
    tv_gaussian,
    tv_histogram,
    tv_multinomial_logistic,
)

SIZES = np.array([400, 1600, 6400, 25600])
REPS = 200


def _slope(errors: list[float]) -> float:
    return float(np.polyfit(np.log(SIZES), np.log(errors), 1)[0])


def test_gaussian_closed_form_matches_monte_carlo() -> None:
    # TV(P, Q) = E_P[(1 - q/p)_+]; P = N(a, η²), Q = N(b, η²) against 2Φ(|a − b|/(2η)) − 1.
    rng = np.random.default_rng(7)
    a, b, eta = 0.3, 1.5, 1.2
    x = rng.normal(a, eta, size=400_000)
    ratio = np.exp(((x - a) ** 2 - (x - b) ** 2) / (2 * eta**2))
    samples = np.maximum(0.0, 1.0 - ratio)
    closed = gaussian_tv(np.array([a - b]), np.array([[eta**2]]))
    assert closed == pytest.approx(2 * ndtr(abs(a - b) / (2 * eta)) - 1, abs=1e-12)
    assert abs(samples.mean() - closed) < 4 * samples.std() / math.sqrt(len(x))


def test_multivariate_gaussian_tv_matches_monte_carlo() -> None:
    rng = np.random.default_rng(8)
    cov = np.array([[1.0, 0.4], [0.4, 0.8]])
    shift = np.array([0.5, -0.3])
    x = rng.multivariate_normal(np.zeros(2), cov, size=400_000)
    inv = np.linalg.inv(cov)
    log_ratio = -0.5 * np.einsum("ij,jk,ik->i", x + shift, inv, x + shift) + 0.5 * np.einsum("ij,jk,ik->i", x, inv, x)
    samples = np.maximum(0.0, 1.0 - np.exp(log_ratio))
    assert abs(samples.mean() - gaussian_tv(shift, cov)) < 4 * samples.std() / math.sqrt(len(x))


def test_regression_estimates_of_example_d3() -> None:
    rng = np.random.default_rng(3)
    u = rng.normal(size=50_000)
    s = 0.7 * u - 0.2 + rng.normal(0.0, 1.5, size=u.size)
    phi, psi, eta2 = gaussian_regression(s, u)
    assert phi[0] == pytest.approx(0.7, abs=0.02)
    assert psi[0] == pytest.approx(-0.2, abs=0.02)
    assert math.sqrt(eta2[0, 0]) == pytest.approx(1.5, abs=0.02)


def test_discrete_plug_in_error_shrinks_at_rate_one_half() -> None:
    rng = np.random.default_rng(1)
    p = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    truth = 0.5 * np.abs(p[0] - p[1]).sum()
    errors = []
    for n in SIZES:
        err = []
        for _ in range(REPS):
            u = rng.integers(0, 2, n)
            s = (rng.random(n)[:, None] > np.cumsum(p[u], axis=1)).sum(axis=1)
            err.append(abs(tv_discrete(s, u).value - truth))
        errors.append(float(np.mean(err)))
    assert _slope(errors) == pytest.approx(-0.5, abs=0.1)


def test_histogram_error_shrinks_at_rate_one_third() -> None:
    # Independent S and U (TV = 0): the error is the estimate, sqrt(#bins / n) with #bins ∝ n^{1/3}.
    rng = np.random.default_rng(1)
    errors = []
    for n in SIZES:
        estimates = [tv_histogram(rng.normal(size=n), rng.integers(0, 2, n)).value for _ in range(REPS)]
        errors.append(float(np.mean(estimates)))
    assert _slope(errors) == pytest.approx(-1 / 3, abs=0.1)


def test_gaussian_estimator_error_shrinks_at_rate_one_half() -> None:
    rng = np.random.default_rng(1)
    truth = 2 * ndtr(0.5 * 2 / 2) - 1  # φ = 0.5, η = 1, |u1 − u2| = 2
    errors = []
    for n in SIZES:
        err = []
        for _ in range(REPS):
            u = rng.normal(size=n)
            err.append(abs(tv_gaussian(0.5 * u + rng.normal(size=n), u, (-1.0, 1.0)).value - truth))
        errors.append(float(np.mean(err)))
    assert _slope(errors) == pytest.approx(-0.5, abs=0.1)


def test_multinomial_logistic_recovers_a_logistic_conditional() -> None:
    rng = np.random.default_rng(5)
    u = rng.uniform(0, 1, size=40_000)
    p1 = 1 / (1 + np.exp(-(4 * u - 2)))
    s = (rng.random(u.size) < p1).astype(int)
    truth = 1 / (1 + np.exp(-2)) - 1 / (1 + np.exp(2))  # |P(1 | u=1) − P(1 | u=0)|
    assert tv_multinomial_logistic(s, u, (0.0, 1.0)).value == pytest.approx(truth, abs=0.03)


def test_upper_confidence_formula_and_cap() -> None:
    est = TVEstimate(0.2, ("a", "b"), n=10_000, gamma=0.5, c2=0.5, method="plug-in")
    expected = 0.2 + 2 * 0.5 * math.sqrt(math.log(4 / 0.01)) / 100
    assert est.upper(4, 0.01) == pytest.approx(expected)
    assert est.upper(4, 0.01, c2=100.0) == 1.0


def test_plug_in_pair_and_identical_conditionals() -> None:
    u = np.array(["a"] * 4 + ["b"] * 4 + ["c"] * 4)
    s = np.array([0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1])
    est = tv_discrete(s, u)
    assert est.value == pytest.approx(0.5)
    assert set(est.pair) in ({"a", "c"}, {"b", "c"})
    assert tv_discrete(np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1])).value == 0.0


def test_feature_tv_dispatches_on_kinds() -> None:
    rng = np.random.default_rng(2)
    n = 4000
    u_cat = rng.choice(np.array(["p", "q"], dtype=object), n)
    u_num = rng.normal(size=n)
    columns = {
        "s_num": rng.normal(size=n) + (u_cat == "q"),
        "s_cat": np.where(rng.random(n) < 0.5, "x", "y").astype(object),
        "u_cat": u_cat,
        "u_num": u_num,
    }
    kinds = {"s_num": "numeric", "s_cat": "categorical", "u_cat": "categorical", "u_num": "numeric"}
    cat = feature_tv(columns, kinds, ["s_num", "s_cat"], "u_cat")
    assert cat.continuous.method.startswith("histogram") and cat.discrete.method == "plug-in"
    assert cat.joint is not None and 0.0 <= cat.estimate <= 1.0
    num = feature_tv(columns, kinds, ["s_num", "s_cat"], "u_num")
    assert num.continuous.method == "gaussian" and num.discrete.method == "multinomial-logistic"
    assert num.joint is None and num.upper(2, 0.05) >= num.estimate
