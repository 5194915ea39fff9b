"""Data tables are untrusted input (docs/data.md): random CSV and Parquet tables — NaN, inf, empty fields,
numbers at the float64 limit, text in numeric columns, missing, repeated or extra columns, ragged rows, a protected
column also listed as public — go through the data-config path (:func:`prepare_data`) and the command line. The
only outcomes are encoded data with finite inputs, or a one-line :class:`BadInputError` (exit code 2) and no
checkpoint. Property-based: a failure is a counterexample that hypothesis shrinks and prints.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdp_audit.cli import main
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NUMERIC, CATEGORICAL = ("a", "b"), ("c", "y")  # the spec; "y" is the label, "c" protected

good_numbers = st.one_of(*[st.integers(-5, 5).map(str), st.floats(-1e6, 1e6).map(repr)] * 4, st.just(""))
bad_numbers = st.one_of(
    st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", "1.7e308", "-1.7e308", " 3 ", "1,5", "0x10"]),
    st.floats().map(repr),
    st.text(max_size=6),
)
good_labels, bad_labels = st.sampled_from(["p", "q"] * 8 + [""]), st.one_of(st.just("r"), st.text(max_size=6))


def cells(good: st.SearchStrategy[str], bad: st.SearchStrategy[str], hostile: bool) -> st.SearchStrategy[str]:
    """In a hostile table one cell in ten is hostile; the other tables are clean (missing fields allowed), so
    that both outcomes, success and refusal, are exercised."""
    return st.one_of(*[good] * 9, bad) if hostile else good


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """A header (spec columns in any order, maybe one dropped, repeated or an extra added) and ragged-or-not rows."""
    header = draw(st.permutations([*NUMERIC, *CATEGORICAL]))
    change = draw(st.sampled_from(["none", "none", "none", "drop", "repeat", "extra"]))
    if change == "drop":
        header = header[1:]
    elif change == "repeat":
        header = [*header, header[0]]
    elif change == "extra":
        header = [*header, "note"]
    hostile = draw(st.booleans())
    numbers, labels = cells(good_numbers, bad_numbers, hostile), cells(good_labels, bad_labels, hostile)
    rows = []
    for _ in range(draw(st.sampled_from([0, 1, 3, 12, 24, 24]))):
        row = [draw(numbers) if name in NUMERIC else draw(labels) for name in header]
        if hostile and draw(st.integers(0, 19)) == 0:  # now and then a field too many or too few
            row = row[:-1] if draw(st.booleans()) else [*row, "1"]
        rows.append(row)
    return header, rows


def csv_text(header: list[str], rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


data_sections = st.fixed_dictionaries({
    "protected": st.sampled_from([["c"], ["c"], ["a"], ["c", "a"]]),
    "public": st.sampled_from([None, None, None, ["b"], ["b", "c"]]),  # ["b", "c"] overlaps a protected "c"
    "drop_missing": st.sampled_from([True, True, False]),
})


def data_config(path: Path, section: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": "csv", "path": str(path), "numeric": list(NUMERIC), "categorical": list(CATEGORICAL),
            "label": "y", **section}


def prepare_or_refuse(raw_config: dict[str, Any], assert_refused) -> None:
    """The data path's contract: finite float32 inputs and labels that index the classes, or a refusal."""
    try:
        config = config_from_dict(raw_config)
        data = prepare_data(config.data, config.seed)
    except BadInputError as err:
        assert_refused(err)
        return
    for split in (data.train, data.population, data.test):
        assert split.x.dtype == np.float32 and np.isfinite(split.x).all()
        assert split.n_rows > 0 and ((split.y >= 0) & (split.y < split.n_classes)).all()
    assert set(config.data.protected).isdisjoint(config.data.public or ())


@SETTINGS
@given(table=tables(), section=data_sections)
def test_csv_tables_through_the_data_config(tmp_path: Path, assert_refused, table, section) -> None:
    path = tmp_path / "data.csv"
    path.write_text(csv_text(*table), encoding="utf-8")
    prepare_or_refuse({"data": data_config(path, section)}, assert_refused)


@SETTINGS
@given(table=tables(), section=data_sections, cut=st.integers(0, 400), junk=st.binary(max_size=20))
def test_truncated_and_corrupted_csv(tmp_path: Path, assert_refused, table, section, cut: int, junk: bytes) -> None:
    path = tmp_path / "data.csv"
    text = csv_text(*table).encode()
    path.write_bytes(text[:cut] + junk + text[cut + len(junk):])
    prepare_or_refuse({"data": data_config(path, section)}, assert_refused)


parquet_values = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10),
                           st.text(max_size=4), st.booleans())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_rows=st.integers(0, 12), kinds=st.dictionaries(st.sampled_from([*NUMERIC, *CATEGORICAL, "note"]),
                                                          st.sampled_from(["float", "int", "str", "list", "mixed"]),
                                                          min_size=1), section=data_sections, data=st.data())
def test_parquet_tables_through_the_data_config(tmp_path: Path, assert_refused, n_rows: int, kinds: dict[str, str],
                                                section, data: st.DataObject) -> None:
    """Columns of any Arrow type (floats with NaN or inf, integers, strings, lists, nulls) where the spec expects
    numbers or categories, and columns the spec names left out."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    elements = {"float": st.none() | st.floats(), "int": st.none() | st.integers(-3, 3),
                "str": st.none() | st.sampled_from(["p", "q", "1.5", ""]),
                "list": st.lists(st.floats(-1, 1), max_size=2), "mixed": parquet_values.map(str)}
    columns = {name: data.draw(st.lists(elements[kind], min_size=n_rows, max_size=n_rows))
               for name, kind in kinds.items()}
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table(columns), path)
    prepare_or_refuse({"data": data_config(path, section)}, assert_refused)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), section=data_sections)
def test_cli_train_on_random_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str], small_config,
                                    assert_one_line, table, section) -> None:
    """``fdp-audit train`` on the same tables: exit 0 with a checkpoint, or exit 2, one line and no checkpoint.
    (Each success trains a model, hence few examples.)"""
    data_path, config_path, checkpoint = tmp_path / "data.csv", tmp_path / "config.yaml", tmp_path / "out" / "m.pt"
    shutil.rmtree(checkpoint.parent, ignore_errors=True)  # tmp_path is shared by the examples
    data_path.write_text(csv_text(*table), encoding="utf-8")
    raw = small_config(mechanism={"steps": 2, "public_batch_size": 4, "sample_rate": 0.2})
    raw["data"] = data_config(data_path, section)
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    capsys.readouterr()
    code = main(["train", str(config_path), "--out", str(checkpoint)])
    captured = capsys.readouterr()
    if code == 0:
        assert checkpoint.is_file()
    else:
        assert code == 2, captured.err
        assert_one_line(captured.err)
        assert not checkpoint.parent.exists()


# -- known hostile tables (regressions of bugs these tests found) ------------------------------------------------

def test_values_near_the_float64_limit_are_standardised_or_refused(tmp_path: Path, assert_refused) -> None:
    """Before the fix, a column of 1e308 overflowed the mean to inf and trained on NaN inputs with exit code 0."""
    rows = [[repr(v), str(i % 3), "uv"[i % 2], "pq"[i % 3 % 2]] for i, v in enumerate([1.7e308] * 10 + [1e307] * 10)]
    path = tmp_path / "data.csv"
    path.write_text(csv_text(["a", "b", "c", "y"], rows))
    data = prepare_data(config_from_dict({"data": data_config(path, {"protected": ["c"]})}).data, 0)
    assert np.isfinite(data.train.x).all() and np.isfinite(data.test.x).all()
    # the mean is near -1.5e308, so 1.7e308 minus the mean exceeds the float64 range
    far_apart = [[repr(v), "1", "u", "pq"[i % 2]] for i, v in enumerate([1.7e308] + [-1.7e308] * 19)]
    path.write_text(csv_text(["a", "b", "c", "y"], far_apart))
    with pytest.raises(BadInputError, match="too far apart to standardise") as caught:
        prepare_data(config_from_dict({"data": data_config(path, {"protected": ["c"]})}).data, 0)
    assert_refused(caught.value)
