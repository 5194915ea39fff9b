"""Shared fixtures: the paper's Adult settings (docs/profiles.md) and their base models."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.data.datasets import load_adult
from fdp_audit.profiles.design import Design, design_from_table
from fdp_audit.profiles.logistic import fit_newton

SIX_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


@pytest.fixture(scope="session")
def adult_table():
    return load_adult(drop_missing=False)


@pytest.fixture(scope="session")
def adult2(adult_table) -> Design:
    """age, education-num; all 32,561 rows."""
    return design_from_table(adult_table, ("age", "education-num"), "income")


@pytest.fixture(scope="session")
def adult6(adult_table) -> Design:
    """The six numeric columns; all 32,561 rows."""
    return design_from_table(adult_table, SIX_NUMERIC, "income")


@pytest.fixture(scope="session")
def adult_small(adult_table) -> Design:
    """age, education-num, hours-per-week and the categorical marital-status; first 400 rows."""
    return design_from_table(adult_table, ("age", "education-num", "hours-per-week", "marital-status"), "income", 400)


@pytest.fixture(scope="session")
def fitted(adult2, adult6, adult_small):
    """Base models A(D) by Newton, keyed by fixture name."""
    return {
        name: fit_newton(d.X, d.y, 1.0).w
        for name, d in (("adult2", adult2), ("adult6", adult6), ("adult_small", adult_small))
    }


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)
