"""The data sets and public maps Ψ a configuration can name (docs/data.md, docs/extending.md).

Two registries: :data:`DATASETS` (``data.dataset``) and :data:`PUBLIC_MAPS` (``data.public_map``). Each entry says
what it is and what it needs -- a data set its default label, whether it needs ``data.path``, whether it can be
read as a table, as images or both; a public map whether it needs an image data set and whether it defines the
protected part itself -- so :mod:`fdp_audit.data.prepare` reads the entry and names none of them. Adding a data
set is a module with its loader and one :func:`register_dataset` line below; adding a Ψ is a module with its
:class:`~fdp_audit.data.features.PublicMap` and one :func:`register_public_map` line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fdp_audit.config import DataConfig
from fdp_audit.data import datasets, formats, images, synthetic
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit, LabelOnlyPublicMap, PublicMap
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap
from fdp_audit.data.images import ImageSet
from fdp_audit.data.table import Table
from fdp_audit.errors import BadInputError
from fdp_audit.registry import Has, Registry, Rule

# (data config, seed) -> the training table and the data set's own test table (None: split from the training)
TableLoader = Callable[[DataConfig, int], tuple[Table, Table | None]]
# (data.path or None for the default location, split) -> the split's images
ImageLoader = Callable[[str | None, str], ImageSet]
# (data config, the encoded column groups, the image shape or None for a table) -> Ψ
PublicMapBuilder = Callable[[DataConfig, tuple[ColumnGroup, ...], tuple[int, int] | None], PublicMap]


@dataclass(frozen=True)
class DataSet:
    """A data set ``data.dataset`` can name.

    ``table`` reads it as a table of named columns, ``images`` as grey-scale images (pixels in [0, 1]) with the
    splits ``image_splits``; a set with both (``digits``) is read as images when the configured Ψ needs images.
    ``label`` is its label column when ``data.label`` is not given; ``needs_path`` says the user's file or folder
    is read from ``data.path``; ``bundled`` that it ships with the package or its dependencies (nothing to
    download or install); ``column_hint`` ends the error for a configured column the data lack."""

    name: str
    description: str
    label: str | None = None
    table: TableLoader | None = None
    images: ImageLoader | None = None
    image_splits: tuple[str, ...] = ("train",)
    needs_path: bool = False
    bundled: bool = False
    column_hint: str = ""


@dataclass(frozen=True)
class PublicMapKind:
    """A kind of public map Ψ ``data.public_map`` can name.

    ``build`` makes Ψ for the configuration's data; ``images_only`` says it acts on images (the data set must
    be read as images); ``defines_protected`` that it defines the protected part itself (``data.protected``
    must be empty); ``protects_label`` that the label is its protected part (``data.label_public`` must be
    false)."""

    name: str
    description: str
    build: PublicMapBuilder
    images_only: bool = False
    defines_protected: bool = True
    protects_label: bool = False


DATASETS: Registry[DataSet] = Registry("data set", "data.dataset", (
    Has("description", str),
    Has("label", str, optional=True),
    Rule(lambda entry, _: entry.table is not None or entry.images is not None, "needs a table or an image loader"),
    Rule(lambda entry, _: "train" in entry.image_splits, "its image splits must include 'train'"),
))
PUBLIC_MAPS: Registry[PublicMapKind] = Registry("public map", "data.public_map", (
    Has("description", str),
    Rule(lambda entry, _: callable(entry.build), "needs a build function"),
))


def register_dataset(entry: DataSet) -> DataSet:
    """Make a data set nameable in ``data.dataset``.

    Args:
        entry: the data set, with at least one loader.

    Returns:
        ``entry`` itself.

    Raises:
        ValueError: the name is taken or the entry is malformed.
    """
    return DATASETS.register(entry)


def register_public_map(entry: PublicMapKind) -> PublicMapKind:
    """Make a kind of Ψ nameable in ``data.public_map``.

    Args:
        entry: the kind of map and how to build it.

    Returns:
        ``entry`` itself.

    Raises:
        ValueError: the name is taken or the entry is malformed.
    """
    return PUBLIC_MAPS.register(entry)


def read_as_images(config: DataConfig) -> bool:
    """Whether the configured data set is read as images (pixels in [0, 1], not standardised, so that an image Ψ
    acts on intensities): a set that is only images, or one that is both when the configured Ψ needs images.

    Args:
        config: the ``data`` section.

    Returns:
        True to read images, False to read a table.

    Raises:
        BadInputError: the data set or the public map is not registered.
    """
    entry, kind = DATASETS[config.dataset], PUBLIC_MAPS[config.public_map]
    return entry.images is not None and (entry.table is None or kind.images_only)


def load_images(name: str, split: str = "train", path: str | None = None) -> ImageSet:
    """The split ``split`` of the registered image data set ``name``.

    Args:
        name: a registered data set with an image loader.
        split: one of its image splits.
        path: its folder (None: the default location).

    Returns:
        The images with their labels.

    Raises:
        BadInputError: the set is unknown, has no images or no such split.
    """
    entry = DATASETS[name]
    if entry.images is None:
        raise BadInputError(f"{name} is not an image data set (image data sets: "
                            f"{', '.join(n for n, e in DATASETS.items() if e.images is not None)})", "data.dataset")
    if split not in entry.image_splits:
        raise BadInputError(f"{name} has no {split!r} split (splits: {', '.join(entry.image_splits)})", "data")
    return entry.images(path, split)


def checked_public_map(config: DataConfig, images: bool) -> PublicMapKind:
    """The configured kind of Ψ, checked against what it needs before any data are read.

    Args:
        config: the ``data`` section.
        images: whether the records are images (:func:`read_as_images`).

    Returns:
        The registered kind.

    Raises:
        BadInputError: the map is unknown, or the configuration gives it what it cannot take.
    """
    kind = PUBLIC_MAPS[config.public_map]
    if kind.protects_label and config.label_public:
        raise BadInputError(f"public_map {kind.name!r} protects the label; set label_public: false",
                            "data.label_public")
    if kind.defines_protected and config.protected:
        raise BadInputError(f"public_map {kind.name!r} defines the protected part itself; set data.protected: []",
                            "data.protected")
    if kind.images_only and not images:
        image_sets = ", ".join(name for name, entry in DATASETS.items() if entry.images is not None)
        raise BadInputError(f"public_map {kind.name!r} needs an image data set ({image_sets}), not "
                            f"{config.dataset!r}", "data.public_map")
    return kind


def build_public_map(config: DataConfig, groups: tuple[ColumnGroup, ...],
                     image_shape: tuple[int, int] | None = None) -> PublicMap:
    """Ψ of docs/accounting.md and docs/images.md for the configured data.

    Args:
        config: the ``data`` section (``public_map`` and the map's parameters).
        groups: the encoded column groups of the records (one per pixel for images).
        image_shape: ``(height, width)`` when the records are images, None for a table.

    Returns:
        The map.

    Raises:
        BadInputError: the map is unknown, or the configuration gives it what it cannot take.
    """
    return checked_public_map(config, image_shape is not None).build(config, groups, image_shape)


def _adult(config: DataConfig, seed: int) -> tuple[Table, Table | None]:
    return datasets.load_adult("train", config.drop_missing), datasets.load_adult("test", config.drop_missing)


def _bundled(load: Callable[[], Table]) -> TableLoader:
    return lambda config, seed: (load(), None)


def _user_file(load: Callable[[str], Table]) -> TableLoader:
    return lambda config, seed: (load(config.path), None)


def _csv(config: DataConfig, seed: int) -> tuple[Table, Table | None]:
    return formats.load_csv(config.path, config.numeric, config.categorical), None


def _synthetic(config: DataConfig, seed: int) -> tuple[Table, Table | None]:
    return synthetic.synthetic_table(config, seed), None


def _columns(config: DataConfig, groups: tuple[ColumnGroup, ...], shape: tuple[int, int] | None) -> PublicMap:
    return ColumnSplit(groups, tuple(config.protected), config.label_public)


def _blur(config: DataConfig, groups: tuple[ColumnGroup, ...], shape: tuple[int, int] | None) -> PublicMap:
    assert shape is not None
    return BlurPublicMap(*shape, config.label_public, config.blur_sigma, config.blur_tolerance)


def _downsample(config: DataConfig, groups: tuple[ColumnGroup, ...], shape: tuple[int, int] | None) -> PublicMap:
    assert shape is not None
    return DownsamplePublicMap(*shape, config.label_public, config.downsample_factor)


register_dataset(DataSet("adult", "UCI Adult (32,561 training and 16,281 test rows)", "income", _adult,
                         bundled=True))
register_dataset(DataSet("german", "Statlog German credit (1,000 rows)", "credit-risk",
                         _bundled(datasets.load_german), bundled=True))
register_dataset(DataSet("diabetes", "scikit-learn's diabetes data (442 rows)", "high-progression",
                         _bundled(datasets.load_diabetes_table), bundled=True))
register_dataset(DataSet("digits", "scikit-learn's 8×8 digits (1,797 images, 10 classes)", "digit",
                         _bundled(datasets.load_digits_table), images.load_digits_images, bundled=True))
register_dataset(DataSet("fashion_mnist", "Fashion-MNIST 28×28 (60,000 + 10,000 images, 10 classes), IDX files",
                         images=images.load_fashion_mnist, image_splits=("train", "test")))
register_dataset(DataSet("synthetic", "a generated table with a known prior of the protected attribute",
                         synthetic.SYNTHETIC_LABEL, _synthetic))
register_dataset(DataSet("csv", "the user's CSV file, with its column spec in the config", formats.LABEL, _csv,
                         needs_path=True, column_hint="; list it in data.categorical (a CSV holds only the columns "
                         "data.numeric and data.categorical name)"))
register_dataset(DataSet("purchase", "a Purchase-100-like file: label then 600 binary features", formats.LABEL,
                         _user_file(formats.load_purchase), needs_path=True))
register_dataset(DataSet("criteo", "a Criteo-like file: label, 13 integer and 26 categorical features",
                         formats.LABEL, _user_file(formats.load_criteo), needs_path=True))

register_public_map(PublicMapKind("columns", "the columns not listed in data.protected (and the label if public)",
                                  _columns, defines_protected=False))
register_public_map(PublicMapKind("label_only", "every feature; the label is protected (label DP)",
                                  lambda config, groups, shape: LabelOnlyPublicMap(), protects_label=True))
register_public_map(PublicMapKind("blur", "the band-limited Gaussian blur of an image (docs/images.md)", _blur,
                                  images_only=True))
register_public_map(PublicMapKind("downsample", "the k×k block means of an image (docs/images.md)", _downsample,
                                  images_only=True))
