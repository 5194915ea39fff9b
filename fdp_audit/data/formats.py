"""Loaders for user-supplied data (docs/data.md): CSV or Parquet with a column spec, the Purchase100 format and
the Criteo format.

Files are untrusted input. A loader reads at most ``max_bytes`` (default :data:`MAX_DATA_BYTES`), and
every problem — a missing, empty, oversized or non-UTF-8 file, a wrong number of fields, a missing
column, a value that does not parse, NaN or infinity in a numeric column — is one
:class:`~fdp_audit.errors.BadInputError` naming the field ``data.path`` and, in the message, the file,
the line and the column. Missing values are written as an empty field: NaN in a numeric column,
:data:`~fdp_audit.data.table.MISSING` in a categorical one.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fdp_audit.bounded_read import read_bounded
from fdp_audit.data.table import MISSING, ColumnKind, Table
from fdp_audit.errors import BadInputError

# Larger than the real Purchase100 file (about 240 MB) and a 40,000-row Criteo sample, small enough that
# the pure-Python parsers below finish; pass max_bytes to lift it.
MAX_DATA_BYTES = 1 << 30
FIELD = "data.path"
LABEL = "label"

PURCHASE_FEATURES = 600
CRITEO_NUMERIC = tuple(f"I{j}" for j in range(1, 14))
CRITEO_CATEGORICAL = tuple(f"C{j}" for j in range(1, 27))
_HEX = re.compile(r"[0-9a-fA-F]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: str.isdigit and \d accept other scripts


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular, non-empty file."""
    raw = read_bounded(path, max_bytes, "data file", FIELD)
    if not raw.strip():
        raise BadInputError(f"{path} is empty", FIELD)
    return raw


def _read_text(path: Path, max_bytes: int) -> str:
    raw = _read_bytes(path, max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise BadInputError(f"{path} line {line}: not UTF-8 text", FIELD) from err
    return text.removeprefix("\ufeff")  # a byte-order mark written by spreadsheet programs


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines, skipping empty ones. Only ``\\n`` (with an optional ``\\r``) ends a line, and no other
    whitespace is stripped, so trailing empty (missing) fields survive."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip(" "):  # a line of tabs is not blank: it is a Criteo record of missing fields
            yield number, line


def _number(value: str, where: str) -> float:
    """A finite float, or NaN for an empty (missing) field."""
    value = value.strip()
    if not value:
        return math.nan
    try:
        number = float(value)
    except ValueError:
        raise BadInputError(f"{where}: not a number: {value[:40]!r}", FIELD) from None
    if not math.isfinite(number):
        raise BadInputError(f"{where}: {value[:40]!r} is not finite (leave a missing field empty)", FIELD)
    return number


def _kinds(numeric: tuple[str, ...], categorical: tuple[str, ...]) -> dict[str, ColumnKind]:
    return {**dict.fromkeys(numeric, "numeric"), **dict.fromkeys(categorical, "categorical")}


def _check_spec(numeric: tuple[str, ...], categorical: tuple[str, ...]) -> None:
    if not numeric and not categorical:
        raise BadInputError("a CSV or Parquet data set needs a column spec (numeric and/or categorical)",
                            "data.numeric")
    for field_name, names in (("data.numeric", numeric), ("data.categorical", categorical)):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise BadInputError(f"duplicate column(s) {duplicates}", field_name)
    both = sorted(set(numeric) & set(categorical))
    if both:
        raise BadInputError(f"column(s) {both} listed as both numeric and categorical", "data.categorical")


def load_csv(
    path: str | Path,
    numeric: tuple[str, ...],
    categorical: tuple[str, ...],
    max_bytes: int = MAX_DATA_BYTES,
) -> Table:
    """A CSV file with a header row (or a ``.parquet`` file) as a :class:`Table` with the given numeric
    and categorical columns, in spec order.

    Columns of the file that the spec does not name are ignored, so a file may carry identifiers or
    other fields that the run does not use; every column the spec names must be present. Fields may be
    quoted (RFC 4180) and surrounding whitespace is stripped.

    Args:
        path: the file; a ``.parquet`` suffix reads it as Parquet (needs pyarrow).
        numeric: the columns read as numbers (an empty field is NaN).
        categorical: the columns read as strings (an empty field is :data:`~fdp_audit.data.table.MISSING`).
        max_bytes: the largest file accepted, in bytes.

    Returns:
        The table, named after the file's stem.

    Raises:
        BadInputError: no column spec, a column named twice or absent, a file missing, empty, too large, not
            UTF-8 or malformed, a row with the wrong number of fields, a value that is not a finite number, or no
            data row (module docstring).
    """
    path = Path(path)
    _check_spec(tuple(numeric), tuple(categorical))
    if path.suffix.lower() == ".parquet":
        return _load_parquet(path, tuple(numeric), tuple(categorical), max_bytes)
    reader = csv.reader(io.StringIO(_read_text(path, max_bytes), newline=""), strict=True)
    try:
        header = [name.strip() for name in next(reader)]
        index = _column_index(path, header, numeric, categorical)
        numbers: dict[str, list[float]] = {c: [] for c in numeric}
        labels: dict[str, list[str]] = {c: [] for c in categorical}
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            line = reader.line_num
            if len(row) != len(header):
                raise BadInputError(f"{path} line {line}: expected {len(header)} fields, got {len(row)}",
                                    FIELD)
            for column in numeric:
                numbers[column].append(_number(row[index[column]], f"{path} line {line} column {column!r}"))
            for column in categorical:
                labels[column].append(row[index[column]].strip())
    except csv.Error as err:
        raise BadInputError(f"{path} line {reader.line_num}: malformed CSV ({err})", FIELD) from err
    if not any(numbers.values()) and not any(labels.values()):
        raise BadInputError(f"{path} has a header but no data rows", FIELD)
    columns: dict[str, np.ndarray] = {c: np.array(v, dtype=np.float64) for c, v in numbers.items()}
    columns.update({c: np.array(v, dtype=object) for c, v in labels.items()})
    return Table(path.stem, columns, _kinds(numeric, categorical))


def _column_index(
    path: Path, header: list[str], numeric: tuple[str, ...], categorical: tuple[str, ...]
) -> dict[str, int]:
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise BadInputError(f"{path} line 1: column(s) {repeated} appear more than once in the header", FIELD)
    index = {name: i for i, name in enumerate(header)}
    for field_name, names in (("data.numeric", numeric), ("data.categorical", categorical)):
        absent = [name for name in names if name not in index]
        if absent:
            raise BadInputError(f"column(s) {absent} not in the header of {path}{_delimiter_hint(header)}",
                                field_name)
    return index


def _delimiter_hint(header: list[str]) -> str:
    """Why a header may lack the named columns: a file separated by something other than commas reads as one
    column whose name holds all the others."""
    if len(header) != 1:
        return ""
    for name, delimiter in (("semicolons", ";"), ("tabs", "\t"), ("'|'", "|")):
        if delimiter in header[0]:
            return (f" (its header reads as the single column {header[0][:60]!r}: the file seems separated by "
                    f"{name}; fdp-audit reads comma-separated files, convert it to commas)")
    return ""


def _load_parquet(
    path: Path, numeric: tuple[str, ...], categorical: tuple[str, ...], max_bytes: int
) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInputError(f"{path}: reading Parquet needs the optional package pyarrow; "
                            "install it or convert the file to CSV", FIELD) from None
    raw = _read_bytes(path, max_bytes)
    try:
        parquet_file = pq.ParquetFile(io.BytesIO(raw))
        header, n_rows = parquet_file.schema_arrow.names, parquet_file.metadata.num_rows
    except Exception as err:  # noqa: BLE001 - pyarrow raises many types for a corrupt file
        raise BadInputError(f"{path}: not a readable Parquet file ({type(err).__name__})", FIELD) from err
    repeated = sorted({name for name in (*numeric, *categorical) if header.count(name) > 1})
    if repeated:
        raise BadInputError(f"{path}: column(s) {repeated} appear more than once", FIELD)
    for field_name, names in (("data.numeric", numeric), ("data.categorical", categorical)):
        absent = [name for name in names if name not in header]
        if absent:
            raise BadInputError(f"column(s) {absent} not in {path}", field_name)
    if n_rows == 0:
        raise BadInputError(f"{path} has no data rows", FIELD)
    # Compression lets a small file decode to billions of cells; bound the decoded size like a CSV's text.
    cells = n_rows * (len(numeric) + len(categorical))
    if cells > max_bytes // 8:
        raise BadInputError(f"{path}: {n_rows} rows of {len(numeric) + len(categorical)} columns decode to more "
                            f"than the limit of {max_bytes} bytes", FIELD)
    try:
        parquet = parquet_file.read(columns=[*numeric, *categorical])
    except Exception as err:  # noqa: BLE001 - a corrupt column chunk
        raise BadInputError(f"{path}: not a readable Parquet file ({type(err).__name__})", FIELD) from err
    columns: dict[str, np.ndarray] = {}
    for column in numeric:
        try:
            values = np.array(parquet.column(column).to_pylist(), dtype=np.float64)  # None → NaN
        except (TypeError, ValueError):
            raise BadInputError(f"{path} column {column!r}: not numeric", FIELD) from None
        if values.shape != (n_rows,):  # a column of lists
            raise BadInputError(f"{path} column {column!r}: not numeric (values are lists)", FIELD)
        if np.isinf(values).any():
            raise BadInputError(f"{path} column {column!r}: infinite value", FIELD)
        columns[column] = values
    for column in categorical:
        values = parquet.column(column).to_pylist()
        columns[column] = np.array([MISSING if v is None else str(v).strip() for v in values], dtype=object)
    return Table(path.stem, columns, _kinds(numeric, categorical))


def load_purchase(path: str | Path, max_bytes: int = MAX_DATA_BYTES) -> Table:
    """The Purchase100 format (Shokri et al.'s ``dataset_purchase``): one record per line,
    ``label,f1,…,f600``, comma-separated, no header, the class label first (1…100 in the original) and
    600 binary features.

    Feature values must be finite numbers (the original has 0/1; a preprocessed real-valued copy is
    accepted too) and none may be missing; labels must be integers.

    Args:
        path: the file.
        max_bytes: the largest file accepted, in bytes.

    Returns:
        A table of numeric columns ``feature-0 … feature-599`` and a categorical ``label`` (the integer as a
        string).

    Raises:
        BadInputError: a file missing, empty, too large or not UTF-8, a line without 601 fields, a label that is
            not an integer, or a missing or non-finite feature.
    """
    path = Path(path)
    labels: list[str] = []
    rows: list[np.ndarray] = []
    expected = PURCHASE_FEATURES + 1
    for line_number, line in _lines(_read_text(path, max_bytes)):
        fields = line.split(",")
        where = f"{path} line {line_number}"
        if len(fields) != expected:
            raise BadInputError(f"{where}: expected {expected} comma-separated fields (label and "
                                f"{PURCHASE_FEATURES} features), got {len(fields)}", FIELD)
        label = fields[0].strip()
        if not _INTEGER.fullmatch(label):
            raise BadInputError(f"{where} column 'label': not an integer class: {label[:40]!r}", FIELD)
        try:
            # numpy parses the whole row at once; the slow per-field pass runs only to name a bad field
            values = np.array(fields[1:], dtype=np.float64)
        except ValueError:
            values = np.array([_number(v, f"{where} column 'feature-{j}'") for j, v in enumerate(fields[1:])])
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            j = int(bad[0])
            raise BadInputError(f"{where} column 'feature-{j}': missing or non-finite value "
                                f"{fields[j + 1].strip()[:40]!r}", FIELD)
        labels.append(str(int(label)))
        rows.append(values)
    features = np.stack(rows, axis=1)  # (features, rows): each column below is a contiguous row
    columns: dict[str, np.ndarray] = {f"feature-{j}": features[j] for j in range(PURCHASE_FEATURES)}
    kinds: dict[str, ColumnKind] = dict.fromkeys(columns, "numeric")
    columns[LABEL] = np.array(labels, dtype=object)
    kinds[LABEL] = "categorical"
    return Table(path.stem, columns, kinds)


def load_criteo(path: str | Path, max_bytes: int = MAX_DATA_BYTES) -> Table:
    """The Criteo display-advertising format: one record per line, tab-separated, no header:
    ``label`` (0 or 1), 13 integer features ``I1 … I13`` and 26 categorical features ``C1 … C26``
    (hashed, hexadecimal); any feature may be empty (missing).

    Args:
        path: the file.
        max_bytes: the largest file accepted, in bytes.

    Returns:
        A table with a categorical ``label`` (``"0"``/``"1"``), numeric ``I1 … I13`` (float64, NaN for missing)
        and categorical ``C1 … C26`` (the hex string, or :data:`~fdp_audit.data.table.MISSING`).

    Raises:
        BadInputError: a file missing, empty, too large or not UTF-8, a line without 40 fields, a label other than
            0 or 1, a numeric feature that is not an integer, or a categorical one that is not hexadecimal.
    """
    path = Path(path)
    names = (LABEL, *CRITEO_NUMERIC, *CRITEO_CATEGORICAL)
    n_numeric = len(CRITEO_NUMERIC)
    labels: list[str] = []
    numbers: list[list[float]] = []
    hashes: list[list[str]] = []
    for line_number, line in _lines(_read_text(path, max_bytes)):
        fields = line.split("\t")
        where = f"{path} line {line_number}"
        if len(fields) != len(names):
            raise BadInputError(f"{where}: expected {len(names)} tab-separated fields (label, {n_numeric} "
                                f"integer, {len(CRITEO_CATEGORICAL)} categorical), got {len(fields)}", FIELD)
        if fields[0].strip() not in ("0", "1"):
            raise BadInputError(f"{where} column 'label': must be 0 or 1, got {fields[0][:40]!r}", FIELD)
        row_numbers = []
        for name, value in zip(CRITEO_NUMERIC, fields[1 : 1 + n_numeric]):
            value = value.strip()
            if value and not _INTEGER.fullmatch(value):
                raise BadInputError(f"{where} column {name!r}: not an integer: {value[:40]!r}", FIELD)
            row_numbers.append(_number(value, f"{where} column {name!r}"))
        row_hashes = []
        for name, value in zip(CRITEO_CATEGORICAL, fields[1 + n_numeric :]):
            value = value.strip()
            if value and not _HEX.fullmatch(value):
                raise BadInputError(f"{where} column {name!r}: not a hexadecimal hash: {value[:40]!r}", FIELD)
            row_hashes.append(value or MISSING)
        labels.append(fields[0].strip())
        numbers.append(row_numbers)
        hashes.append(row_hashes)
    numeric = np.array(numbers, dtype=np.float64)
    categorical = np.array(hashes, dtype=object)
    columns: dict[str, np.ndarray] = {LABEL: np.array(labels, dtype=object)}
    columns.update({name: numeric[:, j].copy() for j, name in enumerate(CRITEO_NUMERIC)})
    columns.update({name: categorical[:, j].copy() for j, name in enumerate(CRITEO_CATEGORICAL)})
    kinds: dict[str, ColumnKind] = {LABEL: "categorical", **dict.fromkeys(CRITEO_NUMERIC, "numeric"),
                                    **dict.fromkeys(CRITEO_CATEGORICAL, "categorical")}
    return Table(path.stem, columns, kinds)
