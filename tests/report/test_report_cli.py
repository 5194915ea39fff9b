"""`fdp-audit report RESULTS [-o HTML]` (docs/files.md): writes the report atomically; bad input is one line and
exit code 2, and leaves any earlier report untouched. It reads only what ``gate`` verifies
(tests/reliability/test_results_verification.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fdp_audit.cli import EXIT_BAD_INPUT, EXIT_OK, main


@pytest.fixture
def minimal(audited_results: Path, tmp_path: Path) -> Path:
    """A real tiny audit's results.json: renders in milliseconds."""
    return Path(shutil.copy(audited_results, tmp_path / "results.json"))


def _one_line_error(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fdp-audit: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


def test_writes_report_beside_the_results_by_default(audited_results: Path, tmp_path: Path, capsys):
    source = tmp_path / "audit" / "results.json"
    source.parent.mkdir()
    shutil.copy(audited_results, source)
    assert main(["report", str(source)]) == EXIT_OK
    report = source.with_name("report.html")
    assert capsys.readouterr().out.strip() == f"wrote {report}"
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and 'data-status="PASS"' in html
    assert sorted(p.name for p in source.parent.iterdir()) == ["report.html", "results.json"]


def test_output_option_creates_missing_folders(minimal, tmp_path: Path):
    target = tmp_path / "out" / "nested" / "audit.html"
    assert main(["report", str(minimal), "-o", str(target)]) == EXIT_OK
    assert "<html" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (None, ("not found",)),
        ('{"schema_version": 1,', ("not valid JSON", "line 1")),
        ('{"schema_version": NaN}', ("non-finite number NaN",)),
        ("[1, 2]", ("not a JSON object",)),
        (b"\xff\xfe{}", ("not UTF-8",)),
        ('{"schema_version": 1, "kind": "audit"}', ("checksum mismatch",)),
    ],
)
def test_bad_results_file_is_one_line_and_exit_2(content, fragments, tmp_path: Path, capsys):
    source = tmp_path / "results.json"
    if isinstance(content, bytes):
        source.write_bytes(content)
    elif content is not None:
        source.write_text(content, encoding="utf-8")
    assert main(["report", str(source)]) == EXIT_BAD_INPUT
    _one_line_error(capsys, str(source), *fragments)
    assert not (tmp_path / "report.html").exists()


def test_output_that_is_a_folder_or_the_results_is_refused(minimal, tmp_path: Path, capsys):
    assert main(["report", str(minimal), "-o", str(tmp_path)]) == EXIT_BAD_INPUT
    _one_line_error(capsys, "--output", "is a directory")
    before = minimal.read_bytes()
    assert main(["report", str(minimal), "-o", str(minimal)]) == EXIT_BAD_INPUT
    _one_line_error(capsys, "--output", "would overwrite the results file")
    assert minimal.read_bytes() == before


def test_failures_leave_the_previous_report_whole(minimal, tmp_path: Path, capsys, monkeypatch):
    report = tmp_path / "report.html"
    report.write_text("previous report", encoding="utf-8")

    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "kind": "audit"}', encoding="utf-8")
    assert main(["report", str(broken), "-o", str(report)]) == EXIT_BAD_INPUT
    capsys.readouterr()

    def interrupted(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    # the write fails at the final rename: the temporary file is removed, the old report stays
    monkeypatch.setattr(os, "replace", interrupted)
    assert main(["report", str(minimal), "-o", str(report)]) == EXIT_BAD_INPUT
    _one_line_error(capsys, "--output", "No space left on device")

    assert report.read_text(encoding="utf-8") == "previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json", "report.html", "results.json"]
