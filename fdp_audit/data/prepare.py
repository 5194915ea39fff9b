"""From the ``data`` section of a config to encoded training, population and test splits and Ψ
(the first step of the data flow of docs/design.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fdp_audit.config import DataConfig
from fdp_audit.data import datasets, formats, synthetic
from fdp_audit.data.encoding import ColumnGroup, EncodedData, TableEncoder
from fdp_audit.data.features import FeatureMap, FeatureSplit, LabelOnlyMap
from fdp_audit.data.image_psi import BlurMap, DownsampleMap
from fdp_audit.data.images import IMAGE_DATASETS, ImageSet, load_images
from fdp_audit.data.table import Table, split_rows
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class PreparedData:
    """Encoded splits sharing one encoding, and Ψ (a column subset unless ``data.public_map`` says otherwise).

    ``train`` is the data set S a mechanism trains on; ``population`` is disjoint from it and stands for
    what an adversary may know about the population (Pr[v | u]); ``test`` measures utility."""

    train: EncodedData
    population: EncodedData
    test: EncodedData
    feature_split: FeatureMap
    table_name: str

    def column_split(self) -> FeatureSplit:
        """Ψ as a column subset, which the audit games need: they insert canaries whose protected columns
        vary while the public ones stay fixed."""
        if not isinstance(self.feature_split, FeatureSplit):
            raise BadInputError("the audit games and attacks need a column-subset Ψ (public_map: columns), "
                                f"not {self.feature_split.spec()['kind']!r}", "data.public_map")
        return self.feature_split

    @property
    def fingerprint(self) -> str:
        return self.train.fingerprint

    def tensors(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.as_tensor(self.train.x, device=device), torch.as_tensor(self.train.y, device=device))


def load_table(config: DataConfig, seed: int) -> tuple[Table, Table | None]:
    """The raw table named by the config, and a separate test table where the data set has one."""
    if config.dataset in ("adult",):
        return (datasets.load_adult("train", config.drop_missing),
                datasets.load_adult("test", config.drop_missing))
    if config.dataset in ("german", "digits", "diabetes"):
        return datasets.load_bundled(config.dataset), None
    if config.dataset == "synthetic":
        return synthetic.synthetic_table(config, seed), None
    if config.dataset == "csv":
        return formats.load_csv(config.path, config.numeric, config.categorical), None
    if config.dataset == "purchase":
        return formats.load_purchase(config.path), None
    if config.dataset == "criteo":
        return formats.load_criteo(config.path), None
    raise BadInputError(f"unknown data set {config.dataset!r}", "data.dataset")


IMAGE_PUBLIC_MAPS = ("blur", "downsample")


def uses_images(config: DataConfig) -> bool:
    """Whether the data set is read as images (pixels in [0, 1], not standardised, so that an image Ψ acts on
    intensities): every image data set, except ``digits`` under a tabular Ψ, which keeps its table form."""
    return config.dataset in IMAGE_DATASETS and (config.dataset != "digits" or config.public_map in IMAGE_PUBLIC_MAPS)


def prepare_data(config: DataConfig, seed: int) -> PreparedData:
    """Load, split (deterministically by ``seed``), encode, and build Ψ."""
    if uses_images(config):
        return prepare_images(config, seed)
    table, test_table = load_table(config, seed)
    label = config.label or datasets.DEFAULT_LABELS.get(config.dataset) or synthetic.SYNTHETIC_LABEL
    # a CSV data set holds only the columns its spec names: a label in the file but not in the spec is absent
    listed = "; list it in data.categorical (a CSV holds only the columns data.numeric and data.categorical name)"
    hint = listed if config.dataset == "csv" else ""
    if label not in table.columns:
        raise BadInputError(f"label column {label!r} not in data (columns: {', '.join(table.columns)}){hint}",
                            "data.label")
    for column in config.protected:
        if column not in table.columns:
            raise BadInputError(f"protected column {column!r} not in data (columns: "
                                f"{', '.join(table.columns)}){hint}", "data.protected")
        if column == label:
            raise BadInputError("the label cannot be listed as protected; set label_public: false",
                                "data.protected")
    if config.public is not None:
        for column in config.public:
            if column not in table.columns or column == label:
                raise BadInputError(f"public column {column!r} not a feature of the data", "data.public")
        features = [c for c in table.columns if c in set(config.public) | set(config.protected)]
    else:
        features = [c for c in table.columns if c != label]
    if config.drop_missing:
        # Bundled Adult drops its own '?' rows; user files (CSV, Criteo) may hold empty fields too, and
        # the encoder accepts no missing numeric value. Only the columns this run uses count.
        used = [*features, label]
        in_use = Table(table.name, {c: table.columns[c] for c in used}, {c: table.kinds[c] for c in used})
        table = table.take(np.flatnonzero(~in_use.missing_mask()))
    keep = _subsample(table.n_rows, config.max_rows, seed, "rows")
    if keep is not None:
        table = table.take(keep)
    train_rows, population_rows = split_rows(table.n_rows, config.population_fraction, seed)
    train_table, population_table = table.take(train_rows), table.take(population_rows)
    encoder = TableEncoder.fit(train_table, label, features)
    train = encoder.transform(train_table)
    population = encoder.transform(population_table)
    test = encoder.transform(test_table) if test_table is not None else population
    return PreparedData(train, population, test, public_map(config, encoder), table.name)


def _subsample(count: int, max_rows: int | None, seed: int, unit: str) -> np.ndarray | None:
    """The sorted rows ``max_rows`` keeps (drawn by ``seed``), or None to keep all ``count``; fewer than 4 rows
    left is bad input (no split into training and population sets)."""
    kept = count if max_rows is None else min(count, max_rows)
    if kept < 4:
        raise BadInputError(f"data set has only {kept} {unit}", "data")
    if kept == count:
        return None
    return np.sort(np.random.default_rng(np.random.SeedSequence([seed, 0xCAFE])).choice(count, kept, replace=False))


def _encode_images(images: ImageSet, groups: tuple[ColumnGroup, ...]) -> EncodedData:
    return EncodedData(images.flat(), images.labels, groups, images.classes, "label", images.fingerprint())


def prepare_images(config: DataConfig, seed: int) -> PreparedData:
    """An image data set as encoded splits: one numeric column ``pixel-i`` per pixel (row-major, intensity in
    [0, 1]), the class index as the label. ``max_rows`` subsamples the training images (by ``seed``); the
    population split is taken from them; the test split is the data set's own when it has one."""
    if config.label not in (None, "label"):
        raise BadInputError(f"image data sets have one label, 'label'; got {config.label!r}", "data.label")
    train = load_images(config.dataset, "train", config.path)
    test = load_images(config.dataset, "test", config.path) if "test" in IMAGE_DATASETS[config.dataset].splits else None
    keep = _subsample(train.n_images, config.max_rows, seed, "images")
    if keep is not None:
        train = train.take(keep)
    groups = tuple(ColumnGroup(f"pixel-{i}", "numeric", i, i + 1) for i in range(train.height * train.width))
    train_rows, population_rows = split_rows(train.n_images, config.population_fraction, seed)
    encoded = _encode_images(train.take(train_rows), groups)
    population = _encode_images(train.take(population_rows), groups)
    test_encoded = population if test is None else _encode_images(test, groups)
    return PreparedData(encoded, population, test_encoded, image_public_map(config, train.height, train.width, groups),
                        train.name)


def image_public_map(config: DataConfig, height: int, width: int, groups: tuple[ColumnGroup, ...]) -> FeatureMap:
    """Ψ for images: a blur or a downsampling (docs/images.md), or a tabular map over the pixel columns."""
    if config.public_map in ("columns", "label_only"):
        if config.public_map == "columns":
            return FeatureSplit(groups, tuple(config.protected), config.label_public)
        if config.protected:
            raise BadInputError("public_map 'label_only' defines the protected part itself; set data.protected: []",
                                "data.protected")
        return LabelOnlyMap()
    if config.protected:
        raise BadInputError(f"public_map {config.public_map!r} defines the protected part itself; set "
                            "data.protected: []", "data.protected")
    if config.public_map == "blur":
        return BlurMap(height, width, config.label_public, config.blur_sigma, config.blur_tolerance)
    return DownsampleMap(height, width, config.label_public, config.downsample_factor)


def public_map(config: DataConfig, encoder: TableEncoder) -> FeatureMap:
    """Ψ of docs/accounting.md for a table: the columns not listed as protected (``columns``), or Ψ(x, y) = x
    with the label protected (``label_only``, label DP). Image maps need an image data set."""
    if config.public_map == "columns":
        return FeatureSplit(encoder.groups, tuple(config.protected), config.label_public)
    if config.protected:
        raise BadInputError(f"public_map {config.public_map!r} defines the protected part itself; set "
                            "data.protected: []", "data.protected")
    if config.public_map == "label_only":
        return LabelOnlyMap()
    raise BadInputError(f"public_map {config.public_map!r} needs an image data set "
                        f"({', '.join(IMAGE_DATASETS)}), not {config.dataset!r}", "data.public_map")
