"""A small typed column table: the raw data before encoding (no pandas dependency)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

ColumnKind = Literal["numeric", "categorical"]
MISSING = ""  # a missing categorical value; numeric missing values are NaN


@dataclass(frozen=True)
class Table:
    """Named columns of equal length. Numeric columns are float64 arrays, categorical ones are arrays of
    ``str`` (dtype object) with :data:`MISSING` for a missing value."""

    name: str
    columns: dict[str, np.ndarray]
    kinds: dict[str, ColumnKind]

    def __post_init__(self) -> None:
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"table {self.name}: columns have different lengths {sorted(lengths)}")
        if set(self.columns) != set(self.kinds):
            raise ValueError(f"table {self.name}: kinds do not match columns")

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def take(self, rows: np.ndarray) -> Table:
        """The rows ``rows`` of every column, as a new table of the same name and kinds.

        Args:
            rows: row indices (or a boolean mask of length :attr:`n_rows`).

        Returns:
            The sub-table.
        """
        return Table(self.name, {k: v[rows] for k, v in self.columns.items()}, dict(self.kinds))

    def missing_mask(self) -> np.ndarray:
        """Rows with a missing value in any column.

        Returns:
            A boolean array of length :attr:`n_rows`: NaN in a numeric column or :data:`MISSING` in a categorical one.
        """
        mask = np.zeros(self.n_rows, dtype=bool)
        for name, values in self.columns.items():
            mask |= np.isnan(values) if self.kinds[name] == "numeric" else values == MISSING
        return mask

    def fingerprint(self) -> str:
        """SHA-256 over column names, kinds and values: identifies the exact data a model was trained on.

        Returns:
            The hex digest (64 characters); independent of the columns' order.
        """
        digest = hashlib.sha256()
        for name in sorted(self.columns):
            digest.update(f"{name}:{self.kinds[name]}:".encode())
            values = self.columns[name]
            if self.kinds[name] == "numeric":
                digest.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
            else:
                digest.update("\x1f".join(values.tolist()).encode())
        return digest.hexdigest()


def split_rows(n_rows: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic split of row indices into (training, population) parts; ``fraction`` goes to the
    population split, which an adversary may use to learn Pr[v | u] (docs/games.md, mode 2).

    Args:
        n_rows: the number of rows to split.
        fraction: the share of rows for the population part, in [0, 1] (rounded to whole rows).
        seed: the seed of the random permutation.

    Returns:
        ``(training, population)``: two sorted, disjoint index arrays covering ``range(n_rows)``.
    """
    order = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED])).permutation(n_rows)
    n_population = int(round(fraction * n_rows))
    return np.sort(order[n_population:]), np.sort(order[:n_population])
