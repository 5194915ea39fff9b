"""User data loaders (docs/data.md): small generated files of the real shapes load; malformed files give one
line naming the file, line and column — never a traceback."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fdp_audit.data import formats
from fdp_audit.data.formats import load_criteo, load_csv, load_purchase
from fdp_audit.data.synthetic import purchase_like_table
from fdp_audit.data.table import MISSING
from fdp_audit.errors import BadInputError

CSV_SPEC = {"numeric": ("age", "hours"), "categorical": ("sex", "label")}


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def bad_input(call, *fragments: str) -> BadInputError:
    """Assert ``call()`` raises a one-line BadInputError containing every fragment."""
    with pytest.raises(BadInputError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


# ---------------------------------------------------------------- CSV


def test_csv_loads_spec_columns_in_order_and_ignores_others(tmp_path):
    path = write(tmp_path / "people.csv",
                 "\ufeffid,sex,age,label,hours,note\r\n"
                 '1,f,30,yes,40,"a, quoted note"\r\n'
                 "2, m ,,no,35.5,\r\n"
                 "\r\n"
                 "3,,41,yes,20,x\r\n")
    table = load_csv(path, **CSV_SPEC)
    assert table.name == "people" and table.n_rows == 3
    assert table.column_names == ["age", "hours", "sex", "label"]  # spec order; id and note ignored
    np.testing.assert_array_equal(table.columns["age"], [30.0, np.nan, 41.0])
    assert table.columns["sex"].tolist() == ["f", "m", MISSING]
    assert table.kinds == {"age": "numeric", "hours": "numeric", "sex": "categorical", "label": "categorical"}


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("age,hours,sex,label\n1,2,f\n", ["line 2", "expected 4 fields, got 3"]),
        ("age,hours,sex,label\n1,2,f,yes\nold,2,f,no\n", ["line 3", "column 'age'", "not a number"]),
        ("age,hours,sex,label\n1,nan,f,yes\n", ["line 2", "column 'hours'", "not finite"]),
        ("age,hours,sex,label\n1,-inf,f,yes\n", ["column 'hours'", "not finite"]),
        ("age,hours,sex,label\n1,1e999,f,yes\n", ["column 'hours'", "not finite"]),
        ("age,hours,sex,label\n", ["no data rows"]),
        ("age,sex,label\n1,f,yes\n", ["data.numeric", "['hours'] not in the header"]),
        ("age,hours,sex,sex,label\n1,2,f,f,yes\n", ["line 1", "['sex'] appear more than once"]),
        ('age,hours,sex,label\n1,2,"f"x,yes\n', ["line 2", "malformed CSV"]),
        ("   \n\n", ["is empty"]),
    ],
)
def test_csv_malformed_files(tmp_path, text, fragments):
    path = write(tmp_path / "bad.csv", text)
    error = bad_input(lambda: load_csv(path, **CSV_SPEC), *fragments)
    assert error.field in ("data.path", "data.numeric")
    if error.field == "data.path":
        assert "bad.csv" in str(error)


def test_csv_not_utf8_names_the_line(tmp_path):
    path = write(tmp_path / "latin1.csv", b"age,hours,sex,label\n1,2,f,yes\n3,4,\xe9,no\n")
    bad_input(lambda: load_csv(path, **CSV_SPEC), "latin1.csv line 3", "not UTF-8")


def test_csv_missing_file_directory_and_size_limit(tmp_path):
    bad_input(lambda: load_csv(tmp_path / "absent.csv", **CSV_SPEC), "data.path", "not found", "absent.csv")
    bad_input(lambda: load_csv(tmp_path, **CSV_SPEC), "not a regular file")
    path = write(tmp_path / "big.csv", "age,hours,sex,label\n" + "1,2,f,yes\n" * 100)
    bad_input(lambda: load_csv(path, **CSV_SPEC, max_bytes=500), "larger than the limit of 500 bytes")
    assert load_csv(path, **CSV_SPEC, max_bytes=path.stat().st_size).n_rows == 100


@pytest.mark.parametrize(
    ("numeric", "categorical", "field"),
    [((), (), "data.numeric"), (("a", "a"), (), "data.numeric"), (("a",), ("a", "b"), "data.categorical")],
)
def test_csv_bad_column_spec(tmp_path, numeric, categorical, field):
    path = write(tmp_path / "x.csv", "a,b\n1,2\n")
    assert bad_input(lambda: load_csv(path, numeric, categorical)).field == field


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_is_a_clear_error(tmp_path):
    path = write(tmp_path / "data.parquet", b"PAR1 not really")
    bad_input(lambda: load_csv(path, **CSV_SPEC), "data.parquet", "pyarrow")


def test_parquet_with_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"age": [30.0, None, 41.0], "hours": [1, 2, 3], "sex": ["f", None, "m"],
                             "label": ["yes", "no", "yes"], "other": [0, 0, 0]}), path)
    table = load_csv(path, **CSV_SPEC)
    np.testing.assert_array_equal(table.columns["age"], [30.0, np.nan, 41.0])
    assert table.columns["sex"].tolist() == ["f", MISSING, "m"]
    bad_input(lambda: load_csv(path, ("age", "height"), ("label",)), "data.numeric", "height")
    bad_input(lambda: load_csv(path, ("sex",), ("label",)), "column 'sex'", "not numeric")
    corrupt = write(tmp_path / "corrupt.parquet", b"PAR1 this is not parquet PAR1")
    bad_input(lambda: load_csv(corrupt, **CSV_SPEC), "corrupt.parquet", "not a readable Parquet file")


# ---------------------------------------------------------------- Purchase100


def purchase_lines(n_rows: int, seed: int = 0) -> list[str]:
    """Rows in the Purchase100 layout ``label,f1,…,f600`` from the Purchase-like generator."""
    table = purchase_like_table(n_rows, seed)
    features = np.column_stack([table.columns[c] for c in table.column_names[:600]]).astype(int)
    return [",".join([label, *map(str, row)]) for label, row in zip(table.columns["label"], features)]


def test_purchase_loads_generated_file(tmp_path):
    lines = purchase_lines(12)
    path = write(tmp_path / "dataset_purchase", "\n".join(lines) + "\n")
    table = load_purchase(path)
    assert (table.n_rows, len(table.columns)) == (12, 601)
    assert table.column_names[0] == "feature-0" and table.column_names[599] == "feature-599"
    assert table.kinds["feature-17"] == "numeric" and table.kinds["label"] == "categorical"
    first = lines[0].split(",")
    assert table.columns["label"][0] == first[0]
    assert [table.columns[f"feature-{j}"][0] for j in range(600)] == [float(v) for v in first[1:]]


def replace_field(line: str, index: int, value: str) -> str:
    fields = line.split(",")
    fields[index] = value
    return ",".join(fields)


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda line: line.rsplit(",", 1)[0], ["line 2", "expected 601 comma-separated fields", "got 600"]),
        (lambda line: replace_field(line, 5, "x"), ["line 2", "column 'feature-4'", "not a number"]),
        (lambda line: replace_field(line, 8, ""), ["line 2", "column 'feature-7'", "missing or non-finite"]),
        (lambda line: replace_field(line, 3, "inf"), ["line 2", "column 'feature-2'", "non-finite"]),
        (lambda line: replace_field(line, 0, "1.5"), ["line 2", "column 'label'", "not an integer"]),
        (lambda line: line.replace(",", "\t"), ["line 2", "got 1"]),
    ],
)
def test_purchase_malformed_lines(tmp_path, mutate, fragments):
    lines = purchase_lines(3)
    lines[1] = mutate(lines[1])
    path = write(tmp_path / "purchase.txt", "\n".join(lines))
    bad_input(lambda: load_purchase(path), "purchase.txt", *fragments)


def test_purchase_empty_and_oversized(tmp_path):
    bad_input(lambda: load_purchase(write(tmp_path / "empty", "")), "is empty")
    path = write(tmp_path / "p", "\n".join(purchase_lines(3)))
    bad_input(lambda: load_purchase(path, max_bytes=1000), "larger than the limit")


# ---------------------------------------------------------------- Criteo


def criteo_lines(n_rows: int, seed: int = 0) -> list[str]:
    """Rows in the Criteo layout: label, 13 integers, 26 hex hashes, tab-separated, ~20% fields empty."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n_rows):
        integers = [str(v) if rng.random() > 0.2 else "" for v in rng.integers(-2, 1000, 13)]
        hashes = [f"{v:08x}" if rng.random() > 0.2 else "" for v in rng.integers(0, 2**32, 26)]
        lines.append("\t".join([str(rng.integers(0, 2)), *integers, *hashes]))
    return lines


def test_criteo_loads_generated_file(tmp_path):
    lines = criteo_lines(30)
    path = write(tmp_path / "day_0.txt", "\n".join(lines) + "\n")
    table = load_criteo(path)
    assert (table.n_rows, len(table.columns)) == (30, 40)
    assert table.column_names == ["label", *formats.CRITEO_NUMERIC, *formats.CRITEO_CATEGORICAL]
    fields = [line.split("\t") for line in lines]
    for j, name in enumerate(formats.CRITEO_NUMERIC, start=1):
        expected = [float(f[j]) if f[j] else np.nan for f in fields]
        np.testing.assert_array_equal(table.columns[name], expected)
    for j, name in enumerate(formats.CRITEO_CATEGORICAL, start=14):
        assert table.columns[name].tolist() == [f[j] or MISSING for f in fields]
    assert set(table.columns["label"]) <= {"0", "1"}
    assert np.isnan(table.columns["I1"]).any() and (table.columns["C1"] == MISSING).any()


def test_criteo_record_with_every_feature_missing(tmp_path):
    path = write(tmp_path / "sparse.txt", "1" + "\t" * 39 + "\n")
    table = load_criteo(path)
    assert np.isnan(table.columns["I13"][0]) and table.columns["C26"][0] == MISSING


def replace_tab_field(line: str, index: int, value: str) -> str:
    fields = line.split("\t")
    fields[index] = value
    return "\t".join(fields)


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda line: line.split("\t", 1)[1], ["line 2", "expected 40 tab-separated fields", "got 39"]),
        (lambda line: replace_tab_field(line, 0, "2"), ["line 2", "column 'label'", "0 or 1"]),
        (lambda line: replace_tab_field(line, 3, "4.5"), ["line 2", "column 'I3'", "not an integer"]),
        (lambda line: replace_tab_field(line, 3, "9" * 400), ["line 2", "column 'I3'", "not finite"]),
        (lambda line: replace_tab_field(line, 18, "zz-top"), ["line 2", "column 'C5'", "hexadecimal"]),
        (lambda line: line.replace("\t", ","), ["line 2", "got 1"]),
    ],
)
def test_criteo_malformed_lines(tmp_path, mutate, fragments):
    lines = criteo_lines(3)
    lines[1] = mutate(lines[1])
    path = write(tmp_path / "criteo.txt", "\n".join(lines))
    bad_input(lambda: load_criteo(path), "criteo.txt", *fragments)


def test_criteo_binary_garbage(tmp_path):
    path = write(tmp_path / "garbage.bin", b"\x00\xff\xfe" * 10)
    bad_input(lambda: load_criteo(path), "garbage.bin line 1", "not UTF-8")
