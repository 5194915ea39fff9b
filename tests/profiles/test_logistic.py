"""Base model and design (docs/profiles.md): normalisation, labels, Newton against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fdp_audit.errors import BadInputError
from fdp_audit.profiles.design import design_from_table, normalise_rows
from fdp_audit.profiles.logistic import fit_newton, loss_gradients, objective


def test_adult_numeric_setting_keeps_all_rows(adult2, adult6):
    assert adult2.n == adult6.n == 32_561
    assert adult2.d == 2 and adult6.d == 6


def test_normalisation_standardises_then_scales_into_unit_ball(adult6):
    norms = np.linalg.norm(adult6.X, axis=1)
    assert norms.max() == pytest.approx(1.0, abs=1e-12)
    # Standardised columns share one positive scale factor: means 0, equal standard deviations.
    assert np.abs(adult6.X.mean(axis=0)).max() < 1e-12
    assert np.ptp(adult6.X.std(axis=0)) < 1e-12


def test_constant_column_becomes_zero():
    X, _, _, _ = normalise_rows(np.array([[1.0, 5.0], [2.0, 5.0], [4.0, 5.0]]))
    assert np.all(X[:, 1] == 0) and np.linalg.norm(X, axis=1).max() == pytest.approx(1.0)


def test_labels_are_plus_minus_one_with_high_income_positive(adult2, adult_table):
    assert set(np.unique(adult2.y)) == {-1.0, 1.0}
    income = adult_table.columns["income"][adult2.row_ids]
    assert np.all((income == ">50K") == (adult2.y == 1))


def test_categorical_columns_are_one_hot_and_reference_never_grows_a_row(adult_small):
    marital = adult_small.feature_mask(["marital-status"])
    assert marital.sum() == len({f for f in adult_small.features if f.startswith("marital-status=")}) > 2
    replaced = adult_small.X.copy()
    replaced[:, marital] = adult_small.reference[marital]
    assert np.all(np.linalg.norm(replaced, axis=1) <= np.linalg.norm(adult_small.X, axis=1) + 1e-12)


def test_bad_columns_are_reported_by_field(adult_table):
    with pytest.raises(BadInputError, match="profile.columns"):
        design_from_table(adult_table, ("age", "no-such-column"), "income")
    with pytest.raises(BadInputError, match="profile.rows"):
        design_from_table(adult_table, ("age",), "income", rows=10**6)
    with pytest.raises(BadInputError, match="data.label"):
        design_from_table(adult_table, ("age",), "education")
    with pytest.raises(BadInputError, match="data.label"):
        design_from_table(adult_table, ("age",), "no-such-label")


@pytest.mark.parametrize("name", ["adult2", "adult6", "adult_small"])
def test_newton_matches_scikit_learn(name, request, fitted):
    design = request.getfixturevalue(name)
    reference = LogisticRegression(fit_intercept=False, C=1.0 / design.n, tol=1e-12, max_iter=10_000)
    reference.fit(design.X, design.y)
    assert np.abs(fitted[name] - reference.coef_[0]).max() < 1e-6


def test_newton_reaches_the_rounding_floor(adult6, fitted):
    w = fitted["adult6"]
    gradient = loss_gradients(w, adult6.X, adult6.y).mean(axis=0) + w
    assert np.linalg.norm(gradient) < 1e-15
    # Any perturbation raises J: w is the minimiser.
    for direction in np.eye(6):
        assert objective(w + 1e-6 * direction, adult6.X, adult6.y, 1.0) > objective(w, adult6.X, adult6.y, 1.0)


def test_newton_converges_from_far_away_with_weak_regularisation(adult_small):
    """The damped (line-search) Newton also converges where a pure Newton step would overshoot."""
    lam = 1e-3
    result = fit_newton(adult_small.X, adult_small.y, lam, w0=np.full(adult_small.d, 50.0))
    gradient = loss_gradients(result.w, adult_small.X, adult_small.y).mean(axis=0) + lam * result.w
    assert np.linalg.norm(gradient) < 1e-12
