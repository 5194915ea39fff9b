"""prepare_data (docs/design.md, first step of the data flow): config → encoded splits and Ψ."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from fdp_audit.config import DataConfig
from fdp_audit.data.formats import CRITEO_CATEGORICAL, CRITEO_NUMERIC
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError


def synthetic_config(**overrides) -> DataConfig:
    base = {"dataset": "synthetic", "protected": ("protected",), "synthetic_rows": 200,
            "synthetic_prior": (0.3, 0.7), "population_fraction": 0.25}
    return DataConfig(**{**base, **overrides})


def test_synthetic_splits_and_column_split():
    data = prepare_data(synthetic_config(), seed=0)
    assert data.train.n_rows == 150 and data.population.n_rows == 50
    assert data.test is data.population  # no separate test file for synthetic data
    assert data.train.label == "label" and data.train.classes == ("0", "1")
    split = data.public_map
    assert [g.feature for g in split.protected_groups] == ["protected"]
    assert len(split.public_columns) == 5 and len(split.protected_columns) == 2
    x, y = data.tensors()
    assert x.dtype == torch.float32 and x.shape == (150, 7) and y.shape == (150,)
    assert split(x, y).features.shape == (150, 5)


def test_same_seed_same_data_different_seed_different_split():
    first, second = prepare_data(synthetic_config(), 3), prepare_data(synthetic_config(), 3)
    np.testing.assert_array_equal(first.train.x, second.train.x)
    assert first.fingerprint == second.fingerprint
    assert prepare_data(synthetic_config(), 4).fingerprint != first.fingerprint


def test_adult_uses_its_test_file_and_max_rows():
    config = DataConfig(dataset="adult", max_rows=500, population_fraction=0.2)
    data = prepare_data(config, seed=1)
    assert data.train.n_rows == 400 and data.population.n_rows == 100
    assert data.test.n_rows == 15_060  # adult.test without its '?' rows
    assert data.train.classes == ("<=50K", ">50K")
    protected = {g.feature for g in data.public_map.protected_groups}
    assert protected == {"marital-status", "relationship"}


def test_public_list_selects_features():
    config = DataConfig(dataset="german", protected=("age",), public=("duration", "purpose"), label=None)
    data = prepare_data(config, seed=0)
    assert [g.feature for g in data.train.groups] == ["duration", "purpose", "age"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"protected": ("nope",)}, "data.protected"),
        ({"protected": ("label",)}, "data.protected"),
        ({"label": "nope"}, "data.label"),
        ({"public": ("nope",)}, "data.public"),
    ],
)
def test_bad_columns_name_the_field(overrides, field):
    with pytest.raises(BadInputError, match=field):
        prepare_data(synthetic_config(**overrides), seed=0)


def test_csv_missing_values_are_dropped_or_rejected(tmp_path):
    # column b is empty in every fifth row
    rows = ["a,b,c,y"] + [f"{i},{'' if i % 5 == 0 else 2 * i},{'uv'[i % 2]},{i % 2}" for i in range(40)]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(rows) + "\n")
    config = DataConfig(dataset="csv", path=str(path), numeric=("a", "b"), categorical=("c", "y"),
                        label="y", protected=("c",))
    data = prepare_data(config, seed=0)
    assert data.train.n_rows + data.population.n_rows == 32  # 8 rows have an empty 'b'
    with pytest.raises(BadInputError, match="missing or non-finite"):
        prepare_data(replace(config, drop_missing=False), seed=0)
    # an unused column with missing values does not cost rows
    data = prepare_data(replace(config, public=("a",)), seed=0)
    assert data.train.n_rows + data.population.n_rows == 40


def test_criteo_file_through_prepare(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(40):
        integers = [str(v) for v in rng.integers(0, 50, 13)]
        hashes = [f"{v:08x}" for v in rng.integers(0, 4, 26)]
        if i % 10 == 0:
            integers[2] = ""
        lines.append("\t".join([str(i % 2), *integers, *hashes]))
    path = tmp_path / "criteo.txt"
    path.write_text("\n".join(lines))
    config = DataConfig(dataset="criteo", path=str(path), protected=CRITEO_CATEGORICAL)
    data = prepare_data(config, seed=0)
    assert data.train.n_rows + data.population.n_rows == 36
    assert len(data.public_map.public_columns) == len(CRITEO_NUMERIC)


def test_purchase_file_through_prepare(tmp_path):
    rng = np.random.default_rng(1)
    lines = [",".join([str(1 + i % 3), *map(str, rng.integers(0, 2, 600))]) for i in range(30)]
    path = tmp_path / "purchase"
    path.write_text("\n".join(lines))
    protected = tuple(f"feature-{j}" for j in range(100, 600))
    data = prepare_data(DataConfig(dataset="purchase", path=str(path), protected=protected), seed=0)
    assert data.train.n_features == 600 and data.train.n_classes == 3
    assert len(data.public_map.public_columns) == 100


def test_label_only_map_is_label_dp():
    """public_map label_only: Ψ(x, y) = x, the label is protected; the audit games refuse it by name."""
    data = prepare_data(DataConfig(dataset="digits", protected=(), public_map="label_only", label_public=False), 0)
    x, y = data.tensors()
    view = data.public_map(x[:5], y[:5])
    assert torch.equal(view.features, x[:5]) and view.labels is None
    with pytest.raises(BadInputError) as err:
        data.column_split()
    assert err.value.field == "data.public_map"


def test_blur_map_blurs_square_images_and_keeps_the_label():
    data = prepare_data(DataConfig(dataset="digits", protected=(), public_map="blur", blur_sigma=1.0), 0)
    x, y = data.tensors()
    view = data.public_map(x[:5], y[:5])
    assert view.features.shape == x[:5].shape and torch.equal(view.labels, y[:5])
    assert not torch.allclose(view.features, x[:5])  # fine detail is gone
    # a blur averages: every blurred image keeps its mean up to the reflect padding's edge effects
    assert float((view.features.mean(1) - x[:5].mean(1)).abs().max()) < 0.2 * float(x[:5].std())


@pytest.mark.parametrize(("overrides", "field"), [
    # digits has no default protected column
    ({"dataset": "digits", "public_map": "label_only", "label_public": False}, "data.protected"),
    ({"dataset": "adult", "protected": (), "public_map": "blur"}, "data.public_map"),  # not images
])
def test_non_column_maps_refuse_what_they_cannot_mean(overrides, field):
    config = DataConfig(**{"protected": ("pixel-0",), **overrides})
    with pytest.raises(BadInputError) as err:
        prepare_data(config, 0)
    assert err.value.field == field


def _csv(tmp_path, text: str, **overrides) -> DataConfig:
    path = tmp_path / "d.csv"
    path.write_text(text)
    base = {"dataset": "csv", "path": str(path), "numeric": ("a",), "categorical": ("c",), "label": "y",
            "protected": ("c",)}
    return DataConfig(**{**base, **overrides})


def test_a_label_missing_from_the_column_spec_says_to_list_it(tmp_path):
    """The label was in the file but not in data.categorical: "label not in data" sent users to the file."""
    rows = "a,c,y\n" + "".join(f"{i},{'uv'[i % 2]},{i % 3}\n" for i in range(20))
    with pytest.raises(BadInputError, match=r"data.label: label column 'y' not in data .*list it in "
                                            r"data.categorical"):
        prepare_data(_csv(tmp_path, rows), seed=0)
    with pytest.raises(BadInputError, match="data.protected: .*list it in data.categorical"):
        prepare_data(_csv(tmp_path, rows, categorical=("y",)), seed=0)


@pytest.mark.parametrize(("delimiter", "name"), [(";", "semicolons"), ("\t", "tabs")])
def test_a_file_not_separated_by_commas_gets_a_hint(tmp_path, delimiter: str, name: str):
    rows = delimiter.join("acy") + "\n" + "".join(delimiter.join([str(i), "uv"[i % 2], str(i % 2)]) + "\n"
                                                  for i in range(20))
    with pytest.raises(BadInputError, match=f"the file seems separated by {name}"):
        prepare_data(_csv(tmp_path, rows, categorical=("c", "y")), seed=0)


def test_the_example_csv_config_prepares(tmp_path, monkeypatch):
    """configs/csv_example.yaml names its CSV relative to its own folder: it loads from any working folder."""
    from pathlib import Path

    from fdp_audit.config import load_config

    monkeypatch.chdir(tmp_path)
    config = load_config(Path(__file__).parents[2] / "configs" / "csv_example.yaml")
    data = prepare_data(config.data, config.seed)
    assert data.train.n_rows + data.population.n_rows == 400
    assert [g.feature for g in data.column_split().protected_groups] == ["health"]
