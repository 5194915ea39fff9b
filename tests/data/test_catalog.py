"""The data set and public map registries (fdp_audit/data/catalog.py): names are looked up there, and what an entry
needs is checked before any data are read, as one line naming the field."""

from __future__ import annotations

import dataclasses

import pytest

from fdp_audit.cli import main
from fdp_audit.config import DataConfig
from fdp_audit.data.catalog import DATASETS, PUBLIC_MAPS, load_images, read_as_images, register_dataset
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError

BAD_DATA = {
    "unknown data set": ({"dataset": "mnist"}, "data.dataset: unknown data set 'mnist' (known: adult, german, "
                         "diabetes, digits, fashion_mnist, synthetic, csv, purchase, criteo)"),
    "unknown map": ({"public_map": "sketch"}, "data.public_map: unknown public map 'sketch' (known: columns, "
                    "label_only, blur, downsample)"),
    "file data set without path": ({"dataset": "csv"}, "data.path: dataset 'csv' needs a path"),
    "label-only map with a public label": ({"protected": (), "public_map": "label_only"},
                                           "data.label_public: public_map 'label_only' protects the label"),
    "a map defining its protected part, given one": ({"public_map": "label_only", "label_public": False},
                                                     "data.protected: public_map 'label_only' defines the protected "
                                                     "part itself"),
    "an image map on a table": ({"public_map": "blur", "protected": ()},
                                "data.public_map: public_map 'blur' needs an image data set (digits, fashion_mnist), "
                                "not 'adult'"),
}


@pytest.mark.parametrize(("fields", "expected"), BAD_DATA.values(), ids=BAD_DATA.keys())
def test_what_a_data_set_or_map_needs_is_checked_before_reading_data(fields, expected):
    with pytest.raises(BadInputError) as caught:
        prepare_data(DataConfig(**fields), 0)
    assert str(caught.value).startswith(expected)


def test_the_command_line_says_it_in_one_line_with_exit_2(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("data:\n  dataset: csv\n", encoding="utf-8")
    assert main(["train", str(config)]) == 2
    assert capsys.readouterr().err == "fdp-audit: error: data.path: dataset 'csv' needs a path\n"


def test_digits_is_a_table_under_a_column_map_and_images_under_an_image_map():
    assert not read_as_images(DataConfig(dataset="digits", protected=("pixel-0",)))
    assert read_as_images(DataConfig(dataset="digits", protected=(), public_map="blur"))
    assert read_as_images(DataConfig(dataset="fashion_mnist", protected=()))
    assert [name for name, kind in PUBLIC_MAPS.items() if kind.images_only] == ["blur", "downsample"]
    assert [name for name, entry in DATASETS.items() if entry.bundled] == ["adult", "german", "diabetes", "digits"]


def test_image_loading_refuses_unknown_sets_splits_and_tables_and_the_registry_duplicates():
    with pytest.raises(BadInputError, match="data.dataset: unknown data set 'cifar'"):
        load_images("cifar")
    with pytest.raises(BadInputError, match="german is not an image data set .image data sets: digits, fashion"):
        load_images("german")
    with pytest.raises(BadInputError, match="no 'test' split"):
        load_images("digits", "test")
    with pytest.raises(ValueError, match="already registered"):
        register_dataset(dataclasses.replace(DATASETS["digits"], description="another digits"))
