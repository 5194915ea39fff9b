"""Bundled data sets (docs/data.md): shapes, checksums, label clean-up."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from fdp_audit.data import datasets
from fdp_audit.errors import BadInputError

SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets"


@pytest.fixture(scope="module")
def adult_train_raw():
    return datasets.load_adult("train", drop_missing=False)


@pytest.fixture(scope="module")
def adult_test_raw():
    return datasets.load_adult("test", drop_missing=False)


def test_adult_train_shapes(adult_train_raw):
    assert adult_train_raw.n_rows == 32_561
    assert adult_train_raw.column_names == [name for name, _ in datasets.ADULT_COLUMNS]
    assert int((~adult_train_raw.missing_mask()).sum()) == 30_162
    assert datasets.load_adult("train").n_rows == 30_162


def test_adult_test_shapes_and_label_period_removed(adult_test_raw):
    assert adult_test_raw.n_rows == 16_281
    assert int((~adult_test_raw.missing_mask()).sum()) == 15_060
    # adult.test writes '>50K.' and '<=50K.': the loader strips the period so both splits share labels
    assert set(adult_test_raw.columns["income"]) == {"<=50K", ">50K"}


def test_adult_train_labels_and_missing_marker(adult_train_raw):
    assert set(adult_train_raw.columns["income"]) == {"<=50K", ">50K"}
    # '?' becomes MISSING in categorical columns; numeric columns have none in Adult
    assert (adult_train_raw.columns["workclass"] == "").sum() > 0
    assert not np.isnan(adult_train_raw.columns["age"]).any()
    assert adult_train_raw.kinds["age"] == "numeric" and adult_train_raw.kinds["sex"] == "categorical"


def test_adult_bad_split():
    with pytest.raises(BadInputError, match="train"):
        datasets.load_adult("validation")


def test_german_shape():
    table = datasets.load_german()
    assert (table.n_rows, len(table.columns)) == (1_000, 21)
    assert set(table.columns["credit-risk"]) == {"1", "2"}


def test_digits_and_diabetes_shapes():
    digits = datasets.load_digits_table()
    assert (digits.n_rows, len(digits.columns)) == (1_797, 65)
    diabetes = datasets.load_diabetes_table()
    assert (diabetes.n_rows, len(diabetes.columns)) == (442, 11)
    assert set(diabetes.columns["sex"]) == {"1", "2"}
    assert set(diabetes.columns["high-progression"]) == {"yes", "no"}


@pytest.mark.parametrize("name", sorted(datasets.SHA256))
def test_bundled_checksums_match_record(name):
    raw = gzip.decompress(resources.files("fdp_audit.data").joinpath("files", f"{name}.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == datasets.SHA256[name]


@pytest.mark.parametrize("name", sorted(datasets.SHA256))
def test_bundled_copies_equal_shared_originals(name):
    original = SHARED / name.split(".")[0] / name
    if not original.is_file():
        pytest.skip("shared/datasets is not beside this checkout")
    assert hashlib.sha256(original.read_bytes()).hexdigest() == datasets.SHA256[name]


def test_corrupted_bundled_file_is_detected(tmp_path, monkeypatch):
    # A copy of german.data with one byte changed, served in place of the packaged files.
    raw = bytearray(gzip.decompress(
        resources.files("fdp_audit.data").joinpath("files", "german.data.gz").read_bytes()))
    raw[100] ^= 1
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "german.data.gz").write_bytes(gzip.compress(bytes(raw)))
    monkeypatch.setattr(datasets.resources, "files", lambda package: tmp_path)
    with pytest.raises(BadInputError, match="german.data is corrupt"):
        datasets.load_german()
