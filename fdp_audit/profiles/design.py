"""The design matrix of the privacy-profile setting (docs/profiles.md; paper footnote 2).

Rows are normalised as in the paper: standardise each feature column (mean 0, variance 1), then divide
every row by the largest row norm of the data set, so that ‖x_i‖ <= 1 — the unit-ball assumption behind
the output-perturbation sensitivity 2/(nΛ). The normalisation is fitted once on D and treated as fixed,
public preprocessing: neighbouring data sets are expressed in the same coordinates.

Categorical columns are one-hot encoded (one 0/1 column per category) before standardising. Labels
are ±1: the lexicographically larger of the two classes is +1 (Adult: ``>50K``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fdp_audit.data.table import MISSING, Table
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class Design:
    """Normalised features ``X`` (n, d), labels ``y`` in {-1, +1}, the name of every feature, the
    ``source`` column of every feature, each row's index in the source table (``row_ids``), and each
    feature's *reference* value in normalised units (0 for a numeric column — its mean —, the one-hot
    code of the most frequent category for a categorical one), used by FDP replacement neighbours."""

    X: np.ndarray
    y: np.ndarray
    features: tuple[str, ...]
    source: tuple[str, ...]
    row_ids: np.ndarray
    reference: np.ndarray

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def feature_mask(self, columns: Sequence[str]) -> np.ndarray:
        """Boolean mask of the features that come from the given source columns.

        Args:
            columns: source column names (a categorical column selects all its one-hot features).

        Returns:
            A boolean mask over the d features.
        """
        return np.isin(np.array(self.source, dtype=object), list(columns))


def normalise_rows(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Standardise columns, then divide by the largest row norm, so that every row has ‖x_i‖ ≤ 1.
    A constant column (std 0) becomes all zeros rather than NaN.

    Args:
        raw: the raw feature matrix (n, d), one-hot columns included.

    Returns:
        ``(X, mean, std, max_norm)``: the normalised rows, the column means, the column standard deviations
        (1 where a column is constant) and the largest standardised row norm.

    Raises:
        BadInputError: every feature is constant.
    """
    mean = raw.mean(axis=0)
    std = raw.std(axis=0)
    safe = np.where(std > 0, std, 1.0)
    z = (raw - mean) / safe
    max_norm = float(np.linalg.norm(z, axis=1).max())
    if max_norm == 0.0:
        raise BadInputError("every feature is constant: nothing to learn", "profile.columns")
    return z / max_norm, mean, safe, max_norm


def _labels(values: np.ndarray, name: str) -> np.ndarray:
    classes = sorted(set(values.tolist()))
    if len(classes) != 2:
        raise BadInputError(f"label column {name!r} must have exactly two classes, found {len(classes)}", "data.label")
    return np.where(values == classes[1], 1.0, -1.0)


def design_from_table(table: Table, columns: Sequence[str], label: str, rows: int | None = None) -> Design:
    """Build the normalised design from ``columns`` of ``table`` and the binary ``label``.

    Rows with a missing value in a used column are dropped first (Adult's numeric columns have none, so
    all 32,561 rows of adult.data stay, as in the paper); then the first ``rows`` rows are kept.

    Args:
        table: the data set.
        columns: the feature columns (categorical ones are one-hot encoded).
        label: the binary label column; its lexicographically larger class is +1.
        rows: keep the first this many complete rows; None keeps all.

    Returns:
        The design, with each feature's reference value (its mean, or its column's most frequent category).

    Raises:
        BadInputError: no column, an unknown or duplicate column, the label used as a feature, a label without
            exactly two classes, or fewer complete rows than asked for.
    """
    columns = list(columns)
    if not columns:
        raise BadInputError("list at least one column", "profile.columns")
    for name in columns:
        if name not in table.columns:
            raise BadInputError(f"no column {name!r} in data set {table.name}", "profile.columns")
    if label not in table.columns:
        raise BadInputError(f"no label column {label!r} in data set {table.name}", "data.label")
    if label in columns:
        raise BadInputError(f"the label {label!r} cannot also be a feature", "profile.columns")
    if len(set(columns)) != len(columns):
        raise BadInputError("duplicate column", "profile.columns")
    keep = np.ones(table.n_rows, dtype=bool)
    for name in [*columns, label]:
        values = table.columns[name]
        keep &= ~np.isnan(values) if table.kinds[name] == "numeric" else values != MISSING
    row_ids = np.flatnonzero(keep)
    if rows is not None:
        if rows > row_ids.size:
            raise BadInputError(f"only {row_ids.size} complete rows, asked for {rows}", "profile.rows")
        row_ids = row_ids[:rows]
    blocks, features, source = [], [], []
    for name in columns:
        values = table.columns[name][row_ids]
        if table.kinds[name] == "numeric":
            blocks.append(values.astype(np.float64)[:, None])
            features.append(name)
            source.append(name)
        else:
            categories = sorted(set(values.tolist()))
            blocks.append((values[:, None] == np.array(categories, dtype=object)[None, :]).astype(np.float64))
            features.extend(f"{name}={c}" for c in categories)
            source.extend(name for _ in categories)
    raw = np.hstack(blocks)
    X, mean, std, max_norm = normalise_rows(raw)
    # Reference point in raw units: numeric columns at their mean, categorical columns at their mode.
    reference_raw = mean.copy()
    for name in set(source):
        idx = [j for j, s in enumerate(source) if s == name]
        if table.kinds[name] == "categorical":
            mode = idx[int(np.argmax(raw[:, idx].sum(axis=0)))]
            reference_raw[idx] = 0.0
            reference_raw[mode] = 1.0
    reference = (reference_raw - mean) / std / max_norm
    y = _labels(table.columns[label][row_ids], label)
    return Design(X, y, tuple(features), tuple(source), row_ids, reference)
