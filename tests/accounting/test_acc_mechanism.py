"""The accountant of each kind of privacy event, chosen by the event (docs/accounting.md), and numerical edge
cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdp_audit.accounting import (
    ACCOUNTANTS,
    ClosedFormAccountant,
    InvalidParameterError,
    MechanismAccountant,
    MechanismSpec,
    NonPrivateEvent,
    PldAccountant,
    PrivacyEvent,
    PublicOnlyEvent,
    Segment,
    SubsampledGaussianEvent,
    TradeoffCurve,
    accountant_for,
    gdp_clt_mu_approximation,
    register_accountant,
    unregister_accountant,
)
from fdp_audit.mechanisms import MECHANISMS, faulty_mechanisms

ALPHA = np.array([0.0, 1e-6, 1e-3, 0.1, 0.5, 1.0])


def test_nonprivate_has_no_privacy():
    acc = accountant_for(MechanismSpec("nonprivate", NonPrivateEvent()))
    np.testing.assert_array_equal(acc.f(ALPHA), 0.0)
    assert acc.epsilon(1e-5) == math.inf
    assert acc.delta(10.0) == 1.0
    assert acc.bound(0.2) == 1.0
    assert acc.gdp_clt_mu() is None


def test_public_only_is_zero_zero_fdp():
    acc = accountant_for(MechanismSpec("public_only", PublicOnlyEvent()))
    np.testing.assert_allclose(acc.f(ALPHA), 1 - ALPHA)
    assert acc.epsilon(1e-5) == 0.0 and acc.delta(0.0) == 0.0
    assert acc.bound(0.3) == pytest.approx(0.3)  # the adversary learns nothing beyond the prior


@pytest.mark.parametrize("faulty", sorted(faulty_mechanisms()))
def test_faulty_mechanisms_are_accounted_as_they_claim(faulty):
    row = MECHANISMS[faulty]
    claimed = MECHANISMS[row.claimed_as]
    assert claimed.name in ("dp_sgd", "fdp_sgd")
    assert row.claimed_event(1.0, 0.05, 50) == claimed.claimed_event(1.0, 0.05, 50)
    a = accountant_for(MechanismSpec(faulty, row.claimed_event(1.0, 0.05, 50)))
    b = accountant_for(MechanismSpec(claimed.name, claimed.claimed_event(1.0, 0.05, 50)))
    assert a.epsilon(1e-5) == b.epsilon(1e-5)
    np.testing.assert_array_equal(a.f(ALPHA), b.f(ALPHA))


def test_the_accountant_is_chosen_by_the_event_not_the_name():
    assert isinstance(accountant_for(MechanismSpec("dp_sgd", NonPrivateEvent())), ClosedFormAccountant)
    assert isinstance(accountant_for(MechanismSpec("nonprivate", SubsampledGaussianEvent.claimed(1.0, 0.1, 10))),
                      PldAccountant)
    spec = MechanismSpec.gaussian("dp_sgd", 1.0, 0.1, 10)
    assert accountant_for(spec) is accountant_for(MechanismSpec.gaussian("dp_sgd", 1.0, 0.1, 10))  # built once
    with pytest.raises(TypeError):
        MechanismAccountant(spec)  # abstract: accountant_for picks the one that supports the event


def test_a_new_kind_of_event_is_accounted_by_the_accountant_registered_for_it(monkeypatch):
    class HalfPrivacyEvent(PrivacyEvent):
        """f(α) = (1 − α) / 2, a made-up event."""

    class HalfAccountant(ClosedFormAccountant):
        name = "half"

        @classmethod
        def supports(cls, event):
            return isinstance(event, HalfPrivacyEvent)

        def curve(self, direction="symmetric", pessimistic=True):
            return TradeoffCurve(np.array([0.0, 1.0]), np.array([0.5, 1.0]))  # power 1 − f

    spec = MechanismSpec("half", HalfPrivacyEvent())
    with pytest.raises(InvalidParameterError, match="no accountant supports"):
        accountant_for(spec)
    register_accountant(HalfAccountant)
    try:
        assert accountant_for(spec).f(0.0) == pytest.approx(0.5)
        assert list(ACCOUNTANTS) == ["closed_form", "pld", "half"]
        with pytest.raises(ValueError, match="already registered"):
            register_accountant(type("Other", (HalfAccountant,), {}))
        with pytest.raises(ValueError, match="MechanismAccountant subclass"):
            register_accountant(type("NotOne", (), {"name": "not_one"}))
    finally:
        unregister_accountant("half")
    with pytest.raises(InvalidParameterError, match="no accountant supports"):
        accountant_for(spec)


def test_gaussian_mechanisms_share_the_subsampled_gaussian_accounting():
    reference = accountant_for(MechanismSpec.gaussian("dp_sgd", 1.0, 0.05, 50))
    for name in ("fdp_sgd", "fdp_dpsgd", "corrdp_sgd"):
        acc = accountant_for(MechanismSpec.gaussian(name, 1.0, 0.05, 50, public_pretrain_steps=500))
        assert acc.epsilon(1e-5) == reference.epsilon(1e-5)  # public steps cost nothing (Remark 2)
    assert set(MECHANISMS) >= {"nonprivate", "public_only", "dp_sgd", "fdp_sgd", "fdp_dpsgd", *faulty_mechanisms()}


def test_accountant_is_vectorised_and_consistent():
    acc = accountant_for(MechanismSpec.gaussian("fdp_sgd", 1.0, 1 / 16, 100))
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
    with pytest.raises(InvalidParameterError, match="PrivacyEvent"):
        MechanismSpec("dp_sgd", "subsampled_gaussian")
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
            MechanismSpec.gaussian(**kwargs)
        assert info.value.field == field
    with pytest.raises(InvalidParameterError):
        MECHANISMS["fdp_sgd"].claimed_event(None, None, 10)  # a Gaussian mechanism needs its parameters
    acc = accountant_for(MechanismSpec.gaussian("dp_sgd", 1.0, 0.1, 10))
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
    spec = MechanismSpec("fdp_sgd", SubsampledGaussianEvent([Segment(2.0, 0.1, 10), Segment(1.0, 0.1, 5)]))
    assert spec.total_steps == 15 and isinstance(spec.event.schedule, tuple)


def test_edge_cases_give_finite_monotone_answers():
    """p = 1, T = 1, z from 0.3 to 100, δ down to 1e-12, ε up to 50: finite, monotone answers."""
    strongest = []
    for z in (0.3, 0.5, 1.0, 10.0, 100.0):
        acc = accountant_for(MechanismSpec.gaussian("dp_sgd", z, 1.0, 1))
        eps = acc.epsilon(np.array([1e-3, 1e-6, 1e-12]))
        assert np.all(np.isfinite(eps)) and np.all(np.diff(eps) >= 0)
        delta = acc.delta(np.array([0.0, 1.0, 10.0, 50.0]))
        assert np.all(np.isfinite(delta)) and np.all(np.diff(delta) <= 0) and np.all(delta >= 0)
        f = acc.f(np.linspace(0, 1, 101))
        assert np.all(np.diff(f) <= 1e-12) and np.all(np.isfinite(f))
        strongest.append(eps[-1])
    assert np.all(np.diff(strongest) < 0)  # more noise, less leakage


def test_edge_cases_with_sampling():
    eps = [accountant_for(MechanismSpec.gaussian("dp_sgd", z, 0.01, 10)).epsilon(1e-12) for z in (0.5, 2.0, 100.0)]
    assert np.all(np.isfinite(eps)) and np.all(np.diff(eps) < 0)
