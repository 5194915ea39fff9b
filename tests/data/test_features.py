"""Public maps Ψ (docs/accounting.md, docs/training.md): a view never carries a protected value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import CallablePublicMap, ColumnSplit, LabelOnlyPublicMap
from fdp_audit.errors import BadInputError


def groups_from_widths(widths: list[int]) -> tuple[ColumnGroup, ...]:
    groups, start = [], 0
    for i, width in enumerate(widths):
        kind = "numeric" if width == 1 else "categorical"
        groups.append(ColumnGroup(f"f{i}", kind, start, start + width))
        start += width
    return tuple(groups)


@st.composite
def encoded_batches(draw):
    """Random column groups, a random protected subset, a batch x and a second batch x2 that agrees with
    x on the public columns and differs arbitrarily on the protected ones."""
    widths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    groups = groups_from_widths(widths)
    protected = tuple(draw(st.lists(st.sampled_from([g.feature for g in groups]), unique=True)))
    label_public = draw(st.booleans())
    n = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    d = groups[-1].stop
    x = torch.as_tensor(rng.normal(size=(n, d)), dtype=torch.float32)
    replacement = torch.as_tensor(rng.normal(scale=100.0, size=(n, d)), dtype=torch.float32)
    split = ColumnSplit(groups, protected, label_public)
    x2 = x.clone()
    x2[:, split.protected_columns] = replacement[:, split.protected_columns]
    y = torch.as_tensor(rng.integers(0, 3, n))
    return split, x, x2, y


@settings(max_examples=60, deadline=None)
@given(encoded_batches())
def test_view_is_unchanged_by_any_change_of_protected_columns(case):
    split, x, x2, y = case
    view, view2 = split(x, y), split(x2, y)
    assert torch.equal(view.features, view2.features)
    public_width = sum(g.stop - g.start for g in split.public_groups)
    assert view.features.shape == (x.shape[0], public_width)
    assert len(split.public_columns) + len(split.protected_columns) == x.shape[1]
    if split.label_public:
        assert torch.equal(view.labels, y)
    else:
        assert view.labels is None


def test_continuous_canary_varies_only_what_psi_does_not_read():
    """The column split's continuous canary: the record with its protected columns at 0 (others unchanged), and
    any values placed there keep Ψ(x); a categorical protected attribute is refused."""
    groups = groups_from_widths([1, 3, 1, 1])  # f0 numeric, f1 categorical, f2 and f3 numeric
    split = ColumnSplit(groups, ("f2", "f3"))
    record = torch.arange(1.0, 7.0, dtype=torch.float64)
    canary = split.continuous_canary(record)
    assert canary.coordinates == (4, 5) and canary.names == ("f2", "f3")
    assert torch.equal(canary.template, torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0, 0.0], dtype=torch.float64))
    assert torch.equal(record, torch.arange(1.0, 7.0, dtype=torch.float64))  # the caller's record is untouched
    values = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    records = canary.with_values(values)
    assert torch.equal(records[:, [4, 5]], values)
    labels = torch.zeros(5, dtype=torch.long)
    assert torch.equal(split(records, labels).features, split(record.repeat(5, 1), labels).features)
    with pytest.raises(BadInputError) as error:
        ColumnSplit(groups, ("f1", "f2")).continuous_canary(record)
    assert error.value.field == "data.protected"


@settings(max_examples=60, deadline=None)
@given(encoded_batches())
def test_assemble_inverts_the_split(case):
    split, x, _, y = case
    rebuilt = split.assemble(split(x, y).features, x[:, split.protected_columns])
    assert torch.equal(rebuilt, x)


def test_view_values_are_the_public_columns_and_spec_names_them():
    groups = groups_from_widths([1, 3, 1, 2])
    split = ColumnSplit(groups, ("f1", "f3"))
    x = torch.arange(14, dtype=torch.float32).reshape(2, 7)
    assert split(x, torch.zeros(2)).features.tolist() == [[0.0, 4.0], [7.0, 11.0]]
    assert split.protected_columns.tolist() == [1, 2, 3, 5, 6]
    assert split.spec() == {"kind": "column_subset", "protected": ["f1", "f3"], "public": ["f0", "f2"],
                            "label_public": True}


def test_unknown_protected_feature_is_rejected():
    with pytest.raises(BadInputError, match="data.protected"):
        ColumnSplit(groups_from_widths([1, 2]), ("missing",))


def test_label_only_map_hides_labels():
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    view = LabelOnlyPublicMap()(x, y)
    assert view.labels is None and torch.equal(view.features, x)
    assert LabelOnlyPublicMap().label_public is False
    assert torch.equal(LabelOnlyPublicMap()(x, 1 - y).features, view.features)


def test_callable_map():
    psi = CallablePublicMap(lambda x, y: x[:, :1], "first-column", label_public=False)
    view = psi(torch.ones(2, 3), torch.zeros(2))
    assert view.features.shape == (2, 1) and view.labels is None
    assert psi.spec() == {"kind": "callable", "name": "first-column", "label_public": False}
    assert len(view.take(torch.tensor([1]))) == 1
