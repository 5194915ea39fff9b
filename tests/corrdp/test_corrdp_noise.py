"""Eq. 4 noise and the baselines' factors (docs/corrdp.md; paper Eq. 4, Sec. 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdp_audit.corrdp.noise import INTERCEPT, column_mask, eq4_variance, sensitive_share, variance_factors

GROUPS = ("a", "a", "b", "u1", "u2", "u2", INTERCEPT)
SENSITIVE = frozenset({"a", "b"})
TV = {"u1": 0.5, "u2": 0.01}


def test_eq4_variance() -> None:
    assert eq4_variance(2.0, 1e-5, 3.0, 100, 1000) == pytest.approx((math.log(1e5) + 1) * 9 * 100 / (1e6 * 4))


def test_factors_per_variant() -> None:
    floor = sensitive_share(GROUPS, SENSITIVE)
    assert floor == pytest.approx((3 / 6) ** 2)
    np.testing.assert_allclose(variance_factors(GROUPS, SENSITIVE, TV, "corrdp"), [1, 1, 1, 0.5, floor, floor, 1])
    np.testing.assert_allclose(variance_factors(GROUPS, SENSITIVE, TV, "standard"), np.ones(7))
    np.testing.assert_allclose(variance_factors(GROUPS, SENSITIVE, TV, "semi"), [1, 1, 1, 0, 0, 0, 1])
    np.testing.assert_allclose(variance_factors(GROUPS, SENSITIVE, TV, "partial"), np.zeros(7))
    np.testing.assert_allclose(column_mask(GROUPS, SENSITIVE, "partial"), [0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_allclose(column_mask(GROUPS, SENSITIVE, "corrdp"), np.ones(7))
