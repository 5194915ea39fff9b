"""Bundled data sets (docs/data.md): UCI Adult and German credit shipped compressed inside the package and
checked by SHA-256, plus scikit-learn's bundled ``digits`` and ``diabetes``. Nothing is downloaded."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources

import numpy as np

from fdp_audit.data.table import MISSING, ColumnKind, Table
from fdp_audit.errors import BadInputError

# SHA-256 of the decompressed files, equal to the originals in shared/datasets.
SHA256 = {
    "adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
    "german.data": "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
}

ADULT_COLUMNS: tuple[tuple[str, ColumnKind], ...] = (
    ("age", "numeric"),
    ("workclass", "categorical"),
    ("fnlwgt", "numeric"),
    ("education", "categorical"),
    ("education-num", "numeric"),
    ("marital-status", "categorical"),
    ("occupation", "categorical"),
    ("relationship", "categorical"),
    ("race", "categorical"),
    ("sex", "categorical"),
    ("capital-gain", "numeric"),
    ("capital-loss", "numeric"),
    ("hours-per-week", "numeric"),
    ("native-country", "categorical"),
    ("income", "categorical"),
)

GERMAN_COLUMNS: tuple[tuple[str, ColumnKind], ...] = (
    ("checking-status", "categorical"),
    ("duration", "numeric"),
    ("credit-history", "categorical"),
    ("purpose", "categorical"),
    ("credit-amount", "numeric"),
    ("savings", "categorical"),
    ("employment", "categorical"),
    ("installment-rate", "numeric"),
    ("personal-status-sex", "categorical"),
    ("other-debtors", "categorical"),
    ("residence-since", "numeric"),
    ("property", "categorical"),
    ("age", "numeric"),
    ("other-installment-plans", "categorical"),
    ("housing", "categorical"),
    ("existing-credits", "numeric"),
    ("job", "categorical"),
    ("num-dependents", "numeric"),
    ("telephone", "categorical"),
    ("foreign-worker", "categorical"),
    ("credit-risk", "categorical"),
)


def read_bundled(name: str) -> str:
    """Decompress a bundled file and verify its SHA-256 against the recorded original.

    Args:
        name: the file's name in :data:`SHA256` (``"adult.data"``, ``"adult.test"``, ``"german.data"``).

    Returns:
        The file's text.

    Raises:
        BadInputError: the decompressed bytes do not have the recorded SHA-256.
    """
    raw = gzip.decompress(resources.files("fdp_audit.data").joinpath("files", f"{name}.gz").read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256[name]:
        raise BadInputError(f"bundled data file {name} is corrupt (sha256 {digest[:12]}…)")
    return raw.decode("utf-8")


def parse_rows(
    name: str, rows: list[list[str]], schema: tuple[tuple[str, ColumnKind], ...], missing: str = "?"
) -> Table:
    """Build a typed table from string rows; ``missing`` marks a missing value.

    Args:
        name: the table's name.
        rows: the rows, each a list of one string per schema column.
        schema: ``(column, kind)`` pairs in the rows' field order.
        missing: the string that marks a missing value (NaN in a numeric column, :data:`MISSING` in a categorical
            one).

    Returns:
        The :class:`Table`.

    Raises:
        BadInputError: a row has a different number of fields than the schema.
    """
    if any(len(r) != len(schema) for r in rows):
        raise BadInputError(f"{name}: every row must have {len(schema)} fields")
    columns: dict[str, np.ndarray] = {}
    for j, (column, kind) in enumerate(schema):
        values = [r[j] for r in rows]
        if kind == "numeric":
            columns[column] = np.array([np.nan if v == missing else float(v) for v in values])
        else:
            columns[column] = np.array([MISSING if v == missing else v for v in values], dtype=object)
    return Table(name, columns, dict(schema))


def load_adult(split: str = "train", drop_missing: bool = True) -> Table:
    """UCI Adult: ``train`` (adult.data, 32,561 rows) or ``test`` (adult.test, 16,281 rows, whose labels
    carry a trailing period that is removed). ``?`` is missing; ``drop_missing`` removes such rows.

    Args:
        split: ``"train"`` or ``"test"``.
        drop_missing: remove the rows with a missing value.

    Returns:
        The table, 15 columns (:data:`ADULT_COLUMNS`), ``income`` the label.

    Raises:
        BadInputError: an unknown split, or a corrupt bundled file.
    """
    if split not in ("train", "test"):
        raise BadInputError(f"Adult split must be 'train' or 'test', got {split!r}")
    text = read_bundled("adult.data" if split == "train" else "adult.test")
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        fields[-1] = fields[-1].rstrip(".")
        rows.append(fields)
    table = parse_rows(f"adult-{split}", rows, ADULT_COLUMNS)
    return table.take(np.flatnonzero(~table.missing_mask())) if drop_missing else table


def load_german() -> Table:
    """Statlog German credit (1,000 rows, coded attributes; ``credit-risk`` 1 good, 2 bad).

    Returns:
        The table, 21 columns (:data:`GERMAN_COLUMNS`).
    """
    rows = [line.split() for line in read_bundled("german.data").splitlines() if line.strip()]
    return parse_rows("german", rows, GERMAN_COLUMNS)


def load_digits_table() -> Table:
    """scikit-learn's 8×8 digits as 64 numeric pixel columns ``pixel-0`` … ``pixel-63`` and a ``digit``
    label.

    Returns:
        The table, one row per image (1,797 rows), ``digit`` categorical (``"0"`` … ``"9"``).
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    columns = {f"pixel-{i}": bunch.data[:, i].astype(np.float64) for i in range(64)}
    columns["digit"] = bunch.target.astype(str).astype(object)
    kinds: dict[str, ColumnKind] = {name: "numeric" for name in columns}
    kinds["digit"] = "categorical"
    return Table("digits", columns, kinds)


def load_diabetes_table() -> Table:
    """scikit-learn's diabetes data, unscaled, with ``sex`` as a categorical column and a binary label
    ``high-progression`` (disease progression above the median).

    Returns:
        The table (442 rows): numeric feature columns, ``sex`` (``"1"``/``"2"``) and ``high-progression``
        (``"yes"``/``"no"``).
    """
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    columns: dict[str, np.ndarray] = {}
    kinds: dict[str, ColumnKind] = {}
    for j, name in enumerate(bunch.feature_names):
        if name == "sex":
            columns[name] = np.where(bunch.data[:, j] == 1, "1", "2").astype(object)
            kinds[name] = "categorical"
        else:
            columns[name] = bunch.data[:, j].astype(np.float64)
            kinds[name] = "numeric"
    columns["high-progression"] = np.where(bunch.target > np.median(bunch.target), "yes", "no").astype(object)
    kinds["high-progression"] = "categorical"
    return Table("diabetes", columns, kinds)
