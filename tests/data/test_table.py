"""Table and the deterministic training/population split (docs/games.md, docs/data.md)."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.data.table import MISSING, Table, split_rows


def small_table() -> Table:
    return Table(
        "t",
        {"a": np.array([1.0, np.nan, 3.0, 4.0]), "b": np.array(["x", "y", MISSING, "x"], dtype=object)},
        {"a": "numeric", "b": "categorical"},
    )


def test_split_is_deterministic_in_the_seed():
    first, second = split_rows(1_000, 0.3, seed=7), split_rows(1_000, 0.3, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))


def test_different_seeds_give_different_splits():
    train_a, _ = split_rows(1_000, 0.3, seed=1)
    train_b, _ = split_rows(1_000, 0.3, seed=2)
    assert not np.array_equal(train_a, train_b)


@pytest.mark.parametrize(("n", "fraction"), [(1_000, 0.3), (7, 0.5), (10, 0.01)])
def test_split_is_disjoint_covering_and_sized(n, fraction):
    train, population = split_rows(n, fraction, seed=3)
    assert np.intersect1d(train, population).size == 0
    assert np.array_equal(np.sort(np.concatenate([train, population])), np.arange(n))
    assert population.size == round(fraction * n)
    assert np.all(np.diff(train) > 0) and np.all(np.diff(population) > 0)


def test_missing_mask_covers_nan_and_missing_category():
    assert small_table().missing_mask().tolist() == [False, True, True, False]


def test_take_keeps_kinds_and_selects_rows():
    taken = small_table().take(np.array([3, 0]))
    assert taken.columns["b"].tolist() == ["x", "x"]
    assert taken.kinds == small_table().kinds and taken.n_rows == 2


def test_fingerprint_changes_with_any_value():
    table = small_table()
    changed = Table("t", {**table.columns, "a": np.array([1.0, np.nan, 3.0, 5.0])}, table.kinds)
    assert table.fingerprint() == small_table().fingerprint()
    assert table.fingerprint() != changed.fingerprint()


def test_inconsistent_tables_are_rejected():
    with pytest.raises(ValueError, match="different lengths"):
        Table("t", {"a": np.zeros(2), "b": np.zeros(3)}, {"a": "numeric", "b": "numeric"})
    with pytest.raises(ValueError, match="kinds"):
        Table("t", {"a": np.zeros(2)}, {"b": "numeric"})
