"""Encoding of a raw :class:`Table` into model inputs (docs/data.md): one-hot for categoricals, standardisation
for numerics, and a record of which encoded columns belong to which raw feature."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdp_audit.data.table import ColumnKind, Table
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class ColumnGroup:
    """The encoded columns ``[start, stop)`` of one raw feature."""

    feature: str
    kind: ColumnKind
    start: int
    stop: int
    categories: tuple[str, ...] = ()
    mean: float = 0.0
    scale: float = 1.0

    @property
    def indices(self) -> np.ndarray:
        return np.arange(self.start, self.stop)


@dataclass(frozen=True)
class EncodedData:
    """Model inputs ``x`` (float32, n × d), integer labels ``y`` and the column map."""

    x: np.ndarray
    y: np.ndarray
    groups: tuple[ColumnGroup, ...]
    classes: tuple[str, ...]
    label: str
    fingerprint: str

    @property
    def n_rows(self) -> int:
        return self.x.shape[0]

    @property
    def n_features(self) -> int:
        return self.x.shape[1]

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def group(self, feature: str) -> ColumnGroup:
        """The encoded columns of one raw feature.

        Args:
            feature: the raw feature's column name.

        Returns:
            Its :class:`ColumnGroup`.

        Raises:
            BadInputError: no encoded feature has that name.
        """
        for g in self.groups:
            if g.feature == feature:
                return g
        raise BadInputError(f"no encoded feature {feature!r}", "data")

    def take(self, rows: np.ndarray) -> EncodedData:
        """The rows ``rows`` of ``x`` and ``y``, with the same column map, classes and fingerprint.

        Args:
            rows: row indices (or a boolean mask of length :attr:`n_rows`).

        Returns:
            The subset as a new :class:`EncodedData`.
        """
        return EncodedData(self.x[rows], self.y[rows], self.groups, self.classes, self.label,
                           self.fingerprint)


@dataclass(frozen=True)
class TableEncoder:
    """Encoding fitted on one table (categories, means, scales) and applied unchanged to others, so a
    population split or a test split shares the training split's columns."""

    groups: tuple[ColumnGroup, ...]
    label: str
    classes: tuple[str, ...]

    @classmethod
    def fit(cls, table: Table, label: str, features: list[str] | None = None) -> TableEncoder:
        """Fit the encoding on ``table``: each categorical feature's sorted categories, each numeric feature's mean and
        standard deviation (1 for a constant column), and the label's sorted classes.

        Args:
            table: the table the encoding is fitted on (the training split).
            label: the label column; it must be categorical with at least two classes.
            features: the feature columns in encoded order; None takes every column but the label.

        Returns:
            The encoder.

        Raises:
            BadInputError: a named column is missing, a numeric feature has missing or non-finite values, or the label
                is numeric or has fewer than two classes.
        """
        if label not in table.columns:
            raise BadInputError(f"label column {label!r} not in data (columns: {', '.join(table.columns)})",
                                "data.label")
        names = features if features is not None else [c for c in table.columns if c != label]
        groups, start = [], 0
        for name in names:
            if name not in table.columns:
                raise BadInputError(f"column {name!r} not in data", "data")
            values = table.columns[name]
            if table.kinds[name] == "numeric":
                if not np.all(np.isfinite(values)):
                    raise BadInputError(f"column {name!r} has missing or non-finite values", "data")
                mean, scale = _mean_and_scale(values)
                groups.append(ColumnGroup(name, "numeric", start, start + 1, (), mean, scale))
                start += 1
            else:
                categories = tuple(sorted(set(values.tolist())))
                groups.append(ColumnGroup(name, "categorical", start, start + len(categories), categories))
                start += len(categories)
        labels = table.columns[label]
        if table.kinds[label] == "numeric":
            raise BadInputError(f"label column {label!r} must be categorical", "data.label")
        classes = tuple(sorted(set(labels.tolist())))
        if len(classes) < 2:
            raise BadInputError(f"label column {label!r} has fewer than two classes", "data.label")
        return cls(tuple(groups), label, classes)

    @property
    def n_features(self) -> int:
        return self.groups[-1].stop if self.groups else 0

    def transform(self, table: Table) -> EncodedData:
        """Encode ``table`` with the fitted columns: a categorical feature one-hot (a category unseen when fitting
        encodes as all zeros), a numeric one standardised as ``(x - mean) / scale``.

        Args:
            table: a table with the fitted feature and label columns.

        Returns:
            The :class:`EncodedData`: ``x`` float32 of shape ``(n_rows, n_features)``, ``y`` the class indices (int64),
            and the table's fingerprint.

        Raises:
            BadInputError: a standardised value is not finite in float32, or a label is a class unseen when fitting.
        """
        x = np.zeros((table.n_rows, self.n_features), dtype=np.float32)
        for g in self.groups:
            values = table.columns[g.feature]
            if g.kind == "numeric":
                with np.errstate(over="ignore", invalid="ignore"):
                    standardised = ((values - g.mean) / g.scale).astype(np.float32)
                if not np.all(np.isfinite(standardised)):
                    raise BadInputError(f"column {g.feature!r}: values too far apart to standardise in float32 "
                                        f"(largest magnitude {np.nanmax(np.abs(values)):.3g}); rescale the column",
                                        "data")
                x[:, g.start] = standardised
            else:
                lookup = {c: i for i, c in enumerate(g.categories)}
                codes = np.array([lookup.get(v, -1) for v in values.tolist()])
                known = codes >= 0
                x[np.flatnonzero(known), g.start + codes[known]] = 1.0
        label_lookup = {c: i for i, c in enumerate(self.classes)}
        y = np.array([label_lookup.get(v, -1) for v in table.columns[self.label].tolist()], dtype=np.int64)
        if np.any(y < 0):
            raise BadInputError(f"label column {self.label!r} has values unseen when fitting", "data.label")
        return EncodedData(x, y, self.groups, self.classes, self.label, table.fingerprint())


def _mean_and_scale(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation (1 for a constant column) computed on ``values / max|values|``, so that a
    column of values near the float64 limit (1e308) does not overflow to inf and then NaN inputs."""
    largest = float(np.max(np.abs(values))) if len(values) else 0.0
    if largest == 0.0:
        return 0.0, 1.0
    unit = values / largest
    return float(unit.mean()) * largest, float(unit.std()) * largest or 1.0
