"""The accounting object of each mechanism (docs/training.md) and numerical edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdp_audit.accounting import (
    InvalidParameterError,
    MechanismAccountant,
    MechanismSpec,
    Segment,
    gdp_clt_mu_approximation,
)
from fdp_audit.training.mechanisms import MECHANISMS, faulty_mechanisms

ALPHA = np.array([0.0, 1e-6, 1e-3, 0.1, 0.5, 1.0])


def test_nonprivate_has_no_privacy():
    acc = MechanismAccountant(MechanismSpec("nonprivate"))
    np.testing.assert_array_equal(acc.f(ALPHA), 0.0)
    assert acc.epsilon(1e-5) == math.inf
    assert acc.delta(10.0) == 1.0
    assert acc.bound(0.2) == 1.0
    assert acc.gdp_clt_mu() is None


def test_public_only_is_zero_zero_fdp():
    acc = MechanismAccountant(MechanismSpec("public_only"))
    np.testing.assert_allclose(acc.f(ALPHA), 1 - ALPHA)
    assert acc.epsilon(1e-5) == 0.0 and acc.delta(0.0) == 0.0
    assert acc.bound(0.3) == pytest.approx(0.3)  # the adversary learns nothing beyond the prior


@pytest.mark.parametrize("faulty", sorted(faulty_mechanisms()))
def test_faulty_mechanisms_are_accounted_as_they_claim(faulty):
    spec = MechanismSpec(faulty, 1.0, 0.05, 50)
    claimed = MechanismSpec(spec.claimed_as, 1.0, 0.05, 50)
    assert claimed.name in ("dp_sgd", "fdp_sgd")
    a, b = MechanismAccountant(spec), MechanismAccountant(claimed)
    assert a.epsilon(1e-5) == b.epsilon(1e-5)
    np.testing.assert_array_equal(a.f(ALPHA), b.f(ALPHA))


def test_gaussian_mechanisms_share_the_subsampled_gaussian_accounting():
    reference = MechanismAccountant(MechanismSpec("dp_sgd", 1.0, 0.05, 50))
    for name in ("fdp_sgd", "fdp_dpsgd", "corrdp_sgd"):
        acc = MechanismAccountant(MechanismSpec(name, 1.0, 0.05, 50, public_pretrain_steps=500))
        assert acc.epsilon(1e-5) == reference.epsilon(1e-5)  # public steps cost nothing (Remark 2)
    assert set(MECHANISMS) >= {"nonprivate", "public_only", "dp_sgd", "fdp_sgd", "fdp_dpsgd", *faulty_mechanisms()}


def test_accountant_is_vectorised_and_consistent():
    acc = MechanismAccountant(MechanismSpec("fdp_sgd", 1.0, 1 / 16, 100))
    deltas = np.array([1e-3, 1e-5, 1e-8])
    eps = acc.epsilon(deltas)
    assert eps.shape == (3,) and np.all(np.diff(eps) > 0)
    np.testing.assert_allclose(acc.delta(eps), deltas, rtol=1e-3)  # δ(ε(δ)) = δ up to the grid
    unsorted = np.array([4.0, 0.0, 2.0])
    np.testing.assert_allclose(acc.delta(unsorted), [acc.delta(4.0), acc.delta(0.0), acc.delta(2.0)])
    assert acc.f(np.zeros((2, 3))).shape == (2, 3)
    assert isinstance(acc.f(0.5), float) and isinstance(acc.bound(0.5), float)
    assert acc.gdp_clt_mu() == pytest.approx(gdp_clt_mu_approximation(1.0, 1 / 16, 100))


def test_spec_validation():
    with pytest.raises(InvalidParameterError, match="unknown mechanism"):
        MechanismSpec("dp_sgd_v2", 1.0, 0.1, 10)
    cases = [
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(noise_multiplier=math.nan), "noise_multiplier"),
        (dict(sample_rate=0.0), "sample_rate"),
        (dict(sample_rate=1.5), "sample_rate"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(public_pretrain_steps=-1), "public_pretrain_steps"),
        (dict(relation="swap"), "relation"),
    ]
    for override, field in cases:
        kwargs = dict(name="dp_sgd", noise_multiplier=1.0, sample_rate=0.1, steps=10) | override
        with pytest.raises(InvalidParameterError) as info:
            MechanismSpec(**kwargs)
        assert info.value.field == field
    with pytest.raises(InvalidParameterError):
        MechanismSpec("fdp_sgd")  # a Gaussian mechanism needs its parameters
    acc = MechanismAccountant(MechanismSpec("dp_sgd", 1.0, 0.1, 10))
    for bad in (0.0, 1.0, -1.0):
        with pytest.raises(InvalidParameterError):
            acc.epsilon(bad)
    with pytest.raises(InvalidParameterError):
        acc.delta(-0.5)
    with pytest.raises(InvalidParameterError):
        acc.f(1.01)
    with pytest.raises(InvalidParameterError):
        acc.curve("sideways")


def test_schedule_spec():
    spec = MechanismSpec("fdp_sgd", schedule=[Segment(2.0, 0.1, 10), Segment(1.0, 0.1, 5)])
    assert spec.total_steps == 15 and isinstance(spec.schedule, tuple)


def test_edge_cases_give_finite_monotone_answers():
    """p = 1, T = 1, z from 0.3 to 100, δ down to 1e-12, ε up to 50: finite, monotone answers."""
    strongest = []
    for z in (0.3, 0.5, 1.0, 10.0, 100.0):
        acc = MechanismAccountant(MechanismSpec("dp_sgd", z, 1.0, 1))
        eps = acc.epsilon(np.array([1e-3, 1e-6, 1e-12]))
        assert np.all(np.isfinite(eps)) and np.all(np.diff(eps) >= 0)
        delta = acc.delta(np.array([0.0, 1.0, 10.0, 50.0]))
        assert np.all(np.isfinite(delta)) and np.all(np.diff(delta) <= 0) and np.all(delta >= 0)
        f = acc.f(np.linspace(0, 1, 101))
        assert np.all(np.diff(f) <= 1e-12) and np.all(np.isfinite(f))
        strongest.append(eps[-1])
    assert np.all(np.diff(strongest) < 0)  # more noise, less leakage


def test_edge_cases_with_sampling():
    eps = [MechanismAccountant(MechanismSpec("dp_sgd", z, 0.01, 10)).epsilon(1e-12) for z in (0.5, 2.0, 100.0)]
    assert np.all(np.isfinite(eps)) and np.all(np.diff(eps) < 0)
