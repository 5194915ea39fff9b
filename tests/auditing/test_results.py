"""``results.json`` (docs/files.md): schema-versioned, checksummed, written atomically; a corrupt or hand-edited
file is refused with a one-line error naming what is wrong."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from fdp_audit.auditing.results import SCHEMA_VERSION, checksum, read_results, write_results
from fdp_audit.errors import BadInputError


def minimal_results(**extra: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "kind": "audit", "created": "2024-01-01T00:00:00Z",
            "verdict": {"status": "PASS", "alpha": 0.05}, "mechanism": {"name": "fdp_sgd", "epsilon": 2.5},
            "reproducibility": {"seed": 0, "command": "fdp-audit audit x.yaml"},
            "comparisons": [{"id": "attribute/likelihood", "kind": "rate", "trials": 40, "successes": 21,
                             "ball": 0.5, "bound": 0.63}], **extra}


def test_round_trip(tmp_path: Path) -> None:
    results = minimal_results(nested={"values": [1.5, -2.0, 3], "text": "ε ≤ 1 — ok"})
    path = write_results(tmp_path / "out" / "results.json", results)
    loaded = read_results(path)
    assert loaded.pop("checksum") == checksum({**results, "warnings": []})  # writing adds its sanity warnings
    assert loaded.pop("warnings") == [] and loaded == results
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no temporary file left behind


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    results = minimal_results(limits={"epsilon": math.inf, "ratio": math.nan, "list": [1.0, -math.inf]})
    loaded = read_results(write_results(tmp_path / "results.json", results))
    assert loaded["limits"] == {"epsilon": None, "ratio": None, "list": [1.0, None]}
    json.loads((tmp_path / "results.json").read_text())  # strict JSON: no Infinity/NaN tokens


def test_write_does_not_modify_its_argument(tmp_path: Path) -> None:
    results = minimal_results()
    write_results(tmp_path / "results.json", results)
    assert "checksum" not in results


def edited(path: Path, edit) -> Path:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["comparisons"][0].update(successes=39), "checksum"),
    (lambda d: d["mechanism"].update(epsilon=25.0), "checksum"),
    (lambda d: d.pop("checksum"), "checksum"),
    (lambda d: d.update(schema_version=99), "schema_version"),
])
def test_edited_file_is_refused(tmp_path: Path, edit, field: str) -> None:
    path = edited(write_results(tmp_path / "results.json", minimal_results()), edit)
    with pytest.raises(BadInputError, match=field) as info:
        read_results(path)
    assert "\n" not in str(info.value)


def test_reformatting_keeps_the_checksum(tmp_path: Path) -> None:
    """The checksum covers the content, not the layout: re-indenting a file is not an edit."""
    path = edited(write_results(tmp_path / "results.json", minimal_results()), lambda d: None)
    assert read_results(path)["kind"] == "audit"


def test_missing_section_with_valid_checksum(tmp_path: Path) -> None:
    results = minimal_results()
    del results["mechanism"]
    with pytest.raises(BadInputError, match="results.mechanism"):
        read_results(write_results(tmp_path / "results.json", results))


@pytest.mark.parametrize("section", ["verdict", "mechanism", "reproducibility"])
def test_section_that_is_not_a_mapping(tmp_path: Path, section: str) -> None:
    with pytest.raises(BadInputError, match=f"results.{section}: must be a mapping"):
        read_results(write_results(tmp_path / "results.json", minimal_results(**{section: [1, 2]})))


@pytest.mark.parametrize(("content", "message"), [
    (b'{"schema_version": 1, "kind": "au', "not valid JSON"),
    (b"\xff\xfe not text", "not UTF-8 text"),
    (b"[1, 2, 3]", "not a JSON object"),
    (b"", "not valid JSON"),
])
def test_corrupt_file_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(BadInputError, match=message):
        read_results(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not found"):
        read_results(tmp_path / "nope.json")
    with pytest.raises(BadInputError, match="not found"):
        read_results(tmp_path)  # a directory is not a results file
