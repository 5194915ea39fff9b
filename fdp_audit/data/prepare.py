"""From the ``data`` section of a config to encoded training, population and test splits and Ψ
(the first step of the data flow of docs/design.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fdp_audit.config import DataConfig
from fdp_audit.data.catalog import DATASETS, build_public_map, checked_public_map, load_images, read_as_images
from fdp_audit.data.encoding import ColumnGroup, EncodedData, TableEncoder
from fdp_audit.data.features import ColumnSplit, PublicMap
from fdp_audit.data.images import ImageSet
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
    public_map: PublicMap
    table_name: str

    def column_split(self) -> ColumnSplit:
        """Ψ as a column subset, which the audit games need: they insert canaries whose protected columns
        vary while the public ones stay fixed.

        Returns:
            :attr:`public_map` as a :class:`ColumnSplit`.

        Raises:
            BadInputError: Ψ is not a column subset (an image map, a callable, label-only).
        """
        if not isinstance(self.public_map, ColumnSplit):
            raise BadInputError("the audit games and attacks need a column-subset Ψ (public_map: columns), "
                                f"not {self.public_map.spec()['kind']!r}", "data.public_map")
        return self.public_map

    @property
    def fingerprint(self) -> str:
        return self.train.fingerprint

    def tensors(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """The training split as tensors.

        Args:
            device: where the tensors are placed.

        Returns:
            ``(x, y)``: inputs ``[n, d]`` float32 and labels ``[n]`` int64 of :attr:`train`.
        """
        return (torch.as_tensor(self.train.x, device=device), torch.as_tensor(self.train.y, device=device))


def prepare_data(config: DataConfig, seed: int) -> PreparedData:
    """Load the registered data set (:data:`fdp_audit.data.catalog.DATASETS`), split it (deterministically by
    ``seed``), encode it, and build Ψ (:data:`fdp_audit.data.catalog.PUBLIC_MAPS`).

    Args:
        config: the ``data`` section.
        seed: the configuration's seed.

    Returns:
        The encoded splits and Ψ.

    Raises:
        BadInputError: the data set or map is unknown, the data lack a configured column, or the configuration
            gives the data set or the map what it cannot take.
    """
    entry = DATASETS[config.dataset]
    if entry.needs_path and not config.path:
        raise BadInputError(f"dataset {entry.name!r} needs a path", "data.path")
    images = read_as_images(config)
    checked_public_map(config, images)  # before any data are read
    if images:
        return prepare_images(config, seed)
    assert entry.table is not None  # a data set without a table loader is read as images
    table, test_table = entry.table(config, seed)
    label = config.label or entry.label
    hint = entry.column_hint
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
    return PreparedData(train, population, test, build_public_map(config, encoder.groups), table.name)


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
    population split is taken from them; the test split is the data set's own when it has one (else the
    population split).

    Args:
        config: the ``data`` section, naming a registered image data set.
        seed: the configuration's seed.

    Returns:
        The encoded splits and the image Ψ.

    Raises:
        BadInputError: a label other than ``label``, fewer than 4 images kept, or images that cannot be read.
    """
    if config.label not in (None, "label"):
        raise BadInputError(f"image data sets have one label, 'label'; got {config.label!r}", "data.label")
    train = load_images(config.dataset, "train", config.path)
    test = load_images(config.dataset, "test", config.path) if "test" in DATASETS[config.dataset].image_splits else None
    keep = _subsample(train.n_images, config.max_rows, seed, "images")
    if keep is not None:
        train = train.take(keep)
    groups = tuple(ColumnGroup(f"pixel-{i}", "numeric", i, i + 1) for i in range(train.height * train.width))
    train_rows, population_rows = split_rows(train.n_images, config.population_fraction, seed)
    encoded = _encode_images(train.take(train_rows), groups)
    population = _encode_images(train.take(population_rows), groups)
    test_encoded = population if test is None else _encode_images(test, groups)
    return PreparedData(encoded, population, test_encoded,
                        build_public_map(config, groups, (train.height, train.width)), train.name)
