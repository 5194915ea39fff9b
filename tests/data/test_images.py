"""Image data sets (docs/images.md): the IDX reader, Fashion-MNIST from a folder, digits, the registry, and
image data through prepare_data."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from fdp_audit.config import DataConfig
from fdp_audit.data import images
from fdp_audit.data.catalog import load_images
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError


def _idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    return bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def _fashion_folder(tmp_path, n_train: int = 12, n_test: int = 5, compress: bool = True, seed: int = 0):
    """A folder holding Fashion-MNIST-shaped IDX files of random content (gzip or raw)."""
    rng = np.random.default_rng(seed)
    content = {}
    for split, n in (("train", n_train), ("test", n_test)):
        pixels = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        image_stem, label_stem = images.FASHION_MNIST_FILES[split]
        for stem, array in ((image_stem, pixels), (label_stem, labels)):
            raw = _idx_bytes(array)
            if compress:
                (tmp_path / f"{stem}.gz").write_bytes(gzip.compress(raw))
            else:
                (tmp_path / stem).write_bytes(raw)
        content[split] = (pixels, labels)
    return content


@pytest.mark.parametrize("compress", [True, False])
def test_fashion_mnist_is_read_from_idx_files_in_a_folder(tmp_path, compress):
    content = _fashion_folder(tmp_path, compress=compress)
    for split in ("train", "test"):
        loaded = load_images("fashion_mnist", split, str(tmp_path))
        pixels, labels = content[split]
        np.testing.assert_array_equal(loaded.images, pixels.astype(np.float32) / 255)
        np.testing.assert_array_equal(loaded.labels, labels)
        assert loaded.classes == images.FASHION_MNIST_CLASSES and loaded.images.dtype == np.float32


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda raw: b"\x01" + raw[1:], "bad magic number"),
    (lambda raw: raw[:-7], "file holds"),
    (lambda raw: raw[:6], "truncated IDX header"),
    (lambda raw: raw[:2] + b"\x42" + raw[3:], "bad magic number"),
    # sizes whose product wraps a 64-bit integer to 0 bytes, which an empty body would then match
    (lambda raw: b"\x00\x00\x08\x03" + struct.pack(">III", 2**31, 2**31, 4), "file holds"),
])
def test_a_malformed_idx_file_is_one_line_of_bad_input(tmp_path, mutate, message):
    path = tmp_path / "file-idx"
    path.write_bytes(mutate(_idx_bytes(np.zeros((3, 4, 4), np.uint8))))
    with pytest.raises(BadInputError, match=message) as err:
        images.read_idx(path)
    assert err.value.field == "data.path" and "\n" not in str(err.value)


def test_a_corrupt_gzip_file_is_bad_input(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(BadInputError, match="cannot read IDX file"):
        images.read_idx(path)


def test_missing_fashion_mnist_files_name_data_path(tmp_path):
    with pytest.raises(BadInputError, match=r"train-images-idx3-ubyte\(\.gz\) not found in .*dataset-fashion-mnist"
                       ) as err:
        load_images("fashion_mnist", "train", str(tmp_path))
    assert err.value.field == "data.path"


def test_labels_that_are_not_fashion_mnist_classes_are_refused(tmp_path):
    _fashion_folder(tmp_path)
    stem = images.FASHION_MNIST_FILES["train"][1]
    (tmp_path / f"{stem}.gz").write_bytes(gzip.compress(_idx_bytes(np.full(12, 11, np.uint8))))
    with pytest.raises(BadInputError, match="labels 0–9"):
        load_images("fashion_mnist", "train", str(tmp_path))


def test_digits_are_scaled_to_the_unit_interval():
    digits = load_images("digits")
    assert digits.images.shape == (1_797, 8, 8) and digits.images.min() == 0 and digits.images.max() == 1
    assert digits.classes == tuple("0123456789")


@pytest.mark.skipif(not images.FASHION_MNIST_DIR.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_the_installed_fashion_mnist_has_its_published_shape_and_balanced_classes():
    train, test = load_images("fashion_mnist", "train"), load_images("fashion_mnist", "test")
    assert train.images.shape == (60_000, 28, 28) and test.images.shape == (10_000, 28, 28)
    assert np.bincount(train.labels).tolist() == [6_000] * 10 and np.bincount(test.labels).tolist() == [1_000] * 10


def test_prepare_reads_fashion_mnist_as_unstandardised_pixels_with_its_own_test_split(tmp_path):
    _fashion_folder(tmp_path, n_train=40, n_test=7)
    config = DataConfig(dataset="fashion_mnist", path=str(tmp_path), protected=(), public_map="downsample",
                        downsample_factor=4, population_fraction=0.25, max_rows=20)
    data = prepare_data(config, seed=3)
    assert (data.train.n_rows, data.population.n_rows, data.test.n_rows) == (15, 5, 7)
    assert data.train.x.shape[1] == 784 and 0 <= data.train.x.min() and data.train.x.max() <= 1
    assert isinstance(data.public_map, DownsamplePublicMap) and data.public_map.factor == 4
    assert data.train.classes == images.FASHION_MNIST_CLASSES
    assert prepare_data(config, seed=3).fingerprint == data.fingerprint != prepare_data(config, seed=4).fingerprint


def test_digits_under_an_image_map_are_pixels_and_under_columns_a_table():
    blurred = prepare_data(DataConfig(dataset="digits", protected=(), public_map="blur", blur_tolerance=0.2), 0)
    assert isinstance(blurred.public_map, BlurPublicMap) and blurred.public_map.tolerance == 0.2
    assert blurred.train.x.min() == 0 and blurred.train.x.max() == 1  # intensities, not z-scores
    table = prepare_data(DataConfig(dataset="digits", protected=("pixel-0",)), 0)
    assert table.train.x.min() < 0  # the table form standardises each column


@pytest.mark.parametrize(("overrides", "field"), [
    ({"public_map": "downsample", "downsample_factor": 3}, "data.downsample_factor"),  # 8 is not divisible by 3
    ({"public_map": "blur", "protected": ("pixel-0",)}, "data.protected"),
    ({"public_map": "columns", "protected": ("marital-status",)}, "data.protected"),
    ({"public_map": "blur", "label": "digit"}, "data.label"),
])
def test_image_configs_refuse_what_they_cannot_mean(overrides, field):
    with pytest.raises(BadInputError) as err:
        prepare_data(DataConfig(**{"dataset": "digits", "protected": (), **overrides}), 0)
    assert err.value.field == field


def test_train_without_the_fashion_mnist_files_exits_2_with_one_line(tmp_path, capsys):
    from fdp_audit.cli import main

    config = tmp_path / "fashion.yaml"
    config.write_text(f"data: {{dataset: fashion_mnist, path: {tmp_path / 'absent'}, protected: [], "
                      "public_map: downsample}\nmodel: {kind: cnn}\nmechanism: {public_loss: public_image}\n")
    assert main(["train", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "data.path: Fashion-MNIST file train-images-idx3-ubyte(.gz) not found" in err
