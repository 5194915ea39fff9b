"""TableEncoder (docs/data.md): one-hot and standardised columns and the column map used to build Ψ."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.data.encoding import TableEncoder
from fdp_audit.data.table import Table
from fdp_audit.errors import BadInputError


def make_table(n: int = 40, seed: int = 0) -> Table:
    rng = np.random.default_rng(seed)
    return Table(
        "t",
        {
            "age": rng.normal(40, 10, n),
            "colour": rng.choice(["red", "green", "blue"], n).astype(object),
            "income": rng.exponential(1000, n),
            "sex": rng.choice(["f", "m"], n).astype(object),
            "label": rng.choice(["no", "yes"], n).astype(object),
        },
        {"age": "numeric", "colour": "categorical", "income": "numeric", "sex": "categorical",
         "label": "categorical"},
    )


def test_groups_are_contiguous_and_cover_all_columns():
    encoder = TableEncoder.fit(make_table(), "label")
    assert [g.feature for g in encoder.groups] == ["age", "colour", "income", "sex"]
    assert encoder.groups[0].start == 0
    for left, right in zip(encoder.groups, encoder.groups[1:]):
        assert left.stop == right.start
    assert encoder.n_features == 1 + 3 + 1 + 2


def test_one_hot_rows_sum_to_one_and_numerics_are_standardised():
    table = make_table()
    data = TableEncoder.fit(table, "label").transform(table)
    assert data.x.dtype == np.float32 and data.x.shape == (40, 7)
    for g in data.groups:
        block = data.x[:, g.start : g.stop]
        if g.kind == "categorical":
            assert set(np.unique(block)) <= {0.0, 1.0}
            np.testing.assert_array_equal(block.sum(axis=1), 1.0)
            assert g.categories == tuple(sorted(g.categories))
        else:
            np.testing.assert_allclose(block.mean(), 0.0, atol=1e-5)
            np.testing.assert_allclose(block.std(), 1.0, atol=1e-5)


def test_labels_are_class_indices():
    table = make_table()
    data = TableEncoder.fit(table, "label").transform(table)
    assert data.classes == ("no", "yes") and data.n_classes == 2
    np.testing.assert_array_equal(data.y, (table.columns["label"] == "yes").astype(int))


def test_encoding_of_another_split_reuses_the_fitted_statistics_and_zeroes_unseen_categories():
    train, test = make_table(seed=0), make_table(n=5, seed=1)
    test.columns["colour"][0] = "purple"  # never seen when fitting
    encoder = TableEncoder.fit(train, "label")
    encoded = encoder.transform(test)
    colour = encoder.groups[1]
    assert encoded.x[0, colour.start : colour.stop].sum() == 0.0
    np.testing.assert_array_equal(encoded.x[1:, colour.start : colour.stop].sum(axis=1), 1.0)
    age = encoder.groups[0]
    np.testing.assert_allclose(encoded.x[:, 0], (test.columns["age"] - age.mean) / age.scale, rtol=1e-6)


def test_feature_subset_and_constant_column():
    table = make_table()
    table.columns["age"][:] = 5.0
    encoder = TableEncoder.fit(table, "label", ["sex", "age"])
    assert [g.feature for g in encoder.groups] == ["sex", "age"]
    assert encoder.groups[1].scale == 1.0  # no division by a zero standard deviation
    assert np.all(encoder.transform(table).x[:, 2] == 0.0)


def test_group_lookup_and_take():
    table = make_table()
    data = TableEncoder.fit(table, "label").transform(table)
    assert data.group("income").start == 4
    with pytest.raises(BadInputError, match="nope"):
        data.group("nope")
    assert data.take(np.arange(3)).n_rows == 3


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda t: t.columns["age"].__setitem__(0, np.nan), "missing or non-finite"),
        (lambda t: t.columns["label"].__setitem__(slice(None), "yes"), "fewer than two classes"),
    ],
)
def test_fit_rejects_bad_columns(change, match):
    table = make_table()
    change(table)
    with pytest.raises(BadInputError, match=match):
        TableEncoder.fit(table, "label")


def test_fit_rejects_missing_or_numeric_label_and_unknown_feature():
    table = make_table()
    with pytest.raises(BadInputError, match="data.label"):
        TableEncoder.fit(table, "nope")
    with pytest.raises(BadInputError, match="must be categorical"):
        TableEncoder.fit(table, "age")
    with pytest.raises(BadInputError, match="'height' not in data"):
        TableEncoder.fit(table, "label", ["height"])


def test_transform_rejects_unseen_label():
    train, other = make_table(), make_table(seed=3)
    other.columns["label"][0] = "maybe"
    with pytest.raises(BadInputError, match="unseen"):
        TableEncoder.fit(train, "label").transform(other)
