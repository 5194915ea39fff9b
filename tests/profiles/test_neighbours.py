"""Neighbours (docs/profiles.md): Okumura spheres, worst-case points, exact batched Newton, and the A_wc accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.profiles.logistic import fit_newton, loss_gradients
from fdp_audit.profiles.neighbours import (
    exact_neighbour_models,
    okumura_spheres,
    removal_neighbours,
    replacement_neighbours,
    worst_case_points,
)


def _neighbours(design, kind: str, rows=None):
    if kind == "remove":
        return removal_neighbours(design.n, rows)
    protected = design.feature_mask(["marital-status", "age"])
    return replacement_neighbours(design.X, protected, design.reference, rows)


@pytest.mark.parametrize("kind", ["remove", "replace"])
def test_base_model_lies_on_every_sphere(adult_small, fitted, kind):
    w = fitted["adult_small"]
    centres, radii = okumura_spheres(adult_small.X, adult_small.y, w, 1.0, _neighbours(adult_small, kind))
    assert np.allclose(np.linalg.norm(centres - w, axis=1), radii, rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("kind", ["remove", "replace"])
def test_every_exact_neighbour_lies_inside_its_sphere(adult_small, fitted, kind):
    w = fitted["adult_small"]
    neighbours = _neighbours(adult_small, kind)
    exact = exact_neighbour_models(adult_small.X, adult_small.y, w, 1.0, neighbours).models
    centres, radii = okumura_spheres(adult_small.X, adult_small.y, w, 1.0, neighbours)
    assert np.all(np.linalg.norm(exact - centres, axis=1) <= radii * (1 + 1e-9) + 1e-18)
    moved = radii > 0
    assert moved.sum() > 100  # most rows do change the model


def test_removal_worst_case_point_formula(adult_small, fitted):
    """A_wc(y_i) = A(D) + (1/(n-1)) (A(D) + (1/Λ) ∇l_i(A(D))), here with Λ = 2."""
    lam, X, y = 2.0, adult_small.X, adult_small.y
    w = fit_newton(X, y, lam).w
    expected = w + (w + loss_gradients(w, X, y) / lam) / (adult_small.n - 1)
    assert np.allclose(worst_case_points(X, y, w, lam, removal_neighbours(adult_small.n)), expected, rtol=1e-13)


@pytest.mark.parametrize("kind", ["remove", "replace"])
def test_batched_newton_matches_one_fit_per_neighbour(adult_small, fitted, kind):
    w, X, y = fitted["adult_small"], adult_small.X, adult_small.y
    rows = np.array([0, 7, 123, 399])
    neighbours = _neighbours(adult_small, kind, rows)
    batched = exact_neighbour_models(X, y, w, 1.0, neighbours, block=3)  # blocks of 3: also tests blocking
    for k, i in enumerate(rows):
        if kind == "remove":
            Xi, yi = np.delete(X, i, axis=0), np.delete(y, i)
        else:
            Xi, yi = X.copy(), y
            Xi[i] = neighbours.replacement[k]
        assert np.abs(batched.models[k] - fit_newton(Xi, yi, 1.0).w).max() < 1e-14
    assert batched.iterations.max() <= 4


def test_worst_case_accuracy_on_a_sample_of_six_column_neighbours(adult6, fitted):
    """A_wc against exact neighbours on the paper's 6 numeric columns (all 32,561 rows in every fit) for an
    evenly spread sample of 600 neighbours; the full measurement is the slow test below."""
    w = fitted["adult6"]
    neighbours = removal_neighbours(adult6.n, np.linspace(0, adult6.n - 1, 600).astype(int))
    exact = exact_neighbour_models(adult6.X, adult6.y, w, 1.0, neighbours).models
    wc = worst_case_points(adult6.X, adult6.y, w, 1.0, neighbours)
    relative = np.linalg.norm(wc - exact, axis=1) / np.linalg.norm(exact - w, axis=1)
    assert relative.max() < 2e-3  # the paper's claim
    assert 1.1e-3 < np.median(relative) < 1.4e-3  # measured on all rows: 1.27e-3


@pytest.mark.slow
def test_worst_case_accuracy_on_all_six_column_neighbours(adult6, fitted):
    """Measured on all 32,561 neighbours: max relative error 1.632e-3 (row 970), median 1.272e-3 — the
    paper's claim (< 2e-3) holds. With age and education-num only it does not (max 1.08e-2)."""
    w = fitted["adult6"]
    neighbours = removal_neighbours(adult6.n)
    exact = exact_neighbour_models(adult6.X, adult6.y, w, 1.0, neighbours).models
    wc = worst_case_points(adult6.X, adult6.y, w, 1.0, neighbours)
    relative = np.linalg.norm(wc - exact, axis=1) / np.linalg.norm(exact - w, axis=1)
    assert relative.max() == pytest.approx(1.632e-3, rel=0.01)
    assert int(np.argmax(relative)) == 970
    assert relative.max() < 2e-3


@pytest.mark.slow
def test_worst_case_accuracy_on_the_two_column_setting(adult2, fitted):
    """The same measurement with age and education-num (the paper's 2-D figures): about 1.08e-2, five times
    the 6-column claim — the approximation depends on the normalisation and the dimension."""
    w = fitted["adult2"]
    neighbours = removal_neighbours(adult2.n)
    exact = exact_neighbour_models(adult2.X, adult2.y, w, 1.0, neighbours).models
    wc = worst_case_points(adult2.X, adult2.y, w, 1.0, neighbours)
    relative = np.linalg.norm(wc - exact, axis=1) / np.linalg.norm(exact - w, axis=1)
    assert relative.max() == pytest.approx(1.076e-2, rel=0.01)


def test_replacement_by_the_reference_value_itself_leaves_the_model_unchanged(adult_small, fitted):
    w = fitted["adult_small"]
    neighbours = replacement_neighbours(
        adult_small.X, adult_small.feature_mask(["marital-status"]), adult_small.reference
    )
    unchanged = np.all(neighbours.replacement == adult_small.X, axis=1)
    assert 0 < unchanged.sum() < adult_small.n  # rows already in the most frequent category
    exact = exact_neighbour_models(adult_small.X, adult_small.y, w, 1.0, neighbours)
    assert np.all(exact.models[unchanged] == w) and np.all(exact.iterations[unchanged] == 0)
    assert np.all(np.linalg.norm(exact.models[~unchanged] - w, axis=1) > 0)
